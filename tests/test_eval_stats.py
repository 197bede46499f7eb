"""Uncertainty of evaluation numbers (issue 19): 95% Wilson intervals on every accuracy, McNemar's paired test.
Expected values come from the closed-form formulas, computed here independently of scipy."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gui_grounding.eval.benchmarks import breakdown_table, cell
from gui_grounding.eval.stats import mcnemar, wilson_interval

Z = 1.959963984540054  # the 97.5% quantile of the standard normal


def wilson_closed_form(k: int, n: int) -> list[float]:
    """Wilson (1927): (p + z^2/2n -+ z sqrt(p(1-p)/n + z^2/4n^2)) / (1 + z^2/n), in percent."""
    p = k / n
    centre, half = p + Z * Z / (2 * n), Z * math.sqrt(p * (1 - p) / n + Z * Z / (4 * n * n))
    return [round(100 * (centre - half) / (1 + Z * Z / n), 2), round(100 * (centre + half) / (1 + Z * Z / n), 2)]


@pytest.mark.parametrize("k, n", [(50, 100), (0, 10), (10, 10), (1, 1), (470, 1581), (3, 7)])
def test_wilson_matches_the_closed_form(k, n):
    assert wilson_interval(k, n) == wilson_closed_form(k, n)


def test_wilson_known_values_and_edges():
    assert wilson_interval(50, 100) == [40.38, 59.62]
    assert wilson_interval(0, 10) == [0.0, 27.75]  # never below 0, not degenerate at 0%
    assert wilson_interval(0, 0) is None
    with pytest.raises(ValueError, match="need 0 <= correct <= total"):
        wilson_interval(5, 3)


@given(n=st.integers(1, 5000), data=st.data())
def test_wilson_contains_the_estimate(n, data):
    k = data.draw(st.integers(0, n))
    low, high = wilson_interval(k, n)
    assert 0.0 <= low <= round(100 * k / n, 2) <= high <= 100.0


def test_cells_and_tables_carry_the_interval():
    c = cell(3, 4, 1)
    assert c == {"num_correct": 3, "num_total": 4, "wrong_format": 1, "accuracy": 75.0,
                 "ci95": wilson_closed_form(3, 4)}  # fmt: skip
    assert cell(0, 0, 0)["ci95"] is None
    table = breakdown_table("T", {"overall": c}, [])
    low, high = wilson_closed_form(3, 4)
    assert table.splitlines()[-1] == f"| overall |  | 3 | 4 | 1 | 75.00 | {low:.2f}-{high:.2f} |"


def test_mcnemar_exact_and_chi_square():
    # exact: two-sided binomial of b out of b + c at 1/2; b=1, c=5: 2 * (C(6,0) + C(6,1)) / 64 = 14/64
    assert mcnemar(1, 5) == {"method": "exact", "statistic": None, "p_value": pytest.approx(14 / 64)}
    assert mcnemar(3, 3)["p_value"] == pytest.approx(1.0)
    assert mcnemar(0, 0) == {"method": "exact", "statistic": None, "p_value": 1.0}
    # b + c >= 25: (|b - c| - 1)^2 / (b + c) on 1 degree of freedom; survival of chi2(1) at x is erfc(sqrt(x/2))
    test = mcnemar(10, 20)
    assert test["method"] == "chi2_continuity" and test["statistic"] == pytest.approx(81 / 30)
    assert test["p_value"] == pytest.approx(math.erfc(math.sqrt(81 / 30 / 2)))
    with pytest.raises(ValueError):
        mcnemar(-1, 2)
