"""Qwen2.5-VL architecture family (``config.model_type == "qwen2_5_vl"``): GTA1 (and its thinking / box prompt
variants) and UI-TARS-1.5. All answer in **absolute pixels of the smart_resized image** (answer frame ``resized``;
``gta1_and_peers.md`` 1.2 and 4)."""

from __future__ import annotations

from gui_grounding.adapters.base import Adapter, _fmt
from vlm_r1.pixel_budget import PixelBudget
from gui_grounding.prompts import build_messages, parse_answer_point, parse_point_or_box, parse_point_tag

# Qwen2/2.5-VL: patch 14 x spatial merge 2 (``gta1_and_peers.md`` 1.2 and 4).
QWEN_FACTOR = 28
# The Qwen2-VL / Qwen2.5-VL processor default (checkpoints' preprocessor_config.json min_pixels 3136, max_pixels
# 12845056; QwenLM/Qwen3-VL#1052 quotes size {'shortest_edge': 3136, 'longest_edge': 12845056}); also GTA1's training
# script default (gta1_and_peers.md 1.2).
QWEN_PROCESSOR_MIN_PIXELS, QWEN_PROCESSOR_MAX_PIXELS = 3136, 12_845_056
# GTA1 inference: AutoProcessor.from_pretrained(model_path, min_pixels=3136, max_pixels=4096 * 2160) (Yan98/GTA1
# README.md:149-153, commit 81f0c4c; the README training run uses --max_pixels $((4096 * 2160)) too, README.md:95).
GTA1_MIN_PIXELS, GTA1_MAX_PIXELS = 3136, 4096 * 2160  # 8,847,360
# UI-TARS-1.5: MIN_PIXELS = 100*28*28, MAX_PIXELS = 16384*28*28 (UI-TARS README_coordinates.md; gta1_and_peers.md 4).
UI_TARS_MIN_PIXELS, UI_TARS_MAX_PIXELS = 100 * 28 * 28, 16384 * 28 * 28

GTA1_BUDGET = PixelBudget.published(
    "GTA1 README inference snippet: min_pixels=3136, max_pixels=4096*2160 (Yan98/GTA1 README.md:149-153, 81f0c4c); "
    "factor: Qwen2.5-VL patch 14 x merge 2",
    factor=QWEN_FACTOR, min_pixels=GTA1_MIN_PIXELS, max_pixels=GTA1_MAX_PIXELS,
)  # fmt: skip
UI_TARS_BUDGET = PixelBudget.published(
    "UI-TARS README_coordinates.md: MIN_PIXELS=100*28*28, MAX_PIXELS=16384*28*28, IMAGE_FACTOR=28",
    factor=QWEN_FACTOR, min_pixels=UI_TARS_MIN_PIXELS, max_pixels=UI_TARS_MAX_PIXELS,
)  # fmt: skip

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

    Source: GTA1 ``src/grpo_grounding.py`` and its README inference recipe (``gta1_and_peers.md`` 1.2).

    * Image: resized **once** with smart_resize under the run's pixel budget (``default_budget``: GTA1's published
      inference budget, factor 28, 3,136 .. 4096*2160 = 8,847,360 pixels, README.md:149-153) to ``W' x H'``; that
      resized image is sent.
    * Prompt: system = GTA1's prompt stating "height {H'} and width {W'}" (``gui_grounding.prompts``, byte for byte);
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
    # GTA1's inference code fixes the processor budget (AutoProcessor(min_pixels=3136, max_pixels=4096*2160),
    # README.md:149-153): hf/vllm backends use it unless --min-pixels/--max-pixels override it.

    @property
    def mode(self) -> str:  # the prompt mode of gui_grounding.prompts (kept for callers of the old attribute)
        return self.prompt_mode

    def messages(self, instruction, frame, *, image_block=True):
        return build_messages(instruction, frame.resized_height, frame.resized_width, self.prompt_mode,
                              image_block=image_block)  # fmt: skip

    def parse_answer(self, text, *, strict=True):
        return parse_answer_point(text, self.prompt_mode, strict=strict)

    def sft_target(self, box, instruction):
        point = f"({_fmt((box[0] + box[2]) / 2)},{_fmt((box[1] + box[3]) / 2)})"
        return point


class GTA1ThinkingAdapter(GTA1Adapter):
    """GTA1 frame and image handling with our thinking prompt (``--prompt_mode thinking`` checkpoints).

    Budget: GTA1's (``GTA1_BUDGET``), as the variant only changes the prompt.

    Prompt: ``gui_grounding.prompts.THINKING_SYSTEM_PROMPT`` (resized H/W stated); parse: the first ``(x,y)`` inside
    the single ``<answer>...</answer>`` block (none or several blocks -> ``None``), resized pixels -> original. SFT
    target: ``<think>The element to click: {instruction}.</think><answer>(x,y)</answer>`` (a fixed template thought:
    it teaches the format only; we have no reasoning traces).
    """

    name = "gta1-thinking"
    model_types = ()
    prompt_mode = "thinking"

    def sft_target(self, box, instruction):
        return f"<think>The element to click: {instruction}.</think><answer>{super().sft_target(box, instruction)}</answer>"


class GTA1BoxAdapter(GTA1Adapter):
    """GTA1 frame and image handling with our box prompt (``--prompt_mode box`` checkpoints, e.g. trained with the
    ``iou`` / ``gaussian_coverage`` rewards). Budget: GTA1's (``GTA1_BUDGET``).

    Prompt: ``gui_grounding.prompts.BOX_SYSTEM_PROMPT`` (resized H/W stated, answer ``[x1,y1,x2,y2]``); parse: the
    centre of the first box (the ScreenSpot-Pro convention for box answers), resized pixels -> original. SFT target:
    the rounded box ``[x1,y1,x2,y2]``.
    """

    name = "gta1-box"
    model_types = ()
    prompt_mode = "box"

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


ADAPTERS = (GTA1Adapter, GTA1ThinkingAdapter, GTA1BoxAdapter, UITars15Adapter)
