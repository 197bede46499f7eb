"""Qwen2-VL and Qwen2.5-VL (also UI-TARS-1.5, GTA1, OpenCUA: same architecture) adapter.

Processor loading works in two worlds:
  * clusters with torchvision: the stock ``AutoProcessor`` (image + video processor);
  * CPU machines without torchvision (transformers 5.x needs it for the *video* processor): an image-only subclass of
    the stock processor, which saves itself under the stock class name so the checkpoint stays loadable by
    ``AutoProcessor`` elsewhere (``docs/REFERENCES.md#image-only-processor``).
"""

from __future__ import annotations

from typing import Any

from groundwork.validate import ImageLimits
from vlm_r1 import rewards
from vlm_r1.modules.base import VLMBaseModule, load_processor_files, restore_stock_processor_class

VISION_SPECIAL_TOKENS = ("<|image_pad|>", "<|video_pad|>", "<|vision_start|>", "<|vision_end|>")

# Upstream VLM-R1's question templates for Qwen (prompt format kept so old checkpoints and evals stay comparable).
_THINK_ANSWER_TEMPLATE = (
    "{Question} First output the thinking process in <think> </think> tags and then output the final answer in "
    "<answer> </answer> tags."
)
_REC_TEMPLATE = _THINK_ANSWER_TEMPLATE + " Output the final answer in JSON format."
# upstream's `ic` and `odLength` question templates, verbatim (the prompt a run trains on; om-ai-lab/VLM-R1
# src/open-r1-multimodal/src/open_r1/vlm_modules/qwen_module.py:74-83 at 90052f4)
_IC_TEMPLATE = (
    "{Question} First thinks about the reasoning process in the mind and then provides the user with the answer. The "
    "reasoning process and answer are enclosed within <think> </think> and <answer> </answer> tags, respectively, "
    "i.e., <think> reasoning process here </think><answer> json format answer here </answer>"
)
_OD_LENGTH_TEMPLATE = (
    "First thinks about the reasoning process in the mind and then provides the user with the answer. The reasoning "
    "process and answer are enclosed within <think> </think> and <answer> </answer> tags, respectively, i.e., "
    "<think> reasoning process here </think><answer> answer here </answer>\n{Question}"
)
# select_reward_func for task_type "rec": CLI name -> the registered reward (upstream's iou_reward / format_reward_rec,
# vlm_r1.upstream.rewards, registered as rec_iou / rec_format)
_REC_REWARDS = {"accuracy": "rec_iou", "format": "rec_format"}


def _image_only_processor_class(stock_cls: type) -> type:
    """Subclass of a Qwen processor without the video processor (so no torchvision is needed)."""

    class ImageOnlyProcessor(stock_cls):
        # ProcessorMixin derives its sub-processor list from the __init__ signature: no video_processor here.
        def __init__(self, image_processor=None, tokenizer=None, chat_template=None, **kwargs):
            super().__init__(image_processor, tokenizer, None, chat_template=chat_template, **kwargs)

        def to_dict(self):
            # Save under the stock name so AutoProcessor loads the checkpoint where torchvision exists.
            d = super().to_dict()
            d["processor_class"] = stock_cls.__name__
            return d

    ImageOnlyProcessor.__name__ = ImageOnlyProcessor.__qualname__ = f"ImageOnly{stock_cls.__name__}"
    return ImageOnlyProcessor


class Qwen2VLModule(VLMBaseModule):
    """Adapter for ``model_type`` ``qwen2_vl`` and ``qwen2_5_vl``."""

    model_types = ("qwen2_vl", "qwen2_5_vl")
    # transformers' smart_resize refuses a long/short side ratio over 200 ("absolute aspect ratio must be smaller
    # than 200", transformers/models/qwen2_vl/image_processing_qwen2_vl.py smart_resize); a side under one 14-px
    # vision patch (Qwen2/2.5-VL vision_config.patch_size) holds no patch of the screenshot
    IMAGE_LIMITS = ImageLimits(200.0, 14, source="smart_resize ratio limit 200; vision patch 14 px")

    @staticmethod
    def _classes(model_type: str) -> tuple[type, type]:
        """(model class, stock processor class) for a model_type."""
        if model_type == "qwen2_5_vl":
            from transformers import Qwen2_5_VLForConditionalGeneration, Qwen2_5_VLProcessor

            return Qwen2_5_VLForConditionalGeneration, Qwen2_5_VLProcessor
        if model_type == "qwen2_vl":
            from transformers import Qwen2VLForConditionalGeneration, Qwen2VLProcessor

            return Qwen2VLForConditionalGeneration, Qwen2VLProcessor
        raise ValueError(f"Qwen2VLModule does not serve model_type {model_type!r} (serves {Qwen2VLModule.model_types})")

    def __init__(self, model_type: str = "qwen2_5_vl"):
        self._classes(model_type)  # validates
        self.model_type = model_type

    # ---- upstream interface ----------------------------------------------------------------------------------------
    def get_vlm_key(self) -> str:
        return "qwen"

    def post_model_init(self, model: Any, processing_class: Any) -> None:
        """One vision attention call per layer instead of one per window (Qwen2.5-VL) or image (Qwen2-VL, Qwen3-VL):
        :func:`vlm_r1.vision_attention.enable_vision_varlen` on the ``vision_config`` sub-config, whose attention
        packs the segments by ``cu_seqlens`` in these families (transformers 5.23 ``modeling_qwen2_5_vl.py:291-329``,
        ``modeling_qwen2_vl.py:381-419``, ``modeling_qwen3_vl.py:277-315``). Logs the backend that runs. ``model``
        None (no reference model) does nothing."""
        if model is None or isinstance(model, str):
            return
        from vlm_r1.vision_attention import enable_vision_varlen  # torch: deferred, the CLI imports this module

        enable_vision_varlen(model, sub_config="vision_config", family=self.model_type)

    def get_model_class(self, model_id: str, model_init_kwargs: dict) -> type:
        return self._classes(self.model_type)[0]

    def get_processing_class(self) -> type:
        return self._classes(self.model_type)[1]

    def get_vision_modules_keywords(self) -> list[str]:
        return ["visual"]

    def get_custom_multimodal_keywords(self) -> list[str]:
        return ["pixel_values", "image_grid_thw", "mm_token_type_ids"]

    def get_custom_processing_keywords(self) -> list[tuple[str, str]]:
        return [("image_processor", "max_pixels"), ("image_processor", "min_pixels")]

    def prepare_model_inputs(
        self, processing_class: Any, prompts_text: list[str], images: list, **options
    ) -> tuple[Any, list[dict]]:
        """Tokenise ``prompts_text`` with ``images`` (a flat list, in prompt order, or empty for text-only).

        Returns ``(batch, additional_output)`` where ``additional_output[i] = {"image_grid_thw": row}`` per image
        (upstream shape; rows are (t, h, w) patch counts).
        """
        batch = self.tokenize(processing_class, prompts_text, images, **options)
        grid = batch.get("image_grid_thw")
        additional_output = [{"image_grid_thw": row} for row in grid] if grid is not None else []
        return batch, additional_output

    @staticmethod
    def get_question_template(task_type: str | None) -> str:
        """Upstream's Qwen templates per task type (qwen_module.py:70-85 at 90052f4): ``rec``, ``ic``,
        ``odLength``, and the think/answer template for every other type."""
        return {"rec": _REC_TEMPLATE, "ic": _IC_TEMPLATE, "odLength": _OD_LENGTH_TEMPLATE}.get(
            task_type, _THINK_ANSWER_TEMPLATE
        )

    # upstream's model-specific REC rewards, as class attributes (vlm_r1.upstream.rewards holds the one implementation,
    # registered as rec_iou / rec_format)
    iou_reward = rewards.registered_reward("rec_iou")
    format_reward_rec = rewards.registered_reward("rec_format")

    @staticmethod
    def select_reward_func(func: str, task_type: str | None):
        """``--is_reward_customized_from_vlm_module``: ``accuracy`` -> ``iou_reward``, ``format`` ->
        ``format_reward_rec`` for ``task_type == "rec"`` (upstream ``Qwen2VLModule.select_reward_func``).

        The IoU reward maps the answer from the resized frame back to original pixels, which is right for Qwen2.5-VL
        (absolute resized-pixel answers); upstream applies the same to Qwen2-VL, and so do we.

        Raises:
            ValueError: any other task type or reward name (as upstream).
        """
        if task_type == "rec" and func in _REC_REWARDS:
            return rewards.REWARDS.get_callable(_REC_REWARDS[func])
        raise ValueError(
            f"--is_reward_customized_from_vlm_module: no Qwen-specific reward {func!r} for task_type {task_type!r} "
            f"(only task_type 'rec' with {sorted(_REC_REWARDS)}); drop the flag to use the reward registry"
        )

    # ---- our additions ---------------------------------------------------------------------------------------------
    def build_processor(self, image_processor: Any, tokenizer: Any, chat_template: str | None) -> Any:
        """Assemble a processor from parts; image-only when torchvision is unavailable."""
        from transformers.utils import is_torchvision_available

        stock = self._classes(self.model_type)[1]
        if is_torchvision_available():
            from transformers.models.qwen2_vl.video_processing_qwen2_vl import Qwen2VLVideoProcessor

            return stock(image_processor, tokenizer, Qwen2VLVideoProcessor(), chat_template=chat_template)
        return _image_only_processor_class(stock)(image_processor, tokenizer, chat_template=chat_template)

    def load_processor(self, path: str, *, min_pixels: int | None = None, max_pixels: int | None = None) -> Any:
        """Load the processor of checkpoint ``path`` with left padding; optionally override the pixel budget.

        Raises:
            FileNotFoundError: no chat template in ``path`` (needed on the image-only path).
        """

        processor = load_processor_files(path, self.build_processor)
        if min_pixels is not None or max_pixels is not None:
            self.set_pixel_budget(processor, min_pixels=min_pixels, max_pixels=max_pixels)
        return processor

    @staticmethod
    def set_pixel_budget(processor: Any, *, min_pixels: int | None = None, max_pixels: int | None = None) -> None:
        """Set the smart_resize pixel bounds of ``processor`` in place (pixels of the resized image)."""
        ip = processor.image_processor
        size = {"shortest_edge": ip.size["shortest_edge"], "longest_edge": ip.size["longest_edge"]}
        if min_pixels is not None:
            size["shortest_edge"] = int(min_pixels)
        if max_pixels is not None:
            size["longest_edge"] = int(max_pixels)
        if size["shortest_edge"] > size["longest_edge"]:
            raise ValueError(f"min_pixels {size['shortest_edge']} > max_pixels {size['longest_edge']}")
        ip.size = type(ip.size)(**size) if not isinstance(ip.size, dict) else size

    def apply_pixel_budget(self, processing_class: Any, budget: Any) -> None:
        """The budget's smart_resize bounds into the image processor's ``size`` (:meth:`set_pixel_budget`).

        Raises:
            ValueError: the budget's factor differs from the processor's (patch x merge of the checkpoint).
        """
        ip = processing_class.image_processor
        if budget.factor is not None and budget.factor != ip.patch_size * ip.merge_size:
            raise ValueError(
                f"pixel budget factor {budget.factor} does not match the checkpoint's patch_size x "
                f"merge_size = {ip.patch_size * ip.merge_size}"
            )
        self.set_pixel_budget(processing_class, min_pixels=budget.min_pixels, max_pixels=budget.max_pixels)

    def get_image_resize_params(self, processing_class: Any) -> tuple[int, int, int]:
        ip = processing_class.image_processor
        return ip.patch_size * ip.merge_size, int(ip.size["shortest_edge"]), int(ip.size["longest_edge"])

    def get_banned_token_ids(self, processing_class: Any) -> list[int]:
        tokenizer = getattr(processing_class, "tokenizer", processing_class)
        ids = []
        for tok in VISION_SPECIAL_TOKENS:
            tid = tokenizer.convert_tokens_to_ids(tok)
            if tid is None or tid == tokenizer.unk_token_id:
                raise ValueError(f"tokenizer has no {tok} token; is this a Qwen-VL checkpoint?")
            ids.append(tid)
        return ids

    # ---- shared-prompt GRPO hooks (vlm_r1.shared_prompt) ----------------------------------------------------------
    @staticmethod
    def _rope_owner(model: Any) -> Any:
        """The inner ``Qwen2(_5)_VLModel`` (it owns ``get_rope_index`` and ``rope_deltas``) of a possibly wrapped model
        (DDP/DeepSpeed ``.module``, PEFT ``base_model``): the first submodule with a callable ``get_rope_index``."""
        for module in model.modules():
            if callable(getattr(module, "get_rope_index", None)) and hasattr(module, "rope_deltas"):
                return module
        raise ValueError(f"{type(model).__name__} has no Qwen-VL get_rope_index (is this a Qwen-VL model?)")

    def vision_tower(self, model: Any) -> Any:
        """The tower the model's ``get_image_features`` calls, ``self.visual(pixel_values, grid_thw=...)``
        (transformers 5.23 ``modeling_qwen2_5_vl.py:1070``, ``modeling_qwen2_vl.py:1023``,
        ``modeling_qwen3_vl.py:1028``): pixel rows and ``image_grid_thw`` in; per image ``t*h*w`` patch rows
        (``last_hidden_state``) and ``t*h*w / spatial_merge_size**2`` merged-token rows (``pooler_output``, Qwen3-VL's
        ``deepstack_features``) out. Qwen3-VL inherits it (same ``visual`` attribute and contract)."""
        from vlm_r1.vision_cache import GridTower

        visual = self._rope_owner(model).visual
        return GridTower(visual, int(visual.spatial_merge_size) ** 2)

    def shared_prompt_positions_fn(self, model: Any):
        """M-RoPE positions of one prompt: ``get_rope_index`` of the model itself (transformers 5.23
        ``modeling_qwen2_5_vl.py:928``, ``Qwen2_5_VLModel.get_rope_index``; same for Qwen2-VL), on the unpadded
        prompt with its images' grids; a prompt without images gets ``arange`` on the three axes (the model's own
        text-only positions). Returns a function ``(prompt_ids (P,), mm_token_type_ids (P,) | None, image_grid_thw
        (k, 3) | None) -> (3, P)``. Never reads or writes the stored ``rope_deltas``."""
        import torch

        owner = self._rope_owner(model)

        def positions(prompt_ids, mm_token_type_ids, image_grid_thw):
            if image_grid_thw is None or mm_token_type_ids is None or not bool((mm_token_type_ids != 0).any()):
                return torch.arange(prompt_ids.numel(), device=prompt_ids.device)[None].expand(3, -1)
            pos, _ = owner.get_rope_index(
                prompt_ids[None], mm_token_type_ids=mm_token_type_ids[None], image_grid_thw=image_grid_thw
            )
            return pos[:, 0]

        return positions

    def shared_prompt_prefill(self, model: Any, generate_inputs: dict, num_generations: int) -> dict:
        """Prefill the unique prompts once and return ``generate`` kwargs for ``num_generations`` rollouts each.

        ``generate_inputs``: the unique prompts as HF ``generate`` takes them (``input_ids``/``attention_mask`` (U, P)
        left-padded, ``pixel_values``, ``image_grid_thw``, ``mm_token_type_ids``). Runs the model on all but the last
        prompt token (filling a ``DynamicCache``; ``rope_deltas`` set by the model), then repeats the cache and
        ``rope_deltas`` G times (``repeat_interleave``: rollouts of a prompt are consecutive, as TRL lays them out).
        The returned kwargs hold the full (U*G, P) prompt ids and mask and the cache, and no pixels: ``generate``
        only runs the last prompt token and the completion, with the positions continued from ``rope_deltas``
        (``_prepare_position_ids_for_generation``, transformers 5.23 ``modeling_qwen2_5_vl.py:1387-1401``).
        Logits match naive generation within float rounding (``tests/test_shared_prompt.py``).
        """
        from transformers import DynamicCache

        owner = self._rope_owner(model)
        G = int(num_generations)
        ids, mask = generate_inputs["input_ids"], generate_inputs["attention_mask"]
        cache = DynamicCache(config=model.config)
        owner.rope_deltas = None
        prefill = {
            "input_ids": ids[:, :-1],
            "attention_mask": mask[:, :-1],
            "past_key_values": cache,
            "use_cache": True,
            "logits_to_keep": 1,
        }
        for key in ("pixel_values", "image_grid_thw"):
            if generate_inputs.get(key) is not None:
                prefill[key] = generate_inputs[key]
        if generate_inputs.get("mm_token_type_ids") is not None:
            prefill["mm_token_type_ids"] = generate_inputs["mm_token_type_ids"][:, :-1]
        model(**prefill)
        if cache.get_seq_length() != ids.size(1) - 1:
            # transformers drops the cache under gradient checkpointing in train mode (it only warns); generating on
            # an empty cache without pixels would silently be wrong
            raise RuntimeError(
                f"shared-prompt prefill: the cache holds {cache.get_seq_length()} tokens, expected "
                f"{ids.size(1) - 1} (gradient checkpointing active during generation?)"
            )
        cache.batch_repeat_interleave(G)
        if owner.rope_deltas is not None:
            owner.rope_deltas = owner.rope_deltas.repeat_interleave(G, dim=0)
        out = {
            "input_ids": ids.repeat_interleave(G, dim=0),
            "attention_mask": mask.repeat_interleave(G, dim=0),
            "past_key_values": cache,
        }
        return out

    def tidy_saved_processor(self, out_dir: str) -> None:
        """Rewrite ``processor_class`` in tokenizer_config.json to the stock name (cosmetic;
        ``docs/REFERENCES.md#image-only-processor``)."""

        restore_stock_processor_class(out_dir, self._classes(self.model_type)[1].__name__)


#: the module classes this family file registers (groundwork.registry.discover)
FAMILY = (Qwen2VLModule,)
