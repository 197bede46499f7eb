"""Tiny, randomly initialised checkpoints of real VLM architectures, built offline.

Our CPU machines cannot download weights, so every real code path (processor, chat template, M-RoPE, generation,
GRPO) is exercised on a checkpoint with the real architecture and a toy size. The directory written here loads with
``from_pretrained`` exactly like a hub checkpoint (model, tokenizer, image-processor config, chat template).

Recipe measured in ``docs/REFERENCES.md#tiny-checkpoint``: a byte-level BPE trained in-process with the Qwen
pre-tokenizer (every digit is its own token, so ``(123,45)`` is ``( 1 2 3 , 4 5 )``), the 14 Qwen special tokens,
hidden size 64, 2 text layers, a depth-2 vision tower with the real patch size 14 and merge size 2.
"""

from __future__ import annotations

import logging

from vlm_r1.modules import available_modules, get_vlm_module
from vlm_r1.modules.base import VLMBaseModule
from vlm_r1.tiny_parts import (
    QWEN_CHAT_TEMPLATE,
    QWEN_SPECIAL_TOKENS,
    TINY_SIZES,
    build_tokenizer,
    qwen_text_config,
    save_tiny_checkpoint,
)

logger = logging.getLogger(__name__)

SUPPORTED_ARCHS = ("qwen2_5_vl", "qwen2_vl")


def supported_archs() -> tuple[str, ...]:
    """Every ``config.model_type`` a tiny checkpoint can be built for: the Qwen2/2.5-VL builder here, plus every
    registered module that implements ``build_tiny_checkpoint`` (``vlm_r1.modules``)."""

    extra = [
        mt
        for mt, cls in available_modules().items()
        if mt not in SUPPORTED_ARCHS
        and getattr(cls, "build_tiny_checkpoint", None) is not VLMBaseModule.build_tiny_checkpoint
    ]
    return (*SUPPORTED_ARCHS, *sorted(extra))


def build_tiny_model(
    arch: str,
    out_dir: str,
    *,
    seed: int = 0,
    min_pixels: int = 3136,
    max_pixels: int = 200_704,
    size: str = "tiny",
    rope_theta: float = 1e6,
    tool_format: bool = False,
):
    """Write a randomly initialised tiny checkpoint of ``arch`` to ``out_dir``.

    Args:
        arch: a ``config.model_type`` of :func:`supported_archs`: ``"qwen2_5_vl"`` / ``"qwen2_vl"`` (built here), or
            a family whose module implements ``build_tiny_checkpoint`` (the real architectures; ``config.model_type``
            is set accordingly).
        out_dir: directory to create; it will hold model.safetensors, config.json, generation_config.json,
            processor_config.json (image-processor settings), tokenizer files and chat_template.jinja.
        seed: torch seed for the random weights (same seed -> identical checkpoint).
        min_pixels, max_pixels: pixel budget saved in the image processor (smart_resize bounds, in pixels).
        tool_format: the tokenizer also learns Qwen's tool-call format (``vlm_r1.tiny_parts.TOOL_CORPUS``; Qwen2/2.5-VL
            builds here only), for runs whose prompts offer a tool.

    Returns:
        ``out_dir``.

    Raises:
        ValueError: unknown ``arch`` or ``size``.
    """
    if size not in TINY_SIZES:
        raise ValueError(f"unknown size {size!r}; supported: {', '.join(TINY_SIZES)}")
    if arch not in SUPPORTED_ARCHS:
        # another family: its module builds its own tiny checkpoint (VLMBaseModule.build_tiny_checkpoint)
        archs = supported_archs()
        if arch not in archs:
            raise ValueError(f"unknown arch {arch!r}; supported: {', '.join(archs)}")

        get_vlm_module(arch).build_tiny_checkpoint(
            out_dir, seed=seed, min_pixels=min_pixels, max_pixels=max_pixels, size=size
        )
        return out_dir
    dims = TINY_SIZES[size]
    import torch
    from transformers import Qwen2VLImageProcessorPil

    torch.manual_seed(seed)
    tokenizer = build_tokenizer(tool_format=tool_format)
    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in QWEN_SPECIAL_TOKENS}
    # mrope_section sums to head_dim / 2 (tiny: 64 / 4 / 2 = 8)
    text_config = qwen_text_config(
        tokenizer, dims, {"rope_type": "default", "rope_theta": rope_theta, "mrope_section": dims["mrope"]}
    )
    special = dict(
        image_token_id=ids["<|image_pad|>"],
        video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"],
        vision_end_token_id=ids["<|vision_end|>"],
        tie_word_embeddings=False,
    )
    if arch == "qwen2_5_vl":
        from transformers import Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration

        vision_config = dict(
            depth=dims["v_depth"],
            hidden_size=dims["v_hidden"],
            intermediate_size=2 * dims["v_hidden"],
            num_heads=dims["v_heads"],
            out_hidden_size=dims["hidden"],
            patch_size=14,
            spatial_merge_size=2,
            temporal_patch_size=2,
            window_size=112,
            fullatt_block_indexes=[1],
        )
        config = Qwen2_5_VLConfig(text_config=text_config, vision_config=vision_config, **special)
        model = Qwen2_5_VLForConditionalGeneration(config)
    else:
        from transformers import Qwen2VLConfig, Qwen2VLForConditionalGeneration

        vision_config = dict(
            depth=dims["v_depth"],
            embed_dim=dims["v_hidden"],
            hidden_size=dims["hidden"],
            mlp_ratio=2,
            num_heads=dims["v_heads"],
            patch_size=14,
            spatial_merge_size=2,
            temporal_patch_size=2,
        )
        config = Qwen2VLConfig(text_config=text_config, vision_config=vision_config, **special)
        model = Qwen2VLForConditionalGeneration(config)
    image_processor = Qwen2VLImageProcessorPil(min_pixels=min_pixels, max_pixels=max_pixels)
    module = get_vlm_module(config.model_type)
    processor = module.build_processor(image_processor, tokenizer, QWEN_CHAT_TEMPLATE)
    return save_tiny_checkpoint(
        out_dir, model, processor, module, {"arch": arch, "seed": seed, "size": size, "rope_theta": rope_theta}
    )
