"""GUI grounding rewards: pure scoring functions plus their TRL reward-function wrappers.

The pure functions (``score_*``) take a completion's text, the target boxes and, where needed, the image size; the
geometry helpers (:func:`gaussian_point_value`, :func:`gaussian_overlap`, :func:`centre_distance_bonus`) take an
already-parsed point or box. The wrappers follow TRL's reward signature ``fn(completions, **kwargs) -> list[float]``
and read the dataset columns the ``gui_grounding`` task writes (``target_boxes_resized``, ``resized_size`` ``[W', H']``,
``prompt_mode``). The ``gui_grounding`` task declares them for ``--reward_funcs`` (:data:`REWARDS`, the task's
``rewards``; ``vlm_r1.rewards.resolve_rewards`` looks there first):

==========================  ======================================  ===================  =========================
name                        wrapper                                 answer               source
==========================  ======================================  ===================  =========================
``click``                   :func:`click_reward`                    point (box: centre)  GTA1
``click_format``            :func:`click_format_reward`             thinking format      ours (thinking variant)
``distance``                :func:`distance_reward`                 point (box: centre)  ours (MSE-like)
``iou``                     :func:`iou_reward`                      box                  VLM-R1 REC / GUI-G1 term
``gaussian_point``          :func:`gaussian_point_reward`           point (box: centre)  GUI-G²
``gaussian_coverage``       :func:`gaussian_coverage_reward`        box                  GUI-G²
``click_distance_bonus``    :func:`click_distance_bonus_reward`     point (box: centre)  SE-GUI
``consensus``               :func:`consensus_reward`                point (box: centre)  GUI-RCPO (label-free)
``click_refusal``           :func:`click_refusal_reward`            point, or abstain    ours (refusal training)
==========================  ======================================  ===================  =========================

Frames: rows built through an adapter (``gui_grounding.models.adapters``; every row the ``gui_grounding`` task writes) carry
``adapter``, ``answer_frame`` and the targets in that frame (``target_boxes_answer``, extent ``answer_size``); the
rewards then read those and parse with the adapter's training parser (:func:`answer_point`; e.g. Qwen3-VL's JSON
``point_2d`` on the 0-1000 grid, where ``distance`` normalises by the grid's diagonal). Rows without these columns
(older datasets, custom tasks) are read as before: ``target_boxes_resized`` and ``resized_size`` in resized pixels,
GTA1's parser for ``prompt_mode``. For the GTA1 family the two coincide.
Otherwise all coordinates are pixels of the **resized** image the model sees (``gui_grounding.models.frames``); ``docs/REWARDS.md``
has the formulas side by side. ``--box_rounding gta1`` (row column ``box_rounding``) changes only ``click``: its
targets are then GTA1's integer boxes, each published edge ``int(edge * (resized_side / source_side))``
(:func:`gui_grounding.models.frames.gta1_box_to_resized`, GTA1 ``src/grpo_grounding.py:156-166``), from the row columns
``target_boxes_source`` / ``source_box_scale`` / ``resized_size``; every other reward keeps ``target_boxes_resized``. Point rewards read the point with :func:`gui_grounding.models.prompts.parse_answer_point`
(strict GTA1 rules; in ``box`` mode the centre of the strictly parsed box); box rewards read
:func:`gui_grounding.models.prompts.parse_box` (strict) and need ``prompt_mode == "box"``. An answer that does not parse
scores 0.0 in every reward. Several target boxes: the best one counts (max over boxes); no target box: 0.0.
``consensus`` is the exception: it reads no target at all (label-free, test-time RL); it pays a rollout for agreeing
with the other rollouts of its prompt (:func:`consensus_reward`), voting in original-image pixels.

Every reward is total (TRL calls it on every rank; one that raises kills the step): any completion and any row give one
finite float. A number that is no coordinate (more than 12 digits, or beyond +-1e7: the parsers'
:func:`gui_grounding.models.prompts.answer_numbers`) is not an answer, so every parsed value is within +-1e7; a target
box that is NaN, infinite, inverted, malformed or past ±1e12 (:func:`groundwork.geometry.valid_box`) is skipped, so it
scores 0.0; a row whose image size or source scale is not two finite sides of at least 1 pixel
(:func:`groundwork.geometry.valid_size`) scores 0.0. Zero-width or zero-height targets are usable and keep the limits
documented per reward. Configuration errors (unknown prompt mode or box rounding, a box
reward under a point prompt, missing ``gta1`` columns, columns of different lengths) still raise.
"""

from __future__ import annotations

import functools
import math
import sys
from collections.abc import Sequence

from groundwork.geometry import valid_box, valid_size
from gui_grounding.models.adapters import get_adapter
from gui_grounding.models.consensus import DEFAULT_REGION, MAX_SAMPLES, check_region, consensus
from gui_grounding.models.frames import box_iou, gta1_box_to_resized, point_in_box
from gui_grounding.models.prompts import check_mode, is_thinking_format, parse_answer_point, parse_box
from gui_grounding.training import zoom
from gui_grounding.training.refusal import abstains, refusal_rewards, refusal_score
from vlm_r1.answers import completion_text

BoxLike = Sequence[float]  # (x_min, y_min, x_max, y_max), resized pixels
GAUSSIAN_SIGMA_RATIO = 0.5  # GUI-G²: sigma = 0.5 * element width / height (ZJU-REAL/GUI-G2 gaussian_grpo.py, alpha)
# How the click reward maps a target box into the resized frame (--box_rounding, vlm_r1.configs): exact float edges,
# or GTA1's int() truncation of the published edges.
BOX_ROUNDINGS = ("float", "gta1")


def check_box_rounding(box_rounding: str) -> str:
    """Return ``box_rounding`` or raise ``ValueError`` naming the allowed values."""
    if box_rounding not in BOX_ROUNDINGS:
        raise ValueError(f"unknown box_rounding {box_rounding!r}; expected one of {', '.join(BOX_ROUNDINGS)}")
    return box_rounding


@functools.lru_cache(maxsize=64)
def _adapter(name: str):

    return get_adapter(name)


def answer_point(text: str, mode: str = "non_thinking", adapter: str | None = None) -> tuple[float, float] | None:
    """The point a completion answers, in the row's answer frame: the row's adapter's training parser
    (``Adapter.parse_answer(strict=True)``, e.g. Qwen3-VL's JSON ``point_2d``) when the row names one (column
    ``adapter``), else GTA1's rule for ``mode`` (:func:`gui_grounding.models.prompts.parse_answer_point`, strict).

    Raises:
        ValueError: unknown ``mode`` or adapter name.
    """
    if adapter is None:
        return parse_answer_point(text, mode, strict=True)
    return _adapter(adapter).parse_answer(text, strict=True)


def _centre(box: BoxLike) -> tuple[float, float]:
    return (box[0] + box[2]) / 2, (box[1] + box[3]) / 2


def _targets(boxes) -> list[tuple[float, float, float, float]]:
    """The usable target boxes of a row (:func:`groundwork.geometry.valid_box`); unusable ones (NaN, inf, inverted,
    malformed) are dropped, so they score 0. A row value that is not a list of boxes gives no target."""
    if not isinstance(boxes, (list, tuple)):
        return []
    return [box for box in map(valid_box, boxes) if box is not None]


def _finite(value: float) -> float:
    """``value``, or 0.0 when it is not finite (a last guard; valid inputs never reach it)."""
    return value if math.isfinite(value) else 0.0


def _require_box_mode(mode: str, reward: str) -> None:
    if check_mode(mode) != "box":
        raise ValueError(f"reward {reward!r} scores a box answer and needs prompt_mode 'box', got {mode!r}")


def score_click(
    text: str, boxes: Sequence[Sequence[float]], mode: str = "non_thinking", adapter: str | None = None
) -> float:
    """GTA1 click reward for one completion: 1.0 when its point lands in any target box, else 0.0.

    Formula: ``r = 1[x1 <= x <= x2 and y1 <= y <= y2 for some target box]``.

    Rules (GTA1 ``click_reward``, Yan98/GTA1 ``src/grpo_grounding.py:146-188`` at 81f0c4c): exactly one ``(x,y)``
    pair of integers, else 0.0 (none, two pairs, decimals, garbage); box edges count (inclusive); a hit on any of
    several boxes counts. In ``box`` mode the point is the centre of the single integer ``[x1,y1,x2,y2]`` box (our
    extension; benchmarks score box answers on their centre).

    Args:
        text: the completion text.
        boxes: target boxes ``[x_min, y_min, x_max, y_max]`` in the **same frame** as the text's coordinates (the
            resized frame for Qwen2.5-VL/GTA1 prompts).
        mode: ``non_thinking`` (point anywhere in the text), ``thinking`` (point inside ``<answer>...</answer>``) or
            ``box`` (box anywhere in the text, scored on its centre).

    Returns:
        1.0 or 0.0 (unusable target boxes never hit).

    Raises:
        ValueError: unknown ``mode``.

    >>> score_click("(15,20)", [[10, 10, 20, 20]])
    1.0
    >>> score_click("(21,20)", [[10, 10, 20, 20]])
    0.0
    """
    point = answer_point(text, mode, adapter)
    if point is None:
        return 0.0
    return 1.0 if any(point_in_box(point, box) for box in _targets(boxes)) else 0.0


def score_click_format(text: str) -> float:
    """Thinking-mode format reward: 1.0 for ``<think>...</think><answer>(x,y)</answer>`` (one integer pair), else 0.0.

    >>> score_click_format("<think>top left</think><answer>(3,4)</answer>")
    1.0
    >>> score_click_format("(3,4)")
    0.0
    """
    return 1.0 if is_thinking_format(text) else 0.0


def score_distance(
    text: str,
    boxes: Sequence[BoxLike],
    image_size: Sequence[float],
    mode: str = "non_thinking",
    adapter: str | None = None,
) -> float:
    """Continuous, MSE-like distance reward: 1.0 at a target box centre, falling quadratically to 0.0 at one diagonal.

    Formula: ``d = min_i ||p - c_i||_2`` (pixels, ``c_i`` the centre of target box ``i``), ``D = sqrt(W'^2 + H'^2)``
    (the resized image diagonal), ``r = 1 - min(1, d / D)^2``. Source: ours (an ablation; "squared normalised
    distance" as in SE-GUI's decay term, but with one fixed normaliser and no in-box term).

    Args:
        text: the completion text.
        boxes: target boxes ``[x_min, y_min, x_max, y_max]``, resized pixels.
        image_size: ``[W', H']``, the resized image size in pixels (the ``resized_size`` column).
        mode: prompt mode; ``box`` mode scores the box centre.

    Returns:
        float in ``[0, 1]``; 0.0 when no point parses, there is no usable target box or the image size is unusable.

    Raises:
        ValueError: unknown ``mode``.

    >>> score_distance("(0,0)", [[0, 0, 6, 8]], [30, 40])  # d = 5, D = 50: 1 - 0.1**2
    0.99
    """
    size = valid_size(image_size)
    point = answer_point(text, mode, adapter)
    targets = _targets(boxes)
    if size is None or point is None or not targets:
        return 0.0
    d = min(math.dist(point, _centre(box)) for box in targets)
    return _finite(1.0 - min(1.0, d / math.hypot(*size)) ** 2)


def score_iou(text: str, boxes: Sequence[BoxLike], mode: str = "box") -> float:
    """IoU reward: the answered box's best IoU with the target boxes.

    Formula: ``r = max_i IoU(b, g_i)`` with ``b`` the strictly parsed ``[x1,y1,x2,y2]`` answer and
    :func:`gui_grounding.models.frames.box_iou` (continuous areas; zero-area boxes give 0.0). Source: the IoU term of
    VLM-R1's REC reward (om-ai-lab/VLM-R1 ``src/open-r1-multimodal/src/open_r1/vlm_modules/qwen_module.py:108-176`` at
    90052f4) and of GUI-G1's box reward (arXiv 2505.15810).

    Args:
        text: the completion text (``box`` prompt: exactly one integer box, ``x1 <= x2``, ``y1 <= y2``).
        boxes: target boxes, resized pixels.
        mode: must be ``box``.

    Returns:
        float in ``[0, 1]``; 0.0 when no box parses or there is no target box.

    Raises:
        ValueError: ``mode`` is not ``box`` (a point prompt cannot earn a box reward), or unknown.

    >>> score_iou("[0,0,10,10]", [[5, 0, 15, 10]])  # 50 / 150
    0.3333333333333333
    """
    _require_box_mode(mode, "iou")
    box = parse_box(text, mode, strict=True)
    if box is None:
        return 0.0
    return max((box_iou(box, target) for target in _targets(boxes)), default=0.0)


def gaussian_point_value(point: Sequence[float], box: BoxLike, ratio: float = GAUSSIAN_SIGMA_RATIO) -> float:
    """GUI-G² Gaussian point value of ``point`` for one target ``box`` (both resized pixels).

    Formula: ``(cx, cy)`` the box centre, ``sx = ratio * (x2 - x1)``, ``sy = ratio * (y2 - y1)`` (``ratio`` = 0.5),
    ``g = exp(-0.5 * ((x - cx)^2 / sx^2 + (y - cy)^2 / sy^2))``. 1.0 at the centre, ``exp(-0.5)`` at the middle of an
    edge, ``exp(-1)`` at a corner. Zero-size axis (``sx == 0`` or ``sy == 0``): that axis's term is the limit
    ``sigma -> 0``: 0 when the point is exactly on the centre line, infinite otherwise (so ``g`` is 1.0 or 0.0 on
    that axis), never a division by zero. Total: an inverted box or a non-finite value gives 0.0.

    Source: GUI-G² ``gaussian_point_reward`` (ZJU-REAL/GUI-G2 ``src/gui_g2/src/open_r1/gaussian_grpo.py``, alpha
    0.5; they also round to 3 decimals, we do not).
    """
    exponent = 0.0
    for value, centre, lo, hi in (
        (point[0], (box[0] + box[2]) / 2, box[0], box[2]),
        (point[1], (box[1] + box[3]) / 2, box[1], box[3]),
    ):
        sigma = ratio * (hi - lo)
        if not sigma >= 0:  # inverted box, or NaN
            return 0.0
        if sigma == 0:
            if value != centre:
                return 0.0
            continue
        z = (value - centre) / sigma  # a product, not ** 2: float ** raises OverflowError, * gives inf -> exp 0
        exponent += z * z
    return _finite(math.exp(-0.5 * exponent))


def score_gaussian_point(
    text: str, boxes: Sequence[BoxLike], mode: str = "non_thinking", adapter: str | None = None
) -> float:
    """GUI-G² Gaussian point reward: ``max_i`` :func:`gaussian_point_value` ``(p, g_i)``.

    ``p`` is the strictly parsed point (``box`` mode: the answered box's centre, as GUI-G² does).

    Args:
        text: the completion text.
        boxes: target boxes, resized pixels.
        mode: prompt mode.

    Returns:
        float in ``[0, 1]``; 0.0 when no point parses or there is no target box.

    Raises:
        ValueError: unknown ``mode``.
    """
    point = answer_point(text, mode, adapter)
    if point is None:
        return 0.0
    return max((gaussian_point_value(point, box) for box in _targets(boxes)), default=0.0)


def gaussian_overlap(pred: BoxLike, box: BoxLike, ratio: float = GAUSSIAN_SIGMA_RATIO) -> float:
    """GUI-G² Gaussian coverage value: ``exp(-D_B)`` between the Gaussians of two boxes (resized pixels).

    Each box ``[x1,y1,x2,y2]`` is the 2-D Gaussian with mean its centre and diagonal covariance
    ``diag(sx^2, sy^2)``, ``sx = ratio * width``, ``sy = ratio * height`` (``ratio`` = 0.5). For two such Gaussians
    (``p`` predicted, ``g`` target) the Bhattacharyya distance
    ``D_B = 1/8 (mu_p - mu_g)^T S^-1 (mu_p - mu_g) + 1/2 ln(det S / sqrt(det S_p det S_g))``, ``S = (S_p + S_g) / 2``,
    separates per axis ``a`` in {x, y}, and the reward is the Bhattacharyya coefficient::

        exp(-D_B) = prod_a sqrt(2 s_pa s_ga / (s_pa^2 + s_ga^2)) * exp(-(mu_pa - mu_ga)^2 / (4 (s_pa^2 + s_ga^2)))

    in ``[0, 1]``, 1.0 only for identical boxes. Zero-size boxes (an axis with ``s == 0``): one side zero -> that
    axis's factor is the closed form's value 0.0 (a degenerate Gaussian has no overlap with a proper one); both
    sides zero -> 1.0 when the centres coincide on that axis, else 0.0 (the limit for equal shrinking sigmas). No
    epsilon is added (GUI-G² adds 1e-8 inside the inverse and the square root, and rounds to 3 decimals). Total: an
    inverted box (negative sigma, where the square root has no real value) or a non-finite value gives 0.0.

    Source: GUI-G² ``gaussian_plane_reward`` (ZJU-REAL/GUI-G2 ``src/gui_g2/src/open_r1/gaussian_grpo.py``), called
    "Gaussian coverage reward" in the paper.
    """
    coefficient = 1.0
    for axis in (0, 1):
        mu_p, mu_g = (pred[axis] + pred[axis + 2]) / 2, (box[axis] + box[axis + 2]) / 2
        s_p, s_g = ratio * (pred[axis + 2] - pred[axis]), ratio * (box[axis + 2] - box[axis])
        if not (s_p >= 0 and s_g >= 0):  # inverted box, or NaN
            return 0.0
        var_sum = s_p * s_p + s_g * s_g
        if var_sum == 0:
            if mu_p != mu_g:
                return 0.0
            continue
        shift = mu_p - mu_g
        coefficient *= math.sqrt(2 * s_p * s_g / var_sum) * math.exp(-(shift * shift) / (4 * var_sum))
    return _finite(coefficient)


def score_gaussian_coverage(text: str, boxes: Sequence[BoxLike], mode: str = "box") -> float:
    """GUI-G² Gaussian coverage reward: ``max_i`` :func:`gaussian_overlap` ``(b, g_i)`` for the answered box ``b``.

    Args:
        text: the completion text (``box`` prompt: exactly one integer box, ``x1 <= x2``, ``y1 <= y2``).
        boxes: target boxes, resized pixels.
        mode: must be ``box``.

    Returns:
        float in ``[0, 1]``; 0.0 when no box parses or there is no target box.

    Raises:
        ValueError: ``mode`` is not ``box``, or unknown.
    """
    _require_box_mode(mode, "gaussian_coverage")
    box = parse_box(text, mode, strict=True)
    if box is None:
        return 0.0
    return max((gaussian_overlap(box, target) for target in _targets(boxes)), default=0.0)


def centre_distance_bonus(point: Sequence[float], box: BoxLike, image_size: Sequence[float]) -> float:
    """SE-GUI distance bonus of ``point`` for one target ``box`` (resized pixels), in ``[0, 1]``.

    Formula, in image-normalised coordinates (``x / W'``, ``y / H'``): ``c`` the box centre,
    ``d = ||p - c||``, ``d_max = max`` over the four image corners ``(0,0), (1,0), (0,1), (1,1)`` of ``||c - corner||``
    (the farthest any point of the image can be from ``c``, so ``d <= d_max`` inside the image), and
    ``bonus = 1 - min(1, d / d_max)^2``.

    Source: SE-GUI ``point_reward`` (YXB-NKU/SE-GUI ``open-r1-multimodal/src/open_r1/vlm_modules/qwen_module.py``,
    read at commit 60201cd): same ``d`` and ``d_max``; their decay is ``1 - (d/d_max)^2`` when ``d <= 1`` else 0,
    which goes negative for a point outside the image with ``d_max < d <= 1``; ours clamps at 0, and is identical
    for every point inside the image.

    Total: 0.0 for an unusable image size (:func:`groundwork.geometry.valid_size`) or a non-finite value.
    """
    size = valid_size(image_size)
    if size is None:
        return 0.0
    w, h = size
    cx, cy = (box[0] + box[2]) / 2 / w, (box[1] + box[3]) / 2 / h
    d = math.hypot(point[0] / w - cx, point[1] / h - cy)
    d_max = max(math.hypot(cx - kx, cy - ky) for kx in (0.0, 1.0) for ky in (0.0, 1.0))  # >= sqrt(0.5), never 0
    return _finite(1.0 - min(1.0, d / d_max) ** 2)


def score_click_distance_bonus(
    text: str,
    boxes: Sequence[BoxLike],
    image_size: Sequence[float],
    mode: str = "non_thinking",
    adapter: str | None = None,
) -> float:
    """SE-GUI click reward with a distance bonus: ``max_i (1[p in g_i] + centre_distance_bonus(p, g_i))``.

    The hit term is GTA1's inclusive in-box test (:func:`gui_grounding.models.frames.point_in_box`); the bonus is
    :func:`centre_distance_bonus`. A point at a box centre scores 2.0; on a box corner ``1 + bonus``; outside every
    box only the bonus (< 1). ``p`` is the strictly parsed point (``box`` mode: the box centre).

    Args:
        text: the completion text.
        boxes: target boxes, resized pixels.
        image_size: ``[W', H']`` resized pixels (the ``resized_size`` column).
        mode: prompt mode.

    Returns:
        float in ``[0, 2]``; 0.0 when no point parses, there is no usable target box or the image size is unusable.

    Raises:
        ValueError: unknown ``mode``.
    """
    size = valid_size(image_size)
    point = answer_point(text, mode, adapter)
    if size is None or point is None:
        return 0.0
    return max(
        (
            (1.0 if point_in_box(point, box) else 0.0) + centre_distance_bonus(point, box, size)
            for box in _targets(boxes)
        ),
        default=0.0,
    )


def gta1_click_boxes(
    source_boxes: Sequence[BoxLike], source_scale: Sequence[float], resized_size: Sequence[float]
) -> list[tuple[int, int, int, int]]:
    """The click reward's targets under ``--box_rounding gta1``: GTA1's integer boxes in the resized frame.

    Each published edge becomes ``int(edge * (resized_side / source_side))`` (x with widths, y with heights;
    :func:`gui_grounding.models.frames.gta1_box_to_resized`). GTA1 ``click_reward`` (``src/grpo_grounding.py:156-166``) does
    this with the 0-1000 boxes of its records and ``ratio = resized_side / 1000``, then compares the integer point
    inclusively, ``x0 <= x <= x1 and y0 <= y <= y1`` (:func:`score_click`).

    Args:
        source_boxes: boxes as published (column ``target_boxes_source``).
        source_scale: ``[sx, sy]``, the extent of their unit (column ``source_box_scale``: 1000 for 0-1000 boxes,
            ``W``/``H`` for original pixels).
        resized_size: ``[W', H']`` (column ``resized_size``).

    Returns:
        the boxes, in order; unusable source boxes (:func:`groundwork.geometry.valid_box`) are dropped, and an unusable
        source scale or image size (:func:`groundwork.geometry.valid_size`) gives no box (the row scores 0.0).
    """
    scale, size = valid_size(source_scale), valid_size(resized_size)
    if scale is None or size is None:
        return []
    # sides in [1, 1e12] and |edge| <= 1e12: every edge * ratio is finite (<= 1e24), so GTA1's int() cannot overflow
    return [gta1_box_to_resized(box, scale, size) for box in _targets(source_boxes)]


def click_reward(
    completions: list,
    target_boxes_resized: list,
    prompt_mode: list | None = None,
    box_rounding: list | None = None,
    target_boxes_source: list | None = None,
    source_box_scale: list | None = None,
    resized_size: list | None = None,
    **kwargs,
) -> list:
    """TRL reward function ``click`` (GTA1): :func:`score_click` per completion.

    Args:
        completions: one per rollout; ``[{"role": "assistant", "content": str}]`` or ``str``.
        target_boxes_resized: per rollout, the list of target boxes in resized-image pixels (dataset column written by
            the ``gui_grounding`` task; repeated ``num_generations`` times by TRL).
        prompt_mode: per rollout, ``non_thinking``, ``thinking`` or ``box`` (dataset column; default non_thinking).
        box_rounding: per rollout, ``"float"`` (default: score ``target_boxes_resized``) or ``"gta1"`` (score
            :func:`gta1_click_boxes` of ``target_boxes_source``, ``source_box_scale`` and ``resized_size``, which
            must then be given).

    Returns:
        list of floats in {0.0, 1.0}, one per completion.

    Raises:
        ValueError: columns of different lengths, unknown mode or box rounding, ``gta1`` rows without the source
            columns.
    """
    n = len(completions)
    modes = prompt_mode or ["non_thinking"] * n
    roundings = box_rounding or ["float"] * n
    target_boxes_resized = _answer_boxes(target_boxes_resized, kwargs)
    adapters = kwargs.get("adapter") or [None] * n
    if any(check_box_rounding(r) == "gta1" for r in roundings) and (
        target_boxes_source is None or source_box_scale is None or resized_size is None
    ):
        raise ValueError(
            "box_rounding 'gta1' needs the columns target_boxes_source, source_box_scale and "
            "resized_size (written by the gui_grounding task)"
        )
    none = [None] * n
    rows = zip(
        completions,
        target_boxes_resized,
        modes,
        roundings,
        target_boxes_source or none,
        source_box_scale or none,
        resized_size or none,
        adapters,
        strict=True,
    )
    out = []
    zoom_rows = zoom.zoom_rows(n, {**kwargs, "resized_size": resized_size, "prompt_mode": prompt_mode})
    for i, (c, boxes, mode, rounding, source, scale, size, adapter) in enumerate(rows):
        if zoom_rows[i] is not None:  # a rollout of the zoom tool: its final point, in original pixels
            out.append(
                zoom.hit(
                    zoom.final_point(zoom_rows[i], zoom_rows[i]["rollout_turns"], completion_text(c)), zoom_rows[i]
                )
            )
            continue
        if rounding == "gta1":
            boxes = gta1_click_boxes(source, scale, size)
        out.append(score_click(completion_text(c), boxes, mode, adapter))
    return out


def score_click_refusal(
    text: str, boxes: Sequence[BoxLike], no_target, mode: str = "non_thinking", adapter=None, penalty=0.0
) -> float:
    """Refusal-aware click reward for one completion (ours; docs/REWARDS.md): 1.0 for abstaining on a sample with no
    valid target (``no_target is True``) and 0.0 for anything else there; on a sample with a target ``-penalty`` for
    abstaining (default 0) and :func:`score_click` otherwise. Abstaining: the family's refusal answer
    (``gui_grounding.training.refusal.abstains``); the rule: ``gui_grounding.training.refusal.refusal_score``."""
    click = score_click(text, boxes, mode, adapter)
    return refusal_score(abstains(text, mode, adapter), no_target, click, penalty)


def click_refusal_reward(completions: list, target_boxes_resized: list, prompt_mode: list | None = None, **kwargs):
    """TRL reward function ``click_refusal``: :func:`score_click_refusal` per completion, with the rows' ``no_target``
    and ``refusal_penalty`` columns (``--refusal_training true``); logs ``refusal/share``, ``refusal/precision`` and
    ``refusal/recall`` of the batch through TRL's ``log_metric`` (``gui_grounding.training.refusal.refusal_rewards``).

    Raises:
        ValueError: columns of different lengths, unknown mode or adapter name.
    """
    n = len(completions)
    modes, adapters = _modes(prompt_mode, n, "non_thinking"), _adapters(kwargs, n)
    texts = [completion_text(c) for c in completions]
    boxes = _answer_boxes(target_boxes_resized, kwargs)
    clicks = [score_click(t, b, m, a) for t, b, m, a in zip(texts, boxes, modes, adapters, strict=True)]
    return refusal_rewards(texts, clicks, modes, adapters, kwargs)


def click_format_reward(completions: list, **kwargs) -> list:
    """TRL reward function ``click_format``: :func:`score_click_format` per completion (thinking mode)."""
    return [score_click_format(completion_text(c)) for c in completions]


def _modes(prompt_mode: list | None, n: int, default: str) -> list:
    return prompt_mode if prompt_mode is not None else [default] * n


def _answer_boxes(target_boxes_resized: list, columns: dict) -> list:
    """Per rollout, the target boxes in the row's answer frame: column ``target_boxes_answer`` (rows built through an
    adapter, ``gui_grounding.training.task``), else ``target_boxes_resized`` (older rows: resized pixels, as before)."""
    answer = columns.get("target_boxes_answer")
    return answer if answer is not None else target_boxes_resized


def _answer_sizes(resized_size: list, columns: dict) -> list:
    """Per rollout, ``[W, H]`` of the answer frame: column ``answer_size`` (``[1000, 1000]`` on the 0-1000 grid), else
    ``resized_size`` (resized pixels)."""
    answer = columns.get("answer_size")
    return answer if answer is not None else resized_size


def _adapters(columns: dict, n: int) -> list:
    return columns.get("adapter") or [None] * n


def _per_completion(
    score, completions: list, prompt_mode, default_mode: str, values: list, columns: dict, adapter: bool
):
    """``score(text, *values of the row, mode[, adapter])`` per completion: the column plumbing of the target rewards
    (one rule for all of them). ``values`` are per-rollout columns (the answer-frame boxes, sizes); the mode is the
    row's ``prompt_mode`` (default ``default_mode``), the adapter the row's ``adapter`` column (``None`` without one),
    passed when ``adapter``.

    Raises:
        ValueError: columns of different lengths (``zip(strict=True)``).
    """
    n = len(completions)
    modes = _modes(prompt_mode, n, default_mode)
    if not adapter:  # the adapter column is not read (nor its length checked)
        return [
            score(completion_text(c), *row, mode) for c, *row, mode in zip(completions, *values, modes, strict=True)
        ]
    rows = zip(completions, *values, modes, _adapters(columns, n), strict=True)
    return [score(completion_text(c), *row, mode, ad) for c, *row, mode, ad in rows]


def distance_reward(
    completions: list, target_boxes_resized: list, resized_size: list, prompt_mode: list | None = None, **kwargs
) -> list:
    """TRL reward function ``distance``: :func:`score_distance` per completion.

    Args:
        completions: one per rollout (conversational messages or ``str``).
        target_boxes_resized: per rollout, the target boxes in resized pixels.
        resized_size: per rollout, ``[W', H']`` of the resized image.
        prompt_mode: per rollout (default ``non_thinking``).

    Returns:
        list of floats in ``[0, 1]``.

    Raises:
        ValueError: columns of different lengths, unknown mode (an unusable image size scores 0.0).
    """
    frame = [_answer_boxes(target_boxes_resized, kwargs), _answer_sizes(resized_size, kwargs)]
    return _per_completion(score_distance, completions, prompt_mode, "non_thinking", frame, kwargs, adapter=True)


def iou_reward(completions: list, target_boxes_resized: list, prompt_mode: list | None = None, **kwargs) -> list:
    """TRL reward function ``iou``: :func:`score_iou` per completion (needs ``--prompt_mode box``; default ``box``).

    Raises:
        ValueError: columns of different lengths, or a row whose mode is not ``box``.
    """
    boxes = [_answer_boxes(target_boxes_resized, kwargs)]
    return _per_completion(score_iou, completions, prompt_mode, "box", boxes, kwargs, adapter=False)


def gaussian_point_reward(
    completions: list, target_boxes_resized: list, prompt_mode: list | None = None, **kwargs
) -> list:
    """TRL reward function ``gaussian_point``: :func:`score_gaussian_point` per completion (default ``non_thinking``).

    Raises:
        ValueError: columns of different lengths, unknown mode.
    """
    boxes = [_answer_boxes(target_boxes_resized, kwargs)]
    return _per_completion(score_gaussian_point, completions, prompt_mode, "non_thinking", boxes, kwargs, adapter=True)


def gaussian_coverage_reward(
    completions: list, target_boxes_resized: list, prompt_mode: list | None = None, **kwargs
) -> list:
    """TRL reward function ``gaussian_coverage``: :func:`score_gaussian_coverage` per completion (``box`` mode).

    Raises:
        ValueError: columns of different lengths, or a row whose mode is not ``box``.
    """
    boxes = [_answer_boxes(target_boxes_resized, kwargs)]
    return _per_completion(score_gaussian_coverage, completions, prompt_mode, "box", boxes, kwargs, adapter=False)


def click_distance_bonus_reward(
    completions: list, target_boxes_resized: list, resized_size: list, prompt_mode: list | None = None, **kwargs
) -> list:
    """TRL reward function ``click_distance_bonus``: :func:`score_click_distance_bonus` per completion.

    Returns:
        list of floats in ``[0, 2]``.

    Raises:
        ValueError: columns of different lengths, unknown mode (an unusable image size scores 0.0).
    """
    frame = [_answer_boxes(target_boxes_resized, kwargs), _answer_sizes(resized_size, kwargs)]
    return _per_completion(
        score_click_distance_bonus, completions, prompt_mode, "non_thinking", frame, kwargs, adapter=True
    )


def _group_key(sample_id, prompt) -> str:
    """The vote a rollout takes part in: its row's ``sample_id`` (one prompt), else the ``repr`` of its prompt."""
    return f"sample_id:{sample_id!r}" if sample_id is not None else f"prompt:{prompt!r}"


def _consensus_entries(completions: list, prompts, prompt_mode, image_size, resized_size, columns: dict) -> list:
    """Per completion, ``(key, point, W, H)``: its group key, its answered point in original pixels (``None`` when
    nothing parses) and the original image size; ``None`` for a row whose sizes are unusable (no vote).

    Raises:
        ValueError: no image size column, no group key (neither ``sample_id`` nor ``prompts``), columns of
            different lengths, unknown mode or adapter.
    """
    n = len(completions)
    answer_sizes = _answer_sizes(resized_size, columns)
    if image_size is None or answer_sizes is None:
        raise ValueError(
            "reward 'consensus' needs the columns image_size and answer_size (or resized_size), "
            "written by the gui_grounding task"
        )
    sample_ids = columns.get("sample_id")
    if sample_ids is None and prompts is None:
        raise ValueError("reward 'consensus' groups rollouts by the sample_id column or by prompts; neither given")
    none = [None] * n
    rows = zip(
        completions,
        _modes(prompt_mode, n, "non_thinking"),
        _adapters(columns, n),
        image_size,
        answer_sizes,
        sample_ids if sample_ids is not None else none,
        prompts if prompts is not None else none,
        strict=True,
    )
    entries = []
    for c, mode, adapter, size, answer_size, sample_id, prompt in rows:
        point = answer_point(completion_text(c), mode, adapter)
        original, answer = valid_size(size), valid_size(answer_size)
        if original is None or answer is None:
            entries.append(None)
            continue
        (w, h), (aw, ah) = original, answer
        if point is not None:
            point = (point[0] * w / aw, point[1] * h / ah)
        entries.append((_group_key(sample_id, prompt), point, w, h))
    return entries


def _gather(payload) -> tuple[list, int]:
    """Every process's ``payload`` (``torch.distributed.all_gather_object``, a collective: every process must call
    it) and this process's rank; ``([payload], 0)`` without an initialised process group of more than one process."""
    dist = sys.modules.get("torch.distributed")  # not imported: no process group can exist, and torch stays unloaded
    if dist is None or not dist.is_available() or not dist.is_initialized() or dist.get_world_size() <= 1:
        return [payload], 0
    gathered = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, payload)
    return gathered, dist.get_rank()


def consensus_reward(
    completions: list,
    prompts: list | None = None,
    prompt_mode: list | None = None,
    image_size: list | None = None,
    resized_size: list | None = None,
    **kwargs,
) -> list:
    """TRL reward function ``consensus`` (GUI-RCPO, label-free): 1.0 when the rollout's point lies in its group's
    majority region, else 0.0. No target box is read: it trains on unlabeled data (test-time RL).

    Rule: each completion's point is parsed as ``click`` does (:func:`answer_point` with the row's ``prompt_mode``,
    default ``non_thinking``, and ``adapter``), then mapped from the answer frame to original pixels,
    ``x * W / W_a``, ``y * H / H_a`` (``[W, H]`` the column ``image_size``; ``[W_a, H_a]`` the column ``answer_size``,
    else ``resized_size``). The completions of one group vote by GUI-RC's region rule
    (:func:`gui_grounding.models.consensus.consensus` with the image size, squares of
    :data:`~gui_grounding.models.consensus.DEFAULT_REGION` = 50 original pixels, checked by
    :func:`~gui_grounding.models.consensus.check_region` before the gather: a side under 2 px would empty votes, so it is a
    configuration error on every process, never a silent 0.0), and a completion earns 1.0 when it is a
    member of the winning region (``Consensus.members``: its pixel ``(floor x, floor y)`` is in the winning
    component). An answer that does not parse counts in the group but casts no vote and scores 0.0; a row whose
    ``image_size`` or answer size is unusable (:func:`groundwork.geometry.valid_size`) casts no vote and scores 0.0; a
    group of more than :data:`~gui_grounding.models.consensus.MAX_SAMPLES` completions scores 0.0 throughout.

    Groups: the completions of one prompt, keyed by the row's ``sample_id`` (rows without one: the ``repr`` of the
    ``prompts`` entry) and the original image size. Two rows of one generation batch with the same ``sample_id``
    (a prompt drawn twice) vote together.

    Processes: TRL calls a reward on every process with that process's slice of the generation batch, and a group
    may be split across processes (the batch need only divide by ``num_generations``). So this reward **gathers
    the group across processes**: with an initialised ``torch.distributed`` group of more than one process, every
    process's ``(key, point, W, H)`` list is all-gathered (``torch.distributed.all_gather_object``), each group votes
    over every process's completions, and each process returns the rewards of its own completions -- the values a
    single process would give on the whole batch. **Every process must call it** (a collective), which TRL does;
    do not call it on one process alone while a process group is initialised. A configuration error on any process
    is raised on every process, after the gather, so none is left waiting.

    Returns:
        list of floats in {0.0, 1.0}, one per completion.

    Raises:
        ValueError: no ``image_size`` or answer-size column, neither ``sample_id`` nor ``prompts``, columns of
            different lengths, unknown mode or adapter (on any process).
    """
    try:
        region = check_region(DEFAULT_REGION)
        local, error = _consensus_entries(completions, prompts, prompt_mode, image_size, resized_size, kwargs), None
    except Exception as err:  # re-raised below, after every process has joined the gather
        local, error = [], err
    payloads, rank = _gather((None if error is None else f"{type(error).__name__}: {error}", local))
    if error is not None:
        raise error
    failed = [(r, message) for r, (message, _) in enumerate(payloads) if message is not None]
    if failed:
        raise ValueError(f"reward 'consensus' failed on process {failed[0][0]}: {failed[0][1]}")
    groups: dict = {}  # (key, W, H) -> [(process, index)], in process order then batch order
    for r, (_, entries) in enumerate(payloads):
        for i, entry in enumerate(entries):
            if entry is not None:
                groups.setdefault((entry[0], entry[2], entry[3]), []).append((r, i))
    out = [0.0] * len(local)
    for (_, w, h), members in groups.items():
        own = [(j, i) for j, (r, i) in enumerate(members) if r == rank]
        if not own or len(members) > MAX_SAMPLES:
            continue
        vote = consensus([payloads[r][1][i][1] for r, i in members], w, h, region=region)
        for j, i in own:
            out[i] = 1.0 if vote.members[j] else 0.0
    return out


#: ``--reward_funcs`` name -> reward function, declared by the ``gui_grounding`` task (``GUIGroundingTask.rewards``)
REWARDS = {
    "click": click_reward,
    "click_format": click_format_reward,
    "distance": distance_reward,
    "iou": iou_reward,
    "gaussian_point": gaussian_point_reward,
    "gaussian_coverage": gaussian_coverage_reward,
    "click_distance_bonus": click_distance_bonus_reward,
    "consensus": consensus_reward,
    "click_refusal": click_refusal_reward,
    "zoom_tool": zoom.zoom_tool_reward,
    "zoom_gain": zoom.zoom_gain_reward,
    "zoom_cost": zoom.zoom_cost_reward,
}
