"""``gui-grounding compare RUN_A RUN_B``: two eval runs on the same benchmark, sample by sample.

Each run is an output folder of ``gui-grounding eval`` (``metrics.json`` and ``scores.jsonl``, the per-sample results
every eval run writes). The comparison gives:

* both accuracies with their 95% Wilson intervals, and the difference B - A in points;
* the paired counts (both right, A only, B only, both wrong) and McNemar's test on the discordant samples (exact for
  fewer than 25, :func:`gui_grounding.eval.stats.mcnemar`);
* the samples each run alone got right (listed up to ``--max-listed``);
* with ``--out DIR``: ``compare.json``, ``compare.md`` and ``compare.html``, a side-by-side gallery of the samples the
  runs disagree on (each run's point drawn on the screenshot, target in green), all written atomically.

Refused (one line, exit status 2): a folder without ``metrics.json`` or ``scores.jsonl`` (eval writes both; rescore
an older folder with ``gui-grounding eval --predictions``), runs on different benchmarks (or OSWorld-G subsets), or
different sample sets unless ``--intersect`` (then only the common samples count, and how many were left out is said).
"""

from __future__ import annotations

import argparse
import html
import json
import os
import sys
from typing import Any

from gui_grounding.eval.judge import CORRECT
from gui_grounding.eval.stats import mcnemar, wilson_interval


class CompareError(ValueError):
    """Two runs that cannot be compared, with a one-line reason."""


def read_run(folder: str) -> dict:
    """``{"folder", "metrics", "scores": {sample_id: line}, "order": [sample_id, ...]}`` of an eval output folder.

    Raises:
        CompareError: no ``metrics.json`` or ``scores.jsonl``, or an unreadable or malformed line.
    """
    metrics_path, scores_path = os.path.join(folder, "metrics.json"), os.path.join(folder, "scores.jsonl")
    for path in (metrics_path, scores_path):
        if not os.path.isfile(path):
            raise CompareError(f"{path} not found: compare needs the outputs of `gui-grounding eval` (rescore an older "
                               "folder with `gui-grounding eval --predictions` to write scores.jsonl)")  # fmt: skip
    try:
        with open(metrics_path, encoding="utf-8") as f:
            metrics = json.load(f)
        scores, order = {}, []
        with open(scores_path, encoding="utf-8") as f:
            for n, line in enumerate(f, start=1):
                if not line.strip():
                    continue
                rec = json.loads(line)
                if not isinstance(rec, dict) or not isinstance(rec.get("sample_id"), str) or "correctness" not in rec:
                    raise CompareError(f"{scores_path}:{n}: not a scores line")
                if rec["sample_id"] in scores:
                    raise CompareError(f"{scores_path}:{n}: sample {rec['sample_id']!r} twice")
                scores[rec["sample_id"]] = rec
                order.append(rec["sample_id"])
    except (OSError, UnicodeDecodeError, ValueError) as err:
        if isinstance(err, CompareError):
            raise
        raise CompareError(f"cannot read the run in {folder}: {err}") from None
    if not isinstance(metrics, dict):
        raise CompareError(f"{metrics_path}: not a metrics object")
    return {"folder": folder, "metrics": metrics, "scores": scores, "order": order}


def _benchmark_key(run: dict) -> tuple:
    m = run["metrics"]
    return m.get("benchmark"), m.get("subset")


def compare_runs(a: dict, b: dict, *, intersect: bool = False, max_listed: int = 50) -> dict:
    """The comparison document of two runs read by :func:`read_run` (module docstring).

    Raises:
        CompareError: different benchmarks or subsets, no common sample, or different sample sets without
            ``intersect``.
    """
    if _benchmark_key(a) != _benchmark_key(b):
        raise CompareError(f"different benchmarks: {a['folder']} is {_benchmark_key(a)}, {b['folder']} is "
                           f"{_benchmark_key(b)}")  # fmt: skip
    only_in_a = [s for s in a["order"] if s not in b["scores"]]
    only_in_b = [s for s in b["order"] if s not in a["scores"]]
    if (only_in_a or only_in_b) and not intersect:
        raise CompareError(f"different sample sets: {len(only_in_a)} samples only in {a['folder']} (e.g. "
                           f"{only_in_a[:3]}), {len(only_in_b)} only in {b['folder']} (e.g. {only_in_b[:3]}); "
                           "--intersect compares the common samples")  # fmt: skip
    common = [s for s in a["order"] if s in b["scores"]]
    if not common:
        raise CompareError("the runs have no sample in common")
    counts = {"both_right": 0, "only_a": 0, "only_b": 0, "both_wrong": 0}
    only_a, only_b = [], []
    for sid in common:
        ra, rb = a["scores"][sid]["correctness"] == CORRECT, b["scores"][sid]["correctness"] == CORRECT
        if ra and rb:
            counts["both_right"] += 1
        elif ra:
            counts["only_a"] += 1
            only_a.append(sid)
        elif rb:
            counts["only_b"] += 1
            only_b.append(sid)
        else:
            counts["both_wrong"] += 1
    n = len(common)
    right_a, right_b = counts["both_right"] + counts["only_a"], counts["both_right"] + counts["only_b"]

    def run_doc(run: dict, right: int) -> dict:
        return {"folder": run["folder"], "model": run["metrics"].get("meta", {}).get("model"),
                "num_correct": right, "accuracy": round(100.0 * right / n, 2), "ci95": wilson_interval(right, n)}  # fmt: skip

    return {
        "benchmark": a["metrics"].get("benchmark"), "subset": a["metrics"].get("subset"), "num_samples": n,
        "left_out": {"only_in_a": len(only_in_a), "only_in_b": len(only_in_b)},
        "a": run_doc(a, right_a), "b": run_doc(b, right_b),
        "difference_b_minus_a": round(100.0 * (right_b - right_a) / n, 2),
        "paired": counts, "mcnemar": mcnemar(counts["only_a"], counts["only_b"]),
        "only_a_right": only_a[:max_listed], "only_b_right": only_b[:max_listed],
    }  # fmt: skip


def markdown(doc: dict) -> str:
    """``compare.md``: the accuracies, the paired table and the test."""
    from gui_grounding.eval.benchmarks import md_table

    def ci(run: dict) -> str:
        return f"{run['ci95'][0]:.2f}-{run['ci95'][1]:.2f}" if run["ci95"] else "-"

    p, test = doc["paired"], doc["mcnemar"]
    subset = f" ({doc['subset']})" if doc.get("subset") else ""
    lines = [f"# {doc['benchmark']}{subset}: A vs B on {doc['num_samples']} samples", "",
             md_table(["run", "folder", "correct", "accuracy %", "95% CI"],
                      [["A", doc["a"]["folder"], doc["a"]["num_correct"], f"{doc['a']['accuracy']:.2f}", ci(doc["a"])],
                       ["B", doc["b"]["folder"], doc["b"]["num_correct"], f"{doc['b']['accuracy']:.2f}", ci(doc["b"])]]),
             "", f"Difference B - A: {doc['difference_b_minus_a']:+.2f} points.", "",
             md_table(["", "B right", "B wrong"], [["A right", p["both_right"], p["only_a"]],
                                                   ["A wrong", p["only_b"], p["both_wrong"]]]),
             "", f"McNemar ({test['method']}, {p['only_a'] + p['only_b']} discordant samples): p = {test['p_value']:.4g}.",
             ""]  # fmt: skip
    left = doc["left_out"]
    if left["only_in_a"] or left["only_in_b"]:
        lines += [f"Compared on the common samples only: {left['only_in_a']} only in A and {left['only_in_b']} only "
                  "in B left out.", ""]  # fmt: skip
    lines += [f"Right only in A ({p['only_a']}): {', '.join(doc['only_a_right']) or '-'}", "",
              f"Right only in B ({p['only_b']}): {', '.join(doc['only_b_right']) or '-'}", ""]  # fmt: skip
    return "\n".join(lines)


def write_gallery(out_dir: str, doc: dict, a: dict, b: dict, *, max_cards: int = 100) -> str:
    """``compare.html``: the samples the runs disagree on, A's point and B's point each drawn on the screenshot (target
    in green), side by side; screenshots are read from the benchmark as run A's ``metrics.json`` names it
    (``meta.data``). A sample whose image cannot be read gets a line saying so. Returns the path."""
    from gui_grounding.eval.benchmarks import get_benchmark
    from gui_grounding.eval.report import _draw
    from vlm_r1.outputs import write_bytes

    meta = a["metrics"].get("meta", {})
    samples: dict[str, Any] = {}
    problem = ""
    try:
        options = {"subset": doc["subset"]} if doc.get("subset") else {}
        bench = get_benchmark(doc["benchmark"], **options)
        bench.need_pixels = False
        loaded, _ = bench.load(meta.get("data", ""))
        samples = {s.sample_id: s for s in loaded}
    except Exception as err:  # noqa: BLE001  (the gallery is optional: the numbers stand without it)
        problem = f"benchmark data not readable ({type(err).__name__}: {err}); no pictures"
    disagree = doc["only_a_right"] + doc["only_b_right"]
    cards = []
    for i, sid in enumerate(disagree[:max_cards], start=1):
        s = samples.get(sid)
        winner = "A" if sid in doc["only_a_right"] else "B"
        pictures = []
        for tag, run in (("a", a), ("b", b)):
            point = run["scores"][sid].get("point")
            folder = os.path.join(out_dir, "compare", tag)
            os.makedirs(folder, exist_ok=True)
            try:
                (name, _), *_ = _draw(s, point, folder, i, 560) if s is not None else [(None, None)]
                pictures.append(f'<figure><img src="compare/{tag}/{html.escape(name)}"><figcaption>{tag.upper()}: '
                                f"{html.escape(str(point))}</figcaption></figure>" if name else "")  # fmt: skip
            except Exception as err:  # noqa: BLE001  (one unreadable screenshot must not stop the page)
                pictures.append(f"<p>{tag.upper()}: cannot draw ({html.escape(type(err).__name__)})</p>")
        instruction = html.escape(s.instruction) if s is not None else "(sample not in the benchmark data)"
        cards.append(f'<div class="card"><h3>#{i} <code>{html.escape(sid)}</code>: right only in {winner}</h3>'
                     f"<p>{instruction}</p>{''.join(pictures)}</div>")  # fmt: skip
    page = (f"<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>compare</title><style>body{{font-family:"
            f"sans-serif}} figure{{display:inline-block;margin:0.3em}} .card{{border:1px solid #ccc;padding:0.5em;"
            f"margin:0.8em 0}}</style></head><body><h1>{html.escape(doc['benchmark'] or '')}: A vs B</h1>"
            f"<p>A = {html.escape(a['folder'])}, B = {html.escape(b['folder'])}; {len(disagree)} samples right in one "
            f"run only (showing {min(len(disagree), max_cards)}). Green: target; red: the run's point.</p>"
            f"<p>{html.escape(problem)}</p>{''.join(cards)}</body></html>")  # fmt: skip
    path = os.path.join(out_dir, "compare.html")
    write_bytes(path, page.encode("utf-8", errors="replace"))
    return path


def main(args: argparse.Namespace) -> None:
    """Run the comparison, print the table, write the outputs with ``--out``."""
    from vlm_r1.outputs import OutputLock, check_outputs, write_json, write_text

    try:
        a, b = read_run(args.run_a), read_run(args.run_b)
        doc = compare_runs(a, b, intersect=args.intersect, max_listed=args.max_listed)
    except CompareError as err:
        print(f"gui-grounding compare: error: {' '.join(str(err).split())}", file=sys.stderr)
        raise SystemExit(2) from None
    text = markdown(doc)
    print(text)
    if args.out:
        check_outputs(folders=[args.out], inputs=[args.run_a, args.run_b])
        with OutputLock(args.out, folder=True):
            write_gallery(args.out, doc, a, b, max_cards=args.max_gallery)
            write_text(os.path.join(args.out, "compare.md"), text)
            write_json(os.path.join(args.out, "compare.json"), doc)  # last: its presence says the rest is complete
        print(f"wrote {os.path.join(args.out, 'compare.json')}, compare.md and compare.html")


def add_parser(sub) -> None:
    """Add the ``compare`` subcommand to the ``gui-grounding`` subparsers ``sub``."""
    from vlm_r1.argtypes import integer, with_range

    p = sub.add_parser("compare", help="compare two eval runs on the same benchmark, sample by sample",
                       description=__doc__.split("\n\n", 1)[1], formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    p.add_argument("run_a", help="eval output folder of run A (metrics.json, scores.jsonl), e.g. the upstream baseline")
    p.add_argument("run_b", help="eval output folder of run B")
    p.add_argument("--out", default=None, help="write compare.json, compare.md and compare.html here")
    p.add_argument("--intersect", action="store_true",
                   help="compare on the samples both runs scored (default: refuse different sample sets)")  # fmt: skip
    listed, cards = integer(min=0), integer(min=0)
    p.add_argument("--max-listed", type=listed, default=50,
                   help=with_range("sample ids listed per side (right only in A / only in B)", listed))  # fmt: skip
    p.add_argument("--max-gallery", type=cards, default=100,
                   help=with_range("disagreeing samples drawn in compare.html", cards))  # fmt: skip
    p.set_defaults(func=main)
