"""Refusal (issue 19): an explicit "no target" answer, the OSWorld-G refusal rule (``gui_grounding.eval.judge``),
and results with and without the refusal items, plain and Refined separately, on a small hand-built OSWorld-G
folder."""

from __future__ import annotations

import json
import logging

import pytest
from helpers.wilson import ci_text, expected_cell
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

from gui_grounding.data.schema import Sample
from gui_grounding.eval.benchmarks import get_benchmark
from gui_grounding.eval.judge import CORRECT, WRONG, WRONG_FORMAT, judge
from gui_grounding.eval.predictions import load_predictions, results_from_predictions
from gui_grounding.eval.run import run_eval

BOX = Sample("t", "x", "", [(0.0, 0.0, 10.0, 10.0)], 100, 100)
POLY = Sample("p", "x", "", [], 100, 100, polygons=[[(0.0, 0.0), (10.0, 0.0), (0.0, 10.0)]])
REFUSAL_ITEM = Sample("r", "x", "", [], 100, 100, refusal=True)

# 3 items with a target, 5 refusal items; classes from classification_result.json
RECORDS = [
    {"id": "b1", "box_type": "bbox", "box_coordinates": [10, 10, 20, 20]},  # (10, 10)-(30, 30)
    {"id": "b2", "box_type": "bbox", "box_coordinates": [50, 40, 10, 10]},
    {"id": "p1", "box_type": "polygon", "box_coordinates": [60, 0, 90, 0, 90, 30, 60, 30]},
    *({"id": f"r{i}", "box_type": "refusal", "box_coordinates": [0, 0, 0, 0]} for i in range(1, 6)),
]
CLASSES = {"text_matching": ["b1", "b2"], "element_recognition": ["p1"], "refusal": ["r1", "r2", "r3", "r4", "r5"]}
# every combination of item (target / refusal) x answer (point / no point / explicit refusal)
PREDICTIONS = [
    {"sample_id": "b1", "point": [15, 15]},  # inside the plain box (outside the Refined one)
    {"sample_id": "b2", "point": None, "refusal": True},  # refusing a real target: wrong, not wrong_format
    {"sample_id": "p1", "point": None},  # nothing readable: wrong_format
    {"sample_id": "r1", "point": None, "refusal": True},  # explicit refusal: correct
    {"sample_id": "r2", "point": None, "refusal": False},  # nothing readable: wrong_format, not an abstention
    {"sample_id": "r3", "point": [5, 5]},  # a point on the screen: wrong
    {"sample_id": "r4", "point": [-3, -2]},  # both coordinates negative: the official refusal, correct
    {"sample_id": "r5", "point": [-1, 5]},  # one negative coordinate: wrong
]
JUDGED = [CORRECT, WRONG, WRONG_FORMAT, CORRECT, WRONG_FORMAT, WRONG, CORRECT, WRONG]  # PREDICTIONS, in order


def c(correct, total, wf=0):
    return expected_cell(correct, total, wf)


def make_osworld_g(root, plain=True, refined=True):
    """``root`` as the official ``benchmark/`` folder: a 100x80 image, the annotation file(s), the classes.
    The Refined file moves b1's box to (40, 40)-(50, 50) and rewrites the instructions."""
    (root / "images").mkdir(parents=True)
    Image.new("RGB", (100, 80), "white").save(root / "images" / "s.png")
    rows = [{**r, "image_path": "s.png", "instruction": f"click {r['id']}"} for r in RECORDS]
    if plain:
        (root / "OSWorld-G.json").write_text(json.dumps(rows), encoding="utf-8")
    if refined:
        moved = [{**r, "instruction": f"the element {r['instruction']}"} for r in rows]
        moved[0]["box_coordinates"] = [40, 40, 10, 10]
        (root / "OSWorld-G_refined.json").write_text(json.dumps(moved), encoding="utf-8")
    classified = {cls: [{"id": i} for i in ids] for cls, ids in CLASSES.items()}
    (root / "classification_result.json").write_text(json.dumps({"classified": classified}), encoding="utf-8")
    return str(root)


def write_predictions(path, records=PREDICTIONS):
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return str(path)


def test_judge_refusal_rule():
    # refusal item: an explicit refusal or a point with both coordinates negative is right; no point is a format error
    right = [judge(REFUSAL_ITEM, None, refusal=True), judge(REFUSAL_ITEM, (-1, -1)), judge(REFUSAL_ITEM, (-0.5, -7))]
    assert right == [CORRECT] * 3
    not_right = [judge(REFUSAL_ITEM, None), judge(REFUSAL_ITEM, (5, 5)), judge(REFUSAL_ITEM, (0, 0))]
    assert not_right == [WRONG_FORMAT, WRONG, WRONG]
    assert [judge(REFUSAL_ITEM, (-1, 0)), judge(REFUSAL_ITEM, (0, -1)), judge(REFUSAL_ITEM, (-1, 5))] == [WRONG] * 3
    # target exists: an explicit refusal is a wrong answer, a missing point a format error
    for s in (BOX, POLY):
        answers = [judge(s, None, refusal=True), judge(s, None), judge(s, (2, 2)), judge(s, (-1, -1))]
        assert answers == [WRONG, WRONG_FORMAT, CORRECT, WRONG]
    # the flag wins over a point (the predictions reader never passes both)
    assert (judge(REFUSAL_ITEM, (5, 5), refusal=True), judge(BOX, (2, 2), refusal=True)) == (CORRECT, WRONG)


def test_results_carry_the_refusal_flag_to_the_judge(tmp_path):
    data = make_osworld_g(tmp_path / "og", refined=False)
    samples, _ = get_benchmark("osworld-g").load(data)
    preds, report = load_predictions(write_predictions(tmp_path / "p.jsonl"), samples)
    assert report.malformed == [] and preds["r1"]["refusal"] is True and "refusal" not in preds["b1"]
    results = results_from_predictions(samples, preds, report)
    got = [(sid, r["correctness"]) for sid, r in results.items()]
    assert got == [(p["sample_id"], want) for p, want in zip(PREDICTIONS, JUDGED, strict=True)]


def expected(subset):
    """Plain: b1 hit; Refined: b1's box moved away from (15, 15). Refusal items: r1 and r4 right, r2 no answer."""
    b1 = 1 if subset == "plain" else 0
    return {
        "overall": c(2 + b1, 8, 2),
        # every item counted, each refusal item a miss: the target items' hits over all 8
        "overall_refusal_as_miss": c(b1, 8, 2),
        "overall_without_refusal": c(b1, 3, 1),
        "refusal": c(2, 5, 1),
        "by_class": {"text_matching": c(b1, 2), "element_recognition": c(0, 1, 1), "refusal": c(2, 5, 1)},
        "by_box_type": {"bbox": c(b1, 2), "polygon": c(0, 1, 1), "refusal": c(2, 5, 1)},
    }


def test_metrics_with_and_without_refusal_items_plain_and_refined(tmp_path):
    data = make_osworld_g(tmp_path / "og")
    preds = write_predictions(tmp_path / "p.jsonl")
    for subset in ("plain", "refined"):
        out = tmp_path / subset
        doc = run_eval("osworld-g", data, str(out), predictions=preds, benchmark_options={"subset": subset})
        want = {"subset": subset, **expected(subset)}
        assert {k: doc[k] for k in want} == want
        saved = json.loads((out / "metrics.json").read_text(encoding="utf-8"))
        assert {k: saved[k] for k in want} == want
        title = f"**OSWorld-G ({subset}) accuracy (refusal items correct only on a refusal answer)**"
        assert title in (out / "results.md").read_text(encoding="utf-8")


def test_table_plain():
    bench = get_benchmark("osworld-g", subset="plain")
    bench.class_order = list(CLASSES)
    assert bench.table({"subset": "plain", **expected("plain")}).split("\n") == [
        "**OSWorld-G (plain) accuracy (refusal items correct only on a refusal answer)**",
        "",
        "| group | value | correct | total | no point | accuracy % | 95% CI |",
        "|:---|:---|---:|---:|---:|---:|---:|",
        f"| overall |  | 3 | 8 | 2 | 37.50 | {ci_text(3, 8)} |",
        f"| refusal items as misses |  | 1 | 8 | 2 | 12.50 | {ci_text(1, 8)} |",
        f"| without refusal items |  | 1 | 3 | 1 | 33.33 | {ci_text(1, 3)} |",
        f"| refusal items only |  | 2 | 5 | 1 | 40.00 | {ci_text(2, 5)} |",
        f"| class | text_matching | 1 | 2 | 0 | 50.00 | {ci_text(1, 2)} |",
        f"| class | element_recognition | 0 | 1 | 1 | 0.00 | {ci_text(0, 1)} |",
        f"| class | refusal | 2 | 5 | 1 | 40.00 | {ci_text(2, 5)} |",
        f"| box_type | bbox | 1 | 2 | 0 | 50.00 | {ci_text(1, 2)} |",
        f"| box_type | polygon | 0 | 1 | 1 | 0.00 | {ci_text(0, 1)} |",
        f"| box_type | refusal | 2 | 5 | 1 | 40.00 | {ci_text(2, 5)} |",
    ]


def test_auto_subset_scores_plain_and_says_refined_is_separate(tmp_path, caplog):
    both = make_osworld_g(tmp_path / "both")
    bench = get_benchmark("osworld-g")
    with caplog.at_level(logging.WARNING, logger="gui_grounding.eval.benchmarks.osworld_g"):
        samples, _ = bench.load(both)
    assert bench.resolved_subset == "plain" and samples[0].boxes == [(10.0, 10.0, 30.0, 30.0)]
    assert "the Refined set is a separate run" in caplog.text
    only_refined = make_osworld_g(tmp_path / "refined", plain=False)
    bench = get_benchmark("osworld-g")
    samples, _ = bench.load(only_refined)
    assert bench.resolved_subset == "refined" and samples[0].boxes == [(40.0, 40.0, 50.0, 50.0)]
    assert bench.metrics(samples, {s.sample_id: {"correctness": WRONG} for s in samples})["subset"] == "refined"
    with pytest.raises(ValueError, match="auto, plain or refined"):
        get_benchmark("osworld-g", subset="Refined")


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=6,
)


@pytest.fixture(scope="module")
def og_samples(tmp_path_factory):
    return get_benchmark("osworld-g").load(make_osworld_g(tmp_path_factory.mktemp("og"), refined=False))[0]


@settings(max_examples=60, deadline=None)
@given(value=JSON_VALUES, point=st.sampled_from([None, [-1, -1], [15, 15]]))
def test_refusal_field_of_any_json_value_never_crashes(tmp_path_factory, og_samples, value, point):
    path = tmp_path_factory.mktemp("r") / "p.jsonl"
    path.write_text(json.dumps({"sample_id": "r1", "point": point, "refusal": value}) + "\n", encoding="utf-8")
    preds, report = load_predictions(str(path), og_samples)
    result = results_from_predictions(og_samples, preds, report)["r1"]
    if value is not True and value is not False and value is not None:
        assert len(report.malformed) == 1 and report.malformed[0][0] == f"{path}:1"
        assert report.malformed[0][1].startswith("sample r1: refusal must be true, false or null, got ")
        assert result["correctness"] == WRONG_FORMAT and result["malformed"].startswith("sample r1: refusal must be")
    elif value is True and point is not None:
        assert report.malformed[0][1].startswith("sample r1: a refusal has no point (got refusal true and point")
        assert result["correctness"] == WRONG_FORMAT
    else:
        assert report.malformed == []
        expected = {None: WRONG_FORMAT, (-1, -1): CORRECT, (15, 15): WRONG}[tuple(point) if point else None]
        assert result["correctness"] == (CORRECT if value is True else expected)
