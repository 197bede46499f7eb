"""Image-coordinate maths shared by every task: the one IoU and the one smart_resize frame of the project.

Two pixel frames matter for Qwen-VL models:

* **original**: pixels of the image file, ``(W, H)``. Ground truth is stored here (REC boxes, GUI target boxes).
* **resized**: pixels of the image the model actually sees, ``(W', H')`` = transformers' ``smart_resize`` of the
  original with ``factor = patch_size * merge_size`` (28 for Qwen2/2.5-VL) and the processor's pixel budget
  (``VLMBaseModule.get_image_resize_params``). Qwen2.5-VL (and models trained like it: GTA1, UI-TARS-1.5, VLM-R1's REC
  checkpoints) answer in this frame, so a predicted box is mapped back with :meth:`Frame.box_to_original` before it
  is compared with original-pixel ground truth.

Plus ``[0, 1000]`` relative coordinates (norm1000: Qwen2-VL, Qwen3-VL, GTA1's training records).

``gui_grounding.models.frames`` re-exports everything here (it adds the GUI-only helpers: point-in-box, polygons).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

Box = tuple[float, float, float, float]  # (x_min, y_min, x_max, y_max)
Point = tuple[float, float]  # (x, y)

# The largest magnitude a reward accepts for a coordinate or an image side (pixels). Answers are bounded by the number
# rule (at most 12 digits, so below 1e12); targets and sizes past this bound are invalid and score 0. Within it, every
# product and square the rewards form stays far from float overflow (at most ~1e25).
COORD_LIMIT = 1e12


def finite_number(value) -> float | None:
    """``value`` as a float when it is a real number with ``|value| <= COORD_LIMIT``; else ``None``.

    ``None`` for NaN, infinities, booleans, strings, ``None`` and anything ``float()`` refuses (an int too large for a
    float included). Total: never raises.
    """
    if isinstance(value, (bool, str, bytes)):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError, ArithmeticError):
        return None
    return number if -COORD_LIMIT <= number <= COORD_LIMIT else None  # NaN fails both comparisons


def valid_box(box) -> Box | None:
    """``box`` as four floats when it is a usable ``[x_min, y_min, x_max, y_max]``; else ``None``.

    Usable: a sequence of exactly four :func:`finite_number` values with ``x_min <= x_max`` and ``y_min <= y_max``
    (zero width or height is usable; an inverted box is not). Rewards skip unusable targets, so a NaN, infinite,
    inverted or malformed target scores 0. Total: never raises.
    """
    if isinstance(box, (str, bytes, dict)):
        return None
    try:
        if len(box) != 4:
            return None
        x1, y1, x2, y2 = (finite_number(box[i]) for i in range(4))
    except (TypeError, LookupError):
        return None
    if x1 is None or y1 is None or x2 is None or y2 is None or x1 > x2 or y1 > y2:
        return None
    return x1, y1, x2, y2


def valid_size(size) -> tuple[float, float] | None:
    """``(W, H)`` as floats when ``size`` is a pair of :func:`finite_number` sides of at least 1 pixel; else ``None``.

    A side under 1 pixel (zero, negative, NaN, inf) is not an image; rewards score such a row 0. Total: never raises.
    """
    if isinstance(size, (str, bytes, dict)):
        return None
    try:
        if len(size) != 2:
            return None
        w, h = finite_number(size[0]), finite_number(size[1])
    except (TypeError, LookupError):
        return None
    if w is None or h is None or w < 1 or h < 1:
        return None
    return w, h


def frame_of(image_size, resized_size) -> Frame | None:
    """The :class:`Frame` of an original ``image_size`` ``[W, H]`` sent at ``resized_size`` ``[W', H']`` (pixels, as a
    row's columns store them), or ``None`` when either is not a usable size: :func:`valid_size` (finite, at least 1
    pixel per side, within :data:`COORD_LIMIT`) with whole-pixel sides (``1920`` and ``1920.0``, never ``1920.5``:
    truncating it would give a silently wrong frame). The one reading of a row's frame (the REC reward, the GUI
    task's rows, the zoom tool). Total: never raises."""
    size, resized = valid_size(image_size), valid_size(resized_size)
    if size is None or resized is None or any(not v.is_integer() for v in (*size, *resized)):
        return None
    return Frame(int(size[0]), int(size[1]), int(resized[0]), int(resized[1]))


def smart_resize(height: int, width: int, *, factor: int, min_pixels: int, max_pixels: int) -> tuple[int, int]:
    """Resized ``(height, width)`` the Qwen-VL processor will use (transformers' ``smart_resize``, unchanged).

    Both outputs are multiples of ``factor`` and at least ``factor``; ``min_pixels <= h*w <= max_pixels`` except when a
    very thin image forces its short side up to ``factor`` (e.g. ``smart_resize(28, 4000, max_pixels=100352)`` is
    ``(28, 3780)``, 105,840 pixels); the processor does the same, so the frame still matches what the model sees.
    Example: ``smart_resize(720, 1280, factor=28, min_pixels=3136, max_pixels=200704)`` is ``(336, 588)``.

    Images under ``min_pixels`` are scaled up (``smart_resize(10, 10, factor=28, min_pixels=3136, ...)`` is
    ``(56, 56)``).

    Raises:
        ValueError: from transformers, for an aspect ratio (long side / short side) above 200.
    """
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import smart_resize as hf_smart_resize

    h, w = hf_smart_resize(int(height), int(width), factor=factor, min_pixels=min_pixels, max_pixels=max_pixels)
    return int(h), int(w)


@dataclass(frozen=True)
class Frame:
    """An original image size and the resized size the model sees. All sizes in pixels.

    Build with :meth:`Frame.for_image`. Conversions are plain per-axis scalings (no offsets: smart_resize stretches,
    it does not pad or crop).
    """

    width: int
    height: int
    resized_width: int
    resized_height: int

    @classmethod
    def for_image(cls, width: int, height: int, *, factor: int, min_pixels: int, max_pixels: int) -> Frame:
        """Frame of an original ``width x height`` image under a processor's smart_resize parameters."""
        rh, rw = smart_resize(height, width, factor=factor, min_pixels=min_pixels, max_pixels=max_pixels)
        return cls(int(width), int(height), rw, rh)

    @property
    def scale_x(self) -> float:
        """resized / original along x."""
        return self.resized_width / self.width

    @property
    def scale_y(self) -> float:
        """resized / original along y."""
        return self.resized_height / self.height

    # original <-> resized
    def point_to_resized(self, point: Point) -> Point:
        """Original-pixel point -> resized-pixel point."""
        return point[0] * self.scale_x, point[1] * self.scale_y

    def point_to_original(self, point: Point) -> Point:
        """Resized-pixel point (e.g. a Qwen2.5-VL answer) -> original-pixel point."""
        return point[0] / self.scale_x, point[1] / self.scale_y

    def box_to_resized(self, box: Box) -> Box:
        """Original-pixel box ``(x_min, y_min, x_max, y_max)`` -> resized-pixel box (floats, not rounded)."""
        return box[0] * self.scale_x, box[1] * self.scale_y, box[2] * self.scale_x, box[3] * self.scale_y

    def box_to_original(self, box: Box) -> Box:
        """Resized-pixel box -> original-pixel box."""
        return box[0] / self.scale_x, box[1] / self.scale_y, box[2] / self.scale_x, box[3] / self.scale_y

    # original <-> norm1000
    def point_from_norm1000(self, point: Point) -> Point:
        """``[0, 1000]`` relative point -> original pixels (``x/1000*W``, Qwen2-VL / Qwen3-VL convention)."""
        return point[0] / 1000 * self.width, point[1] / 1000 * self.height

    def point_to_norm1000(self, point: Point) -> Point:
        """Original-pixel point -> ``[0, 1000]`` relative point."""
        return point[0] / self.width * 1000, point[1] / self.height * 1000

    def box_from_norm1000(self, box: Box) -> Box:
        """``[0, 1000]`` relative box (GTA1 training records) -> original-pixel box."""
        return (
            box[0] / 1000 * self.width,
            box[1] / 1000 * self.height,
            box[2] / 1000 * self.width,
            box[3] / 1000 * self.height,
        )


def box_iou(a: Box, b: Box) -> float:
    """Intersection over union of two boxes ``(x_min, y_min, x_max, y_max)`` in the same frame (continuous areas).

    Returns 0.0 for disjoint boxes (touching edges included) or when the union has zero area; a box with
    ``x_max <= x_min`` or ``y_max <= y_min`` never overlaps anything, so it scores 0.0 too, and so does a box with a
    NaN or infinite coordinate (never NaN). The one IoU of the project (GUI data cleaning, the REC ``iou_reward``).
    Example: ``box_iou((0, 0, 10, 10), (5, 0, 15, 10))`` is ``50 / 150``.
    """
    iw = min(a[2], b[2]) - max(a[0], b[0])
    ih = min(a[3], b[3]) - max(a[1], b[1])
    if iw <= 0 or ih <= 0:
        return 0.0
    inter = iw * ih
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    iou = inter / union if union > 0 else 0.0
    return iou if math.isfinite(iou) else 0.0
