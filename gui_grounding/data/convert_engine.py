"""The engine of ``gui-grounding convert`` (:mod:`gui_grounding.data.convert`): records -> targets -> canonical
samples or reason-coded rejects, in input order, and the run's counts (:class:`ConvertReport`).

Rule (docs/DATA.md, docs/HOSTILE_INPUT.md): every target becomes a sample or a reject line (``targets == samples +
rejected``). Per target, the :class:`Converter`:

1. takes the targets the format's reader (``gui_grounding.data.formats``) makes of each record; a reader that fails
   on a field of an odd type is a ``bad_field`` reject of that record, never a crash of the run;
2. sizes each image from its header (:func:`probe_image`, ``groundwork.validate.ImageChecker``), once per image path,
   on the worker threads in contiguous batches, writing images embedded in parquet rows first (an image that cannot
   be written is the per-record reason ``image_write_failed``);
3. resolves image paths under the image root (``groundwork.validate.resolve_path``), checks every box
   (``groundwork.validate.box4``, the unit rule ``groundwork.validate.check_unit``), converts it to **original-image
   pixels** (``gui_grounding.models.frames``) and clips it by the one clipping rule (``gui_grounding.data.schema.
   clip_box``);
4. rejects exact **duplicates** (same image, instruction and box(es) as an earlier sample of this run) and a second
   sample with a taken id (``groundwork.validate.IdRegistry``), and writes strict JSON lines of valid Unicode;
5. writes each reject as ``{"ref", "reason", "message", "record"}`` (``reason`` a key of
   ``gui_grounding.data.schema.REASONS``; the record with bytes named, cut when longer than
   ``MAX_REJECT_RECORD_CHARS``).
"""

from __future__ import annotations

import math
import os
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from groundwork import outputs, validate
from groundwork.records import RecordError
from gui_grounding.data.formats import FORMATS
from gui_grounding.data.formats_common import EmbeddedImage, ReadContext, Target
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
        outputs.write_bytes(path, embedded)  # a unique temporary name, then renamed
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
# the converter


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


class Converter:
    """One conversion run (see :func:`gui_grounding.data.convert.convert`)."""

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
            refusal=t.no_target,
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
            boxes = tuple([(round(b[0], 2), round(b[1], 2), round(b[2], 2), round(b[3], 2)) for b in sample.boxes])
            # the run's fingerprint of (image, instruction, boxes to 0.01 px): a 64-bit hash, kept for this run only
            digest = hash((rec["image_path"], sample.instruction, boxes))
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
