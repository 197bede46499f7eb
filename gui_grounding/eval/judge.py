"""The one scorer shared by every benchmark: a predicted point against a sample's target.

Rules (the ScreenSpot-Pro harness's point-in-box test with edges included, likaixin2000/ScreenSpot-Pro-GUI-Grounding
``eval_screenspot_pro.py:137-152`` at bd8bbbb; OSWorld-G's refusal rule, below; and the issue's "Scoring, exactly"):

* no point (``None``) and no explicit refusal -> ``wrong_format`` (the answer could not be read), on every item,
  refusal items included;
* an explicit refusal (``refusal=True``: the model's "no target" answer, e.g. UI-Venus's ``[-1,-1]``; the
  predictions line's ``"refusal": true``) -> ``correct`` on a refusal item, ``wrong`` on an item whose target exists
  (an answer, not a format error);
* refusal item (OSWorld-G ``box_type: "refusal"``) with a point: ``correct`` only when both coordinates are negative
  (``x < 0 and y < 0``, the official "off the screen" refusal), else ``wrong``;
* otherwise ``correct`` when the point (original pixels) is inside any target box (edges included) or inside/on any
  target polygon, else ``wrong``.

The refusal rule is OSWorld-G's. The official scorer (the OSWorld-G authors' ``_eval``, as ported by them to
VLMEvalKit: open-compass/VLMEvalKit ``vlmeval/dataset/GUI/osworld_g.py:191-243`` at
ae5fdb19c321c4900a189506fedf27e9992b6eda) takes a predicted box, scores its centre, and on a refusal item returns
``all(centre[i] < 0 for i in range(2))``. Its answer parser (same file, ``:42-75``) maps the model's refusal answer to
``[-1, -1, -1, -1]`` (correct on refusal items, wrong elsewhere) and an unparsable answer to ``[0, 0, 0, 0]`` (centre
``(0, 0)``: wrong on refusal items too); a parse that raises leaves the item uncounted as correct (``:281-286``).
The same contract is stated for the official ``evaluation/eval.py`` ``GroundingEval`` by a fork of xlang-ai/OSWorld-G
(Onifin/Holo3.1-OSWorld-G ``evaluation/holo_osworld_g.py:33,85-91`` at 0fbdd89045f229ce92761de63e9f7b0495ec7b96:
"[-1, -1, -1, -1] for an explicit refusal, which GroundingEval scores as correct on `refusal` items and incorrect
everywhere else ... a broken generation is never credited as a refusal"). So an unreadable answer (null point, no
flag) is never an abstention; we label it ``wrong_format`` rather than ``wrong`` (both count as not correct, so the
accuracy is the official one).
"""

from __future__ import annotations

from gui_grounding.data.schema import Sample
from gui_grounding.models.frames import point_in_box, point_in_polygon

CORRECT, WRONG, WRONG_FORMAT = "correct", "wrong", "wrong_format"


def judge(sample: Sample, point: tuple[float, float] | list[float] | None, refusal: bool = False) -> str:
    """``"correct"``, ``"wrong"`` or ``"wrong_format"`` for ``point`` (original pixels ``(x, y)``, or None) on
    ``sample`` (module docstring: the rules and their source).

    Args:
        sample: the benchmark item; ``sample.refusal`` marks an item without a target.
        point: the predicted point in original-image pixels, or None when no point could be read.
        refusal: the answer was the model's explicit "no target" (the predictions line's ``"refusal": true``); it
            wins over ``point`` (the predictions reader never passes both).
    """
    if refusal:
        return CORRECT if sample.refusal else WRONG
    if point is None:
        return WRONG_FORMAT
    p = (float(point[0]), float(point[1]))
    if sample.refusal:
        return CORRECT if p[0] < 0 and p[1] < 0 else WRONG
    if any(point_in_box(p, b) for b in sample.boxes) or any(point_in_polygon(p, poly) for poly in sample.polygons):
        return CORRECT
    return WRONG
