"""argparse types for numeric flags: finite, in range, and the range shown in ``--help`` (the one home).

    p.add_argument("--clip-tolerance", type=number(min=0), ...)
    p.add_argument("--limit", type=integer(min=1), ...)

A value that is not a number, is NaN or infinite, or lies outside the range is refused by argparse itself
(``error: argument --limit: must be an integer >= 1, got '-3'``), before anything is read or written. The types'
``range_text`` (e.g. ``">= 0"``) is what :func:`with_range` appends to a flag's help.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable


def _bound(value: float) -> str:
    """A bound as text: integers exactly (``2147483647``, not ``2.14748e+09``), other values with ``:g``."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) < 10**16:
        return str(value)
    return f"{value:g}"


def _describe(kind: str, lo: float | None, hi: float | None, lo_open: bool, hi_open: bool) -> str:
    parts = []
    if lo is not None:
        parts.append(f"{'>' if lo_open else '>='} {_bound(lo)}")
    if hi is not None:
        parts.append(f"{'<' if hi_open else '<='} {_bound(hi)}")
    return f"{kind} {' and '.join(parts)}" if parts else f"a finite {kind}"


def number(
    *, min: float | None = None, max: float | None = None, min_open: bool = False, max_open: bool = False
) -> Callable[[str], float]:
    """A finite float flag within ``[min, max]`` (``min_open`` / ``max_open``: exclusive bounds)."""
    text = _describe("a number", min, max, min_open, max_open)

    def parse(value: str) -> float:
        try:
            x = float(value)
        except (TypeError, ValueError):
            raise argparse.ArgumentTypeError(f"must be {text}, got {value!r}") from None
        bad = not math.isfinite(x)
        bad |= min is not None and (x <= min if min_open else x < min)
        bad |= max is not None and (x >= max if max_open else x > max)
        if bad:
            raise argparse.ArgumentTypeError(f"must be {text}, got {value!r}")
        return x

    parse.__name__ = "number"
    parse.range_text = text  # type: ignore[attr-defined]
    return parse


def integer(*, min: int | None = None, max: int | None = None) -> Callable[[str], int]:
    """An integer flag within ``[min, max]`` (no floats, NaN or inf; ``1e3`` is refused, ``1000`` is fine)."""
    text = _describe("an integer", min, max, False, False)

    def parse(value: str) -> int:
        try:
            x = int(str(value).strip().replace("_", ""), 10)
        except (TypeError, ValueError):
            raise argparse.ArgumentTypeError(f"must be {text}, got {value!r}") from None
        if (min is not None and x < min) or (max is not None and x > max):
            raise argparse.ArgumentTypeError(f"must be {text}, got {value!r}")
        return x

    parse.__name__ = "integer"
    parse.range_text = text  # type: ignore[attr-defined]
    return parse


def text(value: str) -> str:
    """A text flag (``--instruction``, ``--source``): valid Unicode. A byte of argv that is not UTF-8 arrives as a
    lone surrogate (PEP 383) and would be written into JSON outputs as invalid text; it is refused here, naming the
    bytes."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise argparse.ArgumentTypeError(
            f"{value.encode('utf-8', 'surrogateescape')[:60]!r} is not valid UTF-8 text"
        ) from None
    return value


def with_range(help_text: str, parse: Callable) -> str:
    """``help_text`` followed by the accepted range of ``parse`` (``number`` / ``integer``)."""
    return f"{help_text} ({getattr(parse, 'range_text', '')})" if getattr(parse, "range_text", "") else help_text
