"""Uncertainty of evaluation numbers (issue 19): 95% Wilson intervals on every accuracy, McNemar's paired test.

Expected values come from the closed-form formulas (tests/helpers/wilson.py; binomial sums with math.comb), computed
independently of scipy, which ``gui_grounding.eval.stats`` uses."""

from __future__ import annotations

import math

import pytest
from helpers.wilson import wilson_closed_form
from hypothesis import given, settings
from hypothesis import strategies as st

from gui_grounding.eval.stats import EXACT_BELOW, mcnemar, wilson_interval
from gui_grounding.eval.tables import breakdown_table, cell, fmt_cell


@pytest.mark.parametrize("k, n", [(50, 100), (0, 10), (10, 10), (1, 1), (470, 1581), (3, 7), (0, 1581)])
def test_wilson_matches_the_closed_form(k, n):
    assert wilson_interval(k, n) == wilson_closed_form(k, n)


def test_wilson_known_values_and_edges():
    assert wilson_interval(50, 100) == [40.38, 59.62]
    # 0 of 10: z^2 / (n + z^2) = 3.8415 / 13.8415 = 27.75%; never below 0, not degenerate at 0%
    assert wilson_interval(0, 10) == [0.0, 27.75]
    assert wilson_interval(10, 10) == [72.25, 100.0]
    assert wilson_interval(0, 0) is None  # an empty cell has no interval
    for bad in ((5, 3), (-1, 3), (0, -1)):
        with pytest.raises(ValueError, match="need 0 <= correct <= total"):
            wilson_interval(*bad)


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 5000), data=st.data())
def test_wilson_contains_the_estimate_and_matches_the_formula(n, data):
    k = data.draw(st.integers(0, n))
    low, high = wilson_interval(k, n)
    assert 0.0 <= low <= round(100 * k / n, 2) <= high <= 100.0
    assert [low, high] == wilson_closed_form(k, n)


def test_cells_and_tables_carry_the_interval():
    low, high = wilson_closed_form(3, 4)
    assert (low, high) == (30.06, 95.44)
    expected = {"num_correct": 3, "num_total": 4, "wrong_format": 1, "accuracy": 75.0, "ci95": [low, high]}
    assert cell(3, 4, 1) == expected
    assert cell(0, 0, 0) == {"num_correct": 0, "num_total": 0, "wrong_format": 0, "accuracy": 0.0, "ci95": None}
    assert fmt_cell(cell(3, 4, 1)) == "75.00 [30.06-95.44] (3/4)"
    assert fmt_cell(cell(0, 0, 0)) == "0.00 [-] (0/0)"
    table = breakdown_table("T", {"overall": cell(3, 4, 1), "by_x": {"a": cell(0, 0, 0)}}, [("by_x", "x")])
    assert table.splitlines() == [
        "**T**",
        "",
        "| group | value | correct | total | no point | accuracy % | 95% CI |",
        "|:---|:---|---:|---:|---:|---:|---:|",
        "| overall |  | 3 | 4 | 1 | 75.00 | 30.06-95.44 |",
        "| x | a | 0 | 0 | 0 | 0.00 | - |",
    ]


def _two_sided_binomial(b: int, c: int) -> float:
    """Exact two-sided p of ``b`` out of ``b + c`` at 1/2: twice the smaller tail, capped at 1."""
    n = b + c
    tail = sum(math.comb(n, i) for i in range(min(b, c) + 1)) / 2**n
    return min(1.0, 2 * tail)


@pytest.mark.parametrize("b, c", [(1, 5), (0, 6), (2, 1), (3, 3), (0, 1), (10, 14), (4, 20)])
def test_mcnemar_exact_below_25_discordant(b, c):
    assert b + c < EXACT_BELOW == 25
    assert mcnemar(b, c) == {"method": "exact", "statistic": None, "p_value": pytest.approx(_two_sided_binomial(b, c))}


def test_mcnemar_hand_values_and_chi_square():
    assert mcnemar(1, 5)["p_value"] == pytest.approx(14 / 64)  # 2 * (C(6,0) + C(6,1)) / 2^6
    assert mcnemar(0, 6)["p_value"] == pytest.approx(2 / 64)
    assert mcnemar(0, 0) == {"method": "exact", "statistic": None, "p_value": 1.0}
    # b + c >= 25: (|b - c| - 1)^2 / (b + c) on 1 degree of freedom; chi2(1) survival at x is erfc(sqrt(x / 2))
    for b, c in ((10, 20), (5, 20), (30, 30)):
        test = mcnemar(b, c)
        x = (abs(b - c) - 1) ** 2 / (b + c)
        p_value = math.erfc(math.sqrt(x / 2))
        assert test == {"method": "chi2_continuity", "statistic": pytest.approx(x), "p_value": pytest.approx(p_value)}
    assert mcnemar(10, 20)["statistic"] == pytest.approx(81 / 30)
    with pytest.raises(ValueError, match="counts must be >= 0"):
        mcnemar(-1, 2)
