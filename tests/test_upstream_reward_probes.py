"""The default task's ``accuracy`` and ``format`` give exactly the values upstream VLM-R1's own functions gave.

``tests/data/upstream_reward_probes.json`` holds probe completions and solutions for every ``accu_reward_method`` we
score (``default``, ``mcq``, ``yes_no``, ``all_match``, ``math``, an unknown method, none) and for ``format``, with
the value upstream's ``accuracy_reward`` / ``format_reward`` (om-ai-lab/VLM-R1
src/open-r1-multimodal/src/open_r1/grpo_jsonl.py at 90052f4, run with the library versions named in the file's
header) returned for each: in the main thread (``expected``) and, for the methods that do not raise there, in a
worker thread (``expected_outside_main_thread``: math_verify's signal alarm fails there and upstream's ``default``
falls through to its text rules). Our rewards must return the same floats (within 1e-9).
"""

from __future__ import annotations

import json
import os
import threading
from importlib.metadata import version

import pytest

from vlm_r1.upstream import accuracy
from vlm_r1.upstream import rewards as ur

PROBES_PATH = os.path.join(os.path.dirname(__file__), "data", "upstream_reward_probes.json")
with open(PROBES_PATH, encoding="utf-8") as _f:
    PROBES = json.load(_f)
ACCURACY, FORMAT = PROBES["accuracy"], PROBES["format"]


def _accuracy(probe: dict) -> float:
    completion = [{"role": "assistant", "content": probe["completion"]}]
    return ur.accuracy_reward([completion], solution=[probe["solution"]], accu_reward_method=[probe["method"]])[0]


def _id(probe: dict) -> str:
    return f"{probe.get('method')}: {probe['note']}"


def test_probe_file_names_upstream_and_covers_every_method():
    assert PROBES["upstream"]["repo"] == "om-ai-lab/VLM-R1" and PROBES["upstream"]["commit"] == "90052f4"
    assert {p["method"] for p in ACCURACY} >= set(accuracy.ACCURACY_METHODS) | {None}
    assert len(ACCURACY) + len(FORMAT) >= 40


@pytest.mark.parametrize("package", ["math-verify", "latex2sympy2_extended", "rapidfuzz"])
def test_installed_libraries_are_the_probed_versions(package):
    # the values below depend on them: a different math-verify may parse an answer differently
    assert version(package) == PROBES["libraries"][package]


@pytest.mark.parametrize("probe", ACCURACY, ids=_id)
def test_accuracy_gives_upstreams_value(probe):
    assert _accuracy(probe) == pytest.approx(probe["expected"], abs=1e-9, rel=0)


@pytest.mark.parametrize("probe", FORMAT, ids=lambda p: p["note"])
def test_format_gives_upstreams_value(probe):
    assert ur.format_reward([[{"role": "assistant", "content": probe["completion"]}]]) == [probe["expected"]]


def test_accuracy_outside_the_main_thread_gives_upstreams_value():
    probes = [p for p in ACCURACY if "expected_outside_main_thread" in p]
    got: list[float] = []
    worker = threading.Thread(target=lambda: got.extend(_accuracy(p) for p in probes))
    worker.start()
    worker.join()
    assert len(got) == len(probes)
    for probe, value in zip(probes, got, strict=True):
        assert value == pytest.approx(probe["expected_outside_main_thread"], abs=1e-9, rel=0), _id(probe)
