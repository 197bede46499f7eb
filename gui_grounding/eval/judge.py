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

The refusal rule is OSWorld-G's. The authors' own scorer (xlang-ai/OSWorld-G ``evaluation/eval.py``) could not be
read here (no snapshot of that repository could be had): **unverified at its source**. What was read is a port of
the same ``_eval`` in VLMEvalKit (open-compass/VLMEvalKit ``vlmeval/dataset/GUI/osworld_g.py`` at
ae5fdb19c321c4900a189506fedf27e9992b6eda, commit "[Benchmark] Add GUI grounding: OSWorld-G"; its author is not
identified as an OSWorld-G author): ``_eval`` (:191-243) takes a predicted box, scores its centre, and on a refusal
item returns ``all(centre[i] < 0 for i in range(2))``; its answer parser (``parse_aguvis_coordinates``, :42-75) maps
the model's refusal answer ("wait") to ``[-1, -1, -1, -1]`` (correct on refusal items, wrong elsewhere) and an
unparsable answer to ``[0, 0, 0, 0]``; a parse that raises skips the item (``continue``, :279-286), which stays in
the denominator (``accuracy = correct / lt``, :252,315). The same contract is stated for the official
``GroundingEval`` by a fork of xlang-ai/OSWorld-G (Onifin/Holo3.1-OSWorld-G ``evaluation/holo_osworld_g.py:33,85-91``
at 0fbdd89045f229ce92761de63e9f7b0495ec7b96: "[-1, -1, -1, -1] for an explicit refusal, which GroundingEval scores
as correct on `refusal` items and incorrect everywhere else ... a broken generation is never credited as a
refusal").

**Unreadable answers: one difference, kept on purpose.** In that port the unparsable ``[0, 0, 0, 0]`` is a point:
its centre ``(0, 0)`` (all four values lie in [0, 1], so they are read as relative and scaled by the image size: still
``(0, 0)``) is wrong on refusal items (not negative) but **correct on a bbox item whose box covers the screen origin**
(``rect[0] <= 0 <= rect[2]``, i.e. a box starting at x = 0 and y = 0) and on a polygon item containing ``(0, 0)``.
Here an unreadable answer (null point, no flag) is ``wrong_format`` on every item, never correct. Because the
authors' own ``eval.py`` could not be read, we do not adopt the port's reading; the two agree except on targets
covering the origin (so our accuracy can be lower than the port's by the unreadable answers on such items), and the
``no point`` column keeps every unreadable answer visible. An unreadable answer is never an abstention in either.
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
