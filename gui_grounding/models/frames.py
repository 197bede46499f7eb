"""Coordinate frames of GUI grounding (the generic maths, shared with vlm_r1, lives in ``groundwork.geometry``).

Three frames appear in GUI grounding (sources: Qwen2.5-VL's absolute coordinates, QwenLM/Qwen2.5-VL ``README.md:26``
at f0af299; UI-TARS-1.5's map-back through smart_resize, bytedance/UI-TARS ``README_coordinates.md:90-91`` at 582f3a7;
GTA1's prompt and resize, Yan98/GTA1 ``src/grpo_grounding.py:78-84,125-132`` at 81f0c4c; Qwen2-VL's 0-1000 grid as
the ScreenSpot-Pro harness reads it, likaixin2000/ScreenSpot-Pro-GUI-Grounding ``models/qwen2vl.py:134-147`` at
bd8bbbb; Qwen3-VL's relative coordinates, QwenLM/Qwen3-VL ``README.md:117`` at 9658872; GTA1's 0-1000 records,
Yan98/GTA1 ``README.md:56``):

* **original**: pixels of the screenshot file, ``(W, H)``. Data is stored here (canonical samples).
* **resized**: pixels of the image the model actually sees, ``(W', H')`` = transformers' ``smart_resize`` of the
  original with ``factor = patch_size * merge_size`` (28 for Qwen2/2.5-VL) and the processor's pixel budget. Qwen2.5-VL,
  UI-TARS-1.5 and GTA1 answer in this frame; GTA1's prompt states ``H'``/``W'``; the click reward scores here.
* **norm1000**: ``[0, 1000]`` relative coordinates (Qwen2-VL, Qwen3-VL, GTA1's training records).

Test-time zoom adds a fourth: a **crop window** of the original screenshot (:class:`CropWindow`, from
:func:`zoom_window`), whose pixels map to the screenshot's by an integer offset; the crop is then sent like any
screenshot (its own resized frame).

Following GTA1, the image is resized **once** (in the dataset) to ``(W', H')``; the processor's own smart_resize is
then the identity, so the frame the model sees is exactly the frame the reward uses.
"""

from __future__ import annotations

from dataclasses import dataclass

from groundwork.geometry import Box, Frame, Point, box_iou, smart_resize

# smart_resize, Frame, box_iou and the Box/Point types live in groundwork.geometry (shared with vlm_r1's REC task) and are
# re-exported here, so ``from gui_grounding.models.frames import Frame, box_iou, smart_resize`` keeps working.
__all__ = [
    "Box",
    "CropWindow",
    "Frame",
    "Point",
    "box_from_norm1000",
    "box_iou",
    "gta1_box_to_resized",
    "point_in_box",
    "point_in_polygon",
    "smart_resize",
    "zoom_window",
]


def box_from_norm1000(box: Box, width: int, height: int) -> Box:
    """``[0, 1000]`` relative box -> original pixels for a ``width x height`` image (no resize involved)."""
    return box[0] / 1000 * width, box[1] / 1000 * height, box[2] / 1000 * width, box[3] / 1000 * height


def gta1_box_to_resized(
    box: Box, source_scale: tuple[float, float], resized_size: tuple[float, float]
) -> tuple[int, int, int, int]:
    """A box given in a source unit -> integer edges in the resized frame, by GTA1's click-reward rule.

    GTA1 passes the reward ``solution = [bbox, resized_h/1000, resized_w/1000]`` (Yan98/GTA1 ``src/grpo_grounding.py``
    :137, bbox in 0-1000) and truncates every edge: ``x0 = int(x0*ratio_w)``, ``y0 = int(y0*ratio_h)``, same for
    ``x1``/``y1`` (:156-164). Here the ratios are ``resized_side / source_side`` per axis (``x`` with widths, ``y`` with
    heights), computed first as floats as GTA1 does, then ``int()`` (truncation toward zero) of ``edge * ratio``. For
    GTA1 records ``source_scale`` is ``(1000, 1000)`` and this is GTA1's arithmetic exactly, float rounding included
    (``int(90 * (700/1000))`` is 62, not 63, because ``0.7`` is stored as 0.6999...).

    Compared with the float box ``edge * resized_side / source_side`` every (non-negative) edge moves left/up by the
    dropped fraction: for the integer points GTA1 parses, the left/top edges admit one more pixel whenever the float
    edge is fractional (``10.3`` admits ``x >= 11``, ``int`` gives ``x >= 10``) and the right/bottom edges admit the
    same pixels (``x <= 100.7`` and ``x <= 100`` agree on integers).

    Args:
        box: ``(x_min, y_min, x_max, y_max)`` in the source unit.
        source_scale: ``(sx, sy)``, the extent of the source unit (1000 for 0-1000 boxes, ``W``/``H`` for pixels).
        resized_size: ``(W', H')`` of the resized image.

    Returns:
        integer ``(x_min, y_min, x_max, y_max)`` in resized pixels.
    """
    ratio_w, ratio_h = resized_size[0] / source_scale[0], resized_size[1] / source_scale[1]
    return int(box[0] * ratio_w), int(box[1] * ratio_h), int(box[2] * ratio_w), int(box[3] * ratio_h)


def point_in_box(point: Point, box: Box) -> bool:
    """True when ``point`` lies in ``box``, edges included (GTA1 reward and ScreenSpot-Pro harness use ``<=``)."""
    x, y = point
    return box[0] <= x <= box[2] and box[1] <= y <= box[3]


def point_in_polygon(point: Point, polygon: list[Point]) -> bool:
    """True when ``point`` lies inside ``polygon`` or on its boundary (OSWorld-G rule: boundary included).

    ``polygon`` is a list of ``(x, y)`` vertices in order (closed implicitly). Even-odd ray casting, with an explicit
    on-segment test first so that edges and vertices count.
    """
    x, y = point
    n = len(polygon)
    for i in range(n):
        (x1, y1), (x2, y2) = polygon[i], polygon[(i + 1) % n]
        cross = (x2 - x1) * (y - y1) - (y2 - y1) * (x - x1)
        if cross == 0 and min(x1, x2) <= x <= max(x1, x2) and min(y1, y2) <= y <= max(y1, y2):
            return True
    inside = False
    for i in range(n):
        (x1, y1), (x2, y2) = polygon[i], polygon[(i + 1) % n]
        if (y1 > y) != (y2 > y) and x < x1 + (y - y1) * (x2 - x1) / (y2 - y1):
            inside = not inside
    return inside


@dataclass(frozen=True)
class CropWindow:
    """A window of an image in its displayed frame (EXIF orientation applied, as every box and point is), integer
    pixel edges ``(x_min, y_min, x_max, y_max)``, ``x_max``/``y_max`` exclusive (PIL's ``crop`` box).

    Pixel ``(i, j)`` of the crop is pixel ``(x_min + i, y_min + j)`` of the image, so points map by a plain offset:
    :meth:`to_image` and :meth:`to_window` add and subtract the integer offset: exact for integer and dyadic
    coordinates (``0.5``, ``0.25``, ...), within one rounding of the addition for other floats."""

    x_min: int
    y_min: int
    x_max: int
    y_max: int

    @property
    def width(self) -> int:
        return self.x_max - self.x_min

    @property
    def height(self) -> int:
        return self.y_max - self.y_min

    def to_image(self, point: Point) -> Point:
        """A point in the crop's pixels -> the image's pixels."""
        return point[0] + self.x_min, point[1] + self.y_min

    def to_window(self, point: Point) -> Point:
        """A point in the image's pixels -> the crop's pixels."""
        return point[0] - self.x_min, point[1] - self.y_min

    def crop(self, image):
        """The window of a PIL ``image`` (its displayed frame), a new image of ``width x height``."""
        return image.crop((self.x_min, self.y_min, self.x_max, self.y_max))

    def as_list(self) -> list[int]:
        return [self.x_min, self.y_min, self.x_max, self.y_max]


def zoom_window(point: Point, width: int, height: int, fraction: float) -> CropWindow:
    """The zoom-in window around ``point`` (original pixels) of a ``width x height`` image: sides
    ``round(fraction * width)`` x ``round(fraction * height)`` (at least 1 pixel, at most the image), centred on the
    point as nearly as integer edges allow (``x_min = round(x - side / 2)``), then shifted (never shrunk) to lie inside
    the image. A point outside the image gives the window at that edge.

    Raises:
        ValueError: ``fraction`` not in ``(0, 1]``, or a size below 1 pixel.
    """
    if not 0 < fraction <= 1:
        raise ValueError(f"zoom fraction must be in (0, 1], got {fraction!r}")
    if width < 1 or height < 1:
        raise ValueError(f"image size must be at least 1x1, got {width}x{height}")
    side_w = min(width, max(1, round(fraction * width)))
    side_h = min(height, max(1, round(fraction * height)))
    x0 = min(max(round(point[0] - side_w / 2), 0), width - side_w)
    y0 = min(max(round(point[1] - side_h / 2), 0), height - side_h)
    return CropWindow(int(x0), int(y0), int(x0 + side_w), int(y0 + side_h))
