"""Qwen2-VL family (``config.model_type == "qwen2_vl"``; also OS-Atlas-7B, UGround-V1, UI-TARS-1.0): answers on a
``[0, 1000]`` grid relative to the image (answer frame ``norm1000``; Qwen2-VL: arXiv 2409.12191; the ScreenSpot-Pro
harness divides these answers by 1000, likaixin2000/ScreenSpot-Pro-GUI-Grounding ``models/qwen2vl.py:134-147`` and
``models/osatlas7b.py:163-181`` at bd8bbbb)."""

from __future__ import annotations

from groundwork.pixel_budget import PixelBudget
from gui_grounding.models.adapters.base import Adapter, _fmt
from gui_grounding.models.adapters.qwen2_5_vl import QWEN_FACTOR, QWEN_PROCESSOR_MAX_PIXELS, QWEN_PROCESSOR_MIN_PIXELS
from gui_grounding.models.prompts import parse_point_or_box

QWEN2_VL_BUDGET = PixelBudget.published(
    "no published grounding budget: the Qwen2-VL processor default (preprocessor_config.json min_pixels 3136, "
    "max_pixels 12845056; patch 14 x merge 2)",
    factor=QWEN_FACTOR,
    min_pixels=QWEN_PROCESSOR_MIN_PIXELS,
    max_pixels=QWEN_PROCESSOR_MAX_PIXELS,
)

# OS-Atlas point-grounding question: the "(with point)" form of the question whose "(with bbox)" form the
# ScreenSpot-Pro harness sends to OS-Atlas-7B (likaixin2000/ScreenSpot-Pro-GUI-Grounding models/osatlas7b.py:117 at
# bd8bbbb); the "(with point)" wording is the harness's SeeClick prompt (models/seeclick.py:77).
OS_ATLAS_POINT_PROMPT = (
    'In this UI screenshot, what is the position of the element corresponding to the command "{instruction}" '
    "(with point)?"
)


class Norm1000Adapter(Adapter):
    """Shared part of the 0-1000 families: the original image is sent (the server/processor resizes it; relative
    coordinates do not depend on that resize) and answers map back with ``x/1000*W``, ``y/1000*H``.
    Subclasses set ``template`` (the user text, ``{instruction}`` placeholder) and ``parse_answer``."""

    answer_frame = "norm1000"
    template = "{instruction}"

    def messages(self, instruction, frame, *, image_block=True):
        return self._user_turn(self.template.format(instruction=instruction), image_block)

    def sft_target(self, box, instruction):
        return f"({_fmt((box[0] + box[2]) / 2)},{_fmt((box[1] + box[3]) / 2)})"


class Qwen2VLAdapter(Norm1000Adapter):
    """Qwen2-VL convention (also OS-Atlas-7B, UGround-V1, UI-TARS-1.0): 0-1000 relative coordinates.

    * Image: the original screenshot (no pre-resize; ``resize`` is ignored). The processor / server resizes it;
      ``default_budget`` is the Qwen2-VL processor default, 3,136 .. 12,845,056 pixels (no published grounding budget).
    * Prompt: no system prompt; user = image, then OS-Atlas's point question ``In this UI screenshot, what is the
      position of the element corresponding to the command "{instruction}" (with point)?`` (OS-Atlas's point
      prompt: ``OS_ATLAS_POINT_PROMPT`` above).
    * Parse: a box ``<|box_start|>(x1,y1),(x2,y2)<|box_end|>`` (tokens kept or stripped by decoding) -> its centre,
      else the first ``(x,y)``; then ``x/1000*W``, ``y/1000*H`` in original pixels (``Frame.point_from_norm1000``).
    * SFT target: ``(x,y)`` on the 0-1000 grid.

    Example on 1280x720: ``"(500,500)"`` -> ``(640.0, 360.0)``.
    """

    name = "qwen2-vl"
    model_types = ("qwen2_vl",)
    template = OS_ATLAS_POINT_PROMPT
    default_budget = QWEN2_VL_BUDGET

    def parse_answer(self, text, *, strict=True):
        return parse_point_or_box(text)


ADAPTERS = (Qwen2VLAdapter,)
