"""One validation path for data records: numbers, text, paths and images (GUI-free, no task knowledge).

Used by the core's readers (``groundwork.records``, ``vlm_r1.tasks``) and by the GUI plugin's schema
(``gui_grounding.data.schema``, hence ``gui-grounding convert`` and the training loader). Every check raises
:class:`Invalid` with a reason code from :data:`REASONS` and a message; callers turn it into a per-record reject
(never a crash, never a lost neighbour).

Rules:

* **numbers** (box coordinates): an ``int`` or ``float``, not a boolean, finite (no NaN / inf) and within
  ``+-MAX_COORD`` (1e7); anything else is ``bad_box``. A 400-digit integer is compared exactly (no OverflowError);
* **text**: a string that cannot be stored as UTF-8 (a lone surrogate such as ``"\\ud800"``, legal as a JSON escape,
  or a byte that was not UTF-8, read with ``errors="surrogateescape"``) is ``bad_text``;
* **paths**: a relative image path whose ``..`` components climb out of its image root is ``path_outside_root``
  (a lexical check on the path as written: symbolic links inside the root are followed, since clusters link
  datasets into folders); absolute paths are accepted, as upstream accepts them (callers count them);
  only a regular, non-empty file is opened: a directory, device, FIFO, socket or an empty file (``/proc`` entries
  report size 0) is ``not_a_file``;
* **images** (:class:`ImageChecker`): checked once per unique image (cache keyed by path, size and mtime); the pixel
  count declared by the header above ``max_image_pixels`` (the decode guard, default :data:`DECODE_PIXEL_LIMIT` =
  64 Mpx of the original image; unrelated to the model's smart_resize ``max_pixels``) is ``image_too_large``, before
  anything is decoded; ``verify="decode"`` decodes every pixel (a truncated PNG/JPEG, or a PNG whose IDAT is not a zlib stream,
  is ``unreadable_image``), ``"header"`` reads the header only, ``"none"`` reads the header too (the size is
  needed) and is kept as its own mode name for the command line;
* **EXIF orientation**: sizes are those of the **displayed frame** (``PIL.ImageOps.exif_transpose``: orientations
  5-8 swap width and height), as transformers' ``load_image``, browsers and annotation tools show an image;
  :func:`open_image` returns the displayed pixels. Upstream VLM-R1 and GTA1 ignore the orientation tag; screenshots
  in PNG carry none, so their numbers do not move;
* **JSON we write** is strict: :func:`dumps` is ``json.dumps(..., allow_nan=False)``.
"""

from __future__ import annotations

import json
import os
import stat
import threading
import unicodedata
import warnings
from dataclasses import dataclass
from typing import Any

MAX_COORD = 1e7  # any box number beyond +-1e7 is bad_box (no screen is that large, in any unit)
# The decode guard (a decompression-bomb guard): image_too_large above this many pixels (header-declared width x
# height of the ORIGINAL image, before decoding). Unrelated to the model's smart_resize max_pixels budget
# (groundwork.pixel_budget), which sizes the image the model sees.
DECODE_PIXEL_LIMIT = 64_000_000
VERIFY_MODES = ("none", "header", "decode")

REASONS = {
    "bad_box": "a box value is not a finite number within +-1e7 (NaN, inf, a boolean, a string, a huge integer)",
    "bad_text": "a text field is not valid Unicode (a lone surrogate, or bytes that are not UTF-8)",
    "path_outside_root": "a relative image path whose '..' components climb out of its image root",
    "not_a_file": "the image path is not a regular, non-empty file (a directory, device, FIFO, /proc entry, empty)",
    "image_too_large": "the image header declares more pixels than the limit (default 64 Mpx); nothing was decoded",
    "missing_image": "image file does not exist",
    "unreadable_image": "image file cannot be decoded",
    "suspect_unit": (
        "a box whose values do not fit its format's declared unit (check_unit): all four values in [0, 1] in a "
        "pixel or 0-1000 format (fractions), or a value above 1.005 in a 0-1 (fraction) format"
    ),
    "duplicate_id": "the record's sample id (explicit, or generated for a record without one) is already taken",
    "image_unsupported": "the image is outside the model family's limits (aspect ratio, smallest side)",
    "unsupported_image": (
        "an image whose displayed pixels are not the decoded ones: an APNG whose default image (the IDAT image) is "
        "not part of its animation (viewers show the first animation frame, Pillow the hidden default image)"
    ),
    "duplicate_key": "a JSON object in the record holds a key twice (groundwork.records.DuplicateKeyError: which value is meant "
    "is unknowable)",
}


class Invalid(ValueError):
    """A value that fails a check: ``reason`` is a key of :data:`REASONS`, ``message`` says what is wrong."""

    def __init__(self, reason: str, message: str):
        assert reason in REASONS, reason
        self.reason, self.message = reason, message
        super().__init__(f"{reason}: {message}")


# --------------------------------------------------------------------------------------------------------------------
# numbers and boxes


_NUMBER_TYPES = frozenset({int, float})  # exact types: bool (a subclass of int) is not a number here
_SEQUENCE_TYPES = frozenset({list, tuple})


def is_coord(value: Any) -> bool:
    """True for an int/float (not a bool) that is finite and within ``+-MAX_COORD`` (exact for huge ints; NaN fails
    every comparison and inf lies outside the range, so both are excluded)."""
    return type(value) in _NUMBER_TYPES and -MAX_COORD <= value <= MAX_COORD


#: the largest count or number of seconds a file may state (a hostile file must not overflow a sum or a mean)
MAX_COUNT = 1e15


def bounded_number(value: Any, lo: float = 0.0, hi: float = 1.0, *, integer: bool = False) -> float | int | None:
    """``value`` when it is a JSON number -- an int or float, not a bool -- that is finite and within ``[lo, hi]``
    (and, with ``integer``, an int), as a float (an int with ``integer``); else ``None``. Never raises.

    The value rule of every number a reader takes from a file beside the data (a confidence, probability or
    agreement: ``[0, 1]``, the default; token counts and calls: ``integer`` in ``[0, MAX_COUNT]``; seconds:
    ``[0, MAX_COUNT]``): the predictions reader (``gui_grounding.eval.predictions``) and ``gui-grounding compare``
    apply it. NaN fails every comparison and infinities lie outside any finite range, so both are excluded."""
    if type(value) not in _NUMBER_TYPES or (integer and type(value) is not int):
        return None
    if not lo <= value <= hi:
        return None
    return int(value) if integer else float(value)


def coord(value: Any, what: str = "box value") -> float:
    """``value`` as a float when :func:`is_coord`, else :class:`Invalid` ``bad_box``."""
    if not is_coord(value):
        raise Invalid("bad_box", f"{what} {short_repr(value)} is not a finite number within +-{MAX_COORD:g}")
    return float(value)


def box4(values: Any, what: str = "box") -> tuple[float, float, float, float]:
    """4 numbers ``[x_min, y_min, x_max, y_max]`` as floats (any unit; inversion is the caller's check).

    Raises:
        Invalid: ``bad_box`` when ``values`` is not a list/tuple of 4 values that pass :func:`is_coord`.
    """
    if type(values) in _SEQUENCE_TYPES and len(values) == 4:  # the fast path: one call, no generator
        a, b, c, d = values
        num, m = _NUMBER_TYPES, MAX_COORD
        if (
            type(a) in num
            and type(b) in num
            and type(c) in num
            and type(d) in num
            and -m <= a <= m
            and -m <= b <= m
            and -m <= c <= m
            and -m <= d <= m
        ):
            return float(a), float(b), float(c), float(d)
    if not isinstance(values, (list, tuple)) or len(values) != 4:
        raise Invalid("bad_box", f"{what} must be 4 numbers [x_min, y_min, x_max, y_max], got {short_repr(values)}")
    raise Invalid(
        "bad_box",
        f"{what} {short_repr(values)} must hold 4 finite numbers within +-{MAX_COORD:g} (no NaN, inf, booleans)",
    )


def all_fractions(box: Any) -> bool:
    """True when all four values of a box lie in [0, 1] (a box in fractions of the image, not in pixels)."""
    a, b, c, d = box
    return 0.0 <= a <= 1.0 and 0.0 <= b <= 1.0 and 0.0 <= c <= 1.0 and 0.0 <= d <= 1.0


# The unit rule (one home; the training loader, ``convert`` and the benchmark readers apply it to every box in the
# unit its format declares): unit name -> (its label in messages, what its values are)
BOX_UNITS = {"pixel": ("pixel", "pixels"), "norm1000": ("0-1000", "0-1000 values"), "ratio": ("ratio", "fractions")}
# a ratio up to 1.005 is rounding of a 2-decimal ratio, clipped by the clipping rule
# (gui_grounding.data.schema.CLIP_TOLERANCE_RATIO, the same 0.005); a value beyond it is no fraction of the image
UNIT_ROUNDING = 0.005


def check_unit(box: Any, unit: str, what: str = "box") -> None:
    """The unit rule: the 4 values of ``box`` (numbers, :func:`box4`) must be plausible in ``unit``, the unit the
    format declares (a key of :data:`BOX_UNITS`: ``pixel``, ``norm1000``, ``ratio``).

    * all four values in [0, 1] (:func:`all_fractions`) in a unit whose values are not fractions (``pixel``,
      ``norm1000``): fractions given where pixels or 0-1000 values were expected (read as declared, the box would
      be a sub-pixel box in the image's corner);
    * a value above ``1 + UNIT_ROUNDING`` (1.005) in the fraction unit (``ratio``): pixels or 0-1000 values given
      where fractions were expected.

    A 0-1000 value past 1000, or a pixel value past the image, is an overshoot that the clipping rule judges
    (``gui_grounding.data.schema.clip_box``: clipped within its allowance, else ``box_outside_image``): pixels and 0-1000
    values overlap, so such a value does not by itself say the unit is wrong.

    Raises:
        Invalid: ``suspect_unit``, naming the unit and the box.
        ValueError: an unknown ``unit``.
    """
    if unit not in BOX_UNITS:
        raise ValueError(f"unknown box unit {unit!r}; expected one of {', '.join(BOX_UNITS)}")
    label, values = BOX_UNITS[unit]
    if unit != "ratio":
        if all_fractions(box):
            raise Invalid(
                "suspect_unit",
                f"{label} {what} {list(box)} has all four values in [0, 1]: fractions of the image, not {values}",
            )
    elif max(box) > 1.0 + UNIT_ROUNDING:
        raise Invalid(
            "suspect_unit",
            f"{label} {what} {list(box)} has a value above {1.0 + UNIT_ROUNDING:g}: not fractions of the image "
            "(pixels or 0-1000 values?)",
        )


def short_repr(value: Any, limit: int = 80) -> str:
    """``repr(value)`` cut to ``limit`` characters for a message, saying how much was cut (``'aaa... [920 more
    characters]'``); never raises (a huge int's repr raises past ``sys.get_int_max_str_digits()``, a deep nesting
    raises ``RecursionError``: ``<unprintable int>``). The one ``short_repr`` of the project (the data and benchmark
    readers import it through ``gui_grounding.data.annotations``)."""
    try:
        text = repr(value)
    except (ValueError, RecursionError):
        return f"<unprintable {type(value).__name__}>"
    return text if len(text) <= limit else text[:limit] + f"... [{len(text) - limit} more characters]"


# --------------------------------------------------------------------------------------------------------------------
# identity

_ID_TYPES = (str, int, float)


def explicit_id(value: Any) -> str | None:
    """A record's explicit sample id as text, or None when it has none.

    The identity rule (one home; the training loaders, ``convert`` and every benchmark reader use it): a non-empty
    string that is valid Unicode text, an integer (not a boolean) or a finite float is an explicit id (``7`` and
    ``"7"`` are the same id); absent, null, a boolean, an empty string, NaN/inf, a list or an object is no id, and the
    caller generates one (:class:`IdRegistry`).
    """
    if isinstance(value, bool) or not isinstance(value, _ID_TYPES):
        return None
    if isinstance(value, str):
        return value if value and is_text(value) else None
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            return None
        return repr(value)
    return str(value)


class IdRegistry:
    """Sample ids of one dataset (a training file, a benchmark, a conversion): each id is handed out once.

    ``assign(value, generated, ref)`` returns the explicit id of ``value`` (:func:`explicit_id`) or, when there is
    none, ``generated`` (the caller's deterministic id, e.g. ``"train:12"``), and raises :class:`Invalid`
    ``duplicate_id`` when that id was already handed out (to an explicit or a generated id alike, so a record whose
    explicit id equals another record's generated id is never merged with it). The first record keeps the id.

    ``keep_refs=False`` (a streaming conversion of millions of records) keeps the ids only, not their first refs
    (the message then names the id only).
    """

    def __init__(self, keep_refs: bool = True) -> None:
        self._refs: dict[str, str] = {}
        self._ids: set[str] = set()
        self._keep = keep_refs

    def assign(self, value: Any, generated: str, ref: str = "") -> str:
        sid = explicit_id(value)
        if sid is None:
            self.claim(generated, ref, "generated id")
            return generated
        self.claim(sid, ref)
        return sid

    def claim(self, sid: str, ref: str = "", how: str = "id") -> None:
        """Hand out ``sid``, an id already decided by the rule (e.g. ``Sample.sample_id``).

        Raises:
            Invalid: ``duplicate_id`` when it was handed out before.
        """
        if sid in self._ids or sid in self._refs:
            first = self._refs.get(sid)
            where = f"the id of {first}" if first else "the id of an earlier record"
            raise Invalid("duplicate_id", f"{how} {short_repr(sid)} is already {where}")
        if self._keep:
            self._refs[sid] = ref or sid
        else:
            self._ids.add(sid)

    def __contains__(self, sid: str) -> bool:
        return sid in self._refs or sid in self._ids

    def __len__(self) -> int:
        return len(self._refs) + len(self._ids)


# --------------------------------------------------------------------------------------------------------------------
# text


def is_text(value: Any) -> bool:
    """True for a ``str`` that encodes as UTF-8 (no lone surrogates, no surrogate-escaped undecodable bytes)."""
    if not isinstance(value, str):
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def text(value: Any, what: str = "text") -> str:
    """``value`` when it is valid Unicode text.

    Raises:
        Invalid: ``bad_text`` for a string with a lone surrogate (or an undecodable byte read with
            ``errors="surrogateescape"``). A non-string is the caller's own check (a field of the wrong type).
    """
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as err:
        raise Invalid("bad_text", f"{what} is not valid Unicode text ({err.reason} at position {err.start})") from None
    return value


def check_texts(value: Any, what: str = "record") -> None:
    """Walk a parsed JSON value; :class:`Invalid` ``bad_text`` for the first string (key or value) that is not text.

    Iterative (no recursion), so a deeply nested value cannot raise RecursionError.
    """
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            text(item, what)
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)


# --------------------------------------------------------------------------------------------------------------------
# paths


def resolve_path(root: str, name: str, *, contain: bool = True) -> str:
    """The path of image ``name`` (as a record writes it) under ``root``, normalised.

    With ``contain`` (``root`` is an image root the user named: ``--image-root``, ``--image_folders``), a relative
    ``name`` must stay inside ``root`` lexically: ``a/../b.png`` is fine, ``../x.png`` or ``a/../../x.png`` is
    ``path_outside_root`` (symlinks are not resolved: a link inside the root may point anywhere). Without it (``root``
    is only the data file's own folder, e.g. ``clean``'s outputs that point at ``../images/``), ``..`` is allowed.
    An absolute ``name`` is returned as is (normalised); see :func:`is_absolute`. A NUL byte is ``not_a_file``.

    Raises:
        Invalid: ``path_outside_root`` or ``not_a_file``.
    """
    if "\0" in name:
        raise Invalid("not_a_file", f"image path {short_repr(name)} holds a NUL byte")
    if os.path.isabs(name):
        return os.path.normpath(name)
    rel = os.path.normpath(name)
    if contain and (rel == os.pardir or rel.startswith(os.pardir + os.sep)):
        raise Invalid("path_outside_root", f"image path {short_repr(name)} climbs out of the image root {root}")
    return os.path.normpath(os.path.join(root, rel))


def is_absolute(name: str) -> bool:
    """True for an absolute image path (accepted as upstream does; counted in reports)."""
    return os.path.isabs(name)


def spelling_note(path: str) -> str:
    """For a path that does not exist: ``" (a file with the NFD spelling exists: 'OTHER')"`` (``ascii()``, so the two
    spellings look different) when the same name in the other Unicode normalisation (NFC <-> NFD; the whole path,
    or its last component only) names an existing file, else ``""``.

    The normalisation rule (one home; every image-existence check reports through :func:`regular_file`, the default
    task through ``vlm_r1.tasks.check_image``): a record's name is never resolved to a file of another spelling (on
    Linux two names that normalise alike are two files, and which one the record meant is not ours to guess), but a
    ``missing_image`` says that the other spelling exists, so the mismatch (macOS writes names in NFD, most text in
    NFC) is seen and fixed in the data instead of looking like a missing file.
    """
    folder, name = os.path.split(path)
    for form in ("NFC", "NFD"):
        for other in (unicodedata.normalize(form, path), os.path.join(folder, unicodedata.normalize(form, name))):
            try:
                if other != path and os.path.exists(other):
                    return f" (a file with the {form} spelling exists: {ascii(other)})"
            except (OSError, ValueError):  # a name the OS cannot take
                continue
    return ""


def regular_file(path: str) -> os.stat_result:
    """``os.stat`` of ``path`` (symlinks followed) when it is a regular, non-empty file.

    Raises:
        Invalid: ``missing_image`` (does not exist; the message says when the name's other Unicode spelling, NFC or
            NFD, exists: :func:`spelling_note`) or ``not_a_file`` (a directory, device, FIFO, socket, an empty file
            such as a ``/proc`` entry, or a path the OS cannot stat).
    """
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise Invalid("missing_image", f"image not found: {path}{spelling_note(path)}") from None
    except (OSError, ValueError) as err:
        raise Invalid("not_a_file", f"cannot stat {path}: {type(err).__name__}: {err}") from None
    if not stat.S_ISREG(st.st_mode):
        raise Invalid("not_a_file", f"{path} is not a regular file")
    if st.st_size <= 0:
        raise Invalid("not_a_file", f"{path} is empty (size 0; /proc entries report 0)")
    return st


# --------------------------------------------------------------------------------------------------------------------
# images

_ORIENTATION = 0x0112  # EXIF tag (PIL.ExifTags.Base.Orientation)
_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
# formats whose header already holds everything Pillow's getexif() reads (JPEG/MPO: every APPn marker is read
# before the first scan; PNG: only when no chunk but IDAT/IEND follows the pixel data, see _png_tail_is_pixels)
_HEADER_EXIF_FORMATS = frozenset({"JPEG", "MPO"})


def _transpose_table() -> dict:
    from PIL import Image

    t = Image.Transpose
    # Pillow's own table, PIL/ImageOps.py exif_transpose (Pillow 13.0.0, lines 760-768)
    return {
        2: t.FLIP_LEFT_RIGHT,
        3: t.ROTATE_180,
        4: t.FLIP_TOP_BOTTOM,
        5: t.TRANSPOSE,
        6: t.ROTATE_270,
        7: t.TRANSVERSE,
        8: t.ROTATE_90,
    }


def transpose_method(im) -> Any:
    """The ``PIL.Image.Transpose`` that ``ImageOps.exif_transpose`` applies to the opened image ``im``, or None.

    Exactly Pillow's rule (``PIL/ImageOps.py`` ``exif_transpose``, Pillow 13.0.0 lines 757-768): the orientation is
    ``im.getexif().get(Orientation, 1)`` (so EXIF in any container Pillow reads, a ``Raw profile type exif`` text
    chunk, TIFF tags, XMP ``tiff:Orientation``, and values of any numeric type that compare equal to 2..8, e.g. a
    rational 6/1), looked up in the same table. Call it on a loaded image (``im.load()``), as ``exif_transpose``
    does: a PNG's chunks after the pixel data are read only then.

    Raises:
        Exception: whatever Pillow raises for a broken EXIF block (``exif_transpose`` would raise the same).
    """
    orientation = im.getexif().get(_ORIENTATION, 1)
    return _transpose_table().get(orientation)


def _swaps(method: Any) -> bool:
    from PIL import Image

    t = Image.Transpose
    return method in (t.TRANSPOSE, t.ROTATE_270, t.TRANSVERSE, t.ROTATE_90)


def _png_tail_is_pixels(path: str) -> bool:
    """True when every chunk after a PNG's first IDAT is IDAT or IEND (so Pillow's ``load()`` adds nothing to
    ``info``: no eXIf, tEXt, zTXt or iTXt after the pixel data); also True for a file that ends inside the pixel
    data (truncated: nothing follows it). Walks the chunk headers only (seeks past data). False for anything else
    (no IDAT before the end, a chunk after the pixel data): the caller then decodes."""
    try:
        with open(path, "rb") as f:
            if f.read(8) != _PNG_SIGNATURE:
                return False
            seen_idat = False
            while True:
                head = f.read(8)
                if len(head) < 8:  # the file ends inside or after the pixel data (truncated): no chunk follows it
                    return seen_idat
                length, ctype = int.from_bytes(head[:4], "big"), head[4:]
                if ctype == b"IEND":
                    return True
                if ctype == b"IDAT":
                    seen_idat = True
                elif seen_idat:
                    return False
                f.seek(length + 4, os.SEEK_CUR)
    except OSError:
        return False


def image_frame(im, path: str | None = None, *, decode: bool = True) -> tuple[int, int, Any]:
    """``(width, height, transpose)`` of the opened image ``im`` as displayed: the size after
    ``ImageOps.exif_transpose`` and the transpose it applies (None for none). The one image-frame function: the
    validator (:class:`ImageChecker`), the pixel loader (:func:`open_image`) and every reader use it.

    ``decode=True`` loads the pixels first (exactly ``exif_transpose``'s order). ``decode=False`` is the header-only
    fast path, taken only where it provably agrees: JPEG/MPO (all metadata precedes the scan) and a PNG whose chunks
    after the pixel data are only IDAT/IEND (``path`` is needed to check); any other image is decoded.

    An APNG whose default image is not part of its animation (its ``IDAT`` image has no ``fcTL`` before it, Pillow's
    ``info["default_image"]``, known from the header) is :class:`Invalid` ``unsupported_image`` on every path (header,
    decode, pixels): viewers show the animation's first frame, Pillow decodes the hidden default image, so the
    sizes and boxes annotated on what a person saw would be trained on other pixels. (Rendering the first frame
    instead is not done: Pillow composites it over the default image, which the APNG spec says is not part of the
    animation.) An APNG whose default image is its first frame, and any still PNG, is read as before.

    Raises:
        Invalid: ``unsupported_image`` (the APNG above).
        Exception: Pillow's errors for corrupt data or a broken EXIF block (the caller makes them a reject).
    """
    from PIL import Image

    if im.format == "PNG" and im.info.get("default_image"):
        raise Invalid(
            "unsupported_image",
            f"{path or 'the image'} is an APNG whose default image is not part of its animation: viewers show the "
            "animation's first frame, the decoder the hidden default image (save it as a still PNG)",
        )
    if not decode:
        if im.format in _HEADER_EXIF_FORMATS:
            method = transpose_method(im)
        elif im.format == "PNG" and path is not None and _png_tail_is_pixels(path):
            method = _transpose_table().get(Image.Image.getexif(im).get(_ORIENTATION, 1))  # no load: nothing follows
        else:
            decode = True
    if decode:
        im.load()
        method = transpose_method(im)
    width, height = int(im.width), int(im.height)
    return (height, width, method) if _swaps(method) else (width, height, method)


def module_limits(vlm_module: Any) -> ImageLimits | None:
    """The image limits of a family module (``VLMBaseModule.image_limits``), or None for a module without them (an
    upstream module subclass written before they existed)."""
    fn = getattr(vlm_module, "image_limits", None)
    return fn() if callable(fn) else None


def _replace_pil_bomb_limit(max_image_pixels: int | None) -> None:
    """Our pixel limit replaces PIL's (a warning above 89 Mpx, an error above 179 Mpx): its warning is silenced, and
    a limit above PIL's (or none) lifts PIL's process-wide ``Image.MAX_IMAGE_PIXELS``."""
    from PIL import Image

    warnings.filterwarnings("ignore", category=Image.DecompressionBombWarning)
    if Image.MAX_IMAGE_PIXELS and (not max_image_pixels or max_image_pixels > Image.MAX_IMAGE_PIXELS):
        Image.MAX_IMAGE_PIXELS = None


@dataclass(frozen=True)
class ImageLimits:
    """The images a model family can take, known before step 1 (``VLMBaseModule.image_limits``).

    ``max_aspect_ratio``: the largest long side / short side the family's processor accepts (None: any);
    ``min_side``: the smallest width or height in displayed pixels; ``family`` and ``source`` name where the values
    come from, for messages.
    """

    max_aspect_ratio: float | None = None
    min_side: int = 1
    family: str = ""
    source: str = ""

    def check(self, width: int, height: int, what: str = "image") -> None:
        """Raises :class:`Invalid` ``image_unsupported`` for a ``width x height`` (displayed) image outside the
        limits."""
        short, long = min(width, height), max(width, height)
        who = f"{self.family} " if self.family else ""
        if short < self.min_side:
            raise Invalid(
                "image_unsupported",
                f"{what} is {width}x{height}: a side under {self.min_side} px, smaller than one vision patch of the "
                f"{who}model family ({self.source})",
            )
        if self.max_aspect_ratio is not None and long > self.max_aspect_ratio * short:
            raise Invalid(
                "image_unsupported",
                f"{what} is {width}x{height}: aspect ratio {long / short:.1f}:1 is over the {who}limit of "
                f"{self.max_aspect_ratio:g}:1 ({self.source})",
            )


class ImageChecker:
    """Checks images once each: ``check(path) -> (width, height)`` of the displayed frame, or :class:`Invalid`.

    Results (sizes and failures alike) are cached by ``(path, size, mtime)``, so a file changed in place is checked
    again and 1M records over 100k images open 100k files. Thread-safe (convert's ``--workers``).

    Args:
        verify: ``"decode"`` (default; every pixel decoded: truncated or corrupt data is ``unreadable_image``),
            ``"header"`` (header only) or ``"none"`` (header only as well: the size is still needed).
        max_image_pixels: the decode guard: a header-declared ``width * height`` (pixels of the original image) above
            this is ``image_too_large``, checked before decoding; None or 0 disables it. Unrelated to the model's
            smart_resize ``max_pixels`` (:mod:`groundwork.pixel_budget`).
        limits: the model family's :class:`ImageLimits`; a displayed size outside them is ``image_unsupported``.
    """

    def __init__(
        self,
        verify: str = "decode",
        max_image_pixels: int | None = DECODE_PIXEL_LIMIT,
        limits: ImageLimits | None = None,
    ):
        if verify not in VERIFY_MODES:
            raise ValueError(f"verify must be one of {VERIFY_MODES}, got {verify!r}")
        self.verify, self.max_image_pixels, self.limits = verify, max_image_pixels, limits
        self._cache: dict[tuple, tuple[int, int] | Invalid] = {}
        self._lock = threading.Lock()
        _replace_pil_bomb_limit(max_image_pixels)

    def check(self, path: str) -> tuple[int, int]:
        """``(width, height)`` of the image at ``path`` in its displayed frame (EXIF orientation applied).

        Raises:
            Invalid: ``missing_image``, ``not_a_file``, ``image_too_large``, ``unreadable_image``,
                ``unsupported_image`` (:func:`image_frame`) or ``image_unsupported`` (outside ``limits``).
        """
        st = regular_file(path)
        key = (path, st.st_size, st.st_mtime_ns)
        hit = self._cache.get(key)
        if hit is None:
            hit = self._check(path)
            with self._lock:
                self._cache[key] = hit
        if isinstance(hit, Invalid):
            raise hit
        if self.limits is not None:
            self.limits.check(hit[0], hit[1], path)
        return hit

    def _check(self, path: str) -> tuple[int, int] | Invalid:
        from PIL import Image

        try:
            with Image.open(path) as im:
                width, height = int(im.width), int(im.height)
                if width <= 0 or height <= 0:
                    return Invalid("unreadable_image", f"{path} declares a {width}x{height} image")
                if self.max_image_pixels and width * height > self.max_image_pixels:
                    return Invalid(
                        "image_too_large",
                        f"{path} declares {width}x{height} = {width * height} pixels, "
                        f"over the limit of {self.max_image_pixels}",
                    )
                width, height, _ = image_frame(im, path, decode=self.verify == "decode")
        except Image.DecompressionBombError as err:
            return Invalid("image_too_large", f"{path}: {err}")
        except Invalid as err:  # image_frame's own verdict (an APNG with a hidden default image)
            return err
        except Exception as err:  # PIL raises many types for corrupt files (OSError, SyntaxError, zlib.error, ...)
            return Invalid("unreadable_image", f"cannot decode {path}: {type(err).__name__}: {err}")
        return width, height


def open_image(path: str):
    """The image at ``path`` as displayed, converted to RGB and fully loaded: the pixels of
    ``ImageOps.exif_transpose`` through :func:`image_frame` (the function the validator sizes images with).

    Raises:
        Invalid: ``unsupported_image`` (:func:`image_frame`: an APNG whose default image is not part of its
            animation).
        Exception: Pillow's errors for a missing, corrupt or undecodable image.
    """
    from PIL import Image

    with Image.open(path) as im:
        _, _, method = image_frame(im, path, decode=True)
        return (im.transpose(method) if method is not None else im).convert("RGB")


# --------------------------------------------------------------------------------------------------------------------
# strict JSON out


def json_value(value: Any, what: str = "value") -> Any:
    """``value`` with every part JSON can hold as is, and the values columnar formats (parquet via pyarrow) hand out
    that JSON cannot hold, as JSON values: ``datetime``/``date``/``time`` -> ISO 8601 text, ``timedelta`` -> seconds,
    ``Decimal`` -> a float when finite, ``bytes`` -> base64 text, ``UUID`` -> text, tuples and sets -> lists,
    non-text object keys -> text.

    Raises:
        ValueError: a NaN/inf float, a value of any other type, or nesting deeper than Python's recursion limit
            (the caller makes it a per-record reject).
    """
    import base64
    import datetime as dt
    import decimal
    import math
    import uuid

    def conv(v: Any) -> Any:
        if v is None or isinstance(v, (bool, int, str)):
            return v
        if isinstance(v, float):
            if not math.isfinite(v):
                raise ValueError(f"{what} holds {v!r}, which strict JSON cannot store")
            return v
        if isinstance(v, dict):
            return {k if isinstance(k, str) else str(k): conv(x) for k, x in v.items()}
        if isinstance(v, (list, tuple, set, frozenset)):
            return [conv(x) for x in v]
        if isinstance(v, (dt.datetime, dt.date, dt.time)):
            return v.isoformat()
        if isinstance(v, dt.timedelta):
            return v.total_seconds()
        if isinstance(v, decimal.Decimal):
            return float(v) if v.is_finite() else str(v)
        if isinstance(v, (bytes, bytearray, memoryview)):
            return base64.b64encode(bytes(v)).decode("ascii")
        if isinstance(v, uuid.UUID):
            return str(v)
        raise ValueError(f"{what} holds a {type(v).__name__}, which JSON cannot store")

    try:
        return conv(value)
    except RecursionError:
        raise ValueError(f"{what} is nested too deeply to store") from None


_ENCODERS: dict[tuple, json.JSONEncoder] = {}


def dumps(value: Any, **kwargs: Any) -> str:
    """``json.dumps`` that refuses NaN / inf (``allow_nan=False``: the output is strict JSON). One encoder per set of
    options is kept (``json.dumps`` builds a new ``JSONEncoder`` per call when given options: the hot path of
    ``convert``, one call per written record)."""
    key = tuple(sorted(kwargs.items()))
    try:
        encoder = _ENCODERS[key]
    except KeyError:
        encoder = _ENCODERS.setdefault(key, json.JSONEncoder(allow_nan=False, **kwargs))
    except TypeError:  # an unhashable option (a default= function is hashable; a list of separators is not)
        return json.dumps(value, allow_nan=False, **kwargs)
    return encoder.encode(value)
