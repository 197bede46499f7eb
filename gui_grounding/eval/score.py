"""Score point predictions against canonical samples: accuracy overall and per breakdown, as JSON and a table.

Rule (every GUI grounding benchmark): a predicted point in original pixels counts when it lies inside any target
box, edges included; a sample with no valid point counts as wrong and as ``wrong_format``.
"""

from __future__ import annotations

import json
from collections import defaultdict

from gui_grounding.frames import point_in_box
from gui_grounding.schema import Sample

BREAKDOWN_KEYS = ("platform", "ui_type", "source")


def read_predictions(path: str) -> dict[str, dict]:
    """``sample_id -> prediction`` from a predictions JSONL (the last line wins for a repeated id).

    Raises:
        ValueError: a line that is not JSON or has no ``sample_id``, naming the line.
    """
    preds = {}
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
                preds[str(rec["sample_id"])] = rec
            except (json.JSONDecodeError, KeyError, TypeError) as err:
                raise ValueError(f"{path}:{lineno}: not a prediction record ({err})") from err
    return preds


def _cell(correct: int, total: int, wrong_format: int) -> dict:
    return {"num_correct": correct, "num_total": total, "wrong_format": wrong_format,
            "accuracy": round(100.0 * correct / total, 2) if total else 0.0}  # fmt: skip


def score(samples: list[Sample], predictions: dict[str, dict]) -> dict:
    """Accuracy (%) of ``predictions`` on ``samples``.

    Returns:
        ``{"overall": cell, "by_<key>": {value: cell}, "missing_predictions": n, "per_sample": [...]}`` where a cell
        is ``{"num_correct", "num_total", "wrong_format", "accuracy"}`` and breakdowns use ``platform``, ``ui_type``
        and ``source`` where the samples carry them. A sample without a prediction counts as wrong and is reported
        in ``missing_predictions``; predictions whose sample_id matches no sample are counted in
        ``unmatched_predictions`` (a sign of scoring the wrong file).
    """
    counts = defaultdict(lambda: [0, 0, 0])
    per_sample, missing = [], 0
    for s in samples:
        pred = predictions.get(s.sample_id)
        if pred is None:
            missing += 1
        point = pred.get("point") if pred else None
        ok = point is not None and any(point_in_box(point, b) for b in s.boxes)
        keys = [("overall", "")] + [(k, getattr(s, k)) for k in BREAKDOWN_KEYS if getattr(s, k) is not None]
        for key in keys:
            c = counts[key]
            c[0] += ok
            c[1] += 1
            c[2] += point is None
        per_sample.append({"sample_id": s.sample_id, "correct": ok, "point": point})
    known = {s.sample_id for s in samples}
    unmatched = sorted(k for k in predictions if k not in known)
    result = {"overall": _cell(*counts[("overall", "")]), "missing_predictions": missing,
              "unmatched_predictions": len(unmatched), "unmatched_examples": unmatched[:5]}  # fmt: skip
    for k in BREAKDOWN_KEYS:
        cells = {v: _cell(*c) for (kk, v), c in sorted(counts.items()) if kk == k}
        if cells:
            result[f"by_{k}"] = cells
    result["per_sample"] = per_sample
    return result


def format_table(metrics: dict, title: str = "accuracy") -> str:
    """Readable fixed-width table of a :func:`score` result (overall first, then each breakdown)."""
    rows = [("overall", "", metrics["overall"])]
    for k in BREAKDOWN_KEYS:
        rows += [(k, v, cell) for v, cell in metrics.get(f"by_{k}", {}).items()]
    lines = [title, f"{'group':<10} {'value':<16} {'correct':>8} {'total':>6} {'no point':>9} {'acc %':>7}"]
    for group, value, c in rows:
        lines.append(f"{group:<10} {str(value):<16} {c['num_correct']:>8} {c['num_total']:>6} "
                     f"{c['wrong_format']:>9} {c['accuracy']:>7.2f}")  # fmt: skip
    return "\n".join(lines)
