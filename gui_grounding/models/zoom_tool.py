"""The learned zoom-in tool: its description in the prompt, the parser of a call, the window it crops, and the way a
point answered in the crop maps back to the screenshot. One home for training (``gui_grounding.training.zoom``: the
rollout environment and the stage rewards) and evaluation (``gui-grounding eval --tts zoom-tool``), below both.

The tool (issue 30; the form follows GUI-Eyes, arXiv 2601.09770, and GUI-C², arXiv 2605.30884: a first stage that
picks a region, a second that answers in it):

* In its first turn the model either answers the click, or calls ``zoom`` with a region ``bbox_2d = [x1, y1, x2, y2]``
  **in its adapter's answer frame** (resized pixels for Qwen2.5-VL/GTA1, 0-1000 for Qwen3-VL) in the family's tool-call
  format: Qwen's Hermes block (``<tool_call>{"name": "zoom", "arguments": {"bbox_2d": [...]}}</tool_call>``), whose
  description goes into the system turn as Qwen2.5's and Qwen3-VL's chat templates write a ``tools`` list
  (``# Tools`` ... ``<tools>`` JSON ``</tools>`` ... the ``<tool_call>`` format; the same block qwen-agent's
  ``NousFnCallPrompt`` writes for Qwen2.5-VL).
* The region maps to original pixels (``Adapter.point_to_original`` of its two corners), is **clamped** to the image
  and rounded outwards to whole pixels (:func:`region_window`): a :class:`~gui_grounding.models.frames.CropWindow`.
* The crop (``CropWindow.crop`` of the screenshot in its displayed frame) is resized by the run's pixel budget like
  any image (``groundwork.pixel_budget.resize_for_model``) and returned in a user turn ``<tool_response>`` image
  ``</tool_response>`` (how both templates render a tool message), with the crop's size in the answer frame.
* The model then answers in the crop's frame; :func:`crop_point_to_original` maps it back: answer frame of the crop
  -> crop pixels (``Adapter.point_to_original`` with the crop's frame) -> screenshot pixels (``CropWindow.to_image``,
  an integer offset: exact). ``--tts zoom`` uses the same ``CropWindow`` maths.

Hostile calls (issue 30 item 8) never raise; each gives a reason code (:data:`REJECTS`), and the rollout ends there
(its final answer is the call, which scores 0). Values the number rule refuses (``answer_numbers``: more than 12
digits, beyond +-1e7, NaN/Infinity tokens, which strict JSON refuses too) make the call ``malformed``.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from groundwork.records import strict_loads
from groundwork.validate import is_coord
from gui_grounding.models.frames import CropWindow, Frame

ZOOM_TOOL_NAME = "zoom"
#: the function schema of the tool (JSON schema of the arguments, as chat templates take a ``tools`` list)
ZOOM_TOOL_SCHEMA = {
    "type": "function",
    "function": {
        "name": ZOOM_TOOL_NAME,
        "description": "See a region of the screen enlarged; then answer in the enlarged image's coordinates.",
        "parameters": {
            "type": "object",
            "properties": {
                "bbox_2d": {
                    "type": "array",
                    "items": {"type": "number"},
                    "description": "[x1, y1, x2, y2] in your answer's coordinates",
                }
            },
            "required": ["bbox_2d"],
        },
    },
}
# the system-turn text Qwen2.5's and Qwen3-VL's chat templates write for a ``tools`` list (their Jinja templates, the
# "# Tools" block; also qwen-agent's NousFnCallPrompt): a format the checkpoints were trained on, so it is kept exactly
HERMES_TOOLS_HEADER = (
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function "
    "signatures within <tools></tools> XML tags:\n<tools>\n"
)
HERMES_TOOLS_FOOTER = (
    "\n</tools>\n\nFor each function call, return a json object with function name and arguments within "
    '<tool_call></tool_call> XML tags:\n<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n'
    "</tool_call>"
)
_TOOL_CALL = re.compile(r"<tool_call>(.*?)</tool_call>", re.S)
TOOL_CALL_OPEN = "<tool_call>"
#: the largest call text parsed (a longer one is ``malformed``): a bbox call is under 100 characters
MAX_CALL_CHARS = 4096

#: reason codes of a call that does not zoom (the rollout ends; counted as ``zoom/rejected/<code>`` in the logs)
REJECTS = (
    "malformed",  # not one JSON object {"name": "zoom", "arguments": {"bbox_2d": [4 numbers]}}, or a number no coordinate
    "several_calls",  # more than one <tool_call> in one turn
    "inverted",  # x1 > x2 or y1 > y2
    "outside_image",  # nothing of the region is inside the image
    "degenerate",  # under one pixel wide or high once clamped to the image
    "unsendable",  # a crop the pixel budget cannot send (aspect ratio over 200)
    "over_limit",  # a call after --max_zoom_calls calls
)


@dataclass(frozen=True)
class ZoomCall:
    """One parsed call: ``region`` (x1, y1, x2, y2) in the answer frame, or ``reason`` (one of :data:`REJECTS`)."""

    region: tuple[float, float, float, float] | None = None
    reason: str | None = None


def tool_block(schemas: Sequence[dict] = (ZOOM_TOOL_SCHEMA,)) -> str:
    """The Hermes tool block for the system turn: header, one JSON schema per line (``json.dumps`` defaults, as the
    templates' ``tojson``), footer."""
    return HERMES_TOOLS_HEADER + "\n".join(json.dumps(s) for s in schemas) + HERMES_TOOLS_FOOTER


def call_text(region: Sequence[float]) -> str:
    """The call of the tool on ``region`` (integers, as the models write coordinates): the SFT target of a zoom turn.

    >>> call_text([10, 20.4, 50, 60])
    '<tool_call>\\n{"name": "zoom", "arguments": {"bbox_2d": [10, 20, 50, 60]}}\\n</tool_call>'
    """
    args = {"bbox_2d": [int(round(v)) for v in region]}
    return TOOL_CALL_OPEN + "\n" + json.dumps({"name": ZOOM_TOOL_NAME, "arguments": args}) + "\n</tool_call>"


def is_call(text: str) -> bool:
    """True when ``text`` holds a tool call (then it is no final answer, even if a parser would find a point in it)."""
    return isinstance(text, str) and TOOL_CALL_OPEN in text


def parse_call(text: str) -> ZoomCall | None:
    """The zoom call of one turn, or ``None`` when the turn calls no tool (a final answer). Total: any text gives
    ``None`` or a :class:`ZoomCall`; a call that is not exactly one ``zoom`` call on four coordinates has a reason."""
    if not is_call(text):
        return None
    bodies = _TOOL_CALL.findall(text)
    if len(bodies) > 1:
        return ZoomCall(reason="several_calls")
    if len(bodies) != 1 or len(bodies[0]) > MAX_CALL_CHARS:
        return ZoomCall(reason="malformed")  # an opened call never closed, or absurdly long
    try:
        value = strict_loads(bodies[0].strip())
    except (ValueError, RecursionError):
        return ZoomCall(reason="malformed")
    if not isinstance(value, dict) or value.get("name") != ZOOM_TOOL_NAME or set(value) != {"name", "arguments"}:
        return ZoomCall(reason="malformed")
    args = value["arguments"]
    box = args.get("bbox_2d") if isinstance(args, dict) and set(args) == {"bbox_2d"} else None
    if not isinstance(box, list) or len(box) != 4:
        return ZoomCall(reason="malformed")
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) and is_coord(v) for v in box):
        return ZoomCall(reason="malformed")  # the number rule of every answer (groundwork.validate.is_coord)
    x1, y1, x2, y2 = (float(v) for v in box)
    if x1 > x2 or y1 > y2:
        return ZoomCall(reason="inverted")
    return ZoomCall(region=(x1, y1, x2, y2))


def region_window(region: Sequence[float], adapter, frame: Frame) -> CropWindow | str:
    """The crop window (original pixels) of a ``region`` in ``adapter``'s answer frame of the screenshot ``frame``,
    or a reason code: corners mapped with ``adapter.point_to_original``, clamped to ``[0, W] x [0, H]``, then rounded
    outwards (``floor`` of the low edges, ``ceil`` of the high ones) so the window covers the whole region.

    Returns ``"outside_image"`` when nothing of the region is inside the image and ``"degenerate"`` when the clamped
    window is under one pixel wide or high."""
    x1, y1 = adapter.point_to_original((region[0], region[1]), frame)
    x2, y2 = adapter.point_to_original((region[2], region[3]), frame)
    if not all(math.isfinite(v) for v in (x1, y1, x2, y2)):
        return "malformed"
    if x2 <= 0 or y2 <= 0 or x1 >= frame.width or y1 >= frame.height:
        return "outside_image"
    x_min, y_min = max(0, math.floor(x1)), max(0, math.floor(y1))
    x_max, y_max = min(frame.width, math.ceil(x2)), min(frame.height, math.ceil(y2))
    if x_max - x_min < 1 or y_max - y_min < 1 or x2 - x1 <= 0 or y2 - y1 <= 0:
        return "degenerate"
    return CropWindow(int(x_min), int(y_min), int(x_max), int(y_max))


def crop_point_to_original(point: Sequence[float], adapter, crop_frame: Frame, window: CropWindow) -> tuple:
    """A point answered in the crop (``adapter``'s answer frame of ``crop_frame``, the crop's frame) -> pixels of
    the original screenshot: ``window.to_image(adapter.point_to_original(point, crop_frame))``."""
    return window.to_image(adapter.point_to_original(point, crop_frame))


def response_text(adapter, crop_frame: Frame) -> str:
    """The text of the tool's answer after the crop image: its size in the answer frame for a resized-pixel family
    (whose prompt states the screenshot's size: "The image resolution is height H and width W"), nothing for the
    families whose frame is relative (0-1000) or original pixels of the crop."""
    if adapter.answer_frame != "resized":
        return ""
    return f"The zoomed image resolution is height {crop_frame.resized_height} and width {crop_frame.resized_width}."


def response_messages(adapter, crop_frame: Frame, *, image_block: bool = True) -> list[dict]:
    """The tool's answer as one user turn: ``<tool_response>``, the crop image, :func:`response_text`,
    ``</tool_response>`` (Qwen2.5's and Qwen3-VL's templates render a ``tool`` message this way). ``image_block``
    False: the image part is left out (the readable form of a predictions line)."""
    tail = response_text(adapter, crop_frame)
    parts = [{"type": "text", "text": "<tool_response>\n"}]
    if image_block:
        parts.append({"type": "image"})
    parts.append({"type": "text", "text": ("\n" + tail if tail else "") + "\n</tool_response>"})
    return [{"role": "user", "content": parts}]


def next_turn_messages(
    messages: list[dict], call: str, adapter, crop_frame: Frame, *, image_block: bool = True
) -> list[dict]:
    """The messages of the turn after a call: ``messages`` (the turn that was asked), the model's ``call`` as an
    assistant turn, then the tool's answer (:func:`response_messages`) with the crop of frame ``crop_frame``. The one
    form of a zoom turn (``--tts zoom-tool``, ``gui-grounding prompt --zoom-tool``)."""
    return [
        *messages,
        {"role": "assistant", "content": [{"type": "text", "text": call}]},
        *response_messages(adapter, crop_frame, image_block=image_block),
    ]


def with_tool(messages: list[dict], max_calls: int = 1) -> list[dict]:
    """``messages`` (an adapter's prompt) with the tool block appended to the system turn (a system turn is added
    first when the prompt has none), and how many calls are allowed. Content blocks stay blocks, strings strings."""
    limit = f"\n\nYou may call {ZOOM_TOOL_NAME} at most {max_calls} time{'s' if max_calls != 1 else ''}."
    text = tool_block() + limit
    out = [dict(m) for m in messages]
    if out and out[0]["role"] == "system":
        content = out[0]["content"]
        if isinstance(content, str):
            out[0]["content"] = content + "\n\n" + text
        else:
            out[0]["content"] = [*content, {"type": "text", "text": "\n\n" + text}]
        return out
    block = text if messages and isinstance(messages[0]["content"], str) else [{"type": "text", "text": text}]
    return [{"role": "system", "content": block}, *out]
