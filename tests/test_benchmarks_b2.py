"""VenusBench-GD and UI-I2E-Bench (issue 31): the readers on the committed mini folders (data/mini_benchmarks/
venusbench_gd, ui_i2e, built by make_mini_benchmarks_b2.py from our own screenshots), the headline per denominator and
the breakdowns through the whole rescoring path (run_eval), and hostile records."""

from __future__ import annotations

import json
import math
import os
import shutil

import pytest
from helpers.wilson import expected_cell
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gui_grounding.data.schema import SampleError
from gui_grounding.eval.benchmarks import get_benchmark
from gui_grounding.eval.run import run_eval

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MINI = os.path.join(ROOT, "data", "mini_benchmarks")
VENUS = os.path.join(MINI, "venusbench_gd")
I2E = os.path.join(MINI, "ui_i2e")


def c(correct, total, wf=0):
    return expected_cell(correct, total, wf)


def write_predictions(path, predictions):
    path.write_text("".join(json.dumps(p, ensure_ascii=False) + "\n" for p in predictions), encoding="utf-8")
    return str(path)


# ---------------------------------------------------------------------------------------------------------------------
# VenusBench-GD: 9 target records in 5 task files, 3 refusal records (boxes in the crop's pixels, make_mini_benchmarks_b2)

VENUS_PREDICTIONS = [
    {"sample_id": "element_grounding:0", "point": [405, 21]},  # web text (405,21)-(459,36): its corner, correct
    {"sample_id": "element_grounding:1", "point": [100, 30]},  # web icon (209,21)-(348,38): wrong
    {"sample_id": "element_grounding:2", "point": None},  # mobile text: no point, wrong_format
    {"sample_id": "spatial_grounding:0", "point": [100, 165]},  # desktop (76,159)-(131,173): correct
    {"sample_id": "spatial_grounding:1", "point": None, "refusal": True},  # mobile, a target refused: wrong
    {"sample_id": "visual_grounding:0", "point": [392, 38]},  # web (353,21)-(392,38): far corner, correct
    {"sample_id": "reasoning_grounding:0", "point": [447.5, 80]},  # desktop (391,72)-(447,88): 0.5 px right, wrong
    {"sample_id": "functional_grounding:0", "point": [100, 110]},  # mobile (29,106)-(206,122): correct
    {"sample_id": "functional_grounding:1", "point": [400, 427]},  # desktop (372,419)-(429,435): correct
    {"sample_id": "refusal_spatial:0", "point": None, "refusal": True},  # web refusal item, explicit refusal: correct
    {"sample_id": "refusal_spatial:1", "point": [-1, -1]},  # mobile refusal item, both coordinates negative: correct
    {"sample_id": "refusal_spatial:2", "point": [-1, 5]},  # desktop refusal item, one coordinate on screen: wrong
]
# Hand count. Targets (9): correct element:0, spatial:0, visual:0, functional:0, functional:1 = 5; no point: element:2.
# Refusal items (3): correct refusal:0, refusal:1 = 2.
#   positive        (authors'): 5 correct / 9 target records          = 55.56 (1 no point)
#   with-refusal              : (5 + 2) / 12 records                  = 58.33
#   refusal-as-miss           : 5 / 12 records (refusal items missed) = 41.67
VENUS_HEADLINES = {"positive": c(5, 9, 1), "with-refusal": c(7, 12, 1), "refusal-as-miss": c(5, 12, 1)}
VENUS_BREAKDOWNS = {
    "overall": c(5, 9, 1),
    "overall_with_refusal": c(7, 12, 1),
    "overall_refusal_as_miss": c(5, 12, 1),
    "refusal": c(2, 3),
    "by_task": {  # every record under its task file, in the paper's order
        "element_grounding": c(1, 3, 1),
        "spatial_grounding": c(1, 2),
        "visual_grounding": c(1, 1),
        "reasoning_grounding": c(0, 1),
        "functional_grounding": c(2, 2),
        "refusal_spatial": c(2, 3),
    },
    # the target records only (the positive test): desktop spatial:0 + functional:1 of 3, mobile functional:0 of 3
    "by_platform": {"desktop": c(2, 3), "mobile": c(1, 3, 1), "web": c(2, 3)},
    "by_ui_type": {"icon": c(0, 1), "text": c(5, 8, 1)},
    "by_application": {"python-docs-faq": c(1, 3, 1), "python-docs-howto": c(2, 3), "python-docs-library": c(2, 3)},
}


@pytest.fixture(scope="module")
def venus_predictions(tmp_path_factory):
    return write_predictions(tmp_path_factory.mktemp("venus") / "p.jsonl", VENUS_PREDICTIONS)


def test_venusbench_gd_load_layout_and_ids():
    bench = get_benchmark("venusbench-gd")
    samples, report = bench.load(VENUS)
    assert report.rejects == [] and report.num_samples == 12
    assert [s.sample_id for s in samples][:3] == ["element_grounding:0", "element_grounding:1", "element_grounding:2"]
    assert [s.sample_id for s in samples if s.refusal] == [f"refusal_spatial:{i}" for i in range(3)]
    assert all(s.boxes == [] for s in samples if s.refusal)  # the placeholder bbox of a refusal item is not read
    first = samples[0]
    assert first.boxes == [(405.0, 21.0, 459.0, 36.0)] and (first.width, first.height) == (640, 400)
    assert (first.platform, first.ui_type, first.extra["task"]) == ("web", "text", "element_grounding")
    assert first.instruction == 'Click the "previous" link'
    chinese, _ = get_benchmark("venusbench-gd", language="cn").load(VENUS)
    assert chinese[0].instruction == '点击：Click the "previous" link'  # instruction_zh
    with pytest.raises(ValueError, match="language must be one of en, cn"):
        get_benchmark("venusbench-gd", language="zh")
    with pytest.raises(ValueError, match="denominator must be one of positive, with-refusal, refusal-as-miss"):
        get_benchmark("venusbench-gd", denominator="all")


@pytest.mark.parametrize("denominator", [None, "positive", "with-refusal", "refusal-as-miss"])
def test_venusbench_gd_headline_per_denominator(tmp_path, venus_predictions, denominator):
    options = {} if denominator is None else {"denominator": denominator}
    doc = run_eval(
        "venusbench-gd", VENUS, str(tmp_path / "out"), predictions=venus_predictions, benchmark_options=options
    )
    want = VENUS_HEADLINES[denominator or "positive"]  # None: the authors' denominator, listed first
    headline = doc["headline"]
    assert {k: headline[k] for k in ("accuracy", "num_correct", "num_total", "ci95")} == {
        k: want[k] for k in ("accuracy", "num_correct", "num_total", "ci95")
    }
    assert headline["denominator"] == (denominator or "positive") and "56b1005" in headline["source"]
    assert {k: doc[k] for k in VENUS_BREAKDOWNS} == VENUS_BREAKDOWNS  # every cell, whatever the denominator
    assert "by_group" not in doc and doc["language"] == "en"
    results = (tmp_path / "out" / "results.md").read_text(encoding="utf-8")
    assert "**VenusBench-GD accuracy (en instructions)**" in results
    assert "| task | refusal_spatial | 2 | 3 | 0 | 66.67 |" in results


def test_venusbench_gd_chinese_run(tmp_path, venus_predictions):
    doc = run_eval(
        "venusbench-gd",
        VENUS,
        str(tmp_path / "cn"),
        predictions=venus_predictions,
        benchmark_options={"language": "cn"},
    )
    assert doc["language"] == "cn" and doc["overall"] == c(5, 9, 1)  # same boxes, same points


def _venus_copy(tmp_path):
    data = tmp_path / "venus"
    shutil.copytree(VENUS, data)
    return data


def test_venusbench_gd_hostile_records_are_reason_coded_and_neighbours_kept(tmp_path):
    data = _venus_copy(tmp_path)
    path = data / "instruction" / "element_grounding.json"
    good = json.loads(path.read_text(encoding="utf-8"))
    hostile = [
        good[0],
        {k: v for k, v in good[1].items() if k != "bbox"},  # [1] missing bbox
        {**good[1], "bbox": [math.nan, 21, 348, 38]},  # [2] NaN in the box
        {**good[1], "img_filename": "../../instruction/element_grounding.json"},  # [3] out of images/
        {**good[1], "platform": ["web"]},  # [4] a breakdown label that is not a string
        {k: v for k, v in good[1].items() if k != "instruction_zh"},  # [5] fine in English
        "not an object",  # [6]
        good[2],
    ]
    path.write_text(json.dumps(hostile, ensure_ascii=False), encoding="utf-8")  # NaN written as NaN, as Python does
    (data / "instruction" / "visual_grounding.json").write_text('{"img_filename": "web/howto-index.png"}')  # no list
    refusal = data / "instruction" / "refusal_spatial.json"
    records = json.loads(refusal.read_text(encoding="utf-8"))
    refusal.write_text(json.dumps([{k: v for k, v in records[0].items() if k != "bbox"}, *records[1:]]))
    samples, report = get_benchmark("venusbench-gd").load(str(data))
    el = str(path)
    assert [(ref, why) for ref, why, _ in report.rejects] == [
        (f"{el}:[1]", "bad_field"),
        (f"{el}:[2]", "bad_box"),
        (f"{el}:[3]", "path_outside_root"),
        (f"{el}:[4]", "bad_field"),
        (f"{el}:[6]", "unparseable_record"),
        (str(data / "instruction" / "visual_grounding.json"), "unparseable_record"),
    ]
    ids = [s.sample_id for s in samples]
    assert ids[:3] == ["element_grounding:0", "element_grounding:5", "element_grounding:7"]
    assert "refusal_spatial:0" in ids and len(ids) == 3 + 2 + 1 + 2 + 3  # a refusal item needs no bbox
    chinese, report = get_benchmark("venusbench-gd", language="cn").load(str(data))
    assert (f"{el}:[5]", "bad_field") in [(ref, why) for ref, why, _ in report.rejects]
    with pytest.raises(SampleError) as err:
        get_benchmark("venusbench-gd").load(str(data), strict=True)
    assert (err.value.ref, err.value.reason) == (f"{el}:[1]", "bad_field")


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=4),
    lambda inner: st.lists(inner, max_size=2) | st.dictionaries(st.text(max_size=2), inner, max_size=2),
    max_leaves=4,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    field=st.sampled_from(["platform", "application", "ui_type", "bbox", "img_filename", "instruction"]),
    value=JSON_VALUES,
)
def test_venusbench_gd_any_field_value_is_a_sample_or_a_reject_never_a_crash(tmp_path_factory, field, value):
    data = tmp_path_factory.mktemp("v") / "venus"
    os.makedirs(data / "instruction")
    shutil.copytree(os.path.join(VENUS, "images"), data / "images")
    good = json.loads(open(os.path.join(VENUS, "instruction", "spatial_grounding.json"), encoding="utf-8").read())
    (data / "instruction" / "spatial_grounding.json").write_text(json.dumps([{**good[0], field: value}, good[1]]))
    samples, report = get_benchmark("venusbench-gd").load(str(data))
    assert report.num_records == 2 and len(samples) + len(report.rejects) == 2
    assert samples[-1].sample_id == "spatial_grounding:1"  # the neighbour is kept whatever the value
    if report.rejects:
        assert report.rejects[0][0].endswith("spatial_grounding.json:[0]")
        assert report.rejects[0][1] in ("bad_field", "bad_box", "bad_text", "path_outside_root", "missing_image")


# ---------------------------------------------------------------------------------------------------------------------
# UI-I2E-Bench: 8 records, 3 explicit / 5 implicit, sources web / android, element types button / icon

I2E_PREDICTIONS = [
    {"sample_id": "I2E-bench-annotation:0", "point": [100, 24]},  # explicit, box (5,16)-(197,32): correct
    {"sample_id": "I2E-bench-annotation:1", "point": [200, 130]},  # implicit, (45,106)-(346,122): wrong
    {"sample_id": "I2E-bench-annotation:2", "point": [45, 257]},  # implicit, (45,241)-(190,257): corner, correct
    {"sample_id": "I2E-bench-annotation:3", "point": None},  # explicit: no point, wrong_format
    {"sample_id": "I2E-bench-annotation:4", "point": [113, 65]},  # implicit, (104,49)-(113,65): corner, correct
    {"sample_id": "I2E-bench-annotation:5", "point": [60, 290]},  # explicit, (28,281)-(57,297): wrong
    {"sample_id": "I2E-bench-annotation:6", "point": None, "refusal": True},  # implicit, refused: wrong
    {"sample_id": "I2E-bench-annotation:7", "point": [40, 385]},  # implicit, (28,377)-(57,393): correct
]
# Hand count: correct 0, 2, 4, 7 = 4 of 8 records: the headline (correct / total over every record) is 50.00.
# explicit 0, 3, 5: 1 of 3 (3 no point); implicit 1, 2, 4, 6, 7: 3 of 5. web 0-3: 2 of 4; android 4-7: 2 of 4.
I2E_METRICS = {
    "overall": c(4, 8, 1),
    "by_instr_type": {"explicit": c(1, 3, 1), "implicit": c(3, 5)},
    "by_source": {"android": c(2, 4), "web": c(2, 4, 1)},
    "by_element_type": {"button": c(2, 4, 1), "icon": c(2, 4)},
}


def test_ui_i2e_headline_and_breakdowns(tmp_path):
    samples, report = get_benchmark("ui-i2e").load(I2E)
    assert report.rejects == [] and [s.sample_id for s in samples] == [f"I2E-bench-annotation:{i}" for i in range(8)]
    assert samples[0].boxes == [(5.0, 16.0, 197.0, 32.0)] and (samples[0].width, samples[0].height) == (400, 300)
    preds = write_predictions(tmp_path / "p.jsonl", I2E_PREDICTIONS)
    doc = run_eval("ui-i2e", I2E, str(tmp_path / "out"), predictions=preds)
    assert {k: doc["headline"][k] for k in ("accuracy", "num_correct", "num_total")} == {
        "accuracy": 50.0,
        "num_correct": 4,
        "num_total": 8,
    }
    assert doc["headline"]["denominator"] == "all" and "could not be read" in doc["headline"]["source"]
    assert {k: doc[k] for k in I2E_METRICS} == I2E_METRICS
    results = (tmp_path / "out" / "results.md").read_text(encoding="utf-8")
    assert "| instr_type | implicit | 3 | 5 | 0 | 60.00 |" in results


def test_ui_i2e_hostile_lines_are_reason_coded_and_neighbours_kept(tmp_path):
    data = tmp_path / "i2e"
    shutil.copytree(I2E, data)
    path = data / "I2E-bench-annotation.jsonl"
    good = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    lines = [
        json.dumps(good[0]),
        json.dumps({k: v for k, v in good[1].items() if k != "bounding_box"}),  # line 2: missing box
        json.dumps({**good[1], "bounding_box": [math.nan, 1, 2, 3]}),  # line 3: NaN
        json.dumps({**good[1], "image": "../outside.png"}),  # line 4: out of the folder
        json.dumps({**good[1], "annotations": "implicit"}),  # line 5: not an object
        "{garbage",  # line 6: does not parse
        "[1, 2]",  # line 7: a list that holds no record
        json.dumps({**good[1], "source": 7}),  # line 8: a label that is not a string
        json.dumps(good[2]),
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    samples, report = get_benchmark("ui-i2e").load(str(data))
    assert [(ref, why) for ref, why, _ in report.rejects] == [
        (f"{path}:2", "bad_field"),
        (f"{path}:3", "bad_box"),
        (f"{path}:4", "path_outside_root"),
        (f"{path}:5", "bad_field"),
        (f"{path}:6", "unparseable_record"),
        (f"{path}:7", "unparseable_record"),
        (f"{path}:8", "bad_field"),
    ]
    assert [s.sample_id for s in samples] == ["I2E-bench-annotation:0", "I2E-bench-annotation:8"]
    with pytest.raises(FileNotFoundError, match="I2E-bench-annotation.jsonl not found"):
        get_benchmark("ui-i2e").load(str(tmp_path))
