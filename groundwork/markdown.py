"""Markdown tables for readable reports (metrics tables, profile lists, load reports): one builder."""

from __future__ import annotations

from typing import Any


def md_table(header: list[str], rows: list[list[Any]], left: int = 1) -> str:
    """A Markdown table; the first ``left`` columns left-aligned, the others right-aligned. Cells are ``str()``-ed."""
    aligns = [":---"] * left + ["---:"] * (len(header) - left)
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(aligns) + "|"]
    lines += ["| " + " | ".join(str(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)
