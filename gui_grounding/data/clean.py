"""Detector-IoU cleaning of grounding data, GTA1's lightweight filter: ``gui-grounding clean``.

Rule (GTA1 ``preprocessing/filter.py``: Yan98/GTA1 ``preprocessing/filter.py:33,87-98`` at 81f0c4c; described on
https://huggingface.co/datasets/HelloKKMe/grounding_dataset): detect the UI elements on each screenshot,
take the best IoU between the annotated box (any of a sample's boxes) and any detection, keep the sample when
``best_iou >= iou_threshold`` (0.1 by default, as GTA1), reject it otherwise. The IoU is :func:`gui_grounding.models.frames.
box_iou`; all boxes are in the pixels of the **displayed** image (``(x_min, y_min, x_max, y_max)``, EXIF orientation
applied): samples are sized by :func:`gui_grounding.data.schema.load_samples` and detectors read pixels through
:func:`groundwork.validate.open_image`, both through the one image-frame function ``groundwork.validate.image_frame``.

Nothing is lost: every input record ends up in ``OUT.jsonl`` (kept, canonical record + ``best_iou``) or in
``OUT.rejected.jsonl`` with a reason from ``REJECT_REASONS`` (``low_iou``, ``detection_failed``, ``invalid_record``).
A record's own fields named like the ones added here (``OUTPUT_KEYS``) are replaced, never trusted.

Detections are cached per image and per detector component (``gui_grounding.data.detectors``) in JSONL files under
``--cache-dir`` (default ``OUT.detections/``), one line per image::

    {"image": "/abs/path.png", "detector": "ocr", "config": {...}, "seconds": 0.52, "detections": [...]}
    {"image": "/abs/path.png", "detector": "ocr", "config": {...}, "seconds": 0.01, "error": "OSError: ..."}

Files: ``<detector>.jsonl`` (runs without ``--shard``) and ``<detector>.shard-<I>-of-<N>.jsonl``. Every run reads all
of them; images already cached (with the same detector configuration) are skipped, so a killed run resumes where it
stopped. ``--shard I/N`` (0-based) takes the I-th of N contiguous slices of the sorted unique image list
(``numpy.array_split`` order, as GTA1's ``run.py``), only fills the cache and writes no output; a final run without
``--shard`` merges every cache file, detects what is still missing (``--from-cache``: detects nothing and stops with
the missing shards named) and filters.

Hostile input rules:

* **cache lines**: every line goes through :func:`parse_cache_line` (strict JSON object, typed keys, detections a list
  of objects whose ``bbox`` is 4 finite numbers, valid Unicode; reasons in ``CACHE_LINE_REASONS``). A bad line is
  counted and logged and its image counts as not cached (detected again; under ``--from-cache`` reported missing);
  a line for an image already indexed is counted as a duplicate (a success wins over an error, a later line over an
  earlier one of the same kind). Reading never raises on a line's content;
* **detector failures** (undecodable image, any exception, output that would not pass :func:`parse_cache_line`) are
  cached as ``error`` lines and their samples rejected as ``detection_failed``; the rest is written;
* **outputs** (``groundwork.outputs``): checked before any input is read (``--out`` equal to an input, naming a folder or
  unwritable is refused), ``--out`` locked (a second run on the same ``--out`` fails at once), every file written
  atomically under a unique temporary name, the report last; cache files are appended whole lines, flushed, under a
  lock per file (two writers never interleave one cache file; a torn last line of a killed run is cut first).
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import json
import logging
import math
import os
import re
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import IO, Any

from groundwork import validate
from groundwork.argtypes import number, with_range
from groundwork.outputs import LineAppender, OutputLock, atomic_writer, check_outputs, write_json
from groundwork.records import strict_loads
from gui_grounding.data.detectors import Detector, build_detector
from gui_grounding.data.schema import Sample, load_samples
from gui_grounding.models.frames import Box, box_iou

logger = logging.getLogger(__name__)

DEFAULT_IOU_THRESHOLD = 0.1  # GTA1 preprocessing/filter.py --iou_threshold 0.1, keep when IoU >= threshold
REJECT_REASONS = {
    "low_iou": "best IoU between the annotated box(es) and any detection is under the threshold",
    "detection_failed": "the detector failed on the screenshot (undecodable image, detector error or bad detector "
    "output, recorded as an error in the cache line); the box could not be checked",
    "invalid_record": "not a valid sample (schema reason in invalid_reason), so never cleaned",
}
OUTPUT_KEYS = ("best_iou", "best_match", "reason", "error", "invalid_reason")  # fields clean adds to records
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
HIST_BINS = 50  # best-IoU histogram: 50 bins of width 0.02 over [0, 1]
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


def _shard_arg(shard: Any) -> tuple[int, int] | None:
    """``shard`` as given to :func:`clean` (None, ``"I/N"`` or ``(I, N)``) checked by the same rule."""
    if shard is None:
        return None
    if isinstance(shard, str):
        return parse_shard(shard)
    if (
        isinstance(shard, (tuple, list))
        and len(shard) == 2
        and all(type(v) is int for v in shard)
        and 0 <= shard[0] < shard[1] <= MAX_SHARDS
    ):
        return int(shard[0]), int(shard[1])
    raise ValueError(f"--shard must be I/N with 0 <= I < N <= {MAX_SHARDS} (0-based), got {validate.short_repr(shard)}")


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


def _check_threshold(value: Any) -> float:
    if type(value) not in (int, float) or not math.isfinite(value) or not 0.0 <= value <= 1.0:
        raise ValueError(f"--iou-threshold must be a number >= 0 and <= 1, got {validate.short_repr(value)}")
    return float(value)


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
# best IoU


class ImageDetections:
    """The detections of one image with a fast candidate test; the IoU itself is :func:`box_iou`."""

    def __init__(self, detections: list[dict]):
        import numpy as np

        self.detections = detections
        self.boxes = np.asarray([d["bbox"] for d in detections], dtype=float).reshape(-1, 4)

    def best(self, boxes: list[Box]) -> tuple[float, dict | None]:
        """``(best IoU, best detection)`` over the sample's ``boxes`` and all detections; ``(0.0, None)`` if none
        overlap. Boxes in displayed-image pixels."""
        import numpy as np

        best_iou, best_det = 0.0, None
        for box in boxes:
            b = self.boxes  # candidates: detections that intersect the box (the others have IoU 0)
            hit = (b[:, 0] < box[2]) & (b[:, 2] > box[0]) & (b[:, 1] < box[3]) & (b[:, 3] > box[1])
            overlapping = np.flatnonzero(hit)
            for k in overlapping:
                iou = box_iou(box, tuple(b[k]))
                if iou > best_iou:
                    best_iou, best_det = iou, self.detections[k]
        return best_iou, best_det


# --------------------------------------------------------------------------------------------------------------------
# the run


def output_paths(out: str) -> dict[str, str]:
    """Paths written for ``--out OUT.jsonl``: kept, rejected, report, histogram, default cache dir."""
    stem = out[: -len(".jsonl")] if out.endswith(".jsonl") else out
    return {
        "kept": out,
        "rejected": f"{stem}.rejected.jsonl",
        "report": f"{stem}.report.json",
        "hist": f"{stem}.iou_hist.png",
        "cache_dir": f"{stem}.detections",
    }


def _fill_cache(
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


def _missing_shards(missing: list[str], images: list[str], cache_dir: str, names: list[str]) -> str:
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


def _new_folders(files: list[str], folders: list[str]) -> list[str]:
    """Folders that do not exist yet on the way to ``files`` (their folders) and ``folders`` (themselves), deepest
    first: the ones a run creates, removed again when it leaves them empty."""
    new: set[str] = set()
    for folder in [*(os.path.dirname(os.path.abspath(f)) for f in files), *map(os.path.abspath, folders)]:
        while folder and not os.path.exists(folder):
            new.add(folder)
            parent = os.path.dirname(folder)
            if parent == folder:
                break
            folder = parent
    return sorted(new, key=lambda p: (-p.count(os.sep), p))


def _remove_empty(folders: list[str]) -> None:
    for folder in folders:
        with contextlib.suppress(OSError, ValueError):
            os.rmdir(folder)  # only an empty folder goes


def clean(
    inputs: list[str],
    out: str,
    detector: str = "ocr",
    iou_threshold: float = DEFAULT_IOU_THRESHOLD,
    *,
    image_folders: list[str] | None = None,
    cache_dir: str | None = None,
    shard: str | tuple[int, int] | None = None,
    from_cache: bool = False,
    retry_failed: bool = False,
    detector_options: dict[str, dict] | None = None,
    strict: bool = False,
    progress: bool = True,
    plot: bool = True,
) -> dict:
    """Clean grounding samples by detector IoU (GTA1): write kept/rejected JSONL, a histogram and a report.

    Args:
        inputs: data files (canonical, GTA1 or VLM-R1 records, JSON or JSONL; read by :func:`load_samples`).
        out: ``OUT.jsonl`` for kept samples; ``OUT.rejected.jsonl``, ``OUT.report.json``, ``OUT.iou_hist.png`` and
            the default cache dir ``OUT.detections/`` sit next to it (:func:`output_paths`). Image paths in the
            written records are relative to ``OUT``'s folder, so ``load_samples([OUT])`` finds the images.
        detector: detector spec, e.g. ``"ocr"``, ``"classic"``, ``"ocr+classic"`` (``detectors.build_detector``).
        iou_threshold: keep a sample when its best IoU is ``>=`` this (GTA1: 0.1); a finite number in [0, 1].
        image_folders: one folder per input that image paths are relative to (default: each file's folder).
        cache_dir: detection cache folder (default ``OUT.detections``).
        shard: ``"I/N"`` or ``(I, N)``: only fill the cache for that slice of the sorted unique images; no output
            (so no lock on ``out``: the shards of one job run at once).
        from_cache: detect nothing; raise :class:`CacheIncompleteError` naming the incomplete shards if an image has
            no (valid) cached detections.
        retry_failed: detect again the images whose cached line is an error.
        detector_options: keyword arguments per detector name (``build_detector``).
        strict: stop at the first invalid record instead of rejecting it as ``invalid_record``.
        progress: show a progress bar per image.
        plot: write the histogram PNG.

    Outputs are checked before any input is read (``groundwork.outputs.check_outputs``), ``out`` is locked for the run,
    every file is written atomically and the report last (an older report is removed before the first new file is
    written, so a report always describes the files beside it). Folders this run created are removed again when it
    leaves them empty (a failed run leaves nothing behind).

    Returns:
        The report dict (also written to ``OUT.report.json``); for a shard run, the shard's cache counts.

    Raises:
        CacheIncompleteError: ``from_cache`` with images missing from the cache.
        OutputError: an output that must not or cannot be written, or another run writing the same ``out`` or
            cache file.
        ImportError, FileNotFoundError: a detector's backend or weights are missing (before any image is processed).
        ValueError: bad ``shard``, ``iou_threshold`` or detector spec, or ``from_cache`` with ``shard`` or
            ``retry_failed``.
    """
    shard = _shard_arg(shard)
    iou_threshold = _check_threshold(iou_threshold)
    if from_cache and (shard is not None or retry_failed):
        raise ValueError("--from-cache detects nothing, --shard and --retry-failed detect: use one or the other")
    inputs, out = list(inputs), os.fspath(out)
    paths = output_paths(out)
    cache_dir = cache_dir or paths["cache_dir"]
    det = build_detector(detector, detector_options)
    caches = {c.name: DetectionCache(cache_dir, c) for c in det.components}
    appended = [] if from_cache else [c.path(shard) for c in caches.values()]
    files = [] if shard is not None else [paths[k] for k in ("kept", "rejected", "report", *(["hist"] if plot else []))]
    created = _new_folders([*files, *appended], [] if from_cache else [cache_dir])
    try:
        # before any input is read: no output may be an input (nor a cache file), nor a folder, nor unwritable
        cache_files = [c.path(s) for c in caches.values() for s in (None, shard)]
        check_outputs(files=files, inputs=[*inputs, cache_dir, *cache_files], what="--out")
        if not from_cache:
            check_outputs(folders=[cache_dir], inputs=inputs, what="--cache-dir")
            check_outputs(files=appended, inputs=inputs, what="--cache-dir")
        with OutputLock(out) if shard is None else contextlib.nullcontext():
            return _clean(
                inputs,
                out,
                det,
                caches,
                iou_threshold,
                image_folders=image_folders,
                cache_dir=cache_dir,
                shard=shard,
                from_cache=from_cache,
                retry_failed=retry_failed,
                strict=strict,
                progress=progress,
                plot=plot,
                paths=paths,
            )
    finally:
        _remove_empty(created)


def _clean(
    inputs,
    out,
    det,
    caches,
    iou_threshold,
    *,
    image_folders,
    cache_dir,
    shard,
    from_cache,
    retry_failed,
    strict,
    progress,
    plot,
    paths,
) -> dict:
    samples, load_report = load_samples(inputs, image_folders, strict=strict, verify_images=False)
    images = sorted({os.path.abspath(s.image_path) for s in samples})
    for c in caches.values():
        c.load()
    mine = images if shard is None else shard_images(images, *shard)
    try:
        counts = _fill_cache(
            det, caches, mine, shard, from_cache=from_cache, retry_failed=retry_failed, progress=progress
        )
    except CacheIncompleteError as err:
        missing = [im for im in images if any(im not in c.index for c in caches.values())]
        raise CacheIncompleteError(f"{err}; {_missing_shards(missing, images, cache_dir, list(caches))}") from None
    failed_images = {im for im in mine if any(c.index[im].error is not None for c in caches.values())}
    counts["failed"] = len(failed_images)
    if shard is not None:
        summary = {"shard": f"{shard[0]}/{shard[1]}", "detector": det.name, "cache_dir": cache_dir, **counts}
        print(
            f"shard {shard[0]}/{shard[1]} of {len(images)} images: {counts['images']} images, detected now "
            f"{counts['detected_now']}, already cached {counts['cached']}, failed {counts['failed']} -> {cache_dir}"
        )
        return summary

    kept, rejected = _filter(samples, caches, iou_threshold, out)
    for ref, reason, message in load_report.rejects:
        rejected.append(
            {"ref": ref, "reason": "invalid_record", "invalid_reason": reason, "message": message, "best_iou": None}
        )
    report = _report(inputs, det, iou_threshold, samples, kept, rejected, caches, images, counts, paths, cache_dir)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(paths["report"])  # an older report must not describe the new files while they are written
    _write_jsonl(paths["kept"], kept)
    _write_jsonl(paths["rejected"], rejected)
    if plot:
        plot_iou_histogram(
            [r["best_iou"] for r in kept + rejected if r.get("best_iou") is not None],
            iou_threshold,
            paths["hist"],
            title=f"best IoU vs {det.name} detections",
        )
    write_json(paths["report"], report)  # last: a report means every file beside it is complete
    print(format_report(report))
    return report


def _filter(samples: list[Sample], caches: dict[str, DetectionCache], iou_threshold: float, out: str):
    """``(kept, rejected)`` records in input order. The status is decided here, never read from a record's own
    fields: the ``OUTPUT_KEYS`` a record brings are dropped before this run's values are set."""
    out_dir = os.path.dirname(os.path.abspath(out))
    by_image: dict[str, list[Sample]] = defaultdict(list)
    for s in samples:
        by_image[os.path.abspath(s.image_path)].append(s)
    results: dict[int, tuple[bool, dict]] = {}
    for image, group in by_image.items():
        errors, found = [], []
        for name, c in caches.items():
            entry = c.index[image]
            if entry.error is not None:
                errors.append(f"{name}: {entry.error}")
                continue
            try:
                found.extend(c.read(image)["detections"])
            except CacheLineError as err:
                errors.append(f"{name}: cache line {err}")
        dets = ImageDetections([] if errors else found)
        for s in group:
            rec = s.to_record(image_root=out_dir)
            for key in OUTPUT_KEYS:
                rec.pop(key, None)
            if errors:
                rec.update(best_iou=None, reason="detection_failed", error="; ".join(errors))
                results[id(s)] = (False, rec)
                continue
            best, match = dets.best(s.boxes)
            rec["best_iou"] = round(best, 6)
            rec["best_match"] = (
                None
                if match is None
                else {"bbox": match["bbox"], "type": match.get("type"), "source": match.get("source")}
            )
            if best < iou_threshold:
                rec["reason"] = "low_iou"
            results[id(s)] = (best >= iou_threshold, rec)
    ordered = [results[id(s)] for s in samples]  # input order
    return [r for ok, r in ordered if ok], [r for ok, r in ordered if not ok]


def _write_jsonl(path: str, records: list[dict]) -> None:
    """Records as strict JSON lines, atomically (unique temporary name, renamed when complete)."""
    with atomic_writer(path) as f:
        for rec in records:
            f.write(json.dumps(rec, ensure_ascii=False, allow_nan=False) + "\n")


# --------------------------------------------------------------------------------------------------------------------
# report, table, histogram


def _source_key(rec: dict) -> str:
    """A record's ``source`` as a table row name: a non-empty string as is, absent/null/empty as ``unknown``, any
    other JSON value as its short repr (so a list or a number never breaks the table)."""
    src = rec.get("source")
    if isinstance(src, str) and src:
        return src
    return "unknown" if src is None or src == "" else validate.short_repr(src, 40)


def _report(inputs, det, iou_threshold, samples, kept, rejected, caches, images, counts, paths, cache_dir) -> dict:
    import numpy as np

    rows: dict[str, Counter] = defaultdict(Counter)
    for rec in kept + [r for r in rejected if r["reason"] != "invalid_record"]:
        row = rows[_source_key(rec)]
        row["samples"] += 1
        row[rec.get("reason", "kept")] += 1
    total = Counter()
    for row in rows.values():
        total.update(row)

    def summarise(row: Counter) -> dict:
        n = row["samples"]
        removed = row["low_iou"] + row["detection_failed"]
        return {
            "samples": n,
            "kept": row["kept"],
            "low_iou": row["low_iou"],
            "detection_failed": row["detection_failed"],
            "filtered_fraction": removed / n if n else 0.0,
        }

    ious = [r["best_iou"] for r in kept + rejected if r.get("best_iou") is not None]
    hist, edges = np.histogram(ious, bins=HIST_BINS, range=(0.0, 1.0))
    invalid = Counter(r["invalid_reason"] for r in rejected if r["reason"] == "invalid_record")
    seconds = {}
    for name, c in caches.items():
        times = [c.index[im].seconds for im in images if im in c.index and c.index[im].seconds is not None]
        seconds[name] = round(sum(times) / len(times), 4) if times else None
    return {
        "inputs": list(inputs),
        "detector": det.name,
        "detector_config": {c.name: c.detector.config() for c in caches.values()},
        "iou_threshold": iou_threshold,
        "rule": "keep when best IoU >= threshold (GTA1 preprocessing/filter.py)",
        "records": len(samples) + sum(invalid.values()),
        "samples": len(samples),
        "kept": len(kept),
        "rejected": {reason: sum(1 for r in rejected if r["reason"] == reason) for reason in REJECT_REASONS},
        "invalid_records": dict(sorted(invalid.items())),
        "overall": summarise(total),
        "per_source": {src: summarise(row) for src, row in sorted(rows.items())},
        "images": {
            "total": len(images),
            "detected_now": counts["detected_now"],
            "cached": counts["cached"],
            "failed": counts["failed"],
        },
        "seconds_per_image": seconds,
        "cache_dir": cache_dir,
        "cache_lines": {name: c.stats() for name, c in caches.items()},
        "iou_histogram": {"bin_edges": [round(float(e), 4) for e in edges], "counts": [int(c) for c in hist]},
        "outputs": {k: v for k, v in paths.items() if k != "cache_dir"},
    }


def format_report(report: dict) -> str:
    """The printed summary: one row per ``source`` and an ``ALL`` row, filtered fraction in percent."""
    lines = [
        f"detector-IoU cleaning with {report['detector']}: keep when best IoU >= {report['iou_threshold']} "
        f"(GTA1 filter)",
        f"{'source':<24} {'samples':>9} {'kept':>9} {'low_iou':>9} {'det_failed':>10} {'filtered':>9}",
    ]
    rows = [*report["per_source"].items(), ("ALL", report["overall"])]
    for src, r in rows:
        lines.append(
            f"{src:<24} {r['samples']:>9} {r['kept']:>9} {r['low_iou']:>9} {r['detection_failed']:>10} "
            f"{100 * r['filtered_fraction']:>8.2f}%"
        )
    if report["invalid_records"]:
        detail = ", ".join(f"{k} {v}" for k, v in report["invalid_records"].items())
        lines.append(f"invalid records (rejected as invalid_record, not cleaned): {detail}")
    im = report["images"]
    secs = ", ".join(f"{k} {v:.3f}" if v is not None else f"{k} -" for k, v in report["seconds_per_image"].items())
    lines.append(
        f"images: {im['total']} (detected now {im['detected_now']}, from cache {im['cached']}, failed "
        f"{im['failed']}); seconds per image: {secs}"
    )
    bad = Counter()
    for stats in report.get("cache_lines", {}).values():
        bad.update(stats["bad_lines"])
    if bad:
        detail = ", ".join(f"{k} {v}" for k, v in sorted(bad.items()))
        lines.append(f"bad cache lines ignored (their images detected again): {detail}")
    o = report["outputs"]
    lines.append(
        f"wrote {o['kept']} ({report['kept']}), {o['rejected']} ({sum(report['rejected'].values())}), "
        f"{o['report']}, {o['hist']}"
    )
    return "\n".join(lines)


def plot_iou_histogram(ious: list[float], threshold: float, out_png: str, title: str = "best IoU") -> str:
    """Histogram PNG of best IoUs (``HIST_BINS`` bins over [0, 1]) with the threshold as a vertical line, written
    atomically."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    counts, edges = np.histogram(ious, bins=HIST_BINS, range=(0.0, 1.0))
    below = sum(1 for v in ious if v < threshold)
    fig, ax = plt.subplots(figsize=(7, 4))
    try:
        ax.bar(edges[:-1], counts, width=np.diff(edges), align="edge", color="#4878cf", edgecolor="white", lw=0.5)
        ax.axvline(threshold, color="#d62728", ls="--", lw=1.5, label=f"threshold {threshold:g}")
        ax.set_xlim(0, 1)
        ax.set_xlabel("best IoU of the annotated box with any detection")
        ax.set_ylabel("samples")
        ax.set_title(f"{title}: {len(ious)} samples, {below} under threshold", fontsize=10)
        ax.legend()
        ax.grid(alpha=0.3)
        fig.tight_layout()
        with atomic_writer(out_png, "wb") as f:
            fig.savefig(f, format="png", dpi=100)
    finally:
        plt.close(fig)
    return out_png


# --------------------------------------------------------------------------------------------------------------------
# command line

IOU_THRESHOLD_ARG = number(min=0, max=1)
SCORE_ARG = number(min=0, max=1)


def _detector_options(args: argparse.Namespace) -> dict[str, dict]:
    return {
        "ocr": {"min_text_score": args.ocr_min_text_score},
        "omniparser": {"weights": args.omniparser_weights, "box_threshold": args.omniparser_box_threshold},
    }


def _run_cli(args: argparse.Namespace) -> None:
    try:
        clean(
            args.inputs,
            args.out,
            args.detector,
            args.iou_threshold,
            image_folders=args.image_folders,
            cache_dir=args.cache_dir,
            shard=args.shard,
            from_cache=args.from_cache,
            retry_failed=args.retry_failed,
            detector_options=_detector_options(args),
            strict=args.strict,
        )
    except (CacheIncompleteError, ImportError, OSError, ValueError) as err:  # OSError: OutputError, FileNotFoundError
        raise SystemExit(f"gui-grounding clean: error: {_one_line(err)}") from None


def _one_line(err: BaseException) -> str:
    text = err.strerror if isinstance(err, OSError) and err.strerror and not err.filename else str(err)
    return " ".join(str(text).split())


def register_cli(subparsers) -> None:
    """Add the ``clean`` subcommand to an argparse ``subparsers`` object (from ``add_subparsers()``).

    The parsed namespace carries ``func``: call ``args.func(args)`` to run the cleaning and print the table.
    """
    p = subparsers.add_parser(
        "clean",
        help="drop samples whose box matches no detected UI element (GTA1 detector-IoU filter)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="GTA1's lightweight cleaning: detect the UI elements of each screenshot, take the best IoU "
        "between the annotated box (any of a sample's boxes) and any detection, keep the sample when it is >= "
        "--iou-threshold. Writes OUT.jsonl (kept, canonical records + best_iou), OUT.rejected.jsonl (records + "
        "best_iou + reason: low_iou, detection_failed, invalid_record), OUT.report.json (filtered fraction per "
        "source) and OUT.iou_hist.png. Detections are cached per image (resumable, shardable).",
        epilog="examples:\n"
        "  gui-grounding clean data/train.jsonl --detector ocr+classic --out data/clean/train.jsonl\n"
        "  # SLURM array (sbatch --array=0-7): each task fills its part of the cache, then one merge run filters\n"
        "  gui-grounding clean data/aria.jsonl --detector omniparser --omniparser-weights w/icon_detect/model.pt \\\n"
        "      --out clean/aria.jsonl --shard $SLURM_ARRAY_TASK_ID/8\n"
        "  gui-grounding clean data/aria.jsonl --detector omniparser --out clean/aria.jsonl --from-cache\n\n"
        "detectors: ocr (RapidOCR PP-OCRv4 text lines + words, onnxruntime, models in the wheel), classic (OpenCV "
        "edges/outlines/colour regions, no weights), omniparser (OmniParser YOLO icons + ocr; needs ultralytics and "
        "weights); join with + for their union.",
    )
    p.add_argument(
        "inputs",
        nargs="+",
        metavar="IN.jsonl",
        help="data files: canonical, GTA1 or VLM-R1 records (JSONL, or a .json list)",
    )
    p.add_argument(
        "--out",
        required=True,
        metavar="OUT.jsonl",
        help="kept samples; OUT.rejected.jsonl, OUT.report.json, OUT.iou_hist.png and the default cache "
        "dir OUT.detections/ are written next to it; image paths are written relative to its folder",
    )
    p.add_argument(
        "--detector",
        default="ocr",
        help="ocr, classic, omniparser, or a union joined with + such as ocr+classic (default: ocr)",
    )
    p.add_argument(
        "--iou-threshold",
        type=IOU_THRESHOLD_ARG,
        default=DEFAULT_IOU_THRESHOLD,
        help=with_range("keep a sample when its best IoU is >= this (default 0.1, GTA1)", IOU_THRESHOLD_ARG),
    )
    p.add_argument(
        "--image-folders",
        nargs="+",
        default=None,
        metavar="DIR",
        help="one folder per input that its image paths are relative to (default: each file's folder)",
    )
    p.add_argument(
        "--cache-dir",
        default=None,
        help="detection cache folder, one JSONL file per detector (and shard); default OUT.detections",
    )
    p.add_argument(
        "--shard",
        default=None,
        metavar="I/N",
        help="0-based shard I of N of the sorted unique images (e.g. $SLURM_ARRAY_TASK_ID/8): only fill the cache, "
        f"write no output; finish with a run without --shard (or with --from-cache) (integers 0 <= I < N <= "
        f"{MAX_SHARDS})",
    )
    p.add_argument(
        "--from-cache",
        action="store_true",
        help="detect nothing: merge all cache files and filter; stop naming the incomplete shards if an "
        "image has no cached detections",
    )
    p.add_argument(
        "--retry-failed",
        action="store_true",
        help="detect again the images whose cached line is an error (default: errors are final and their "
        "samples are rejected as detection_failed)",
    )
    p.add_argument(
        "--ocr-min-text-score",
        type=SCORE_ARG,
        default=None,
        help=with_range(
            "also run text recognition and keep text lines with confidence >= this (GTA1/OmniParser: 0.9; ~15x "
            "slower, and drops true boxes of short/symbol text); default: detection only",
            SCORE_ARG,
        ),
    )
    p.add_argument(
        "--omniparser-weights",
        default=None,
        metavar="PATH",
        help="omniparser detector: OmniParser-v2.0 YOLO weights, .../icon_detect/model.pt (not needed "
        "with --from-cache; the cache does not record which weights made it: use a new --cache-dir for "
        "other weights)",
    )
    p.add_argument(
        "--omniparser-box-threshold",
        type=SCORE_ARG,
        default=0.05,
        help=with_range(
            "omniparser detector: YOLO confidence threshold (default 0.05, GTA1 run.py BOX_TRESHOLD)", SCORE_ARG
        ),
    )
    p.add_argument(
        "--strict",
        action="store_true",
        help="stop at the first invalid record instead of rejecting it as invalid_record",
    )
    p.set_defaults(func=_run_cli)


if __name__ == "__main__":  # python -m gui_grounding.data.clean IN.jsonl --out OUT.jsonl (same flags as `clean`)
    import sys

    _parser = argparse.ArgumentParser(prog="python -m gui_grounding.data.clean")
    register_cli(_parser.add_subparsers(dest="command", required=True))
    _args = _parser.parse_args(["clean", *sys.argv[1:]])
    _args.func(_args)
