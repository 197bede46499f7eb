"""Expected 95% Wilson intervals for the tests, from the closed form (Wilson 1927, JASA 22:209-212), computed without
scipy so the tests check ``gui_grounding.eval.stats`` against an independent formula."""

from __future__ import annotations

import math
from statistics import NormalDist

Z = NormalDist().inv_cdf(0.975)  # 1.959963984540054


def wilson_closed_form(k: int, n: int) -> list[float] | None:
    """``[low, high]`` in percent, 2 decimals: ``(p + z^2/2n -+ z sqrt(p(1-p)/n + z^2/4n^2)) / (1 + z^2/n)``;
    ``None`` when ``n`` is 0."""
    if n == 0:
        return None
    p = k / n
    centre, half = p + Z * Z / (2 * n), Z * math.sqrt(p * (1 - p) / n + Z * Z / (4 * n * n))
    return [round(100 * (centre - half) / (1 + Z * Z / n), 2), round(100 * (centre + half) / (1 + Z * Z / n), 2)]


def ci_text(k: int, n: int) -> str:
    """The interval as the tables print it: ``"low-high"`` (``"-"`` when ``n`` is 0)."""
    ci = wilson_closed_form(k, n)
    return f"{ci[0]:.2f}-{ci[1]:.2f}" if ci else "-"


def expected_cell(correct: int, total: int, wf: int = 0) -> dict:
    """An accuracy cell as ``gui_grounding.eval.tables.cell`` gives it (percent, 2 decimals)."""
    return {
        "num_correct": correct,
        "num_total": total,
        "wrong_format": wf,
        "accuracy": round(100.0 * correct / total, 2) if total else 0.0,
        "ci95": wilson_closed_form(correct, total),
    }
