"""The VLM module interface: everything model-family specific, behind one small strategy object.

``VLMBaseModule`` keeps the methods something in this project calls: the three every family must define
(``get_model_class``, ``get_vision_modules_keywords``, ``prepare_model_inputs``; names and meanings from upstream
VLM-R1's ``VLMBaseModule``) and, with defaults, ``post_model_init``, ``get_processing_class``,
``get_custom_processing_keywords``, ``get_question_template`` / ``select_reward_func`` (REC), ``load_processor``,
``get_image_resize_params``, ``answer_frame_size``, ``get_banned_token_ids``, ``build_tiny_checkpoint`` and the
shared-prompt hooks. Upstream's other methods (``get_vlm_key``, ``is_embeds_input``,
``get_custom_multimodal_keywords``, ``get_non_generate_params``, ``prepare_prompt``, ``get_eos_token_id``) live in
:class:`UpstreamModuleMixin` with defaults, so a module written for upstream instantiates unchanged.
Modules are chosen by ``config.model_type`` (``vlm_r1.modules.get_vlm_module``), never by path substrings;
``model_types`` names the values a module serves. A family is one file in this package listing its classes in
``FAMILY`` (``groundwork.registry.discover``); third-party modules register under the entry-point group
``vlm_r1.modules`` (name = the ``config.model_type`` served). ``docs/ADDING_A_MODEL.md`` walks through one.
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from groundwork.outputs import write_json
from groundwork.records import load_json_file
from groundwork.validate import ImageLimits


def load_processor_files(path: str, build: Callable[[Any, Any, str], Any]) -> Any:
    """The processor of checkpoint ``path`` with left padding: the stock ``AutoProcessor`` when torchvision is
    installed, else ``build(image_processor, tokenizer, chat_template)`` from the checkpoint's own files (our CPU
    machines have no torchvision: ``docs/REFERENCES.md#torchvision-on-cpu``,
    ``docs/REFERENCES.md#image-only-processor``). Shared by the family modules.

    Raises:
        FileNotFoundError: no ``chat_template.jinja`` in ``path`` (needed on the image-only path).
    """
    from transformers import AutoImageProcessor, AutoProcessor, AutoTokenizer
    from transformers.utils import is_torchvision_available

    if is_torchvision_available():
        processor = AutoProcessor.from_pretrained(path, padding_side="left")
    else:
        template_file = os.path.join(path, "chat_template.jinja")
        if not os.path.exists(template_file):
            raise FileNotFoundError(f"{template_file} not found: the checkpoint has no chat template")
        with open(template_file, encoding="utf-8") as f:
            chat_template = f.read()
        processor = build(AutoImageProcessor.from_pretrained(path), AutoTokenizer.from_pretrained(path), chat_template)
    processor.tokenizer.padding_side = "left"
    return processor


def restore_stock_processor_class(out_dir: str, stock_name: str) -> None:
    """Rewrite an ``ImageOnly*`` ``processor_class`` in ``out_dir/tokenizer_config.json`` to ``stock_name`` (cosmetic:
    the checkpoint then names the class transformers itself would load; ``docs/REFERENCES.md#image-only-processor``).
    Rewritten atomically (``groundwork.outputs.write_json``), so a crash never leaves a half-written config."""
    path = os.path.join(out_dir, "tokenizer_config.json")
    if not os.path.exists(path):
        return
    cfg = load_json_file(path, "tokenizer config")
    if isinstance(cfg, dict) and str(cfg.get("processor_class", "")).startswith("ImageOnly"):
        cfg["processor_class"] = stock_name
        write_json(path, cfg)


class UpstreamModuleMixin:
    """Upstream VLM-R1's ``VLMBaseModule`` methods that nothing in this project calls, with defaults, so a module
    written for upstream (``src/open-r1-multimodal/src/open_r1/vlm_modules/vlm_module.py``) still instantiates and
    its own implementations stay callable by its owner's code. Our core never relies on them (``tests/test_thin_core.py``
    checks that no core call site names them)."""

    def get_vlm_key(self) -> str:
        """Short family id (upstream: "qwen", "internvl", "glm"). Default: the module's first model type."""
        return (self.model_types or ("unknown",))[0]

    def is_embeds_input(self) -> bool:
        """True when ``generate`` returns only completion ids (upstream InternVL); False for Qwen."""
        return False

    def get_custom_multimodal_keywords(self) -> list[str]:
        """Processor outputs that the forward pass needs besides input_ids/attention_mask (TRL 1.16 forwards every
        processor output itself)."""
        return []

    def get_non_generate_params(self) -> list[str]:
        """Processor outputs that must be removed before ``generate``."""
        return []

    def prepare_prompt(self, processing_class: Any, inputs: list[dict]) -> list[str]:
        """Render each ``inputs[i]["prompt"]`` (chat messages) with the chat template; returns prompt strings."""
        return [
            processing_class.apply_chat_template(x["prompt"], tokenize=False, add_generation_prompt=True)
            for x in inputs
        ]

    def get_eos_token_id(self, processing_class: Any) -> int:
        """End-of-turn token id that ends a completion."""
        tokenizer = getattr(processing_class, "tokenizer", processing_class)
        return tokenizer.eos_token_id


class VLMBaseModule(UpstreamModuleMixin, ABC):
    """Model-family adapter. Subclasses set ``model_types`` to the ``config.model_type`` values they serve.

    Abstract (what every family must say): :meth:`get_model_class`, :meth:`get_vision_modules_keywords`,
    :meth:`prepare_model_inputs`. Everything else has a default; upstream's remaining methods live in
    :class:`UpstreamModuleMixin`.
    """

    model_types: tuple[str, ...] = ()
    model_type: str | None = None  # the config.model_type this instance serves (set by vlm_r1.modules.get_vlm_module)

    # ---- upstream VLM-R1 interface that the core calls ---------------------------------------------------------------
    @abstractmethod
    def get_model_class(self, model_id: str, model_init_kwargs: dict) -> type:
        """The transformers class to call ``from_pretrained`` on; may edit ``model_init_kwargs`` in place."""

    def post_model_init(self, model: Any, processing_class: Any) -> None:
        """Hook after the model is loaded (no-op by default). ``model`` may be None (no reference model)."""
        return None

    def get_processing_class(self) -> type:
        """The processor class the default :meth:`load_processor` calls ``from_pretrained`` on (upstream's way).
        Default: ``transformers.AutoProcessor``."""
        from transformers import AutoProcessor

        return AutoProcessor

    @abstractmethod
    def get_vision_modules_keywords(self) -> list[str]:
        """Parameter-name substrings of the vision tower (frozen by ``--freeze_vision_modules``, excluded from LoRA)."""

    def get_custom_processing_keywords(self) -> list[tuple[str, str]]:
        """(component, attribute) pairs the default :meth:`load_processor` sets from the pixel budget, e.g.
        ``("image_processor", "max_pixels")``. Default: none."""
        return []

    @abstractmethod
    def prepare_model_inputs(
        self, processing_class: Any, prompts_text: list[str], images: list, **options: Any
    ) -> tuple[Any, list[dict]]:
        """Tokenise prompts and images; returns ``(BatchFeature, additional_output)`` (upstream shape). ``options``:
        :meth:`tokenize`'s (``return_tensors``, ``padding``, ``padding_side``, ``add_special_tokens``), which
        upstream's ``prepare_model_inputs`` took by name."""

    @staticmethod
    def get_question_template(task_type: str | None) -> str:
        """Suffix template applied to the question (``{Question}`` placeholder)."""
        return "{Question}"

    @staticmethod
    def tokenize(
        processing_class: Any,
        prompts_text: list[str],
        images: list,
        return_tensors: str = "pt",
        padding: bool = True,
        padding_side: str = "left",
        add_special_tokens: bool = False,
    ) -> Any:
        """The processor call every family's :meth:`prepare_model_inputs` makes: ``prompts_text`` with ``images`` (a
        flat list in prompt order, or empty for text-only prompts), padded on ``padding_side``. Returns the
        ``BatchFeature``; the family adds its ``additional_output``."""
        kwargs = dict(
            text=prompts_text,
            return_tensors=return_tensors,
            padding=padding,
            padding_side=padding_side,
            add_special_tokens=add_special_tokens,
        )
        if images:
            kwargs["images"] = images
        return processing_class(**kwargs)

    @staticmethod
    def select_reward_func(func: str, task_type: str | None):
        """Model-specific reward for ``--is_reward_customized_from_vlm_module`` (upstream: only task ``rec``)."""
        raise ValueError(f"no model-specific reward {func!r} for task_type {task_type!r}")

    # ---- our additions (defaults, so an upstream module subclass instantiates unchanged) ---------------------------
    def load_processor(self, path: str, *, min_pixels: int | None = None, max_pixels: int | None = None) -> Any:
        """Load the processor of checkpoint ``path`` with left padding and the pixel budget applied.

        Default: upstream's way (``get_processing_class().from_pretrained(path)``, then each
        ``get_custom_processing_keywords()`` pair named ``min_pixels``/``max_pixels`` set on its component,
        grpo_trainer.py:313-318). Families override it (Qwen: works without torchvision).
        """
        processor = self.get_processing_class().from_pretrained(path)
        budget = {"min_pixels": min_pixels, "max_pixels": max_pixels}
        for component, keyword in self.get_custom_processing_keywords():
            if budget.get(keyword) is not None:
                setattr(getattr(processor, component, processor), keyword, budget[keyword])
        tokenizer = getattr(processor, "tokenizer", processor)
        tokenizer.padding_side = "left"
        return processor

    #: the images this family can take (checked by convert --family/--model, every task's loader, eval --model and
    #: ``gui-grounding prompt`` before anything runs); families override it
    IMAGE_LIMITS: ImageLimits = ImageLimits()

    def image_limits(self) -> ImageLimits:
        """The family's :class:`groundwork.validate.ImageLimits` (largest aspect ratio, smallest side)."""
        limits = type(self).IMAGE_LIMITS
        return limits if limits.family else replace(limits, family=self.model_type or type(self).__name__)

    def processor_budget(self, processing_class: Any) -> dict:
        """The pixel-budget values ``processing_class`` holds, as a :func:`groundwork.pixel_budget.resolve` layer:
        ``{factor, min_pixels, max_pixels, max_tiles}`` (``None`` where the family has no such value). Default: the
        smart_resize parameters (:meth:`get_image_resize_params`), or none for a family without a smart_resize
        frame."""
        try:
            factor, min_px, max_px = self.get_image_resize_params(processing_class)
        except ValueError:
            return {"factor": None, "min_pixels": None, "max_pixels": None, "max_tiles": None}
        return {"factor": factor, "min_pixels": min_px, "max_pixels": max_px, "max_tiles": None}

    def apply_pixel_budget(self, processing_class: Any, budget: Any) -> None:
        """Write a :class:`groundwork.pixel_budget.PixelBudget` into ``processing_class`` (once per run). Default:
        upstream's way, each ``get_custom_processing_keywords()`` pair named ``min_pixels``/``max_pixels`` set on its
        component (grpo_trainer.py:313-318). Families override it (Qwen: the image processor's ``size``; InternVL:
        ``max_patches``)."""
        values = {"min_pixels": budget.min_pixels, "max_pixels": budget.max_pixels}
        for component, keyword in self.get_custom_processing_keywords():
            if values.get(keyword) is not None:
                setattr(getattr(processing_class, component, processing_class), keyword, values[keyword])

    def get_image_resize_params(self, processing_class: Any) -> tuple[int, int, int]:
        """``(factor, min_pixels, max_pixels)`` the processor's ``smart_resize`` uses (factor in pixels).

        Default: ``patch_size * merge_size`` of the image processor, and its ``min_pixels``/``max_pixels`` (or
        ``size["shortest_edge"]``/``size["longest_edge"]``).

        Raises:
            ValueError: the processor has no such settings (the family must override this method).
        """
        ip = getattr(processing_class, "image_processor", None)
        size = getattr(ip, "size", None) or {}
        min_px = getattr(ip, "min_pixels", None) or size.get("shortest_edge")
        max_px = getattr(ip, "max_pixels", None) or size.get("longest_edge")
        if ip is None or None in (getattr(ip, "patch_size", None), getattr(ip, "merge_size", None), min_px, max_px):
            raise ValueError(
                f"{type(self).__name__}: the processor has no smart_resize settings (patch_size, "
                "merge_size, min/max pixels); override get_image_resize_params"
            )
        return int(ip.patch_size) * int(ip.merge_size), int(min_px), int(max_px)

    def build_tiny_checkpoint(
        self, out_dir: str, *, seed: int = 0, min_pixels: int = 3136, max_pixels: int = 200_704, size: str = "tiny"
    ) -> str:
        """Write a randomly initialised tiny checkpoint of this family's real architecture to ``out_dir`` (offline;
        CPU tests and demos: ``gui-grounding make-tiny-model --arch MODEL_TYPE``). ``size``: a key of
        ``vlm_r1.tiny_parts.TINY_SIZES``. Default: not available for this family.

        Raises:
            NotImplementedError: the family has no tiny builder.
        """
        raise NotImplementedError(f"{type(self).__name__} cannot build a tiny checkpoint")

    # ---- shared-prompt GRPO hooks (vlm_r1.shared_prompt); a family opts in by overriding both ---------------------
    def shared_prompt_positions_fn(self, model: Any):
        """The positions hook of shared-prompt GRPO for ``model`` (possibly wrapped by DDP/DeepSpeed/PEFT), or None
        when this family has none (then ``--shared_prompt true`` runs naive and says why).

        The hook maps one unpadded prompt ``(prompt_ids (P,), mm_token_type_ids (P,) or None, image_grid_thw (k, 3) or
        None)`` to its ``(R, P)`` position ids exactly as the model's own forward computes them for that prompt
        (R = 3 for M-RoPE); completion tokens continue from the last one on every axis (:mod:`vlm_r1.shared_prompt`).
        """
        return None

    def shared_prompt_prefill(self, model: Any, generate_inputs: dict, num_generations: int) -> dict:
        """Prefill each unique prompt once for HF ``generate`` and return the kwargs that continue it for
        ``num_generations`` rollouts per prompt (the cache expanded G times). Default: not supported.

        Raises:
            NotImplementedError: the family has no shared-prompt prefill (generation then runs naive).
        """
        raise NotImplementedError(f"{type(self).__name__} has no shared-prompt prefill")

    # ---- frozen vision tower (vlm_r1.vision_cache) -------------------------------------------------------------------
    def vision_tower(self, model: Any) -> Any:
        """The vision tower of ``model`` (possibly wrapped by DDP/DeepSpeed/PEFT) as a
        :class:`vlm_r1.vision_cache.GridTower`, so a frozen tower runs without autograd and encodes each image once per
        generation batch; or None (the default: the tower then runs as transformers runs it)."""
        return None

    def answer_frame_size(self, budget: Any, width: int, height: int) -> tuple[int, int]:
        """``(W', H')``: the frame this family answers coordinates in for an original ``width x height`` image, as a
        per-axis scaling of it (the REC task's ``resized_size``; its IoU reward maps answers back with it). Default:
        the run's smart_resize frame, ``budget.size_sent`` of the :class:`groundwork.pixel_budget.PixelBudget` (Qwen2/2.5-VL
        answer in resized pixels); families answering on a 0-1000 grid return ``(1000, 1000)``.

        Raises:
            ValueError: smart_resize rejects the aspect ratio.
        """
        return budget.size_sent(int(width), int(height))

    def get_image_token_ids(self, processing_class: Any) -> list[int]:
        """The processor's image token, what GTA1 bans from generation (``bad_words_ids=[[image_token_id]]``,
        Yan98/GTA1 ``src/trainer/grpo_trainer.py:520`` at 81f0c4c): what ``--ban_vision_tokens true`` bans in
        training (:func:`vlm_r1.trainer.banned_generation_kwargs`); none when the processor names no image token."""
        return VLMBaseModule.get_banned_token_ids(self, processing_class)

    def get_banned_token_ids(self, processing_class: Any) -> list[int]:
        """Token ids evaluation never lets a model emit (the eval backends' ``bad_words_ids``; families override it
        with all their vision special tokens). Default: the processor's image token, as GTA1 bans
        (``bad_words_ids=[[image_token_id]]``); none when the processor names no image token."""
        tokenizer = getattr(processing_class, "tokenizer", processing_class)
        token_id = getattr(processing_class, "image_token_id", None)
        token = getattr(processing_class, "image_token", None)
        if token_id is None and token is not None:
            token_id = tokenizer.convert_tokens_to_ids(token)
        return [] if token_id is None else [int(token_id)]
