"""Accuracy cells and Markdown tables of the benchmark metrics (eval only).

A cell is ``{"num_correct", "num_total", "wrong_format", "accuracy", "ci95"}`` (:func:`cell`): accuracy in percent,
2 decimals, with its 95% Wilson interval (:func:`gui_grounding.eval.stats.wilson_interval`). Every benchmark's
``metrics`` tallies judged results (``gui_grounding.eval.judge``) into cells with :func:`tally`, and its ``table``,
the reports, ``compare`` and the profiles' comparisons print them with :func:`groundwork.markdown.md_table` / :func:`breakdown_table`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from groundwork.markdown import md_table
from gui_grounding.data.schema import Sample
from gui_grounding.eval.judge import CORRECT, WRONG, WRONG_FORMAT
from gui_grounding.eval.stats import wilson_interval


def check_results(samples: list[Sample], results: dict[str, dict]) -> None:
    """Every sample has a result with a valid ``correctness``.

    Raises:
        ValueError: naming the first few samples without a result or with an unknown correctness value.
    """
    missing = [s.sample_id for s in samples if s.sample_id not in results]
    if missing:
        raise ValueError(
            f"{len(missing)} samples have no result (fill missing predictions as wrong_format first), "
            f"e.g. {missing[:5]}"
        )
    bad = [
        (s.sample_id, results[s.sample_id].get("correctness"))
        for s in samples
        if results[s.sample_id].get("correctness") not in (CORRECT, WRONG, WRONG_FORMAT)
    ]
    if bad:
        raise ValueError(f"{len(bad)} results have a correctness other than correct/wrong/wrong_format: {bad[:5]}")


def cell(correct: int, total: int, wrong_format: int) -> dict:
    """``{"num_correct", "num_total", "wrong_format", "accuracy", "ci95"}``: ``accuracy`` in percent, 2 decimals
    (0.0 when ``total`` is 0); ``ci95`` its 95% Wilson score interval ``[low, high]`` in percent, 2 decimals, or
    ``None`` when ``total`` is 0 (no samples, no interval) (:func:`gui_grounding.eval.stats.wilson_interval`).

    Raises:
        ValueError: ``correct`` outside ``0..total``.
    """

    return {
        "num_correct": correct,
        "num_total": total,
        "wrong_format": wrong_format,
        "accuracy": round(100.0 * correct / total, 2) if total else 0.0,
        "ci95": wilson_interval(correct, total),
    }


def headline_doc(c: dict, rule: str, denominator: str, source: str) -> dict:
    """``metrics.json["headline"]``: ``{"accuracy" (percent, 2 decimals), "num_correct", "num_total", "ci95" (None
    for an average of averages, which is no single proportion), "rule", "denominator", "source"}`` of the accuracy
    ``c`` (a :func:`cell`, or ``{"accuracy": ...}`` alone)."""
    return {
        "accuracy": c["accuracy"],
        "num_correct": c.get("num_correct"),
        "num_total": c.get("num_total"),
        "ci95": c.get("ci95"),
        "rule": rule,
        "denominator": denominator,
        "source": source,
    }


def fmt_headline(h: dict, name: str) -> str:
    """One line: ``"**NAME headline**: acc% [ci] (correct/total), denominator D: rule (source)"``."""
    counts = f" ({h['num_correct']}/{h['num_total']})" if h.get("num_total") is not None else ""
    ci = f" [{fmt_ci(h)}]" if h.get("ci95") else ""
    source = f" ({h['source']})" if h.get("source") else ""
    return (
        f"**{name} headline**: {h['accuracy']:.2f}%{ci}{counts}; denominator `{h['denominator']}`: "
        f"{h['rule']}{source}"
    )


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


def fmt_ci(c: dict, key: str = "ci95") -> str:
    """``"low-high"`` (percent, 2 decimals) of the 95% interval ``c[key]`` of a :func:`cell` (``"-"`` when it has
    none)."""
    ci = c.get(key)
    return f"{ci[0]:.2f}-{ci[1]:.2f}" if ci else "-"


def fmt_cell(c: dict) -> str:
    """``"acc% [low-high] (correct/total)"`` for a :func:`cell` (the 95% Wilson interval in brackets)."""
    return f"{c['accuracy']:.2f} [{fmt_ci(c)}] ({c['num_correct']}/{c['num_total']})"


def breakdown_table(title: str, metrics: dict, sections: list[tuple[str, str]]) -> str:
    """Markdown table of ``metrics["overall"]`` then each ``metrics[key]`` section (``(key, label)``) of cells; columns
    group, value, correct, total, no point, accuracy %, 95% CI (:func:`fmt_cell_columns`)."""
    rows = [["overall", "", *_cell_cols(metrics["overall"])]]
    for key, label in sections:
        for value, c in metrics.get(key, {}).items():
            rows.append([label, value, *_cell_cols(c)])
    header = ["group", "value", "correct", "total", "no point", "accuracy %", "95% CI"]
    return f"**{title}**\n\n" + md_table(header, rows, left=2)


def fmt_cell_columns(c: dict) -> list:
    """The columns of one accuracy cell in :func:`breakdown_table`: correct, total, no point, accuracy % and its 95%
    Wilson interval ``"low-high"`` (``"-"`` for an empty cell)."""
    return _cell_cols(c)


def _cell_cols(c: dict) -> list:
    return [c["num_correct"], c["num_total"], c["wrong_format"], f"{c['accuracy']:.2f}", fmt_ci(c)]
