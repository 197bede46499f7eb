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
import os

from groundwork.outputs import write_json

logger = logging.getLogger(__name__)

SUPPORTED_ARCHS = ("qwen2_5_vl", "qwen2_vl")

QWEN_SPECIAL_TOKENS = [
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|object_ref_start|>",
    "<|object_ref_end|>",
    "<|box_start|>",
    "<|box_end|>",
    "<|quad_start|>",
    "<|quad_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|vision_pad|>",
    "<|image_pad|>",
    "<|video_pad|>",
]

# Qwen2 pre-tokenizer regex: \p{N} alone makes every digit a separate token.
QWEN_PRETOKENIZE_REGEX = r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""

# Qwen-style chat template. Explicit '...\n' strings: whitespace control (`{%-`) silently ate newlines
# (docs/REFERENCES.md#tiny-checkpoint).
QWEN_CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{% if loop.first and message['role'] != 'system' %}"
    "{{ '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}{% endif %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' }}"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for part in message['content'] %}"
    "{% if part['type'] == 'image' or 'image' in part or 'image_url' in part %}"
    "{{ '<|vision_start|><|image_pad|><|vision_end|>' }}"
    "{% elif part['type'] == 'video' or 'video' in part %}{{ '<|vision_start|><|video_pad|><|vision_end|>' }}"
    "{% elif 'text' in part %}{{ part['text'] }}{% endif %}"
    "{% endfor %}{% endif %}"
    "{{ '<|im_end|>\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)

# Text the BPE is trained on: prompt vocabulary of GUI grounding plus digits and the answer syntax.
_CORPUS = [
    "You are an expert UI element locator. Given a GUI image and a user's element description, provide the "
    "coordinates of the specified element as a single (x,y) point. The image resolution is height 720 and width 1280.",
    "For elements with area, return the center point. Output the coordinate pair exactly: (x,y)",
    "<think> The button is at the top left of the page. </think><answer>(123,45)</answer>",
    "Click the search box. Click the link. Open the menu. Press the Go button. Select the dropdown.",
    "Library Reference Language Reference Tutorial Python documentation index modules next previous",
    '0 1 2 3 4 5 6 7 8 9 (0,0) (1279,719) [12, 10, 42, 40] {"x": 5} yes no true false',
    "abcdefghijklmnopqrstuvwxyz ABCDEFGHIJKLMNOPQRSTUVWXYZ .,;:!?'\"()[]{}<>/\\|-_+=*&^%$#@~`",
]


def build_tokenizer():
    """Train a tiny byte-level BPE with Qwen's pre-tokenizer and special tokens, fully offline.

    Returns:
        ``transformers.Qwen2Tokenizer`` (about 400 tokens) whose eos is ``<|im_end|>`` and pad ``<|endoftext|>``.
    """
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, normalizers, pre_tokenizers
    from tokenizers.models import BPE
    from tokenizers.trainers import BpeTrainer
    from transformers import Qwen2Tokenizer

    tok = Tokenizer(BPE(unk_token=None, continuing_subword_prefix="", end_of_word_suffix="", fuse_unk=False))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(QWEN_PRETOKENIZE_REGEX), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = BpeTrainer(
        vocab_size=512, special_tokens=QWEN_SPECIAL_TOKENS, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator(_CORPUS, trainer=trainer)
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in QWEN_SPECIAL_TOKENS])
    return Qwen2Tokenizer(
        tokenizer_object=tok,
        unk_token=None,
        bos_token=None,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        model_max_length=32768,
        extra_special_tokens={
            "image_token": "<|image_pad|>",
            "video_token": "<|video_pad|>",
            "vision_bos_token": "<|vision_start|>",
            "vision_eos_token": "<|vision_end|>",
        },
    )


# Named sizes: text (hidden, layers, heads, kv heads, mrope_section) and vision (hidden, depth, heads).
TINY_SIZES = {
    "tiny": {
        "hidden": 64,
        "layers": 2,
        "heads": 4,
        "kv_heads": 2,
        "mrope": [2, 3, 3],
        "v_hidden": 32,
        "v_depth": 2,
        "v_heads": 2,
    },
    "small": {
        "hidden": 128,
        "layers": 4,
        "heads": 4,
        "kv_heads": 2,
        "mrope": [4, 6, 6],
        "v_hidden": 64,
        "v_depth": 2,
        "v_heads": 2,
    },
}


def qwen_text_config(tokenizer, dims: dict, rope_parameters: dict, **extra) -> dict:
    """The tiny text config every family here shares (a Qwen2-style decoder; sizes from :data:`TINY_SIZES` ``dims``,
    bos/pad ``<|endoftext|>``, eos ``<|im_end|>``), plus family-specific ``extra`` keys (``head_dim``, ...)."""
    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in ("<|endoftext|>", "<|im_end|>")}
    return dict(
        vocab_size=len(tokenizer),
        hidden_size=dims["hidden"],
        intermediate_size=2 * dims["hidden"],
        num_hidden_layers=dims["layers"],
        num_attention_heads=dims["heads"],
        num_key_value_heads=dims["kv_heads"],
        max_position_embeddings=32768,
        rope_parameters=rope_parameters,
        bos_token_id=ids["<|endoftext|>"],
        eos_token_id=ids["<|im_end|>"],
        pad_token_id=ids["<|endoftext|>"],
        **extra,
    )


def save_tiny_checkpoint(out_dir: str, model, processor, module, info: dict) -> str:
    """Save a tiny ``model`` + ``processor`` to ``out_dir`` loadable with ``from_pretrained``: generation stops at
    ``<|im_end|>``/``<|endoftext|>`` (pad ``<|endoftext|>``), the module tidies the saved processor, and
    ``tiny_model_info.json`` holds ``info`` plus the parameter count. Returns ``out_dir``."""
    tokenizer = getattr(processor, "tokenizer", processor)
    end, im_end = tokenizer.convert_tokens_to_ids("<|endoftext|>"), tokenizer.convert_tokens_to_ids("<|im_end|>")
    model.generation_config.eos_token_id = [im_end, end]
    model.generation_config.pad_token_id = end
    os.makedirs(out_dir, exist_ok=True)
    model.save_pretrained(out_dir)
    processor.save_pretrained(out_dir)
    if hasattr(module, "tidy_saved_processor"):
        module.tidy_saved_processor(out_dir)
    n = sum(p.numel() for p in model.parameters())
    write_json(  # atomic (groundwork.outputs)
        os.path.join(out_dir, "tiny_model_info.json"),
        {
            **info,
            "num_parameters": n,
            "note": "randomly initialised tiny checkpoint for CPU tests; it has learned nothing",
        },
    )
    logger.info("wrote tiny %s checkpoint (%d params) to %s", info.get("arch"), n, out_dir)
    return out_dir


def supported_archs() -> tuple[str, ...]:
    """Every ``config.model_type`` a tiny checkpoint can be built for: the Qwen2/2.5-VL builder here, plus every
    registered module that implements ``build_tiny_checkpoint`` (``vlm_r1.modules``)."""
    from vlm_r1.modules import available_modules
    from vlm_r1.modules.base import VLMBaseModule

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
        from vlm_r1.modules import get_vlm_module

        get_vlm_module(arch).build_tiny_checkpoint(
            out_dir, seed=seed, min_pixels=min_pixels, max_pixels=max_pixels, size=size
        )
        return out_dir
    dims = TINY_SIZES[size]
    import torch
    from transformers import Qwen2VLImageProcessorPil

    from vlm_r1.modules import get_vlm_module

    torch.manual_seed(seed)
    tokenizer = build_tokenizer()
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
