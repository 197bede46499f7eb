"""Benchmark registry and the helpers every benchmark reader shares.

``BENCHMARKS`` maps a ``--benchmark`` name to its class; :func:`get_benchmark` builds one. Each module
(``screenspot_v2``, ``screenspot_pro``, ``osworld_g``, ``webclick``, ``canonical``) knows only its published file
layout and its breakdown keys; the scorer is the shared :func:`gui_grounding.eval.judge.judge`.

The registry (``REGISTRY``) is a :class:`vlm_r1.registry.Registry`: the built-in benchmarks above, then those that
installed packages declare under the entry-point group ``gui_grounding.benchmarks`` (name -> ``module:Class``; an
entry point replaces a built-in of the same name), and ``get_benchmark`` also takes a ``"package.module:Class"`` spec
directly. ``BENCHMARKS`` is built on first access (the benchmark modules import this package's helpers), so it
includes the entry points installed at that time (after ``REGISTRY.refresh()``, at the next access).

Shared conventions (``gta1_and_peers.md`` section 2.1):

* boxes become ``(x_min, y_min, x_max, y_max)`` in original-image pixels, whatever the native convention;
* **official denominators**: every record the official harness would score is scored. Only what the harness itself
  could not score is an error, counted in the :class:`BenchmarkLoadReport` with a ``file:[index]`` reference (or raised
  as :class:`~gui_grounding.schema.SampleError` in strict mode): an unreadable annotation file or element, a record
  that is not an object or lacks a field, a box that is not 4 numbers (``bad_box``: finite, within +-1e7, no
  booleans; ``vlm_r1.validate``), an instruction that is not valid Unicode (``bad_text``), an image path that climbs
  out of the image folder (``path_outside_root``), a missing, non-regular, oversized or corrupt image. Oddities the harness scores anyway are **kept and warned** (``notes`` + ``warnings``, listed in
  ``metrics.json``): a box partly (``box_partly_outside_image``) or entirely (``box_outside_image``, e.g. an image
  whose EXIF orientation turns it) outside the image as we read it, an inverted or zero-area box or polygon
  (``inverted_box``: no point can hit it, as in the harness), an empty instruction (``empty_instruction``),
  ScreenSpot-Pro's ``img_size`` differing from the file (``img_size_mismatch``). Boxes are never clipped;
* duplicate sample ids in a benchmark file make the whole load fail (:class:`DuplicateIdError`, naming the ids and
  their refs): predictions are matched by id, so a repeated id would score one answer twice;
* accuracies are percentages rounded to 2 decimals, except ScreenSpot-Pro's harness cells, which are fractions
  (0-1) as that harness writes them.
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gui_grounding.eval import EvalInputError
from gui_grounding.eval.judge import CORRECT, WRONG, WRONG_FORMAT
from gui_grounding.frames import Box
from gui_grounding.schema import LoadReport, Sample, SampleError, read_image_size
from vlm_r1 import validate
from vlm_r1.data import RecordError, iter_json_list
from vlm_r1.registry import Registry

logger = logging.getLogger(__name__)

# coordinates beyond this magnitude are not pixels of any screenshot (the shared rule, vlm_r1.validate)
MAX_COORDINATE = validate.MAX_COORD
# warnings listed one by one in metrics.json (all of them are counted in ``notes``)
MAX_LISTED_WARNINGS = 1000


class DuplicateIdError(EvalInputError):
    """A benchmark file (or folder) holds the same sample id more than once; the message names them and their refs."""


@dataclass
class BenchmarkLoadReport(LoadReport):
    """A :class:`~gui_grounding.schema.LoadReport` plus what was kept but is worth knowing.

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
    out = {"num_records": report.num_records, "num_samples": report.num_samples, "rejected": len(report.rejects),
           "reject_reasons": dict(sorted(report.counts.items())),
           "rejects": [{"ref": r, "reason": why, "message": m} for r, why, m in report.rejects[:max_examples]]}  # fmt: skip
    if isinstance(report, BenchmarkLoadReport):
        out["notes"] = dict(sorted(report.notes.items()))
        out["num_warnings"] = len(report.warnings)
        out["warnings"] = [{"ref": r, "message": m} for r, m in report.warnings[:max_warnings]]
        out["warnings_omitted"] = max(0, len(report.warnings) - max_warnings)
    return out


def log_load_report(report: BenchmarkLoadReport, where: str) -> None:
    """One log warning when a load had errors (records not scored) or warnings (records kept and scored)."""
    if report.rejects or report.warnings:
        logger.warning("%s: %d errors (not scored), %d warnings (kept and scored):\n%s", where, len(report.rejects),
                       len(report.warnings), report.table())  # fmt: skip


def handle_reject(report: LoadReport, err: SampleError, strict: bool) -> None:
    """Raise ``err`` in strict mode, else record it in ``report.rejects``."""
    if strict:
        raise err
    report.rejects.append((err.ref, err.reason, err.message))


def read_json_file(path: str) -> Any:
    """Parsed JSON of an annotation file.

    Raises:
        SampleError: ``unparseable_record`` (ref = the path) when the file cannot be read or is not valid JSON.
    """
    try:
        with open(path, encoding="utf-8-sig") as f:  # a byte-order mark is accepted
            return json.load(f)
    except RecursionError as err:
        raise SampleError(path, "unparseable_record", "cannot read annotation file: JSON nested too deeply") from err
    except (OSError, ValueError) as err:  # also UnicodeDecodeError, JSONDecodeError, ints over the digit limit
        raise SampleError(
            path, "unparseable_record", f"cannot read annotation file: {type(err).__name__}: {str(err)[:300]}"
        ) from err


def read_json_list(path: str) -> list:
    """An annotation file that must hold a JSON list of records (ScreenSpot-V2/Pro, OSWorld-G).

    Raises:
        SampleError: ``unparseable_record`` for an unreadable file or one whose top level is not a list.
    """
    data = read_json_file(path)
    if not isinstance(data, list):
        raise SampleError(path, "unparseable_record", f"expected a JSON list of records, got {type(data).__name__}")
    return data


def read_annotation_samples(
    path: str,
    make_sample,
    report: LoadReport,
    strict: bool,
    *,
    id_refs: list[tuple[str, str]] | None = None,
    id_key: str = "id",
) -> tuple[list[Sample], list]:
    """Samples of one JSON-list annotation file, with every bad record counted (or raised in strict mode).

    Args:
        path: the annotation file.
        make_sample: ``(index, record, ref) -> Sample``, raising :class:`SampleError` for a bad record.
        report: counts records and rejects (an unreadable file is one ``unparseable_record`` reject).
        strict: raise the first :class:`SampleError` instead of counting it.
        id_refs: when given, ``(str(record[id_key]), ref)`` is appended for every record that has ``id_key``
            (scored or not), for :func:`check_unique_ids`.
        id_key: the record's id field.

    Returns:
        ``(samples, records)``: the good samples in file order and the raw records (empty if unreadable). A list
        that does not parse as a whole is read element by element (:func:`vlm_r1.data.iter_json_list`): each bad
        element is one ``unparseable_record`` error (a :class:`~vlm_r1.data.RecordError` in ``records``) and the
        others are scored.
    """
    try:
        records = read_json_list(path)
    except SampleError as err:
        records = _recover_list_elements(path)
        if records is None:  # not a JSON list at all: the file is one error
            report.num_records += 1
            handle_reject(report, err, strict)
            return [], []
    samples = []
    for i, rec in enumerate(records):
        report.num_records += 1
        ref = f"{path}:[{i}]"
        if isinstance(rec, RecordError):
            handle_reject(report, SampleError(ref, "unparseable_record", rec.message), strict)
            continue
        if id_refs is not None and isinstance(rec, dict) and rec.get(id_key) is not None:
            id_refs.append((str(rec[id_key]), ref))
        mark = len(report.warnings) if isinstance(report, BenchmarkLoadReport) else 0
        try:
            samples.append(make_sample(i, rec, ref))
        except SampleError as err:
            if isinstance(report, BenchmarkLoadReport):
                report.rollback_warnings(mark)  # an error, not scored: its warnings would only confuse
            handle_reject(report, err, strict)
    return samples, records


def _recover_list_elements(path: str) -> list | None:
    """The elements of a JSON list that does not parse as a whole (a 5000-digit number, deep nesting, a bad byte in
    one element), each a record or a :class:`~vlm_r1.data.RecordError`, read by :func:`vlm_r1.data.iter_json_list`
    (the elements after a bad one are kept); ``None`` when the file is not a JSON list."""
    try:
        with open(path, "rb") as f:
            head = f.read(4096).removeprefix(b"\xef\xbb\xbf").lstrip()[:1]
    except OSError:
        return None
    if head != b"[":
        return None
    return [item for _, _, item in iter_json_list(path)]


def check_unique_ids(id_refs: list[tuple[str, str]], where: str) -> None:
    """Refuse repeated ids.

    Args:
        id_refs: ``(sample_id, ref)`` in reading order.
        where: the file or folder, for the message.

    Raises:
        DuplicateIdError: one line naming how many ids repeat and the first few with both refs.
    """
    first: dict[str, str] = {}
    dups: list[tuple[str, str, str]] = []
    for sid, ref in id_refs:
        if sid in first:
            dups.append((sid, first[sid], ref))
        else:
            first[sid] = ref
    if dups:
        shown = "; ".join(f"id {sid!r} at {a} and {b}" for sid, a, b in dups[:5])
        more = f" (and {len(dups) - 5} more)" if len(dups) > 5 else ""
        raise DuplicateIdError(f"{where}: {len(dups)} duplicate sample id(s): {shown}{more}. Sample ids must be unique "
                               "(predictions are matched by id); fix the benchmark file")  # fmt: skip


def is_number(value: Any) -> bool:
    """True for an int/float within ``+-MAX_COORDINATE`` (bools, NaN, inf and huge integers excluded; never raises):
    :func:`vlm_r1.validate.is_coord`, the one number rule of the data readers."""
    return validate.is_coord(value)


def image_file(image_dir: str, name: Any, ref: str) -> str:
    """The path of image ``name`` (as the record writes it) under ``image_dir``.

    Raises:
        SampleError: ``bad_field`` for a non-string or empty name, ``bad_text`` for one that is not valid Unicode,
            ``path_outside_root`` for a relative path whose ``..`` climbs out of ``image_dir``, ``not_a_file`` for a
            NUL byte (:func:`vlm_r1.validate.resolve_path`).
    """
    if not isinstance(name, str) or not name.strip():
        raise SampleError(ref, "bad_field", f"image path must be a non-empty string, got {short_repr(name)}")
    try:
        return validate.resolve_path(image_dir, validate.text(name, "image path"))
    except validate.Invalid as err:
        raise SampleError(ref, err.reason, err.message) from None


def short_repr(value: Any, limit: int = 120) -> str:
    """``repr(value)`` cut to ``limit`` characters, for messages (never raises, even on deep nesting)."""
    try:
        text = repr(value)
    except (RecursionError, ValueError):
        return f"<unprintable {type(value).__name__}>"
    return text if len(text) <= limit else text[:limit] + f"... [{len(text) - limit} more characters]"


def require(record: Any, keys: Iterable[str], ref: str) -> None:
    """Check ``record`` is a JSON object holding ``keys``.

    Raises:
        SampleError: ``unparseable_record`` for a non-object, ``bad_field`` naming the missing keys.
    """
    if not isinstance(record, dict):
        raise SampleError(ref, "unparseable_record", f"record is not a JSON object: {type(record).__name__}")
    missing = [k for k in keys if k not in record]
    if missing:
        raise SampleError(ref, "bad_field", f"missing field(s) {missing}; record has {sorted(record)}")


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
        raise SampleError(ref, "bad_box", f"{what} must be 4 finite numbers (|v| <= {MAX_COORDINATE:g}) "
                                            f"{convention}, got {short_repr(value)}")  # fmt: skip
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


def check_extent(extent: Box, width: int, height: int, ref: str, report: BenchmarkLoadReport, what: str) -> None:
    """Warn (never reject) about a target not inside the ``width x height`` image as we read it.

    ``extent`` is the target's bounding box in original pixels (a box, or a polygon's extent). Entirely outside:
    ``box_outside_image`` (e.g. an image whose EXIF orientation swaps its sides); partly: ``box_partly_outside_image``.
    The sample is kept and scored unclipped, as the official harnesses score it.
    """
    x0, y0, x1, y1 = (min(extent[0], extent[2]), min(extent[1], extent[3]), max(extent[0], extent[2]),
                      max(extent[1], extent[3]))  # fmt: skip
    if x1 < 0 or y1 < 0 or x0 > width or y0 > height:
        report.warn(ref, "box_outside_image", f"{what} {list(extent)} lies entirely outside the {width}x{height} "
                                              "image as read (kept and scored, not clipped)")  # fmt: skip
    elif x0 < 0 or y0 < 0 or x1 > width or y1 > height:
        report.warn(ref, "box_partly_outside_image", f"{what} {list(extent)} extends outside the {width}x{height} "
                                                     "image (kept, not clipped)")  # fmt: skip


class ImageSizes:
    """``(width, height)`` per image path, each image read (and integrity-checked) once per load.

    Many benchmark records share one screenshot; a missing or corrupt image is reported for every record using it,
    each with its own ref.
    """

    def __init__(self, verify: bool = True):
        self.verify = verify
        self._cache: dict[str, tuple[int, int] | SampleError] = {}

    def __call__(self, path: str, ref: str) -> tuple[int, int]:
        """Size in pixels of the image at ``path``.

        Raises:
            SampleError: ``missing_image`` / ``unreadable_image`` (from ``read_image_size``) with ``ref``.
        """
        if path not in self._cache:
            try:
                self._cache[path] = read_image_size(path, ref, verify=self.verify)
            except SampleError as err:
                self._cache[path] = err
        value = self._cache[path]
        if isinstance(value, SampleError):
            raise SampleError(ref, value.reason, value.message)
        return value


# ---------------------------------------------------------------------------------------------------------------------
# metrics helpers


def check_results(samples: list[Sample], results: dict[str, dict]) -> None:
    """Every sample has a result with a valid ``correctness``.

    Raises:
        ValueError: naming the first few samples without a result or with an unknown correctness value.
    """
    missing = [s.sample_id for s in samples if s.sample_id not in results]
    if missing:
        raise ValueError(f"{len(missing)} samples have no result (fill missing predictions as wrong_format first), "
                         f"e.g. {missing[:5]}")  # fmt: skip
    bad = [(s.sample_id, results[s.sample_id].get("correctness")) for s in samples
           if results[s.sample_id].get("correctness") not in (CORRECT, WRONG, WRONG_FORMAT)]  # fmt: skip
    if bad:
        raise ValueError(f"{len(bad)} results have a correctness other than correct/wrong/wrong_format: {bad[:5]}")


def cell(correct: int, total: int, wrong_format: int) -> dict:
    """``{"num_correct", "num_total", "wrong_format", "accuracy"}``; accuracy in percent, 2 decimals (0.0 if empty)."""
    return {"num_correct": correct, "num_total": total, "wrong_format": wrong_format,
            "accuracy": round(100.0 * correct / total, 2) if total else 0.0}  # fmt: skip


def tally(
    samples: list[Sample], results: dict[str, dict], keys: Callable[[Sample], Iterable[Any]], order: Iterable = ()
) -> dict[Any, dict]:
    """Accuracy :func:`cell` per key; ``keys(sample)`` gives the keys a sample counts under (one or several).

    Keys come out in ``order`` first (those present), then in order of first appearance among ``samples``.
    """
    counts: dict[Any, list[int]] = {}
    for s in samples:
        c = results[s.sample_id]["correctness"]
        for key in keys(s):
            n = counts.setdefault(key, [0, 0, 0])
            n[0] += c == CORRECT
            n[1] += 1
            n[2] += c == WRONG_FORMAT
    ordered = [k for k in order if k in counts] + [k for k in counts if k not in set(order)]
    return {k: cell(*counts[k]) for k in ordered}


def md_table(header: list[str], rows: list[list[Any]], left: int = 1) -> str:
    """A Markdown table; the first ``left`` columns left-aligned, the others right-aligned."""
    aligns = [":---"] * left + ["---:"] * (len(header) - left)
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(aligns) + "|"]
    lines += ["| " + " | ".join(str(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def fmt_cell(c: dict) -> str:
    """``"acc% (correct/total)"`` for a :func:`cell`."""
    return f"{c['accuracy']:.2f} ({c['num_correct']}/{c['num_total']})"


def breakdown_table(title: str, metrics: dict, sections: list[tuple[str, str]]) -> str:
    """Markdown table of ``metrics["overall"]`` then each ``metrics[key]`` section (``(key, label)``) of cells."""
    rows = [["overall", "", *_cell_cols(metrics["overall"])]]
    for key, label in sections:
        for value, c in metrics.get(key, {}).items():
            rows.append([label, value, *_cell_cols(c)])
    return f"**{title}**\n\n" + md_table(["group", "value", "correct", "total", "no point", "accuracy %"], rows, left=2)


def _cell_cols(c: dict) -> list:
    return [c["num_correct"], c["num_total"], c["wrong_format"], f"{c['accuracy']:.2f}"]


# ---------------------------------------------------------------------------------------------------------------------
# registry (imported last: the modules use the helpers above)

from gui_grounding.eval.benchmarks.base import Benchmark  # noqa: E402
from gui_grounding.eval.benchmarks.canonical import Canonical  # noqa: E402
from gui_grounding.eval.benchmarks.osworld_g import OSWorldG  # noqa: E402
from gui_grounding.eval.benchmarks.screenspot_pro import ScreenSpotPro  # noqa: E402
from gui_grounding.eval.benchmarks.screenspot_v2 import ScreenSpotV2  # noqa: E402
from gui_grounding.eval.benchmarks.webclick import WebClick  # noqa: E402

ENTRY_POINT_GROUP = "gui_grounding.benchmarks"


def _builtins() -> dict[str, type[Benchmark]]:
    """The benchmarks of this package, in ``--benchmark`` listing order."""
    return {
        "screenspot-v2": ScreenSpotV2,
        "screenspot-pro": ScreenSpotPro,
        "osworld-g": OSWorldG,
        "webclick": WebClick,
        "canonical": Canonical,
    }


#: built-ins + the entry-point group ``gui_grounding.benchmarks`` (name -> ``module:Class``), built lazily
REGISTRY = Registry("benchmark", ENTRY_POINT_GROUP, _builtins)

if TYPE_CHECKING:
    #: name -> benchmark class (a module attribute computed on access by ``__getattr__`` below)
    BENCHMARKS: dict[str, type[Benchmark]]


def __getattr__(name: str) -> Any:
    """``BENCHMARKS``: name -> class, the built-ins then the entry points (looked up on access, not at import, so a
    plugin module may import this package)."""
    if name == "BENCHMARKS":
        return REGISTRY.available()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def get_benchmark(name: str, **options) -> Benchmark:
    """The benchmark called ``name`` (a key of ``BENCHMARKS``, or a ``"package.module:Class"`` spec), built with
    ``options``.

    Options: ``osworld-g`` takes ``subset="auto"|"plain"|"refined"``; ``webclick`` takes ``cache_dir``.

    Raises:
        ValueError: unknown name (the message lists the registered ones), a spec that names nothing loadable, or
            options the benchmark does not take.
    """
    cls = REGISTRY.get_callable(name)
    try:
        return cls(**options)
    except TypeError as err:
        raise ValueError(f"benchmark {name!r} does not take options {sorted(options)}: {err}") from err


__all__ = [
    "BENCHMARKS",
    "REGISTRY",
    "Benchmark",
    "BenchmarkLoadReport",
    "DuplicateIdError",
    "get_benchmark",
    "load_report_dict",
]
