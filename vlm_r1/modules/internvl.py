"""InternVL adapter: transformers' native ``InternVLForConditionalGeneration`` (``config.model_type == "internvl"``,
the ``OpenGVLab/InternVL3-*-hf`` checkpoints: InternViT vision tower + MLP projector + Qwen2 language model).

Upstream VLM-R1 trains InternVL (2.5) as its second family with the remote-code ``InternVLChatModel``
(``src/open-r1-multimodal/src/open_r1/vlm_modules/internvl_module.py``); we use the transformers-native port instead,
so no ``trust_remote_code``, no ``image_flags`` and HF ``generate`` returns prompt + completion like Qwen.

Image inputs (dynamic tiling, transformers 5.23 ``models/got_ocr2/image_processing_pil_got_ocr2.py``):
  * every image is resized to a grid of ``cols x rows`` tiles of ``TILE_SIZE`` x ``TILE_SIZE`` = 448 x 448 pixels,
    the grid with ``min_patches <= cols * rows <= max_patches`` whose aspect ratio is closest to the image's
    (ties: the larger grid while the image area exceeds half the grid's pixel area; ``get_optimal_tiled_canvas``);
  * a grid of more than one tile gets one more tile, the whole image resized to 448 x 448 (the thumbnail);
  * ``pixel_values`` is tile-indexed: ``(total_tiles, 3, 448, 448)`` over all images of the batch, ImageNet-normalised;
  * each tile is ``image_seq_length`` = (448 / patch_size)^2 * downsample_ratio^2 = 256 ``<IMG_CONTEXT>`` tokens
    (patch 14, ratio 0.5), and an image is ``<img>`` + 256 * tiles ``<IMG_CONTEXT>`` + ``</img>``
    (``processing_internvl.py:141``, ``InternVLProcessor.replace_image_token``).

``--max_anyres_num`` (upstream: the ``max_num`` of its ``dynamic_preprocess``, default 12, ``grpo_jsonl.py:97``; the
InternVL script uses 6, om-ai-lab/VLM-R1 ``run_scripts/run_grpo_rec_internvl.sh:39``) is the image processor's
``max_patches`` here: :meth:`InternVLModule.set_max_tiles` / ``load_processor(..., max_tiles=N)``. It is set on the
image processor itself because TRL 1.16 recounts tiles by calling
``processing_class.image_processor(images=..., crop_to_patches=True)`` (``trl/trainer/grpo_trainer.py:2546-2554``),
which reads the image processor's own attributes.

Coordinates: InternVL grounds on a 0-1000 grid relative to the ORIGINAL image (``<ref>text</ref><box>[[x1, y1, x2,
y2]]</box>``); InternVL's RefCOCO evaluation divides the predicted box by 1000 and multiplies by the image width and
height (OpenGVLab/InternVL ``internvl_chat/eval/refcoco/evaluate_grounding.py``, ``evaluate_chat_model``: ``predict_bbox
/ 1000``, ``[:, 0::2] *= hw[1]``, ``[:, 1::2] *= hw[0]``). Upstream VLM-R1 compares InternVL's answer with the
``rec_jsons_internvl`` solution directly, without any resize (``internvl_module.py`` ``iou_reward``;
``src/eval/test_rec_r1_internvl.py``). There is therefore no smart_resize frame:
:meth:`InternVLModule.get_image_resize_params` raises and :meth:`InternVLModule.answer_frame_size` gives the frame
(1000 x 1000 for every image).
"""

from __future__ import annotations

import logging
import os
from typing import Any

from groundwork.records import load_json_file
from groundwork.validate import ImageLimits
from vlm_r1 import answers, rewards
from vlm_r1.modules.base import VLMBaseModule, load_processor_files, restore_stock_processor_class
from vlm_r1.tiny_parts import (
    TINY_SIZES,
    build_tokenizer,
    chatml_template,
    qwen_text_config,
    qwen_tokenizer,
    save_tiny_checkpoint,
)

logger = logging.getLogger(__name__)

IMG_START_TOKEN, IMG_END_TOKEN, IMG_CONTEXT_TOKEN, VIDEO_TOKEN = "<img>", "</img>", "<IMG_CONTEXT>", "<video>"
# InternVL's grounding markup tokens (added tokens of the OpenGVLab tokenizers)
GROUNDING_TOKENS = ("<quad>", "</quad>", "<ref>", "</ref>", "<box>", "</box>")
# tokenizer attribute -> token, as InternVLProcessor.__init__ reads them (processing_internvl.py:56-63)
NAMED_TOKENS = {
    "start_image_token": IMG_START_TOKEN,
    "end_image_token": IMG_END_TOKEN,
    "context_image_token": IMG_CONTEXT_TOKEN,
    "video_token": VIDEO_TOKEN,
}
TILE_SIZE = 448  # pixels per tile side (InternVLVisionConfig.image_size default, configuration_internvl.py:71)
DEFAULT_MAX_TILES = 12  # GotOcr2ImageProcessor.max_patches default and upstream --max_anyres_num default
BOX_GRID = 1000  # InternVL answers boxes on a 0-1000 grid of the original image (see module docstring)

# Upstream InternVL question template: the same think/answer suffix for every task (internvl_module.py,
# get_question_template); its REC answer is a bare [x1, y1, x2, y2] (no JSON).
_THINK_ANSWER_TEMPLATE = (
    "{Question} First output the thinking process in <think> </think> tags and then output the final answer in "
    "<answer> </answer> tags."
)

# Qwen-style ChatML template (InternVL3 uses ChatML on Qwen2); an image part becomes one <IMG_CONTEXT>, which
# InternVLProcessor expands to <img> + 256 * tiles <IMG_CONTEXT> + </img>.
INTERNVL_CHAT_TEMPLATE = chatml_template(f"{IMG_CONTEXT_TOKEN}\\n", f"{VIDEO_TOKEN}\\n")


def has_internvl_rec_format(text: str) -> bool:
    """Upstream InternVL ``format_reward_rec``: True when ``re.search(r"<think>.*?</think>\\s*<answer>.*?\\[\\d+,\\s*
    \\d+,\\s*\\d+,\\s*\\d+\\].*?</answer>", text, re.DOTALL)`` would match (a bare integer box in the answer, no
    JSON braces, unlike Qwen's), decided in linear time with the helpers of :mod:`vlm_r1.rewards`.

    >>> has_internvl_rec_format("<think>t</think> <answer>[1, 2, 3, 4]</answer>")
    True
    >>> has_internvl_rec_format("<think>t</think> <answer>1, 2, 3, 4</answer>")
    False
    """
    think = text.find(answers._THINK_OPEN)
    if think < 0:
        return False
    answer = answers._answer_after_think(text, think + len(answers._THINK_OPEN))
    if answer < 0:
        return False
    box = answers.REC_BOX.search(text, answer)
    return box is not None and text.find(answers._ANSWER_CLOSE, box.end()) >= 0


def format_reward_rec_internvl(completions: list, **kwargs) -> list[float]:
    """REC format reward of upstream's InternVL module: 1.0 per completion of :func:`has_internvl_rec_format`."""
    return [1.0 if has_internvl_rec_format(answers.completion_text(c)) else 0.0 for c in completions]


def _image_only_processor_class() -> type:
    """``InternVLProcessor`` without the video processor (``InternVLVideoProcessor`` imports torchvision,
    ``video_processing_internvl.py:17``). Saves under the stock class name so ``AutoProcessor`` loads the checkpoint
    where torchvision exists. Not qwen.py's helper: its ``__init__`` has no ``image_seq_length``, and ProcessorMixin
    saves only ``__init__`` parameters (``processing_utils.py:1111-1114``), so that value would be lost."""
    from transformers import InternVLProcessor

    class ImageOnlyInternVLProcessor(InternVLProcessor):
        # ProcessorMixin derives its sub-processors from the __init__ signature: no video_processor here.
        def __init__(
            self, image_processor=None, tokenizer=None, image_seq_length: int = 256, chat_template=None, **kwargs
        ):
            super().__init__(
                image_processor,
                tokenizer,
                None,
                image_seq_length=image_seq_length,
                chat_template=chat_template,
                **kwargs,
            )

        def to_dict(self):
            d = super().to_dict()
            d["processor_class"] = InternVLProcessor.__name__
            return d

    return ImageOnlyInternVLProcessor


class InternVLModule(VLMBaseModule):
    """Adapter for ``model_type`` ``internvl`` (transformers-native InternVL3 / InternVL3.5 ``-hf`` checkpoints)."""

    model_types = ("internvl",)
    # the GotOcr2 tiling processor resizes any size to 448-px tiles (measured: 1x1 and 6000x20 both process); no
    # ratio limit, and a 1-px side is accepted
    IMAGE_LIMITS = ImageLimits(None, 1, source="448-px tiles take any size")

    def __init__(self, model_type: str = "internvl"):
        if model_type not in self.model_types:
            raise ValueError(f"InternVLModule does not serve model_type {model_type!r} (serves {self.model_types})")
        self.model_type = model_type

    # ---- upstream interface ----------------------------------------------------------------------------------------
    def get_vlm_key(self) -> str:
        return "internvl"

    def get_model_class(self, model_id: str, model_init_kwargs: dict) -> type:
        from transformers import InternVLForConditionalGeneration

        return InternVLForConditionalGeneration

    def get_processing_class(self) -> type:
        from transformers import InternVLProcessor

        return InternVLProcessor

    def get_vision_modules_keywords(self) -> list[str]:
        """``model.vision_tower`` (InternViT) and ``model.multi_modal_projector`` (the MLP after pixel shuffle)
        (``modeling_internvl.py:532-534``). Upstream's ``["vision_model"]`` named only InternViT of the remote-code
        model (its projector ``mlp1`` stayed trainable); here the projector is frozen with the tower, as Qwen's
        ``visual`` keyword freezes its merger."""
        return ["vision_tower", "multi_modal_projector"]

    def get_custom_multimodal_keywords(self) -> list[str]:
        """Only ``pixel_values`` ``(total_tiles, 3, 448, 448)``; the native model needs no ``image_flags``."""
        return ["pixel_values"]

    def get_custom_processing_keywords(self) -> list[tuple[str, str]]:
        """``("image_processor", "max_patches")``: upstream's ``('None', 'max_anyres_num')`` under its native name."""
        return [("image_processor", "max_patches")]

    def prepare_model_inputs(
        self, processing_class: Any, prompts_text: list[str], images: list, **options
    ) -> tuple[Any, list[dict]]:
        """Tokenise ``prompts_text`` with ``images`` (flat list in prompt order, or empty).

        Returns ``(batch, additional_output)``: ``batch`` holds ``input_ids``/``attention_mask`` (B, L) and
        ``pixel_values`` (total_tiles, 3, 448, 448); ``additional_output[i] = {"num_tiles": n}`` per image (thumbnail
        included), from the image processor's own rule (``get_number_of_image_patches``).
        """
        batch = self.tokenize(processing_class, prompts_text, images, **options)
        ip = processing_class.image_processor
        additional_output = [
            {"num_tiles": ip.get_number_of_image_patches(im.height, im.width, {"crop_to_patches": True})}
            for im in images or []
        ]
        return batch, additional_output

    @staticmethod
    def get_question_template(task_type: str | None) -> str:
        return _THINK_ANSWER_TEMPLATE

    format_reward_rec = staticmethod(format_reward_rec_internvl)
    iou_reward = rewards.registered_reward("rec_iou")

    @staticmethod
    def select_reward_func(func: str, task_type: str | None):
        """``--is_reward_customized_from_vlm_module`` for ``task_type == "rec"``: ``format`` -> upstream InternVL's
        format (:func:`format_reward_rec_internvl`), ``accuracy`` -> ``rec_iou`` (``vlm_r1.upstream.rewards.iou_reward``) (maps the answer
        from ``resized_size`` back to ``image_size``: correct for InternVL once the REC rows carry
        ``resized_size = answer_frame_size(...) = [1000, 1000]``).

        Raises:
            ValueError: any other task type or reward name (as upstream).
        """
        if task_type == "rec" and func == "format":
            return format_reward_rec_internvl
        if task_type == "rec" and func == "accuracy":
            return rewards.REWARDS.get_callable("rec_iou")
        raise ValueError(
            f"--is_reward_customized_from_vlm_module: no InternVL-specific reward {func!r} for task_type "
            f"{task_type!r} (only task_type 'rec' with ['accuracy', 'format'])"
        )

    # ---- our additions ---------------------------------------------------------------------------------------------
    def build_processor(
        self, image_processor: Any, tokenizer: Any, chat_template: str | None, image_seq_length: int = 256
    ) -> Any:
        """Assemble a processor from parts; image-only (no video processor) when torchvision is unavailable."""
        from transformers import InternVLProcessor
        from transformers.utils import is_torchvision_available

        if is_torchvision_available():
            from transformers import InternVLVideoProcessor

            return InternVLProcessor(
                image_processor,
                tokenizer,
                InternVLVideoProcessor(),
                image_seq_length=image_seq_length,
                chat_template=chat_template,
            )
        return _image_only_processor_class()(
            image_processor, tokenizer, image_seq_length=image_seq_length, chat_template=chat_template
        )

    def load_processor(
        self, path: str, *, min_pixels: int | None = None, max_pixels: int | None = None, max_tiles: int | None = None
    ) -> Any:
        """Load the processor of checkpoint ``path`` with left padding; ``max_tiles`` sets the tiling bound
        (:meth:`set_max_tiles`). ``min_pixels``/``max_pixels`` are the Qwen smart_resize budget: InternVL has none, so
        they are ignored (logged at debug level; the GRPO/SFT entry points always pass their defaults).

        Raises:
            FileNotFoundError: no chat template in ``path`` (needed on the image-only path).
        """

        def build(image_processor, tokenizer, chat_template):
            seq_len = 256  # image tokens per tile: the checkpoint's processor_config.json, else InternVL's 256
            cfg_file = os.path.join(path, "processor_config.json")
            if os.path.lexists(cfg_file):
                cfg = load_json_file(cfg_file, "processor config")
                seq_len = int(cfg.get("image_seq_length", seq_len) if isinstance(cfg, dict) else seq_len)
            return self.build_processor(image_processor, tokenizer, chat_template, seq_len)

        processor = load_processor_files(path, build)
        if min_pixels is not None or max_pixels is not None:
            logger.debug("InternVL: min_pixels/max_pixels have no effect (tiles of %d px; use max_tiles)", TILE_SIZE)
        if max_tiles is not None:
            self.set_max_tiles(processor, max_tiles)
        return processor

    @staticmethod
    def set_max_tiles(processor: Any, max_tiles: int) -> None:
        """Upstream's ``--max_anyres_num``: at most ``max_tiles`` 448-px tiles per image (plus the thumbnail when the
        grid has more than one tile); sets ``image_processor.max_patches`` in place. ``1`` turns tiling off (one
        448 x 448 resize of the whole image, ``_preprocess`` needs ``max_patches > 1`` to crop).

        Raises:
            ValueError: ``max_tiles`` < 1 or below the image processor's ``min_patches``.
        """
        ip = processor.image_processor
        n = int(max_tiles)
        if n < 1 or n < int(getattr(ip, "min_patches", 1)):
            raise ValueError(f"max_tiles must be >= 1 and >= min_patches ({getattr(ip, 'min_patches', 1)}), got {n}")
        ip.max_patches = n

    def processor_budget(self, processing_class: Any) -> dict:
        """No smart_resize values; ``max_tiles`` = the image processor's ``max_patches``."""
        max_patches = getattr(getattr(processing_class, "image_processor", None), "max_patches", None)
        return {
            "factor": None,
            "min_pixels": None,
            "max_pixels": None,
            "max_tiles": int(max_patches) if max_patches is not None else None,
        }

    def apply_pixel_budget(self, processing_class: Any, budget: Any) -> None:
        """The budget's ``max_tiles`` into ``image_processor.max_patches`` (:meth:`set_max_tiles`); InternVL has no
        smart_resize bounds, so ``min_pixels``/``max_pixels`` are not written."""
        if budget.max_tiles is not None:
            self.set_max_tiles(processing_class, budget.max_tiles)

    def num_tiles(self, processor: Any, width: int, height: int) -> int:
        """Tiles one ``width x height`` image becomes (thumbnail included), by the image processor's own rule."""
        return int(
            processor.image_processor.get_number_of_image_patches(int(height), int(width), {"crop_to_patches": True})
        )

    def get_image_resize_params(self, processing_class: Any) -> tuple[int, int, int]:
        """InternVL has no smart_resize frame, so there is no ``(factor, min_pixels, max_pixels)`` to give.

        The processor tiles every image at 448 x 448 (aspect ratio only approximately kept, plus a thumbnail) and the
        model answers boxes on a 0-1000 grid relative to the ORIGINAL image, so no resized frame enters the
        coordinates: use :meth:`answer_frame_size` (``(1000, 1000)``) where a task needs "the frame the model
        answers in".

        Raises:
            ValueError: always (the base interface's exception for "no smart_resize settings").
        """
        raise ValueError(
            "InternVL has no smart_resize frame: images are tiled at 448x448 (image_processor.max_patches tiles + a "
            "thumbnail) and boxes are answered on a 0-1000 grid relative to the original image; use "
            "InternVLModule.answer_frame_size (1000 x 1000) instead of get_image_resize_params"
        )

    def answer_frame_size(self, budget: Any, width: int, height: int) -> tuple[int, int]:
        """``(W', H')`` of the frame InternVL answers coordinates in, for an original ``width x height`` image:
        always ``(1000, 1000)`` (a per-axis scaling of the original image, so ``groundwork.geometry``'s resized->original
        mapping with ``resized_size = [1000, 1000]`` is exact)."""
        return BOX_GRID, BOX_GRID

    def get_banned_token_ids(self, processing_class: Any) -> list[int]:
        """``<IMG_CONTEXT>``, ``<img>``, ``</img>`` and ``<video>``: generation must never emit image markup.

        Raises:
            ValueError: the tokenizer lacks one of them.
        """
        tokenizer = getattr(processing_class, "tokenizer", processing_class)
        ids = []
        for tok in (IMG_CONTEXT_TOKEN, IMG_START_TOKEN, IMG_END_TOKEN, VIDEO_TOKEN):
            tid = tokenizer.convert_tokens_to_ids(tok)
            if tid is None or tid == tokenizer.unk_token_id:
                raise ValueError(f"tokenizer has no {tok} token; is this an InternVL checkpoint?")
            ids.append(int(tid))
        return ids

    def build_tokenizer(self):
        """The offline tiny tokenizer of :func:`vlm_r1.tiny_parts.build_tokenizer` (byte-level BPE, Qwen pre-tokenizer and
        Qwen special tokens) plus InternVL's image tokens (``<img>``, ``</img>``, ``<IMG_CONTEXT>``, ``<video>``) and
        grounding tokens, named as ``InternVLProcessor`` reads them (``tokenizer.start_image_token`` ...)."""
        backend = build_tokenizer().backend_tokenizer
        added = [IMG_START_TOKEN, IMG_END_TOKEN, IMG_CONTEXT_TOKEN, VIDEO_TOKEN, *GROUNDING_TOKENS]
        return qwen_tokenizer(backend, added, NAMED_TOKENS)

    def build_tiny_checkpoint(
        self, out_dir: str, *, seed: int = 0, min_pixels: int = 3136, max_pixels: int = 200_704, size: str = "tiny"
    ) -> str:
        """Write a randomly initialised tiny ``InternVLForConditionalGeneration`` to ``out_dir`` (offline).

        Real image geometry, toy widths: tiles of 448 px, patch 14, downsample ratio 0.5, so 256 ``<IMG_CONTEXT>``
        per tile and up to 12 tiles + thumbnail per image (``max_patches`` 12, the InternVL3 default); the
        InternViT and the Qwen2 text model take the widths/depths of ``vlm_r1.tiny_parts.TINY_SIZES[size]`` (tiny: text
        hidden 64, 2 layers, 4 heads / 2 kv heads; vision hidden 32, 2 layers, 2 heads). The image processor is
        ``GotOcr2ImageProcessorPil`` (448 x 448, ImageNet mean/std, bicubic, ``crop_to_patches``).
        ``min_pixels``/``max_pixels`` (Qwen's smart_resize budget) do not apply and are ignored.

        Writes model.safetensors, config.json, generation_config.json, processor_config.json, tokenizer files,
        chat_template.jinja and tiny_model_info.json. Returns ``out_dir``.

        Raises:
            ValueError: unknown ``size``.
        """
        import torch
        from transformers import GotOcr2ImageProcessorPil, InternVLConfig, InternVLForConditionalGeneration

        if size not in TINY_SIZES:
            raise ValueError(f"unknown size {size!r}; supported: {', '.join(TINY_SIZES)}")
        dims = TINY_SIZES[size]
        torch.manual_seed(seed)
        tokenizer = self.build_tokenizer()
        ids = {t: tokenizer.convert_tokens_to_ids(t) for t in ("<|endoftext|>", "<|im_end|>", IMG_CONTEXT_TOKEN)}
        patch, ratio = 14, 0.5
        image_seq_length = int((TILE_SIZE // patch) ** 2 * ratio**2)  # 256
        text_config = qwen_text_config(
            tokenizer, dims, {"rope_type": "default", "rope_theta": 1e6}, model_type="qwen2", tie_word_embeddings=False
        )
        vision_config = dict(
            hidden_size=dims["v_hidden"],
            num_hidden_layers=dims["v_depth"],
            num_attention_heads=dims["v_heads"],
            intermediate_size=2 * dims["v_hidden"],
            image_size=TILE_SIZE,
            patch_size=patch,
        )
        config = InternVLConfig(
            text_config=text_config,
            vision_config=vision_config,
            image_token_id=ids[IMG_CONTEXT_TOKEN],
            image_seq_length=image_seq_length,
            downsample_ratio=ratio,
            tie_word_embeddings=False,
        )
        model = InternVLForConditionalGeneration(config)
        image_processor = GotOcr2ImageProcessorPil(
            size={"height": TILE_SIZE, "width": TILE_SIZE},
            crop_to_patches=True,
            min_patches=1,
            max_patches=DEFAULT_MAX_TILES,
            image_mean=[0.485, 0.456, 0.406],
            image_std=[0.229, 0.224, 0.225],
        )
        processor = self.build_processor(image_processor, tokenizer, INTERNVL_CHAT_TEMPLATE, image_seq_length)

        return save_tiny_checkpoint(
            out_dir,
            model,
            processor,
            self,
            {
                "arch": self.model_type,
                "seed": seed,
                "size": size,
                "tile_size": TILE_SIZE,
                "patch_size": patch,
                "downsample_ratio": ratio,
                "image_seq_length": image_seq_length,
                "max_tiles": DEFAULT_MAX_TILES,
            },
        )

    def tidy_saved_processor(self, out_dir: str) -> None:
        """Rewrite ``processor_class`` in tokenizer_config.json to the stock name (cosmetic, as Qwen's)."""

        restore_stock_processor_class(out_dir, "InternVLProcessor")


#: the module classes this family file registers (groundwork.registry.discover)
FAMILY = (InternVLModule,)
