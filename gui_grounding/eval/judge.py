"""The one scorer shared by every benchmark: a predicted point against a sample's target.

Rules (``gta1_and_peers.md`` section 2.1, and the issue's "Scoring, exactly"):
* no point (``None``) -> ``wrong_format`` (except on refusal items, where abstaining is the right answer);
* refusal item (OSWorld-G): ``correct`` only when the model abstains (no point: a null point, or an explicit refusal
  answer such as UI-Venus's ``[-1,-1]``, ``refusal=True``), else ``wrong``;
* an explicit refusal on an item whose target exists is ``wrong`` (an answer, not a format error);
* otherwise ``correct`` when the point (original pixels) is inside any target box (edges included) or inside/on any
  target polygon, else ``wrong``.
"""

from __future__ import annotations

from gui_grounding.frames import point_in_box, point_in_polygon
from gui_grounding.schema import Sample

CORRECT, WRONG, WRONG_FORMAT = "correct", "wrong", "wrong_format"


def judge(sample: Sample, point: tuple[float, float] | list[float] | None, refusal: bool = False) -> str:
    """``"correct"``, ``"wrong"`` or ``"wrong_format"`` for ``point`` (original pixels, or None) on ``sample``;
    ``refusal``: the answer was the model's explicit "no target" (the predictions line's ``"refusal": true``)."""
    if sample.refusal:
        return CORRECT if point is None or refusal else WRONG
    if refusal:
        return WRONG
    if point is None:
        return WRONG_FORMAT
    p = (float(point[0]), float(point[1]))
    if any(point_in_box(p, b) for b in sample.boxes) or any(point_in_polygon(p, poly) for poly in sample.polygons):
        return CORRECT
    return WRONG
