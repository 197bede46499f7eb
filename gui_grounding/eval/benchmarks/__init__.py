"""Benchmark registry and the helpers every benchmark reader shares.

``BENCHMARKS`` maps a ``--benchmark`` name to its class; :func:`get_benchmark` builds one. Each module
(``screenspot_v2``, ``screenspot_pro``, ``osworld_g``, ``webclick``, ``canonical``) knows only its published file
layout and its breakdown keys; the scorer is the shared :func:`gui_grounding.eval.judge.judge`.

Shared conventions (``gta1_and_peers.md`` section 2.1):

* boxes become ``(x_min, y_min, x_max, y_max)`` in original-image pixels, whatever the native convention;
* a record that cannot be scored (unreadable annotation file, missing/corrupt image, bad or inverted box, box entirely
  outside the image, empty instruction, duplicate id) is skipped and counted in the :class:`BenchmarkLoadReport`
  with a ``file:[index]`` reference, or raises :class:`~gui_grounding.schema.SampleError` in strict mode;
* a box that sticks partly out of the image is **kept** (the official scorers do not clip or drop it, and dropping
  it would change the published totals) and counted as a warning;
* accuracies are percentages rounded to 2 decimals, except ScreenSpot-Pro's harness cells, which are fractions
  (0-1) as that harness writes them.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from gui_grounding.eval.judge import CORRECT, WRONG, WRONG_FORMAT
from gui_grounding.frames import Box
from gui_grounding.schema import LoadReport, Sample, SampleError, read_image_size


@dataclass
class BenchmarkLoadReport(LoadReport):
    """A :class:`~gui_grounding.schema.LoadReport` plus what was kept but is worth knowing.

    ``notes`` counts facts about the data (e.g. WebClick ``bbox_normalised`` / ``bbox_pixels``,
    ``box_partly_outside_image``); ``warnings`` holds ``(ref, message)`` for every kept record or file with an oddity
    (a box partly outside its image, a missing annotation file, a classification id that matches no record).
    """

    notes: Counter = field(default_factory=Counter)
    warnings: list[tuple[str, str]] = field(default_factory=list)

    def warn(self, ref: str, note: str, message: str) -> None:
        """Count ``note`` and keep ``(ref, message)``."""
        self.notes[note] += 1
        self.warnings.append((ref, f"{note}: {message}"))

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


def load_report_dict(report: LoadReport, max_examples: int = 20) -> dict:
    """JSON-ready summary of a load report: counts, reasons, notes and the first rejects/warnings (with refs)."""
    out = {"num_records": report.num_records, "num_samples": report.num_samples, "rejected": len(report.rejects),
           "reject_reasons": dict(sorted(report.counts.items())),
           "rejects": [{"ref": r, "reason": why, "message": m} for r, why, m in report.rejects[:max_examples]]}  # fmt: skip
    if isinstance(report, BenchmarkLoadReport):
        out["notes"] = dict(sorted(report.notes.items()))
        out["warnings"] = [{"ref": r, "message": m} for r, m in report.warnings[:max_examples]]
    return out


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
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise SampleError(
            path, "unparseable_record", f"cannot read annotation file: {type(err).__name__}: {err}"
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
    path: str, make_sample, report: LoadReport, strict: bool, *, unique_ids: dict[str, str] | None = None
) -> tuple[list[Sample], list]:
    """Samples of one JSON-list annotation file, with every bad record counted (or raised in strict mode).

    Args:
        path: the annotation file.
        make_sample: ``(index, record, ref) -> Sample``, raising :class:`SampleError` for a bad record.
        report: counts records and rejects (an unreadable file is one ``unparseable_record`` reject).
        strict: raise the first :class:`SampleError` instead of counting it.
        unique_ids: when given, sample_id -> ref of the records seen so far (shared across files); a repeated id
            is rejected as ``bad_field``.

    Returns:
        ``(samples, records)``: the good samples in file order and the raw records (empty if unreadable).
    """
    try:
        records = read_json_list(path)
    except SampleError as err:
        report.num_records += 1
        handle_reject(report, err, strict)
        return [], []
    samples = []
    for i, rec in enumerate(records):
        report.num_records += 1
        ref = f"{path}:[{i}]"
        try:
            sample = make_sample(i, rec, ref)
            if unique_ids is not None:
                if sample.sample_id in unique_ids:
                    raise SampleError(ref, "bad_field", f"duplicate id {sample.sample_id!r} (first at "
                                                        f"{unique_ids[sample.sample_id]})")  # fmt: skip
                unique_ids[sample.sample_id] = ref
            samples.append(sample)
        except SampleError as err:
            handle_reject(report, err, strict)
    return samples, records


def is_number(value: Any) -> bool:
    """True for a finite int/float (bools excluded)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


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
        raise SampleError(ref, "bad_field", f"{key} must be a string, got {value!r}")
    if not value.strip():
        reason = "empty_instruction" if "instruction" in key else "bad_field"
        raise SampleError(ref, reason, f"{key} is empty")
    return value


def _four_numbers(value: Any, ref: str, what: str, convention: str) -> list[float]:
    if not (isinstance(value, (list, tuple)) and len(value) == 4 and all(is_number(v) for v in value)):
        raise SampleError(ref, "bad_field", f"{what} must be 4 finite numbers {convention}, got {value!r}")
    return [float(v) for v in value]


def box_from_xywh(value: Any, ref: str, what: str = "bbox") -> Box:
    """``[x, y, w, h]`` (pixels, top-left corner + size; ScreenSpot-V2, OSWorld-G) -> ``(x_min, y_min, x_max, y_max)``.

    Raises:
        SampleError: ``bad_field`` for anything but 4 finite numbers; ``inverted_box`` for ``w <= 0`` or ``h <= 0``.
    """
    x, y, w, h = _four_numbers(value, ref, what, "[x, y, w, h]")
    if w <= 0 or h <= 0:
        raise SampleError(ref, "inverted_box", f"{what} {value!r} has zero or negative width/height")
    return x, y, x + w, y + h


def box_from_xyxy(value: Any, ref: str, what: str = "bbox") -> Box:
    """``[x1, y1, x2, y2]`` (ScreenSpot-Pro pixels, WebClick) -> ``(x_min, y_min, x_max, y_max)`` unchanged.

    Raises:
        SampleError: ``bad_field`` for anything but 4 finite numbers; ``inverted_box`` for ``x1 >= x2`` or
            ``y1 >= y2``.
    """
    x1, y1, x2, y2 = _four_numbers(value, ref, what, "[x1, y1, x2, y2]")
    if x1 >= x2 or y1 >= y2:
        raise SampleError(ref, "inverted_box", f"{what} {value!r} is inverted or has zero area")
    return x1, y1, x2, y2


def check_extent(extent: Box, width: int, height: int, ref: str, report: BenchmarkLoadReport, what: str) -> None:
    """Reject a target entirely outside the ``width x height`` image; warn (and keep) one partly outside.

    ``extent`` is the target's bounding box in original pixels (a box, or a polygon's extent).

    Raises:
        SampleError: ``box_outside_image`` when no pixel of the image is covered.
    """
    x0, y0, x1, y1 = extent
    if x1 < 0 or y1 < 0 or x0 > width or y0 > height:
        raise SampleError(ref, "box_outside_image", f"{what} {list(extent)} lies entirely outside the "
                                                     f"{width}x{height} image")  # fmt: skip
    if x0 < 0 or y0 < 0 or x1 > width or y1 > height:
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

BENCHMARKS: dict[str, type[Benchmark]] = {
    "screenspot-v2": ScreenSpotV2,
    "screenspot-pro": ScreenSpotPro,
    "osworld-g": OSWorldG,
    "webclick": WebClick,
    "canonical": Canonical,
}


def get_benchmark(name: str, **options) -> Benchmark:
    """The benchmark called ``name`` (a key of ``BENCHMARKS``), built with ``options``.

    Options: ``osworld-g`` takes ``subset="auto"|"plain"|"refined"``; ``webclick`` takes ``cache_dir``.

    Raises:
        ValueError: unknown name (the message lists the known ones), or options the benchmark does not take.
    """
    if name not in BENCHMARKS:
        raise ValueError(f"unknown benchmark {name!r}; choose one of: {', '.join(BENCHMARKS)}")
    try:
        return BENCHMARKS[name](**options)
    except TypeError as err:
        raise ValueError(f"benchmark {name!r} does not take options {sorted(options)}: {err}") from err


__all__ = ["BENCHMARKS", "Benchmark", "BenchmarkLoadReport", "get_benchmark", "load_report_dict"]
