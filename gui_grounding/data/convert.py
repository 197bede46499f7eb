"""``gui-grounding convert``: public grounding datasets -> canonical JSONL, streamed, validated, nothing lost.

    gui-grounding convert --format gta1 data/grounding_dataset/*.json --image-root data/grounding_dataset \\
        --out data/gta1.jsonl --workers 8

Pipeline, record by record (``gui_grounding.data.formats`` has one reader per format, and each reader's docstring
cites the published description of its format):

1. **read** the inputs incrementally with ``groundwork.records.iter_records`` (a JSON list element by element, so a 4 GB
   file never sits in memory; JSONL line by line), parquet in row batches (``pyarrow``);
2. the format's reader turns each record into targets (instruction, image, box(es) in the format's own convention);
3. the **image size** comes from the image header (``imagesize``, PIL as fallback), read once per image path and
   cached; with ``--workers N`` the header reads (and the writing of images embedded in parquet rows) of a chunk of
   records run on N threads, while samples are still written in input order, so the output does not depend on N;
4. boxes are converted to **original-image pixels** (``gui_grounding.models.frames``) and validated by the one clipping rule
   (``gui_grounding.data.schema.clip_box``): a few pixels of overshoot are clipped and counted, more is rejected;
5. exact **duplicates** (same image, instruction and box(es) as an earlier sample of this run) are rejected.

Outputs, for ``--out OUT.jsonl``: ``OUT.jsonl`` (canonical records, ``gui_grounding.data.schema.Sample.to_record``, image
paths relative to ``--image-root``, with ``source``, ``platform``, ``ui_type`` where known and
``image_width``/``image_height``), ``OUT.rejects.jsonl`` (one line per rejected target: ``{"ref", "reason",
"message", "record"}``, ``reason`` a key of ``gui_grounding.data.schema.REASONS``) and ``OUT.summary.json`` (counts per
reason, clipped count, records/s, elapsed). Every target becomes a sample or a reject line: ``targets == samples +
rejected``. Files are written under temporary names and renamed at the end, so a failed run leaves no partial output.
"""

from __future__ import annotations

import argparse
import hashlib
import logging
import math
import os
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from groundwork import validate
from groundwork.records import RecordError, iter_records
from gui_grounding.data.formats import DIRECT_FORMATS, FORMATS, PLATFORMS, UNITS, EmbeddedImage, ReadContext, Target
from gui_grounding.data.schema import (
    CANONICAL_KEYS,
    CLIP_TOLERANCE_PX,
    CLIP_TOLERANCE_RATIO,
    FIELD_ERRORS,
    Sample,
    SampleError,
    clip_box,
    image_checker,
    record_to_sample,
    strip_image_tags,
)
from gui_grounding.models.frames import Box, box_from_norm1000

CHUNK_TARGETS = 2048  # targets resolved together (one batch of header reads on the worker threads)
CHUNK_BYTES = 64 << 20  # ... or fewer, when their embedded images add up to this many bytes
MAX_REJECT_RECORD_CHARS = 20_000  # a rejected record longer than this (as JSON) is stored as a truncated string
PARQUET_BATCH_ROWS = 256

logger = logging.getLogger(__name__)


# --------------------------------------------------------------------------------------------------------------------
# reading inputs


def iter_input(path: str) -> Iterator[tuple[str, int, Any]]:
    """Yield ``(ref, index, record_or_error)`` for each record of one input file, reading it incrementally.

    Two front ends, one per container: ``.parquet`` -> row batches (pyarrow), ref ``file:[row]``; every other file
    -> ``groundwork.records.iter_records``, the one JSON/JSONL reader (whatever the name says: a JSON list, streamed element
    by element with ``file:[index]`` refs, so a multi-GB list never sits in memory; JSONL with ``file:line`` refs; one
    object; compressed files, archives, UTF-16 and what is not a regular file named as such).

    A record that is not a JSON object, an unparseable record (a JSON list element or a line) and an object holding a
    key twice are yielded as a :class:`groundwork.records.RecordError` and the records after it are read; a parquet file
    that breaks part-way is one error naming the row, and the rest of that file is not read.
    """
    if path.endswith(".parquet"):
        yield from _iter_parquet(path)
        return
    yield from iter_records(path)


def _iter_parquet(path: str) -> Iterator[tuple[str, int, Any]]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    index = 0
    try:
        for batch in pq.ParquetFile(path).iter_batches(batch_size=PARQUET_BATCH_ROWS):
            for row in batch.to_pylist():
                yield f"{path}:[{index}]", index, row
                index += 1
    except (OSError, pa.ArrowException) as err:
        ref = f"{path}:[{index}]"
        yield (
            ref,
            index,
            RecordError(
                ref,
                f"cannot read parquet at or after row {index} (the rest of the file is "
                f"not read): {type(err).__name__}: {err}",
            ),
        )


# --------------------------------------------------------------------------------------------------------------------
# images


def probe_image(
    path: str, embedded: bytes | None = None, checker: validate.ImageChecker | None = None
) -> tuple[int, int] | tuple[str, str]:
    """``(width, height)`` of the displayed frame (EXIF orientation applied), or ``(reason, message)``.

    The image is checked by ``checker`` (``groundwork.validate.ImageChecker``; default: decode, 64 Mpx limit), once per
    image: ``missing_image``, ``not_a_file`` (not a regular non-empty file), ``image_too_large`` (the header declares
    more pixels than the limit; nothing is decoded) or ``unreadable_image`` (under ``decode``: truncated or corrupt
    pixel data). ``embedded`` bytes are first written to ``path`` unless a file is already there (never overwritten;
    written under a temporary name, then renamed; embedded names carry the bytes' content hash).

    Raises:
        OSError: the embedded image cannot be written (e.g. a read-only image root).
    """
    if embedded is not None and not os.path.isfile(path):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        from groundwork.outputs import write_bytes

        write_bytes(path, embedded)  # a unique temporary name, then renamed
    try:
        return (checker or image_checker()).check(path)
    except validate.Invalid as err:
        return err.reason, err.message


def _probe_or_reason(path: str, embedded: bytes | None, checker) -> tuple[int, int] | tuple[str, str]:
    """:func:`probe_image`, with an embedded image that cannot be written (read-only root, disk full, a name that is
    a folder) as the per-record reason ``image_write_failed`` instead of an error that ends the run."""
    try:
        return probe_image(path, embedded, checker)
    except OSError as err:
        return "image_write_failed", f"cannot write the embedded image to {path}: {err.strerror or err}"


# --------------------------------------------------------------------------------------------------------------------
# report


@dataclass
class ConvertReport:
    """Counts of one conversion. ``targets`` (instruction/box pairs found; a record that cannot be read counts as
    one) == ``samples + rejected``; ``reasons`` counts rejects per reason code, ``first_refs`` names the first reject
    of each reason; ``clipped`` counts written samples whose box(es) were clipped to the image. ``max_image_pixels``
    is the decode guard the run used (summary key ``max_image_pixels``; ``None``: no limit), not the model's
    smart_resize ``max_pixels``."""

    format: str
    inputs: list[str]
    out: str
    rejects_path: str
    summary_path: str
    workers: int = 1
    clip_tolerance_px: float = CLIP_TOLERANCE_PX
    verify_images: str = "decode"
    max_image_pixels: int | None = validate.DECODE_PIXEL_LIMIT
    records: int = 0
    targets: int = 0
    samples: int = 0
    clipped: int = 0
    absolute_paths: int = 0  # written samples whose image path is absolute (accepted, as upstream)
    reasons: Counter = field(default_factory=Counter)
    first_refs: dict[str, str] = field(default_factory=dict)
    shadowed: Counter = field(default_factory=Counter)  # source keys left out because a converted field has the name
    elapsed_s: float = 0.0

    @property
    def rejected(self) -> int:
        """Number of reject lines written."""
        return sum(self.reasons.values())

    def to_dict(self) -> dict:
        """The ``OUT.summary.json`` content (elapsed in seconds, rates per second)."""
        rate = self.records / self.elapsed_s if self.elapsed_s > 0 else 0.0
        return {
            "format": self.format,
            "inputs": self.inputs,
            "out": self.out,
            "rejects": self.rejects_path,
            "records": self.records,
            "targets": self.targets,
            "samples": self.samples,
            "rejected": self.rejected,
            "clipped": self.clipped,
            "reasons": dict(sorted(self.reasons.items())),
            "first_reject_refs": dict(sorted(self.first_refs.items())),
            "workers": self.workers,
            "clip_tolerance_px": self.clip_tolerance_px,
            "absolute_image_paths": self.absolute_paths,
            "verify_images": self.verify_images,
            "max_image_pixels": self.max_image_pixels,
            "elapsed_s": round(self.elapsed_s, 3),
            "records_per_s": round(rate, 1),
            "shadowed_source_keys": dict(sorted(self.shadowed.items())),
            "samples_per_s": round(self.samples / self.elapsed_s, 1) if self.elapsed_s > 0 else 0.0,
        }

    def table(self) -> str:
        """Readable summary: totals, then one row per reject reason with its count and first ref."""
        d = self.to_dict()
        lines = [
            f"convert --format {self.format}: {len(self.inputs)} input file(s) -> {self.out}",
            f"records read: {self.records}   targets: {self.targets}   samples written: {self.samples}   "
            f"rejected: {self.rejected}   clipped (kept): {self.clipped}   absolute image paths (kept): "
            f"{self.absolute_paths}",
        ]
        if self.shadowed:
            lines.append(
                "  source keys left out (a converted field has the name): "
                + ", ".join(f"{k} x{n}" for k, n in sorted(self.shadowed.items()))
            )
        if self.reasons:
            lines.append(f"  {'reason':<20} {'count':>8}   first")
            for reason, n in sorted(self.reasons.items()):
                lines.append(f"  {reason:<20} {n:>8}   {self.first_refs[reason]}")
        lines.append(
            f"{self.records} records in {d['elapsed_s']:.2f} s ({d['records_per_s']:.0f} records/s, "
            f"{self.workers} worker(s)); rejects: {self.rejects_path}; summary: {self.summary_path}"
        )
        return "\n".join(lines)


# --------------------------------------------------------------------------------------------------------------------
# the engine


def output_paths(out: str) -> tuple[str, str]:
    """``(rejects_path, summary_path)`` for ``--out``: ``X.jsonl`` -> ``X.rejects.jsonl``, ``X.summary.json``."""
    stem = out[: -len(".jsonl")] if out.endswith(".jsonl") else out
    return f"{stem}.rejects.jsonl", f"{stem}.summary.json"


def _jsonable(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray)):
        return f"<{len(value)} bytes>"
    if isinstance(value, float) and not math.isfinite(value):  # strict JSON out: NaN / inf as their names
        return repr(value)
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value


def _reject_record(raw: Any) -> Any:
    """The rejected record as stored in a reject line: itself, bytes replaced by ``"<N bytes>"``; a truncated JSON
    string when longer than ``MAX_REJECT_RECORD_CHARS``."""
    try:
        value = _jsonable(raw)
    except RecursionError:
        value = f"<a record nested too deeply to store: {type(raw).__name__}>"
    text = validate.dumps(value, ensure_ascii=False, default=repr)
    if len(text) <= MAX_REJECT_RECORD_CHARS:
        return value
    return f"{text[:2000]}... (truncated, {len(text)} chars)"


class _Converter:
    """One conversion run (see :func:`convert`)."""

    def __init__(
        self,
        fmt: str,
        image_root: str,
        report: ConvertReport,
        *,
        strict: bool,
        source: str | None,
        platform: str | None,
        clip_tolerance_px: float,
        box_unit: str | None,
        keep_duplicates: bool,
        pool: ThreadPoolExecutor | None,
        out_f,
        rej_f,
        verify_images: str = "decode",
        max_image_pixels: int | None = validate.DECODE_PIXEL_LIMIT,
        limits: validate.ImageLimits | None = None,
        parquet: bool = False,
    ):
        self.spec, self.fmt, self.image_root, self.report = FORMATS[fmt], fmt, image_root, report
        self.strict, self.source, self.platform = strict, source, platform
        self.tol, self.box_unit, self.keep_duplicates = clip_tolerance_px, box_unit, keep_duplicates
        self.pool, self.out_f, self.rej_f = pool, out_f, rej_f
        self.workers = report.workers
        self.verify, self.max_image_pixels = verify_images, max_image_pixels
        self.checker = image_checker(verify_images, max_image_pixels, limits)  # one check per image (path, size, mtime)
        self.limits, self.parquet = limits, parquet
        self.ids = validate.IdRegistry(keep_refs=False)  # the identity rule: every written sample has its own id
        self.sizes: dict[str, tuple] = {}  # image path -> (w, h) or (reason, message)
        self.paths: dict[str, str | validate.Invalid] = {}  # image name in a record -> resolved path, or why not
        self.rels: dict[str, str] = {}  # resolved path -> path relative to the image root (written in the output)
        # dedup: 64-bit digest of (image, instruction, boxes) -> 1-based output line of the first such sample; about
        # 100 bytes per sample (a collision among 10 million samples has a probability of ~3e-6)
        self.seen: dict[int, int] = {}
        self.pending: list[tuple[ReadContext, Target]] = []
        self.pending_bytes = 0

    # -- intake

    def add_record(self, ctx: ReadContext, item: Any) -> None:
        self.report.records += 1
        try:
            if isinstance(item, RecordError):
                raise SampleError(item.ref, item.reason, item.message)
            try:
                targets = self.spec.read(item, ctx)
            except SampleError:
                raise
            except FIELD_ERRORS as err:  # a field of an odd type, a number too large for a float, ...
                raise SampleError(
                    ctx.ref, "bad_field", f"{self.fmt} reader failed: {type(err).__name__}: {err}"
                ) from err
            if not targets:
                raise SampleError(ctx.ref, "bad_field", "record holds no target")
        except SampleError as err:
            targets = [Target(error=err, raw=item if not isinstance(item, RecordError) else None)]
        for t in targets:
            self.pending.append((ctx, t))
            if isinstance(t.image, EmbeddedImage):
                self.pending_bytes += len(t.image.data)
        if len(self.pending) >= CHUNK_TARGETS or self.pending_bytes >= CHUNK_BYTES:
            self.flush()

    # -- resolution

    def _map(self, fn, items: list) -> list:
        """``[fn(i) for i in items]``, on the pool in contiguous batches (few futures per chunk), results in order."""
        if self.pool is None or len(items) < 2:
            return [fn(i) for i in items]
        size = -(-len(items) // (4 * self.workers))
        batches = [items[i : i + size] for i in range(0, len(items), size)]
        return [r for batch in self.pool.map(lambda b: [fn(i) for i in b], batches) for r in batch]

    def _path(self, image: str | EmbeddedImage) -> str | validate.Invalid:
        """Resolved path of a record's image (cached per name, as its path relative to the image root), or the
        :class:`groundwork.validate.Invalid` saying why there is none (``path_outside_root``, ``bad_text``, ...)."""
        name = image.name if isinstance(image, EmbeddedImage) else image
        path = self.paths.get(name)
        if path is None:
            try:
                path = validate.resolve_path(self.image_root, validate.text(name, "image path"))
            except validate.Invalid as err:
                self.paths[name] = err
                return err
            self.paths[name] = path
            rel = os.path.relpath(path, self.image_root)
            self.rels[path] = path if rel == os.pardir or rel.startswith(os.pardir + os.sep) else rel
        return path

    def _direct(self, job: tuple[ReadContext, Target]) -> tuple[Sample, bool] | SampleError:
        ctx, t = job
        stats = Counter()
        try:
            sample = record_to_sample(
                t.record,
                ctx.ref,
                base_dir=self.image_root,
                default_id=f"{ctx.stem}:{ctx.index}",
                verify_image=self.verify,
                clip_tolerance_px=self.tol,
                stats=stats,
                max_image_pixels=self.max_image_pixels,
                limits=self.limits,
            )
        except SampleError as err:
            return err
        except FIELD_ERRORS as err:  # e.g. a field of an odd type: a reject, never a crash of the run
            return SampleError(ctx.ref, "bad_field", f"{self.fmt} record: {type(err).__name__}: {str(err)[:200]}")
        if t.extra:  # fields the reader kept aside (vlm-r1: bbox/target_bbox keys, not read as boxes)
            sample.extra.update(t.extra)
        return sample, stats["clipped"] > 0, stats["absolute_paths"] > 0

    def flush(self) -> None:
        """Resolve the pending targets: image headers (on the pool), then samples/rejects in input order."""
        jobs: dict[str, bytes | None] = {}
        for _, t in self.pending:
            if t.error is None and t.record is None and t.image is not None:
                path = self._path(t.image)
                if isinstance(path, validate.Invalid):
                    continue
                if path not in self.sizes and path not in jobs:
                    jobs[path] = t.image.data if isinstance(t.image, EmbeddedImage) else None
        items = list(jobs.items())
        probe = lambda kv: _probe_or_reason(kv[0], kv[1], self.checker)  # noqa: E731
        for (path, _), size in zip(items, self._map(probe, items), strict=True):
            self.sizes[path] = size
        direct = [job for job in self.pending if job[1].error is None and job[1].record is not None]
        direct_results = iter(self._map(self._direct, direct))
        for ctx, t in self.pending:
            self.report.targets += 1
            ref = ctx.ref + t.sub
            try:
                if t.error is not None:
                    raise t.error
                if t.record is not None:
                    result = next(direct_results)
                    if isinstance(result, SampleError):
                        raise result
                    sample, clipped, absolute = result
                    sample.source = self.source or sample.source or self.fmt
                    sample.platform = self.platform or sample.platform
                else:
                    sample, clipped = self._sample(ctx, t, ref)
                    absolute = isinstance(t.image, str) and validate.is_absolute(t.image)
                self._emit(sample, clipped, ref, absolute)
            except SampleError as err:
                self._reject(err, t.raw if t.raw is not None else t.record)
        self.pending, self.pending_bytes = [], 0

    def _sample(self, ctx: ReadContext, t: Target, ref: str) -> tuple[Sample, bool]:
        instruction = strip_image_tags(t.instruction, ref)
        if not instruction:
            raise SampleError(ref, "empty_instruction", "instruction is empty")
        path = self._path(t.image)
        if isinstance(path, validate.Invalid):
            raise SampleError(ref, path.reason, path.message)
        size = self.sizes[path]
        if isinstance(size[0], str):
            raise SampleError(ref, size[0], size[1])
        width, height = size
        if t.stated_size is not None and t.stated_size != (width, height):
            raise SampleError(
                ref,
                "bad_field",
                f"the record states a {t.stated_size[0]}x{t.stated_size[1]} image but {path} is {width}x{height}",
            )
        unit = self.box_unit or t.unit
        boxes, any_clipped = [], False
        for box in t.boxes:
            try:  # every reader's boxes: finite numbers within +-1e7, no booleans
                box = validate.box4(box, "box")
            except validate.Invalid as err:
                raise SampleError(ref, err.reason, err.message) from None
            try:  # the unit rule (groundwork.validate.check_unit), in the unit the format (or --box-unit) declares
                validate.check_unit(box, unit)
            except validate.Invalid as err:
                hint = "ratio reads them as fractions" if unit != "ratio" else "pixel or norm1000 reads them so"
                raise SampleError(ref, err.reason, f"{err.message} (--box-unit {hint})") from None
            pixels, what = self._to_pixels(box, unit, width, height)
            pixels, clipped = clip_box(
                pixels,
                width,
                height,
                ref,
                tolerance_px=self.tol,
                what=what,
                tolerance_ratio=0.0 if unit == "pixel" else CLIP_TOLERANCE_RATIO,
            )
            boxes.append(pixels)
            any_clipped |= clipped
        sample_id = f"{ctx.stem}:{ctx.index}" + (f":{t.sub_id}" if t.sub_id else "")
        sample = Sample(
            sample_id,
            instruction,
            path,
            boxes,
            width,
            height,
            source=self.source or self.fmt,
            platform=self.platform or t.platform or self.spec.platform,
            ui_type=t.ui_type,
            extra=t.extra,
        )
        return sample, any_clipped

    @staticmethod
    def _to_pixels(box: Box, unit: str, width: int, height: int) -> tuple[Box, str]:
        """Box in ``unit`` -> original pixels (``frames.box_from_norm1000``; a ratio is 1/1000 of a 0-1000 value)."""
        if unit == "pixel":
            return box, "box"
        scaled = box if unit == "norm1000" else tuple(v * 1000 for v in box)
        label = "0-1000" if unit == "norm1000" else unit  # same wording as schema.record_to_sample's GTA1 messages
        return box_from_norm1000(scaled, width, height), f"{label} box {list(box)} -> box"

    def _emit(self, sample: Sample, clipped: bool, ref: str, absolute: bool = False) -> None:
        rec = sample.to_record()
        if self.parquet:  # parquet values JSON cannot hold (binary, timestamps, dates, decimals) as JSON values
            try:
                rec = validate.json_value(rec, "the record")
            except ValueError as err:
                raise SampleError(ref, "bad_field", str(err)) from None
        rel = self.rels.get(sample.image_path)
        if rel is None:
            rel = os.path.relpath(sample.image_path, self.image_root)
        # an absolute path outside the root stays absolute (a relative '../..' path would be path_outside_root)
        rec["image_path"] = sample.image_path if rel == os.pardir or rel.startswith(os.pardir + os.sep) else rel
        try:
            line = validate.dumps(rec, ensure_ascii=False)  # strict JSON: no NaN / inf
        except ValueError as err:  # a non-finite number in a kept field (parquet floats)
            raise SampleError(ref, "bad_field", f"the record holds a number JSON cannot store: {err}") from None
        except RecursionError:
            raise SampleError(ref, "bad_field", "the record is nested too deeply to store") from None
        try:
            line.encode("utf-8")
        except UnicodeEncodeError as err:  # a lone surrogate escape ("\ud800") is legal JSON but not text
            raise SampleError(
                ref,
                "bad_text",
                f"the record holds text that is not valid Unicode ({err.reason} at "
                f"position {err.start} of the output line)",
            ) from None
        if not self.keep_duplicates:
            boxes = [(round(b[0], 2), round(b[1], 2), round(b[2], 2), round(b[3], 2)) for b in sample.boxes]
            key = f"{rec['image_path']}\0{sample.instruction}\0{boxes}"
            digest = int.from_bytes(hashlib.blake2b(key.encode("utf-8"), digest_size=8).digest(), "little")
            first = self.seen.get(digest)
            if first is not None:
                raise SampleError(
                    ref,
                    "duplicate",
                    f"same image, instruction and box(es) as the sample on line {first} "
                    f"of {os.path.basename(self.report.out)} "
                    f"({sample.image_path})",
                )
        try:  # the identity rule: a second record with a taken id is rejected
            self.ids.claim(sample.sample_id, ref)
        except validate.Invalid as err:
            raise SampleError(ref, err.reason, err.message) from None
        if not self.keep_duplicates:
            self.seen[digest] = self.report.samples + 1
        if not CANONICAL_KEYS.isdisjoint(sample.extra):
            for key in sample.shadowed_keys():
                self.report.shadowed[key] += 1
        self.out_f.write(line + "\n")
        self.report.samples += 1
        self.report.clipped += clipped
        self.report.absolute_paths += absolute

    def _reject(self, err: SampleError, raw: Any) -> None:
        if self.strict:
            raise err
        self.report.reasons[err.reason] += 1
        self.report.first_refs.setdefault(err.reason, err.ref)
        line = {"ref": err.ref, "reason": err.reason, "message": err.message, "record": _reject_record(raw)}
        text = validate.dumps(line, ensure_ascii=False, default=repr)
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:  # lone surrogates in the record: keep them as \uXXXX escapes
            text = validate.dumps(line, ensure_ascii=True, default=repr)
        self.rej_f.write(text + "\n")


def convert(
    fmt: str,
    inputs: list[str],
    image_root: str,
    out: str,
    *,
    strict: bool = False,
    workers: int = 1,
    source: str | None = None,
    platform: str | None = None,
    clip_tolerance_px: float = CLIP_TOLERANCE_PX,
    box_unit: str | None = None,
    keep_duplicates: bool = False,
    progress: bool | None = None,
    verify_images: str = "decode",
    max_image_pixels: int | None = validate.DECODE_PIXEL_LIMIT,
    limits: validate.ImageLimits | None = None,
) -> ConvertReport:
    """Convert ``inputs`` in format ``fmt`` to canonical JSONL at ``out`` (plus ``.rejects.jsonl`` and
    ``.summary.json``, see the module docstring).

    Args:
        fmt: a key of ``gui_grounding.data.formats.FORMATS``.
        inputs: data files (JSON list, JSONL, a single JSON object, or parquet), read in the order given.
        image_root: folder the records' image paths are relative to (embedded parquet images are written under it).
        out: output JSONL path; boxes in original-image pixels, image paths relative to ``image_root``.
        strict: raise at the first target that would be rejected (nothing is written).
        workers: threads for image header reads / embedded image writes (1 = inline); the output is identical for
            any value.
        source: ``source`` written on every sample (default: the record's own, for canonical records, else ``fmt``).
        platform: ``mobile``/``desktop``/``web`` for every sample (default: what the format or record says, if any).
        clip_tolerance_px: pixels a box edge may stick out of the image and be clipped (``schema.clip_box``; ratio
            and 0-1000 formats also get ``schema.CLIP_TOLERANCE_RATIO`` of the image side).
        box_unit: read the format's box values as ``pixel``/``ratio``/``norm1000`` instead of its documented unit
            (for schemas not confirmed, e.g. ``aria-ui-web``); not for ``canonical``/``vlm-r1``.
        keep_duplicates: write exact duplicates instead of rejecting them as ``duplicate``.
        progress: show a tqdm progress bar with records/s (default: only on a terminal).
        verify_images: ``decode`` (default: every unique image decoded once; truncated or corrupt data is
            ``unreadable_image``), ``header`` (header only) or ``none`` (header only, for the size; same as
            ``header`` today). See ``groundwork.validate.ImageChecker``.
        max_image_pixels: the decode guard: ``image_too_large`` when the header declares more pixels of the original
            image (default ``groundwork.validate.DECODE_PIXEL_LIMIT``, 64 Mpx; None/0: no limit). Unrelated to the
            model's smart_resize ``max_pixels``.
        limits: the target model family's image limits (``--family`` / ``--model``): an image outside them (aspect
            ratio, smallest side) is ``image_unsupported``, so no training run meets it at step 1.

    Outputs (``groundwork.outputs``): checked before any input is read (``--out`` may not be an input, a folder, or in
    a folder that cannot be written), locked against a second writer, written under unique temporary names and
    renamed, the summary last; a stale summary of an earlier run is removed first, so a summary always describes
    the outputs beside it.

    Returns:
        The :class:`ConvertReport` (also written to the summary file).

    Raises:
        SampleError: in strict mode, for the first bad record; its ref names the file and line / index.
        FileNotFoundError: an input file does not exist.
        groundwork.records.DataFileError: an input that is not JSON text (gzip, bzip2, xz, zstd, zip, UTF-16/32, not a
            regular file; ``groundwork.records.check_data_file``): one error for the file, nothing written.
        ValueError: unknown format, platform, box unit or verify mode, or ``workers < 1``.
        groundwork.outputs.OutputError: an output that cannot or must not be written (one line).
    """
    if verify_images not in validate.VERIFY_MODES:
        raise ValueError(f"verify_images must be one of {validate.VERIFY_MODES}, got {verify_images!r}")
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}; choose one of: {', '.join(FORMATS)}")
    if platform is not None and platform not in PLATFORMS:
        raise ValueError(f"platform must be one of {PLATFORMS}, got {platform!r}")
    if box_unit is not None and (box_unit not in UNITS or fmt in DIRECT_FORMATS):
        raise ValueError(
            f"box_unit must be one of {UNITS} and applies to every format but {DIRECT_FORMATS}; got "
            f"{box_unit!r} for {fmt!r}"
        )
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    for path in inputs:
        if not os.path.isfile(path):
            raise FileNotFoundError(f"input file not found: {path}")
    from tqdm import tqdm

    from groundwork import outputs

    rejects_path, summary_path = output_paths(out)
    outputs.check_outputs(files=[out, rejects_path, summary_path], inputs=inputs)
    if len({os.path.abspath(p) for p in (out, rejects_path, summary_path)}) < 3:
        raise outputs.OutputError(f"--out {out}: its rejects or summary file would be the output itself")
    report = ConvertReport(
        fmt, list(inputs), out, rejects_path, summary_path, workers, clip_tolerance_px, verify_images, max_image_pixels
    )
    stems = Counter()
    start = time.perf_counter()
    pool = ThreadPoolExecutor(max_workers=workers) if workers > 1 else None
    bar = tqdm(desc=f"convert {fmt}", unit=" rec", unit_scale=True, disable=None if progress is None else not progress)
    try:
        with outputs.OutputLock(out):
            if os.path.lexists(summary_path):  # a summary must describe the outputs beside it, or not exist
                os.remove(summary_path)
            with outputs.atomic_writer(out) as out_f, outputs.atomic_writer(rejects_path) as rej_f:
                conv = _Converter(
                    fmt,
                    os.path.abspath(image_root),
                    report,
                    strict=strict,
                    source=source,
                    platform=platform,
                    clip_tolerance_px=clip_tolerance_px,
                    box_unit=box_unit,
                    keep_duplicates=keep_duplicates,
                    pool=pool,
                    out_f=out_f,
                    rej_f=rej_f,
                    verify_images=verify_images,
                    max_image_pixels=max_image_pixels,
                    limits=limits,
                    parquet=any(p.endswith(".parquet") for p in inputs),
                )
                for path in inputs:
                    stem = os.path.splitext(os.path.basename(path))[0]
                    stems[stem] += 1
                    stem = stem if stems[stem] == 1 else f"{stem}#{stems[stem]}"  # two inputs with one name stay apart
                    since = 0
                    for ref, index, item in iter_input(path):
                        conv.add_record(ReadContext(path, ref, index, stem), item)
                        since += 1
                        if since == 1000:
                            bar.update(since)
                            since = 0
                    bar.update(since)
                conv.flush()
            report.elapsed_s = time.perf_counter() - start
            outputs.write_json(summary_path, report.to_dict(), indent=1)
    finally:
        bar.close()
        if pool is not None:
            pool.shutdown()
    return report


# --------------------------------------------------------------------------------------------------------------------
# command line


class _DecodeGuardFlag(argparse.Action):
    """``--max-image-pixels`` (and its deprecated old name ``--max-pixels``, which logs a one-line warning)."""

    def __call__(self, parser, namespace, values, option_string=None):
        if option_string == "--max-pixels":
            logger.warning(
                "convert: --max-pixels is deprecated: use --max-image-pixels (the decode guard on the "
                "original image; the model's smart_resize max_pixels is a training/eval flag)"
            )
        setattr(namespace, self.dest, values)


def _run(args: argparse.Namespace) -> None:
    try:
        report = convert(
            args.format,
            args.inputs,
            args.image_root,
            args.out,
            strict=args.strict,
            workers=args.workers,
            source=args.source,
            platform=args.platform,
            clip_tolerance_px=args.clip_tolerance,
            box_unit=args.box_unit,
            keep_duplicates=args.keep_duplicates,
            verify_images=args.verify_images,
            max_image_pixels=args.max_image_pixels or None,
            limits=_limits(args),
        )
    except SampleError as err:
        raise SystemExit(f"convert --strict: stopped at the first bad record: {err}") from None
    except (ValueError, OSError) as err:  # FileNotFoundError, groundwork.outputs.OutputError, disk full, ...
        raise SystemExit(f"convert: error: {err}") from None
    print(report.table())


def _limits(args: argparse.Namespace) -> validate.ImageLimits | None:
    """The image limits of ``--family`` or ``--model`` (``VLMBaseModule.image_limits``), or None."""
    which = getattr(args, "family", None) or getattr(args, "model", None)
    if not which:
        return None
    from vlm_r1.modules import get_vlm_module

    try:
        return get_vlm_module(which).image_limits()
    except (OSError, ValueError, KeyError) as err:
        raise ValueError(f"--family/--model {which!r}: {err}") from None


def register_cli(subparsers) -> None:
    """Add the ``convert`` subcommand to an argparse ``subparsers`` object (from ``add_subparsers()``).

    The parsed namespace carries ``func``: call ``args.func(args)`` to convert and print the summary table.
    """
    formats = "\n".join(f"  {name:<16} {spec.summary}" for name, spec in FORMATS.items())
    p = subparsers.add_parser(
        "convert",
        help="convert a public grounding dataset to canonical JSONL (validated, nothing lost)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Convert published GUI grounding records (GTA1, OS-Atlas, Aria-UI, ShowUI, UGround, SeeClick, "
        "GUI-R1, ScreenSpot-V2/Pro, VLM-R1, canonical) into canonical JSONL with boxes in original-image pixels. "
        "Inputs are streamed (JSON lists element by element, JSONL, parquet); image sizes come from the image headers. Every "
        "record becomes a sample or a line of OUT.rejects.jsonl with a reason code; OUT.summary.json counts them.",
        epilog="formats (source and box convention):\n" + formats,
    )
    p.add_argument("inputs", nargs="+", metavar="INPUT", help="data files: JSON list, JSONL or parquet")
    p.add_argument("--format", required=True, choices=list(FORMATS), help="record format of the inputs (see below)")
    p.add_argument(
        "--image-root",
        required=True,
        help="folder the records' image paths are relative to; images "
        "embedded in parquet rows are written under it (existing files are never overwritten)",
    )
    p.add_argument(
        "--out",
        required=True,
        help="output canonical JSONL (OUT.jsonl); also writes OUT.rejects.jsonl and OUT.summary.json next to it",
    )
    p.add_argument(
        "--strict",
        action="store_true",
        help="stop at the first record that would be rejected "
        "(duplicates included, unless --keep-duplicates) with an error naming its file and line (or "
        "[index]); nothing is written",
    )
    from groundwork.argtypes import integer, number, with_range
    from groundwork.argtypes import text as text_arg
    from vlm_r1.modules import available_modules

    workers_t, tol_t, max_px_t = integer(min=1, max=1024), number(min=0, max=validate.MAX_COORD), integer(min=0)
    p.add_argument(
        "--workers",
        type=workers_t,
        default=1,
        help=with_range(
            "threads reading image headers (and writing embedded images); output is identical for any value "
            "(default 1)",
            workers_t,
        ),
    )
    p.add_argument(
        "--source",
        type=text_arg,
        default=None,
        help="source label written on every sample (default: the format name, "
        "or the record's own source for canonical records)",
    )
    p.add_argument(
        "--platform",
        choices=PLATFORMS,
        default=None,
        help="platform written on every sample (default: what the format or record says, else none)",
    )
    p.add_argument(
        "--clip-tolerance",
        type=tol_t,
        default=CLIP_TOLERANCE_PX,
        metavar="PX",
        help="pixels a box edge "
        "may stick out of the image and still be clipped and kept (default %(default)s; ratio/0-1000 "
        f"formats also allow {CLIP_TOLERANCE_RATIO} of the image side); beyond: box_outside_image "
        f"({tol_t.range_text})",
    )
    p.add_argument(
        "--box-unit",
        choices=UNITS,
        default=None,
        help="read the format's box values in this unit "
        "instead of its documented one (for unconfirmed schemas such as aria-ui-web/aria-ui-mobile)",
    )
    p.add_argument(
        "--keep-duplicates",
        action="store_true",
        help="write exact duplicates (same image, instruction and box) instead of rejecting them as 'duplicate'",
    )
    p.add_argument(
        "--verify-images",
        choices=validate.VERIFY_MODES,
        default="decode",
        help="how each unique image is checked (once): decode (default; decodes every pixel, so truncated or "
        "corrupt images are rejected before training), header (reads the header only, faster), none (header only, "
        "for the size)",
    )
    p.add_argument(
        "--max-image-pixels",
        "--max-pixels",  # its name before issue 19; deprecated (it is not the model's smart_resize max_pixels)
        dest="max_image_pixels",
        action=_DecodeGuardFlag,
        type=max_px_t,
        default=validate.DECODE_PIXEL_LIMIT,
        metavar="N",
        help="decode guard: reject an image whose header declares more than N pixels (of the ORIGINAL image) as "
        "image_too_large, before decoding (default %(default)s; 0: no limit; an integer >= 0). Not the model's "
        "smart_resize max_pixels. --max-pixels is its deprecated old name",
    )
    family = p.add_mutually_exclusive_group()
    family.add_argument(
        "--family",
        choices=sorted(available_modules()),
        default=None,
        help="the model family the data is for: images it cannot take (aspect ratio over its processor's limit, a "
        "side under one vision patch) are rejected as image_unsupported before any training starts",
    )
    family.add_argument(
        "--model",
        default=None,
        metavar="PATH",
        help="a checkpoint (or model_type): its family's image limits, as --family",
    )
    p.set_defaults(func=_run)
