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

import re

from groundwork.pixel_budget import PixelBudget
from gui_grounding.models.adapters.base import Adapter, _fmt
from gui_grounding.models.profile_types import ONE_GPU, Profile
from gui_grounding.models.prompts import answer_numbers, parse_box, parse_point_or_box

# InternVL does not smart_resize: it tiles the image into 448x448 crops (+ a thumbnail), up to max_patches tiles
# (transformers got_ocr2 image processor, crop_to_patches). The budget has no smart_resize factor, so nothing is
# pre-resized for this family (answer frame norm1000); max_tiles bounds the tiling.
INTERNVL_TILE = 448
INTERNVL_BUDGET = PixelBudget.published(
    "InternVL tiling: 448x448 tiles, up to 12 (max_patches, the InternVL3 default; upstream VLM-R1 --max_anyres_num "
    "12) plus a thumbnail; no smart_resize",
    max_tiles=12,
)

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
    refusal_clause_answer = "<box>[[-1, -1, -1, -1]]</box>"  # ours (the SFT target's <ref> names the instruction)
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

    def answer_box(self, text):
        return parse_box(text, "box", strict=False)

    def sft_target(self, box, instruction):
        return f"<ref>{instruction}</ref><box>[[{', '.join(_fmt(v) for v in box)}]]</box>"


# The ScreenSpot-Pro harness's InternVL request (likaixin2000/ScreenSpot-Pro-GUI-Grounding models/internvl.py:124,
# commit bd8bbbb; the trailing "ß" is in the harness's text and is kept, as it is what the published numbers saw),
# sent after "<image>\n" (the image part here); at most 12 tiles of 448 px (internvl.py:121), max_new_tokens 256
# (internvl.py:104), greedy.
INTERNVL_GUI_PROMPT = (
    "Please provide the bounding box coordinate of the UI element this user instruction describes: "
    "<ref>{instruction}</ref>. Answer in the format of [[x1, y1, x2, y2]]\u00df"
)
INTERNVL_HARNESS_BUDGET = PixelBudget.published(
    "likaixin2000/ScreenSpot-Pro-GUI-Grounding models/internvl.py:121 (bd8bbbb): internvl_preprocess_image(image, "
    "max_num=12), 448-px tiles plus a thumbnail",
    max_tiles=12,
)
_HARNESS_POINT_RE = re.compile(r"\[\[(\d+),(\d+)\]\]")
_HARNESS_BOX_RE = re.compile(
    r"\[\[\s*(-?\d+(?:\.\d+)?)\s*,\s*(-?\d+(?:\.\d+)?)\s*,\s*(-?\d+(?:\.\d+)?)\s*,\s*(-?\d+(?:\.\d+)?)\s*\]\]"
)


class InternVLGUIAdapter(InternVLAdapter):
    """InternVL as the ScreenSpot-Pro harness grounds it (``models/internvl.py``, commit bd8bbbb): a UI-element box
    request on the 0-1000 grid.

    * Image: the original screenshot, tiled by the processor (at most ``max_tiles`` 448-px tiles; 12 in the harness).
    * Prompt: no system prompt of ours (the checkpoint's chat template decides); user = image, then
      ``Please provide the bounding box coordinate of the UI element this user instruction describes:
      <ref>{instruction}</ref>. Answer in the format of [[x1, y1, x2, y2]]ß`` (INTERNVL_GUI_PROMPT).
    * Parse, in the harness's ORDER but not with its box rule: the first ``[[x,y]]`` point (digits only, no spaces:
      the harness's ``extract_first_point``, internvl.py:167-177), else the centre of the LAST ``[[x1, y1, x2, y2]]``
      box, **spaces, signs and decimals allowed** (``_HARNESS_BOX_RE``), else :class:`InternVLAdapter`'s parser (a box
      in another syntax); 0-1000 -> original pixels.

      Why not the harness's box rule: its ``extract_last_bounding_box`` (likaixin2000/ScreenSpot-Pro-GUI-Grounding
      ``models/internvl.py:152-164`` at bd8bbbb) matches four digit runs joined by bare commas inside ``[[ ]]`` with
      no spaces, so the spaced ``[[x1, y1, x2, y2]]`` its own prompt asks for never matches (the harness then has no
      point: ``wrong_format``); and when an unspaced box does match, ``re.findall`` returns tuples and
      ``match.group(1)`` raises ``AttributeError``, which neither ``ground_only_positive`` (:136) nor the eval loop
      (``eval_screenspot_pro.py:395``) catches: the harness run stops. So in the harness only a ``[[x,y]]`` point can
      ever score. We read the box the prompt asks for and score its centre, as the harness's :139-140 intends
      (``click_point = [(bbox[0] + bbox[2]) / 2, ...]``): more lenient than the harness, never a crash.
    * SFT target: ``[[x1, y1, x2, y2]]`` on the 0-1000 grid.
    """

    name = "internvl-gui"
    model_types = ()
    default_budget = INTERNVL_HARNESS_BUDGET
    refusal_clause_answer = None  # its SFT target names no instruction

    def messages(self, instruction, frame, *, image_block=True):
        return self._user_turn(INTERNVL_GUI_PROMPT.format(instruction=instruction), image_block)

    @staticmethod
    def _harness_answer(text: str):
        """``("point", (x, y))`` for a first ``[[x,y]]``, ``("box", box or None)`` for the last ``[[x1, y1, x2,
        y2]]`` (``None``: a number that is no coordinate), or ``None`` when the answer holds neither."""
        point = _HARNESS_POINT_RE.search(text)
        if point is not None:
            return "point", answer_numbers(point.groups())  # a number that is no coordinate: no answer
        last = next(reversed(list(_HARNESS_BOX_RE.finditer(text))), None)  # the harness takes the last box
        return ("box", answer_numbers(last.groups())) if last is not None else None

    def parse_answer(self, text, *, strict=True):
        found = self._harness_answer(text)
        if found is None:
            return super().parse_answer(text, strict=strict)
        kind, values = found
        if kind == "point" or values is None:
            return values
        x1, y1, x2, y2 = values
        if not strict or (x1 <= x2 and y1 <= y2):
            return (x1 + x2) / 2, (y1 + y2) / 2
        return None

    def answer_box(self, text):
        found = self._harness_answer(text)
        if found is None:
            return super().answer_box(text)
        return found[1] if found[0] == "box" else None

    def sft_target(self, box, instruction):
        return f"[[{', '.join(_fmt(v) for v in box)}]]"


ADAPTERS = (InternVLAdapter, InternVLGUIAdapter)


# ---------------------------------------------------------------------------------------------------------------------
# this family's published checkpoints (``PROFILES``, collected by gui_grounding.models.profiles); sources: public
# repositories at the commits named, model cards by URL
PROFILES = (
    Profile(
        "internvl3-8b",
        "OpenGVLab/InternVL3-8B-hf",
        "internvl",
        "internvl-gui",
        INTERNVL_HARNESS_BUDGET,
        256,
        ONE_GPU,
        {
            "adapter": "likaixin2000/ScreenSpot-Pro-GUI-Grounding models/internvl.py:121-141 (bd8bbbb): the UI-element box "
            "request, 12 tiles, first [[x,y]] else last [[x1,y1,x2,y2]] on the 0-1000 grid",
            "max_new_tokens": "likaixin2000/ScreenSpot-Pro-GUI-Grounding models/internvl.py:103-107 (max_new_tokens=256, "
            "do_sample=False)",
            "backends": "8B: one GPU (the transformers-native -hf checkpoint)",
        },
        {},
        (),
        "no published grounding number of the authors for this request: the harness's own InternVL row is InternVL2; "
        "InternVL3's chat template decides the system message (InternVL's chat() adds its own; whether the -hf "
        "template adds the same one is unverified). Parser: the harness's order (first [[x,y]], else last box), but "
        "its box path (internvl.py:152-164) never matches a spaced [[x1, y1, x2, y2]] and raises AttributeError on "
        "an unspaced one, so there only [[x,y]] points ever score; here spaced and unspaced boxes score their "
        "centre (more lenient than the harness)",
    ),
)
