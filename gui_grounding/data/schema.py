"""Canonical GUI grounding sample, record readers and validation with reason codes.

Canonical record (the example record of the GTA1 blog, https://huggingface.co/blog/HelloKKMe/grounding-r1, section on
data), boxes in **original-image pixels**::

    {"instruction": "Click menu", "image_path": "images/screenshot_001.png",
     "target_bbox": {"x_min": 12, "y_min": 10, "x_max": 42, "y_max": 40}}

``target_bbox`` may also be a list of such dicts (any hit counts). Optional keys: ``sample_id`` (or ``id``),
``image_width``/``image_height``, ``source``, ``platform`` (mobile/desktop/web), ``ui_type`` (text/icon); other keys
are kept in ``Sample.extra``.

Also read: GTA1 records (``image``, ``bbox`` in 0-1000 of the original image, ``conversations``) and VLM-R1
``grpo_jsonl`` records (``image``, ``conversations`` whose gpt turn is a bbox ``[x1, y1, x2, y2]`` in original
pixels, REC style). Image paths are relative to the image folder given for the file, else to the file's directory.

Instructions: ``<image>`` tags are removed. Canonical and VLM-R1 instructions also have their whitespace collapsed;
GTA1 instructions keep every other byte, as GTA1 builds its user turn with ``instruction.replace("<image>", "")``
only (Yan98/GTA1 ``src/grpo_grounding.py:106-107``).

Boxes: ``Sample.boxes`` are original pixels (validated and clipped, :func:`clip_box`). Each sample also keeps the
boxes as the record published them (``Sample.source_boxes``, unclipped) with their unit (``Sample.source_box_unit``:
``"norm1000"`` for GTA1 records, ``"pixel"`` for canonical and VLM-R1 records) and that unit's extent
(:meth:`Sample.source_box_scale`: 1000 x 1000, or the original ``W x H``), for ``--box_rounding gta1``
(``gui_grounding.training.rewards``).

Nothing is lost: every record becomes a :class:`Sample` or raises :class:`SampleError` with a reason code and the
record's reference (``file:line``); :func:`load_samples` skips and counts bad records, or stops at the first one in
strict mode.

Numbers, text, paths and images are checked by the one GUI-free validation path, ``groundwork.validate`` (its reason
codes extend ``REASONS``: ``bad_box``, ``bad_text``, ``path_outside_root``, ``not_a_file``, ``image_too_large``,
``suspect_unit``); image sizes are those of the displayed frame (EXIF orientation applied), a documented difference
from upstream VLM-R1 and GTA1.
"""

from __future__ import annotations

import logging
import os
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from groundwork import validate
from groundwork.records import RecordError, iter_records, lax_loads
from groundwork.validate import REASONS as VALIDATE_REASONS
from gui_grounding.models.frames import Box, box_from_norm1000

logger = logging.getLogger(__name__)

REASONS = {
    "unparseable_record": "line is not valid JSON, or not a JSON object",
    "unknown_format": "record matches none of the canonical, GTA1 or VLM-R1 formats",
    "bad_field": "a required field is missing or has the wrong type",
    "missing_image": "image file does not exist",
    "unreadable_image": "image file cannot be decoded",
    "empty_instruction": "instruction is empty",
    "inverted_box": "box has x_min >= x_max or y_min >= y_max (zero area or inverted)",
    "box_outside_image": "box extends outside the image by more than the clipping tolerance (see clip_box)",
    "point_only": "the target is a point, not a box (a point cannot become a box without inventing its extent)",
    "duplicate": "same image, instruction and box(es) as an earlier sample of the same conversion",
    "image_write_failed": "an image embedded in the record could not be written under the image root",
    # the shared checks of groundwork.validate (numbers, text, paths, images)
    **{k: v for k, v in VALIDATE_REASONS.items() if k not in ("missing_image", "unreadable_image")},
}

# Clipping rule (the one home; used by record_to_sample/load_samples and by `gui-grounding convert`). Annotated boxes
# often overshoot the screenshot by a pixel or two (rounding of DOM / accessibility-tree boxes, 2-decimal ratios), so a
# box edge up to this far outside the image is clipped to the image and counted, not rejected.
CLIP_TOLERANCE_PX = 4.0
# Extra allowance for boxes given as ratios (0-1) or 0-1000 values: 0.005 of the image side is half of the last digit
# of a 2-decimal ratio (SeeClick / ShowUI / OS-Atlas round to 2 decimals), i.e. values in [-0.005, 1.005] (or
# [-5, 1005] in 0-1000 units) are clipped. The allowance is max(CLIP_TOLERANCE_PX, CLIP_TOLERANCE_RATIO * side).
CLIP_TOLERANCE_RATIO = 0.005


# what reading an odd record can raise besides SampleError (a field of the wrong type, an int too large for a float,
# JSON nested too deeply): the record becomes a bad_field reject
FIELD_ERRORS = (TypeError, ValueError, KeyError, IndexError, AttributeError, ArithmeticError, RecursionError)


class SampleError(ValueError):
    """A record that cannot become a sample. ``ref`` is ``file:line``, ``reason`` a key of ``REASONS``."""

    def __init__(self, ref: str, reason: str, message: str):
        assert reason in REASONS, reason
        self.ref, self.reason, self.message = ref, reason, message
        super().__init__(f"{ref}: {reason}: {message}")


def require(record: Any, keys, ref: str) -> None:
    """Check ``record`` is a JSON object holding ``keys`` (the one record-shape check of the data converters and the
    benchmark readers, which import it from here).

    Raises:
        SampleError: ``unparseable_record`` for a non-object, ``bad_field`` naming the missing keys.
    """
    if not isinstance(record, dict):
        raise SampleError(ref, "unparseable_record", f"record is not a JSON object: {type(record).__name__}")
    missing = [k for k in keys if k not in record]
    if missing:
        raise SampleError(ref, "bad_field", f"missing field(s) {missing}; record has {sorted(record)}")


def clip_box(
    box: Box,
    width: int,
    height: int,
    ref: str,
    *,
    tolerance_px: float = CLIP_TOLERANCE_PX,
    tolerance_ratio: float = 0.0,
    what: str = "box",
) -> tuple[Box, bool]:
    """Validate a box in original pixels against a ``width x height`` image and clip small overshoots.

    The rule (one home for it): an inverted or zero-area box is rejected; an edge may lie outside ``[0, width]`` x
    ``[0, height]`` by at most ``max(tolerance_px, tolerance_ratio * side)`` pixels (``side`` = width for x, height for
    y) and is then clipped to the image; farther out is rejected; a box left with zero area after clipping (it lay
    along or just beyond an image edge) is rejected too. Pass ``tolerance_ratio=CLIP_TOLERANCE_RATIO`` when the box
    came from ratios or 0-1000 values (see the constants above); ``tolerance_px=0`` rejects any overshoot.

    Args:
        box: ``(x_min, y_min, x_max, y_max)`` in original-image pixels.
        width, height: image size in pixels.
        ref: ``file:line`` reference for errors.
        what: how the box is named in error messages (e.g. ``"0-1000 box [..] -> box"``).

    Returns:
        ``(box, clipped)``: the box (clipped to the image if needed) and whether it was clipped.

    Raises:
        SampleError: ``inverted_box`` or ``box_outside_image``.
    """
    x0, y0, x1, y1 = (float(v) for v in box)
    if x0 >= x1 or y0 >= y1:
        raise SampleError(ref, "inverted_box", f"{what} {list(box)} is inverted or has zero area")
    tol_x = max(tolerance_px, tolerance_ratio * width)
    tol_y = max(tolerance_px, tolerance_ratio * height)
    out_x, out_y = max(-x0, x1 - width, 0.0), max(-y0, y1 - height, 0.0)
    if out_x > tol_x or out_y > tol_y:
        axis, out, tol = ("x", out_x, tol_x) if out_x - tol_x >= out_y - tol_y else ("y", out_y, tol_y)
        raise SampleError(
            ref,
            "box_outside_image",
            f"{what} {list(box)} extends {out:g} px outside the {width}x{height} "
            f"image along {axis} (clipping tolerance {tol:g} px)",
        )
    clipped = (max(x0, 0.0), max(y0, 0.0), min(x1, float(width)), min(y1, float(height)))
    if clipped == (x0, y0, x1, y1):
        return clipped, False
    if clipped[0] >= clipped[2] or clipped[1] >= clipped[3]:
        raise SampleError(ref, "box_outside_image", f"{what} {list(box)} has no area inside the {width}x{height} image")
    return clipped, True


SOURCE_BOX_UNITS = ("pixel", "norm1000")
# image reasons that ``record_to_sample(image_optional=True)`` tolerates (the pixels are not needed)
_UNAVAILABLE = frozenset({"missing_image", "not_a_file", "unreadable_image", "image_too_large", "unsupported_image"})
# the fields of a canonical record that Sample.to_record writes from the validated sample (never from ``extra``)
CANONICAL_KEYS = frozenset(
    {
        "sample_id",
        "instruction",
        "image_path",
        "target_bbox",
        "image_width",
        "image_height",
        "source",
        "platform",
        "ui_type",
        "no_target",
    }
)
NORM1000_SCALE = 1000.0  # the extent of a 0-1000 box unit on both axes


@dataclass
class Sample:
    """One grounding sample. ``boxes`` are ``(x_min, y_min, x_max, y_max)`` in original pixels; sizes in pixels.

    ``source_boxes`` / ``source_box_unit``: the boxes exactly as the record published them (before unit conversion and
    clipping) and their unit, ``"pixel"`` (original pixels) or ``"norm1000"`` (0-1000 of the original image, GTA1).
    Samples built in code may leave ``source_boxes`` empty: :meth:`published_boxes` then gives ``boxes`` in pixels.
    """

    sample_id: str
    instruction: str
    image_path: str  # resolved path of the screenshot
    boxes: list[Box]
    width: int
    height: int
    source: str | None = None
    platform: str | None = None
    ui_type: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    # target polygons in original pixels (benchmarks only: OSWorld-G), and refusal items: no target exists (OSWorld-G's
    # box_type "refusal"; a training or canonical record's "no_target": true, read_no_target), ``boxes`` empty;
    # correct only on a refusal answer (gui_grounding.eval.judge), trained with --refusal_training
    # (gui_grounding.training.task)
    polygons: list[list[tuple[float, float]]] = field(default_factory=list)
    refusal: bool = False
    source_boxes: list[Box] = field(default_factory=list)
    source_box_unit: str = "pixel"

    def source_box_scale(self) -> tuple[float, float]:
        """``(sx, sy)``, the extent of ``source_box_unit``: ``(1000, 1000)`` for norm1000, ``(W, H)`` for pixels.

        Raises:
            ValueError: unknown ``source_box_unit``.
        """
        if self.source_box_unit == "norm1000":
            return NORM1000_SCALE, NORM1000_SCALE
        if self.source_box_unit == "pixel":
            return float(self.width), float(self.height)
        raise ValueError(
            f"unknown source_box_unit {self.source_box_unit!r}; expected one of {', '.join(SOURCE_BOX_UNITS)}"
        )

    def published_boxes(self) -> list[Box]:
        """The boxes as published (``source_boxes``), or ``boxes`` when none were recorded (then in pixels)."""
        return list(self.source_boxes) if self.source_boxes else list(self.boxes)

    def to_record(self, image_root: str | None = None) -> dict:
        """Canonical JSON record; ``image_path`` made relative to ``image_root`` when given."""
        path = os.path.relpath(self.image_path, image_root) if image_root else self.image_path
        boxes = [dict(zip(("x_min", "y_min", "x_max", "y_max"), b, strict=True)) for b in self.boxes]
        rec = {
            "sample_id": self.sample_id,
            "instruction": self.instruction,
            "image_path": path,
            "target_bbox": boxes[0] if len(boxes) == 1 else boxes,
            "image_width": self.width,
            "image_height": self.height,
        }
        for key in ("source", "platform", "ui_type"):
            if getattr(self, key) is not None:
                rec[key] = getattr(self, key)
        if self.refusal:  # no valid target (ours, NO_TARGET_KEY): no box, the flag
            rec["target_bbox"], rec[NO_TARGET_KEY] = [], True
        # the converted fields win: a stray key of the source record (an unchecked ``target_bbox`` beside a VLM-R1
        # conversation, an ``image_width`` that disagrees with the image) never replaces them (see shadowed_keys)
        if CANONICAL_KEYS.isdisjoint(self.extra):
            return {**rec, **self.extra}
        return {**rec, **{k: v for k, v in self.extra.items() if k not in CANONICAL_KEYS}}

    def shadowed_keys(self) -> list[str]:
        """Keys of ``extra`` that :meth:`to_record` leaves out because a converted field has the same name."""
        return sorted(CANONICAL_KEYS.intersection(self.extra))


# --------------------------------------------------------------------------------------------------------------------
# reading files


def detect_format(record: dict) -> str | None:
    """``"canonical"``, ``"gta1"``, ``"vlm_r1"`` or ``None`` from a record's keys.

    A record with both ``target_bbox`` (canonical) and ``conversations`` (GTA1 / VLM-R1) is ambiguous: None (its
    boxes could be read from either, and a stray key must not decide which). ``gui-grounding convert --format``
    names the format explicitly instead.
    """
    if "target_bbox" in record:
        return None if "conversations" in record else "canonical"
    if "bbox" in record and "conversations" in record and "image" in record:
        return "gta1"
    if "conversations" in record and "image" in record:
        return "vlm_r1"
    return None


_CHECKERS: dict[tuple, validate.ImageChecker] = {}


def image_checker(
    verify: str = "decode",
    max_image_pixels: int | None = validate.DECODE_PIXEL_LIMIT,
    limits: validate.ImageLimits | None = None,
) -> validate.ImageChecker:
    """The process-wide :class:`groundwork.validate.ImageChecker` for ``verify`` / ``max_image_pixels`` / the family's
    ``limits`` (one cache each, keyed by path, size and mtime: each image is checked once)."""
    key = (verify, max_image_pixels, limits)
    if key not in _CHECKERS:
        _CHECKERS[key] = validate.ImageChecker(verify, max_image_pixels, limits)
    return _CHECKERS[key]


def _verify_mode(verify: bool | str) -> str:
    return verify if isinstance(verify, str) else ("decode" if verify else "header")


def read_image_size(
    path: str,
    ref: str,
    *,
    verify: bool | str = True,
    max_image_pixels: int | None = validate.DECODE_PIXEL_LIMIT,
    limits: validate.ImageLimits | None = None,
) -> tuple[int, int]:
    """``(width, height)`` of an image in its displayed frame (EXIF orientation applied, ``groundwork.validate``).

    ``verify``: ``True``/``"decode"`` decodes every pixel (truncated or corrupt data is rejected), ``False``/
    ``"header"``/``"none"`` reads the header only. Each image is checked once (cached by path, size and mtime).

    Raises:
        SampleError: ``missing_image``, ``not_a_file`` (not a regular non-empty file), ``image_too_large`` (over
            ``max_image_pixels``, the decode guard, nothing decoded), ``unreadable_image`` or ``image_unsupported`` (outside the model
            family's ``limits``: aspect ratio, smallest side).
    """
    try:
        return image_checker(_verify_mode(verify), max_image_pixels, limits).check(path)
    except validate.Invalid as err:
        raise SampleError(ref, err.reason, err.message) from None


def _resolve_image(path_in_record: Any, ref: str, base_dir: str, contain: bool = True) -> str:
    if not isinstance(path_in_record, str) or not path_in_record:
        raise SampleError(ref, "bad_field", f"image path must be a non-empty string, got {path_in_record!r}")
    try:
        return validate.resolve_path(base_dir, validate.text(path_in_record, "image path"), contain=contain)
    except validate.Invalid as err:
        raise SampleError(ref, err.reason, err.message) from None


def strip_image_tags(text: Any, ref: str, *, collapse_whitespace: bool = True) -> str:
    """An instruction with ``<image>`` tags removed and, by default, whitespace collapsed.

    ``collapse_whitespace=False`` is GTA1's rule, ``text.replace("<image>", "")`` and nothing else (Yan98/GTA1
    ``src/grpo_grounding.py:107``): the instruction reaches the prompt byte for byte.

    Raises:
        SampleError: ``bad_field`` when ``text`` is not a string, ``bad_text`` when it is not valid Unicode.
    """
    if not isinstance(text, str):
        raise SampleError(ref, "bad_field", f"instruction must be a string, got {type(text).__name__}")
    if not validate.is_text(text):
        raise SampleError(
            ref, "bad_text", "instruction is not valid Unicode text (a lone surrogate, or bytes that are not UTF-8)"
        )
    if not collapse_whitespace:
        return text.replace("<image>", "")
    return " ".join(text.replace("<image>", " ").split())


def _box_from_seq(value: Any, ref: str, what: str) -> Box:
    """4 numbers (``groundwork.validate.box4``: finite, within +-1e7, no booleans), else ``bad_field`` (not a list of
    4) or ``bad_box`` (a value that is not such a number)."""
    if not (isinstance(value, (list, tuple)) and len(value) == 4):
        raise SampleError(
            ref,
            "bad_field",
            f"{what} must be 4 finite numbers [x_min, y_min, x_max, y_max], got {validate.short_repr(value)}",
        )
    try:
        return validate.box4(value, what)
    except validate.Invalid as err:
        raise SampleError(ref, err.reason, err.message) from None


def _boxes_field(value: Any, ref: str, what: str) -> list[Box]:
    """One box or a list of boxes, each a 4-number list."""
    if isinstance(value, (list, tuple)) and value and isinstance(value[0], (list, tuple)):
        return [_box_from_seq(v, ref, what) for v in value]
    return [_box_from_seq(value, ref, what)]


def _canonical_boxes(value: Any, ref: str) -> list[Box]:
    items = value if isinstance(value, list) else [value]
    boxes = []
    for item in items:
        if not isinstance(item, dict) or not all(k in item for k in ("x_min", "y_min", "x_max", "y_max")):
            raise SampleError(ref, "bad_field", f"target_bbox must be {{x_min, y_min, x_max, y_max}}, got {item!r}")
        boxes.append(_box_from_seq([item["x_min"], item["y_min"], item["x_max"], item["y_max"]], ref, "target_bbox"))
    if not boxes:
        raise SampleError(ref, "bad_field", "target_bbox is an empty list")
    return boxes


def conversation_turns(record: dict, ref: str) -> tuple[Any, Any]:
    """``(human value, gpt value or None)`` of a LLaVA-style ``conversations`` list (GTA1, VLM-R1, UGround records).

    Raises:
        SampleError: ``bad_field`` when ``conversations`` is missing or malformed.
    """
    conv = record.get("conversations")
    if not isinstance(conv, list) or not conv or not isinstance(conv[0], dict) or "value" not in conv[0]:
        raise SampleError(ref, "bad_field", "conversations must be a list of {from, value} turns")
    answer = conv[1].get("value") if len(conv) > 1 and isinstance(conv[1], dict) else None
    return conv[0]["value"], answer


def record_to_sample(
    record: dict,
    ref: str,
    *,
    base_dir: str,
    default_id: str,
    verify_image: bool | str = True,
    clip_tolerance_px: float = CLIP_TOLERANCE_PX,
    stats: Counter | None = None,
    max_image_pixels: int | None = validate.DECODE_PIXEL_LIMIT,
    contain_paths: bool = True,
    limits: validate.ImageLimits | None = None,
    image_optional: bool = False,
) -> Sample:
    """Turn one record (any supported format) into a validated :class:`Sample` in original pixels.

    Boxes follow :func:`clip_box`: a few pixels of overshoot are clipped to the image (GTA1's 0-1000 boxes also get
    the ratio allowance, ``CLIP_TOLERANCE_RATIO``), farther out is ``box_outside_image``.

    Args:
        record: the parsed JSON object.
        ref: ``file:line`` reference used in errors.
        base_dir: folder that relative image paths are resolved against.
        default_id: sample id when the record has neither ``sample_id`` nor ``id``.
        verify_image: ``True``/``"decode"``: decode the image (integrity); ``False``/``"header"``/``"none"``: read
            its header only (:func:`read_image_size`).
        clip_tolerance_px: the pixel tolerance of :func:`clip_box` (0 rejects any overshoot).
        stats: when given, ``stats["clipped"]`` is incremented for a sample whose box(es) were clipped and
            ``stats["absolute_paths"]`` for a sample whose image path is absolute.
        max_image_pixels: the decode guard: ``image_too_large`` above this many pixels of the original image
            (header-declared; nothing decoded; None/0: no limit). Not the model's smart_resize ``max_pixels``.
        contain_paths: ``base_dir`` is an image root the user named: a relative path whose ``..`` climbs out of it
            is ``path_outside_root`` (False: ``base_dir`` is only the data file's folder; ``..`` is allowed).
        limits: the model family's image limits (``image_unsupported`` outside them); None: no family check.
        image_optional: the pixels are not needed (rescoring predictions): an image that is missing or cannot be
            read keeps the record, sized by its stated ``image_width``/``image_height`` (positive integers) or, when
            it states none, ``0 x 0`` (size unknown: pixel boxes are kept unclipped; a 0-1000 box, which needs the
            size, is still rejected with the image's reason).

    Every string of the record must be valid Unicode (``bad_text``); box values follow ``groundwork.validate.box4``
    (``bad_box``); every box follows the unit rule of ``groundwork.validate.check_unit`` in its format's unit (pixels
    for canonical and VLM-R1, 0-1000 for GTA1): four values all in [0, 1] (fractions, not a sub-pixel box) are
    ``suspect_unit``; a relative image path must stay inside ``base_dir`` (``path_outside_root``).

    The steps, in this order (the first failing check gives the reason): the format's fields
    (:func:`_read_format`), the record-wide checks (:func:`_check_content`), the image's size (:func:`_image_size`),
    the boxes in pixels (:func:`_pixel_boxes`), the id (:func:`_sample_id`).

    Raises:
        SampleError: with a reason code from ``REASONS``.
    """
    fmt = detect_format(record)
    if read_no_target(record, ref, fmt):  # ours: a sample with no valid target (training to refuse)
        instruction, image_path, norm1000 = _read_no_target_format(fmt, record, ref, base_dir, contain_paths)
        boxes, refusal = [], True
    else:
        instruction, image_path, boxes, norm1000 = _read_format(fmt, record, ref, base_dir, contain_paths)
        refusal = False
    unit = "norm1000" if norm1000 else "pixel"
    _check_content(record, ref, instruction, boxes, unit)
    width, height = _image_size(
        record, image_path, ref, norm1000, verify_image, max_image_pixels, limits, image_optional
    )
    if stats is not None and _absolute_image_path(record, fmt):
        stats["absolute_paths"] += 1
    pixel_boxes, any_clipped = _pixel_boxes(boxes, width, height, ref, norm1000, clip_tolerance_px)
    if any_clipped and stats is not None:
        stats["clipped"] += 1
    extra = {k: v for k, v in record.items() if k not in _READ_KEYS}
    return Sample(
        _sample_id(record, default_id),
        instruction,
        image_path,
        pixel_boxes,
        width,
        height,
        record.get("source"),
        record.get("platform"),
        record.get("ui_type"),
        extra,
        refusal=refusal,
        source_boxes=list(boxes),
        source_box_unit=unit,
    )


#: the record key that marks a sample without a valid target (ours: training to refuse, docs/TRAINING.md "Training to
#: refuse"); ``true`` or ``false``, absent = false. Written by :meth:`Sample.to_record` for a no-target sample.
NO_TARGET_KEY = "no_target"
# the box key of each format that can mark no target; a no-target record's is ``[]`` or ``null``
_BOX_KEYS = {"canonical": "target_bbox", "gta1": "bbox"}


def read_no_target(record: dict, ref: str, fmt: str | None) -> bool:
    """Whether ``record`` marks a sample with no valid target (:data:`NO_TARGET_KEY`, our field; OSWorld-G's
    ``box_type: "refusal"`` items are its benchmark reader's). Such a record states no box: its format's box key
    (``target_bbox`` canonical, ``bbox`` GTA1) is ``[]`` or ``null``; a VLM-R1 record cannot mark one.

    Raises:
        SampleError: ``bad_field`` when the value is not ``true``/``false`` (a string, a number, null, a list), when a
            no-target record gives a box (a target and none at once), or when its format cannot mark one.
    """
    if NO_TARGET_KEY not in record:
        return False
    value = record[NO_TARGET_KEY]
    if value is not True and value is not False:
        raise SampleError(ref, "bad_field", f"{NO_TARGET_KEY} must be true or false, got {validate.short_repr(value)}")
    if not value:
        return False
    key = _BOX_KEYS.get(fmt)
    if key is None:
        raise SampleError(ref, "bad_field", f"{NO_TARGET_KEY}: only canonical and GTA1 records can mark no target")
    if record[key] not in (None, []):
        raise SampleError(
            ref, "bad_field", f"{NO_TARGET_KEY} is true but {key} gives a box: {validate.short_repr(record[key])}"
        )
    return True


def _read_no_target_format(fmt: str, record: dict, ref: str, base_dir: str, contain: bool) -> tuple[str, str, bool]:
    """``(instruction, image path, norm1000)`` of a no-target record (:func:`read_no_target`): the format's own
    instruction and image rules (:func:`_read_canonical`, :func:`_read_gta1`), no box."""
    if fmt == "gta1":
        human, _ = conversation_turns(record, ref)
        instruction = strip_image_tags(human, ref, collapse_whitespace=False)
        return instruction, _resolve_image(record["image"], ref, base_dir, contain), True
    instruction = strip_image_tags(record.get("instruction"), ref)
    return instruction, _resolve_image(record.get("image_path"), ref, base_dir, contain), False


# every key record_to_sample reads itself; the record's other keys are kept in ``Sample.extra``
_READ_KEYS = frozenset(
    {
        "instruction",
        "image_path",
        "target_bbox",
        "image_width",
        "image_height",
        "sample_id",
        "id",
        "source",
        "platform",
        "ui_type",
        "image",
        "bbox",
        "conversations",
        "no_target",
    }
)


def _read_canonical(record: dict, ref: str, base_dir: str, contain: bool) -> tuple[str, str, list[Box]]:
    """``(instruction, image path, boxes)`` of a canonical record, checked in that order (boxes in pixels)."""
    instruction = strip_image_tags(record.get("instruction"), ref)
    image_path = _resolve_image(record.get("image_path"), ref, base_dir, contain)
    return instruction, image_path, _canonical_boxes(record["target_bbox"], ref)


def _read_gta1(record: dict, ref: str, base_dir: str, contain: bool) -> tuple[str, str, list[Box]]:
    """``(instruction, image path, boxes)`` of a GTA1 record, checked in that order (boxes in 0-1000); the instruction
    is GTA1's user text byte for byte (``<image>`` tags removed, whitespace kept)."""
    human, _ = conversation_turns(record, ref)
    instruction = strip_image_tags(human, ref, collapse_whitespace=False)
    image_path = _resolve_image(record["image"], ref, base_dir, contain)
    return instruction, image_path, _boxes_field(record["bbox"], ref, "bbox")


def _read_vlm_r1(record: dict, ref: str, base_dir: str, contain: bool) -> tuple[str, str, list[Box]]:
    """``(instruction, image path, boxes)`` of a VLM-R1 record, checked in that order (boxes in pixels): ``image`` is
    a path or a list of exactly one (``bad_field`` otherwise); the gpt turn is a bbox list, or its JSON text (inside
    ``<answer>`` tags or not; a key twice is an error here too: ``bad_field``)."""
    human, answer = conversation_turns(record, ref)
    instruction = strip_image_tags(human, ref)
    image = record["image"]
    if isinstance(image, list):
        if len(image) != 1:
            raise SampleError(ref, "bad_field", f"grounding needs exactly one image, got {len(image)}")
        image = image[0]
    image_path = _resolve_image(image, ref, base_dir, contain)
    if isinstance(answer, str):
        text = answer.replace("<answer>", "").replace("</answer>", "").strip()
        try:
            answer = lax_loads(text)
        except (ValueError, RecursionError):  # JSONDecodeError, an int of too many digits, nesting too deep
            raise SampleError(ref, "bad_field", f"gpt turn is not a bbox list: {text[:80]!r}") from None
    return instruction, image_path, _boxes_field(answer, ref, "gpt turn bbox")


# the reader of each format detect_format names, and the unit its boxes are in
_FORMAT_READERS = {"canonical": (_read_canonical, False), "gta1": (_read_gta1, True), "vlm_r1": (_read_vlm_r1, False)}


def _read_format(fmt: str | None, record: dict, ref: str, base_dir: str, contain: bool) -> tuple[str, str, list, bool]:
    """``(instruction, image path, boxes, norm1000)`` of a record of format ``fmt`` (:func:`detect_format`), else
    ``unknown_format`` (an ambiguous record, with both ``target_bbox`` and ``conversations``, says so)."""
    if fmt in _FORMAT_READERS:
        reader, norm1000 = _FORMAT_READERS[fmt]
        return (*reader(record, ref, base_dir, contain), norm1000)
    if "target_bbox" in record and "conversations" in record:
        raise SampleError(
            ref,
            "unknown_format",
            "ambiguous record: 'target_bbox' (canonical) and 'conversations' "
            "(GTA1 / VLM-R1) both present; keep one, or convert with --format",
        )
    raise SampleError(ref, "unknown_format", f"keys {sorted(record)} match no supported format")


def _check_content(record: dict, ref: str, instruction: str, boxes: list[Box], unit: str) -> None:
    """The record-wide checks, in order: a non-blank instruction (``empty_instruction``), every string valid Unicode
    (``bad_text``), every box in the unit rule of ``groundwork.validate.check_unit`` for ``unit``."""
    if not instruction.strip():
        raise SampleError(ref, "empty_instruction", "instruction is empty")
    try:
        validate.check_texts(record, "a string of the record")
        for b in boxes:  # the unit rule in the unit the record's format declares
            validate.check_unit(b, unit)
    except validate.Invalid as err:
        raise SampleError(ref, err.reason, err.message) from None


def _image_size(
    record: dict, image_path: str, ref: str, norm1000: bool, verify, max_image_pixels, limits, image_optional: bool
) -> tuple[int, int]:
    """``(width, height)`` of the record's image (:func:`read_image_size`). With ``image_optional``, an image that is
    unavailable (``_UNAVAILABLE``) is sized by the record's stated ``image_width``/``image_height`` (positive
    integers up to ``MAX_COORD``), else ``0 x 0``; never for a 0-1000 box (it needs the size: the image's reason)."""
    try:
        return read_image_size(image_path, ref, verify=verify, max_image_pixels=max_image_pixels, limits=limits)
    except SampleError as err:
        if not image_optional or err.reason not in _UNAVAILABLE or norm1000:
            raise
        stated = (record.get("image_width"), record.get("image_height"))
        ok = all(type(v) is int and 0 < v <= validate.MAX_COORD for v in stated)
        return stated if ok else (0, 0)


def _absolute_image_path(record: dict, fmt: str | None) -> bool:
    """Whether the record names its image by an absolute path (``image_path``, or ``image`` or its first item)."""
    raw_path = record.get("image_path") if fmt == "canonical" else record.get("image")
    raw_path = raw_path[0] if isinstance(raw_path, list) and raw_path else raw_path
    return isinstance(raw_path, str) and os.path.isabs(raw_path)


def _pixel_boxes(
    boxes: list[Box], width: int, height: int, ref: str, norm1000: bool, tolerance_px: float
) -> tuple[list[Box], bool]:
    """``(boxes in original pixels, clipped)``: 0-1000 boxes scaled to ``width x height``, each clipped by
    :func:`clip_box` (0-1000 boxes also get ``CLIP_TOLERANCE_RATIO``); with no size known (``width`` 0, an optional
    image), the boxes as published (an inverted one still ``inverted_box``)."""
    checked, any_clipped = [], False
    for b in boxes:
        what = "box"
        if width == 0:
            if b[0] >= b[2] or b[1] >= b[3]:
                raise SampleError(ref, "inverted_box", f"box {list(b)} is inverted or has zero area")
            checked.append(b)
            continue
        if norm1000:
            what = f"0-1000 box {list(b)} -> box"
            b = box_from_norm1000(b, width, height)
        b, clipped = clip_box(
            b,
            width,
            height,
            ref,
            tolerance_px=tolerance_px,
            what=what,
            tolerance_ratio=CLIP_TOLERANCE_RATIO if norm1000 else 0.0,
        )
        checked.append(b)
        any_clipped |= clipped
    return checked, any_clipped


def _sample_id(record: dict, default_id: str) -> str:
    """The identity rule (``groundwork.validate.explicit_id``): ``sample_id``, else ``id``, else ``default_id``
    (null, booleans, empty strings and non-scalars are no id)."""
    sample_id = validate.explicit_id(record.get("sample_id"))
    sample_id = sample_id if sample_id is not None else validate.explicit_id(record.get("id"))
    return sample_id if sample_id is not None else default_id


@dataclass
class LoadReport:
    """What :func:`load_samples` kept and rejected. ``rejects`` holds ``(ref, reason, message)`` for every reject."""

    num_records: int = 0
    num_samples: int = 0
    rejects: list[tuple[str, str, str]] = field(default_factory=list)
    num_clipped: int = 0  # kept samples whose box(es) stuck out a little and were clipped (schema.clip_box)
    num_absolute_paths: int = 0  # kept samples whose image path is absolute (accepted, as upstream; counted)

    @property
    def counts(self) -> Counter:
        return Counter(reason for _, reason, _ in self.rejects)

    def table(self) -> str:
        """Readable summary: records read, samples kept, and one row per reject reason."""
        lines = [f"records read: {self.num_records}   samples kept: {self.num_samples}   rejected: {len(self.rejects)}"]
        for reason, n in sorted(self.counts.items()):
            first = next(ref for ref, r, _ in self.rejects if r == reason)
            lines.append(f"  {reason:<20} {n:>7}   e.g. {first}")
        if self.num_clipped:
            lines.append(f"  (kept, box clipped to the image: {self.num_clipped})")
        if self.num_absolute_paths:
            lines.append(f"  (kept, absolute image path: {self.num_absolute_paths})")
        return "\n".join(lines)


def load_samples(
    paths: list[str],
    image_folders: list[str] | None = None,
    *,
    strict: bool = False,
    verify_images: bool | str = True,
    max_image_pixels: int | None = validate.DECODE_PIXEL_LIMIT,
    limits: validate.ImageLimits | None = None,
) -> tuple[list[Sample], LoadReport]:
    """Read and validate samples from JSON/JSONL files (boxes clipped or rejected by :func:`clip_box`).

    Args:
        paths: data files (canonical, GTA1 or VLM-R1 records; formats may differ per record).
        image_folders: one folder per file that image paths are relative to (VLM-R1's ``--image_folders``); a
            relative path whose ``..`` climbs out of its folder is ``path_outside_root``. Default: each file's own
            directory (then ``..`` is allowed: ``clean`` writes ``../images/...`` next to its outputs).
        strict: raise on the first bad record instead of skipping and counting it.
        verify_images: ``True``/``"decode"`` (default): decode every image once, so no training run meets a broken
            image mid-run; ``False``/``"header"``/``"none"``: read headers only.
        max_image_pixels: the decode guard: ``image_too_large`` above this many pixels of the original image
            (header-declared, checked before decoding; None/0: no limit). Not the model's smart_resize ``max_pixels``.
        limits: the model family's image limits (``image_unsupported`` outside them, before step 1).

    Sample ids follow the identity rule (``groundwork.validate.IdRegistry``): a record without a usable id gets
    ``STEM:INDEX``; an id already taken in this load (explicit or generated) is a ``duplicate_id`` reject, so two
    records never become one sample.

    A record never crashes the load: whatever it holds, it is a sample or a reject with a reason code.

    Returns:
        ``(samples, report)``; ``report.rejects`` names every skipped record with its reason, ``report.num_clipped``
        counts kept samples whose boxes were clipped.

    Raises:
        SampleError: in strict mode, for the first bad record.
        ValueError: ``image_folders`` given with a different count than ``paths``.
        FileNotFoundError: a data file does not exist.
        groundwork.records.DataFileError: a data file that is not JSON text (compressed, an archive, UTF-16/32, not a
            regular file): one error for the file, in the words every reader uses (``groundwork.records.check_data_file``).
    """
    if image_folders is not None and len(image_folders) != len(paths):
        raise ValueError(f"{len(paths)} data files but {len(image_folders)} image folders; give one folder per file")
    samples, report, clip_stats, ids = [], LoadReport(), Counter(), validate.IdRegistry()
    for i, path in enumerate(paths):
        if not os.path.isfile(path):
            raise FileNotFoundError(f"data file not found: {path}")
        base_dir = image_folders[i] if image_folders else os.path.dirname(os.path.abspath(path))
        stem = os.path.splitext(os.path.basename(path))[0]
        for ref, index, item in iter_records(path):
            report.num_records += 1
            try:
                if isinstance(item, RecordError):
                    raise SampleError(item.ref, item.reason, item.message)
                try:
                    sample = record_to_sample(
                        item,
                        ref,
                        base_dir=base_dir,
                        default_id=f"{stem}:{index}",
                        verify_image=verify_images,
                        stats=clip_stats,
                        max_image_pixels=max_image_pixels,
                        contain_paths=image_folders is not None,
                        limits=limits,
                    )
                    try:
                        ids.claim(sample.sample_id, ref)
                    except validate.Invalid as err:
                        raise SampleError(ref, err.reason, err.message) from None
                    samples.append(sample)
                except SampleError:
                    raise
                except FIELD_ERRORS as err:  # a field of an odd type, ...: a reject, never a crash of the load
                    raise SampleError(ref, "bad_field", f"{type(err).__name__}: {str(err)[:200]}") from None
            except SampleError as err:
                if strict:
                    raise
                report.rejects.append((err.ref, err.reason, err.message))
    report.num_samples = len(samples)
    report.num_clipped = clip_stats["clipped"]
    report.num_absolute_paths = clip_stats["absolute_paths"]
    if report.rejects:
        logger.warning(
            "skipped %d bad records (use --strict to stop at the first):\n%s", len(report.rejects), report.table()
        )
    return samples, report
