"""The parts every tiny checkpoint builder shares (:mod:`vlm_r1.tiny` dispatches to a family's builder; the family
modules in :mod:`vlm_r1.modules` build from these): the offline Qwen tokenizer (a byte-level BPE trained in-process
with the Qwen pre-tokenizer and the 14 Qwen special tokens), the ChatML chat template (:func:`chatml_template`), the
size table :data:`TINY_SIZES`, the Qwen text config and the writer of a checkpoint folder. Imports no family module,
so families and the dispatcher both import it.
"""

from __future__ import annotations

import logging
import os
from typing import Any

from groundwork.outputs import write_json

logger = logging.getLogger(__name__)

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


# Explicit '...\n' strings: whitespace control (`{%-`) silently ate newlines (docs/REFERENCES.md#tiny-checkpoint).
def chatml_template(image: str, video: str) -> str:
    """A Qwen-style ChatML chat template: a default system turn (``You are a helpful assistant.``) unless the first
    message is the system's, then ``<|im_start|>ROLE``, newline, content, ``<|im_end|>``, newline per message (a
    string, or a list of parts: text as given, an image part as ``image``, a video part as ``video``), then the
    assistant header when ``add_generation_prompt``. ``image`` and ``video`` are written as the inside of a Jinja
    single-quoted string (backslash-n for a newline)."""
    return (
        "{% for message in messages %}"
        "{% if loop.first and message['role'] != 'system' %}"
        "{{ '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}{% endif %}"
        "{{ '<|im_start|>' + message['role'] + '\\n' }}"
        "{% if message['content'] is string %}{{ message['content'] }}"
        "{% else %}{% for part in message['content'] %}"
        "{% if part['type'] == 'image' or 'image' in part or 'image_url' in part %}{{ '" + image + "' }}"
        "{% elif part['type'] == 'video' or 'video' in part %}{{ '" + video + "' }}"
        "{% elif 'text' in part %}{{ part['text'] }}{% endif %}"
        "{% endfor %}{% endif %}"
        "{{ '<|im_end|>\\n' }}"
        "{% endfor %}"
        "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
    )


# the Qwen families' template: an image part is the vision span around one <|image_pad|> (the processor expands it)
QWEN_CHAT_TEMPLATE = chatml_template(
    "<|vision_start|><|image_pad|><|vision_end|>", "<|vision_start|><|video_pad|><|vision_end|>"
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
#: the BPE's size (the grounding prompts above)
TINY_VOCAB_SIZE = 512
# Qwen's tool-call format (the "# Tools" block its chat templates write, a call, a tool response): with
# ``build_tokenizer(tool_format=True)`` the BPE (then TOOL_VOCAB_SIZE tokens) also learns these, so a prompt that offers
# a tool costs about 300 tokens instead of 650 (the zoom study, gui-grounding toy zoom). The default tokenizer, and so
# every other tiny checkpoint and the toy's measured numbers, is unchanged.
TOOL_CORPUS = [
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function "
    "signatures within <tools></tools> XML tags:\n<tools>\n",
    '{"type": "function", "function": {"name": "zoom", "description": "See a region of the screen enlarged; then '
    'answer in the enlarged image\'s coordinates.", "parameters": {"type": "object", "properties": '
    '{"bbox_2d": {"type": "array", "items": {"type": "number"}, "description": "[x1, y1, x2, y2] in your answer\'s '
    'coordinates"}}, "required": ["bbox_2d"]}}}',
    "\n</tools>\n\nFor each function call, return a json object with function name and arguments within "
    '<tool_call></tool_call> XML tags:\n<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n'
    "</tool_call>\n\nYou may call zoom at most 1 time.",
    '<tool_call>\n{"name": "zoom", "arguments": {"bbox_2d": [10, 20, 30, 40]}}\n</tool_call>',
    "<tool_response>\n\nThe zoomed image resolution is height 112 and width 112.\n</tool_response>",
    "Click the striped button in the red panel. barred checked plain green blue yellow",
]
TOOL_VOCAB_SIZE = 768


def build_tokenizer(tool_format: bool = False):
    """Train a tiny byte-level BPE with Qwen's pre-tokenizer and special tokens, fully offline (``tool_format``: also
    on :data:`TOOL_CORPUS`, with :data:`TOOL_VOCAB_SIZE` tokens).

    Returns:
        ``transformers.Qwen2Tokenizer`` (:data:`TINY_VOCAB_SIZE` or :data:`TOOL_VOCAB_SIZE` tokens) whose eos is ``<|im_end|>`` and pad ``<|endoftext|>``.
    """
    from tokenizers import Regex, Tokenizer, decoders, normalizers, pre_tokenizers
    from tokenizers.models import BPE
    from tokenizers.trainers import BpeTrainer

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
        vocab_size=TOOL_VOCAB_SIZE if tool_format else TINY_VOCAB_SIZE,
        special_tokens=QWEN_SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(_CORPUS + (TOOL_CORPUS if tool_format else []), trainer=trainer)
    return qwen_tokenizer(
        tok,
        QWEN_SPECIAL_TOKENS,
        {
            "image_token": "<|image_pad|>",
            "video_token": "<|video_pad|>",
            "vision_bos_token": "<|vision_start|>",
            "vision_eos_token": "<|vision_end|>",
        },
    )


def qwen_tokenizer(backend: Any, special: list[str], named: dict[str, str]) -> Any:
    """A ``transformers.Qwen2Tokenizer`` over the ``tokenizers`` ``backend`` with ``special`` added as special tokens
    and ``named`` as its named extra special tokens (eos ``<|im_end|>``, pad ``<|endoftext|>``, no bos/unk: Qwen's)."""
    from tokenizers import AddedToken
    from transformers import Qwen2Tokenizer

    backend.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in special])
    return Qwen2Tokenizer(
        tokenizer_object=backend,
        unk_token=None,
        bos_token=None,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        model_max_length=32768,
        extra_special_tokens=dict(named),
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
