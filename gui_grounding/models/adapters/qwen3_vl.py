"""Qwen3-VL family (``config.model_type == "qwen3_vl"``; also Gelato, Holo2): JSON points on a ``[0, 1000]`` grid
relative to the image (answer frame ``norm1000``)."""

from __future__ import annotations

import json
import re

from groundwork.pixel_budget import PixelBudget
from gui_grounding.models.adapters.base import _fmt
from gui_grounding.models.adapters.qwen2_vl import Norm1000Adapter
from gui_grounding.models.profile_types import ONE_GPU, Profile, PublishedScore
from gui_grounding.models.prompts import answer_numbers, parse_json_point, parse_point_or_box

# Qwen3-VL: patch 16 x spatial merge 2 (transformers Qwen3VLVisionConfig patch_size 16, spatial_merge_size 2). API
# backends only; the training/hf path reads the factor from the loaded processor (vlm_r1.modules).
QWEN3_FACTOR = 32
# The Qwen3-VL processor default: preprocessor_config.json size {"shortest_edge": 65536, "longest_edge": 16777216}
# (Qwen3-VL-8B-Instruct's file as quoted in QwenLM/Qwen3-VL#1836; huggingface/transformers#41955 names 16,777,216 as
# the Qwen3-VL default max_pixels). Not re-read from the hub here.
QWEN3_VL_MIN_PIXELS, QWEN3_VL_MAX_PIXELS = 65_536, 16_777_216
QWEN3_VL_BUDGET = PixelBudget.published(
    "no published grounding budget: the Qwen3-VL processor default (preprocessor_config.json size shortest_edge "
    "65536, longest_edge 16777216; QwenLM/Qwen3-VL#1836; patch 16 x merge 2)",
    factor=QWEN3_FACTOR,
    min_pixels=QWEN3_VL_MIN_PIXELS,
    max_pixels=QWEN3_VL_MAX_PIXELS,
)

# Qwen3-VL pointing request. Source: QwenLM/Qwen3-VL cookbooks/spatial_understanding.ipynb, which states the point
# format `{"point_2d": [x, y], "label": "object name/description"}` and prompts e.g. "Locate the free space on the white
# table on the right in this image. Output the point coordinates in JSON format."; its plot helper maps x/1000*W.
QWEN3_VL_POINT_PROMPT = (
    'Locate the UI element that matches the instruction "{instruction}" in this screenshot. '
    'Output the point coordinates in JSON format like {{"point_2d": [x, y], "label": "element"}}.'
)


class Qwen3VLAdapter(Norm1000Adapter):
    """Qwen3-VL convention (also Gelato, Holo2): 0-1000 relative coordinates, JSON points.

    * Image: smart_resized once under the run's pixel budget (``default_budget``: the Qwen3-VL processor default,
      factor 32, 65,536 .. 16,777,216 pixels; no published grounding budget), exactly what the processor would do
      itself; relative values map straight onto the original (QwenLM/Qwen3-VL#1640).
    * Prompt: no system prompt; user = image, then ``Locate the UI element that matches the instruction
      "{instruction}" in this screenshot. Output the point coordinates in JSON format like {"point_2d": [x, y],
      "label": "element"}.`` Source: QwenLM/Qwen3-VL ``cookbooks/spatial_understanding.ipynb`` (point format
      ``{"point_2d": [x, y], "label": ...}``, request "Output the point coordinates in JSON format.").
    * Parse: the first ``"point_2d": [x, y]`` (in a list and/or a ```` ```json ```` fence too), else the centre of the
      first ``"bbox_2d": [x1, y1, x2, y2]``, else a ``(x,y)`` / box as for ``qwen2-vl``; then ``x/1000*W``,
      ``y/1000*H`` (``Frame.point_from_norm1000``).
    * SFT target: ``{"point_2d": [x, y], "label": "element"}`` on the 0-1000 grid (the cookbook's format).
    """

    name = "qwen3-vl"
    model_types = ("qwen3_vl", "qwen3_vl_moe")
    template = QWEN3_VL_POINT_PROMPT
    default_budget = QWEN3_VL_BUDGET
    supports_zoom_tool = True  # Qwen's Hermes tool calls (gui_grounding.models.zoom_tool)

    def parse_answer(self, text, *, strict=True):
        return parse_json_point(text) or parse_point_or_box(text)

    def sft_target(self, box, instruction):
        x, y = self._centre(box)
        return json.dumps({"point_2d": [int(_fmt(x)), int(_fmt(y))], "label": "element"})


ADAPTERS = (Qwen3VLAdapter,)


# ---------------------------------------------------------------------------------------------------------------------
# this family's published checkpoints (``PROFILES``, collected by gui_grounding.models.profiles); sources: public
# repositories at the commits named, model cards by URL
PROFILES = (
    Profile(
        "qwen3-vl-8b",
        "Qwen/Qwen3-VL-8B-Instruct",
        "qwen3_vl",
        "qwen3-vl",
        QWEN3_VL_BUDGET,
        512,
        ONE_GPU,
        {
            "adapter": "QwenLM/Qwen3-VL cookbooks/spatial_understanding.ipynb (point_2d JSON on the 0-1000 grid); a "
            "paraphrase of its pointing request, not the request behind the published numbers (notes)",
            "max_new_tokens": "ZJU-REAL/ClawGUI clawgui-eval/scripts/infer/transformers/qwen3vl_run_transformers.sh:21-22 "
            "(d990d3e): MAX_TOKENS=512, TEMPERATURE=0.0 (its reproduction of the official 54.6)",
            "backends": "8B: one GPU",
        },
        {},
        (
            PublishedScore(
                "screenspot-pro", 54.6, "ZJU-REAL/ClawGUI clawgui-eval/README.md:462 (d990d3e), 'official' column"
            ),
        ),
        "pixel budget as ClawGUI pins it (clawgui-eval/scripts/infer/transformers/qwen3vl_run_transformers.sh:29-30: "
        "MIN_PIXELS=65536, MAX_PIXELS=16777216, the processor default). Qwen's own GUI numbers use a computer_use "
        "tool-call system prompt (ClawGUI injects it from its data files, SYSTEM_PROMPT=call_user, :43). A Qwen3-VL "
        "contributor shared the OSWorld-G request as two issue attachments (QwenLM/Qwen3-VL#1881: "
        "qwen3vl_osworld_g.py, agent_function_call_og.py); they could not be read here, so their system prompt, "
        "tool schema, image budget and parser are UNVERIFIED and not reproduced. This profile keeps the cookbook "
        "pointing request, labelled a paraphrase: expect a gap",
    ),
)


# =====================================================================================================================
# 2026 checkpoints on Qwen3-VL (issue 31 item 4): UI-Venus-1.5, MAI-UI, GUI-Owl-1.5. Each adapter is its authors'
# published grounding request, pinned at a commit; every profile below says what could not be read.
# =====================================================================================================================
_VENUS = "inclusionAI/UI-Venus (branch UI-Venus-1.5, c3a1442)"
_VENUS_GD = f"{_VENUS} models/grounding/ui_venus1_5_gd.py"
_MAI = "Tongyi-MAI/MAI-UI (4dd07b9)"
_MAI_SERVER = f"{_MAI} evaluation/grounding/eval_server.py"
_OWL = "X-PLUG/MobileAgent (11cea57)"
_OWL_EVAL = f"{_OWL} Mobile-Agent-v3.5/grounding_and_kb/eval_grounding_benchmarks.py"
_CLAWGUI = "ZJU-REAL/ClawGUI clawgui-eval/README.md (d990d3e)"
_QWEN_VL_UTILS = "QwenLM/Qwen3-VL qwen-vl-utils/src/qwen_vl_utils/vision_process.py (9658872, version 0.0.14)"

# ---- UI-Venus-1.5 ---------------------------------------------------------------------------------------------------
# The request with the refusal clause (the default, do_not_use_refusal=False), byte for byte: ui_venus1_5_gd.py:75
# (identical in models/grounding/eval_screenspot_pro.py:91); the instruction loses one trailing "." first (:69-70).
UI_VENUS_15_PROMPT = (
    "Output the center point of the position corresponding to the following instruction: \n{instruction}. \n\n"
    "The output should just be the coordinates of a point, in the format [x,y]. Additionally, if the task is "
    "infeasible (e.g., the task is not related to the image), the output should be [-1,-1]."
)
# The image goes through qwen_vl_utils.process_vision_info with no bounds in the message (ui_venus1_5_gd.py:79-93),
# i.e. qwen-vl-utils >= 0.0.14 (requirements.txt:7) at its default image_patch_size 14: factor 28, 3,136 ..
# 12,845,056 pixels (vision_process.py:25-27,93-140,501-515); then the checkpoint's own Qwen3-VL processor resizes again
# to its factor 32 (AutoProcessor.from_pretrained with no bounds, :36). One smart_resize cannot be both: this keeps
# the first step's pixel cap and the second step's factor. Computed with both rules, the image sent is the same for
# 1920x1080, 2560x1440, 2880x1800 and 5120x2880 screenshots and one factor step taller for 3840x2160 (official
# 3840x2144, here 3840x2176), 3456x2160 (3456x2144 / 3456x2176) and 1280x720 (1280x736 / 1280x704). The processor's
# lower bound (65,536) is the Qwen3-VL default, not re-read from this checkpoint's preprocessor_config.json.
UI_VENUS_15_BUDGET = PixelBudget.published(
    f"{_VENUS_GD}:79-93 (no bounds in the image message: qwen_vl_utils defaults, {_QWEN_VL_UTILS}:25-27,93-140: "
    "max 16384*28*28 = 12,845,056) then the Qwen3-VL processor's factor 32 (min 65,536, its default; unverified for "
    "this checkpoint); one smart_resize approximating the two (see qwen3_vl.py)",
    factor=QWEN3_FACTOR,
    min_pixels=QWEN3_VL_MIN_PIXELS,
    max_pixels=16384 * 28 * 28,
)
# ui_venus1_5_gd.py:141-143: a box, a point, two points; integers with optional sign and spaces inside the brackets
_VENUS_INT = r"\s*(-?\d+)\s*"
_VENUS_BOX_RE = re.compile(rf"\[{_VENUS_INT},{_VENUS_INT},{_VENUS_INT},{_VENUS_INT}\]")
_VENUS_POINT_RE = re.compile(rf"\[{_VENUS_INT},{_VENUS_INT}\]")
_VENUS_TWO_POINTS_RE = re.compile(rf"\[{_VENUS_INT},{_VENUS_INT}\],\s*\[{_VENUS_INT},{_VENUS_INT}\]")
# what Python's int() reads in the fallback branch (:161): optional spaces and sign, decimal digits (Unicode ones
# too, as int() does; its digit-group underscores are not read here)
_INT_ITEM_RE = re.compile(r"\s*([+-]?\d+)\s*")
# eval() of the matched text (:150,154,157) reads Python source: ASCII digits, and between them only the whitespace
# Python's tokenizer takes (space, tab, newline, carriage return, form feed), where the patterns' \s and \d match more
_EVAL_TEXT_RE = re.compile(r"[\[\],\-0-9 \t\n\r\f]*")
# ... and it refuses a decimal literal with a leading zero ("05"; "0" and "00" are fine)
_EVAL_BAD_LITERAL_RE = re.compile(r"-?0+[1-9]")
# the two-points branch matches the answer with its spaces removed but evaluates it with them: "1 2" is then no number
_SPACE_JOINED_DIGITS_RE = re.compile(r"\d +\d")


def _venus_literals(match: re.Match, text: str) -> tuple | None:
    """The numbers of a UI-Venus ``eval`` branch's ``match`` as ``eval`` reads ``text`` (``None``: source it refuses,
    or no coordinate by :func:`answer_numbers`)."""
    tokens = match.groups()
    if not _EVAL_TEXT_RE.fullmatch(text) or any(_EVAL_BAD_LITERAL_RE.match(t) for t in tokens):
        return None
    return answer_numbers(tokens)


def ui_venus15_read(text: str) -> tuple[tuple[float, float] | None, bool]:
    """``(point, infeasible)``: what UI-Venus-1.5's own parser reads from an answer, the point on its ``[0, 1000]``
    grid (``None``: it reads none) and whether it is the "infeasible" answer ``[-1, -1]``.

    Source: inclusionAI/UI-Venus ``models/grounding/ui_venus1_5_gd.py:130-172`` (c3a1442), in order, on the stripped
    answer: the whole answer a box ``[x1,y1,x2,y2]`` -> its centre; a point ``[x,y]``; two points ``[x1,y1],[x2,y2]``
    (spaces ignored) -> their midpoint; else the comma-separated integers between the first ``[`` and the first ``]``
    (at least two; the first two are the point, so ``see [1,2,3] here`` reads as (1, 2)). ``infeasible``: that
    reading equals ``[-1, -1]`` (:164-165; a box or two points whose centre is (-1, -1) too; a fallback list of three
    or more numbers never, its first two are then a point). The three ``eval`` branches read nothing (no fallback)
    where Python refuses the source: a leading zero (``[05,10]``), non-ASCII digits or whitespace; decimals are read
    by no branch. Values beyond the project's coordinate rule
    (:func:`answer_numbers`) read as nothing."""
    s = text.strip()
    point = None
    if m := _VENUS_BOX_RE.fullmatch(s):
        box = _venus_literals(m, s)
        point = None if box is None else ((box[0] + box[2]) / 2, (box[1] + box[3]) / 2)
    elif m := _VENUS_POINT_RE.fullmatch(s):
        point = _venus_literals(m, s)
    elif m := _VENUS_TWO_POINTS_RE.fullmatch(s.replace(" ", "")):
        p = None if _SPACE_JOINED_DIGITS_RE.search(s) else _venus_literals(m, s)
        point = None if p is None else ((p[0] + p[2]) / 2, (p[1] + p[3]) / 2)
    else:
        parts = s.split("]", 1)[0].split("[")
        items = [_INT_ITEM_RE.fullmatch(item) for item in parts[1].split(",")] if len(parts) > 1 else []
        if len(items) < 2 or not all(items):
            return None, False
        point = answer_numbers([items[0].group(1).lstrip("+"), items[1].group(1).lstrip("+")])
        return point, point is not None and len(items) == 2 and tuple(point) == (-1, -1)
    return point, point is not None and tuple(point) == (-1, -1)


class UIVenus15Adapter(Qwen3VLAdapter):
    """UI-Venus-1.5 (inclusionAI/UI-Venus branch UI-Venus-1.5, ``models/grounding/ui_venus1_5_gd.py`` at c3a1442): a
    point on the ``[0, 1000]`` grid, ``[-1,-1]`` when the task is infeasible.

    * Image: smart_resized once under the run's budget (``default_budget``: :data:`UI_VENUS_15_BUDGET`, factor 32,
      65,536 .. 12,845,056 pixels, approximating the official two-step resize; see its comment).
    * Prompt: no system prompt; user = image, then :data:`UI_VENUS_15_PROMPT` with the instruction (one trailing
      ``.`` removed, :69-70), the refusal clause included (the scripts' default, :72-75).
    * Parse (inference): :func:`ui_venus15_read` (the official rules), then ``x/1000*W``, ``y/1000*H``; ``(-1, -1)``
      is the explicit "no target" answer (:meth:`is_no_target`, the official ``"infeasible"`` result, :116-122), not a
      point. Training (``strict``): exactly one ``[x,y]`` of integers, the answer format the prompt asks for.
    * SFT target: ``[x,y]`` on the 0-1000 grid. No zoom tool (no published tool-call format for this request).
    """

    name = "ui-venus-1.5"
    model_types = ()
    template = UI_VENUS_15_PROMPT
    default_budget = UI_VENUS_15_BUDGET
    supports_zoom_tool = False
    # training to refuse: the published answer and prompt (the request already asks for [-1,-1], so no clause is added)
    published_refusal_answer = "[-1,-1]"
    published_refusal_clause = ""
    refusal_source = f"{_VENUS_GD}:72-75 (the request's refusal clause: '[-1,-1]') and :164-165 (read as 'infeasible')"

    def messages(self, instruction, frame, *, image_block=True):
        text = instruction[:-1] if instruction.endswith(".") else instruction
        return self._user_turn(UI_VENUS_15_PROMPT.format(instruction=text), image_block)

    def parse_answer(self, text, *, strict=True):
        if strict:
            m = _VENUS_POINT_RE.fullmatch(text.strip())
            point = answer_numbers(m.groups(), integer=True) if m else None
            infeasible = point is not None and tuple(point) == (-1, -1)
        else:
            point, infeasible = ui_venus15_read(text)
        return None if infeasible else point

    def is_no_target(self, text: str) -> bool:
        """The official parser's ``"infeasible"`` result (:func:`ui_venus15_read`), read by
        :attr:`~gui_grounding.models.adapters.base.Adapter.refusal_reading` (a refusal by default)."""
        return isinstance(text, str) and ui_venus15_read(text)[1]

    def sft_target(self, box, instruction):
        x, y = self._centre(box)
        return f"[{_fmt(x)},{_fmt(y)}]"


# ---- MAI-UI --------------------------------------------------------------------------------------------------------
# The grounding system prompt of MAI-UI's evaluation, byte for byte (eval_server.py:20-31 = models/MAI_UI.py:28-39):
# note the space after "agent.", the two spaces after "instructions," and the final "## Input instruction\n" (the
# agent's src/prompt.py:137-148 copy is stripped and lacks that last line).
MAI_UI_GROUNDING_SYSTEM = (
    "You are a GUI grounding agent. \n"
    "## Task\n"
    "Given a screenshot and the user's grounding instruction. Your task is to accurately locate a UI element based on "
    "the user's instructions.\n"
    "First, you should carefully examine the screenshot and analyze the user's instructions,  translate the user's "
    "instruction into a effective reasoning process, and then provide the final coordinate.\n"
    "## Output Format\n"
    "Return a json object with a reasoning process in <grounding_think></grounding_think> tags, a [x,y] format "
    "coordinate within <answer></answer> XML tags:\n"
    "<grounding_think>...</grounding_think>\n"
    "<answer>\n"
    '{"coordinate": [x,y]}\n'
    "</answer>\n"
    "## Input instruction\n"
)
MAI_UI_BUDGET = PixelBudget.published(
    f"{_MAI_SERVER}:53-59: smart_resize(factor=16*2, min_pixels=16*16*4, max_pixels=6553600) before sending (the local "
    "script's README command passes --max_pixels 6553600 too, evaluation/grounding/README.md:40)",
    factor=QWEN3_FACTOR,
    min_pixels=16 * 16 * 4,
    max_pixels=6_553_600,
)
# eval_server.py:35-41 (= MAI_UI.py:13-19): the first "[x,y]" of unsigned integers, no space allowed
_MAI_COORD_RE = re.compile(r"\[(\d+),(\d+)\]")


class MAIUIAdapter(Qwen3VLAdapter):
    """MAI-UI (Tongyi-MAI/MAI-UI ``evaluation/grounding/eval_server.py`` at 4dd07b9, the vLLM-server evaluation whose
    settings it states): a short reasoning, then ``{"coordinate":[x,y]}`` on the ``[0, 1000]`` grid.

    * Image: smart_resized once (``default_budget``: factor 32, 1,024 .. 6,553,600 pixels, :53-59).
    * Prompt: system = :data:`MAI_UI_GROUNDING_SYSTEM` (one text part); user = **the instruction followed by "\\n",
      then the image** (text before image, :83-88; ClawGUI's table calls it ``tv``). Training rows (``image_block``
      False) are plain strings, where TRL puts the image first: the order holds for evaluation only.
    * Parse: the first ``[x,y]`` of unsigned integers with no spaces anywhere in the answer (:35-41; the reasoning
      included), then ``x/1000*W``, ``y/1000*H`` (:101-104). An answer without one is no point (the server script
      writes ``wrong_format``, :97-99, :112-113). MAI-UI has no "no target" answer.
    * SFT target: ``<grounding_think></grounding_think>`` (empty: we have no reasoning) then the answer block with
      ``{"coordinate":[x,y]}`` as the model writes it. No zoom tool (own system prompt and answer format).
    """

    name = "mai-ui"
    model_types = ()
    default_budget = MAI_UI_BUDGET
    supports_zoom_tool = False

    def messages(self, instruction, frame, *, image_block=True):
        text = instruction + "\n"
        if not image_block:
            return self._system_turn([MAI_UI_GROUNDING_SYSTEM], False) + [{"role": "user", "content": text}]
        return self._system_turn([MAI_UI_GROUNDING_SYSTEM]) + [
            {"role": "user", "content": [{"type": "text", "text": text}, {"type": "image"}]}
        ]

    def parse_answer(self, text, *, strict=True):
        m = _MAI_COORD_RE.search(text)
        return answer_numbers(m.groups()) if m else None

    def sft_target(self, box, instruction):
        x, y = self._centre(box)
        return f'<grounding_think></grounding_think>\n<answer>\n{{"coordinate":[{_fmt(x)},{_fmt(y)}]}}\n</answer>'


# ---- GUI-Owl-1.5 ---------------------------------------------------------------------------------------------------
# The system prompt of GUI-Owl-1.5's grounding evaluation, byte for byte (eval_grounding_benchmarks.py:39,
# ``only_two_action_system_prompt``, trailing newline included): a computer_use tool on a 1000x1000 screen.
GUI_OWL_15_SYSTEM = (
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function "
    'signatures within <tools></tools> XML tags:\n<tools>\n{"type": "function", "function": {"name": "computer_use", '
    '"description": "Use a mouse to interact with a computer.\n* The screen\'s resolution is 1000x1000.\n* Make sure '
    "to click any buttons, links, icons, etc with the cursor tip in the center of the element. Don't click boxes on "
    "their edges unless asked.\n* don't use any other computer use tool like type, key, scroll, left_click_drag and so "
    "on.\n* you can only use the left_click and mouse_move action to interact with the computer. if you can't find the "
    'element, you should terminate the task and report the failure.", "parameters": {"properties": {"action": '
    '{"description": "The action to perform. The available actions are:\n* `mouse_move`: Move the cursor to a '
    "specified (x, y) pixel coordinate on the screen.\n* `left_click`: Click the left mouse button with coordinate "
    '(x, y) pixel coordinate on the screen.", "enum": ["mouse_move", "left_click"], "type": "string"}, "coordinate": '
    '{"description": "(x, y): The x (pixels from the left edge) and y (pixels from the top edge) coordinates to move '
    'the mouse to. Required only by `action=mouse_move` and `action=left_click`.", "type": "array"}}, "required": '
    '["action"], "type": "object"}}}\n</tools>\n\nFor each function call, return a json object with function name and '
    "arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n"
    '{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>\n'
)
# eval_grounding_benchmarks.py:41 (``infesible_prefix``), appended after a newline on OSWorld-G only (:337-339; the
# OSWorldG class defaults add_infesible_prefix=True, :529; the other benchmarks False, :294,475,509)
GUI_OWL_15_INFEASIBLE = (
    "Additionally, if you think the task is infeasible (e.g., the task is not related to the image), return "
    '<tool_call>\n{"name": "computer_use", "arguments": {"action": "terminate", "status": "failure"}}\n</tool_call>'
)
# eval_grounding_benchmarks.py:43-44 (MIN_PIXELS = 196*32*32, MAX_PIXELS = 9800*32*32, the processor's bounds, :597)
# and :141-151,161-184,331 (the image item's own smart_resize: factor 32, at most 9800 tokens of 32x32 pixels). Between
# the two, qwen_vl_utils.process_vision_info (:617, default image_patch_size 14) re-rounds the item's size to factor
# 28 (vision_process.py:123-128); computed for 1280x720 .. 6016x3384 screenshots the final size equals this one
# smart_resize.
GUI_OWL_15_BUDGET = PixelBudget.published(
    f"{_OWL_EVAL}:43-44,141-151,331,597: factor 32, min 196*32*32 = 200,704, max 9800*32*32 = 10,035,200 "
    "(the image item's resize and the processor's bounds)",
    factor=QWEN3_FACTOR,
    min_pixels=196 * 32 * 32,
    max_pixels=9800 * 32 * 32,
)
# eval_grounding_benchmarks.py:388-410: every "(x,y)" (spaces after the comma allowed), else every "[x, y]" with
# exactly one space after the comma; unsigned integers; the LAST one is the answer
_OWL_PAREN_RE = re.compile(r"\((\d+),\s*(\d+)\)")
_OWL_BRACKET_RE = re.compile(r"\[(\d+), (\d+)\]")
_OWL_TERMINATE_RE = re.compile(r'"action"\s*:\s*"terminate"')
_OWL_FAILURE_RE = re.compile(r'"status"\s*:\s*"failure"')


def _last_match(pattern: re.Pattern, text: str):
    """The last match of ``pattern`` in ``text`` (``None``: no match)."""
    last = None
    for match in pattern.finditer(text):
        last = match
    return last


class GUIOwl15Adapter(Qwen3VLAdapter):
    """GUI-Owl-1.5 (X-PLUG/MobileAgent ``Mobile-Agent-v3.5/grounding_and_kb/eval_grounding_benchmarks.py`` at
    11cea57): a ``computer_use`` tool call on a 1000x1000 screen.

    * Image: smart_resized once (``default_budget``: :data:`GUI_OWL_15_BUDGET`, factor 32, 200,704 .. 10,035,200).
    * Prompt: system = :data:`GUI_OWL_15_SYSTEM` (one text part, :340-343); user = image, then the instruction as it is
      (:345-357). The ``gui-owl-1.5-infeasible`` variant appends :data:`GUI_OWL_15_INFEASIBLE` after a newline, as the
      script does on OSWorld-G only.
    * Parse: the **last** ``(x,y)`` of unsigned integers, else the last ``[x, y]`` with exactly one space after the
      comma (:388-410: the tool call's ``"coordinate": [x, y]`` as JSON writes it; ``[x,y]`` without the space is not
      read), on the ``[0, 1000]`` grid (:382-383). The official script turns an answer without a coordinate into the
      point (0, 0) (:409-410); here it is no point, and a ``terminate``/``failure`` tool call (what the prompt asks for
      when the element cannot be found) is the explicit "no target" answer (:meth:`is_no_target`), which the official
      OSWorld-G scorer credits on refusal items as that (0, 0) (:450-454; the profile's ``refusal = "origin"``).
    * SFT target: the ``left_click`` tool call with ``"coordinate": [x, y]``. No zoom tool (own tool list).
    """

    name = "gui-owl-1.5"
    model_types = ()
    default_budget = GUI_OWL_15_BUDGET
    supports_zoom_tool = False
    system_text = GUI_OWL_15_SYSTEM
    # training to refuse: the terminate/failure call the infeasible clause asks for (eval_grounding_benchmarks.py:337-339),
    # the clause appended to the system turn after a newline as the script does on OSWorld-G (:529)
    published_refusal_answer = (
        '<tool_call>\n{"name": "computer_use", "arguments": {"action": "terminate", "status": "failure"}}\n</tool_call>'
    )
    published_refusal_clause = GUI_OWL_15_INFEASIBLE
    refusal_source = f"{_OWL_EVAL}:337-339 (the infeasible clause and its terminate/failure call), :529 (system turn)"

    def with_refusal_clause(self, messages):
        """The clause in the system turn after a newline, as ``gui-owl-1.5-infeasible`` (the script's OSWorld-G
        request); unchanged when that system turn already ends with it."""
        clause = self.refusal_clause()
        if not clause:
            return messages
        out = [dict(m) for m in messages]
        system = out[0]
        if isinstance(system["content"], str):
            if not system["content"].endswith(clause):
                system["content"] = system["content"] + "\n" + clause
        else:
            parts = [dict(p) for p in system["content"]]
            if not parts[-1]["text"].endswith(clause):
                parts[-1]["text"] = parts[-1]["text"] + "\n" + clause
            system["content"] = parts
        return out

    def messages(self, instruction, frame, *, image_block=True):
        return self._system_turn([self.system_text], image_block) + self._user_turn(instruction, image_block)

    def _coordinate(self, text: str):
        return _last_match(_OWL_PAREN_RE, text) or _last_match(_OWL_BRACKET_RE, text)

    def parse_answer(self, text, *, strict=True):
        m = self._coordinate(text)
        return answer_numbers(m.groups()) if m else None

    def is_no_target(self, text: str) -> bool:
        """A ``terminate`` call with status ``failure`` and no coordinate: the prompt's "cannot be found" answer,
        read by :attr:`~gui_grounding.models.adapters.base.Adapter.refusal_reading` (a refusal by default; the
        profiles read it as the point (0, 0) the official script makes of it, ``"origin"``)."""
        return isinstance(text, str) and (
            self._coordinate(text) is None
            and _OWL_TERMINATE_RE.search(text) is not None
            and _OWL_FAILURE_RE.search(text) is not None
        )

    def sft_target(self, box, instruction):
        x, y = self._centre(box)
        call = {
            "name": "computer_use",
            "arguments": {"action": "left_click", "coordinate": [int(_fmt(x)), int(_fmt(y))]},
        }
        return f"<tool_call>\n{json.dumps(call)}\n</tool_call>"


class GUIOwl15InfeasibleAdapter(GUIOwl15Adapter):
    """:class:`GUIOwl15Adapter` with the infeasible clause in the system turn (``GUI_OWL_15_SYSTEM + "\\n" +
    GUI_OWL_15_INFEASIBLE``): GUI-Owl-1.5's OSWorld-G request (eval_grounding_benchmarks.py:337-339, :529)."""

    name = "gui-owl-1.5-infeasible"
    system_text = GUI_OWL_15_SYSTEM + "\n" + GUI_OWL_15_INFEASIBLE
    published_refusal_clause = ""  # the system turn already holds it


ADAPTERS = (*ADAPTERS, UIVenus15Adapter, MAIUIAdapter, GUIOwl15Adapter, GUIOwl15InfeasibleAdapter)

# ---- the 2026 checkpoints' profiles (appended to this family's PROFILES) ------------------------------------------
_ZOOM_NOTE = (
    "the authors' ZoomIn: its procedure is unpublished (no zoom code in inclusionAI/UI-Venus at c3a1442; the technical "
    "report, arXiv 2602.09082, could not be read); not comparable with --tts zoom"
)
_CLAWGUI_OFFICIAL = "'official' column, a third party's listing (the authors' report table could not be read)"


def _venus15(benchmark: str, plain: float, zoom: float, **kw) -> tuple[PublishedScore, PublishedScore]:
    """A UI-Venus-1.5-8B README row cell: the plain number and the authors' ZoomIn one beside it."""
    return (
        PublishedScore(benchmark, plain, f"{_VENUS} README.md:210", **kw),
        PublishedScore(benchmark, zoom, f"{_VENUS} README.md:211", variant="authors' ZoomIn", note=_ZOOM_NOTE, **kw),
    )


_OSWG_PLAIN_NOTE = (
    "the README column says 'OSworld-G'; plain is inferred (unverified): its MAI-UI-8B row (60.1) is MAI-UI's plain "
    "number (Refined: 68.6); which refusal rule is not stated"
)
_MAI_TABLE = f"{_MAI} evaluation/grounding/README.md:86, 'MAI-UI-8B (Tech Report)' row"
_MAI_OSWG_NOTE = (
    "denominator per the released harness: data/OS_G_data (and OS_G_Refine_data) hold the 564 items with the 54 "
    "refusal items as box [0,0,0,0], scored by point-in-box (a miss unless the answer is exactly [0,0]; its "
    "output_local/OS_G.json scores 0 of 54); polygons are scored as the rectangle of their first four numbers"
)
_OWL_CLAWGUI = f"{_CLAWGUI}:459 (GUI-Owl 1.5-8B), {_CLAWGUI_OFFICIAL}"

PROFILES = (
    *PROFILES,
    Profile(
        "ui-venus-1.5-8b",
        "inclusionAI/UI-Venus-1.5-8B",
        "qwen3_vl",
        "ui-venus-1.5",
        UI_VENUS_15_BUDGET,
        128,
        ONE_GPU,
        {
            "adapter": f"{_VENUS_GD}:68-75 (the request with the refusal clause; one trailing '.' removed), :79-87 "
            "(image, then text; no system turn), :130-172 (parser; /1000), :116-122 ([-1,-1] is 'infeasible')",
            "max_new_tokens": f"{_VENUS_GD}:104 (generate(max_new_tokens=128)); greedy: :38-44 and "
            "models/grounding/eval_screenspot_pro_ddp.py:102 (do_sample=False, temperature 0). The auto-mode script "
            "(models/grounding/eval_screenspot_pro.py:72-76,118-121) passes 256 and leaves sampling to the "
            "checkpoint's generation_config.json (not read)",
            "backends": "8B: one GPU",
            "model": "model_type qwen3_vl unverified: the checkpoint's config.json and HF card "
            "(huggingface.co/inclusionAI/UI-Venus-1.5-8B) could not be read beyond its usage widget "
            "(AutoModelForImageTextToText); Qwen3-VL per the technical report's summaries, not the report itself",
            "refusal": f"{_VENUS_GD}:116-122,164-165 ([-1,-1] is the result 'infeasible'); "
            "models/grounding/eval_screenspot_pro.py:273-280 (a negative item is correct iff [-1,-1])",
            "decoding": "greedy only (see max_new_tokens)",
        },
        {},
        (
            *_venus15("venusbench-gd", 72.3, 72.6, denominator="unstated"),
            *_venus15("screenspot-pro", 68.4, 73.9),
            *_venus15("osworld-g", 69.7, 70.6, options={"subset": "plain"}, denominator="unstated"),
            *_venus15("ui-vision", 46.5, 51.7, denominator="unstated"),
            PublishedScore("screenspot-v2", 95.9, f"{_CLAWGUI}:468 (UI-Venus 1.5-8B), {_CLAWGUI_OFFICIAL}"),
            PublishedScore(
                "mmbench-gui-l2",
                88.1,
                f"{_CLAWGUI}:468 (UI-Venus 1.5-8B), {_CLAWGUI_OFFICIAL}",
                denominator="unstated",
            ),
        ),
        "Qwen3-VL-based, answers on the 0-1000 grid. Read: the repository's scripts and README (branch UI-Venus-1.5); "
        "not read: the HF card beyond its usage widget, the technical report beyond its abstract. Pixel budget: one "
        "smart_resize standing for qwen_vl_utils' (factor 28) then the processor's (factor 32); the image sent "
        "differs by one 32-px step for 3840x2160, 3456x2160 and 1280x720 screenshots. OSWorld-G: "
        + _OSWG_PLAIN_NOTE
        + ". VenusBench-GD: whether the refusal subset is scored is not stated (the scripts default to --gt_type "
        "positive, scripts/run_gd_ddp.sh:34). ScreenSpot-V2 and MMBench-GUI L2: ClawGUI's listing",
        refusal="refusal",
    ),
    Profile(
        "mai-ui-8b",
        "Tongyi-MAI/MAI-UI-8B",
        "qwen3_vl",
        "mai-ui",
        MAI_UI_BUDGET,
        256,
        ONE_GPU,
        {
            "adapter": f"{_MAI_SERVER}:20-31 (system prompt), :73-89 (system turn; user turn: the instruction + "
            "'\\n', then the image), :35-41 and :95-104 (first [x,y], /1000); the local script sends the same "
            "(evaluation/grounding/models/MAI_UI.py:21-56) with --use_guide_text False (README.md:27)",
            "max_new_tokens": f"{_MAI_SERVER}:90-91 (temperature=0.0, max_tokens=256); the local batch path uses "
            "temperature 0.01 (models/MAI_UI.py:196)",
            "backends": "8B: one GPU (the authors serve it with vLLM, evaluation/grounding/README.md:52-60)",
            "model": "model_type qwen3_vl unverified (config.json not read): the harness builds Qwen3-VL inputs "
            "(models/MAI_UI.py:58,94-100: patch 16 x merge 2); ClawGUI lists MAI-UI in the Qwen3-VL family",
            "refusal": "MAI-UI has no 'no target' answer; an answer without [x,y] is wrong_format in "
            f"{_MAI_SERVER}:97-99,112-113 (the local script reads it as the point (-1,-1)/1000, models/MAI_UI.py:16-17,"
            "228)",
            "decoding": "greedy only (see max_new_tokens)",
        },
        {},
        (
            PublishedScore(
                "ui-vision",
                40.7,
                _MAI_TABLE,
                denominator="unstated",
                note="the released harness reports the micro average over the three element-grounding files "
                "(eval_local.py:273-289, eval_server.py:228-247); UI-Vision's own headline is their macro average",
            ),
            PublishedScore(
                "mmbench-gui-l2",
                88.8,
                _MAI_TABLE,
                denominator="unstated",
                note="the released harness scores the micro average over the 3,594 items of "
                "data/MMbench_data/MMbench_GUI_sspro_format.json; MMBench-GUI's L2 average is mean(basic, advanced)",
            ),
            PublishedScore("screenspot-pro", 65.8, _MAI_TABLE),
            PublishedScore("screenspot-v2", 95.2, _MAI_TABLE),
            PublishedScore(
                "osworld-g", 60.1, _MAI_TABLE, {"subset": "plain"}, note=_MAI_OSWG_NOTE, denominator="refusal-as-miss"
            ),
            PublishedScore(
                "osworld-g", 68.6, _MAI_TABLE, {"subset": "refined"}, note=_MAI_OSWG_NOTE, denominator="refusal-as-miss"
            ),
        ),
        "Text before image in the user turn. The table also lists the authors' re-runs with the released scripts "
        "(local: 40.9 / 88.9 / 66.1 / 95.1 / 60.9 / 68.7; vLLM server: 40.3 / 88.7 / 67.0 / 94.9 / 61.7 / 69.5, "
        "README.md:87-88); the report's row is pinned. Not read: the technical report (arXiv 2512.22047) and the HF "
        "card. The family's headline numbers (73.5 ScreenSpot-Pro, 70.9 OSWorld-G) are not this 8B's",
    ),
    Profile(
        "gui-owl-1.5-8b",
        "mPLUG/GUI-Owl-1.5-8B-Instruct",
        "qwen3_vl",
        "gui-owl-1.5",
        GUI_OWL_15_BUDGET,
        2048,
        ONE_GPU,
        {
            "adapter": f"{_OWL_EVAL}:39 (system prompt), :330-357 (system turn; user: image, then the instruction), "
            ":382-410 (0-1000 frame; the last (x,y), else the last [x, y]; none -> (0,0))",
            "max_new_tokens": f"{_OWL_EVAL}:642 (max_new_tokens=2048)",
            "backends": "8B: one GPU",
            "model": f"{_OWL_EVAL}:591 (Qwen3VLForConditionalGeneration); Mobile-Agent-v3.5/README.md:31",
            "refusal": f"{_OWL_EVAL}:409-410 (no coordinate -> [0, 0]) and :450-454 (a refusal item is correct iff the "
            "point is (0, 0))",
            "decoding": f"{_OWL_EVAL}:633-642 (top_p 0.01, top_k 1, temperature 0.01, repetition_penalty 1.0 passed "
            "to generate: top_k 1 keeps only the most likely token and a penalty of 1.0 changes nothing, so this is "
            "greedy decoding, which is what the profile runs)",
        },
        {},
        (
            PublishedScore("screenspot-pro", 71.1, _OWL_CLAWGUI),
            PublishedScore("screenspot-v2", 93.7, _OWL_CLAWGUI),
            PublishedScore(
                "mmbench-gui-l2",
                82.52,
                _OWL_CLAWGUI,
                denominator="unstated",
                note="the released script reports the micro average over all items ('Overall Acc', "
                "eval_grounding_benchmarks.py:461-469); MMBench-GUI's L2 average is mean(basic, advanced)",
            ),
        ),
        "The Instruct checkpoint (ClawGUI runs it: clawgui-eval/scripts/infer/transformers/guiowl15_run_transformers.sh"
        ":11). Its grounding script needs an internal package to run: make_qwen_image_item imports x.io.image_io to "
        "read the image (eval_grounding_benchmarks.py:165; X-PLUG/MobileAgent#157 names the internal packages "
        "mplug_eval and x): how that decodes images could not be read. Its box test is on the 0-1000 grid with the box "
        "rounded outwards (floor/ceil, :413-430), slightly more lenient than ours. Not read: the technical report "
        "(arXiv 2602.16855) beyond its abstract (its 80.3 ScreenSpot-Pro is not this 8B's); the HF card has no "
        "grounding table. OSWorld-G: profile gui-owl-1.5-8b-osworld-g (another system prompt)",
        refusal="origin",
    ),
    Profile(
        "gui-owl-1.5-8b-osworld-g",
        "mPLUG/GUI-Owl-1.5-8B-Instruct",
        "qwen3_vl",
        "gui-owl-1.5-infeasible",
        GUI_OWL_15_BUDGET,
        2048,
        ONE_GPU,
        {
            "adapter": f"{_OWL_EVAL}:39,41 (system prompt + '\\n' + the infeasible clause), :337-339 and :529 (added "
            "on OSWorld-G only), :345-357, :382-410 (as gui-owl-1.5-8b)",
            "max_new_tokens": f"{_OWL_EVAL}:642 (max_new_tokens=2048)",
            "backends": "8B: one GPU",
            "model": f"{_OWL_EVAL}:591 (Qwen3VLForConditionalGeneration)",
            "refusal": f"{_OWL_EVAL}:409-410 (the terminate answer has no coordinate -> [0, 0]) and :450-454 (a "
            "refusal item is correct iff the point is (0, 0))",
            "decoding": f"{_OWL_EVAL}:633-642 (top_p 0.01, top_k 1, temperature 0.01, repetition_penalty 1.0: with "
            "top_k 1 and a penalty of 1.0, greedy decoding, which is what the profile runs)",
        },
        {},
        (
            PublishedScore(
                "osworld-g",
                65.8,
                _OWL_CLAWGUI,
                denominator="unstated",
                note="plain or Refined is not stated; the released script reads every file under annotations/ and "
                "reports each subset by platform (eval_grounding_benchmarks.py:533-547, :466-469), every item in the "
                "denominator, a refusal item correct iff the point is (0,0)",
            ),
        ),
        "GUI-Owl-1.5-8B-Instruct with its OSWorld-G request (the infeasible clause in the system turn); everything "
        "else as gui-owl-1.5-8b, whose notes apply",
        refusal="origin",
    ),
)
