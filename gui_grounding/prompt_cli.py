"""``gui-grounding prompt``: show exactly what an adapter sends for one screenshot size and instruction.

    gui-grounding prompt --adapter gta1 --image-size 1920x1080 --instruction "Click the search box"
    gui-grounding prompt --adapter gta1 --image-size 1920x1080 --instruction "Click the search box" --model runs/tiny
    gui-grounding prompt --model runs/tiny_qwen3 --image-size 1920x1080 --instruction "Click the search box"

``--adapter`` defaults, with ``--model``, to the checkpoint family's adapter (``default_adapter_for(config.model_type)``,
as ``gui-grounding eval`` picks it: qwen2_5_vl -> gta1, qwen3_vl -> qwen3-vl, internvl -> internvl).

Prints one JSON object:

* ``adapter``, ``image_size`` ``[W, H]`` (the screenshot), ``resized_size`` ``[W', H']`` (the smart_resize frame the
  model sees under the pixel budget: ``--min-pixels``/``--max-pixels``, else the adapter's published
  ``default_budget``, ``gui_grounding.eval.adapters``), ``messages`` (the chat messages the adapter builds, image
  placeholder ``{"type": "image"}`` where the image goes);
* with ``--model PATH`` (a local checkpoint) also ``chat_template_text``, the processor's chat-template rendering with
  ``add_generation_prompt=True`` and the image placeholder expanded to the real number of image pad tokens, i.e. the
  text the model reads, and ``num_tokens``, the prompt's token count including the image tokens (the processor run on
  that text and a blank image of the original size, resized as the adapter resizes it). The processor's factor comes
  from the checkpoint; its pixel budget is set to the one above. Families without a smart_resize frame (InternVL:
  448-px tiles, ``VLMBaseModule.get_image_resize_params`` raises ``ValueError``) keep the adapter's documented
  budget for ``resized_size``, and their ``chat_template_text`` is the processor's token ids decoded (InternVL:
  ``<img>`` + 256 ``<IMG_CONTEXT>`` per tile + ``</img>``).

Example (GTA1, 1920x1080, budget 3,136 .. 8,847,360): ``resized_size`` is ``[1932, 1092]`` and the system message is
GTA1's prompt with "height 1092 and width 1932" (``gui_grounding.prompts.GTA1_SYSTEM_PROMPT``).
"""

from __future__ import annotations

import argparse
import json
import re

from gui_grounding.eval.adapters import ADAPTERS, get_adapter
from gui_grounding.frames import Frame
from gui_grounding.schema import Sample

MAX_SIDE = 1_000_000  # a screenshot side beyond this is not a screen (and would not fit in memory)
IMAGE_PAD = "<|image_pad|>"  # Qwen-VL image placeholder token, repeated once per merged patch by the processor


def parse_image_size(text: str) -> tuple[int, int]:
    """``"1920x1080"`` -> ``(1920, 1080)``.

    Raises:
        ValueError: not ``WxH`` with two positive integers.
    """
    m = re.fullmatch(r"\s*(\d{1,9})\s*[xX]\s*(\d{1,9})\s*", text)
    if not m or not (0 < int(m.group(1)) <= MAX_SIDE and 0 < int(m.group(2)) <= MAX_SIDE):
        raise ValueError(f"image size must be WxH with integers in 1..{MAX_SIDE}, e.g. 1920x1080; got {text[:40]!r}")
    return int(m.group(1)), int(m.group(2))


def _family_limits(ad, model: str | None):
    """The image limits of ``model``'s family, else of the adapter's family (its module file names the family)."""
    from vlm_r1.modules import get_vlm_module

    family = model or type(ad).__module__.rsplit(".", 1)[-1]
    try:
        return get_vlm_module(family).image_limits()
    except ValueError:  # an adapter file that is not a module family (a plugin): no limits known
        return None


def describe_prompt(
    adapter: str | None,
    image_size: tuple[int, int],
    instruction: str,
    *,
    model: str | None = None,
    min_pixels: int | None = None,
    max_pixels: int | None = None,
) -> dict:
    """The JSON object ``gui-grounding prompt`` prints (see the module docstring).

    Args:
        adapter: adapter name (``gui_grounding.eval.adapters.ADAPTERS``); ``None``: the default of ``model``'s
            ``config.model_type`` (``gui_grounding.eval.backends.checkpoint_adapter``).
        image_size: ``(W, H)`` of the screenshot.
        instruction: the element description, sent as given.
        model: local checkpoint whose processor renders and counts the prompt (optional).
        min_pixels, max_pixels: override the adapter's ``default_budget`` bounds.

    Only the sizes are needed to build the messages: no image of the screenshot's size is ever allocated (with
    ``model``, the processor gets a blank image of the size the adapter sends, at most the decode guard of
    ``vlm_r1.validate.DEFAULT_MAX_PIXELS``).

    Raises:
        ValueError: unknown adapter, neither ``adapter`` nor ``model``, non-positive image size,
            ``min_pixels > max_pixels``, an image the model family cannot take (aspect ratio, smallest side:
            ``VLMBaseModule.image_limits``), or (with ``model``) a sent image over the decode guard.
    """
    from PIL import Image

    from vlm_r1 import validate

    if adapter is None:
        if model is None:
            raise ValueError("give --adapter, or --model to use its family's adapter")
        from gui_grounding.eval.backends import checkpoint_adapter

        ad = checkpoint_adapter(model)
    else:
        ad = get_adapter(adapter)
    width, height = int(image_size[0]), int(image_size[1])
    if width <= 0 or height <= 0:
        raise ValueError(f"image size must be positive, got {width}x{height}")
    budget = ad.default_budget
    factor = budget.factor
    lo = budget.min_pixels if min_pixels is None else int(min_pixels)
    hi = budget.max_pixels if max_pixels is None else int(max_pixels)
    if lo <= 0:
        raise ValueError(f"min_pixels must be positive, got {lo}")
    if lo > hi:
        raise ValueError(f"min_pixels {lo} > max_pixels {hi}")
    limits = _family_limits(ad, model)
    if limits is not None:
        try:
            limits.check(width, height, "the screenshot")
        except validate.Invalid as err:
            raise ValueError(err.message) from None
    processor = None
    if model is not None:
        from vlm_r1.modules import get_vlm_module, load_processor

        processor = load_processor(model, min_pixels=lo, max_pixels=hi)
        try:
            factor, lo, hi = get_vlm_module(model).get_image_resize_params(processor)
        except ValueError:  # no smart_resize frame (InternVL tiling): the adapter's documented budget stays
            pass
    # Adapters that pre-resize get the budget; 0-1000 adapters send the original and the processor resizes it.
    resize = (factor, lo, hi) if ad.default_resize is not None else None
    try:
        answer_frame = ad.frame_for(width, height, resize)
        sent_w, sent_h = ad.image_size_sent(answer_frame)
        frame = Frame.for_image(sent_w, sent_h, factor=factor, min_pixels=lo, max_pixels=hi)
    except ValueError as err:  # smart_resize: an aspect ratio over 200
        raise ValueError(f"a {width}x{height} screenshot cannot be resized for the model: {err}") from None
    out = {
        "adapter": ad.name,
        "image_size": [width, height],
        "resized_size": [frame.resized_width, frame.resized_height],
        "messages": ad.messages(instruction, answer_frame, image_block=True),
    }
    if processor is not None:
        if sent_w * sent_h > validate.DEFAULT_MAX_PIXELS:
            raise ValueError(f"the {ad.name} adapter sends the {sent_w}x{sent_h} image unresized; over "
                             f"{validate.DEFAULT_MAX_PIXELS:,} pixels, it is not rendered for --model")  # fmt: skip
        sample = Sample("prompt", instruction, "", [], sent_w, sent_h)
        request = ad.build_request(sample, Image.new("RGB", (sent_w, sent_h), (255, 255, 255)), resize=resize)
        if request.messages != out["messages"]:  # the request for the sent size must be the request for the original
            request = ad.build_request(Sample("prompt", instruction, "", [], width, height),
                                       Image.new("RGB", (width, height), (255, 255, 255)), resize=resize)  # fmt: skip
        text = processor.apply_chat_template(request.messages, tokenize=False, add_generation_prompt=True)
        batch = processor(text=[text], images=[request.image], return_tensors="pt")
        if "image_grid_thw" not in batch:  # not a Qwen-VL processor: its own expansion, decoded
            out["chat_template_text"] = processor.tokenizer.decode(batch["input_ids"][0], skip_special_tokens=False)
            out["num_tokens"] = len(batch["input_ids"][0])
            return out
        _, grid_h, grid_w = (int(v) for v in batch["image_grid_thw"][0])
        merge = int(processor.image_processor.merge_size)
        if (grid_w * factor // merge, grid_h * factor // merge) != (frame.resized_width, frame.resized_height):
            raise RuntimeError(f"processor grid {grid_w}x{grid_h} does not match the resized size "
                               f"{frame.resized_width}x{frame.resized_height}")  # fmt: skip
        n_image_tokens = grid_h * grid_w // (merge * merge)
        out["chat_template_text"] = text.replace(IMAGE_PAD, IMAGE_PAD * n_image_tokens)
        out["num_tokens"] = len(batch["input_ids"][0])
    return out


def _run(args: argparse.Namespace) -> None:
    if args.adapter is None and args.model is None:
        raise SystemExit("gui-grounding prompt: error: give --adapter, or --model to use its family's adapter")
    try:
        info = describe_prompt(args.adapter, args.image_size, args.instruction, model=args.model,
                               min_pixels=args.min_pixels, max_pixels=args.max_pixels)  # fmt: skip
    except ValueError as err:
        raise SystemExit(f"gui-grounding prompt: error: {err}") from None
    print(json.dumps(info, ensure_ascii=False, indent=2))


def _image_size_arg(text: str) -> tuple[int, int]:
    try:
        return parse_image_size(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from err


def register_cli(sub) -> None:
    """Add the ``prompt`` subcommand to the ``gui-grounding`` subparsers ``sub``."""
    from vlm_r1.argtypes import integer, text, with_range

    budgets = "; ".join(f"{name}: {cls.default_budget.min_pixels:,}..{cls.default_budget.max_pixels:,}"
                        for name, cls in ADAPTERS.items())  # fmt: skip
    p = sub.add_parser("prompt", help="print the chat messages (and, with --model, the tokens) an adapter sends",
                       description="Print, as JSON, the resized image size and the chat messages an adapter sends for "
                       "a screenshot of the given size; with --model also the chat-template text the model reads "
                       "(image pad tokens expanded) and its token count. Default pixel budgets (published inference "
                       f"settings, see gui_grounding/eval/adapters.py): {budgets}.")  # fmt: skip
    p.add_argument("--adapter", default=None, choices=sorted(ADAPTERS), help="prompt + coordinate convention; default "
                   "with --model: the checkpoint's config.model_type default (as gui-grounding eval)")  # fmt: skip
    p.add_argument("--image-size", required=True, type=_image_size_arg, metavar="WxH",
                   help="screenshot size in pixels, e.g. 1920x1080")  # fmt: skip
    p.add_argument("--instruction", required=True, type=text,
                   help="the element description, e.g. 'Click the search box' (UTF-8 text)")  # fmt: skip
    p.add_argument("--model", default=None, help="local checkpoint: also print chat_template_text and num_tokens")
    px = integer(min=1)
    p.add_argument("--min-pixels", type=px, default=None,
                   help=with_range("override the adapter's default min_pixels", px))  # fmt: skip
    p.add_argument("--max-pixels", type=px, default=None,
                   help=with_range("override the adapter's default max_pixels", px))  # fmt: skip
    p.set_defaults(func=_run)
