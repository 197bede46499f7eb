"""Qwen3-VL adapter (``config.model_type == "qwen3_vl"``: transformers' ``Qwen3VLForConditionalGeneration``).

What differs from Qwen2/2.5-VL (``vlm_r1.modules.qwen``), read from transformers 5.23 ``models/qwen3_vl``:

* vision: patch size 16 (Qwen2/2.5-VL: 14), so smart_resize works on multiples of ``patch_size * merge_size = 32``
  (not 28); the image processor is still ``Qwen2VLImageProcessor(Pil)`` (``models/auto/image_processing_auto.py:149``),
  so its pixel budget lives in ``size["shortest_edge"]`` / ``size["longest_edge"]`` like Qwen2.5-VL's;
* DeepStack: features of the vision layers in ``vision_config.deepstack_visual_indexes`` are added to the hidden states
  of the first text layers at the image-token positions (``modeling_qwen3_vl.py:821-826``, ``_deepstack_process``);
* text: Qwen3 decoder (explicit ``head_dim``, q/k RMS norms) with *interleaved* M-RoPE: frequency ``i`` of the
  ``head_dim / 2`` uses the height axis when ``i % 3 == 1`` and ``i < 3 * mrope_section[1]``, the width axis when
  ``i % 3 == 2`` and ``i < 3 * mrope_section[2]``, else the temporal axis (``recomposition_frequencies``,
  ``modeling_qwen3_vl.py:405-414``);
* positions: ``Qwen3VLModel.get_rope_index`` (``modeling_qwen3_vl.py:913``) has Qwen2.5-VL's signature and layout
  (``(3, B, L)`` positions, ``(B, 1)`` ``rope_deltas`` stored on the model; text continues at ``max + 1``); an image's
  block advances the text position by ``max(h, w) / merge`` (Qwen2.5-VL: the same for a still image, whose temporal
  index is 0). Generation continues from ``rope_deltas`` (``_prepare_position_ids_for_generation``,
  ``modeling_qwen3_vl.py:1371-1407``), as Qwen2.5-VL. So the shared-prompt hooks of :class:`Qwen2VLModule` apply
  unchanged (exactness: ``tests/test_qwen3_vl.py``);
* vision attention: packed by ``cu_seqlens`` per image as in Qwen2-VL (``modeling_qwen3_vl.py:277-315``), so the
  inherited ``post_model_init`` gives it one attention call per layer (:mod:`vlm_r1.vision_attention`);
* coordinates: Qwen3-VL answers grounding queries on a 0-1000 grid relative to the image, not in resized pixels
  (QwenLM/Qwen3-VL#1640; QwenLM/Qwen3-VL ``README.md:117`` at 9658872, "relative position coordinates"). That is
  task/reward side; this module only names the frame (:meth:`get_image_resize_params`).

Special tokens (``<|vision_start|>``, ``<|image_pad|>``, ``<|video_pad|>``, ``<|vision_end|>``, ``<|im_end|>`` ...) are
Qwen2's (``Qwen3VLProcessor.__init__``, ``processing_qwen3_vl.py:39-67``, and the config defaults
``image_token_id=151655`` ... of ``configuration_qwen3_vl.py``), so the tiny tokenizer of :mod:`vlm_r1.tiny` is reused.
"""

from __future__ import annotations

from typing import Any

from groundwork.validate import ImageLimits
from vlm_r1.modules.qwen import Qwen2VLModule, _image_only_processor_class
from vlm_r1.tiny_parts import (
    QWEN_CHAT_TEMPLATE,
    QWEN_SPECIAL_TOKENS,
    TINY_SIZES,
    build_tokenizer,
    qwen_text_config,
    save_tiny_checkpoint,
)

# Qwen3-VL's interleaved M-RoPE split of the head_dim/2 rotary frequencies, (temporal, height, width): [24, 20, 20] for
# head_dim 128 (Qwen/Qwen3-VL-*-Instruct config.json, text_config.rope_scaling.mrope_section; also the fallback of
# Qwen3VLTextRotaryEmbedding, modeling_qwen3_vl.py:369). Tiny checkpoints keep the ratio: h = w = half * 20 // 64.
_MROPE_HW_SHARE = (20, 64)

# The processor settings of the released checkpoints (Qwen/Qwen3-VL-*-Instruct preprocessor_config.json, as recalled:
# patch_size 16, merge_size 2, temporal_patch_size 2, mean = std = 0.5 per channel; not fetchable here).
PATCH_SIZE = 16
MERGE_SIZE = 2
IMAGE_MEAN_STD = [0.5, 0.5, 0.5]


def interleaved_mrope_section(head_dim: int) -> list[int]:
    """``[t, h, w]`` rotary-frequency counts (sum ``head_dim // 2``) in Qwen3-VL's proportions (24:20:20 of 64).

    Example: ``interleaved_mrope_section(16) == [4, 2, 2]`` (frequencies 1, 4 -> height; 2, 5 -> width; 0, 3, 6, 7 ->
    temporal); ``interleaved_mrope_section(128) == [24, 20, 20]`` (the released models).
    """
    half = head_dim // 2
    hw = half * _MROPE_HW_SHARE[0] // _MROPE_HW_SHARE[1]
    return [half - 2 * hw, hw, hw]


class Qwen3VLModule(Qwen2VLModule):
    """Adapter for ``model_type`` ``qwen3_vl``.

    Inherits the Qwen-VL behaviour shared with Qwen2/2.5-VL (chat-template prompts, processor call, question templates,
    image-only processor without torchvision, pixel budget in ``size``, banned vision tokens, shared-prompt hooks) and
    changes the classes, the video processor, and the tiny builder. ``get_image_resize_params`` (inherited) reads the
    factor from the processor: ``patch_size * merge_size``, 32 for the released Qwen3-VL (16 * 2), and the bounds from
    ``size["shortest_edge"]`` / ``size["longest_edge"]``.
    """

    model_types = ("qwen3_vl",)
    # the same smart_resize ratio limit; Qwen3-VL's vision patch is 16 px (PATCH_SIZE)
    IMAGE_LIMITS = ImageLimits(200.0, 16, source="smart_resize ratio limit 200; vision patch 16 px")

    @staticmethod
    def _classes(model_type: str) -> tuple[type, type]:
        """(model class, stock processor class) for a model_type."""
        if model_type == "qwen3_vl":
            from transformers import Qwen3VLForConditionalGeneration, Qwen3VLProcessor

            return Qwen3VLForConditionalGeneration, Qwen3VLProcessor
        raise ValueError(f"Qwen3VLModule does not serve model_type {model_type!r} (serves {Qwen3VLModule.model_types})")

    def __init__(self, model_type: str = "qwen3_vl"):
        super().__init__(model_type)

    def answer_frame_size(self, budget: Any, width: int, height: int) -> tuple[int, int]:
        """Qwen3-VL answers coordinates on a 0-1000 grid relative to the image (QwenLM/Qwen3-VL
        ``cookbooks/spatial_understanding.ipynb``: ``point_2d`` / ``bbox_2d`` mapped with ``x/1000*W``), not in
        resized pixels as Qwen2.5-VL: the REC task's frame is ``(1000, 1000)``."""
        return 1000, 1000

    def build_processor(self, image_processor: Any, tokenizer: Any, chat_template: str | None) -> Any:
        """Assemble a ``Qwen3VLProcessor`` from parts; image-only (no video processor) when torchvision is unavailable
        (that class saves itself as ``Qwen3VLProcessor``: ``vlm_r1.modules.qwen._image_only_processor_class``)."""
        from transformers.utils import is_torchvision_available

        stock = self._classes(self.model_type)[1]
        if is_torchvision_available():
            from transformers.models.qwen3_vl.video_processing_qwen3_vl import Qwen3VLVideoProcessor

            return stock(image_processor, tokenizer, Qwen3VLVideoProcessor(), chat_template=chat_template)
        return _image_only_processor_class(stock)(image_processor, tokenizer, chat_template=chat_template)

    # ---- tiny checkpoint ---------------------------------------------------------------------------------------------
    def build_tiny_checkpoint(
        self,
        out_dir: str,
        *,
        seed: int = 0,
        min_pixels: int = 3136,
        max_pixels: int = 200_704,
        size: str = "tiny",
        rope_theta: float = 5e6,
    ) -> str:
        """Write a randomly initialised tiny Qwen3-VL checkpoint to ``out_dir`` (offline).

        Sizes from ``vlm_r1.tiny_parts.TINY_SIZES[size]`` (tiny: text hidden 64, 2 layers, 4 heads / 2 KV heads,
        ``head_dim = hidden / heads = 16``; vision hidden 32, depth 2, 2 heads), with Qwen3-VL's real vision geometry
        (patch 16, spatial merge 2, temporal patch 2), DeepStack on every vision layer (indexes ``0..depth-1``, so each
        tiny text layer gets visual features), a 16x16 learned vision position grid (``num_position_embeddings`` 256;
        released: 2304) and interleaved M-RoPE sections :func:`interleaved_mrope_section` (tiny: ``[4, 2, 2]``).
        Tokenizer and chat template: :func:`vlm_r1.tiny_parts.build_tokenizer`, :data:`vlm_r1.tiny_parts.QWEN_CHAT_TEMPLATE`.
        Image processor: ``Qwen2VLImageProcessorPil`` (what ``AutoImageProcessor`` gives ``qwen3_vl`` without
        torchvision) with patch 16, merge 2, mean = std = 0.5 and the pixel budget ``[min_pixels, max_pixels]``.

        The directory loads with ``Qwen3VLForConditionalGeneration.from_pretrained`` / ``AutoModelForImageTextToText``
        and with :func:`vlm_r1.modules.load_processor`; it also holds ``tiny_model_info.json`` (arch, seed, size,
        rope_theta, num_parameters) like :func:`vlm_r1.tiny.build_tiny_model`.

        Returns:
            ``out_dir``.

        Raises:
            ValueError: unknown ``size``.
        """
        import torch
        from transformers import Qwen2VLImageProcessorPil, Qwen3VLConfig

        if size not in TINY_SIZES:
            raise ValueError(f"unknown size {size!r}; supported: {', '.join(TINY_SIZES)}")
        dims = TINY_SIZES[size]
        model_cls = self._classes(self.model_type)[0]
        torch.manual_seed(seed)
        tokenizer = build_tokenizer()
        ids = {t: tokenizer.convert_tokens_to_ids(t) for t in QWEN_SPECIAL_TOKENS}
        head_dim = dims["hidden"] // dims["heads"]
        text_config = qwen_text_config(
            tokenizer,
            dims,
            {
                "rope_type": "default",
                "rope_theta": rope_theta,
                "mrope_section": interleaved_mrope_section(head_dim),
                "mrope_interleaved": True,
            },
            head_dim=head_dim,
        )
        vision_config = dict(
            depth=dims["v_depth"],
            hidden_size=dims["v_hidden"],
            intermediate_size=2 * dims["v_hidden"],
            num_heads=dims["v_heads"],
            out_hidden_size=dims["hidden"],
            patch_size=PATCH_SIZE,
            spatial_merge_size=MERGE_SIZE,
            temporal_patch_size=2,
            num_position_embeddings=256,
            deepstack_visual_indexes=list(range(min(dims["v_depth"], dims["layers"]))),
        )
        config = Qwen3VLConfig(
            text_config=text_config,
            vision_config=vision_config,
            image_token_id=ids["<|image_pad|>"],
            video_token_id=ids["<|video_pad|>"],
            vision_start_token_id=ids["<|vision_start|>"],
            vision_end_token_id=ids["<|vision_end|>"],
            tie_word_embeddings=False,
        )
        model = model_cls(config)
        image_processor = Qwen2VLImageProcessorPil(
            patch_size=PATCH_SIZE,
            merge_size=MERGE_SIZE,
            temporal_patch_size=2,
            min_pixels=min_pixels,
            max_pixels=max_pixels,
            image_mean=IMAGE_MEAN_STD,
            image_std=IMAGE_MEAN_STD,
        )
        processor = self.build_processor(image_processor, tokenizer, QWEN_CHAT_TEMPLATE)

        return save_tiny_checkpoint(
            out_dir,
            model,
            processor,
            self,
            {"arch": self.model_type, "seed": seed, "size": size, "rope_theta": rope_theta},
        )


#: the module classes this family file registers (groundwork.registry.discover)
FAMILY = (Qwen3VLModule,)
