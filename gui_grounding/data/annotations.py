"""Annotation records of published benchmark files: readers, identity, boxes, image sizes and load reports.

The helpers every benchmark reader (``gui_grounding.eval.benchmarks.*``) shares, kept outside the ``eval`` package
so that the data side (``gui_grounding.data``, e.g. the number rule :func:`is_number`) and eval import one home
without the data side importing eval. Nothing here scores: the accuracy cells and tables are
``gui_grounding.eval.tables``'s.

Shared conventions (each benchmark module names its published source; the scoring rule is
``gui_grounding.eval.judge``'s):

* boxes become ``(x_min, y_min, x_max, y_max)`` in original-image pixels, whatever the native convention;
* **official denominators**: every record the official harness would score is scored. Only what the harness itself
  could not score is an error, counted in the :class:`BenchmarkLoadReport` with a ``file:[index]`` reference (or raised
  as :class:`~gui_grounding.data.schema.SampleError` in strict mode): an unreadable annotation file or element, a record
  that is not an object or lacks a field, a box that is not 4 numbers (``bad_box``: finite, within +-1e7, no
  booleans; ``groundwork.validate``), an instruction that is not valid Unicode (``bad_text``), an image path that climbs
  out of the image folder or is absolute (``path_outside_root``: a published benchmark's images lie inside its
  folder), a missing, non-regular, oversized or corrupt image. Oddities the harness scores anyway are **kept and
  warned** (``notes`` + ``warnings``, listed in
  ``metrics.json``): a box partly (``box_partly_outside_image``) or entirely (``box_outside_image``, e.g. an image
  whose EXIF orientation turns it) outside the image as we read it, an inverted or zero-area box or polygon
  (``inverted_box``: no point can hit it, as in the harness), an empty instruction (``empty_instruction``),
  ScreenSpot-Pro's ``img_size`` differing from the file (``img_size_mismatch``). Boxes are never clipped;
* **framing**: an annotation file is read with :func:`groundwork.records.iter_records`, the one record reader: every
  document of the file is read (a JSON list, then more lists or JSONL lines; LF, CRLF or CR line endings), each
  element that does not parse is one ``unparseable_record`` error and the elements after it are read. A file of a
  JSON-list benchmark that does not start with a list (an object, garbage, an empty file) is one
  ``unparseable_record`` error with the file as its ref; a file that is not JSON text at all (gzip, bzip2, xz,
  zstd, zip, parquet, UTF-16/32) refuses the load with :class:`groundwork.records.DataFileError`, named in the words of
  every other reader (:func:`groundwork.records.check_data_file`);
* **identity** (:class:`SampleIds`, the rule of :class:`groundwork.validate.IdRegistry`): a record's explicit id
  (:func:`groundwork.validate.explicit_id`: ``7`` and ``"7"`` are one id; absent, null, a boolean, an empty string or a
  non-scalar is no id) or else its generated id ``<file stem>:<index>`` (WebClick: the row index). Any id handed
  out twice, explicit or generated, makes the whole load fail (:class:`DuplicateIdError`, naming the ids and their
  refs): predictions are matched by id, so a repeated id would score one answer twice;
* accuracies are percentages rounded to 2 decimals, except ScreenSpot-Pro's harness cells, which are fractions
  (0-1) as that harness writes them.
"""

from __future__ import annotations

import logging
import os
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from groundwork import validate
from groundwork.records import DuplicateKeyError, RecordError, check_data_file, iter_records, load_json_file
from groundwork.validate import short_repr  # the one short_repr; the benchmark readers import it from here
from gui_grounding.data.schema import LoadReport, Sample, SampleError, read_image_size
from gui_grounding.models.frames import Box

logger = logging.getLogger(__name__)

# coordinates beyond this magnitude are not pixels of any screenshot (the shared rule, groundwork.validate)
MAX_COORDINATE = validate.MAX_COORD
# warnings listed one by one in metrics.json (all of them are counted in ``notes``)
MAX_LISTED_WARNINGS = 1000


class EvalInputError(ValueError):
    """Input that eval refuses as a whole, with a one-line message naming the file (and the first offending records):
    a benchmark file with duplicate sample ids, a predictions file with duplicate predictions (without
    ``on_duplicate``), a predictions file that is neither of the readable formats, or data with no usable sample.
    ``gui-grounding eval`` prints the message and exits with status 1 (no traceback). Defined here (the readers raise
    it) and raised by ``gui_grounding.eval``, the same class."""


class DuplicateIdError(EvalInputError):
    """A benchmark file (or folder) holds the same sample id more than once; the message names them and their refs."""


@dataclass
class BenchmarkLoadReport(LoadReport):
    """A :class:`~gui_grounding.data.schema.LoadReport` plus what was kept but is worth knowing.

    ``notes`` counts facts about the data (e.g. WebClick ``bbox_normalised`` / ``bbox_pixels``,
    ``box_partly_outside_image``); ``warnings`` holds ``(ref, message)`` for every kept record or file with an oddity
    (a box partly outside its image, a missing annotation file, a classification id that matches no record).
    """

    notes: Counter = field(default_factory=Counter)
    warnings: list[tuple[str, str]] = field(default_factory=list)

    _warning_notes: list[str] = field(default_factory=list, repr=False)

    def warn(self, ref: str, note: str, message: str) -> None:
        """Count ``note`` and keep ``(ref, message)``."""
        self.notes[note] += 1
        self.warnings.append((ref, f"{note}: {message}"))
        self._warning_notes.append(note)

    def rollback_warnings(self, mark: int) -> None:
        """Forget the warnings after the first ``mark`` (those of a record that then turned out to be an error)."""
        for note in self._warning_notes[mark:]:
            self.notes[note] -= 1
            if not self.notes[note]:
                del self.notes[note]
        del self.warnings[mark:], self._warning_notes[mark:]

    def table(self) -> str:
        """:meth:`LoadReport.table` plus one line per note and the first warnings."""
        lines = [super().table()]
        for note, n in sorted(self.notes.items()):
            lines.append(f"  note {note:<30} {n:>7}")
        for ref, message in self.warnings[:5]:
            lines.append(f"  warning {ref}: {message}")
        if len(self.warnings) > 5:
            lines.append(f"  ... {len(self.warnings) - 5} more warnings")
        return "\n".join(lines)


def load_report_dict(report: LoadReport, max_examples: int = 20, max_warnings: int = MAX_LISTED_WARNINGS) -> dict:
    """JSON-ready summary of a load report.

    ``num_records`` (records read), ``num_samples`` (scored: the denominator), ``rejected`` / ``reject_reasons`` /
    ``rejects`` (errors: what could not be scored, the first ``max_examples`` with refs), and for benchmark reports
    ``notes`` (counts), ``num_warnings`` and ``warnings`` (every warning with its ref, up to ``max_warnings``;
    ``warnings_omitted`` counts the rest).
    """
    out = {
        "num_records": report.num_records,
        "num_samples": report.num_samples,
        "rejected": len(report.rejects),
        "reject_reasons": dict(sorted(report.counts.items())),
        "rejects": [{"ref": r, "reason": why, "message": m} for r, why, m in report.rejects[:max_examples]],
    }
    if isinstance(report, BenchmarkLoadReport):
        out["notes"] = dict(sorted(report.notes.items()))
        out["num_warnings"] = len(report.warnings)
        out["warnings"] = [{"ref": r, "message": m} for r, m in report.warnings[:max_warnings]]
        out["warnings_omitted"] = max(0, len(report.warnings) - max_warnings)
    return out


def log_load_report(report: BenchmarkLoadReport, where: str) -> None:
    """One log warning when a load had errors (records not scored) or warnings (records kept and scored)."""
    if report.rejects or report.warnings:
        logger.warning(
            "%s: %d errors (not scored), %d warnings (kept and scored):\n%s",
            where,
            len(report.rejects),
            len(report.warnings),
            report.table(),
        )


def handle_reject(report: LoadReport, err: SampleError, strict: bool) -> None:
    """Raise ``err`` in strict mode, else record it in ``report.rejects``."""
    if strict:
        raise err
    report.rejects.append((err.ref, err.reason, err.message))


def read_json_file(path: str) -> Any:
    """Parsed JSON of a file that holds one JSON value (OSWorld-G's ``classification_result.json``; annotation
    records are read by :func:`read_annotation_samples`).

    Raises:
        DataFileError: the file is not JSON text (compressed, UTF-16, ...: :func:`groundwork.records.check_data_file`).
        SampleError: ``unparseable_record`` (ref = the path) when the file cannot be read or is not exactly one
            valid JSON value (a second document after it is an error too); ``duplicate_key`` for an object holding
            a key twice (``groundwork.records.load_json_file``).
    """
    check_data_file(path)
    try:  # a regular file (no FIFO, /dev/zero), strict JSON with no key twice; a byte-order mark is accepted
        return load_json_file(path, "annotation file", allow_nan=True)
    except DuplicateKeyError as err:
        raise SampleError(path, "duplicate_key", str(err)) from None
    except RecursionError as err:
        raise SampleError(path, "unparseable_record", "cannot read annotation file: JSON nested too deeply") from err
    except ValueError as err:  # not a regular file, too large, not UTF-8, not JSON, ints over the digit limit
        raise SampleError(path, "unparseable_record", f"cannot read {str(err)[:300]}") from err


_JSON_WHITESPACE = b" \t\r\n"


def list_file_problem(path: str) -> str | None:
    """Why ``path`` is not an annotation file of a JSON-list benchmark (it must start with ``[``, after an optional
    UTF-8 byte-order mark and JSON whitespace), or None. Reads the file's head only. (A file that is not JSON text
    at all is :func:`groundwork.records.check_data_file`'s error, raised before.)"""
    try:
        with open(path, "rb") as f:
            head = f.read(4096)
            if head.startswith(b"\xef\xbb\xbf"):
                head = head[3:]
            while head and not head.lstrip(_JSON_WHITESPACE):  # a head of whitespace only: read on
                head = f.read(1 << 16)
    except OSError as err:
        return f"cannot read annotation file: {err.strerror or err}"
    first = head.lstrip(_JSON_WHITESPACE)[:1]
    if not first:
        return "the file is empty: expected a JSON list of records"
    if first != b"[":
        return f"expected a JSON list of records, the file starts with {first.decode('latin-1')!r}"
    return None


class SampleIds:
    """The identity rule of one benchmark load (every file of it): :class:`groundwork.validate.IdRegistry`, plus the refs
    of every id handed out twice, so that :meth:`check` names them all.

    :meth:`assign` gives a record its explicit id (:func:`groundwork.validate.explicit_id`) or, when it has none, the
    reader's deterministic ``generated`` id; an id handed out before (explicit or generated alike) is recorded as a
    duplicate. :meth:`check` raises :class:`DuplicateIdError` when there is any.
    """

    def __init__(self) -> None:
        self.registry = validate.IdRegistry()
        self.first: dict[str, str] = {}
        self.duplicates: list[tuple[str, str, str]] = []  # (id, first ref, repeated ref)

    def assign(self, value: Any, generated: str, ref: str) -> str:
        """The sample id of a record whose id field holds ``value`` (``None`` when it has no id field)."""
        try:
            sid = self.registry.assign(value, generated, ref)
        except validate.Invalid:
            sid = validate.explicit_id(value)
            sid = generated if sid is None else sid
            self.duplicates.append((sid, self.first[sid], ref))
            return sid
        self.first[sid] = ref
        return sid

    def __contains__(self, sid: str) -> bool:
        return sid in self.registry

    def __len__(self) -> int:
        return len(self.registry)

    def check(self, where: str) -> None:
        """Raises :class:`DuplicateIdError` (one line: how many ids repeat, the first few with both refs)."""
        dups = self.duplicates
        if dups:
            shown = "; ".join(f"id {validate.short_repr(sid)} at {a} and {b}" for sid, a, b in dups[:5])
            more = f" (and {len(dups) - 5} more)" if len(dups) > 5 else ""
            raise DuplicateIdError(
                f"{where}: {len(dups)} duplicate sample id(s): {shown}{more}. Sample ids must be unique (predictions "
                "are matched by id); fix the benchmark file"
            )


def read_annotation_samples(
    path: str,
    make_sample: Callable[[str, dict, str], Sample],
    report: LoadReport,
    strict: bool,
    *,
    ids: SampleIds,
    id_key: str | None = "id",
    jsonl: bool = False,
) -> list[Sample]:
    """Samples of one annotation file of a JSON-list benchmark, with every bad record counted (or raised in strict
    mode).

    Args:
        path: the annotation file; one that is not JSON text (compressed, UTF-16, ...) raises
            :class:`groundwork.records.DataFileError`; it must start with a JSON list (:func:`list_file_problem`, else the
            file is one ``unparseable_record`` error, ref = the path). Every document of it is read
            (:func:`groundwork.records.iter_records`): each record that does not parse or is not an object is one
            ``unparseable_record`` error (ref ``file:[i]``, ``file:LINE`` or ``file:LINE[i]``), and the others are
            scored.
        make_sample: ``(sample_id, record, ref) -> Sample``, raising :class:`SampleError` for a bad record.
        report: counts records and rejects.
        strict: raise the first :class:`SampleError` instead of counting it.
        ids: the load's :class:`SampleIds`: every record that is an object, scored or not, is given its id there
            (``record[id_key]``, or ``<file stem>:<index>``), so a repeated id is caught whatever else is wrong.
        id_key: the record's id field; None for a format without ids (every id generated).
        jsonl: the benchmark publishes JSON lines (UI-I2E-Bench's ``.jsonl``): the file need not start with a list
            (no :func:`list_file_problem` check); every document is still read by
            :func:`groundwork.records.iter_records`, each line that does not parse one ``unparseable_record`` error.

    Returns:
        The good samples in file order.
    """
    check_data_file(path)  # not JSON text (gzip, UTF-16, ...): one error for the file, as every reader names it
    problem = None if jsonl else list_file_problem(path)
    if problem is not None:
        report.num_records += 1
        handle_reject(report, SampleError(path, "unparseable_record", problem), strict)
        return []
    stem = os.path.splitext(os.path.basename(path))[0]
    samples = []
    for ref, index, rec in iter_records(path, allow_nan=True):  # NaN boxes: bad_box, as the harness reads them
        report.num_records += 1
        if isinstance(rec, RecordError):
            handle_reject(report, SampleError(ref, rec.reason, rec.message), strict)
            continue
        sample_id = ids.assign(rec.get(id_key) if id_key else None, f"{stem}:{index}", ref)
        mark = len(report.warnings) if isinstance(report, BenchmarkLoadReport) else 0
        try:
            samples.append(make_sample(sample_id, rec, ref))
        except SampleError as err:
            if isinstance(report, BenchmarkLoadReport):
                report.rollback_warnings(mark)  # an error, not scored: its warnings would only confuse
            handle_reject(report, err, strict)
    return samples


def check_unique_ids(id_refs: list[tuple[str, str]], where: str) -> None:
    """Refuse repeated ids among ``(sample_id, ref)`` pairs in reading order (ids as :class:`SampleIds` handed them
    out; readers use :class:`SampleIds` directly).

    Raises:
        DuplicateIdError: one line naming how many ids repeat and the first few with both refs.
    """
    ids = SampleIds()
    for sid, ref in id_refs:
        ids.assign(sid, sid, ref)
    ids.check(where)


def is_number(value: Any) -> bool:
    """True for an int/float within ``+-MAX_COORDINATE`` (bools, NaN, inf and huge integers excluded; never raises):
    :func:`groundwork.validate.is_coord`, the one number rule of the data readers."""
    return validate.is_coord(value)


def image_file(image_dir: str, name: Any, ref: str) -> str:
    """The path of image ``name`` (as the record writes it) under ``image_dir``: the containment rule of
    :func:`groundwork.validate.resolve_path` (``contain=True``; symbolic links inside the folder are followed), and no
    absolute path, since a published benchmark's images lie inside its folder. Whether the file is a regular,
    non-empty image is :class:`ImageSizes`' check (:func:`groundwork.validate.regular_file`).

    Raises:
        SampleError: ``bad_field`` for a non-string or empty name, ``bad_text`` for one that is not valid Unicode,
            ``path_outside_root`` for an absolute path or a relative one whose ``..`` climbs out of ``image_dir``,
            ``not_a_file`` for a NUL byte.
    """
    if not isinstance(name, str) or not name.strip():
        raise SampleError(ref, "bad_field", f"image path must be a non-empty string, got {short_repr(name)}")
    try:
        name = validate.text(name, "image path")
        if validate.is_absolute(name) and "\0" not in name:
            why = f"image path {short_repr(name)} is absolute: a benchmark's images lie inside its folder {image_dir}"
            raise validate.Invalid("path_outside_root", why)
        return validate.resolve_path(image_dir, name, contain=True)
    except validate.Invalid as err:
        raise SampleError(ref, err.reason, err.message) from None


def require_str(record: dict, key: str, ref: str) -> str:
    """``record[key]`` as a non-empty string.

    Raises:
        SampleError: ``bad_field`` when it is not a string; ``empty_instruction`` when ``key`` is an instruction
            field and it is blank, else ``bad_field``.
    """
    value = record.get(key)
    if not isinstance(value, str):
        raise SampleError(ref, "bad_field", f"{key} must be a string, got {short_repr(value)}")
    if not value.strip():
        reason = "empty_instruction" if "instruction" in key else "bad_field"
        raise SampleError(ref, reason, f"{key} is empty")
    return value


def instruction_text(record: dict, key: str, ref: str, report: BenchmarkLoadReport) -> str:
    """``record[key]`` as a string; a blank one is kept (the harness sends it as is) with an ``empty_instruction``
    warning.

    Raises:
        SampleError: ``bad_field`` when it is not a string; ``bad_text`` when it is not valid Unicode.
    """
    value = record.get(key)
    if not isinstance(value, str):
        raise SampleError(ref, "bad_field", f"{key} must be a string, got {short_repr(value)}")
    if not validate.is_text(value):
        raise SampleError(ref, "bad_text", f"{key} is not valid Unicode text (a lone surrogate): no model can read it")
    if not value.strip():
        report.warn(ref, "empty_instruction", f"{key} is empty (kept and scored, as the harness does)")
    return value


def _four_numbers(value: Any, ref: str, what: str, convention: str) -> list[float]:
    if not (isinstance(value, (list, tuple)) and len(value) == 4 and all(is_number(v) for v in value)):
        raise SampleError(
            ref,
            "bad_box",
            f"{what} must be 4 finite numbers (|v| <= {MAX_COORDINATE:g}) {convention}, got {short_repr(value)}",
        )
    return [float(v) for v in value]


def box_from_xywh(value: Any, ref: str, report: BenchmarkLoadReport, what: str = "bbox") -> Box:
    """``[x, y, w, h]`` (pixels, top-left corner + size; ScreenSpot-V2, OSWorld-G) -> ``(x, y, x + w, y + h)``.

    A zero or negative ``w``/``h`` is kept as given (no point can hit it, as in the harness) with an ``inverted_box``
    warning in ``report``.

    Raises:
        SampleError: ``bad_box`` for anything but 4 finite numbers within +-1e7 (booleans excluded).
    """
    x, y, w, h = _four_numbers(value, ref, what, "[x, y, w, h]")
    if w <= 0 or h <= 0:
        report.warn(ref, "inverted_box", f"{what} {short_repr(value)} has zero or negative width/height (kept)")
    return x, y, x + w, y + h


def box_from_xyxy(value: Any, ref: str, report: BenchmarkLoadReport, what: str = "bbox") -> Box:
    """``[x1, y1, x2, y2]`` (ScreenSpot-Pro pixels, WebClick) -> ``(x_min, y_min, x_max, y_max)`` unchanged.

    ``x1 >= x2`` or ``y1 >= y2`` is kept as given with an ``inverted_box`` warning in ``report``.

    Raises:
        SampleError: ``bad_box`` for anything but 4 finite numbers within +-1e7 (booleans excluded).
    """
    x1, y1, x2, y2 = _four_numbers(value, ref, what, "[x1, y1, x2, y2]")
    if x1 >= x2 or y1 >= y2:
        report.warn(ref, "inverted_box", f"{what} {short_repr(value)} is inverted or has zero area (kept)")
    return x1, y1, x2, y2


def stated_image_size(value, ref: str, what: str = "image_size") -> tuple[float, float]:
    """``(width, height)`` of a record's stated image size ``[w, h]`` (pixels).

    Raises:
        SampleError: ``bad_field`` unless 2 finite numbers > 0 (within +-1e7, no booleans).
    """
    if not (isinstance(value, (list, tuple)) and len(value) == 2 and all(is_number(v) and v > 0 for v in value)):
        raise SampleError(ref, "bad_field", f"{what} must be [width, height] > 0, got {short_repr(value)}")
    return float(value[0]), float(value[1])


def scale_box_to_file(
    box: Box,
    stated: tuple[float, float],
    width: int,
    height: int,
    ref: str,
    report: BenchmarkLoadReport,
    what: str = "image_size",
) -> Box:
    """``box`` (pixels of an image of the ``stated`` size) in pixels of the ``width x height`` image file as read:
    unchanged when the sizes agree (or the file's size is unknown, 0x0), else scaled per axis by ``file / stated``
    with an ``img_size_mismatch`` warning (a harness that divides the box by the stated size and the point by the
    file's size makes this test: the ScreenSpot-Pro harness with ``img_size``, UI-Vision's with ``image_size``)."""
    if width <= 0 or height <= 0 or (width, height) == stated:
        return box
    sx, sy = width / stated[0], height / stated[1]
    report.warn(
        ref,
        "img_size_mismatch",
        f"{what} [{stated[0]:g}, {stated[1]:g}] differs from the image file as read, {width}x{height}; bbox "
        f"{list(box)} scaled by ({sx:g}, {sy:g}) as the official scorer normalises it by {what}",
    )
    return box[0] * sx, box[1] * sy, box[2] * sx, box[3] * sy


def check_unit(box: Box, unit: str, ref: str, report: BenchmarkLoadReport, what: str = "bbox") -> None:
    """Warn (never reject) about a box whose values do not fit the unit its benchmark declares: the unit rule of
    :func:`groundwork.validate.check_unit` (all four values in [0, 1] in a pixel or 0-1000 benchmark): a
    ``suspect_unit`` warning; the sample is kept and scored as given, as the official
    harnesses score it."""
    try:
        validate.check_unit(box, unit, what)
    except validate.Invalid as err:
        report.warn(ref, err.reason, f"{err.message} (kept, scored as given)")


def check_extent(extent: Box, width: int, height: int, ref: str, report: BenchmarkLoadReport, what: str) -> None:
    """Warn (never reject) about a target not inside the ``width x height`` image as we read it.

    ``extent`` is the target's bounding box in original pixels (a box, or a polygon's extent). Entirely outside:
    ``box_outside_image`` (e.g. an image whose EXIF orientation swaps its sides); partly: ``box_partly_outside_image``.
    The sample is kept and scored unclipped, as the official harnesses score it.
    """
    if width <= 0 or height <= 0:  # UNKNOWN_SIZE: an unavailable image when rescoring (ImageSizes warned)
        return
    x0, y0, x1, y1 = (
        min(extent[0], extent[2]),
        min(extent[1], extent[3]),
        max(extent[0], extent[2]),
        max(extent[1], extent[3]),
    )
    if x1 < 0 or y1 < 0 or x0 > width or y0 > height:
        report.warn(
            ref,
            "box_outside_image",
            f"{what} {list(extent)} lies entirely outside the {width}x{height} "
            "image as read (kept and scored, not clipped)",
        )
    elif x0 < 0 or y0 < 0 or x1 > width or y1 > height:
        report.warn(
            ref,
            "box_partly_outside_image",
            f"{what} {list(extent)} extends outside the {width}x{height} image (kept, not clipped)",
        )


#: the size of a sample whose image is unavailable and whose record states none (rescoring only): unknown
UNKNOWN_SIZE = (0, 0)


class ImageSizes:
    """``(width, height)`` per image path, each image read (and integrity-checked) once per load.

    Many benchmark records share one screenshot; a missing or corrupt image is reported for every record using it,
    each with its own ref.

    ``need_pixels=False`` (rescoring a predictions file: ``Benchmark.need_pixels``, set by ``run_eval``): images are
    read for their size only (header, nothing decoded), and a missing, non-regular, oversized or unreadable image
    does **not** drop the record (the official harness scores every annotated record): its size is the record's
    stated size (``stated``, e.g. ScreenSpot-Pro ``img_size``) with an ``image_unavailable`` warning, or, when the
    record states none, :data:`UNKNOWN_SIZE` with an ``image_unavailable_size_unknown`` warning
    (:func:`check_extent` skips such samples).
    """

    def __init__(self, verify: bool = True, *, need_pixels: bool = True):
        self.verify = verify
        self.need_pixels = need_pixels
        self._cache: dict[str, tuple[int, int] | SampleError] = {}

    def __call__(
        self, path: str, ref: str, *, stated: Any = None, report: BenchmarkLoadReport | None = None
    ) -> tuple[int, int]:
        """Size in pixels of the image at ``path`` (with ``need_pixels=False``, of an unavailable image: ``stated``
        when it is 2 numbers > 0, else :data:`UNKNOWN_SIZE`; warned in ``report``).

        Raises:
            SampleError: ``missing_image`` / ``unreadable_image`` (from ``read_image_size``) with ``ref``, when
                ``need_pixels``.
        """
        if path not in self._cache:
            try:
                self._cache[path] = read_image_size(path, ref, verify=self.verify and self.need_pixels)
            except SampleError as err:
                self._cache[path] = err
        value = self._cache[path]
        if not isinstance(value, SampleError):
            return value
        if self.need_pixels:
            raise SampleError(ref, value.reason, value.message)
        known = isinstance(stated, (list, tuple)) and len(stated) == 2 and all(is_number(v) and v > 0 for v in stated)
        if report is not None:
            why = f"{value.reason}: {value.message}; kept (rescoring needs no pixels)"
            if known:
                report.warn(ref, "image_unavailable", f"{why}, size {stated[0]}x{stated[1]} as the record states it")
            else:
                report.warn(ref, "image_unavailable_size_unknown", f"{why}, size unknown: box-vs-image checks skipped")
        return (stated[0], stated[1]) if known else UNKNOWN_SIZE
