"""``gui-grounding compare RUN_A RUN_B``: two eval runs on the same benchmark, sample by sample.

Each run is an output folder of ``gui-grounding eval``: ``metrics.json`` (benchmark, OSWorld-G ``subset``, ``meta``)
and ``scores.jsonl``, the per-sample results eval writes before ``metrics.json``
(:func:`gui_grounding.eval.report.write_scores`: ``{"sample_id", "correctness", "point", "refusal"}``, the point in
original pixels). The comparison gives:

* both accuracies (correct / samples compared, percent) with their 95% Wilson intervals, and the difference B - A in
  points;
* the paired counts (both right, right only in A, right only in B, both wrong) and McNemar's test on the discordant
  samples (:func:`gui_grounding.eval.stats.mcnemar`: exact binomial below 25 discordant samples, else chi-square with
  continuity correction);
* the ids of the samples each run alone got right (at most ``--max-listed`` per side);
* with ``--out DIR``: ``compare.json`` (the numbers), ``compare.md`` (what is printed) and ``compare.html``, a gallery
  of the samples the runs disagree on: each screenshot (and a zoom on the target) with the target in green, A's point
  in blue and B's in orange (drawn by :mod:`gui_grounding.eval.report`'s helpers; images under ``DIR/compare/``).
  The gallery reads the screenshots from the benchmark data that A's ``metrics.json`` names (``meta.data``, else B's);
  when it cannot be read, the page says so and the numbers stand. Every file is written atomically,
  ``compare.json`` last.

Refused, with one line on stderr and exit status 2:

* a folder without ``metrics.json`` (not a finished eval), or with a malformed ``metrics.json`` (not a regular file,
  not strict JSON, a key twice);
* a folder without ``scores.jsonl`` (written by eval since issue 19): compare does not rescore on its own (that would
  write into a run folder as a side effect); the message gives the ``gui-grounding eval --predictions`` command, built
  from the folder's ``meta``, that rescores it in place and writes ``scores.jsonl``;
* runs on different benchmarks, or on different OSWorld-G subsets (``plain`` vs ``refined``);
* runs on different **scored data** (:func:`check_targets`): a benchmark name and coinciding sample ids do not make
  two data files one (two canonical files read without ids both get ``test:0``, ``test:1``, ...). Each run records
  ``targets_sha256`` in ``metrics.json`` (:func:`gui_grounding.eval.report.targets_sha256`: every sample's id,
  boxes, polygons, refusal flag and image size) and each sample's ``target`` in ``scores.jsonl``. Equal hashes
  pass; otherwise the compared samples' ``target`` lines must be equal (a run of an older version has neither:
  then its targets cannot be checked, and compare says so on stderr, in ``compare.md`` and in ``compare.json``
  ``targets.check = "unverified"``);
* different sample sets (the message says how many samples are only in A and only in B), unless ``--intersect``:
  then only the common samples are compared and the numbers of those left out are reported.
"""

from __future__ import annotations

import argparse
import html
import math
import os
import shlex
import sys
from typing import Any

from groundwork import validate
from groundwork.argtypes import add_number_flag, integer
from groundwork.markdown import md_table
from groundwork.outputs import OutputError, OutputLock, check_outputs, write_bytes, write_json, write_text
from groundwork.records import RecordError, container_problem, iter_records, load_json_file
from groundwork.validate import short_repr
from gui_grounding.eval.benchmarks import get_benchmark
from gui_grounding.eval.judge import CORRECT, WRONG, WRONG_FORMAT
from gui_grounding.eval.report import GALLERY_HEAD, _draw, _image_problem, prepare_image_dir
from gui_grounding.eval.stats import mcnemar, wilson_interval
from gui_grounding.eval.tables import fmt_ci

#: point colours in compare.html (RGB); the target is report.TARGET (green)
COLOUR_A, COLOUR_B = (0, 90, 230), (240, 140, 0)
SCORES_FILE = "scores.jsonl"
GALLERY_DIR = "compare"


class CompareError(ValueError):
    """Two runs that cannot be compared, with a one-line reason."""


_SHA256_HEX = frozenset("0123456789abcdef")


def _point_ok(point: Any) -> bool:
    """``None`` or ``[x, y]`` of two finite numbers (not booleans)."""
    if point is None:
        return True
    return (
        isinstance(point, list)
        and len(point) == 2
        and all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in point)
    )


def rescore_command(folder: str, metrics: dict) -> str:
    """The ``gui-grounding eval`` command that rescores ``folder`` in place (writing ``scores.jsonl``), from its
    ``metrics.json`` (``meta.benchmark``, ``meta.data``, ``meta.predictions``, ``subset``); placeholders in capitals
    where the folder does not say."""
    meta = metrics.get("meta") if isinstance(metrics.get("meta"), dict) else {}

    def arg(value: Any, placeholder: str) -> str:
        return shlex.quote(value) if isinstance(value, str) and value else placeholder

    words = ["gui-grounding eval", "--benchmark", arg(meta.get("benchmark") or metrics.get("benchmark"), "NAME")]
    words += ["--data", arg(meta.get("data"), "DATA"), "--predictions", arg(meta.get("predictions"), "PREDICTIONS")]
    if isinstance(metrics.get("subset"), str):
        words += ["--subset", shlex.quote(metrics["subset"])]
    tts = meta.get("tts") if isinstance(meta.get("tts"), dict) else {}
    if isinstance(tts.get("mode"), str) and tts["mode"] != "greedy":  # a test-time run scores its mode's answers
        words += ["--tts", shlex.quote(tts["mode"])]
        if isinstance(tts.get("region"), (int, float)) and not isinstance(tts.get("region"), bool):
            words += ["--tts-region", shlex.quote(f"{tts['region']:g}")]
        calls = tts.get("max_zoom_calls")  # zoom-tool's (its summary and label)
        if isinstance(calls, int) and not isinstance(calls, bool) and 1 <= calls <= 99:
            words += ["--max-zoom-calls", str(calls)]
    return " ".join([*words, "--out", shlex.quote(folder)])


def read_run(folder: str) -> dict:
    """Read an eval output folder.

    ``scores.jsonl`` is read by the one record reader (``groundwork.records.iter_records``: LF, CRLF or CR-only lines, a
    bad line is one error and the lines after it are read). A bad record is rejected on its own, counted and reported
    (``rejected``: ``(ref, reason, message)``), and its sample is missing from the run (so the sample sets differ,
    unless ``--intersect``): ``unparseable_record`` (not JSON, not an object), ``duplicate_key`` (a key twice),
    ``not_a_scores_line`` (no string ``sample_id``), ``bad_correctness`` (not correct / wrong / wrong_format),
    ``bad_point`` (neither null nor two finite numbers), ``duplicate_id`` (a sample id a second time: the first
    line is kept).

    Returns:
        ``{"folder", "metrics": the metrics.json object, "scores": {sample_id: scores line}, "order": [sample_id,
        ...] in data order, "rejected": [(ref, reason, message), ...]}``.

    Raises:
        CompareError: no or malformed ``metrics.json`` (an object with a string ``benchmark``); no ``scores.jsonl``
            (the message gives the command that writes it); a scores file that is not a regular file or cannot be
            read; no usable sample; an ``agreement`` other than null or a finite number in
            ``[0, 1]`` (:func:`groundwork.validate.bounded_number`) rejects its line.
    """
    metrics_path, scores_path = os.path.join(folder, "metrics.json"), os.path.join(folder, SCORES_FILE)
    if not os.path.isfile(metrics_path):
        raise CompareError(f"{metrics_path} not found: {folder} is not a finished `gui-grounding eval` output folder")
    for path in (metrics_path, scores_path):  # not JSON text (gzip, UTF-16, ...): named as every reader names it
        problem = container_problem(path) if os.path.lexists(path) else None
        if problem is not None:
            raise CompareError(f"{path}: {problem}")
    try:
        metrics = load_json_file(metrics_path, "metrics")  # a regular file of strict JSON, no key twice
    except ValueError as err:
        raise CompareError(f"cannot read {err}") from None
    if not isinstance(metrics, dict) or not isinstance(metrics.get("benchmark"), str):
        raise CompareError(f"{metrics_path}: not the metrics.json of `gui-grounding eval` (no benchmark name)")
    digest = metrics.get("targets_sha256")
    if digest is not None and not (isinstance(digest, str) and len(digest) == 64 and set(digest) <= _SHA256_HEX):
        raise CompareError(
            f"{metrics_path}: targets_sha256 must be 64 lowercase hex digits, got {validate.short_repr(digest)}"
        )
    if not os.path.isfile(scores_path):
        raise CompareError(
            f"{scores_path} not found (eval runs older than scores.jsonl): re-run eval on its predictions to write "
            f"it: {rescore_command(folder, metrics)}"
        )
    problem = container_problem(scores_path)
    if problem is not None:
        raise CompareError(f"cannot read {scores_path}: {problem}")
    scores: dict[str, dict] = {}
    rejected: list[tuple[str, str, str]] = []
    for ref, _, rec in iter_records(scores_path):
        reason, message = _scores_problem(rec, scores)
        if reason is not None:
            rejected.append((ref, reason, message))
            continue
        scores[rec["sample_id"]] = rec
    if not scores:
        why = f" ({len(rejected)} lines rejected, first: {rejected[0][0]}: {rejected[0][2]})" if rejected else ""
        raise CompareError(f"{scores_path}: no sample{why}")
    return {"folder": folder, "metrics": metrics, "scores": scores, "order": list(scores), "rejected": rejected}


def _scores_problem(rec: Any, scores: dict) -> tuple[str | None, str]:
    """``(reason, message)`` of a scores record that cannot be used (see :func:`read_run`), else ``(None, "")``."""
    if isinstance(rec, RecordError):
        return rec.reason, rec.message
    if not isinstance(rec.get("sample_id"), str):
        return "not_a_scores_line", "not a scores line (an object with a string sample_id)"
    if rec.get("correctness") not in (CORRECT, WRONG, WRONG_FORMAT):
        got = short_repr(rec.get("correctness"))
        return "bad_correctness", f"correctness must be correct, wrong or wrong_format, got {got}"
    if not _point_ok(rec.get("point")):
        return "bad_point", f"point must be null or [x, y] (finite numbers), got {short_repr(rec.get('point'))}"
    if "target" in rec and not isinstance(rec["target"], dict):
        return "bad_target", f"target must be an object (boxes, image size), got {short_repr(rec['target'])}"
    agreement = rec.get("agreement")
    if agreement is not None and validate.bounded_number(agreement) is None:  # the predictions reader's value rule
        return "bad_agreement", f"agreement must be null or a finite number in [0, 1], got {short_repr(agreement)}"
    if rec["sample_id"] in scores:
        return "duplicate_id", f"sample {short_repr(rec['sample_id'])} a second time (the first line is kept)"
    return None, ""


def _rejected_doc(rejected: list, max_listed: int) -> dict:
    """``{"count", "reasons": {reason: count}, "first": [{"ref", "reason", "message"}, ...] (at most max_listed)}``."""
    reasons: dict[str, int] = {}
    for _, reason, _ in rejected:
        reasons[reason] = reasons.get(reason, 0) + 1
    first = [{"ref": ref, "reason": reason, "message": message} for ref, reason, message in rejected[:max_listed]]
    return {"count": len(rejected), "reasons": reasons, "first": first}


def _rejected_note(run: dict) -> str:
    """One sentence on the scores lines of ``run`` that were rejected ("" when none)."""
    rejected = run.get("rejected") or []
    if not rejected:
        return ""
    ref, _, message = rejected[0]
    return f"{len(rejected)} scores lines of {run['folder']} rejected (first: {ref}: {message})"


def _benchmark_key(run: dict) -> tuple:
    return run["metrics"]["benchmark"], run["metrics"].get("subset")


def _describe(key: tuple) -> str:
    return key[0] + (f" ({key[1]})" if key[1] is not None else "")


def check_targets(a: dict, b: dict, common: list[str]) -> dict:
    """Whether runs ``a`` and ``b`` scored the same data on the ``common`` samples: ``{"a", "b"}`` (their
    ``targets_sha256``, or None) and ``"check"``: ``"sha256"`` (equal hashes), ``"per-sample"`` (every common
    sample's ``target`` line equal) or ``"unverified"`` (a run records neither: with ``"warning"``, the line compare
    prints).

    Raises:
        CompareError: the hashes differ and the per-sample targets cannot show the common samples equal, or a common
            sample's targets differ (the message counts them and names the first).
    """
    ha, hb = a["metrics"].get("targets_sha256"), b["metrics"].get("targets_sha256")
    out = {"a": ha, "b": hb}
    if ha is not None and ha == hb:
        return {**out, "check": "sha256"}
    if all("target" in a["scores"][s] and "target" in b["scores"][s] for s in common):
        differ = [s for s in common if a["scores"][s]["target"] != b["scores"][s]["target"]]
        if differ:
            first = differ[0]
            raise CompareError(
                f"different scored data under the same ids: {len(differ)} of {len(common)} samples have other "
                f"targets in {a['folder']} and {b['folder']} (first {first!r}: "
                f"{validate.short_repr(a['scores'][first]['target'], 200)} vs "
                f"{validate.short_repr(b['scores'][first]['target'], 200)}); pairing them would test nothing"
            )
        return {**out, "check": "per-sample"}
    if ha is not None and hb is not None:
        raise CompareError(
            f"different scored data: targets_sha256 {ha[:12]}... in {a['folder']} and {hb[:12]}... in {b['folder']} "
            "(other boxes, image sizes or ids under the same benchmark name); pairing them would test nothing"
        )
    old = [run["folder"] for run, h in ((a, ha), (b, hb)) if h is None]
    warning = (
        f"cannot check that both runs scored the same data: {', '.join(old)} records no targets_sha256 and no "
        "per-sample targets (eval before issue 28); the pairing below assumes equal ids mean equal targets. "
        "Rescore with the current version to check it"
    )
    return {**out, "check": "unverified", "warning": warning}


def compare_runs(a: dict, b: dict, *, intersect: bool = False, max_listed: int = 50) -> dict:
    """The comparison document (``compare.json``) of two runs read by :func:`read_run`.

    Returns:
        ``{"benchmark", "subset", "num_samples": samples compared, "left_out": {"only_in_a", "only_in_b"},
        "rejected_lines": {"a"/"b": {"count", "reasons", "first": at most ``max_listed`` {"ref", "reason",
        "message"}}} (the scores lines :func:`read_run` rejected),
        "a"/"b": {"folder", "model", "num_correct", "accuracy" (percent, 2 decimals), "ci95" ([low, high] percent)},
        "difference_b_minus_a" (points, 2 decimals), "paired": {"both_right", "only_a", "only_b", "both_wrong"},
        "mcnemar": {"method", "statistic", "p_value", "discordant"}, "only_a_right"/"only_b_right": sample ids in
        data order (at most ``max_listed``), "max_listed", "targets": :func:`check_targets`}``. A sample counts as right when its correctness is
        ``correct`` (``wrong`` and ``wrong_format`` are both wrong).

    Raises:
        CompareError: different benchmarks or OSWorld-G subsets; different scored data (:func:`check_targets`);
            different sample sets without ``intersect``; no sample in common.
    """
    key_a, key_b = _benchmark_key(a), _benchmark_key(b)
    if key_a != key_b:
        raise CompareError(
            f"different benchmarks: {a['folder']} is {_describe(key_a)}, {b['folder']} is {_describe(key_b)}"
        )
    only_in_a = [s for s in a["order"] if s not in b["scores"]]
    only_in_b = [s for s in b["order"] if s not in a["scores"]]
    if (only_in_a or only_in_b) and not intersect:
        notes = "; ".join(note for note in (_rejected_note(a), _rejected_note(b)) if note)
        raise CompareError(
            f"different sample sets: {len(only_in_a)} samples only in {a['folder']} (e.g. {only_in_a[:3]}), "
            f"{len(only_in_b)} only in {b['folder']} (e.g. {only_in_b[:3]}); --intersect compares the common samples"
            + (f" ({notes})" if notes else "")
        )
    common = [s for s in a["order"] if s in b["scores"]]
    if not common:
        raise CompareError(f"{a['folder']} and {b['folder']} have no sample in common")
    targets = check_targets(a, b, common)
    right_only_a, right_only_b = _disagreements(a, b, common)
    both_right = sum(a["scores"][s]["correctness"] == CORRECT == b["scores"][s]["correctness"] for s in common)
    n = len(common)
    paired = {
        "both_right": both_right,
        "only_a": len(right_only_a),
        "only_b": len(right_only_b),
        "both_wrong": n - both_right - len(right_only_a) - len(right_only_b),
    }
    right_a, right_b = both_right + paired["only_a"], both_right + paired["only_b"]

    def run_doc(run: dict, right: int) -> dict:
        meta = run["metrics"].get("meta")
        model = meta.get("model") if isinstance(meta, dict) else None
        accuracy = round(100.0 * right / n, 2)
        return {"folder": run["folder"], "model": model, "num_correct": right, "accuracy": accuracy}

    return {
        "benchmark": key_a[0],
        "subset": key_a[1],
        "num_samples": n,
        "left_out": {"only_in_a": len(only_in_a), "only_in_b": len(only_in_b)},
        "rejected_lines": {k: _rejected_doc(run.get("rejected", []), max_listed) for k, run in (("a", a), ("b", b))},
        "a": {**run_doc(a, right_a), "ci95": wilson_interval(right_a, n)},
        "b": {**run_doc(b, right_b), "ci95": wilson_interval(right_b, n)},
        "difference_b_minus_a": round(100.0 * (right_b - right_a) / n, 2),
        "paired": paired,
        "mcnemar": {**mcnemar(paired["only_a"], paired["only_b"]), "discordant": paired["only_a"] + paired["only_b"]},
        "only_a_right": right_only_a[:max_listed],
        "only_b_right": right_only_b[:max_listed],
        "max_listed": max_listed,
        "targets": targets,
    }


def _disagreements(a: dict, b: dict, common: list[str]) -> tuple[list[str], list[str]]:
    """The common sample ids right only in A, and right only in B, in A's order."""
    only_a, only_b = [], []
    for sid in common:
        right_a, right_b = a["scores"][sid]["correctness"] == CORRECT, b["scores"][sid]["correctness"] == CORRECT
        if right_a != right_b:
            (only_a if right_a else only_b).append(sid)
    return only_a, only_b


def markdown(doc: dict) -> str:
    """``compare.md`` (also printed): the accuracies with intervals, the difference, the paired table, the test and
    the samples right in one run only."""

    p, test = doc["paired"], doc["mcnemar"]
    subset = f" ({doc['subset']})" if doc.get("subset") else ""
    runs = [
        [tag, doc[k]["folder"], doc[k]["num_correct"], f"{doc[k]['accuracy']:.2f}", fmt_ci(doc[k])]
        for tag, k in (("A", "a"), ("B", "b"))
    ]
    method = "exact binomial" if test["method"] == "exact" else "chi-square with continuity correction"
    statistic = f", statistic {test['statistic']:.4g}" if test["statistic"] is not None else ""
    lines = [
        f"# {doc['benchmark']}{subset}: A vs B on {doc['num_samples']} samples",
        "",
        *([f"**WARNING**: {doc['targets']['warning']}.", ""] if doc.get("targets", {}).get("warning") else []),
        md_table(["run", "folder", "correct", "accuracy %", "95% CI"], runs),
        "",
        f"Difference B - A: {doc['difference_b_minus_a']:+.2f} points.",
        "",
        md_table(
            ["", "B right", "B wrong"],
            [["A right", p["both_right"], p["only_a"]], ["A wrong", p["only_b"], p["both_wrong"]]],
        ),
        "",
        f"McNemar's test ({method}, {test['discordant']} discordant samples{statistic}): p = {test['p_value']:.4g}.",
        "",
    ]
    left = doc["left_out"]
    if left["only_in_a"] or left["only_in_b"]:
        lines += [
            f"Compared on the common samples only (--intersect): {left['only_in_a']} samples only in A and "
            f"{left['only_in_b']} only in B left out.",
            "",
        ]
    for tag, key in (("A", "a"), ("B", "b")):
        rejected = doc.get("rejected_lines", {}).get(key) or {}
        if rejected.get("count"):
            first = rejected["first"][0] if rejected["first"] else {"ref": "?", "reason": "?", "message": ""}
            lines += [
                f"Scores lines rejected in {tag}: {rejected['count']} (first: {first['ref']}: {first['reason']}: "
                f"{first['message']}).",
                "",
            ]
    for tag, key, count in (("A", "only_a_right", p["only_a"]), ("B", "only_b_right", p["only_b"])):
        more = f" (first {len(doc[key])})" if count > len(doc[key]) else ""
        lines += [f"Right only in {tag} ({count}){more}: {', '.join(doc[key]) or '-'}", ""]
    return "\n".join(lines)


def _load_samples(a: dict, b: dict, doc: dict) -> tuple[dict, str]:
    """``({sample_id: Sample}, "")`` of the benchmark data named by A's (else B's) ``meta.data``, or ``({}, why
    not)``."""

    problems = []
    for run in (a, b):
        meta = run["metrics"].get("meta")
        data = meta.get("data") if isinstance(meta, dict) else None
        if not isinstance(data, str) or not data:
            problems.append(f"{run['folder']}: metrics.json names no benchmark data (meta.data)")
            continue
        try:
            bench = get_benchmark(doc["benchmark"], **({"subset": doc["subset"]} if doc.get("subset") else {}))
            bench.need_pixels = False
            samples, _ = bench.load(data)
            return {s.sample_id: s for s in samples}, ""
        except Exception as err:  # noqa: BLE001  (the gallery is optional: the numbers stand without it)
            problems.append(f"cannot read {data}: {type(err).__name__}: {' '.join(str(err).split())[:300]}")
    return {}, "; ".join(problems)


def write_gallery(out_dir: str, doc: dict, a: dict, b: dict, *, max_cards: int = 100) -> str:
    """Write ``out_dir/compare.html`` (and its pictures under ``out_dir/compare/``): one card per sample the runs
    disagree on (data order, at most ``max_cards``), with the screenshot and a zoom on the target, the target in
    green, A's point in blue and B's in orange (points in original pixels, drawn scaled). A sample missing from the
    benchmark data, or whose screenshot is missing or unreadable, gets a line saying so. Pictures an earlier run wrote
    there are removed first. Returns the HTML path.

    Raises:
        OutputError: a file cannot be written.
    """

    img_dir = prepare_image_dir(os.path.join(out_dir, GALLERY_DIR))
    common = [s for s in a["order"] if s in b["scores"]]
    only_a, only_b = _disagreements(a, b, common)
    winners = {**dict.fromkeys(only_a, "A"), **dict.fromkeys(only_b, "B")}
    disagree = [s for s in common if s in winners]
    samples, problem = _load_samples(a, b, doc) if disagree[:max_cards] else ({}, "")
    e = html.escape
    cards = []
    for i, sid in enumerate(disagree[:max_cards], start=1):
        s = samples.get(sid)
        pa, pb = a["scores"][sid].get("point"), b["scores"][sid].get("point")
        lines = [
            f"<b>A</b> ({e(a['scores'][sid]['correctness'])}): {e(_fmt_point(pa))}",
            f"<b>B</b> ({e(b['scores'][sid]['correctness'])}): {e(_fmt_point(pb))}",
        ]
        if s is None:
            pictures = "<p class='err'>sample not in the benchmark data: no picture</p>"
        elif (why := _image_problem(s)) is not None:
            pictures = f"<p class='err'>{e(f'cannot draw {s.image_path}: image missing ({why})')}</p>"
        else:
            try:
                images = _draw(s, None, img_dir, i, 800, marks=[(pa, COLOUR_A), (pb, COLOUR_B)])
                pictures = "".join(f'<img src="{GALLERY_DIR}/{e(n)}" alt="{e(alt)}">' for n, alt in images)
            except OutputError:  # the disk, not the sample
                raise
            except Exception as err:  # noqa: BLE001  (one unreadable screenshot must not stop the page)
                pictures = f"<p class='err'>{e(f'cannot draw {s.image_path}: {type(err).__name__}: {err}')}</p>"
        instruction = e(s.instruction) if s is not None else ""
        cards.append(
            f'<div class="card"><h3>#{i} <code>{e(sid)}</code>: right only in {winners[sid]}</h3>'
            f"<p><b>instruction</b>: {instruction}<br>{'<br>'.join(lines)}</p>{pictures}</div>"
        )
    shown = min(len(disagree), max_cards)
    summary = (
        f"A = {a['folder']}, B = {b['folder']}; {len(disagree)} of {len(common)} samples right in one run only "
        f"({len(only_a)} only in A, {len(only_b)} only in B); showing {shown}"
        + (f", {len(disagree) - shown} omitted (--max-gallery {max_cards})" if shown < len(disagree) else "")
    )
    page = _PAGE.format(
        title=e(f"{doc['benchmark']}: A vs B"),
        summary=e(summary),
        problem=f"<p class='err'>{e(problem)}</p>" if problem else "",
        cards="\n".join(cards),
    )
    path = os.path.join(out_dir, "compare.html")
    write_bytes(path, page.encode("utf-8", errors="backslashreplace"))
    return path


def _fmt_point(point) -> str:
    return "no point" if point is None else f"({point[0]:g}, {point[1]:g}) px"


_PAGE = (
    GALLERY_HEAD
    + """.err {{ color: #b00; }} .legend span {{ font-weight: bold; }}
</style></head><body>
<h1>{title}</h1>
<p>{summary}</p>
<p class="legend"><span style="color:#0a0">green</span>: target; <span style="color:#005ae6">blue</span>: A's point;
<span style="color:#f08c00">orange</span>: B's point (original-image pixels, drawn scaled).</p>
{problem}
{cards}
</body></html>
"""
)


def main(args: argparse.Namespace) -> None:
    """Compare, print ``compare.md``, and with ``--out`` write the gallery, ``compare.md`` and ``compare.json``
    (last). A refusal (:class:`CompareError`) is one line on stderr and exit status 2."""

    try:
        a, b = read_run(args.run_a), read_run(args.run_b)
        doc = compare_runs(a, b, intersect=args.intersect, max_listed=args.max_listed)
    except CompareError as err:
        print(f"gui-grounding compare: error: {' '.join(str(err).split())}", file=sys.stderr)
        raise SystemExit(2) from None
    if doc["targets"].get("warning"):
        print(f"gui-grounding compare: WARNING: {doc['targets']['warning']}", file=sys.stderr)
    text = markdown(doc)
    print(text)
    if args.out:
        check_outputs(folders=[args.out], inputs=[args.run_a, args.run_b])
        with OutputLock(args.out, folder=True):
            write_gallery(args.out, doc, a, b, max_cards=args.max_gallery)
            write_text(os.path.join(args.out, "compare.md"), text)
            write_json(os.path.join(args.out, "compare.json"), doc)  # last: its presence says the rest is complete
        print(f"wrote {os.path.join(args.out, 'compare.json')}, compare.md and compare.html")


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Add the ``compare`` subcommand to the ``gui-grounding`` subparsers; returns its parser."""

    p = subparsers.add_parser(
        "compare",
        help="compare two eval runs on the same benchmark, sample by sample (intervals, McNemar, gallery)",
        description=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("run_a", help="eval output folder of run A (metrics.json, scores.jsonl), e.g. the baseline")
    p.add_argument("run_b", help="eval output folder of run B (same benchmark and samples as A)")
    p.add_argument(
        "--out",
        default=None,
        help="write compare.json, compare.md and compare.html (+ compare/*.jpg) into this folder (created; locked "
        "while written; refused if it is one of the runs)",
    )
    p.add_argument(
        "--intersect",
        action="store_true",
        help="compare on the samples both runs scored, reporting how many were left out (default: refuse runs "
        "whose sample sets differ)",
    )
    count = integer(min=0)
    add_number_flag(p, "--max-listed", count, 50, "sample ids listed per side (right only in A, right only in B)")
    add_number_flag(p, "--max-gallery", count, 100, "disagreeing samples drawn in compare.html (the rest are counted)")
    p.set_defaults(func=main)
    return p


__all__ = ["CompareError", "add_parser", "compare_runs", "main", "markdown", "read_run", "write_gallery"]
