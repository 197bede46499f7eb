"""Reading data files: JSON (a list or one object) and JSONL, record by record, with ``file:line`` references.

Used by every task (``vlm_r1.tasks``, ``gui_grounding.schema``) so bad lines are reported the same way everywhere.
"""

from __future__ import annotations

import json
from collections.abc import Iterator


class RecordError(ValueError):
    """An unparseable record; ``ref`` names it as ``file:line`` (JSONL, 1-based) or ``file:[index]`` (JSON)."""

    def __init__(self, ref: str, message: str):
        self.ref, self.message = ref, message
        super().__init__(f"{ref}: {message}")


def iter_records(path: str) -> Iterator[tuple[str, int, dict | RecordError]]:
    """Yield ``(ref, index, record_or_error)`` for each record of a ``.json`` or ``.jsonl`` file.

    ``index`` is the 0-based position among non-blank records. A line that is not JSON, or not a JSON object, yields a
    :class:`RecordError` in place of the record, so the caller can count it and go on (or raise it in strict mode).
    A ``.json`` file that does not parse at all yields one error.
    """
    if path.endswith(".json"):
        with open(path, encoding="utf-8") as f:
            try:
                data = json.load(f)
            except json.JSONDecodeError as err:
                yield path, 0, RecordError(path, f"invalid JSON: {err}")
                return
        for i, item in enumerate(data if isinstance(data, list) else [data]):
            ref = f"{path}:[{i}]"
            yield ref, i, item if isinstance(item, dict) else RecordError(ref, "not a JSON object")
        return
    with open(path, encoding="utf-8") as f:
        index = 0
        for lineno, line in enumerate(f, start=1):
            if not line.strip():
                continue
            ref = f"{path}:{lineno}"
            try:
                item = json.loads(line)
            except json.JSONDecodeError as err:
                yield ref, index, RecordError(ref, f"invalid JSON: {err}")
            else:
                yield ref, index, item if isinstance(item, dict) else RecordError(ref, "not a JSON object")
            index += 1
