"""Refusal (issue 19): an explicit "no target" answer, the OSWorld-G refusal rule, and results with and without the
refusal items, plain vs Refined separately."""

from __future__ import annotations

import json
import shutil

from hypothesis import given, settings
from hypothesis import strategies as st

from gui_grounding.eval import run_eval
from gui_grounding.eval.benchmarks import get_benchmark
from gui_grounding.eval.judge import CORRECT, WRONG, WRONG_FORMAT, judge
from gui_grounding.eval.predictions import load_predictions
from gui_grounding.schema import Sample

DATA = "data/mini_benchmarks/osworld_g"
BOX = Sample("t", "x", "", [(0.0, 0.0, 10.0, 10.0)], 100, 100)
REFUSAL_ITEM = Sample("r", "x", "", [], 100, 100, refusal=True)


def test_judge_refusal_rule():
    # refusal item: correct only when the model abstains (null point or explicit refusal)
    assert [judge(REFUSAL_ITEM, None), judge(REFUSAL_ITEM, None, refusal=True), judge(REFUSAL_ITEM, (5, 5))] == [
        CORRECT, CORRECT, WRONG]  # fmt: skip
    # target exists: an explicit refusal is a wrong answer, a missing point a format error
    assert [judge(BOX, None, refusal=True), judge(BOX, None), judge(BOX, (5, 5))] == [WRONG, WRONG_FORMAT, CORRECT]


def test_metrics_with_and_without_refusal_items_plain_and_refined(tmp_path):
    data = tmp_path / "og"
    shutil.copytree(DATA, data)
    samples, _ = get_benchmark("osworld-g").load(str(data))
    # Refined: the same items relabelled (here: identical) in OSWorld-G_refined.json
    (data / "OSWorld-G_refined.json").write_text((data / "OSWorld-G.json").read_text())
    refusal_ids = [s.sample_id for s in samples if s.refusal]
    preds = tmp_path / "p.jsonl"
    recs = [{"sample_id": s.sample_id, "point": None, "refusal": True} for s in samples]  # refuses everything
    preds.write_text("".join(json.dumps(r) + "\n" for r in recs))
    for subset in ("plain", "refined"):
        doc = run_eval("osworld-g", str(data), str(tmp_path / subset), predictions=str(preds),
                       benchmark_options={"subset": subset})  # fmt: skip
        n, r = len(samples), len(refusal_ids)
        assert doc["subset"] == subset
        assert (doc["overall"]["num_correct"], doc["overall"]["num_total"]) == (r, n)
        assert (doc["overall_without_refusal"]["num_correct"], doc["overall_without_refusal"]["num_total"]) == (
            0,
            n - r,
        )
        assert doc["overall_without_refusal"]["wrong_format"] == 0  # a refusal is an answer, not a format error
        assert (doc["refusal"]["num_correct"], doc["refusal"]["num_total"]) == (r, r)
        assert f"OSWorld-G ({subset}) accuracy" in (tmp_path / subset / "results.md").read_text()


@settings(max_examples=60, deadline=None)
@given(
    value=st.none()
    | st.booleans()
    | st.integers()
    | st.text(max_size=5)
    | st.lists(st.integers(), max_size=2)
    | st.floats(allow_nan=False)
    | st.dictionaries(st.text(max_size=3), st.integers(), max_size=2)
)
def test_refusal_field_of_any_json_value_never_crashes(tmp_path_factory, value):
    samples, _ = get_benchmark("osworld-g").load(DATA)
    path = tmp_path_factory.mktemp("r") / "p.jsonl"
    path.write_text(json.dumps({"sample_id": samples[0].sample_id, "point": None, "refusal": value}) + "\n")
    preds, report = load_predictions(str(path), samples)
    if value is True or value is False or value is None:
        assert report.malformed == [] and samples[0].sample_id in preds
    else:
        assert len(report.malformed) == 1 and "refusal must be true, false or null" in report.malformed[0][1]


def test_refusal_beside_a_point_is_malformed(tmp_path):
    samples, _ = get_benchmark("osworld-g").load(DATA)
    path = tmp_path / "p.jsonl"
    path.write_text(json.dumps({"sample_id": samples[0].sample_id, "point": [1, 2], "refusal": True}) + "\n")
    _, report = load_predictions(str(path), samples)
    assert "a refusal has no point" in report.malformed[0][1]
