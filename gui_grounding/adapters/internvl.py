"""InternVL family (transformers' native ``InternVLForConditionalGeneration``, ``config.model_type == "internvl"``;
InternVL2.5/3): boxes on a ``[0, 1000]`` grid relative to the image (answer frame ``norm1000``).

InternVL has no point format of its own: its grounding answer is a box, ``<ref>...</ref><box>[[x1, y1, x2, y2]]</box>``
with coordinates in ``[0, 1000]`` (OpenGVLab/InternVL ``internvl_chat/eval/refcoco/evaluate_grounding.py``: the prompt
asks for "the bounding box coordinate of the region this sentence describes: <ref>{}</ref>", answers are parsed as
``[[x1,y1,x2,y2]]``, divided by 1000 and scaled by the image width/height). So this adapter asks for a box, in the
model's native wording, and scores the box's **centre** as the click (the ScreenSpot-Pro convention for box answers):
a prompt the model was trained on keeps its zero-shot grounding, and the click/distance/Gaussian-point rewards stay
defined (on the 0-1000 grid). Asking for a point instead would mean a format InternVL never saw.
"""

from __future__ import annotations

from gui_grounding.adapters.base import Adapter, _fmt
from gui_grounding.prompts import parse_box, parse_point_or_box
from vlm_r1.pixel_budget import PixelBudget

# InternVL does not smart_resize: it tiles the image into 448x448 crops (+ a thumbnail), up to max_patches tiles
# (transformers got_ocr2 image processor, crop_to_patches). The budget has no smart_resize factor, so nothing is
# pre-resized for this family (answer frame norm1000); max_tiles bounds the tiling.
INTERNVL_TILE = 448
INTERNVL_BUDGET = PixelBudget.published(
    "InternVL tiling: 448x448 tiles, up to 12 (max_patches, the InternVL3 default; upstream VLM-R1 --max_anyres_num "
    "12) plus a thumbnail; no smart_resize",
    max_tiles=12,
)  # fmt: skip

# InternVL's grounding request (OpenGVLab/InternVL internvl_chat/eval/refcoco/evaluate_grounding.py prompt).
INTERNVL_GROUNDING_PROMPT = (
    "Please provide the bounding box coordinate of the region this sentence describes: <ref>{instruction}</ref>"
)


class InternVLAdapter(Adapter):
    """InternVL convention: a box on the 0-1000 grid, scored by its centre.

    * Image: the original screenshot (the processor tiles it; relative coordinates do not depend on the tiling).
    * Prompt: no system prompt; user = image, then ``Please provide the bounding box coordinate of the region this
      sentence describes: <ref>{instruction}</ref>`` (InternVL's grounding prompt, module docstring).
    * Parse: the first ``[x1, y1, x2, y2]`` (also inside ``<box>[[...]]</box>``; training: one box of integers,
      ordered corners) -> its centre; else a ``(x,y)`` point or ``(x1,y1),(x2,y2)`` box; on the 0-1000 grid, mapped
      back with ``x/1000*W``, ``y/1000*H``.
    * SFT target: ``<ref>{instruction}</ref><box>[[x1, y1, x2, y2]]</box>`` (InternVL's answer format), the target box
      rounded on the 0-1000 grid.
    """

    name = "internvl"
    answer_frame = "norm1000"
    model_types = ("internvl",)
    default_budget = INTERNVL_BUDGET

    def messages(self, instruction, frame, *, image_block=True):
        return self._user_turn(INTERNVL_GROUNDING_PROMPT.format(instruction=instruction), image_block)

    def parse_answer(self, text, *, strict=True):
        box = parse_box(text, "box", strict=strict)
        if box is not None:
            return self._centre(box)
        return parse_point_or_box(text)

    def sft_target(self, box, instruction):
        return f"<ref>{instruction}</ref><box>[[{', '.join(_fmt(v) for v in box)}]]</box>"


ADAPTERS = (InternVLAdapter,)
