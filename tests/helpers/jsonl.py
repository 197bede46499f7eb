"""JSON-lines files as the tests read them back (``from tests.helpers.jsonl import read_jsonl``)."""

from __future__ import annotations

import json


def read_jsonl(path) -> list:
    """Every line of the UTF-8 file ``path`` parsed as JSON, in order (a blank or broken line fails the test: the
    writers under test end every record with one newline and write nothing else)."""
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f]
