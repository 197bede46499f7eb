"""Shared pieces of the source scans (tests/test_writer_path.py, tests/test_bypass_scan.py)."""

from __future__ import annotations

import ast


def dotted(node: ast.AST) -> tuple[str, ...]:
    """The dotted name a call's function or an attribute chain spells (``os.path.join`` ->
    ``("os", "path", "join")``); ``()`` when it is not a plain chain of names (a call, a subscript)."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return tuple(reversed(parts))
    return ()
