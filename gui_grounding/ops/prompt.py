"""``gui-grounding prompt``: show exactly what an adapter sends for one screenshot size and instruction.

    gui-grounding prompt --adapter gta1 --image-size 1920x1080 --instruction "Click the search box"
    gui-grounding prompt --adapter gta1 --image-size 1920x1080 --instruction "Click the search box" --model runs/tiny
    gui-grounding prompt --model runs/tiny_qwen3 --image-size 1920x1080 --instruction "Click the search box"
    gui-grounding prompt --adapter gta1 --image-size 1920x1080 --instruction "Click the search box" --zoom-tool

``--adapter`` defaults, with ``--model``, to the checkpoint family's adapter (``default_adapter_for(config.model_type)``,
as ``gui-grounding eval`` picks it: qwen2_5_vl -> gta1, qwen3_vl -> qwen3-vl, internvl -> internvl).

Prints one JSON object:

* ``adapter``, ``image_size`` ``[W, H]`` (the screenshot), ``resized_size`` ``[W', H']`` (the smart_resize frame the
  model sees under the pixel budget: ``--min-pixels``/``--max-pixels``, else the adapter's published
  ``default_budget``, ``gui_grounding.models.adapters``; the size the prompt states and answers map back from),
  ``sent_size`` where the budget shrinks that frame again before sending it (the Qwen2.5-VL harness profiles:
  ``PixelBudget.processor_max_pixels``), ``messages`` (the chat messages the adapter builds, image placeholder
  ``{"type": "image"}`` where the image goes);
* with ``--model PATH`` (a local checkpoint) also ``chat_template_text``, the processor's chat-template rendering with
  ``add_generation_prompt=True`` and the image placeholder expanded to the real number of image pad tokens, i.e. the
  text the model reads, and ``num_tokens``, the prompt's token count including the image tokens (the processor run on
  that text and a blank image of the original size, resized as the adapter resizes it). The processor's factor comes
  from the checkpoint; its pixel budget is set to the one above. Families without a smart_resize frame (InternVL:
  448-px tiles, ``VLMBaseModule.get_image_resize_params`` raises ``ValueError``) keep the adapter's documented
  budget for ``resized_size``, and their ``chat_template_text`` is the processor's token ids decoded (InternVL:
  ``<img>`` + 256 ``<IMG_CONTEXT>`` per tile + ``</img>``).

With ``--zoom-tool`` (``gui-grounding eval --tts zoom-tool``; adapters with a tool-call format) also ``zoom_tool``:
the exact messages of both turns: ``turn_1`` (the prompt with the zoom tool offered for ``--max-zoom-calls`` calls,
``Adapter.zoom_messages``) and ``turn_2`` (turn 1, then an example assistant call, ``example_call``, on the middle
half of the answer frame, then the tool's response with the crop, ``zoom_tool.response_messages``), with the call's
``window`` in original pixels and the crop's ``crop_size`` / ``crop_resized_size`` (as eval computes them:
``zoom_tool.region_window``, the run's budget).

Example (GTA1, 1920x1080, budget 3,136 .. 8,847,360): ``resized_size`` is ``[1932, 1092]`` and the system message is
GTA1's prompt with "height 1092 and width 1932" (``gui_grounding.models.prompts.GTA1_SYSTEM_PROMPT``).
"""

from __future__ import annotations

import argparse
import json
import re

from groundwork import validate
from groundwork.argtypes import add_number_flag, flag_values, integer, text
from gui_grounding.data.schema import Sample
from gui_grounding.eval.backends import checkpoint_adapter, eval_reading
from gui_grounding.eval.budget import resolve_eval_budget
from gui_grounding.eval.tts import DEFAULT_ZOOM_CALLS, MAX_ZOOM_CALLS
from gui_grounding.models import zoom_tool as zoom
from gui_grounding.models.adapters import ADAPTERS, Request, get_adapter
from gui_grounding.models.profiles import PROFILES, get_profile
from vlm_r1.modules import get_vlm_module

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
    max_tiles: int | None = None,
    profile: str | None = None,
    parse: str | None = None,
    zoom_tool: bool = False,
    max_zoom_calls: int = DEFAULT_ZOOM_CALLS,
) -> dict:
    """The JSON object ``gui-grounding prompt`` prints (see the module docstring).

    Args:
        adapter: adapter name (``gui_grounding.models.adapters.ADAPTERS``); ``None``: the profile's, else the default
            of ``model``'s ``config.model_type`` (``gui_grounding.eval.backends.checkpoint_adapter``).
        image_size: ``(W, H)`` of the screenshot.
        instruction: the element description, sent as given.
        model: local checkpoint whose processor renders and counts the prompt (optional); its recorded training
            budget is used as ``gui-grounding eval`` uses it.
        min_pixels, max_pixels, max_tiles: pixel-budget flags (resolved as ``gui-grounding eval`` resolves them:
            flag, else ``profile``, else the checkpoint's recorded budget, else the adapter's published one).
        profile: a :mod:`gui_grounding.models.profiles` name (adapter and budget).
        parse: a completion in the model's format (the generated text; an adapter's ``assistant_prefix`` is put
            before it, as eval does): what ``gui-grounding eval`` records and scores for it, by eval's own path
            (:func:`gui_grounding.eval.backends.eval_reading`: the predictions line, read back by the predictions
            reader's rule): ``parsed_point`` (original pixels, exactly as recorded; ``null`` for a refusal or a
            format error), ``refusal`` (the adapter's explicit "no target", e.g. UI-Venus ``[-1,-1]``: correct on
            refusal items, wrong elsewhere), ``format_error`` (why eval scores it ``wrong_format``: nothing parsed,
            e.g. a number beyond +-1e7, or a point beyond +-1e7 original pixels, written as null), ``scored_as`` (``point``, ``refusal`` or
            ``wrong_format``); and ``answer_point``, the adapter's parse in its answer frame.
        zoom_tool: also the two turns of ``--tts zoom-tool`` (module docstring), ``max_zoom_calls`` calls offered.

    Only the sizes are needed to build the messages: no image of the screenshot's size is ever allocated (with
    ``model``, the processor gets a blank image of the size the budget sends, at most the decode guard
    ``groundwork.validate.DECODE_PIXEL_LIMIT``).

    Raises:
        ValueError: unknown adapter or profile, neither ``adapter``, ``profile`` nor ``model``, non-positive image
            size, ``min_pixels > max_pixels``, an image the model family cannot take (aspect ratio, smallest side:
            ``VLMBaseModule.image_limits``), or (with ``model``) a sent image over the decode guard.
    """

    prof, ad = _resolve_adapter(adapter, profile, model)
    width, height = int(image_size[0]), int(image_size[1])
    if width <= 0 or height <= 0:
        raise ValueError(f"image size must be positive, got {width}x{height}")
    limits = _family_limits(ad, model)
    if limits is not None:
        try:
            limits.check(width, height, "the screenshot")
        except validate.Invalid as err:
            raise ValueError(err.message) from None
    flags = {"min_pixels": min_pixels, "max_pixels": max_pixels, "max_tiles": max_tiles}
    budget, warnings = resolve_eval_budget(ad, model=model, flags=flags, profile=prof, limits=limits)
    try:
        frame = budget.frame(width, height)
    except ValueError as err:  # smart_resize: an aspect ratio over 200
        raise ValueError(f"a {width}x{height} screenshot cannot be resized for the model: {err}") from None
    out = {
        "adapter": ad.name,
        "profile": prof.name if prof else None,
        "image_size": [width, height],
        "resized_size": [frame.resized_width, frame.resized_height],
        "answer_frame": {"name": ad.answer_frame, "size": list(ad.answer_size(frame))},
        "pixel_budget": budget.to_dict(),
        "messages": ad.messages(instruction, frame, image_block=True),
    }
    if budget.reshrinks:  # the stated frame is shrunk again before it is sent (PixelBudget.processor_max_pixels)
        out["sent_size"] = list(budget.size_sent(width, height))
    if warnings:
        out["pixel_budget_warnings"] = warnings
    if parse is not None:
        out.update(_reading(ad, out["messages"], frame, instruction, parse))
    if zoom_tool:
        out["zoom_tool"] = _zoom_turns(ad, budget, frame, instruction, max_zoom_calls)
    if model is not None:
        out.update(_rendered(ad, model, budget, instruction, out["messages"], frame))
    return out


def _resolve_adapter(adapter: str | None, profile: str | None, model: str | None):
    """``(profile or None, adapter)``: the adapter named, else the profile's, else ``model``'s family default
    (``gui_grounding.eval.backends.checkpoint_adapter``).

    Raises:
        ValueError: unknown adapter or profile, or none of the three given.
    """
    prof = None
    if profile is not None:
        prof = get_profile(profile)
        adapter = adapter or prof.adapter
    if adapter is not None:
        ad = get_adapter(adapter)
        return prof, prof.configure(ad) if prof is not None else ad
    if model is None:
        raise ValueError("give --adapter, --profile, or --model to use its family's adapter")

    return prof, checkpoint_adapter(model)


def _reading(ad, messages: list, frame, instruction: str, parse: str) -> dict:
    """What eval records and scores for the completion ``parse`` (``describe_prompt``'s ``parse``): ``answer``,
    ``answer_point`` (the adapter's parse in its answer frame) and eval's reading (``parsed_point``, ``refusal``,
    ``format_error``, ``scored_as``: :func:`gui_grounding.eval.backends.eval_reading`)."""
    width, height = frame.width, frame.height
    request = Request(messages, None, {"frame": frame}, assistant_prefix=ad.assistant_prefix)
    point = ad.answer_point(request.assistant_prefix + parse)
    reading = eval_reading(Sample("prompt", instruction, "", [], width, height), request, parse, ad)
    return {
        "answer": parse,
        "answer_point": list(point) if point is not None else None,
        "parsed_point": reading["point"],
        "refusal": reading["refusal"],
        "format_error": reading["format_error"],
        "scored_as": reading["scored_as"],
    }


def _zoom_turns(ad, budget, frame, instruction: str, max_calls: int) -> dict:
    """The two turns of ``--tts zoom-tool`` for one screenshot (``describe_prompt``'s ``zoom_tool``): turn 1 with the
    tool block, and turn 2 after an example call on the middle half of the answer frame, built as eval builds them
    (``gui_grounding.eval.tts``: ``zoom_tool.region_window``, the crop's frame under ``budget``).

    Raises:
        ValueError: the adapter has no tool-call format (``Adapter.supports_zoom_tool``), or the example crop
            cannot be sent under the budget.
    """
    turn_1 = ad.zoom_messages(instruction, frame, image_block=True, max_calls=max_calls)
    w, h = ad.answer_size(frame)
    call = zoom.call_text([w / 4, h / 4, 3 * w / 4, 3 * h / 4])
    region = zoom.parse_call(call).region  # the call as eval reads it
    window = zoom.region_window(region, ad, frame)
    if isinstance(window, str):
        raise ValueError(f"the example zoom call on a {frame.width}x{frame.height} screenshot is rejected: {window}")
    try:
        crop_frame = budget.frame(window.width, window.height)
    except ValueError as err:
        raise ValueError(f"the example crop {window.width}x{window.height} cannot be sent: {err}") from None
    turn_2 = zoom.next_turn_messages(turn_1, call, ad, crop_frame)
    return {
        "max_calls": max_calls,
        "turn_1": turn_1,
        "example_call": call,
        "window": window.as_list(),
        "crop_size": [window.width, window.height],
        "crop_resized_size": [crop_frame.resized_width, crop_frame.resized_height],
        "turn_2": turn_2,
    }


def _rendered(ad, model: str, budget, instruction: str, messages: list, frame) -> dict:
    """``chat_template_text`` and ``num_tokens`` of the prompt as ``model``'s processor renders it (its pixel
    budget set to the run's) with a blank image of the size sent: the image pads expanded (Qwen-VL, checked
    against the resized size), or the processor's token ids decoded (other families).

    Raises:
        ValueError: the image sent is over the decode guard ``groundwork.validate.DECODE_PIXEL_LIMIT``.
        RuntimeError: the adapter's messages depend on more than the frame, or the processor's grid does not give
            the resized size.
    """
    from PIL import Image

    sent_w, sent_h = frame.resized_width, frame.resized_height
    module = get_vlm_module(model)
    processor = module.load_processor(model)
    budget.apply(processor, module)
    if sent_w * sent_h > validate.DECODE_PIXEL_LIMIT:
        raise ValueError(
            f"the {ad.name} adapter sends a {sent_w}x{sent_h} image; over "
            f"{validate.DECODE_PIXEL_LIMIT:,} pixels, it is not rendered for --model"
        )
    sample = Sample("prompt", instruction, "", [], sent_w, sent_h)
    request = ad.build_request(sample, Image.new("RGB", (sent_w, sent_h), (255, 255, 255)), budget=budget)
    if request.messages != messages:  # the request for the sent size must be the request for the original
        raise RuntimeError(f"the {ad.name} adapter's messages depend on more than the frame")
    text = processor.apply_chat_template(request.messages, tokenize=False, add_generation_prompt=True)
    batch = processor(text=[text], images=[request.image], return_tensors="pt")
    if "image_grid_thw" not in batch:  # not a Qwen-VL processor: its own expansion, decoded
        return {
            "chat_template_text": processor.tokenizer.decode(batch["input_ids"][0], skip_special_tokens=False),
            "num_tokens": len(batch["input_ids"][0]),
        }
    if budget.factor is None:  # a tiling family's adapter (InternVL) on a checkpoint that patches (Qwen-VL)
        raise ValueError(
            f"the {ad.name} adapter tiles the image (no smart_resize frame), but {model} is a checkpoint whose "
            "processor resizes to a patch grid: use an adapter of the checkpoint's family (--adapter, or none)"
        )
    _, grid_h, grid_w = (int(v) for v in batch["image_grid_thw"][0])
    merge = int(processor.image_processor.merge_size)
    image_w, image_h = request.image.size  # the stated frame, or smaller where the budget reshrinks it
    if (grid_w * budget.factor // merge, grid_h * budget.factor // merge) != (image_w, image_h):
        raise RuntimeError(f"processor grid {grid_w}x{grid_h} does not match the size sent {image_w}x{image_h}")
    n_image_tokens = grid_h * grid_w // (merge * merge)
    return {
        "chat_template_text": text.replace(IMAGE_PAD, IMAGE_PAD * n_image_tokens),
        "num_tokens": len(batch["input_ids"][0]),
    }


def _run(args: argparse.Namespace) -> None:
    if args.adapter is None and args.model is None and args.profile is None:
        raise SystemExit(
            "gui-grounding prompt: error: give --adapter, --profile, or --model to use its family's adapter"
        )
    try:
        names = ("model", "min_pixels", "max_pixels", "max_tiles", "profile", "parse", "zoom_tool", "max_zoom_calls")
        info = describe_prompt(args.adapter, args.image_size, args.instruction, **flag_values(args, *names))
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
    budgets = "; ".join(
        f"{name}: " + (f"{b.min_pixels:,}..{b.max_pixels:,}" if b.resizes else f"{b.max_tiles} tiles")
        for name, b in ((n, c.default_budget) for n, c in ADAPTERS.items())
    )
    p = sub.add_parser(
        "prompt",
        help="print the chat messages (and, with --model, the tokens) an adapter sends",
        description="Print, as JSON, the resized image size and the chat messages an adapter sends for "
        "a screenshot of the given size; with --model also the chat-template text the model reads "
        "(image pad tokens expanded) and its token count. Default pixel budgets (published inference "
        f"settings, see gui_grounding/models/adapters/): {budgets}.",
    )

    p.add_argument(
        "--adapter",
        default=None,
        choices=sorted(ADAPTERS),
        help="prompt + coordinate convention; default: "
        "--profile's, else with --model the checkpoint's config.model_type default (as gui-grounding "
        "eval)",
    )
    p.add_argument(
        "--profile",
        default=None,
        choices=list(PROFILES),
        help="a published checkpoint's pinned settings (adapter and pixel budget; `gui-grounding profiles` lists them)",
    )
    p.add_argument(
        "--parse",
        default=None,
        type=text,
        metavar="ANSWER",
        help="also print what gui-grounding eval records for this completion (eval's own parse and reader): "
        "the point in original pixels, the refusal flag, or the format error it scores wrong_format",
    )
    p.add_argument(
        "--image-size",
        required=True,
        type=_image_size_arg,
        metavar="WxH",
        help="screenshot size in pixels, e.g. 1920x1080",
    )
    p.add_argument(
        "--instruction",
        required=True,
        type=text,
        help="the element description, e.g. 'Click the search box' (UTF-8 text)",
    )
    p.add_argument("--model", default=None, help="local checkpoint: also print chat_template_text and num_tokens")
    p.add_argument(
        "--zoom-tool",
        action="store_true",
        help="also print the two turns of gui-grounding eval --tts zoom-tool: turn 1 with the zoom tool offered, "
        "turn 2 after an example call (the middle half of the screenshot) and the tool's response",
    )
    add_number_flag(
        p,
        "--max-zoom-calls",
        integer(min=1, max=MAX_ZOOM_CALLS),
        DEFAULT_ZOOM_CALLS,
        "with --zoom-tool: zoom calls offered in the prompt (as gui-grounding eval --max-zoom-calls)",
    )
    px = integer(min=1)
    add_number_flag(
        p,
        "--min-pixels",
        px,
        None,
        "pixel budget min_pixels (default: --profile's, else the checkpoint's recorded budget, else the adapter's "
        "published one)",
    )
    add_number_flag(p, "--max-pixels", px, None, "pixel budget max_pixels (same defaults as --min-pixels)")
    add_number_flag(p, "--max-tiles", px, None, "InternVL: pixel budget max_tiles (same defaults as --min-pixels)")
    p.set_defaults(func=_run)
