"""Uncertainty of evaluation numbers: the 95% Wilson interval of an accuracy, and McNemar's paired test.

* :func:`wilson_interval`: the Wilson score interval of ``k`` correct out of ``n`` (Wilson 1927, "Probable inference,
  the law of succession, and statistical inference", JASA 22:209-212), computed by scipy
  (``scipy.stats.binomtest(k, n).proportion_ci(method="wilson")``,
  https://docs.scipy.org/doc/scipy/reference/generated/scipy.stats.binomtest.html). Unlike the normal
  approximation it stays inside [0, 100] and is not degenerate at 0% or 100%.
* :func:`mcnemar`: McNemar's test (McNemar 1947, Psychometrika 12:153-157) of two runs scored on the same samples:
  only the discordant samples count (``b`` right only in A, ``c`` right only in B). Exact (two-sided binomial test of
  ``b`` out of ``b + c`` at p = 0.5, ``scipy.stats.binomtest``) when ``b + c < 25``; otherwise the chi-square
  statistic with continuity correction (Edwards 1948, Psychometrika 13:185-187), ``(|b - c| - 1)^2 / (b + c)``, on 1
  degree of freedom (``scipy.stats.chi2``, https://docs.scipy.org/doc/scipy/reference/generated/scipy.stats.chi2.html).
  The cut at 25 follows the usual rule that the chi-square approximation needs ``b + c >= 25``
  (https://en.wikipedia.org/wiki/McNemar%27s_test, "Definition").

An empty cell (``n = 0``) has no interval: :func:`wilson_interval` gives ``None`` (``null`` in ``metrics.json``,
``-`` in the tables). scipy is imported on first use, so importing the benchmarks stays cheap.
"""

from __future__ import annotations

#: below this many discordant pairs McNemar's test is exact (binomial)
EXACT_BELOW = 25


def wilson_interval(correct: int, total: int, confidence: float = 0.95) -> list[float] | None:
    """``[low, high]`` in percent (2 decimals) of ``correct`` out of ``total``; ``None`` when ``total`` is 0 (no
    samples: no interval).

    Example: ``wilson_interval(50, 100)`` is ``[40.38, 59.62]``.

    Raises:
        ValueError: ``correct`` outside ``0..total``, or a negative ``total``.
    """
    if total < 0 or not 0 <= correct <= max(total, 0):
        raise ValueError(f"need 0 <= correct <= total, got {correct} of {total}")
    if total == 0:
        return None
    from scipy.stats import binomtest

    ci = binomtest(int(correct), int(total)).proportion_ci(confidence_level=confidence, method="wilson")
    return [round(100.0 * float(ci.low), 2), round(100.0 * float(ci.high), 2)]


def mcnemar(only_a: int, only_b: int) -> dict:
    """McNemar's paired test on the discordant counts: ``only_a`` samples right in run A only, ``only_b`` in B only.

    Returns:
        ``{"method": "exact" | "chi2_continuity", "statistic": float | None, "p_value": float}``; ``p_value`` 1.0
        when there is no discordant sample.

    Raises:
        ValueError: a negative count.
    """
    if only_a < 0 or only_b < 0:
        raise ValueError(f"counts must be >= 0, got {only_a}, {only_b}")
    n = only_a + only_b
    if n == 0:
        return {"method": "exact", "statistic": None, "p_value": 1.0}
    if n < EXACT_BELOW:
        from scipy.stats import binomtest

        return {"method": "exact", "statistic": None, "p_value": float(binomtest(only_a, n, 0.5).pvalue)}
    from scipy.stats import chi2

    statistic = (abs(only_a - only_b) - 1) ** 2 / n
    return {"method": "chi2_continuity", "statistic": float(statistic), "p_value": float(chi2.sf(statistic, 1))}
