"""Benchmark readers, prediction files and reports on the committed mini benchmarks (data/mini_benchmarks/).

Each mini benchmark is in its native layout, made from our own screenshots by data/mini_benchmarks/
make_mini_benchmarks.py. Prediction sets go through the whole rescoring path (predictions file -> load_predictions ->
results_from_predictions (judge) -> benchmark.metrics) and are checked against exact metric tables.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
from dataclasses import replace

import pytest
from helpers.wilson import ci_text, expected_cell, wilson_closed_form

from gui_grounding.data.annotations import BenchmarkLoadReport, DuplicateIdError, EvalInputError
from gui_grounding.data.schema import SampleError
from gui_grounding.eval.benchmarks import BENCHMARKS, get_benchmark
from gui_grounding.eval.judge import CORRECT, WRONG, WRONG_FORMAT
from gui_grounding.eval.predictions import load_predictions, results_from_predictions
from gui_grounding.eval.report import write_reports
from tests.helpers.bench import harness_detail, rescore, rescore_full

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MINI = os.path.join(ROOT, "data", "mini_benchmarks")
SSV2, SSPRO, OSWG, WEBCLICK = (
    os.path.join(MINI, n) for n in ("screenspot_v2", "screenspot_pro", "osworld_g", "webclick")
)


# ---------------------------------------------------------------------------------------------------------------------
# helpers


def write_webclick_parquet(rows, path):
    """The generator script's parquet writer (same columns and types as the committed mini WebClick)."""
    spec = importlib.util.spec_from_file_location("make_mini_benchmarks", os.path.join(MINI, "make_mini_benchmarks.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.write_webclick_parquet(rows, path)


def centre(s):
    """Centre of the first box, mean of the polygon's vertices, or None for a refusal item."""
    if s.refusal:
        return None
    if s.boxes:
        b = s.boxes[0]
        return [(b[0] + b[2]) / 2, (b[1] + b[3]) / 2]
    xs, ys = zip(*s.polygons[0], strict=True)
    return [sum(xs) / len(xs), sum(ys) / len(ys)]


def corner(s, i):
    """A corner of the box (cycling by ``i``) or a vertex of the polygon; None for refusal items."""
    if s.refusal:
        return None
    if s.boxes:
        b = s.boxes[0]
        return [[b[0], b[1]], [b[2], b[3]], [b[2], b[1]], [b[0], b[3]]][i % 4]
    return list(s.polygons[0][i % len(s.polygons[0])])


def outside(s, i):
    """One pixel outside the box (right or above, cycling), or just outside the polygon; refusal: a real point."""
    if s.refusal:
        return [10, 10]
    if s.boxes:
        b = s.boxes[0]
        return [b[2] + 1, (b[1] + b[3]) / 2] if i % 2 == 0 else [(b[0] + b[2]) / 2, b[1] - 1]
    xs = [p[0] for p in s.polygons[0]]
    return [max(xs) + 1, sum(p[1] for p in s.polygons[0]) / len(xs)]


def write_jsonl(path, points: dict, raw="(12,34)"):
    with open(path, "w", encoding="utf-8") as f:
        for sid, p in points.items():
            f.write(json.dumps({"sample_id": sid, "point": p, "raw_response": raw}) + "\n")
    return str(path)


def score_points(bench, samples, points, tmp_path, name="preds.jsonl"):
    return rescore(bench, samples, write_jsonl(tmp_path / name, points))[0]


def c(correct, total, wf=0):
    """Expected accuracy cell (percent, 2 decimals), with its 95% Wilson interval from the closed form."""
    return expected_cell(correct, total, wf)


def h(correct, total, wf, text, icon):
    """Expected ScreenSpot-Pro harness cell (fractions) with our 95% Wilson intervals (percent, closed form);
    ``text``, ``icon``: (correct, total) of the text and icon samples."""
    return {
        "num_correct_action": correct,
        "num_total": total,
        "wrong_format_num": wf,
        "action_acc": correct / total,
        "text_acc": text[0] / text[1],
        "icon_acc": icon[0] / icon[1],
        "action_ci95": wilson_closed_form(correct, total),
        "text_ci95": wilson_closed_form(*text),
        "icon_ci95": wilson_closed_form(*icon),
    }


@pytest.fixture(scope="module")
def ssv2():
    bench = get_benchmark("screenspot-v2")
    samples, report = bench.load(SSV2)
    return bench, samples, report


@pytest.fixture(scope="module")
def sspro():
    bench = get_benchmark("screenspot-pro")
    samples, report = bench.load(SSPRO)
    return bench, samples, report


@pytest.fixture(scope="module")
def oswg():
    bench = get_benchmark("osworld-g")
    samples, report = bench.load(OSWG)
    return bench, samples, report


@pytest.fixture(scope="module")
def webclick(tmp_path_factory):
    bench = get_benchmark("webclick", cache_dir=str(tmp_path_factory.mktemp("webclick_cache")))
    samples, report = bench.load(WEBCLICK)
    return bench, samples, report


# ---------------------------------------------------------------------------------------------------------------------
# registry


def test_registry_names_and_unknown_name():
    # the shape, not the full list: adding a benchmark (docs/ADDING_A_BENCHMARK.md) must not break this test
    assert {"screenspot-v2", "screenspot-pro", "osworld-g", "webclick", "canonical"} <= set(BENCHMARKS)
    orders = [(cls.listing_order, name) for name, cls in BENCHMARKS.items()]
    assert orders == sorted(orders)  # listing order: Benchmark.listing_order, then name
    for name, cls in BENCHMARKS.items():
        assert cls.name == name and cls.layout_help
    with pytest.raises(ValueError) as err:
        get_benchmark("screenspot")
    assert str(err.value).startswith("unknown benchmark 'screenspot'; registered: ")
    assert str(err.value).split("registered: ")[1].split(", ") == list(BENCHMARKS)
    with pytest.raises(ValueError, match="does not take options"):
        get_benchmark("screenspot-v2", subset="refined")


# ---------------------------------------------------------------------------------------------------------------------
# ScreenSpot-V2


def test_ssv2_load(ssv2):
    _, samples, report = ssv2
    assert isinstance(report, BenchmarkLoadReport)
    assert (report.num_records, report.num_samples, report.rejects) == (10, 10, [])
    assert [s.sample_id for s in samples] == [f"screenspot_mobile_v2:{i}" for i in range(4)] + [
        f"screenspot_desktop_v2:{i}" for i in range(3)
    ] + [f"screenspot_web_v2:{i}" for i in range(3)]
    web0 = samples[7]
    # [x, y, w, h] = [104, 348, 47, 16] -> (104, 348, 151, 364)
    assert (web0.boxes, web0.width, web0.height, web0.platform, web0.ui_type, web0.source) == (
        [(104.0, 348.0, 151.0, 364.0)],
        768,
        512,
        "web",
        "text",
        "python-docs",
    )
    assert web0.instruction == 'Click the "tracker" link'
    assert [(s.platform, s.ui_type) for s in samples].count(("mobile", "text")) == 3


def _ssv2_expected(cells: dict, micro, macro):
    nested = {}
    for (p, u), cell in cells.items():
        nested.setdefault(p, {})[u] = cell
    return {
        "by_platform_ui_type": nested,
        "micro_avg": {**micro, "definition": "correct / total over all samples"},
        "macro_avg": {
            "accuracy": macro,
            "num_cells": 6,
            "definition": "mean of the platform x ui_type cell accuracies, over the cells that have "
            "samples (SeeClick / UGround paper style)",
        },
    }


def test_ssv2_centres_edges_outside_nulls(ssv2, tmp_path):
    bench, samples, _ = ssv2
    full = {
        ("mobile", "text"): 3,
        ("mobile", "icon"): 1,
        ("desktop", "text"): 2,
        ("desktop", "icon"): 1,
        ("web", "text"): 2,
        ("web", "icon"): 1,
    }
    for name, points, correct, wf, acc in [
        ("centre", {s.sample_id: centre(s) for s in samples}, True, False, 100.0),
        ("corners", {s.sample_id: corner(s, i) for i, s in enumerate(samples)}, True, False, 100.0),
        ("outside", {s.sample_id: outside(s, i) for i, s in enumerate(samples)}, False, False, 0.0),
        ("nulls", {s.sample_id: None for s in samples}, False, True, 0.0),
    ]:
        m = score_points(bench, samples, points, tmp_path, f"{name}.jsonl")
        cells = {k: c(n if correct else 0, n, n if wf else 0) for k, n in full.items()}
        expected = _ssv2_expected(cells, c(10 if correct else 0, 10, 10 if wf else 0), acc)
        expected["by_platform"] = {
            p: c(n if correct else 0, n, n if wf else 0) for p, n in (("mobile", 4), ("desktop", 3), ("web", 3))
        }
        expected["by_ui_type"] = {u: c(n if correct else 0, n, n if wf else 0) for u, n in (("text", 7), ("icon", 3))}
        assert m == expected, name


def test_ssv2_mixed_micro_differs_from_macro(ssv2, tmp_path):
    bench, samples, _ = ssv2
    ids = [s.sample_id for s in samples]
    by = dict(zip(ids, samples, strict=True))
    plan = {
        "screenspot_mobile_v2:0": "c",
        "screenspot_mobile_v2:1": "o",
        "screenspot_mobile_v2:2": "n",
        "screenspot_mobile_v2:3": "c",
        "screenspot_desktop_v2:0": "c",
        "screenspot_desktop_v2:1": "c",
        "screenspot_desktop_v2:2": "o",
        "screenspot_web_v2:0": "c",
        "screenspot_web_v2:1": "o",
        "screenspot_web_v2:2": "c",
    }
    points = {sid: {"c": centre(by[sid]), "o": outside(by[sid], 0), "n": None}[k] for sid, k in plan.items()}
    m = score_points(bench, samples, points, tmp_path)
    assert m == {
        "by_platform_ui_type": {
            "mobile": {"text": c(1, 3, 1), "icon": c(1, 1)},
            "desktop": {"text": c(2, 2), "icon": c(0, 1)},
            "web": {"text": c(1, 2), "icon": c(1, 1)},
        },
        "by_platform": {"mobile": c(2, 4, 1), "desktop": c(2, 3), "web": c(2, 3)},
        "by_ui_type": {"text": c(4, 7, 1), "icon": c(2, 3)},
        "micro_avg": {**c(6, 10, 1), "definition": "correct / total over all samples"},
        "macro_avg": {
            "accuracy": 63.89,
            "num_cells": 6,
            "definition": "mean of the platform x ui_type cell accuracies, over the cells that have "
            "samples (SeeClick / UGround paper style)",
        },
    }
    assert m["micro_avg"]["accuracy"] == 60.0
    assert bench.table(m) == (
        "| platform | text | icon | all |\n"
        "|:---|---:|---:|---:|\n"
        f"| mobile | 33.33 [{ci_text(1, 3)}] (1/3) | 100.00 [{ci_text(1, 1)}] (1/1) | 50.00 [{ci_text(2, 4)}] (2/4) |\n"
        f"| desktop | 100.00 [{ci_text(2, 2)}] (2/2) | 0.00 [{ci_text(0, 1)}] (0/1) | 66.67 [{ci_text(2, 3)}] (2/3) |\n"
        f"| web | 50.00 [{ci_text(1, 2)}] (1/2) | 100.00 [{ci_text(1, 1)}] (1/1) | 66.67 [{ci_text(2, 3)}] (2/3) |\n"
        f"| all platforms | 57.14 [{ci_text(4, 7)}] (4/7) | 66.67 [{ci_text(2, 3)}] (2/3) | 60.00 [{ci_text(6, 10)}] "
        "(6/10) |\n"
        "\n"
        f"**micro avg** (correct / total): 60.00 [{ci_text(6, 10)}] (6/10)  \n"
        "**macro avg** (mean of 6 platform x ui_type cells): 63.89 (no interval: a mean of cell accuracies is not one "
        "proportion)  \n"
        "Cells: accuracy % [95% Wilson interval] (correct/total)."
    )
    assert ci_text(1, 3) == "6.15-79.23" and ci_text(6, 10) == "31.27-83.18"  # the closed form, by hand


def test_ssv2_bad_input_counted_with_refs(tmp_path):
    data = tmp_path / "ssv2"
    shutil.copytree(SSV2, data)
    (data / "screenspot_desktop_v2.json").write_text("{not json", encoding="utf-8")
    web = data / "screenspot_web_v2.json"
    records = json.loads(web.read_text(encoding="utf-8"))
    good = records[0]
    records += [
        {**good, "img_filename": "nope.png"},
        {**good, "bbox": [1, 2, 0, 5]},
        {**good, "bbox": [1, 2, 3]},
        {**good, "instruction": "  "},
        "not an object",
    ]
    web.write_text(json.dumps(records), encoding="utf-8")
    os.remove(data / "screenspot_mobile_v2.json")
    bench = get_benchmark("screenspot-v2")
    samples, report = bench.load(str(data))
    # the harness scores an inverted box (never hit) and an empty instruction: kept, with warnings
    assert [s.sample_id for s in samples] == [
        "screenspot_web_v2:0",
        "screenspot_web_v2:1",
        "screenspot_web_v2:2",
        "screenspot_web_v2:4",
        "screenspot_web_v2:6",
    ]
    assert [(ref, reason) for ref, reason, _ in report.rejects] == [
        (str(data / "screenspot_desktop_v2.json"), "unparseable_record"),
        (f"{web}:[3]", "missing_image"),
        (f"{web}:[5]", "bad_box"),
        (f"{web}:[7]", "unparseable_record"),
    ]
    assert report.num_records == 9 and report.num_samples == 5
    assert report.notes == {"missing_annotation_file": 1, "inverted_box": 1, "empty_instruction": 1}
    assert [ref for ref, _ in report.warnings] == [str(data / "screenspot_mobile_v2.json"), f"{web}:[4]", f"{web}:[6]"]
    assert "nope.png" in report.rejects[1][2]
    with pytest.raises(SampleError) as err:
        bench.load(str(data), strict=True)
    assert err.value.ref == str(data / "screenspot_desktop_v2.json")
    with pytest.raises(FileNotFoundError, match="screenspot_"):
        bench.load(str(tmp_path))


def test_ssv2_box_partly_outside_is_kept_and_warned(tmp_path):
    data = tmp_path / "ssv2"
    shutil.copytree(SSV2, data)
    web = data / "screenspot_web_v2.json"
    records = json.loads(web.read_text(encoding="utf-8"))
    records[0]["bbox"] = [760, 500, 20, 20]  # image is 768x512
    records[1]["bbox"] = [800, 10, 20, 20]  # entirely outside
    web.write_text(json.dumps(records), encoding="utf-8")
    samples, report = get_benchmark("screenspot-v2").load(str(data))
    by_id = {s.sample_id: s for s in samples}
    assert by_id["screenspot_web_v2:0"].boxes == [(760.0, 500.0, 780.0, 520.0)]  # not clipped
    assert by_id["screenspot_web_v2:1"].boxes == [(800.0, 10.0, 820.0, 30.0)]  # kept: the harness scores it
    assert report.notes == {"box_partly_outside_image": 1, "box_outside_image": 1} and report.rejects == []
    assert [r for r, _ in report.warnings] == [f"{web}:[0]", f"{web}:[1]"]


# ---------------------------------------------------------------------------------------------------------------------
# ScreenSpot-Pro

FG = "plat:{} app:{} inst_style:instruction gt_type:positive"
SC = "plat:{} inst_style:instruction gt_type:positive"


def test_sspro_load(sspro):
    _, samples, report = sspro
    assert (report.num_records, report.num_samples, report.rejects) == (9, 9, [])
    assert [s.sample_id for s in samples] == [
        f"{t}_{i}" for t in ("pycharm_macos", "vscode_macos", "word_windows") for i in range(3)
    ]
    s = samples[3]
    assert (s.boxes, s.width, s.height, s.platform, s.ui_type) == (
        [(427.0, 51.0, 566.0, 68.0)],
        640,
        360,
        "macos",
        "icon",
    )
    assert (s.extra["group"], s.extra["application"], s.extra["task_filename"], s.extra["img_filename"]) == (
        "Dev",
        "vscode",
        "vscode_macos",
        "vscode_macos/library-json__1280x720.png",
    )


def _sspro_expected(cells: dict) -> dict:
    """Full harness metrics from per-application cells (pycharm, vscode on macos/Dev; word on windows/Office)."""
    return {
        "fine_grained": {
            FG.format("macos", "pycharm"): cells["pycharm"],
            FG.format("macos", "vscode"): cells["vscode"],
            FG.format("windows", "word"): cells["word"],
        },
        "seeclick_style": {SC.format("macos"): cells["macos"], SC.format("windows"): cells["word"]},
        "leaderboard_simple_style": {"group:Dev": cells["macos"], "group:Office": cells["word"]},
        "leaderboard_detailed_style": {
            "app:pycharm": cells["pycharm"],
            "app:vscode": cells["vscode"],
            "app:word": cells["word"],
        },
        "overall": cells["overall"],
    }


def test_sspro_centres_edges_outside_nulls(sspro, tmp_path):
    bench, samples, _ = sspro
    for name, points, n_ok, n_wf in [
        ("centre", {s.sample_id: centre(s) for s in samples}, 1, 0),
        ("corners", {s.sample_id: corner(s, i) for i, s in enumerate(samples)}, 1, 0),
        ("outside", {s.sample_id: outside(s, i) for i, s in enumerate(samples)}, 0, 0),
        ("nulls", {s.sample_id: None for s in samples}, 0, 1),
    ]:
        m = score_points(bench, samples, points, tmp_path, f"{name}.jsonl")
        app = h(3 * n_ok, 3, 3 * n_wf, (2 * n_ok, 2), (n_ok, 1))  # per application: 2 text, 1 icon sample
        macos = h(6 * n_ok, 6, 6 * n_wf, (4 * n_ok, 4), (2 * n_ok, 2))
        overall = h(9 * n_ok, 9, 9 * n_wf, (6 * n_ok, 6), (3 * n_ok, 3))
        expected = _sspro_expected({"pycharm": app, "vscode": app, "word": app, "macos": macos, "overall": overall})
        assert m == expected, name


SSPRO_MIXED = {
    "vscode_macos_0": "c",
    "vscode_macos_1": "n",
    "vscode_macos_2": "o",
    "pycharm_macos_0": "o",
    "pycharm_macos_1": "c",
    "pycharm_macos_2": "c",
    "word_windows_0": "c",
    "word_windows_1": "o",
    "word_windows_2": "n",
}
SSPRO_MIXED_METRICS = _sspro_expected(
    {
        "pycharm": h(2, 3, 0, (2, 2), (0, 1)),
        "vscode": h(1, 3, 1, (0, 2), (1, 1)),
        "word": h(1, 3, 1, (0, 2), (1, 1)),
        "macos": h(3, 6, 1, (2, 4), (1, 2)),
        "overall": h(4, 9, 2, (2, 6), (2, 3)),
    }
)


def _mixed_points(samples):
    by = {s.sample_id: s for s in samples}
    return {sid: {"c": centre(by[sid]), "o": outside(by[sid], 0), "n": None}[k] for sid, k in SSPRO_MIXED.items()}


def test_sspro_mixed_exact_harness_dicts_and_table(sspro, tmp_path):
    bench, samples, _ = sspro
    m = score_points(bench, samples, _mixed_points(samples), tmp_path)
    assert m == SSPRO_MIXED_METRICS
    assert m["overall"]["action_acc"] == 4 / 9
    assert bench.table(m).splitlines()[:5] == [
        "| group | text % | text 95% CI | icon % | icon 95% CI | avg % | avg 95% CI | correct | total | no point |",
        "|:---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        f"| Dev | 50.00 | {ci_text(2, 4)} | 50.00 | {ci_text(1, 2)} | 50.00 | {ci_text(3, 6)} | 3 | 6 | 1 |",
        f"| Office | 0.00 | {ci_text(0, 2)} | 100.00 | {ci_text(1, 1)} | 33.33 | {ci_text(1, 3)} | 1 | 3 | 1 |",
        f"| overall | 33.33 | {ci_text(2, 6)} | 66.67 | {ci_text(2, 3)} | 44.44 | {ci_text(4, 9)} | 4 | 9 | 2 |",
    ]
    assert m["overall"]["action_ci95"] == [18.88, 73.33]  # 4 of 9: the closed form, by hand


def _harness_log(samples, points, *, with_id: bool, extra_details=(), flip=None):
    """An official-harness-style log: one positive/instruction/en detail per sample (pred in pixels)."""
    details = []
    for s in samples:
        p = points[s.sample_id]
        b = s.boxes[0]
        inside = p is not None and b[0] <= p[0] <= b[2] and b[1] <= p[1] <= b[3]
        correctness = WRONG_FORMAT if p is None else CORRECT if inside else WRONG
        if flip == s.sample_id:
            correctness = CORRECT if correctness != CORRECT else WRONG
        d = harness_detail(
            s,
            p,
            img_path=f"/bench/ss-pro/images/{s.extra['img_filename']}",
            raw_response=f"[{p}]",
            correctness=correctness,
        )
        if with_id:
            d = {"id": s.sample_id, **d}
        details.append(d)
    details.extend(extra_details)
    return {"metrics": SSPRO_MIXED_METRICS, "details": details}


@pytest.mark.parametrize("with_id", [True, False], ids=["serial_with_id", "parallel_without_id"])
def test_sspro_harness_log_gives_same_metrics_as_jsonl(sspro, tmp_path, with_id):
    bench, samples, _ = sspro
    points = _mixed_points(samples)
    negative = {**_harness_log(samples[:1], points, with_id=with_id)["details"][0], "gt_type": "negative"}
    chinese = {**_harness_log(samples[:1], points, with_id=with_id)["details"][0], "lang": "cn"}
    log = _harness_log(samples, points, with_id=with_id, extra_details=[negative, chinese])
    path = tmp_path / "harness.json"
    path.write_text(json.dumps(log), encoding="utf-8")
    m, results, preds, report = rescore_full(bench, samples, path)
    assert m == SSPRO_MIXED_METRICS == score_points(bench, samples, points, tmp_path)
    assert report.format == "screenspot_pro_log"
    assert report.counts() == {
        "records": 11,
        "predictions": 9,
        "malformed": 0,
        "malformed_samples": 0,
        "unknown_ids": 0,
        "bad_values": 0,
        "duplicates": 0,
        "not_mapped": 2,
        "missing": 0,
        "harness_disagreements": 0,
    }
    assert [ref for ref, _ in report.not_mapped] == [f"{path}:details[9]", f"{path}:details[10]"]
    assert "gt_type=negative" in report.not_mapped[0][1] and "lang=cn" in report.not_mapped[1][1]
    assert preds["vscode_macos_2"]["raw_response"] == f"[{points['vscode_macos_2']}]"


def test_sspro_harness_log_disagreement_and_unknown_detail(sspro, tmp_path):
    bench, samples, _ = sspro
    points = _mixed_points(samples)
    stranger = {**_harness_log(samples[:1], points, with_id=False)["details"][0], "prompt_to_evaluate": "Click X"}
    log = _harness_log(samples, points, with_id=False, extra_details=[stranger], flip="word_windows_1")
    path = tmp_path / "harness.json"
    path.write_text(json.dumps(log), encoding="utf-8")
    m, _, report = rescore(bench, samples, path)
    assert m == SSPRO_MIXED_METRICS  # our judgement, not the log's
    assert report.harness_disagreements == [("word_windows_1", CORRECT, WRONG)]
    assert report.unknown_ids == [
        (
            f"{path}:details[9]",
            "(task_filename='pycharm_macos', image='tutorial-index__1024x768.png', prompt='Click X')",
        )
    ]


def test_sspro_bad_records(tmp_path):
    data = tmp_path / "sspro"
    shutil.copytree(SSPRO, data)
    ann = data / "annotations" / "vscode_macos.json"
    records = json.loads(ann.read_text(encoding="utf-8"))
    box = records[1]["bbox"]
    records[1]["img_size"] = [1280, 720]  # the image file is 640x360: kept, box scaled as the harness normalises it
    records[2]["img_size"] = "big"
    ann.write_text(json.dumps(records), encoding="utf-8")
    (data / "annotations" / "zz_broken.json").write_text("[{", encoding="utf-8")
    samples, report = get_benchmark("screenspot-pro").load(str(data))
    assert len(samples) == 8
    assert [(r, why) for r, why, _ in report.rejects] == [
        (f"{ann}:[2]", "bad_field"),
        (f"{data / 'annotations' / 'zz_broken.json'}:[0]", "unparseable_record"),
    ]
    assert report.notes == {"img_size_mismatch": 1} and report.warnings[0][0] == f"{ann}:[1]"
    assert "img_size [1280, 720] differs" in report.warnings[0][1]
    assert {s.sample_id: s for s in samples}["vscode_macos_1"].boxes == [tuple(v / 2 for v in box)]
    records[2]["img_size"] = [640, 360]
    records[2]["id"] = "vscode_macos_0"
    ann.write_text(json.dumps(records), encoding="utf-8")
    with pytest.raises(
        DuplicateIdError,
        match=r"1 duplicate sample id\(s\): id 'vscode_macos_0' at .*vscode_macos"
        r"\.json:\[0\] and .*vscode_macos\.json:\[2\]",
    ):
        get_benchmark("screenspot-pro").load(str(data))


# ---------------------------------------------------------------------------------------------------------------------
# OSWorld-G


def test_oswg_load(oswg):
    bench, samples, report = oswg
    assert (report.num_records, report.num_samples, report.rejects, report.warnings) == (8, 8, [], [])
    assert [(s.sample_id, s.extra["box_type"], s.extra["classes"], s.refusal) for s in samples] == [
        ("mini_0", "bbox", ["text_matching"], False),
        ("mini_1", "bbox", ["text_matching", "layout_understanding"], False),
        ("mini_2", "polygon", ["element_recognition"], False),
        ("mini_3", "refusal", ["refusal"], True),
        ("mini_4", "bbox", ["fine_grained_manipulation"], False),
        ("mini_5", "polygon", ["element_recognition", "fine_grained_manipulation"], False),
        ("mini_6", "bbox", ["unclassified"], False),
        ("mini_7", "refusal", ["refusal"], True),
    ]
    assert samples[0].boxes == [(308.0, 354.0, 473.0, 376.0)]  # [x, y, w, h] = [308, 354, 165, 22]
    assert samples[5].polygons == [
        [(80.0, 179.0), (158.0, 179.0), (162.0, 186.0), (158.0, 193.0), (80.0, 193.0), (76.0, 186.0)]
    ]
    assert samples[3].boxes == [] and samples[3].polygons == []
    assert bench.class_order == [
        "text_matching",
        "element_recognition",
        "layout_understanding",
        "fine_grained_manipulation",
        "refusal",
    ]


def _oswg_expected(overall, without_refusal, classes, box_types):
    """The metrics of the plain mini OSWorld-G; the refusal cell is the refusal box type's."""
    names = [
        "text_matching",
        "element_recognition",
        "layout_understanding",
        "fine_grained_manipulation",
        "refusal",
        "unclassified",
    ]
    return {
        "subset": "plain",
        "denominator": "refusal-scored",
        "overall": overall,
        # every item, each refusal item a miss: the target items' hits over every item
        "overall_refusal_as_miss": c(without_refusal["num_correct"], overall["num_total"], overall["wrong_format"]),
        "overall_without_refusal": without_refusal,
        "refusal": box_types[2],
        "by_class": dict(zip(names, classes, strict=True)),
        "by_box_type": dict(zip(["bbox", "polygon", "refusal"], box_types, strict=True)),
    }


# the official refusal answer: a point off the screen at negative coordinates (gui_grounding.eval.judge)
OSWG_OFF_SCREEN = {"mini_3": [-1, -1], "mini_7": [-2, -5]}


def test_oswg_centres_edges_outside_nulls(oswg, tmp_path):
    bench, samples, _ = oswg
    by = {s.sample_id: s for s in samples}
    classes = [c(2, 2), c(2, 2), c(1, 1), c(2, 2), c(2, 2), c(1, 1)]
    full = _oswg_expected(c(8, 8), c(6, 6), classes, [c(4, 4), c(2, 2), c(2, 2)])
    centres = {**{s.sample_id: centre(s) for s in samples}, **OSWG_OFF_SCREEN}
    assert score_points(bench, samples, centres, tmp_path, "centre.jsonl") == full
    edges = {**{s.sample_id: corner(s, i) for i, s in enumerate(samples)}, **OSWG_OFF_SCREEN}
    edges["mini_5"] = [160, 182.5]  # midpoint of the slanted hexagon edge (158, 179)-(162, 186)
    assert score_points(bench, samples, edges, tmp_path, "edges.jsonl") == full
    out = {s.sample_id: outside(s, i) for i, s in enumerate(samples)}
    out["mini_5"] = [161, 181]  # inside the hexagon's bounding box, outside the slanted edge
    assert by["mini_5"].polygons and score_points(bench, samples, out, tmp_path, "out.jsonl") == _oswg_expected(
        c(0, 8), c(0, 6), [c(0, 2), c(0, 2), c(0, 1), c(0, 2), c(0, 2), c(0, 1)], [c(0, 4), c(0, 2), c(0, 2)]
    )
    # no point is no answer, on refusal items too (the official scorer never credits an unreadable answer)
    nulls = score_points(bench, samples, {s.sample_id: None for s in samples}, tmp_path, "nulls.jsonl")
    no_answer = [c(0, n, n) for n in (2, 2, 1, 2, 2, 1)]
    assert nulls == _oswg_expected(c(0, 8, 8), c(0, 6, 6), no_answer, [c(0, 4, 4), c(0, 2, 2), c(0, 2, 2)])


def test_oswg_mixed_multi_class_and_missing_refusal(oswg, tmp_path):
    bench, samples, _ = oswg
    by = {s.sample_id: s for s in samples}
    points = {
        "mini_0": outside(by["mini_0"], 0),
        "mini_1": centre(by["mini_1"]),
        "mini_2": outside(by["mini_2"], 0),
        "mini_3": None,
        "mini_4": outside(by["mini_4"], 1),
        "mini_5": centre(by["mini_5"]),
        "mini_6": None,
    }
    # mini_7 (refusal) has no prediction: counted missing and wrong_format, not a correct abstention; mini_3's null
    # point is no answer either (wrong_format)
    m, results, report = rescore(bench, samples, write_jsonl(tmp_path / "p.jsonl", points))
    assert results["mini_7"] == {"correctness": WRONG_FORMAT, "point": None, "missing": True}
    assert results["mini_3"] == {"correctness": WRONG_FORMAT, "point": None, "missing": False}
    assert report.missing == ["mini_7"]
    classes = [c(1, 2), c(1, 2), c(1, 1), c(1, 2), c(0, 2, 2), c(0, 1, 1)]
    assert m == _oswg_expected(c(2, 8, 3), c(2, 6, 1), classes, [c(1, 4, 1), c(1, 2), c(0, 2, 2)])
    assert "| class | layout_understanding | 1 | 1 | 0 | 100.00 |" in bench.table(m)


def test_oswg_formats_subsets_and_bad_records(tmp_path):
    data = tmp_path / "oswg"
    shutil.copytree(OSWG, data)
    path = data / "OSWorld-G.json"
    records = json.loads(path.read_text(encoding="utf-8"))
    flat = records[5]["box_coordinates"]
    refined = [dict(r) for r in records]
    refined[5]["box_coordinates"] = [[flat[i], flat[i + 1]] for i in range(0, len(flat), 2)]  # nested form
    (data / "OSWorld-G_refined.json").write_text(json.dumps(refined), encoding="utf-8")
    plain, _ = get_benchmark("osworld-g").load(str(data))
    nested, _ = get_benchmark("osworld-g", subset="refined").load(str(data))
    assert nested[5].polygons == plain[5].polygons
    records += [
        {**records[2], "id": "bad_0", "box_coordinates": [1, 2, 3, 4]},  # 2 vertices
        {**records[2], "id": "bad_1", "box_type": "point"},
        {**records[2], "id": "odd_2", "box_coordinates": [1, 1, 2, 2, 3, 3]},  # zero area: kept, warned
        {**records[0], "id": "bad_3", "image_path": "missing.png"},
    ]
    path.write_text(json.dumps(records), encoding="utf-8")
    os.remove(data / "OSWorld-G_refined.json")
    samples, report = get_benchmark("osworld-g").load(str(data))
    assert len(samples) == 9 and samples[-1].sample_id == "odd_2"
    assert [(r, why) for r, why, _ in report.rejects] == [
        (f"{path}:[8]", "bad_box"),
        (f"{path}:[9]", "bad_field"),
        (f"{path}:[11]", "missing_image"),
    ]
    assert report.notes == {"inverted_box": 1} and report.warnings[0][0] == f"{path}:[10]"
    path.write_text(json.dumps([*records, {**records[0], "id": "mini_0"}]), encoding="utf-8")
    with pytest.raises(DuplicateIdError, match=r"id 'mini_0' at .*OSWorld-G\.json:\[0\] and .*OSWorld-G\.json:\[12\]"):
        get_benchmark("osworld-g").load(str(data))
    path.write_text(json.dumps(records), encoding="utf-8")
    cls = json.loads((data / "classification_result.json").read_text(encoding="utf-8"))
    cls["classified"]["refusal"].append({"id": "ghost"})
    (data / "classification_result.json").write_text(json.dumps(cls), encoding="utf-8")
    _, report = get_benchmark("osworld-g").load(str(data))
    assert report.notes["classified_id_not_in_annotations"] == 1
    with pytest.raises(FileNotFoundError, match="OSWorld-G_refined.json"):
        get_benchmark("osworld-g", subset="refined").load(str(data))
    os.remove(data / "classification_result.json")
    with pytest.raises(FileNotFoundError, match="classification_result.json"):
        get_benchmark("osworld-g").load(str(data))


# ---------------------------------------------------------------------------------------------------------------------
# WebClick


def test_webclick_load_and_metrics(webclick, tmp_path):
    bench, samples, report = webclick
    assert (report.num_records, report.num_samples, report.rejects) == (8, 8, [])
    assert report.notes == {"bbox_normalised": 8}
    assert [s.sample_id for s in samples] == [str(i) for i in range(8)]
    assert [s.extra["bucket"] for s in samples] == ["agentbrowse"] * 3 + ["humanbrowse"] * 3 + ["calendars"] * 2
    assert (samples[0].boxes, samples[0].width, samples[0].height) == ([(81.0, 21.0, 220.0, 38.0)], 512, 512)
    assert all(os.path.isfile(s.image_path) for s in samples)
    conv = {"normalised": 8, "pixels": 0}
    for name, points, ok, wf in [
        ("centre", {s.sample_id: centre(s) for s in samples}, True, False),
        ("corners", {s.sample_id: corner(s, i) for i, s in enumerate(samples)}, True, False),
        ("outside", {s.sample_id: outside(s, i) for i, s in enumerate(samples)}, False, False),
        ("nulls", {s.sample_id: None for s in samples}, False, True),
    ]:
        m = score_points(bench, samples, points, tmp_path, f"{name}.jsonl")
        assert m == {
            "overall": c(8 * ok, 8, 8 * wf),
            "by_bucket": {
                "agentbrowse": c(3 * ok, 3, 3 * wf),
                "humanbrowse": c(3 * ok, 3, 3 * wf),
                "calendars": c(2 * ok, 2, 2 * wf),
            },
            "bbox_convention": conv,
        }, name
    mixed = {s.sample_id: centre(s) for s in samples}
    mixed["2"], mixed["4"], mixed["5"] = None, outside(samples[4], 0), outside(samples[5], 1)
    assert score_points(bench, samples, mixed, tmp_path) == {
        "overall": c(5, 8, 1),
        "by_bucket": {"agentbrowse": c(2, 3, 1), "humanbrowse": c(1, 3), "calendars": c(2, 2)},
        "bbox_convention": conv,
    }


def _read_rows(path):
    import pyarrow.parquet as pq

    return pq.read_table(path).to_pylist()


def test_webclick_pixel_and_normalised_bbox_give_same_samples(webclick, tmp_path):
    _, samples, _ = webclick
    rows = _read_rows(os.path.join(WEBCLICK, "data", "test-00000-of-00001.parquet"))
    pixel_rows = [
        {**r, "bbox": [r["bbox"][0] * 512, r["bbox"][1] * 512, r["bbox"][2] * 512, r["bbox"][3] * 512]} for r in rows
    ]
    write_webclick_parquet(pixel_rows, str(tmp_path / "px" / "data" / "test-00000-of-00001.parquet"))
    bench = get_benchmark("webclick", cache_dir=str(tmp_path / "cache_px"))
    px_samples, report = bench.load(str(tmp_path / "px"))
    assert report.notes == {"bbox_pixels": 8}

    def key(s):
        return s.sample_id, s.instruction, s.boxes, s.width, s.height, s.extra["bucket"], os.path.basename(s.image_path)

    assert [key(s) for s in px_samples] == [key(s) for s in samples]
    assert bench.metrics(px_samples, {s.sample_id: {"correctness": CORRECT} for s in px_samples})[
        "bbox_convention"
    ] == {"normalised": 0, "pixels": 8}


def test_webclick_save_to_disk_and_bad_rows(webclick, tmp_path):
    import datasets

    _, samples, _ = webclick
    rows = _read_rows(os.path.join(WEBCLICK, "data", "test-00000-of-00001.parquet"))
    features = datasets.Features(
        {
            "image": datasets.Image(),
            "instruction": datasets.Value("string"),
            "bbox": datasets.Sequence(datasets.Value("float64")),
            "bucket": datasets.Value("string"),
        }
    )
    datasets.Dataset.from_list(rows, features=features).save_to_disk(str(tmp_path / "disk"))
    disk, report = get_benchmark("webclick", cache_dir=str(tmp_path / "c1")).load(str(tmp_path / "disk"))
    assert [(s.sample_id, s.boxes, s.extra["bucket"]) for s in disk] == [
        (s.sample_id, s.boxes, s.extra["bucket"]) for s in samples
    ]
    bad = rows[:2] + [
        {**rows[2], "image": {"bytes": b"not an image", "path": None}},
        {**rows[3], "bbox": [0.5, 0.5, 0.4, 0.6]},
        {**rows[4], "instruction": ""},
    ]
    path = tmp_path / "bad" / "x.parquet"
    write_webclick_parquet(bad, str(path))
    got, report = get_benchmark("webclick", cache_dir=str(tmp_path / "c2")).load(str(tmp_path / "bad"))
    assert [s.sample_id for s in got] == ["0", "1", "3", "4"]  # inverted box, empty instruction: kept, warned
    assert [(r, why) for r, why, _ in report.rejects] == [(f"{path}:[2]", "unreadable_image")]
    assert [r for r, _ in report.warnings] == [f"{path}:[3]", f"{path}:[4]"]
    assert {k: report.notes[k] for k in ("inverted_box", "empty_instruction")} == {
        "inverted_box": 1,
        "empty_instruction": 1,
    }


# ---------------------------------------------------------------------------------------------------------------------
# canonical


def test_canonical_file_and_folder():
    bench = get_benchmark("canonical")
    samples, report = bench.load(os.path.join(ROOT, "data", "web_sample"))
    same, _ = bench.load(os.path.join(ROOT, "data", "web_sample", "test.jsonl"))
    assert [s.sample_id for s in samples] == [s.sample_id for s in same] and report.rejects == []
    results = {
        s.sample_id: {"correctness": CORRECT if i % 2 == 0 else WRONG_FORMAT, "point": None}
        for i, s in enumerate(samples)
    }
    m = bench.metrics(samples, {s.sample_id: {"correctness": CORRECT} for s in samples})
    assert m == {
        "overall": c(187, 187),
        "by_platform": {"web": c(187, 187)},
        "by_ui_type": {"icon": c(8, 8), "text": c(179, 179)},
        "by_source": {"web-collector": c(187, 187)},
    }
    assert bench.metrics(samples, results)["overall"] == c(94, 187, 93)
    with pytest.raises(FileNotFoundError, match="test.jsonl"):
        bench.load(MINI)
    with pytest.raises(ValueError, match="no result"):
        bench.metrics(samples, {})


# ---------------------------------------------------------------------------------------------------------------------
# predictions files


def test_predictions_bad_lines_counted_with_file_line(ssv2, tmp_path):
    bench, samples, _ = ssv2
    ids = [s.sample_id for s in samples]
    lines = [
        json.dumps({"sample_id": ids[0], "point": centre(samples[0]), "raw_response": "(1,2)"}),  # 1 ok
        "{not json",  # 2
        json.dumps({"point": [1, 2]}),  # 3 no sample_id
        json.dumps({"sample_id": ids[1], "point": [1]}),  # 4 one number
        json.dumps({"sample_id": ids[2], "point": ["a", 2]}),  # 5 not numbers
        json.dumps({"sample_id": ids[3], "point": [float("nan"), 2]}),  # 6 not finite
        json.dumps({"sample_id": ids[4]}),  # 7 no point key
        "",  # blank lines are not records
        json.dumps({"sample_id": "screenspot_web_v2:99", "point": [1, 2]}),  # 9 unknown id
        json.dumps({"sample_id": ids[0], "point": None}),  # 10 duplicate: refused unless on_duplicate
        json.dumps([1, 2]),
    ]  # 11 not an object
    path = tmp_path / "p.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(EvalInputError, match=f"1 duplicate prediction.*{ids[0]}' at {path}:1 and {path}:10"):
        load_predictions(str(path), samples)
    preds, report = load_predictions(str(path), samples, on_duplicate="last")
    assert list(preds) == ids[:5] and preds[ids[0]]["point"] is None and preds[ids[0]]["ref"] == f"{path}:10"
    assert [ref for ref, _ in report.malformed] == [f"{path}:{n}" for n in (2, 3, 4, 5, 6, 7, 11)]
    assert report.malformed_samples == ids[1:5]  # lines 4-7 name their sample: scored wrong_format
    assert report.unknown_ids == [(f"{path}:9", "screenspot_web_v2:99")]
    assert report.duplicates == [(f"{path}:10", ids[0])]
    results = results_from_predictions(samples, preds, report)
    assert report.counts() == {
        "records": 10,
        "predictions": 5,
        "malformed": 7,
        "malformed_samples": 4,
        "unknown_ids": 1,
        "bad_values": 0,
        "duplicates": 1,
        "not_mapped": 0,
        "missing": 5,
        "harness_disagreements": 0,
    }
    assert sum(r["correctness"] == WRONG_FORMAT for r in results.values()) == 10
    assert all(results[i]["malformed"].startswith(f"sample {i}: ") for i in ids[1:5])
    with pytest.raises(ValueError, match=f"{path}:2: malformed"):
        load_predictions(str(path), samples, strict=True)
    unknown_only = tmp_path / "u.jsonl"
    unknown_only.write_text(lines[8] + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match=f"{unknown_only}:1: prediction for unknown sample"):
        load_predictions(str(unknown_only), samples, strict=True)
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"metrics": {}}), encoding="utf-8")
    with pytest.raises(ValueError, match="neither a predictions JSONL"):
        load_predictions(str(other), samples)
    with pytest.raises(FileNotFoundError):
        load_predictions(str(tmp_path / "nope.jsonl"), samples)


# ---------------------------------------------------------------------------------------------------------------------
# reports


def test_write_reports(ssv2, tmp_path):
    from PIL import Image

    bench, samples, load_report = ssv2
    points = {s.sample_id: centre(s) for s in samples}
    points["screenspot_mobile_v2:1"] = outside(samples[1], 0)
    points["screenspot_desktop_v2:0"] = [-50, 10]  # outside the image
    points["screenspot_web_v2:2"] = None
    del points["screenspot_web_v2:1"]
    path = tmp_path / "preds.jsonl"
    with open(path, "w", encoding="utf-8") as f:
        for sid, p in points.items():
            f.write(
                json.dumps({"sample_id": sid, "point": p, "raw_response": "<script>alert(1)</script> & (1,2)"}) + "\n"
            )
        f.write(json.dumps({"sample_id": "ghost", "point": [1, 2]}) + "\n")
    m, results, preds, report = rescore_full(bench, samples, path)
    out = tmp_path / "out"
    doc = write_reports(
        str(out),
        bench,
        samples,
        results,
        m,
        preds,
        prediction_report=report,
        load_report=load_report,
        meta={"model": "none"},
        max_failures=3,
    )
    saved = json.loads((out / "metrics.json").read_text(encoding="utf-8"))
    assert saved == json.loads(json.dumps(doc))
    assert saved["benchmark"] == "screenspot-v2" and saved["micro_avg"]["accuracy"] == 60.0
    assert {k: saved["predictions"][k] for k in ("predictions", "missing", "unknown_ids", "malformed")} == {
        "predictions": 9,
        "missing": 1,
        "unknown_ids": 1,
        "malformed": 0,
    }
    assert saved["predictions"]["examples"]["unknown_ids"] == [[f"{path}:10", "ghost"]]
    assert saved["data"]["num_samples"] == 10 and saved["meta"] == {"model": "none"}
    assert saved["micro_avg"]["ci95"] == wilson_closed_form(6, 10) == [31.27, 83.18]
    scores = [json.loads(line) for line in (out / "scores.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [x["sample_id"] for x in scores] == [s.sample_id for s in samples]
    first = {"sample_id": samples[0].sample_id, "correctness": CORRECT, "point": centre(samples[0]), "refusal": False}
    assert {k: v for k, v in scores[0].items() if k != "target"} == first
    assert [x["correctness"] for x in scores].count(CORRECT) == 6
    by_id = {x["sample_id"]: x for x in scores}
    outside_image = {"sample_id": "screenspot_desktop_v2:0", "correctness": WRONG, "point": [-50, 10], "refusal": False}
    assert {k: v for k, v in by_id["screenspot_desktop_v2:0"].items() if k != "target"} == outside_image
    assert by_id["screenspot_web_v2:1"]["correctness"] == WRONG_FORMAT and by_id["screenspot_web_v2:1"]["point"] is None
    md = (out / "results.md").read_text(encoding="utf-8")
    assert md.startswith("# screenspot-v2: 10 samples\n") and bench.table(m) in md
    assert "1 samples without a prediction (counted wrong_format); 1 unknown sample_ids" in md
    page = (out / "failures.html").read_text(encoding="utf-8")
    assert "4 of 10 samples failed (wrong 2, wrong_format 2); showing 3, 1 omitted (max_failures=3)" in page
    assert page.count('<div class="card">') == 3
    assert "<script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt; &amp; (1,2)" in page
    assert "Click &quot;previous&quot;" in page  # instruction escaped
    assert "outside the 960x540 image" in page and "no prediction for this sample" in page
    images = sorted(os.listdir(out / "failures"))
    assert images == ["0001.jpg", "0001_zoom.jpg", "0002.jpg", "0002_zoom.jpg", "0003.jpg", "0003_zoom.jpg"]
    for name in images:
        assert f'src="failures/{name}"' in page
        with Image.open(out / "failures" / name) as im:
            assert im.width <= 800
    # a rerun with everything correct leaves no stale pictures
    ok = {s.sample_id: {"correctness": CORRECT, "point": centre(s), "missing": False} for s in samples}
    write_reports(str(out), bench, samples, ok, bench.metrics(samples, ok), {})
    assert os.listdir(out / "failures") == []
    assert "0 of 10 samples failed (none); showing 0" in (out / "failures.html").read_text(encoding="utf-8")
    with pytest.raises(ValueError, match="reserved"):
        write_reports(str(out), bench, samples, ok, {"data": 1}, {})


def test_failures_html_refusal_polygon_and_missing_image(oswg, tmp_path):
    bench, samples, _ = oswg
    results = {s.sample_id: {"correctness": CORRECT, "point": None, "missing": False} for s in samples}
    results["mini_3"] = {"correctness": WRONG, "point": [100, 100], "missing": False}  # refusal answered
    results["mini_5"] = {"correctness": WRONG, "point": [161, 181], "missing": False}  # polygon missed
    broken = list(samples)
    broken[6] = replace(samples[6], image_path=str(tmp_path / "gone.png"))
    results["mini_6"] = {"correctness": WRONG_FORMAT, "point": None, "missing": True}
    write_reports(str(tmp_path), bench, broken, results, bench.metrics(broken, results), {})
    page = (tmp_path / "failures.html").read_text(encoding="utf-8")
    assert page.count('<div class="card">') == 3
    assert "refusal item: correct only on a refusal answer" in page
    assert "polygon of 6 vertices" in page and "no prediction for this sample" in page
    assert "cannot draw" in page and "gone.png" in page
    # refusal: thumbnail only; polygon: thumbnail + zoom; missing image: none
    assert sorted(os.listdir(tmp_path / "failures")) == ["0001.jpg", "0002.jpg", "0002_zoom.jpg"]
