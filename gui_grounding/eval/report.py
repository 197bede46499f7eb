"""Evaluation outputs: ``metrics.json``, ``results.md``, ``scores.jsonl`` and ``failures.html`` (a failure gallery).

* ``metrics.json``: ``{"benchmark": name, <the benchmark's metrics at top level, e.g. ScreenSpot-Pro's fine_grained /
  seeclick_style / leaderboard_* / overall>, "predictions": counts of records, predictions, missing, unknown ids,
  malformed records (and the samples they made wrong_format), duplicates (with the ``on_duplicate`` policy), unmapped
  harness details and harness disagreements (with examples and refs), "data": the load report (records read,
  ``num_samples`` = the denominator, errors per reason (``rejected``, ``reject_reasons``, ``rejects``), ``notes``,
  ``num_warnings`` and every warning with its ref), "targets_sha256": the identity of the scored data
  (:func:`targets_sha256`), "meta": caller's extras}``. Strict JSON (no NaN).
* ``scores.jsonl``: one line per sample in data order, ``{"sample_id", "correctness", "point" ([x, y] original
  pixels or null), "refusal", "target"}`` (:func:`write_scores`; ``target``: :func:`sample_target`);
  ``gui-grounding compare`` pairs two runs with it, and refuses runs whose targets differ.
* ``results.md``: a short header (samples, prediction problems, errors and warnings of the data) and
  ``benchmark.table(metrics)``.
* ``failures.html``: one self-contained page over the ``wrong`` and ``wrong_format`` samples in data order (at most
  ``max_failures``, the number omitted stated): per failure a thumbnail of the screenshot (at most 800 px wide) with
  the target box(es) / polygon(s) in green and the predicted point in red, a zoom around the target, the
  instruction, the raw response, the sample_id and the correctness. Images are JPEG files under ``failures/``
  referenced relatively, so the folder can be moved or archived as a whole. All text is HTML-escaped. A sample whose
  screenshot is missing or unreadable (rescoring needs no pixels, so such samples are scored) gets a card saying
  "image missing" instead of pictures. Every target box, polygon edge and point is clipped to the picture before it
  is drawn, so drawing costs what the picture's size allows, whatever the coordinates (a box 1e7 px wide).

Writing (``groundwork.outputs``): every file is written atomically (a unique temporary name, then a rename); an earlier
``metrics.json`` in the folder is removed first and the new one is written **last**, so a complete-looking summary
never sits beside missing or truncated outputs. A full disk or a read-only folder raises
:class:`groundwork.outputs.OutputError` (one line).
"""

from __future__ import annotations

import hashlib
import html
import json
import logging
import math
import os
import re

from groundwork.markdown import md_table
from groundwork.outputs import OutputError, atomic_writer, write_bytes, write_text
from groundwork.validate import open_image
from gui_grounding.data.annotations import load_report_dict
from gui_grounding.data.schema import LoadReport, Sample, SampleError, read_image_size
from gui_grounding.eval.benchmarks.base import Benchmark
from gui_grounding.eval.judge import CORRECT
from gui_grounding.eval.predictions import PredictionReport
from gui_grounding.eval.tables import fmt_headline
from gui_grounding.eval.tts import plot_calibration

logger = logging.getLogger(__name__)

TARGET, POINT = (0, 170, 0), (230, 0, 0)
OTHER_POINT = (30, 90, 230)  # the greedy point on the cards of a test-time run where the two answers disagree
RESERVED = ("benchmark", "predictions", "data", "meta", "targets_sha256")
#: per-sample results (``write_scores``), read by ``gui-grounding compare``
SCORES_FILE = "scores.jsonl"
_OWN_IMAGE = re.compile(r"^\d{4,}(_zoom)?\.jpg$")
# drawn marks are clipped to the picture grown by this many pixels (line widths and the point marker stay whole)
_MARGIN = 16
# the zoom picture is at most this size (and magnifies at most 4x)
ZOOM_SIZE = (480, 320)


def sample_target(s: Sample) -> dict:
    """What a sample is scored against, as JSON: ``{"boxes": [[x1, y1, x2, y2], ...], "polygons": [[[x, y], ...],
    ...], "refusal": bool, "image_size": [W, H]}`` (original pixels, floats; the size as the benchmark read it, null
    when unknown). Written per sample in ``scores.jsonl`` and hashed by :func:`targets_sha256`."""

    def size(v):
        return v if isinstance(v, int) and not isinstance(v, bool) else None

    return {
        "boxes": [[float(v) for v in b] for b in s.boxes],
        "polygons": [[[float(x), float(y)] for x, y in poly] for poly in s.polygons],
        "refusal": bool(s.refusal),
        "image_size": [size(s.width), size(s.height)],
    }


def targets_sha256(samples: list[Sample]) -> str:
    """The identity of the scored data: SHA-256 (hex) of the canonical JSON (sorted keys, no spaces, ASCII) of
    ``[[sample_id, sample_target(s)], ...]`` sorted by sample_id. Two runs share it exactly when they scored the same
    ids against the same boxes, polygons, refusal items and image sizes, whatever the file names or the order:
    ``gui-grounding compare`` pairs runs only on equal targets (issue 28: a benchmark name and coinciding generated
    ids do not make two data files one)."""
    items = sorted(([s.sample_id, sample_target(s)] for s in samples), key=lambda x: x[0])
    text = json.dumps(items, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False)
    return hashlib.sha256(text.encode("ascii")).hexdigest()


def write_reports(
    out_dir: str,
    benchmark: Benchmark,
    samples: list[Sample],
    results: dict[str, dict],
    metrics: dict,
    predictions: dict[str, dict],
    *,
    prediction_report: PredictionReport | None = None,
    load_report: LoadReport | None = None,
    meta: dict | None = None,
    max_failures: int = 200,
    tts: dict | None = None,
) -> dict:
    """Write ``scores.jsonl``, ``results.md``, ``failures.html`` (+ ``failures/*.jpg``) and, last, ``metrics.json``
    to ``out_dir``.

    Args:
        out_dir: output folder (created).
        benchmark: the benchmark the metrics come from (its ``name`` and ``table``).
        samples: the evaluated samples (original pixels).
        results: ``{sample_id: {"correctness", "point", "missing"}}`` (from ``results_from_predictions``).
        metrics: ``benchmark.metrics(samples, results)``.
        predictions: ``{sample_id: prediction}`` (for ``raw_response``; from ``load_predictions``).
        prediction_report: counts of prediction problems; without it only ``missing`` is counted (from ``results``).
        load_report: the benchmark's load report (records read, rejects, notes).
        meta: extra JSON-able facts for ``metrics.json["meta"]`` (model, backend, adapter, files, ...).
        max_failures: failures drawn in ``failures.html``; the rest are counted as omitted.
        tts: a test-time run (:func:`gui_grounding.eval.tts.tts_run`; ``results``/``metrics`` are then the mode's):
            ``metrics.json`` gains ``"greedy"`` (the greedy tables) and ``"tts"`` (the summary); ``results.md`` shows
            the greedy table, the cost per answer, the disagreements and ``calibration.png`` (consensus modes);
            ``scores.jsonl`` lines gain ``greedy_correctness`` and ``agreement``; failure cards of samples greedy got
            right are marked, with the greedy point drawn in blue beside the mode's in red.

    Returns:
        the ``metrics.json`` content.

    Raises:
        ValueError: ``metrics`` uses a reserved top-level key (``benchmark``, ``predictions``, ``data``, ``meta``),
            or is not strict JSON (NaN).
        OutputError: a file cannot be written (disk full, read-only folder); ``metrics.json`` is then absent.
    """
    clash = [k for k in RESERVED if k in metrics]
    if clash:
        raise ValueError(f"benchmark metrics use reserved key(s) {clash}")
    missing = sum(bool(r.get("missing")) for r in results.values())
    pred_summary = prediction_report.to_dict() if prediction_report else {"missing": missing}
    doc = {
        "benchmark": benchmark.name,
        **metrics,
        "predictions": pred_summary,
        "data": load_report_dict(load_report) if load_report else {"num_samples": len(samples)},
        "targets_sha256": targets_sha256(samples),
        "meta": meta or {},
    }
    if tts is not None:
        doc["greedy"], doc["tts"] = tts["greedy_metrics"], tts["summary"]
    # strict JSON (no NaN), ASCII (a lone surrogate in a ref is escaped, never an encoding error): checked before
    # anything is written
    summary = json.dumps(doc, indent=2, allow_nan=False) + "\n"
    try:
        os.makedirs(out_dir, exist_ok=True)
    except OSError as err:
        raise OutputError(err.errno, f"cannot create {out_dir}: {err.strerror or err}") from None
    metrics_path = os.path.join(out_dir, "metrics.json")
    remove_summary(metrics_path)
    write_scores(os.path.join(out_dir, SCORES_FILE), samples, results, predictions, tts=tts)
    md = _results_md(benchmark, samples, metrics, pred_summary, load_report)
    notes, answers = None, predictions
    if tts is not None:
        md = _tts_md(out_dir, benchmark, tts, md)
        answers = {
            sid: {**predictions.get(sid, {}), **a, "raw_response": _tts_raw(predictions.get(sid, {}))}
            for sid, a in tts["answers"].items()
        }
        notes = {
            sid: (
                f"greedy: correct; {tts['summary']['mode']}: {results[sid]['correctness']}",
                predictions.get(sid, {}).get("point"),
            )
            for sid in tts["summary"]["disagreements"]["greedy_only_correct_ids"]
        }
    write_text(os.path.join(out_dir, "results.md"), _text(md))
    write_failures_html(
        out_dir, samples, results, answers, title=f"{benchmark.name}: failures", max_failures=max_failures, notes=notes
    )
    write_text(metrics_path, summary)  # last: its presence says every other output is complete
    return doc


def write_scores(
    path: str, samples: list[Sample], results: dict[str, dict], predictions: dict[str, dict], *, tts: dict | None = None
) -> None:
    """``scores.jsonl``: one line per sample, in sample order, ``{"sample_id", "correctness", "point", "refusal",
    "target"}`` (``correctness`` one of ``correct`` / ``wrong`` / ``wrong_format``; ``point`` ``[x, y]`` in original
    pixels or null; ``refusal``: the answer was an explicit "no target"; ``target``: what it was scored against,
    :func:`sample_target`), written atomically before ``metrics.json``.
    ``gui-grounding compare`` (:mod:`gui_grounding.eval.compare`) reads it to compare two runs sample by sample."""
    lines = []
    for s in samples:
        r = results[s.sample_id]
        pred = predictions.get(s.sample_id) or {}
        line = {
            "sample_id": s.sample_id,
            "correctness": r["correctness"],
            "point": r.get("point"),
            "refusal": pred.get("refusal") is True,
            "target": sample_target(s),
        }
        if tts is not None:
            answer = tts["answers"].get(s.sample_id) or {}
            line["refusal"] = answer.get("refusal") is True
            line["greedy_correctness"] = tts["greedy_results"][s.sample_id]["correctness"]
            line["agreement"] = answer.get("agreement")
        lines.append(json.dumps(line, allow_nan=False))
    write_text(path, "".join(line + "\n" for line in lines))


def remove_summary(path: str) -> None:
    """Remove an earlier summary (``metrics.json``) before the outputs it summarises are rewritten.

    Raises:
        OutputError: it exists and cannot be removed.
    """
    try:
        os.remove(path)
    except FileNotFoundError:
        pass
    except OSError as err:
        raise OutputError(err.errno, f"cannot remove the earlier {path}: {err.strerror or err}") from None


def _text(text: str) -> str:
    """``text`` with lone surrogates (undecodable bytes of a path or response) written as ``\\udcXX`` escapes, so
    it encodes as UTF-8."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", errors="backslashreplace").decode("utf-8")


def _results_md(benchmark: Benchmark, samples, metrics, pred_summary: dict, load_report) -> str:
    lines = [f"# {benchmark.name}: {len(samples)} samples", ""]
    if "path" in pred_summary:
        lines.append(
            f"Predictions: `{pred_summary['path']}` ({pred_summary['format']}): "
            f"{pred_summary['predictions']} used; {pred_summary['missing']} samples without a prediction "
            f"(counted wrong_format); {pred_summary['unknown_ids']} unknown sample_ids, "
            f"{pred_summary['malformed']} malformed records ({pred_summary.get('malformed_samples', 0)} "
            f"samples scored wrong_format for them), {pred_summary['duplicates']} duplicates "
            f"(on_duplicate: {pred_summary.get('on_duplicate', 'error')}), "
            f"{pred_summary['not_mapped']} harness details not mapped.  "
        )
        if pred_summary.get("outside_frame"):  # 0-1000 answers beyond the grid (backends.outside_frame): never clipped
            lines.append(
                f"{pred_summary['outside_frame']} answers outside the 0-1000 frame (a coordinate above 1000 or below 0; "
                "flagged `outside_frame` on their predictions line, mapped as written and scored, not clipped).  "
            )
    else:
        lines.append(f"{pred_summary['missing']} samples without a prediction (counted wrong_format).  ")
    if load_report is not None:
        reasons = ", ".join(f"{k} {v}" for k, v in sorted(load_report.counts.items())) or "none"
        lines.append(
            f"Data: {load_report.num_records} records read, {load_report.num_samples} samples scored, "
            f"{len(load_report.rejects)} errors not scored ({reasons}).  "
        )
        warnings = getattr(load_report, "warnings", [])
        if warnings:
            notes = ", ".join(f"{k} {v}" for k, v in sorted(load_report.notes.items()))
            lines.append(f"Warnings (kept and scored): {len(warnings)} ({notes}); listed in metrics.json.")
    if "headline" in metrics:
        lines += ["", fmt_headline(metrics["headline"], benchmark.name)]
    lines += ["", benchmark.table(metrics), ""]
    published = metrics.get("published")
    if published:
        lines += [
            f"**Published vs ours** (profile `{published['profile']}`, {published['model']}; within 1 point "
            "counts as reproduced)",
            "",
        ]
        rows = [
            [
                r["published"],
                r["ours"],
                f"{r['difference']:+.2f}",
                "yes" if r["within_1_point"] else "no",
                r.get("denominator", "-")
                + (f" (ours over {r['ours_over']})" if r.get("ours_over") not in (None, r.get("denominator")) else ""),
                " ".join(f"{k}={v}" for k, v in r["options"].items()) or "-",
                r["source"],
            ]
            for r in published["rows"]
        ]
        lines += [
            md_table(
                ["published %", "ours %", "difference", "within 1 point", "denominator", "options", "source"],
                rows,
                left=0,
            )
            if rows
            else "No published number of this profile for this benchmark (and options).",
            "",
        ]
    lines += ["Failures: see `failures.html`. Per-sample results: `scores.jsonl` (`gui-grounding compare`).", ""]
    return "\n".join(lines)


def _tts_raw(pred: dict) -> str:
    """A failure card's raw text in a test-time run: the greedy answer, the K sampled answers, the crop answers, the
    zoom-tool turns (and its reject reason)."""
    parts = [f"greedy: {pred.get('raw_response')}"]
    info = pred.get("tts") if isinstance(pred.get("tts"), dict) else {}
    for key, label in (("sample_responses", "samples"), ("zoom_responses", "crop")):
        source = pred if key == "sample_responses" else info
        texts = source.get(key)
        if isinstance(texts, list) and texts:
            parts.append(f"{label}: " + " | ".join(str(t) for t in texts[:64]))
    turns = info.get("turns")
    if isinstance(turns, list):
        for k, turn in enumerate(turns[:16], 1):
            text = turn.get("text") if isinstance(turn, dict) else turn
            parts.append(f"zoom-tool turn {k}: {text}")
        if info.get("reject") is not None:
            parts.append(f"zoom-tool reject: {info.get('reject')}")
    return "\n".join(parts)


def _tts_md(out_dir: str, benchmark: Benchmark, tts: dict, md: str) -> str:
    """``results.md`` of a test-time run: the mode's page (``md``) followed by the greedy table of the same run, the
    cost per answer, the disagreements and the calibration plot (written here as ``calibration.png``)."""

    summary = tts["summary"]
    lines = [
        md.rstrip("\n"),
        "",
        f"## Test-time mode: {summary['label']}",
        "",
        f"The tables above score the {summary['mode']} answer; the greedy answer of the same run "
        "(same checkpoint, same prompts) scores:",
        "",
        *(
            [fmt_headline(tts["greedy_metrics"]["headline"], benchmark.name), ""]
            if "headline" in tts["greedy_metrics"]
            else []
        ),
        benchmark.table(tts["greedy_metrics"]),
        "",
    ]
    cost = summary["cost"]
    rows = []
    for name in ("greedy", summary["mode"]):
        c = cost.get(name) or {}
        rows.append(
            [
                name,
                c.get("calls", 0),
                c.get("sequences", 0),
                c.get("prompt_tokens", 0),
                c.get("generated_tokens", 0),
                c.get("wall_s", 0),
                c.get("calls_per_sample", "-"),
                c.get("wall_s_per_sample", "-"),
            ]
        )
    lines += [
        f"**Cost per answer** ({cost['lines_with_cost']} lines with a cost record; a {summary['mode']} run "
        "also pays the greedy pass where the mode does not use it)",
        "",
        md_table(
            [
                "answer",
                "model calls",
                "sequences",
                "prompt tokens",
                "generated tokens",
                "wall s",
                "calls / sample",
                "wall s / sample",
            ],
            rows,
            left=1,
        ),
        "",
    ]
    d = summary["disagreements"]
    lines += [
        f"**Disagreements**: greedy right and {summary['mode']} wrong on {d['greedy_only_correct']} samples "
        f"(marked in `failures.html`, greedy point in blue); {summary['mode']} right and greedy wrong on "
        f"{d['tts_only_correct']}.",
        "",
    ]
    if summary["fallbacks"]:
        shown = ", ".join(f"{k}: {v}" for k, v in sorted(summary["fallbacks"].items()))
        lines += [f"Zoom fallbacks (first-pass point kept): {shown}.", ""]
    tool = summary.get("zoom_tool")
    if tool:
        share = "-" if tool["zoomed_share"] is None else f"{100 * tool['zoomed_share']:.1f}%"
        rejects = ", ".join(f"{k}: {v}" for k, v in tool["rejects"].items()) or "none"
        lines += [
            f"**Zoom tool** (at most {tool['max_zoom_calls']} call(s) per sample): the model zoomed on "
            f"{tool['zoomed']} of {tool['samples']} samples ({share}), {tool['turns_per_sample']} turns per sample; "
            f"rejected calls (no point, scored as a miss): {rejects}.",
            "",
        ]
    bins = summary["agreement"]["calibration"]
    if bins:
        plot_calibration(
            bins,
            os.path.join(out_dir, "calibration.png"),
            title=f"{benchmark.name}: accuracy vs agreement, {summary['label']}",
        )
        rows = [
            [
                f"{b['low']:.1f}-{b['high']:.1f}",
                b["samples"],
                b["correct"],
                "-" if b["accuracy"] is None else f"{b['accuracy']:.2f}",
            ]
            for b in bins
        ]
        lines += [
            f"**Calibration** (agreement = share of the K samples in the winning region; mean "
            f"{summary['agreement']['mean']})",
            "",
            md_table(["agreement", "samples", "correct", "accuracy %"], rows, left=1),
            "",
            "![accuracy against agreement](calibration.png)",
            "",
        ]
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------------------------------
# failure gallery


def write_failures_html(
    out_dir: str,
    samples: list[Sample],
    results: dict[str, dict],
    predictions: dict[str, dict],
    *,
    title: str = "failures",
    max_failures: int = 200,
    max_width: int = 800,
    notes: dict[str, tuple[str, list | None]] | None = None,
) -> str:
    """Write ``out_dir/failures.html`` and its images under ``out_dir/failures/``; return the HTML path.

    Thumbnails are at most ``max_width`` pixels wide (and 900 high); zooms show the target's neighbourhood at up to 4x.
    Images this function wrote earlier (``NNNN.jpg``, ``NNNN_zoom.jpg``) are removed first, so a rerun leaves no stale
    pictures. ``notes``: ``{sample_id: (text, other point)}`` marks a card (a test-time run: the samples greedy got
    right) with the text, and draws the other point in blue beside the card's point in red.
    """
    img_dir = prepare_image_dir(os.path.join(out_dir, "failures"))
    failures = [s for s in samples if results[s.sample_id]["correctness"] != CORRECT]
    shown = failures[:max_failures]
    counts: dict[str, int] = {}
    for s in failures:
        counts[results[s.sample_id]["correctness"]] = counts.get(results[s.sample_id]["correctness"], 0) + 1
    notes = notes or {}
    cards = [
        _card(i, s, results[s.sample_id], predictions.get(s.sample_id), img_dir, max_width, note=notes.get(s.sample_id))
        for i, s in enumerate(shown, start=1)
    ]
    summary = ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) or "none"
    omitted = len(failures) - len(shown)
    page = _PAGE.format(
        title=html.escape(title),
        summary=html.escape(
            f"{len(failures)} of {len(samples)} samples failed ({summary}); showing {len(shown)}"
            + (f", {omitted} omitted (max_failures={max_failures})" if omitted else "")
        ),
        cards="\n".join(cards),
    )
    path = os.path.join(out_dir, "failures.html")
    write_bytes(path, page.encode("utf-8", errors="replace"))  # a lone surrogate in a response must not stop it
    return path


def prepare_image_dir(img_dir: str) -> str:
    """Create ``img_dir`` and remove the pictures an earlier gallery wrote there (``NNNN.jpg``, ``NNNN_zoom.jpg``), so
    a rerun leaves no stale pictures; returns ``img_dir``. Shared by the failure gallery and ``gui-grounding compare``.

    Raises:
        OutputError: the folder cannot be created or cleaned.
    """
    try:
        os.makedirs(img_dir, exist_ok=True)
        for name in os.listdir(img_dir):
            if _OWN_IMAGE.match(name):
                os.remove(os.path.join(img_dir, name))
    except OSError as err:
        raise OutputError(err.errno, f"cannot prepare {img_dir}: {err.strerror or err}") from None
    return img_dir


def _fmt_num(v: float) -> str:
    return f"{v:g}"


def _describe_targets(s: Sample) -> str:
    if s.refusal:
        return "none (refusal item: correct only on a refusal answer)"
    parts = [f"box ({', '.join(_fmt_num(v) for v in b)})" for b in s.boxes]
    parts += [f"polygon of {len(p)} vertices" for p in s.polygons]
    return "; ".join(parts) + " (x_min, y_min, x_max, y_max px)" if s.boxes else "; ".join(parts)


def _card(
    i: int,
    s: Sample,
    result: dict,
    pred: dict | None,
    img_dir: str,
    max_width: int,
    *,
    note: tuple[str, list | None] | None = None,
) -> str:
    point = result.get("point")
    if result.get("missing"):
        point_text = "no prediction for this sample"
    elif result.get("malformed"):
        point_text = f"malformed prediction record: {result['malformed']}"
    elif point is None:
        point_text = "no point (null)"
    else:
        point_text = f"({_fmt_num(point[0])}, {_fmt_num(point[1])}) px"
        if _known_size(s) and not (0 <= point[0] <= s.width and 0 <= point[1] <= s.height):
            point_text += f" -- outside the {s.width}x{s.height} image (marker at the edge)"
    raw = (pred or {}).get("raw_response")
    raw = "" if raw is None else str(raw)
    if len(raw) > 2000:
        raw = raw[:2000] + f" ... [{len(raw) - 2000} more characters]"
    problem = _image_problem(s)
    if problem is not None:
        imgs = f'<p class="err">{html.escape(f"cannot draw {s.image_path}: image missing ({problem})")}</p>'
    else:
        try:
            marks = None if note is None else [(note[1], OTHER_POINT), (point, POINT)]
            images = _draw(s, point, img_dir, i, max_width, marks=marks)
            imgs = "".join(f'<img src="failures/{html.escape(n)}" alt="{html.escape(a)}">' for n, a in images)
        except OutputError:  # the disk, not the sample: the run fails with one line
            raise
        except Exception as err:  # a corrupt screenshot must not stop the report
            imgs = f'<p class="err">{html.escape(f"cannot draw {s.image_path}: {type(err).__name__}: {err}")}</p>'
    size = f"{s.width}x{s.height}" if _known_size(s) else "size unknown"
    e = html.escape
    flag = "" if note is None else f' <span class="disagree">{e(note[0])} (greedy point in blue)</span>'
    return (
        f'<div class="card"><h3>#{i} <code>{e(s.sample_id)}</code> '
        f'<span class="{e(result["correctness"])}">{e(result["correctness"])}</span>{flag}</h3>\n'
        f"<p><b>instruction</b>: {e(s.instruction)}</p>\n"
        f"<p><b>predicted</b>: {e(point_text)}<br><b>target</b>: {e(_describe_targets(s))}<br>"
        f"<b>image</b>: {e(s.image_path)} ({size})</p>\n"
        f"<p><b>raw response</b>:</p><pre>{e(raw) if raw else '(none)'}</pre>\n{imgs}</div>"
    )


def _known_size(s: Sample) -> bool:
    return s.width > 0 and s.height > 0


def _image_problem(s: Sample) -> str | None:
    """Why the sample's screenshot cannot be drawn (missing, not a file, over the pixel limit, unreadable), or None;
    read from its header only (``groundwork.validate``'s checker, so an oversized image is never decoded)."""

    try:
        read_image_size(s.image_path, s.sample_id, verify=False)
    except SampleError as err:
        return f"{err.reason}: {err.message}"
    return None


def _target_extent(s: Sample) -> tuple[float, float, float, float] | None:
    xs, ys = [], []
    for b in s.boxes:
        xs += [b[0], b[2]]
        ys += [b[1], b[3]]
    for poly in s.polygons:
        xs += [p[0] for p in poly]
        ys += [p[1] for p in poly]
    return (min(xs), min(ys), max(xs), max(ys)) if xs else None


def clip_segment(
    p: tuple[float, float], q: tuple[float, float], size: tuple[int, int], margin: float = _MARGIN
) -> tuple[tuple[float, float], tuple[float, float]] | None:
    """The part of segment ``p``-``q`` inside ``[-margin, width + margin] x [-margin, height + margin]``
    (Liang-Barsky), or None when none of it is; exact, so a clipped edge lies where the full one would."""
    lo_x, lo_y, hi_x, hi_y = -margin, -margin, size[0] + margin, size[1] + margin
    (x0, y0), (x1, y1) = p, q
    dx, dy = x1 - x0, y1 - y0
    t0, t1 = 0.0, 1.0
    for den, num in ((-dx, x0 - lo_x), (dx, hi_x - x0), (-dy, y0 - lo_y), (dy, hi_y - y0)):
        if den == 0:
            if num < 0:
                return None
            continue
        t = num / den
        if den < 0:
            t0 = max(t0, t)
        else:
            t1 = min(t1, t)
        if t0 > t1:
            return None
    return (x0 + t0 * dx, y0 + t0 * dy), (x0 + t1 * dx, y0 + t1 * dy)


def _draw_path(draw, points: list[tuple[float, float]], size: tuple[int, int], fill) -> None:
    """A closed outline through ``points``, each edge clipped to the picture (so the cost is bounded by its size)."""
    for p, q in zip(points, points[1:] + points[:1], strict=True):
        seg = clip_segment(p, q, size)
        if seg is not None:
            draw.line(list(seg), fill=fill, width=2)


def _draw_marks(
    draw, s: Sample, point, ox: float, oy: float, sx: float, sy: float, size: tuple[int, int], *, marks=None
) -> None:
    """Targets (green) and point (red) mapped by ``(v - o) * scale`` into an image of ``size``, every mark clipped
    to the image (the point marker clamped to its edge). ``marks``: ``[(point or None, (r, g, b))]`` drawn instead of
    the red ``point`` (``gui-grounding compare`` draws each run's point in its own colour)."""
    for b in s.boxes:  # an inverted box (kept with a warning) is drawn over its corners
        x0, x1 = sorted(((b[0] - ox) * sx, (b[2] - ox) * sx))
        y0, y1 = sorted(((b[1] - oy) * sy, (b[3] - oy) * sy))
        _draw_path(draw, [(x0, y0), (x1, y0), (x1, y1), (x0, y1)], size, TARGET)
    for poly in s.polygons:
        _draw_path(draw, [((x - ox) * sx, (y - oy) * sy) for x, y in poly], size, TARGET)
    for p, colour in [(point, POINT)] if marks is None else marks:
        if p is None:
            continue
        px, py = (p[0] - ox) * sx, (p[1] - oy) * sy
        px, py = min(max(px, 0), size[0] - 1), min(max(py, 0), size[1] - 1)
        r = 7
        draw.ellipse([px - r, py - r, px + r, py + r], outline=colour, width=2)
        draw.line([px - r - 4, py, px + r + 4, py], fill=colour, width=2)
        draw.line([px, py - r - 4, px, py + r + 4], fill=colour, width=2)


def zoom_box(s: Sample, point, width: int, height: int, *, more=()) -> tuple[int, int, int, int] | None:
    """The crop ``(left, top, right, bottom)`` of the zoom picture, inside the ``width x height`` image, or None
    when the target lies outside it (nothing to zoom on). Around the target extent (and each of ``point`` and the
    points in ``more`` that is near it), at least 240x160 px."""
    extent = _target_extent(s)
    if extent is None:
        return None
    x0, y0, x1, y1 = extent
    cx, cy = (x0 + x1) / 2, (y0 + y1) / 2
    for p in (point, *more):
        if p is not None and abs(p[0] - cx) < 300 and abs(p[1] - cy) < 200:
            x0, y0, x1, y1 = min(x0, p[0]), min(y0, p[1]), max(x1, p[0]), max(y1, p[1])
    cx, cy = (x0 + x1) / 2, (y0 + y1) / 2
    half_w, half_h = max(120, (x1 - x0) / 2 + 24), max(80, (y1 - y0) / 2 + 24)
    box = (
        max(0, min(width, math.floor(cx - half_w))),
        max(0, min(height, math.floor(cy - half_h))),
        max(0, min(width, math.floor(cx + half_w) + 1)),
        max(0, min(height, math.floor(cy + half_h) + 1)),
    )
    return box if box[2] > box[0] and box[3] > box[1] else None


def _save_jpeg(image, path: str) -> None:
    with atomic_writer(path, "wb") as f:
        image.save(f, format="JPEG", quality=85)


def _draw(s: Sample, point, img_dir: str, i: int, max_width: int, *, marks=None) -> list[tuple[str, str]]:
    """Save the thumbnail (and a zoom when there is a target); return ``[(file name, alt text)]``. ``marks``:
    ``[(point or None, (r, g, b))]`` drawn instead of the red ``point`` (:func:`_draw_marks`)."""
    from PIL import Image, ImageDraw

    out = []
    im = open_image(s.image_path)  # the displayed frame (EXIF applied), as boxes and points are
    w, h = im.size
    scale = min(1.0, max_width / w, 900 / h)
    tw, th = max(1, round(w * scale)), max(1, round(h * scale))
    thumb = im.resize((tw, th), Image.Resampling.LANCZOS) if scale < 1 else im.copy()
    _draw_marks(ImageDraw.Draw(thumb), s, point, 0, 0, tw / w, th / h, (tw, th), marks=marks)
    name = f"{i:04d}.jpg"
    _save_jpeg(thumb, os.path.join(img_dir, name))
    what = "prediction (red)" if marks is None else "the runs' points"
    out.append((name, f"screenshot with target (green) and {what}"))
    box = zoom_box(s, point, w, h, more=[p for p, _ in marks or []])
    if box is not None:
        crop = im.crop(box)
        zscale = min(4.0, ZOOM_SIZE[0] / crop.width, ZOOM_SIZE[1] / crop.height)
        zw = max(1, min(ZOOM_SIZE[0], round(crop.width * zscale)))
        zh = max(1, min(ZOOM_SIZE[1], round(crop.height * zscale)))
        zoom = crop.resize((zw, zh), Image.Resampling.LANCZOS)
        zoom_scale = (zw / crop.width, zh / crop.height)
        _draw_marks(ImageDraw.Draw(zoom), s, point, box[0], box[1], *zoom_scale, (zw, zh), marks=marks)
        name = f"{i:04d}_zoom.jpg"
        _save_jpeg(zoom, os.path.join(img_dir, name))
        out.append((name, "zoom around the target"))
    return out


#: the head of the sample galleries (failures.html here, compare.html in ``gui_grounding.eval.compare``): the title
#: and the card styles both share; each page adds its own styles and body (``str.format`` fields: ``{title}``)
GALLERY_HEAD = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>
body {{ font-family: sans-serif; margin: 1.5em; max-width: 1400px; }}
.card {{ border: 1px solid #ccc; border-radius: 6px; padding: 0.6em 1em; margin: 1em 0; }}
.card img {{ max-width: 800px; margin: 0.3em 0.6em 0.3em 0; vertical-align: top; border: 1px solid #ddd; }}
"""

_PAGE = (
    GALLERY_HEAD
    + """pre {{ background: #f5f5f5; padding: 0.5em; white-space: pre-wrap; word-break: break-word; }}
.wrong {{ color: #b00; }} .wrong_format {{ color: #a60; }} .err {{ color: #b00; }}
.disagree {{ color: #1e5ae6; font-size: 0.8em; border: 1px solid #1e5ae6; border-radius: 4px; padding: 0 0.3em; }}
.legend span {{ font-weight: bold; }}
</style></head><body>
<h1>{title}</h1>
<p>{summary}</p>
<p class="legend"><span style="color:#0a0">green</span>: target box / polygon;
<span style="color:#e00">red</span>: predicted point (original-image pixels, drawn scaled).</p>
{cards}
</body></html>
"""
)
