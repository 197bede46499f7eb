"""Region-consistency voting over K sampled points: the one home of the consensus rule (test-time grounding and the
``consensus`` reward both call :func:`consensus`).

The rule is GUI-RC's (Du et al., 2025, "Test-Time Reinforcement Learning for GUI Grounding via Region
Consistency", arXiv:2508.05615; code: ZJU-REAL/GUI-RCPO ``GUI-RC/evaluation.py`` at cd3bd51, lines 26-39 and
164-206):

1. every sampled answer becomes a region: a **box** answer (GUI-RC: exactly four numbers, ``extract_answer``
   :29-33) votes with the box itself, edges ``int(x1), int(y1), int(x2), int(y2)`` clipped to ``[0, W] x [0, H]``
   (:170-174; an inverted box is an empty slice there: no vote); a **point** ``(x, y)`` (two numbers, :34-37) becomes
   a square of side ``region`` pixels (``POINT_EXPAND_SIZE = 50``): edges ``int(x - region/2)``,
   ``int(x + region/2)`` (truncation toward zero, as ``int()``), the same for ``y``, clipped likewise; an answer that
   does not parse (or is not finite, or lies beyond +-1e7) casts no vote (GUI-RC: ``[0, 0, 0, 0]``, an empty box);
2. a vote grid counts, per pixel, the regions covering it; the pixels holding the most votes form the **max-vote
   mask**;
3. the mask's 4-connected components (``scipy.ndimage.label``'s default structure) are the candidate consensus
   regions; the one with the **largest area** (pixels) wins. **Tie-break**: equal areas go to the component that
   ``scipy.ndimage.label`` numbers first, i.e. the one whose first pixel in raster order (top row first, then left
   to right) comes first -- GUI-RC's strict ``area > max_area`` loop over the labels in order;
4. the answer is the centre of the winning component's bounding box, ``((x_start + x_stop) / 2,
   (y_start + y_stop) / 2)`` in pixel edges (GUI-RC's ``find_objects`` slices).

Ours adds one number GUI-RC does not report: the **agreement**, ``max votes / K`` (the share of the K samples whose
regions cover the winning region; unparsed samples count in ``K``), stored per sample as a confidence.

Implementation: the grid is built on the distinct region edges only (coordinate compression: at most ``2K`` columns
and rows, each cell a block of pixels with one vote count), so the cost is ``O(K^2)`` whatever the image size, and
the result equals the pixel grid's (a component's area is the sum of its cells' pixel areas; a component's first
pixel in raster order lies in its first cell in raster order, so the labels keep their order).

Region size (:func:`check_region`): a finite number of pixels in ``[MIN_REGION, MAX_REGION]`` = ``[2, 1e6]``. The
lower bound is the smallest side whose region holds a vote for **every** point of the frame, and holds that point's
own pixel: with ``int()`` truncating toward zero, a side ``r < 1`` gives ``int(x - r/2) == int(x + r/2)`` for most
``x`` (``--tts-region 0.5`` emptied every vote: each answer became a format error), and a side ``1 <= r < 2`` still
empties the region of a point in ``[0, 1 - r/2)`` (``r = 1`` around ``(0.3, y)``: ``[int(-0.2), int(0.8)) = [0, 0)``)
and leaves an integer point outside its own region (``r = 1`` around ``10.0``: ``[9, 10)``, so the ``consensus``
reward would pay 0.0 to K identical rollouts). From ``r = 2`` on, ``int(x + r/2) >= floor(x) + 1`` and
``int(x - r/2) <= floor(x)`` for every ``x >= 0`` (and every ``x`` when the size is unknown), so K identical points
inside the frame always win with agreement 1.0, every one a member. The rule is enforced where a region is defined:
:func:`consensus` (every caller), ``TTSConfig.region``, the ``--tts-region`` flag's range and the ``consensus``
reward.

Frames: points, boxes, regions and the answer are in one pixel frame; evaluation uses original-image pixels (the
frame of ``"point"``, ``"samples"`` and ``"sample_boxes"`` in predictions files), the reward maps each completion's
answer to original pixels first, so ``region`` means the same on every family. GUI-RC votes with the model's raw
numbers on the original image's grid (:162-174), which is the same where the model's frame is the original's.

Which answers are boxes: the adapter's (``Adapter.answer_box``: the outline-box families, ``gta1-box``, InternVL's
boxes, a four-number ``computer_use`` coordinate), mapped to original pixels; GUI-RC's own parser counts every
unsigned number of the completion instead (two: a point, four: a box, else no vote), a difference the docs list.

GUI-RC's sampling defaults are ``SAMPLE_NUM = 64`` (evaluation.py:24), ``TEMPERATURE = 0.7`` (:23) and
``top_p=0.95`` (:107), ``max_tokens=1024`` (:108); ``gui-grounding eval --tts consensus`` defaults to K=8,
temperature 0.7, top_p 1.0 and the profile's ``max_new_tokens`` (``--tts-samples 64 --tts-top-p 0.95`` for GUI-RC's).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

#: side of the square region around each sampled point, pixels (GUI-RC ``POINT_EXPAND_SIZE``, evaluation.py:26)
DEFAULT_REGION = 50.0
#: the smallest region side that holds a vote for every point of the frame, and that point's own pixel (module
#: docstring: ``int()`` truncation toward zero empties narrower regions near the origin)
MIN_REGION = 2.0
#: the largest region side (a square of 1e6 pixels covers any screen)
MAX_REGION = 1e6
#: at most this many samples per vote (a predictions file's ``samples`` list beyond it is refused); K=64 is GUI-RC's
MAX_SAMPLES = 1024
#: coordinates beyond this magnitude are not answers (the predictions reader's bound)
MAX_COORD = 1e7


@dataclass(frozen=True)
class Consensus:
    """The outcome of one vote.

    Attributes:
        point: centre of the winning region's bounding box, ``(x, y)`` in the points' pixel frame, or ``None`` when
            no sample cast a vote.
        agreement: ``votes / num_samples`` in ``[0, 1]`` (0.0 without a point).
        votes: regions covering the winning region (the grid's maximum).
        num_samples: K, every sample given (unparsed ones included).
        region: the winning component's bounding box ``(x_min, y_min, x_max, y_max)``, integer pixel edges.
        members: per sample, whether its point lies in the winning component (its pixel ``(floor(x), floor(y))``
            is one of the component's pixels): what the ``consensus`` reward pays.
    """

    point: tuple[float, float] | None
    agreement: float
    votes: int
    num_samples: int
    region: tuple[int, int, int, int] | None
    members: tuple[bool, ...]

    def to_dict(self) -> dict:
        """JSON-able form (``point`` and ``region`` as lists)."""
        return {
            "point": list(self.point) if self.point is not None else None,
            "agreement": self.agreement,
            "votes": self.votes,
            "num_samples": self.num_samples,
            "region": list(self.region) if self.region is not None else None,
        }


def check_region(region) -> float:
    """``region`` as a float when it is a usable region side (a finite number, not a boolean, in
    ``[MIN_REGION, MAX_REGION]``: module docstring, "Region size"), else ``ValueError`` naming the value and the range.

    The one home of the region-size rule: :func:`consensus`, ``gui_grounding.eval.tts.TTSConfig``, the
    ``--tts-region`` flag (``number(min=MIN_REGION, max=MAX_REGION)``) and the ``consensus`` reward apply it."""
    if (
        isinstance(region, bool)
        or not isinstance(region, (int, float))
        or not math.isfinite(region)
        or not MIN_REGION <= region <= MAX_REGION
    ):
        raise ValueError(
            f"region must be a number of pixels in [{MIN_REGION:g}, {MAX_REGION:g}] (a smaller square cannot hold "
            f"a vote for every point: int() truncation empties it), got {region!r}"
        )
    return float(region)


def usable_point(point) -> tuple[float, float] | None:
    """``point`` as two finite floats within +-:data:`MAX_COORD`, else ``None`` (booleans, strings, NaN, ...)."""
    if not isinstance(point, (list, tuple)) or len(point) != 2:
        return None
    out = []
    for v in point:
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            return None
        v = float(v)
        if not math.isfinite(v) or abs(v) > MAX_COORD:
            return None
        out.append(v)
    return out[0], out[1]


def usable_box(box) -> tuple[float, float, float, float] | None:
    """``box`` as four finite floats within +-:data:`MAX_COORD` (``[x1, y1, x2, y2]``), else ``None``."""
    if not isinstance(box, (list, tuple)) or len(box) != 4:
        return None
    corners = [usable_point(box[:2]), usable_point(box[2:])]
    if corners[0] is None or corners[1] is None:
        return None
    return (*corners[0], *corners[1])


def box_region(box, width: float | None, height: float | None) -> tuple[int, int, int, int]:
    """GUI-RC's region of a box answer: ``int()`` of each edge (truncation toward zero), clipped to the image when
    its size is known (evaluation.py:170-172). Empty (``x2 <= x1`` or ``y2 <= y1``) for an inverted box or one
    outside the image."""
    x1, y1, x2, y2 = (int(v) for v in box)
    if width and height:
        x1, y1, x2, y2 = max(0, x1), max(0, y1), min(int(width), x2), min(int(height), y2)
    return x1, y1, x2, y2


def sample_region(point, region: float, width: float | None, height: float | None) -> tuple[int, int, int, int]:
    """GUI-RC's region of one point: ``(x1, y1, x2, y2)`` integer edges, ``int(x -+ region/2)``, clipped to the
    image when its size is known (``width``/``height`` > 0). Empty (``x2 <= x1`` or ``y2 <= y1``) when the point lies
    outside the image by more than ``region/2``."""
    half = region / 2
    x1, y1, x2, y2 = int(point[0] - half), int(point[1] - half), int(point[0] + half), int(point[1] + half)
    x1, y1 = (max(0, x1), max(0, y1)) if width and height else (x1, y1)
    if width and height:
        x2, y2 = min(int(width), x2), min(int(height), y2)
    return x1, y1, x2, y2


def consensus(
    points: Sequence,
    width: float | None = None,
    height: float | None = None,
    *,
    region: float = DEFAULT_REGION,
    boxes: Sequence | None = None,
) -> Consensus:
    """Vote over K sampled answers by GUI-RC's region rule (module docstring).

    Args:
        points: K sampled answers, each ``[x, y]`` (pixels of a ``width x height`` image; a box answer's centre) or
            ``None``/anything unusable (no vote, still counted in K).
        width, height: the image size in the points' frame; ``None`` or 0: unknown (regions are not clipped).
        region: side of each point's square region, pixels, in ``[MIN_REGION, MAX_REGION]`` (:func:`check_region`;
            GUI-RC: 50).
        boxes: per sample (same length as ``points``), the box the answer wrote, ``[x1, y1, x2, y2]`` in the same
            frame, or ``None``: a sample with a usable box (:func:`usable_box`) votes with that box as its region
            (:func:`box_region`, GUI-RC's four-number answer), the others with the square around their point.
            ``None``: every sample votes with its point's square.

    Returns:
        :class:`Consensus` (``point`` None when no sample voted); ``members`` are judged on each sample's point.

    Raises:
        ValueError: more than :data:`MAX_SAMPLES` points, ``boxes`` of another length, or ``region`` outside
            :func:`check_region`'s range.
    """
    import numpy as np
    from scipy import ndimage

    if len(points) > MAX_SAMPLES:
        raise ValueError(f"at most {MAX_SAMPLES} sampled points per vote, got {len(points)}")
    if boxes is not None and len(boxes) != len(points):
        raise ValueError(f"boxes must give one entry per sampled point ({len(points)}), got {len(boxes)}")
    region = check_region(region)
    k = len(points)
    usable = [usable_point(p) for p in points]
    written = [usable_box(b) for b in boxes] if boxes is not None else [None] * k
    regions = [
        box_region(b, width, height)
        if b is not None
        else sample_region(p, region, width, height)
        if p is not None
        else None
        for p, b in zip(usable, written, strict=True)
    ]
    voting = [b for b in regions if b is not None and b[2] > b[0] and b[3] > b[1]]
    if not voting:
        return Consensus(None, 0.0, 0, k, None, (False,) * k)
    xs = np.unique(np.array([v for b in voting for v in (b[0], b[2])], dtype=np.int64))
    ys = np.unique(np.array([v for b in voting for v in (b[1], b[3])], dtype=np.int64))
    diff = np.zeros((len(ys), len(xs)), dtype=np.int64)
    for x1, y1, x2, y2 in voting:
        i1, i2 = np.searchsorted(xs, x1), np.searchsorted(xs, x2)
        j1, j2 = np.searchsorted(ys, y1), np.searchsorted(ys, y2)
        diff[j1, i1] += 1
        diff[j1, i2] -= 1
        diff[j2, i1] -= 1
        diff[j2, i2] += 1
    votes = diff.cumsum(axis=0).cumsum(axis=1)[:-1, :-1]  # cell (j, i) spans [xs[i], xs[i+1]) x [ys[j], ys[j+1])
    top = int(votes.max())
    labels, count = ndimage.label(votes == top)
    cell_area = np.outer(np.diff(ys), np.diff(xs))  # exact in int64: |coords| <= 1e7 + region
    areas = np.zeros(count + 1, dtype=np.int64)
    np.add.at(areas, labels.ravel(), cell_area.ravel())
    areas[0] = -1  # background
    win = int(np.argmax(areas))  # the first label of the largest area: raster order of first pixels
    rows, cols = ndimage.find_objects(labels)[win - 1]
    box = (int(xs[cols.start]), int(ys[rows.start]), int(xs[cols.stop]), int(ys[rows.stop]))
    centre = ((box[0] + box[2]) / 2, (box[1] + box[3]) / 2)
    members = []
    for p in usable:
        inside = False
        if p is not None:
            fx, fy = math.floor(p[0]), math.floor(p[1])
            i, j = int(np.searchsorted(xs, fx, side="right")) - 1, int(np.searchsorted(ys, fy, side="right")) - 1
            inside = 0 <= i < len(xs) - 1 and 0 <= j < len(ys) - 1 and int(labels[j, i]) == win
        members.append(inside)
    return Consensus(centre, top / k, top, k, box, tuple(members))
