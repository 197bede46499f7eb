"""One validation path for data records: numbers, text, paths and images (GUI-free, no task knowledge).

Used by the core's readers (``vlm_r1.data``, ``vlm_r1.tasks``) and by the GUI plugin's schema
(``gui_grounding.schema``, hence ``gui-grounding convert`` and the training loader). Every check raises
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
  count declared by the header above ``max_pixels`` (default 64 Mpx) is ``image_too_large``, before anything is
  decoded; ``verify="decode"`` decodes every pixel (a truncated PNG/JPEG, or a PNG whose IDAT is not a zlib stream,
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
import warnings
from typing import Any

MAX_COORD = 1e7  # any box number beyond +-1e7 is bad_box (no screen is that large, in any unit)
DEFAULT_MAX_PIXELS = 64_000_000  # image_too_large above this many pixels (header-declared width x height)
VERIFY_MODES = ("none", "header", "decode")

REASONS = {
    "bad_box": "a box value is not a finite number within +-1e7 (NaN, inf, a boolean, a string, a huge integer)",
    "bad_text": "a text field is not valid Unicode (a lone surrogate, or bytes that are not UTF-8)",
    "path_outside_root": "a relative image path whose '..' components climb out of its image root",
    "not_a_file": "the image path is not a regular, non-empty file (a directory, device, FIFO, /proc entry, empty)",
    "image_too_large": "the image header declares more pixels than the limit (default 64 Mpx); nothing was decoded",
    "missing_image": "image file does not exist",
    "unreadable_image": "image file cannot be decoded",
    "suspect_unit": "a pixel-unit box whose four values all lie in [0, 1]: fractions, not pixels",
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
        if (type(a) in num and type(b) in num and type(c) in num and type(d) in num
                and -m <= a <= m and -m <= b <= m and -m <= c <= m and -m <= d <= m):  # fmt: skip
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


def short_repr(value: Any, limit: int = 80) -> str:
    try:
        text = repr(value)
    except (ValueError, RecursionError):  # a huge int's repr raises past sys.get_int_max_str_digits()
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[:limit] + "..."


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


def regular_file(path: str) -> os.stat_result:
    """``os.stat`` of ``path`` (symlinks followed) when it is a regular, non-empty file.

    Raises:
        Invalid: ``missing_image`` (does not exist) or ``not_a_file`` (a directory, device, FIFO, socket, an empty
            file such as a ``/proc`` entry, or a path the OS cannot stat).
    """
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise Invalid("missing_image", f"image not found: {path}") from None
    except (OSError, ValueError) as err:
        raise Invalid("not_a_file", f"cannot stat {path}: {type(err).__name__}: {err}") from None
    if not stat.S_ISREG(st.st_mode):
        raise Invalid("not_a_file", f"{path} is not a regular file")
    if st.st_size <= 0:
        raise Invalid("not_a_file", f"{path} is empty (size 0; /proc entries report 0)")
    return st


# --------------------------------------------------------------------------------------------------------------------
# images

_ORIENTATION = 0x0112  # EXIF tag
_SWAPS = (5, 6, 7, 8)  # orientations that rotate by 90 or 270 degrees


def _orientation(im) -> int:
    """The EXIF orientation tag of an opened image (1 when absent), read without decoding pixels (a PNG's
    ``getexif()`` would load the image: its eXIf chunk read before IDAT is taken from ``im.info``)."""
    from PIL import Image

    try:
        if im.format == "PNG":
            if "exif" not in im.info:
                return 1
            exif = Image.Exif()
            exif.load(im.info["exif"])
        else:
            exif = im.getexif()
        value = exif.get(_ORIENTATION, 1)
        return int(value) if isinstance(value, int) else 1
    except Exception:  # a broken EXIF block: treat as no orientation (the pixels decide under decode)
        return 1


def _replace_pil_bomb_limit(max_pixels: int | None) -> None:
    """Our pixel limit replaces PIL's (a warning above 89 Mpx, an error above 179 Mpx): its warning is silenced, and
    a limit above PIL's (or none) lifts PIL's process-wide ``Image.MAX_IMAGE_PIXELS``."""
    from PIL import Image

    warnings.filterwarnings("ignore", category=Image.DecompressionBombWarning)
    if Image.MAX_IMAGE_PIXELS and (not max_pixels or max_pixels > Image.MAX_IMAGE_PIXELS):
        Image.MAX_IMAGE_PIXELS = None


class ImageChecker:
    """Checks images once each: ``check(path) -> (width, height)`` of the displayed frame, or :class:`Invalid`.

    Results (sizes and failures alike) are cached by ``(path, size, mtime)``, so a file changed in place is checked
    again and 1M records over 100k images open 100k files. Thread-safe (convert's ``--workers``).

    Args:
        verify: ``"decode"`` (default; every pixel decoded: truncated or corrupt data is ``unreadable_image``),
            ``"header"`` (header only) or ``"none"`` (header only as well: the size is still needed).
        max_pixels: header-declared ``width * height`` above this is ``image_too_large`` (checked before decoding);
            None or 0 disables the limit.
    """

    def __init__(self, verify: str = "decode", max_pixels: int | None = DEFAULT_MAX_PIXELS):
        if verify not in VERIFY_MODES:
            raise ValueError(f"verify must be one of {VERIFY_MODES}, got {verify!r}")
        self.verify, self.max_pixels = verify, max_pixels
        self._cache: dict[tuple, tuple[int, int] | Invalid] = {}
        self._lock = threading.Lock()
        _replace_pil_bomb_limit(max_pixels)

    def check(self, path: str) -> tuple[int, int]:
        """``(width, height)`` of the image at ``path`` in its displayed frame (EXIF orientation applied).

        Raises:
            Invalid: ``missing_image``, ``not_a_file``, ``image_too_large`` or ``unreadable_image``.
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
        return hit

    def _check(self, path: str) -> tuple[int, int] | Invalid:
        from PIL import Image

        try:
            with Image.open(path) as im:
                width, height = int(im.width), int(im.height)
                if width <= 0 or height <= 0:
                    return Invalid("unreadable_image", f"{path} declares a {width}x{height} image")
                if self.max_pixels and width * height > self.max_pixels:
                    return Invalid("image_too_large", f"{path} declares {width}x{height} = {width * height} pixels, "
                                                      f"over the limit of {self.max_pixels}")  # fmt: skip
                if self.verify == "decode":
                    im.load()
                orientation = _orientation(im)
        except Image.DecompressionBombError as err:
            return Invalid("image_too_large", f"{path}: {err}")
        except Exception as err:  # PIL raises many types for corrupt files (OSError, SyntaxError, zlib.error, ...)
            return Invalid("unreadable_image", f"cannot decode {path}: {type(err).__name__}: {err}")
        return (height, width) if orientation in _SWAPS else (width, height)


def open_image(path: str):
    """The image at ``path`` as displayed (``ImageOps.exif_transpose``), converted to RGB and fully loaded."""
    from PIL import Image, ImageOps

    with Image.open(path) as im:
        return ImageOps.exif_transpose(im).convert("RGB")


# --------------------------------------------------------------------------------------------------------------------
# strict JSON out


def dumps(value: Any, **kwargs: Any) -> str:
    """``json.dumps`` that refuses NaN / inf (``allow_nan=False``: the output is strict JSON)."""
    return json.dumps(value, allow_nan=False, **kwargs)


def dump(value: Any, f, **kwargs: Any) -> None:
    """``json.dump`` that refuses NaN / inf (``allow_nan=False``)."""
    json.dump(value, f, allow_nan=False, **kwargs)
