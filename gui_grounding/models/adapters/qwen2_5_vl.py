"""Qwen2.5-VL architecture family (``config.model_type == "qwen2_5_vl"``): GTA1 (and its thinking / box prompt
variants) and UI-TARS-1.5. All answer in **absolute pixels of the smart_resized image** (answer frame ``resized``;
Qwen2.5-VL: QwenLM/Qwen2.5-VL ``README.md:26`` at f0af299 and arXiv 2502.13923; GTA1: Yan98/GTA1
``src/grpo_grounding.py:78-84,125-137`` at 81f0c4c; UI-TARS-1.5: bytedance/UI-TARS ``README_coordinates.md:90-91`` at
582f3a7)."""

from __future__ import annotations

import re

from groundwork.pixel_budget import PixelBudget
from gui_grounding.models.adapters.base import Adapter, _fmt
from gui_grounding.models.profile_types import ONE_GPU, TENSOR_PARALLEL, Profile, PublishedScore
from gui_grounding.models.prompts import (
    answer_numbers,
    build_messages,
    parse_answer_point,
    parse_box,
    parse_literal_box,
    parse_point_or_box,
    parse_point_tag,
)

# Qwen2/2.5-VL: patch 14 x spatial merge 2 (transformers 5.23 models/qwen2_vl/image_processing_pil_qwen2_vl.py:98-100;
# GTA1 resizes with factor patch_size * merge_size, Yan98/GTA1 src/grpo_grounding.py:125-131 at 81f0c4c).
QWEN_FACTOR = 28
# The Qwen2-VL / Qwen2.5-VL processor default (checkpoints' preprocessor_config.json min_pixels 3136, max_pixels
# 12845056; QwenLM/Qwen3-VL#1052 quotes size {'shortest_edge': 3136, 'longest_edge': 12845056}); also GTA1's training
# script default (Yan98/GTA1 src/grpo_grounding.py:61-68 at 81f0c4c).
QWEN_PROCESSOR_MIN_PIXELS, QWEN_PROCESSOR_MAX_PIXELS = 3136, 12_845_056
# GTA1 inference: AutoProcessor.from_pretrained(model_path, min_pixels=3136, max_pixels=4096 * 2160) (Yan98/GTA1
# README.md:149-153, commit 81f0c4c; the README training run uses --max_pixels $((4096 * 2160)) too, README.md:95).
GTA1_MIN_PIXELS, GTA1_MAX_PIXELS = 3136, 4096 * 2160  # 8,847,360
# UI-TARS-1.5: MIN_PIXELS = 100*28*28, MAX_PIXELS = 16384*28*28 (bytedance/UI-TARS README_coordinates.md:33-35 at
# 582f3a7).
UI_TARS_MIN_PIXELS, UI_TARS_MAX_PIXELS = 100 * 28 * 28, 16384 * 28 * 28

GTA1_BUDGET = PixelBudget.published(
    "GTA1 README inference snippet: min_pixels=3136, max_pixels=4096*2160 (Yan98/GTA1 README.md:149-153, 81f0c4c); "
    "factor: Qwen2.5-VL patch 14 x merge 2",
    factor=QWEN_FACTOR,
    min_pixels=GTA1_MIN_PIXELS,
    max_pixels=GTA1_MAX_PIXELS,
)
UI_TARS_BUDGET = PixelBudget.published(
    "UI-TARS README_coordinates.md: MIN_PIXELS=100*28*28, MAX_PIXELS=16384*28*28, IMAGE_FACTOR=28",
    factor=QWEN_FACTOR,
    min_pixels=UI_TARS_MIN_PIXELS,
    max_pixels=UI_TARS_MAX_PIXELS,
)

# UI-TARS grounding prompt. Source: the grounding template of bytedance/UI-TARS README_v1.md (L319-320, linked in
# bytedance/UI-TARS#157, where the maintainers answer "the prompt for ui-tars-1.5 follows the same way as the previous
# version. And ui-tars-1.5 indeed uses absolute coordinate."). The README itself was not re-read here: the exact text
# below is the one public UI-TARS grounding harnesses send (image first, then this text, no system prompt).
# Whatever the prompt, UI-TARS-1.5 answers in a fixed syntax such as
# ``click(start_box='<|box_start|>(x,y)<|box_end|>')`` (bytedance/UI-TARS#183), and only with points (#125).
UI_TARS_GROUNDING_PROMPT = (
    "Output only the coordinate of one point in your response. What element matches the following task: {instruction}"
)


class GTA1Adapter(Adapter):
    """GTA1 / Qwen2.5-VL convention: absolute pixels in the smart_resize frame, GTA1 system prompt.

    Source: GTA1 ``src/grpo_grounding.py`` and its README inference recipe (Yan98/GTA1 ``README.md:112-200`` at
    81f0c4c).

    * Image: resized **once** with smart_resize under the run's pixel budget (``default_budget``: GTA1's published
      inference budget, factor 28, 3,136 .. 4096*2160 = 8,847,360 pixels, README.md:149-153) to ``W' x H'``; that
      resized image is sent.
    * Prompt: system = GTA1's prompt stating "height {H'} and width {W'}" (``gui_grounding.models.prompts``, byte for byte);
      user = image, then the instruction.
    * Parse: the **first** ``(x,y)`` pair (training: integers, GTA1's reward regex; inference: decimals allowed,
      ``parse_point(strict=False)``), in resized pixels, mapped back per axis: ``x * W / W'``, ``y * H / H'``.
    * SFT target: ``(x,y)``, the rounded centre of the target box in resized pixels.

    Example: a 1280x720 screenshot under the budget factor 28, 3136 .. 200704 is sent at 588x336; answer ``"(294,168)"`` ->
    ``(640.0, 360.0)``.
    """

    name = "gta1"
    answer_frame = "resized"
    model_types = ("qwen2_5_vl",)  # Qwen2.5-VL, UI-TARS-1.5, GTA1 and OpenCUA share it (use ui-tars-1.5 explicitly)
    prompt_mode = "non_thinking"
    default_budget = GTA1_BUDGET
    supports_zoom_tool = True  # Qwen's Hermes tool calls (gui_grounding.models.zoom_tool)
    # GTA1's inference code fixes the processor budget (AutoProcessor(min_pixels=3136, max_pixels=4096*2160),
    # README.md:149-153): hf/vllm backends use it unless --min-pixels/--max-pixels override it.

    @property
    def mode(self) -> str:  # the prompt mode of gui_grounding.models.prompts (kept for callers of the old attribute)
        return self.prompt_mode

    def messages(self, instruction, frame, *, image_block=True):
        return build_messages(
            instruction, frame.resized_height, frame.resized_width, self.prompt_mode, image_block=image_block
        )

    def parse_answer(self, text, *, strict=True):
        return parse_answer_point(text, self.prompt_mode, strict=strict)

    def sft_target(self, box, instruction):
        point = f"({_fmt((box[0] + box[2]) / 2)},{_fmt((box[1] + box[3]) / 2)})"
        return point


class GTA1ThinkingAdapter(GTA1Adapter):
    """GTA1 frame and image handling with our thinking prompt (``--prompt_mode thinking`` checkpoints).

    Budget: GTA1's (``GTA1_BUDGET``), as the variant only changes the prompt.

    Prompt: ``gui_grounding.models.prompts.THINKING_SYSTEM_PROMPT`` (resized H/W stated); parse: the first ``(x,y)`` inside
    the single ``<answer>...</answer>`` block (none or several blocks -> ``None``), resized pixels -> original. SFT
    target: ``<think>The element to click: {instruction}.</think><answer>(x,y)</answer>`` (a fixed template thought:
    it teaches the format only; we have no reasoning traces).
    """

    name = "gta1-thinking"
    model_types = ()
    prompt_mode = "thinking"
    refusal_clause_answer = "<answer>(-1,-1)</answer>"  # ours (the SFT target's thought names the instruction)

    def sft_target(self, box, instruction):
        return f"<think>The element to click: {instruction}.</think><answer>{super().sft_target(box, instruction)}</answer>"


class GTA1BoxAdapter(GTA1Adapter):
    """GTA1 frame and image handling with our box prompt (``--prompt_mode box`` checkpoints, e.g. trained with the
    ``iou`` / ``gaussian_coverage`` rewards). Budget: GTA1's (``GTA1_BUDGET``).

    Prompt: ``gui_grounding.models.prompts.BOX_SYSTEM_PROMPT`` (resized H/W stated, answer ``[x1,y1,x2,y2]``); parse: the
    centre of the first box (the ScreenSpot-Pro convention for box answers), resized pixels -> original. SFT target:
    the rounded box ``[x1,y1,x2,y2]``.
    """

    name = "gta1-box"
    model_types = ()
    prompt_mode = "box"

    def answer_box(self, text):
        return parse_box(text, "box", strict=False)

    def sft_target(self, box, instruction):
        return "[" + ",".join(_fmt(v) for v in box) + "]"


class UITars15Adapter(Adapter):
    """UI-TARS-1.5: absolute pixels in the smart_resize frame with UI-TARS's own pixel bounds, grounding prompt.

    * Image: smart_resized once (factor 28) with UI-TARS's bounds MIN 100*28*28 = 78,400 and MAX 16384*28*28 =
      12,845,056 pixels (UI-TARS ``README_coordinates.md``), the ``default_budget`` evaluation uses unless a flag,
      profile or checkpoint record sets another (``gui_grounding.eval.budget``).
    * Prompt: no system prompt (the chat template's default applies); user = image, then
      ``"Output only the coordinate of one point in your response. What element matches the following task:
      {instruction}"``. Source: the grounding template of bytedance/UI-TARS README_v1.md, which the maintainers
      say 1.5 keeps (bytedance/UI-TARS#157); see ``UI_TARS_GROUNDING_PROMPT``.
    * Parse: answers look like ``(x,y)``, ``<|box_start|>(x,y)<|box_end|>`` or ``click(start_box='(x,y)')`` (the
      fixed 1.5 action syntax, bytedance/UI-TARS#183): the first ``(x,y)`` (the centre if it opens a
      ``(x1,y1),(x2,y2)`` box), else ``<point>x y</point>``; resized pixels -> original (``Frame.point_to_original``).
    * SFT target: ``(x,y)`` (the point the prompt asks for).
    """

    name = "ui-tars-1.5"
    answer_frame = "resized"
    default_budget = UI_TARS_BUDGET

    def messages(self, instruction, frame, *, image_block=True):
        return self._user_turn(UI_TARS_GROUNDING_PROMPT.format(instruction=instruction), image_block)

    def parse_answer(self, text, *, strict=True):
        return parse_point_or_box(text) or parse_point_tag(text)

    def sft_target(self, box, instruction):
        return f"({_fmt((box[0] + box[2]) / 2)},{_fmt((box[1] + box[3]) / 2)})"


# ---- UI-Venus-Ground-7B and GUI-G²-7B: one box request, absolute pixels of the smart_resized image -----------------
# The request both official scripts send (user turn: the image, then this text; no system prompt): inclusionAI/UI-Venus
# models/grounding/ui_venus_ground_7b.py:39 (commit fc7670d) and ZJU-REAL/GUI-G2 README.md:174 (commit 5c5c365).
OUTLINE_BOX_PROMPT = (
    "Outline the position corresponding to the instruction: {instruction}. The output should be only [x1,y1,x2,y2]."
)
UI_VENUS_GROUND_BUDGET = PixelBudget.published(
    "inclusionAI/UI-Venus models/grounding/ui_venus_ground_7b.py:42-43 (fc7670d): min_pixels = 2000000, max_pixels = "
    "4800000 in the image message (qwen_vl_utils smart_resize, factor 28)",
    factor=QWEN_FACTOR,
    min_pixels=2_000_000,
    max_pixels=4_800_000,
)
GUI_G2_BUDGET = PixelBudget.published(
    "ZJU-REAL/GUI-G2 README.md:177-186 (5c5c365): the image message sets no bounds, so qwen_vl_utils' defaults apply "
    "(vision_process.py MIN_PIXELS = 4*28*28, MAX_PIXELS = 16384*28*28, IMAGE_FACTOR = 28)",
    factor=QWEN_FACTOR,
    min_pixels=4 * 28 * 28,
    max_pixels=16384 * 28 * 28,
)
# UI-Venus's explicit "no target" answer: UI-Venus-1.5's grounding prompt asks for [-1,-1] when the task is infeasible
# and its parser returns it as "infeasible" (inclusionAI/UI-Venus models/grounding/ui_venus1_5_gd.py:75 and 164-165,
# commit c3a1442); the box form [-1,-1,-1,-1] is matched too. How it is read (a refusal, the point (0, 0) as the 1.0
# script's fallback makes it, or the point it writes) is the adapter's refusal_reading, which a profile sets
# (base.REFUSAL_READINGS, Profile.refusal)
_REFUSAL_RE = re.compile(r"\[\s*-1\s*,\s*-1\s*(?:,\s*-1\s*,\s*-1\s*)?\]")


class OutlineBoxAdapter(Adapter):
    """UI-Venus-Ground-7B / GUI-G²-7B convention: one box ``[x1,y1,x2,y2]`` in absolute pixels of the smart_resized
    image, scored by its centre.

    * Image: smart_resized once under the run's budget (``default_budget``: the family's official script's, see the
      subclasses); the frame is ``image_grid_thw * 14``, which the official scripts divide the box by.
    * Prompt: no system prompt (the chat template's default applies); user = image, then ``Outline the position
      corresponding to the instruction: {instruction}. The output should be only [x1,y1,x2,y2].`` (OUTLINE_BOX_PROMPT).
    * Parse (inference): the official scripts ``eval()`` the whole answer and read ``box[0..3]``
      (ui_venus_ground_7b.py:88-98 at fc7670d; GUI-G2 README.md:213-221 at 5c5c365); here the answer's first Python
      list/tuple literal, read as data (:func:`gui_grounding.models.prompts.parse_literal_box`: any spacing, newlines,
      tuples, a trailing comma; at least four real numbers, the first four taken; nested or non-numeric lists are no
      box) -> its centre, resized pixels -> original (``Frame.point_to_original``). Training (``strict``): exactly one
      ``[x1,y1,x2,y2]`` box of integers, ordered (:func:`gui_grounding.models.prompts.parse_box`).
    * No target: ``[-1,-1]`` or ``[-1,-1,-1,-1]`` alone (:attr:`no_target`) is read by :attr:`refusal_reading`: by
      default a refusal (UI-Venus-1.5's parser); the ``ui-venus-ground-7b`` and ``gui-g2-7b`` profiles read it as
      their scripts do, ``"origin"`` (``[-1,-1]`` -> the point (0, 0); ``[-1,-1,-1,-1]`` -> its centre, negative).
    * SFT target: the box, rounded, ``[x1,y1,x2,y2]``.

    Example: a 1920x1080 screenshot under UI-Venus's budget (2,000,000 .. 4,800,000) is sent at 1932x1092 (2.1 Mpx is
    inside the bounds); the answer ``[956,536,976,556]`` has centre (966, 546) -> (960.0, 540.0).
    """

    answer_frame = "resized"
    no_target = _REFUSAL_RE

    def messages(self, instruction, frame, *, image_block=True):
        return self._user_turn(OUTLINE_BOX_PROMPT.format(instruction=instruction), image_block)

    def parse_answer(self, text, *, strict=True):
        box = parse_box(text, "box", strict=True) if strict else self.answer_box(text)
        return self._centre(box) if box is not None else None

    def answer_box(self, text):
        return parse_literal_box(text)

    def sft_target(self, box, instruction):
        return "[" + ",".join(_fmt(v) for v in box) + "]"


class UIVenusGroundAdapter(OutlineBoxAdapter):
    """UI-Venus-Ground-7B (inclusionAI/UI-Venus models/grounding/ui_venus_ground_7b.py, commit fc7670d): the outline
    box request at 2,000,000 .. 4,800,000 pixels, ``max_new_tokens=128``, greedy. See :class:`OutlineBoxAdapter`."""

    name = "ui-venus-ground"
    default_budget = UI_VENUS_GROUND_BUDGET


class GUIG2Adapter(OutlineBoxAdapter):
    """GUI-G²-7B (ZJU-REAL/GUI-G2 README.md:150-230 inference snippet, commit 5c5c365): the same outline box request as
    UI-Venus at qwen_vl_utils' default bounds 3,136 .. 12,845,056 pixels, ``max_new_tokens=128``, greedy. See
    :class:`OutlineBoxAdapter`."""

    name = "gui-g2"
    default_budget = GUI_G2_BUDGET


# ---- Qwen2.5-VL-Instruct: the ScreenSpot-Pro harness's computer_use request -----------------------------------------
# The system turn of likaixin2000/ScreenSpot-Pro-GUI-Grounding models/qwen2_5vl.py:20-67 (commit bd8bbbb): two text
# parts, "You are a helpful assistant." and this Qwen computer_use tool description, with the screen resolution set to
# the RESIZED size W'xH' (qwen2_5vl.py:154); {width}/{height} are filled here, every other brace is literal.
QWEN25VL_SYSTEM_HEAD = "You are a helpful assistant."
QWEN25VL_COMPUTER_USE_SYSTEM = (
    "\n\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided"
    ' with function signatures within <tools></tools> XML tags:\n<tools>\n{{"type": "function", "funct'
    'ion": {{"name_for_human": "computer_use", "name": "computer_use", "description": "Use a mouse a'
    "nd keyboard to interact with a computer, and take screenshots.\n* This is an interface to a desk"
    "top GUI. You do not have access to a terminal or applications menu. You must click on desktop i"
    "cons to start applications.\n* Some applications may take time to start or process actions, so y"
    "ou may need to wait and take successive screenshots to see the results of your actions. E.g. if"
    " you click on Firefox and a window doesn't open, try wait and taking another screenshot.\n* The "
    "screen's resolution is {width}x{height}.\n* Whenever you intend to move the cursor to click on a"
    "n element like an icon, you should consult a screenshot to determine the coordinates of the ele"
    "ment before moving the cursor.\n* If you tried clicking on a program or link but it failed to lo"
    "ad, even after waiting, try adjusting your cursor position so that the tip of the cursor visual"
    "ly falls on the element that you want to click.\n* Make sure to click any buttons, links, icons,"
    " etc with the cursor tip in the center of the element. Don't click boxes on their edges unless "
    'asked.", "parameters": {{"properties": {{"action": {{"description": "The action to perform. The'
    " available actions are:\n* `key`: Performs key down presses on the arguments passed in order, th"
    "en performs key releases in reverse order.\n* `type`: Type a string of text on the keyboard.\n* `"
    "mouse_move`: Move the cursor to a specified (x, y) pixel coordinate on the screen.\n* `left_clic"
    "k`: Click the left mouse button.\n* `left_click_drag`: Click and drag the cursor to a specified "
    "(x, y) pixel coordinate on the screen.\n* `right_click`: Click the right mouse button.\n* `middle"
    "_click`: Click the middle mouse button.\n* `double_click`: Double-click the left mouse button.\n*"
    " `scroll`: Performs a scroll of the mouse scroll wheel.\n* `wait`: Wait specified seconds for th"
    "e change to happen.\n* `terminate`: Terminate the current task and report its completion status."
    '", "enum": ["key", "type", "mouse_move", "left_click", "left_click_drag", "right_click", "middl'
    'e_click", "double_click", "scroll", "wait", "terminate"], "type": "string"}}, "keys": {{"descri'
    'ption": "Required only by `action=key`.", "type": "array"}}, "text": {{"description": "Required'
    ' only by `action=type`.", "type": "string"}}, "coordinate": {{"description": "(x, y): The x (pi'
    "xels from the left edge) and y (pixels from the top edge) coordinates to move the mouse to. Req"
    'uired only by `action=mouse_move` and `action=left_click_drag`.", "type": "array"}}, "pixels": '
    '{{"description": "The amount of scrolling to perform. Positive values scroll up, negative value'
    's scroll down. Required only by `action=scroll`.", "type": "number"}}, "time": {{"description":'
    ' "The seconds to wait. Required only by `action=wait`.", "type": "number"}}, "status": {{"descr'
    'iption": "The status of the task. Required only by `action=terminate`.", "type": "string", "enu'
    'm": ["success", "failure"]}}}}, "required": ["action"], "type": "object"}}, "args_format": "For'
    'mat the arguments as a JSON object."}}}}\n</tools>\n\nFor each function call, return a json object'
    ' with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{{"name"'
    ': <function-name>, "arguments": <args-json-object>}}\n</tool_call>'
)
# The assistant turn is forced to start with this guide (qwen2_5vl.py:160-162); the model continues with the coordinate.
QWEN25VL_GUIDE = '<tool_call>\n{"name": "computer_use", "arguments": {"action": "left_click", "coordinate": ['
# The harness states the smart_resize size under max_pixels=99999999 in its prompt (:143-154) and divides answers by it
# (:208), but sends that image through self.processor(images=[resized_image]) (:164-169), loaded at its defaults
# (:121, AutoProcessor.from_pretrained(model)): its max_pixels 12,845,056 (QWEN_PROCESSOR_MAX_PIXELS) shrinks any
# image above it again. processor_max_pixels reproduces that second resize (groundwork.pixel_budget.PixelBudget).
QWEN25VL_HARNESS_BUDGET = PixelBudget.published(
    "likaixin2000/ScreenSpot-Pro-GUI-Grounding models/qwen2_5vl.py:143-150 (bd8bbbb): smart_resize with the "
    "processor's min_pixels (3136) and max_pixels=99999999, factor patch_size x merge_size = 28; the image is then "
    "given to the processor at its defaults (:121, :164-169: max_pixels 12845056, the Qwen2.5-VL preprocessor default), "
    "which shrinks it again above 12,845,056 pixels while the prompt and the map-back keep the 99999999 frame",
    factor=QWEN_FACTOR,
    min_pixels=3136,
    max_pixels=99_999_999,
    processor_max_pixels=QWEN_PROCESSOR_MAX_PIXELS,
)
_COORDINATE_RE = re.compile(
    r'"coordinate"\s*:\s*\[\s*(-?\d+(?:\.\d+)?)\s*,\s*(-?\d+(?:\.\d+)?)'
    r"(?:\s*,\s*(-?\d+(?:\.\d+)?)\s*,\s*(-?\d+(?:\.\d+)?))?\s*\]"
)


class Qwen25VLComputerUseAdapter(Adapter):
    """Qwen2.5-VL-Instruct as the ScreenSpot-Pro harness grounds it: a ``computer_use`` tool call in absolute pixels
    of the smart_resized image.

    Source: likaixin2000/ScreenSpot-Pro-GUI-Grounding ``models/qwen2_5vl.py`` (commit bd8bbbb), ``ground_only_positive``.

    * Image: smart_resized (factor 28, 3,136 .. 99,999,999 pixels: a screenshot is practically never scaled down) to
      the frame the prompt states and answers map back from, then, as the harness's processor at its defaults does
      (qwen2_5vl.py:121,164-169), smart_resized again under 3,136 .. 12,845,056 pixels before it is sent (the
      budget's ``processor_max_pixels``): a 5120x2880 screenshot is stated as 5124x2884 and sent at 4760x2688.
    * Prompt: system = two text parts, ``You are a helpful assistant.`` and the computer_use tool description whose
      "screen's resolution is W'xH'" states the resized size (``QWEN25VL_COMPUTER_USE_SYSTEM``); user = image, then
      the instruction; the assistant turn is forced to start with ``<tool_call>\n{"name": "computer_use",
      "arguments": {"action": "left_click", "coordinate": [`` (``assistant_prefix``), so the model writes the
      coordinate next.
    * Parse (prefix + generated text): the first ``"coordinate": [x, y]`` (or ``[x1, y1, x2, y2]`` -> its centre) in
      resized pixels -> original. The harness ``json.loads`` the whole tool call after cutting at its last ``}``; a
      tool call with a coordinate but broken JSON elsewhere scores a point here and none there (documented in
      docs/EVALUATION.md).
    * SFT target: ``x, y]}}\n</tool_call>`` (the continuation of the guide).
    """

    name = "qwen2.5-vl"
    answer_frame = "resized"
    assistant_prefix = QWEN25VL_GUIDE
    default_budget = QWEN25VL_HARNESS_BUDGET

    def messages(self, instruction, frame, *, image_block=True):
        tools = QWEN25VL_COMPUTER_USE_SYSTEM.format(width=frame.resized_width, height=frame.resized_height)
        return self._system_turn([QWEN25VL_SYSTEM_HEAD, tools], image_block) + self._user_turn(instruction, image_block)

    @staticmethod
    def _coordinate(text: str) -> tuple | None:
        """The numbers (2 or 4) of the first ``"coordinate": [...]`` of the tool call, or ``None``."""
        match = _COORDINATE_RE.search(text if text.startswith("<tool_call>") else QWEN25VL_GUIDE + text)
        if match is None:
            return None
        return answer_numbers([v for v in match.groups() if v is not None])  # None: a number that is no coordinate

    def parse_answer(self, text, *, strict=True):
        values = self._coordinate(text)
        if values is None:
            return None
        if len(values) == 4:
            return (values[0] + values[2]) / 2, (values[1] + values[3]) / 2
        return values[0], values[1]

    def answer_box(self, text):
        values = self._coordinate(text)
        return values if values is not None and len(values) == 4 else None

    def sft_target(self, box, instruction):
        x, y = self._centre(box)
        return f"{_fmt(x)}, {_fmt(y)}]}}}}\n</tool_call>"


ADAPTERS = (
    GTA1Adapter,
    GTA1ThinkingAdapter,
    GTA1BoxAdapter,
    UITars15Adapter,
    UIVenusGroundAdapter,
    GUIG2Adapter,
    Qwen25VLComputerUseAdapter,
)


# ---------------------------------------------------------------------------------------------------------------------
# this family's published checkpoints (``PROFILES``, collected by gui_grounding.models.profiles); sources: public
# repositories at the commits named, model cards by URL


_GTA1_README = "Yan98/GTA1 README.md (81f0c4c)"
_GTA1_SOURCES = {
    "adapter": f"{_GTA1_README}:123-138 (SYSTEM_PROMPT with the resized height/width; extract_coordinates: first "
    "(x,y), times original/resized) and :171-182 (system message, then the image and the instruction)",
    "max_new_tokens": f"{_GTA1_README}:141 (max_new_tokens = 32) and :191 (do_sample=False)",
    "backends": "7B: one GPU (hf, vllm); 32B/72B: tensor parallelism (vllm, or an OpenAI-compatible server)",
    "benchmark_options": "the model card states OSWorld-G on the Refined set (plain: 55.1, README.md:21)",
}


def _gta1(name: str, model: str, backends: tuple, published: tuple, notes: str = "") -> Profile:
    return Profile(
        name,
        model,
        "qwen2_5_vl",
        "gta1",
        GTA1_BUDGET,
        32,
        backends,
        dict(_GTA1_SOURCES),
        {"osworld-g": {"subset": "refined"}},
        published,
        notes,
    )


_GTA1_7B_CARD = "https://huggingface.co/Salesforce/GTA1-7B-2507 (model card)"
# The 32B and 72B numbers: the grounding table of the HelloKKMe/GTA1-72B model card, which lists GTA1-32B and
# GTA1-72B side by side (its single OSWorld-G column holds 67.7 for the 7B, the value the Salesforce/GTA1-7B-2507 card
# gives as OSWORLD-G-Refined, hence subset refined); HelloKKMe/GTA1-32B's own card is the 32B model's page.
_GTA1_72B_CARD = "https://huggingface.co/HelloKKMe/GTA1-72B (model card, grounding table: GTA1-32B and GTA1-72B rows)"
# Their pixel budget: the 32B/72B cards' inference snippets name the model and max_new_tokens = 32; their processor
# lines (min_pixels / max_pixels) could not be read here, so the 7B README's budget (GTA1_BUDGET) is ASSUMED.
_GTA1_BIG_BUDGET_NOTE = (
    "pixel budget ASSUMED equal to the 7B README's (3,136 .. 4096*2160): the 32B/72B model cards' processor lines "
    "could not be read (unverified)"
)


def _gta1_card(card: str, screenspot_pro: float, screenspot_v2: float, osworld_g_refined: float) -> tuple:
    """The three scores of a GTA1 checkpoint on its model card's grounding table (OSWorld-G on the Refined set; the
    card does not say how refusal items were counted: denominator ``unstated``)."""
    return (
        PublishedScore("screenspot-pro", screenspot_pro, card),
        PublishedScore("screenspot-v2", screenspot_v2, card),
        PublishedScore("osworld-g", osworld_g_refined, card, {"subset": "refined"}, denominator="unstated"),
    )


_UITARS = "bytedance/UI-TARS (582f3a7)"
_QWEN_HARNESS = "likaixin2000/ScreenSpot-Pro-GUI-Grounding models/qwen2_5vl.py (bd8bbbb)"


def _qwen25vl(size: str, published: tuple, backends: tuple) -> Profile:
    """Qwen2.5-VL-``size``-Instruct as the ScreenSpot-Pro harness asks it (its computer_use request)."""
    return Profile(
        f"qwen2.5-vl-{size.lower()}",
        f"Qwen/Qwen2.5-VL-{size}-Instruct",
        "qwen2_5_vl",
        "qwen2.5-vl",
        QWEN25VL_HARNESS_BUDGET,
        128,
        backends,
        {
            "adapter": f"{_QWEN_HARNESS}:20-67 (computer_use system prompt, resized resolution), :160-162 (forced "
            "'<tool_call>...\"coordinate\": [' assistant prefix), :196-208 (parse)",
            "max_new_tokens": f"{_QWEN_HARNESS}:124-129 greedy (do_sample=False); the harness bounds max_length=2048, "
            "an answer needs < 20 tokens",
            "backends": "7B: one GPU; 32B/72B: tensor parallelism",
        },
        {},
        published,
        "Qwen publishes no grounding evaluation script; this is the ScreenSpot-Pro harness's request (Qwen's "
        "computer_use tool). Without a published number of the authors for this exact request, no row is "
        "'within 1 point' by construction",
    )


_VENUS = "inclusionAI/UI-Venus"

# UI-TARS's published grounding request (bytedance/UI-TARS README_v1.md:324-337 at 582f3a7): client.chat.completions
# .create(model=..., messages=[image, prompt + instruction], frequency_penalty=1, max_tokens=128), no temperature
_UI_TARS_SNIPPET_DECODING = {"frequency_penalty": 1.0, "temperature": None}


def _ui_tars(name: str, backends: tuple, decoding: dict, note: str) -> Profile:
    """UI-TARS-1.5-7B with its grounding prompt; ``decoding``: ``{}`` (greedy) or the published snippet's settings."""
    sources = {
        "adapter": f"{_UITARS} README_v1.md:320 (grounding prompt; UI-TARS#157: 1.5 keeps it) and README_coordinates.md "
        "(absolute coordinates in the smart_resized frame)",
        "max_new_tokens": f"{_UITARS} README_v1.md:336 (max_tokens=128); ZJU-REAL/ClawGUI clawgui-eval/scripts/infer/"
        "transformers/uitars_run_transformers.sh (d990d3e) pins greedy decoding",
        "backends": "7B: one GPU" if backends == ONE_GPU else "an OpenAI-compatible server (the snippet's client)",
    }
    if decoding:
        sources["decoding"] = f"{_UITARS} README_v1.md:335-336: frequency_penalty=1, max_tokens=128, no temperature"
    return Profile(
        name,
        "ByteDance-Seed/UI-TARS-1.5-7B",
        "qwen2_5_vl",
        "ui-tars-1.5",
        UI_TARS_BUDGET,
        128,
        backends,
        sources,
        {},
        (PublishedScore("screenspot-pro", 49.6, f"{_UITARS} README.md:169"),),
        "codes/ui_tars/prompt.py:59 (GROUNDING_DOUBAO) is a second, agent-style grounding prompt; ClawGUI reproduces 42.1 "
        "on ScreenSpot-Pro against the published 49.6 (clawgui-eval/README.md:465). Decoding: " + note,
        decoding=dict(decoding),
    )


#: this family's published checkpoints
PROFILES = (
    _gta1(
        "gta1-7b-2507",
        "HelloKKMe/GTA1-7B-2507",
        ONE_GPU,
        (
            PublishedScore("screenspot-pro", 50.1, f"{_GTA1_README}:21"),
            PublishedScore("screenspot-v2", 92.4, f"{_GTA1_README}:21"),
            PublishedScore("osworld-g", 55.1, f"{_GTA1_README}:21", {"subset": "plain"}, denominator="unstated"),
            PublishedScore("osworld-g", 67.7, _GTA1_7B_CARD, {"subset": "refined"}, denominator="unstated"),
        ),
        notes="also published as Salesforce/GTA1-7B-2507 (README.md:11); the official parser int()s the (x,y) pair, so "
        "a decimal answer scores (0,0) there and its decimal point here",
    ),
    _gta1(
        "gta1-32b-2507",
        "HelloKKMe/GTA1-32B",
        TENSOR_PARALLEL,
        _gta1_card(_GTA1_72B_CARD, 53.6, 93.2, 61.9),
        notes="the 2507 release on Qwen2.5-VL-32B (the Oct-2025 Salesforce/GTA1-32B is another model, on OpenCUA-32B); "
        + _GTA1_BIG_BUDGET_NOTE,
    ),
    _gta1(
        "gta1-72b-2507",
        "HelloKKMe/GTA1-72B",
        TENSOR_PARALLEL,
        _gta1_card(_GTA1_72B_CARD, 58.4, 94.8, 66.7),
        notes="the 2507 release on Qwen2.5-VL-72B; " + _GTA1_BIG_BUDGET_NOTE,
    ),
    _ui_tars(
        "ui-tars-1.5-7b",
        ONE_GPU,
        {},
        "greedy, no penalty; the published snippet (README_v1.md:335-336) sends frequency_penalty=1 and the server's "
        "default temperature instead: profile ui-tars-1.5-7b-api. Which of the two produced 49.6 is unverified",
    ),
    _ui_tars(
        "ui-tars-1.5-7b-api",
        ("openai",),
        _UI_TARS_SNIPPET_DECODING,
        "the published grounding snippet's generation settings (README_v1.md:324-337): frequency_penalty=1, "
        "max_tokens=128, no temperature (the server's default), over an OpenAI-compatible server (--backend openai: "
        "transformers has no frequency_penalty; vLLM offline has no server default). Which setting produced 49.6 "
        "is unverified (README.md:169 names none)",
    ),
    _qwen25vl(
        "7B",
        (PublishedScore("screenspot-v2", 88.8, "ZJU-REAL/GUI-G2 README.md:302 (5c5c365), a third-party measurement"),),
        ONE_GPU,
    ),
    _qwen25vl("32B", (), TENSOR_PARALLEL),
    _qwen25vl("72B", (), TENSOR_PARALLEL),
    Profile(
        "ui-venus-ground-7b",
        "inclusionAI/UI-Venus-Ground-7B",
        "qwen2_5_vl",
        "ui-venus-ground",
        UI_VENUS_GROUND_BUDGET,
        128,
        ONE_GPU,
        {
            "adapter": f"{_VENUS} models/grounding/ui_venus_ground_7b.py:39-43 (fc7670d): the outline-box request, "
            "image first; the box divided by image_grid_thw*14 (the resized frame), its centre scored",
            "max_new_tokens": f"{_VENUS} models/grounding/ui_venus_ground_7b.py (fc7670d): generate(max_new_tokens=128), "
            "do_sample=False",
            "backends": "7B: one GPU",
        },
        {},
        (
            PublishedScore("screenspot-pro", 50.8, f"{_VENUS} README.md:206 (c3a1442)"),
            PublishedScore(
                "screenspot-v2", 94.1, "ZJU-REAL/ClawGUI clawgui-eval/README.md:466 (d990d3e), 'official' column"
            ),
            PublishedScore(
                "osworld-g",
                54.6,
                f"{_VENUS} README.md:206 (c3a1442)",
                note="the README does not say plain or Refined; ClawGUI lists 58.8 as official",
                denominator="unstated",
            ),
        ),
        "UI-Venus-1.0 has no refusal in its prompt. Its script eval()s the answer and falls back to [0,0,0,0] "
        "(ui_venus_ground_7b.py:88-98 at fc7670d), so a [-1,-1] answer (UI-Venus-1.5's infeasible marker) is the "
        "point (0, 0) there (IndexError) and [-1,-1,-1,-1] its negative centre: this profile reads them the same way "
        "(refusal 'origin'), never as an explicit refusal",
        refusal="origin",
    ),
    Profile(
        "gui-g2-7b",
        "inclusionAI/GUI-G2-7B",
        "qwen2_5_vl",
        "gui-g2",
        GUI_G2_BUDGET,
        128,
        ONE_GPU,
        {
            "adapter": "ZJU-REAL/GUI-G2 README.md:174-223 (5c5c365): the outline-box request, image first, the box divided by "
            "image_grid_thw*14 (the resized frame), its centre",
            "max_new_tokens": "ZJU-REAL/GUI-G2 README.md:201 (max_new_tokens=128), :167-171 (do_sample False)",
            "backends": "7B: one GPU",
        },
        {},
        (
            PublishedScore("screenspot-v2", 93.3, "ZJU-REAL/GUI-G2 README.md:315 (5c5c365)"),
            PublishedScore(
                "screenspot-pro",
                47.5,
                "ZJU-REAL/ClawGUI clawgui-eval/README.md:456 (d990d3e), 'official' column (the GUI-G2 paper)",
            ),
        ),
        "the README's parser is UI-Venus-1.0's (eval(), else [0,0,0,0]: README.md:213-221 at 5c5c365), so a [-1,-1] "
        "answer is the point (0, 0) (refusal 'origin')",
        refusal="origin",
    ),
)
