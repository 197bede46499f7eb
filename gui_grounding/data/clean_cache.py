"""The detection cache of ``gui-grounding clean`` (:mod:`gui_grounding.data.clean`): its lines (validated, read,
written), its files and the ``--shard`` slices that fill it.

Rule (GTA1's detection step, Yan98/GTA1 at 81f0c4c: its ``run.py`` splits the image list with ``numpy.array_split``;
the filter itself, GTA1 ``preprocessing/filter.py``, is :mod:`gui_grounding.data.clean`). Detections are cached per
image and per detector component (``gui_grounding.data.detectors``) in JSONL files under ``--cache-dir`` (default
``OUT.detections/``), one line per image::

    {"image": "/abs/path.png", "detector": "ocr", "config": {...}, "seconds": 0.52, "detections": [...]}
    {"image": "/abs/path.png", "detector": "ocr", "config": {...}, "seconds": 0.01, "error": "OSError: ..."}

Files: ``<detector>.jsonl`` (runs without ``--shard``) and ``<detector>.shard-<I>-of-<N>.jsonl``. Every run reads all
of them; images already cached (with the same detector configuration) are skipped, so a killed run resumes where it
stopped. ``--shard I/N`` (0-based) takes the I-th of N contiguous slices of the sorted unique image list
(:func:`shard_bounds`, ``numpy.array_split`` order, as GTA1's ``run.py``).

Hostile input rules (docs/HOSTILE_INPUT.md):

* **cache lines**: every line goes through :func:`parse_cache_line` (strict JSON object, typed keys, detections a list
  of objects whose ``bbox`` is 4 finite numbers, valid Unicode; reasons in ``CACHE_LINE_REASONS``). A bad line is
  counted and logged and its image counts as not cached (detected again; under ``--from-cache`` reported missing);
  a line for an image already indexed is counted as a duplicate (a success wins over an error, a later line over an
  earlier one of the same kind). Reading never raises on a line's content;
* **detector failures** (undecodable image, any exception, output that would not pass :func:`parse_cache_line`) are
  cached as ``error`` lines (:func:`detect_one`);
* **writing**: cache files are appended whole lines, flushed, under a lock per file (``groundwork.outputs``: two
  writers never interleave one cache file; a torn last line of a killed run is cut first), and what is written is
  what the reader accepts (:meth:`DetectionCache.append`).
"""

from __future__ import annotations

import contextlib
import glob
import json
import logging
import os
import re
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import IO, Any

from groundwork import validate
from groundwork.outputs import LineAppender, OutputLock
from groundwork.records import strict_loads
from gui_grounding.data.detectors import Detector

logger = logging.getLogger(__name__)

CACHE_LINE_REASONS = {
    "torn_line": "the last line of a file has no final newline (half written by a killed run)",
    "blank_line": "an empty line",
    "not_utf8": "bytes that are not UTF-8",
    "not_json": "not one strict JSON value (garbage, two values on one line, NaN/Infinity, a float beyond range)",
    "not_object": "valid JSON but not an object",
    "bad_field": "image, detector, config, seconds or error missing or of the wrong type, or neither/both of "
    "detections and error",
    "bad_detections": "detections is not a list of objects whose bbox is 4 finite numbers with x_min <= x_max and "
    "y_min <= y_max (score a finite number or null, type and source strings)",
    "bad_text": "a string that is not valid Unicode (a lone surrogate escape)",
    "changed": "the line is no longer where it was indexed (the file changed during the run)",
}
MAX_SHARDS = 1_000_000  # --shard I/N: N at most this (a larger count is a typo, and would make absurd file names)
MAX_ERROR_CHARS = 500  # a detector error message is cut to this many characters in the cache line


class CacheIncompleteError(RuntimeError):
    """``--from-cache`` was asked but some images have no cached detections."""


# --------------------------------------------------------------------------------------------------------------------
# shards


_SHARD = re.compile(r"[ \t]*([0-9]{1,7})[ \t]*/[ \t]*([0-9]{1,7})[ \t]*")


def parse_shard(text: str) -> tuple[int, int]:
    """``"I/N"`` -> ``(I, N)`` with ``0 <= I < N <= MAX_SHARDS`` (0-based, like ``$SLURM_ARRAY_TASK_ID`` of
    ``--array=0-(N-1)``). ASCII digits only (no sign, no other digit scripts), spaces around the numbers allowed.

    Raises:
        ValueError: not of the form ``I/N`` or out of range.
    """
    m = _SHARD.fullmatch(text) if isinstance(text, str) else None
    if not m or not 0 <= int(m.group(1)) < int(m.group(2)) <= MAX_SHARDS:
        shown = validate.short_repr(text)
        raise ValueError(f"--shard must be I/N with 0 <= I < N <= {MAX_SHARDS} (0-based), got {shown}")
    return int(m.group(1)), int(m.group(2))


def shard_bounds(num_items: int, index: int, count: int) -> tuple[int, int]:
    """``[start, stop)`` of shard ``index`` of ``count`` contiguous slices of ``num_items`` items.

    Same split as ``numpy.array_split`` (GTA1 ``run.py``): the first ``num_items % count`` shards get one extra item.
    """
    base, extra = divmod(num_items, count)
    start = index * base + min(index, extra)
    return start, start + base + (1 if index < extra else 0)


def shard_of(num_items: int, position: int, count: int) -> int:
    """The shard (of ``count``, :func:`shard_bounds` split) that holds item ``position`` of ``num_items``."""
    base, extra = divmod(num_items, count)
    big = extra * (base + 1)  # items in the first ``extra`` shards, one longer each
    return position // (base + 1) if position < big else extra + (position - big) // base


def shard_images(images: list[str], index: int, count: int) -> list[str]:
    """The images of shard ``index`` of ``count``: a contiguous slice of ``sorted(set(images))``."""
    ordered = sorted(set(images))
    start, stop = shard_bounds(len(ordered), index, count)
    return ordered[start:stop]


# --------------------------------------------------------------------------------------------------------------------
# detection cache: one line validation


class CacheLineError(ValueError):
    """A cache line that is not a valid entry: ``reason`` is a key of ``CACHE_LINE_REASONS``."""

    def __init__(self, reason: str, message: str):
        assert reason in CACHE_LINE_REASONS, reason
        self.reason, self.message = reason, message
        super().__init__(f"{reason}: {message}")


def _is_number(value: Any) -> bool:
    return validate.is_coord(value)  # an int/float (not a bool), finite, within +-1e7


def check_detections(detections: Any) -> list[dict]:
    """``detections`` when it is a list of valid detections (the detector interface of ``detectors``).

    Each item is an object whose ``bbox`` is 4 finite numbers within +-1e7 with ``x_min <= x_max`` and
    ``y_min <= y_max``; ``score`` absent, null or a finite number; ``type`` and ``source`` absent or strings.

    Raises:
        CacheLineError: ``bad_detections`` naming the first bad item.
    """
    if not isinstance(detections, list):
        raise CacheLineError("bad_detections", f"detections is {type(detections).__name__}, not a list")
    for k, det in enumerate(detections):
        if not isinstance(det, dict):
            raise CacheLineError("bad_detections", f"detection {k} is {type(det).__name__}, not an object")
        try:
            x0, y0, x1, y1 = validate.box4(det.get("bbox"), f"detection {k} bbox")
        except validate.Invalid as err:
            raise CacheLineError("bad_detections", err.message) from None
        if x0 > x1 or y0 > y1:
            raise CacheLineError("bad_detections", f"detection {k} bbox {det['bbox']} is inverted")
        score = det.get("score")
        if score is not None and not _is_number(score):
            raise CacheLineError(
                "bad_detections", f"detection {k} score {validate.short_repr(score)} is not a finite number or null"
            )
        for key in ("type", "source"):
            if key in det and not isinstance(det[key], str):
                raise CacheLineError("bad_detections", f"detection {k} {key} is not a string")
    return detections


def parse_cache_line(line: bytes) -> dict:
    """The validated cache entry of one line (bytes, with its final newline): the one reader of cache lines.

    The entry is an object with ``image`` (a non-empty string), ``detector`` (a string), ``config`` (an object;
    absent means ``{}``), ``seconds`` (absent, null or a finite number >= 0) and exactly one of ``detections``
    (:func:`check_detections`) and ``error`` (a string); every string valid Unicode. Strict JSON: no NaN/Infinity,
    no float beyond range. Never raises anything but :class:`CacheLineError`.

    Raises:
        CacheLineError: with a reason from ``CACHE_LINE_REASONS``.
    """
    if not line.endswith(b"\n"):
        raise CacheLineError("torn_line", "no final newline (half written by a killed run)")
    if not line.strip(b" \t\r\n"):
        raise CacheLineError("blank_line", "empty line")
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as err:
        raise CacheLineError("not_utf8", f"byte {err.start} is not UTF-8") from None
    try:
        entry = strict_loads(text)
    except RecursionError:
        raise CacheLineError("not_json", "nested too deeply") from None
    except ValueError as err:  # JSONDecodeError, NaN/Infinity, 1e999, ints of too many digits
        raise CacheLineError("not_json", str(err)[:200]) from None
    if not isinstance(entry, dict):
        raise CacheLineError("not_object", f"a JSON {type(entry).__name__}, not an object")
    try:
        validate.check_texts(entry, "a string of the line")
    except validate.Invalid as err:
        raise CacheLineError("bad_text", err.message) from None
    image = entry.get("image")
    if not isinstance(image, str) or not image or "\0" in image:
        raise CacheLineError("bad_field", f"image {validate.short_repr(image)} is not a non-empty path")
    if not isinstance(entry.get("detector"), str):
        raise CacheLineError("bad_field", f"detector {validate.short_repr(entry.get('detector'))} is not a string")
    entry.setdefault("config", {})
    if not isinstance(entry["config"], dict):
        raise CacheLineError("bad_field", f"config is {type(entry['config']).__name__}, not an object")
    seconds = entry.get("seconds")
    if seconds is not None and not (_is_number(seconds) and seconds >= 0):
        raise CacheLineError("bad_field", f"seconds {validate.short_repr(seconds)} is not a finite number >= 0")
    has_detections, has_error = "detections" in entry, "error" in entry
    if has_detections == has_error:
        raise CacheLineError(
            "bad_field", "a line holds either detections or error" + (", not both" if has_error else "")
        )
    if has_error and not isinstance(entry["error"], str):
        raise CacheLineError("bad_field", f"error is {type(entry['error']).__name__}, not a string")
    if has_detections:
        check_detections(entry["detections"])
    return entry


def scan_cache_lines(f: IO[bytes]) -> Iterator[tuple[int, int, dict | CacheLineError]]:
    """``(offset, length, entry or CacheLineError)`` for every line of a cache file open in binary mode: every line
    (a torn last one included) yields exactly once, and nothing in the file's content raises."""
    offset = 0
    for line in f:
        try:
            result: dict | CacheLineError = parse_cache_line(line)
        except CacheLineError as err:
            result = err
        yield offset, len(line), result
        offset += len(line)


def _canonical_config(config: Any) -> str | None:
    """The configuration as canonical JSON text (None when it cannot be written: then it matches nothing)."""
    try:
        return json.dumps(config, sort_keys=True, allow_nan=False)
    except (TypeError, ValueError, RecursionError):
        return None


@dataclass
class CacheEntry:
    """Where one image's cache line is (``path``, byte ``offset``, ``length``), its error (``None`` on success) and
    seconds. ``path`` is empty for an error kept in memory only (an entry that could not be written)."""

    path: str
    offset: int
    length: int
    error: str | None
    seconds: float | None


@dataclass
class DetectionCache:
    """The cache files of one leaf detector in ``cache_dir`` (``<name>.jsonl`` and ``<name>.shard-I-of-N.jsonl``).

    :meth:`load` indexes every file of this detector (``index``: image -> :class:`CacheEntry`; detections stay on disk
    and :meth:`read` fetches one image's line, so memory does not grow with the detections of millions of images).
    Every line goes through :func:`parse_cache_line`; counts: ``lines`` read, ``indexed`` (valid, this configuration),
    ``stale`` (valid, made with another configuration: ignored), ``rejects`` (reason -> count of bad lines: ignored,
    their images detected again), so ``indexed + stale + bad_lines == lines``; ``duplicates`` (indexed lines of an
    image already indexed: a success wins over an error, a later line over an earlier one of the same kind);
    ``unreadable_files`` (files that could not be read at all).
    """

    cache_dir: str
    detector: Detector
    index: dict[str, CacheEntry] = field(default_factory=dict)
    lines: int = 0
    indexed: int = 0
    stale: int = 0
    duplicates: int = 0
    unreadable_files: int = 0
    rejects: Counter = field(default_factory=Counter)

    @property
    def name(self) -> str:
        return self.detector.name

    @property
    def bad_lines(self) -> int:
        return sum(self.rejects.values())

    def stats(self) -> dict:
        """The line counts (for the report)."""
        return {
            "lines": self.lines,
            "indexed": self.indexed,
            "stale": self.stale,
            "duplicates": self.duplicates,
            "bad_lines": dict(sorted(self.rejects.items())),
            "unreadable_files": self.unreadable_files,
        }

    def path(self, shard: tuple[int, int] | None = None) -> str:
        """File this run appends to: ``<name>.jsonl``, or ``<name>.shard-I-of-N.jsonl`` for a shard run."""
        suffix = "" if shard is None else f".shard-{shard[0]}-of-{shard[1]}"
        return os.path.join(self.cache_dir, f"{self.name}{suffix}.jsonl")

    def files(self) -> list[str]:
        """Existing cache files of this detector (regular files only), sorted."""
        pattern = os.path.join(glob.escape(self.cache_dir), f"{self.name}.shard-*-of-*.jsonl")
        return sorted(p for p in {self.path(), *glob.glob(pattern)} if os.path.isfile(p))

    def _add(self, image: str, entry: CacheEntry) -> None:
        old = self.index.get(image)
        if old is not None:
            self.duplicates += 1
        if old is None or old.error is not None or entry.error is None:
            self.index[image] = entry

    def load(self) -> dict[str, CacheEntry]:
        """Index all cache files of this detector into ``index`` (image path -> :class:`CacheEntry`)."""
        want = _canonical_config(self.detector.config())
        self.index, self.lines, self.indexed, self.stale, self.duplicates = {}, 0, 0, 0, 0
        self.unreadable_files, self.rejects = 0, Counter()
        examples: dict[str, str] = {}
        for path in self.files():
            try:
                with open(path, "rb") as f:
                    for offset, length, entry in scan_cache_lines(f):
                        self.lines += 1
                        if isinstance(entry, CacheLineError):
                            self.rejects[entry.reason] += 1
                            examples.setdefault(entry.reason, f"{path} byte {offset}: {entry.message}")
                        elif entry["detector"] != self.name or _canonical_config(entry["config"]) != want:
                            self.stale += 1
                        else:
                            self.indexed += 1
                            self._add(
                                entry["image"],
                                CacheEntry(path, offset, length, entry.get("error"), entry.get("seconds")),
                            )
            except OSError as err:  # unreadable file (permissions, I/O error): its images are detected again
                self.unreadable_files += 1
                logger.warning(
                    "cannot read cache file %s (%s); its images count as not cached", path, err.strerror or err
                )
        if self.stale:
            logger.warning(
                "%s: %d cached lines were made with another %s configuration; ignored (recomputed)",
                self.cache_dir,
                self.stale,
                self.name,
            )
        if self.rejects:
            detail = "; ".join(f"{r} {n} (e.g. {examples[r]})" for r, n in sorted(self.rejects.items()))
            logger.warning(
                "%s: %d bad cache lines of %s ignored (those images count as not cached): %s",
                self.cache_dir,
                self.bad_lines,
                self.name,
                detail,
            )
        if self.duplicates:
            logger.info(
                "%s: %d cache lines of %s repeat an image (a success wins over an error, a later line over an "
                "earlier one)",
                self.cache_dir,
                self.duplicates,
                self.name,
            )
        return self.index

    def read(self, image: str) -> dict:
        """The validated cache entry of ``image`` (``detections`` or ``error``), read again from its file.

        Raises:
            CacheLineError: ``changed`` when the line is no longer there or no longer this image's, or the line's
                own reason.
        """
        entry = self.index[image]
        if not entry.path:
            return {"image": image, "error": entry.error}
        try:
            with open(entry.path, "rb") as f:
                f.seek(entry.offset)
                line = f.read(entry.length)
        except OSError as err:
            raise CacheLineError("changed", f"cannot read {entry.path}: {err.strerror or err}") from None
        parsed = parse_cache_line(line)
        if parsed["image"] != image:
            raise CacheLineError("changed", f"{entry.path} byte {entry.offset} no longer holds {image}")
        return parsed

    def append(self, appender: LineAppender, entry: dict) -> None:
        """Write one cache line with ``appender`` (whole line, flushed; the caller holds the file's lock) and index
        it. An entry that would not pass :func:`parse_cache_line` is written as an ``error`` line instead; one that
        cannot be written at all is kept in memory as an error."""
        image = entry["image"]
        line, problem = _entry_line(entry)
        if line is None:
            entry = _error_entry(entry, f"bad detector output: {problem}")
            line, _ = _entry_line(entry)
        if line is None:  # not even an error line can be written (e.g. an image path that is not valid Unicode)
            self._add(image, CacheEntry("", 0, 0, entry["error"], None))
            return
        offset = os.path.getsize(appender.path)  # we hold the lock: nobody else appends
        appender.write(line)
        self._add(
            image,
            CacheEntry(appender.path, offset, len(line.encode("utf-8")) + 1, entry.get("error"), entry.get("seconds")),
        )


def _entry_line(entry: dict) -> tuple[str | None, str]:
    """``(line, "")``: ``entry`` as one strict JSON line that :func:`parse_cache_line` accepts, or ``(None,
    problem)``. What is written is what the reader accepts."""
    try:
        line = validate.dumps(entry)
        parse_cache_line(line.encode("utf-8") + b"\n")
    except (TypeError, ValueError, RecursionError, UnicodeError) as err:  # CacheLineError is a ValueError
        return None, str(err)[:MAX_ERROR_CHARS]
    return line, ""


def _error_entry(entry: dict, message: str) -> dict:
    out = {k: entry[k] for k in ("image", "detector", "config", "seconds") if k in entry}
    out["error"] = _error_text(message)
    return out


def _error_text(message: str) -> str:
    """A detector's error message as valid Unicode text of at most ``MAX_ERROR_CHARS`` characters."""
    return message.encode("utf-8", "backslashreplace").decode("utf-8")[:MAX_ERROR_CHARS]


def detect_one(detector: Detector, image: str) -> dict:
    """Run one leaf detector on one image and return its cache entry; any failure (undecodable image, detector
    exception, output that is not a list of valid detections) becomes an ``error`` entry."""
    entry: dict[str, Any] = {"image": image, "detector": detector.name, "config": detector.config()}
    start = time.perf_counter()
    try:
        entry["detections"] = check_detections(detector.detect(image))
    except CacheLineError as err:
        entry["error"] = _error_text(f"bad detector output: {err.message}")
    except Exception as err:  # any per-image failure is recorded, the run goes on
        entry["error"] = _error_text(f"{type(err).__name__}: {err}")
    entry["seconds"] = round(time.perf_counter() - start, 4)
    return entry


# --------------------------------------------------------------------------------------------------------------------
# filling the cache


def fill_cache(
    detector: Detector,
    caches: dict[str, DetectionCache],
    images: list[str],
    shard,
    *,
    from_cache: bool,
    retry_failed: bool,
    progress: bool,
) -> dict[str, int]:
    """Detect every image of ``images`` missing from the caches; returns counts (detected, cached, failed)."""
    todo = {
        name: [im for im in images if im not in c.index or (retry_failed and c.index[im].error is not None)]
        for name, c in caches.items()
    }
    todo_images = sorted({im for ims in todo.values() for im in ims})
    counts = {"images": len(images), "detected_now": len(todo_images), "cached": len(images) - len(todo_images)}
    if todo_images and from_cache:
        bad = sum(c.bad_lines for c in caches.values())
        note = f"; {bad} bad cache lines ignored" if bad else ""
        raise CacheIncompleteError(
            f"{len(todo_images)} of {len(images)} images have no cached detections (e.g. {todo_images[0]}{note})"
        )
    if not todo_images:
        return counts
    from tqdm.auto import tqdm

    needed = [c for c in detector.components if todo[c.name]]
    for comp in needed:
        comp.load()  # a missing backend or weights file fails here, before any image and any cache file
    sets = {name: set(ims) for name, ims in todo.items()}
    failures: list[tuple[str, str]] = []
    with contextlib.ExitStack() as stack:
        appenders = {}
        for comp in needed:
            path = caches[comp.name].path(shard)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            stack.enter_context(OutputLock(path))  # one writer per cache file: a second fails at once
            # a half-written last line (no final newline) is cut, so its image is redone
            appenders[comp.name] = stack.enter_context(LineAppender(path, cut_torn_tail=True))
        for image in tqdm(todo_images, desc=f"detect ({detector.name})", unit="img", disable=not progress):
            for comp in needed:
                if image in sets[comp.name]:
                    cache = caches[comp.name]
                    cache.append(appenders[comp.name], detect_one(comp, image))
                    if cache.index[image].error is not None:
                        failures.append((image, f"{comp.name}: {cache.index[image].error}"))
    if failures:
        logger.warning(
            "the detector failed on %d of %d images detected now (their samples are rejected as "
            "detection_failed), e.g. %s: %s",
            len({im for im, _ in failures}),
            len(todo_images),
            *failures[0],
        )
    return counts


def missing_shards(missing: list[str], images: list[str], cache_dir: str, names: list[str]) -> str:
    """Which ``--shard I/N`` runs would fill ``missing`` (N taken from the shard files present)."""
    files = [p for n in names for p in glob.glob(os.path.join(glob.escape(cache_dir), f"{n}.shard-*"))]
    counts = sorted({int(m.group(1)) for p in files if (m := re.search(r"-of-([0-9]{1,7})\.jsonl$", p))} - {0})
    if not counts:
        return "no shard cache files found; run without --from-cache to detect them here"
    position = {im: i for i, im in enumerate(images)}
    parts = []
    for n in counts:
        idx = sorted({shard_of(len(images), position[im], n) for im in missing})
        parts.append(", ".join(f"--shard {i}/{n}" for i in idx))
    return "incomplete shards: " + "; ".join(parts)
