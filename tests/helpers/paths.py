"""Paths every test file needs, in one place (``from tests.helpers.paths import REPO, SAMPLE``)."""

from __future__ import annotations

import os

#: the repository root
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
#: the committed real sample (screenshots, train/test JSONL)
SAMPLE = os.path.join(REPO, "data", "web_sample")
