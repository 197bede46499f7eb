"""What every reader of ``gui_grounding.data.formats`` shares: the :class:`Target` a reader makes of a record, where
the record comes from (:class:`ReadContext`), embedded image bytes (:class:`EmbeddedImage`), the box units and
platforms, and the field rules (a box, a list of boxes, an image path or embedded image, a stated size, grouped
screenshot records) that the readers apply the same way.

Rule (docs/DATA.md, docs/HOSTILE_INPUT.md): readers do no I/O and no coordinate maths; boxes stay in the format's
unit (``gui_grounding.data.convert_engine`` converts and validates them), a field that is not what the format says
is a reason-coded reject of its record or sub-item (``bad_field``, ``bad_box``, ``empty_instruction``, ...), never a
crash, and a point is never turned into a box (``point_only``).

Box units (``Target.unit``), all ``[x_min, y_min, x_max, y_max]``:

* ``pixel``: original-image pixels;
* ``ratio``: fractions ``[0, 1]`` of the image width/height;
* ``norm1000``: ``[0, 1000]`` relative to the image (``x / 1000 * W``, GTA1 / Qwen2-VL convention).

The helpers named with a leading underscore are the readers' own (``gui_grounding.data.formats``), not an API.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from groundwork import validate
from gui_grounding.data.annotations import (
    is_number,  # a finite int/float within +-1e7, never a bool (the readers' rule)
)
from gui_grounding.data.schema import SampleError
from gui_grounding.models.frames import Box

UNITS = ("pixel", "ratio", "norm1000")
PLATFORMS = ("mobile", "desktop", "web")
UI_TYPES = ("text", "icon")


@dataclass
class EmbeddedImage:
    """Image bytes stored inside a record (parquet ``image`` columns). ``name`` is the path, relative to the image
    root, where the converter writes them (never overwriting an existing file)."""

    data: bytes
    name: str


@dataclass
class Target:
    """One instruction -> box(es) pair read from a record, before validation.

    ``boxes`` are in ``unit`` (see module docstring); ``image`` is a path relative to the image root or an
    :class:`EmbeddedImage`. ``sub`` extends the record's ref (``file:[3]`` + ``.elements[1].instructions[0]``) and
    ``sub_id`` its sample id (``stem:3`` + ``:1.0``) when a record holds several targets. ``stated_size``: the image
    ``(width, height)`` the record claims, checked against the image header. ``error`` marks a sub-item that could
    not be read (it becomes a reject line, in order). ``record``: for direct formats, the whole record, handed to
    ``gui_grounding.data.schema.record_to_sample``. ``no_target``: the record marks a sample with no valid target
    (``gui_grounding.data.schema.read_no_target``); ``boxes`` is then empty and the sample is a refusal item.
    """

    instruction: Any = None
    image: str | EmbeddedImage | None = None
    boxes: list[Box] = field(default_factory=list)
    unit: str = "pixel"
    sub: str = ""
    sub_id: str = ""
    platform: str | None = None
    ui_type: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    stated_size: tuple[int, int] | None = None
    raw: Any = None
    error: SampleError | None = None
    record: dict | None = None
    no_target: bool = False  # the record marks no valid target (schema.read_no_target): no boxes


@dataclass(frozen=True)
class ReadContext:
    """Where a record comes from: input ``path``, its ``ref`` (``file:line`` or ``file:[index]``), 0-based ``index``
    and the file ``stem`` used in sample ids."""

    path: str
    ref: str
    index: int
    stem: str


# --------------------------------------------------------------------------------------------------------------------
# small helpers (no coordinate maths: boxes stay in the format's unit)


@functools.lru_cache(maxsize=1 << 16)
def platform_from_path(path: str) -> str | None:
    """``mobile``/``desktop``/``web`` from the folder names of an image path, or ``None`` when absent or ambiguous.

    A heuristic for aggregated datasets whose folders name the platform: OS-Atlas (``mobile_domain/``,
    ``desktop_domain/``, ``web_domain/``) and GTA1's grounding_dataset (``dataset/Aria-UI_Data/web/``,
    ``desktop_domain/``, ``dataset/omniact/``, ``.../AMEX/``, ``.../android_control/``). Only folder names count, not
    the file name. ``--platform`` overrides it.
    """
    words = {
        "web": "web",
        "fineweb": "web",
        "desktop": "desktop",
        "omniact": "desktop",
        "windows": "desktop",
        "macos": "desktop",
        "linux": "desktop",
        "ubuntu": "desktop",
        "mobile": "mobile",
        "android": "mobile",
        "amex": "mobile",
        "rico": "mobile",
    }
    folders = os.path.dirname(path.replace("\\", "/")).lower()
    found = {words[token] for token in re.split(r"[^a-z0-9]+", folders) if token in words}
    return found.pop() if len(found) == 1 else None


def box_from_xywh(value: Any, ref: str, what: str = "bbox") -> Box:
    """``[x, y, w, h]`` (top-left corner + size, any unit) -> ``(x, y, x + w, y + h)``; the 4 values follow
    :func:`_box` (``bad_box`` / ``bad_field``); a zero or negative size becomes an inverted box (``clip_box``)."""
    x, y, w, h = _box(value, ref, what)
    if w <= 0 or h <= 0:
        raise SampleError(ref, "inverted_box", f"{what} {list(value)} has zero or negative width/height")
    return x, y, x + w, y + h


def _ui_type(value: Any) -> str | None:
    """``text``/``icon`` when the dataset's element type is one of them, else ``None`` (kept in ``extra``)."""
    return value if value in UI_TYPES else None


def _image_path(value: Any, ref: str, what: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise SampleError(ref, "bad_field", f"{what} must be a non-empty image path, got {value!r}")
    return value


def _image_ext(data: bytes) -> str:
    """File extension from an image's magic bytes (``img`` when unknown; the header read decides later)."""
    if data.startswith(b"\x89PNG"):
        return "png"
    if data.startswith(b"\xff\xd8"):
        return "jpg"
    if data.startswith((b"GIF87a", b"GIF89a")):
        return "gif"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "webp"
    if data.startswith(b"BM"):
        return "bmp"
    return "img"


def _safe_relpath(name: Any) -> str | None:
    """``name`` as a relative path that stays inside the image root, else ``None``."""
    if not isinstance(name, str) or not name or "://" in name:
        return None
    norm = os.path.normpath(name.replace("\\", "/"))
    if os.path.isabs(norm) or norm == "." or norm.startswith(".."):
        return None
    return norm


def _image_value(value: Any, ctx: ReadContext, what: str, name_hint: Any = None) -> str | EmbeddedImage:
    """An image given as a path string, raw bytes, or a parquet image struct ``{"bytes", "path"}``.

    Embedded bytes are written (by the converter) under a name derived from their content hash, so two rows with
    different bytes never share a file: ``<name>_<sha1 of the bytes, 12 hex>.<ext>`` next to ``name_hint`` or the
    struct's ``path`` when it is a safe relative path (e.g. ShowUI's ``image_url`` ``desk_0.png`` ->
    ``desk_0_<sha>.png``), else ``embedded/<input stem>/<index>_<sha>.<ext>``.
    """
    if isinstance(value, str):
        return _image_path(value, ctx.ref, what)
    data, path = None, None
    if isinstance(value, (bytes, bytearray)):
        data = bytes(value)
    elif isinstance(value, dict):
        data, path = value.get("bytes"), value.get("path")
    if data:
        data = bytes(data)
        name = _safe_relpath(name_hint) or _safe_relpath(path)
        sha = hashlib.sha1(data).hexdigest()[:12]
        if name is None:  # the content hash keeps files of two datasets with the same file stem apart
            name = f"embedded/{ctx.stem}/{ctx.index:08d}_{sha}.{_image_ext(data)}"
        else:  # the record's name, made unique per content (rows may share a path with different bytes)
            stem, ext = os.path.splitext(name)
            name = f"{stem}_{sha}{ext or '.' + _image_ext(data)}"
        return EmbeddedImage(data, name)
    if isinstance(path, str) and path:
        return path
    raise SampleError(ctx.ref, "bad_field", f"{what} holds neither image bytes nor a path: {type(value).__name__}")


def _box(value: Any, ref: str, what: str) -> Box:
    """4 finite numbers ``[x_min, y_min, x_max, y_max]`` (any unit; inverted boxes are caught by ``clip_box`` after
    conversion); 4 values one of which is not a finite number within +-1e7 (NaN, inf, a boolean, a huge integer) ->
    ``bad_box`` (``groundwork.validate.box4``); 2 numbers are a point -> ``point_only``; anything else -> ``bad_field``."""
    if isinstance(value, (list, tuple)):
        if len(value) == 4:
            try:
                return validate.box4(value, what)
            except validate.Invalid as err:
                raise SampleError(ref, err.reason, err.message) from None
        if len(value) == 2 and all(is_number(v) for v in value):
            raise SampleError(
                ref,
                "point_only",
                f"{what} {list(value)} is a point (x, y), not a box; a point cannot "
                "become a box without inventing its extent",
            )
    raise SampleError(ref, "bad_field", f"{what} must be 4 finite numbers [x_min, y_min, x_max, y_max], got {value!r}")


def _boxes(value: Any, ref: str, what: str) -> list[Box]:
    """One box or a non-empty list of boxes (GTA1: any hit counts)."""
    if isinstance(value, (list, tuple)) and value and isinstance(value[0], (list, tuple)):
        return [_box(v, ref, what) for v in value]
    return [_box(value, ref, what)]


def _list(record: dict, key: str, ref: str) -> list:
    value = record.get(key)
    if not isinstance(value, list):
        raise SampleError(ref, "bad_field", f"{key} must be a list, got {type(value).__name__}")
    return value


def _stated_size(value: Any, ref: str, what: str) -> tuple[int, int] | None:
    if value is None:
        return None
    if not (isinstance(value, (list, tuple)) and len(value) == 2 and all(is_number(v) for v in value)):
        raise SampleError(ref, "bad_field", f"{what} must be [width, height], got {value!r}")
    return int(value[0]), int(value[1])


def _instructions(element: dict, ref: str) -> list:
    """An element's instruction list (``instructions``), or its single ``instruction``."""
    if "instructions" in element:
        value = element["instructions"]
        if not isinstance(value, list):
            raise SampleError(ref, "bad_field", f"instructions must be a list, got {type(value).__name__}")
        if not value:
            raise SampleError(ref, "empty_instruction", "element has an empty instructions list")
        return value
    if "instruction" in element:
        return [element["instruction"]]
    raise SampleError(ref, "bad_field", f"element has no instructions/instruction; it has {sorted(element)}")


def _grouped(
    record: dict,
    ctx: ReadContext,
    image_keys: tuple[str, ...],
    element_key: str,
    element_targets: Callable[[dict, str, str], list[Target]],
) -> list[Target]:
    """Targets of a screenshot-level record ``{<image key>, <element_key>: [...]}``: each element read by
    ``element_targets(element, ref, sub)``; an element that fails becomes an error target (a reject line)."""
    key = next((k for k in image_keys if k in record), None)
    if key is None:
        raise SampleError(
            ctx.ref, "bad_field", f"record has none of the image keys {list(image_keys)}; it has {sorted(record)}"
        )
    elements = _list(record, element_key, ctx.ref)
    if not elements:
        raise SampleError(ctx.ref, "bad_field", f"{element_key} is an empty list (the screenshot has no targets)")
    image = _image_path(record[key], ctx.ref, key)
    out = []
    for j, element in enumerate(elements):
        sub = f".{element_key}[{j}]"
        try:
            if not isinstance(element, dict):
                raise SampleError(ctx.ref + sub, "bad_field", f"element is not an object: {type(element).__name__}")
            targets = element_targets(element, ctx.ref + sub, sub)
        except SampleError as err:
            out.append(Target(sub=sub, error=err, raw=element))
            continue
        for t in targets:
            t.image, t.sub, t.sub_id = image, t.sub or sub, f"{j}{'.' + t.sub_id if t.sub_id else ''}"
            if t.raw is None:
                t.raw = element
            out.append(t)
    return out
