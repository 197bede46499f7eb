"""UI-Vision, MMBench-GUI L2 and Showdown-clicks: readers, official headlines and hostile records.

Each benchmark is rescored end to end on its committed mini fixture (data/mini_benchmarks/{ui_vision,mmbench_gui_l2,
showdown_clicks}/, made by data/mini_benchmarks/make_mini_benchmarks_b1.py) through ``run_eval`` with a predictions
file whose hits and misses are chosen per sample, and the headline and breakdown cells are checked exactly; then
hostile records (missing fields, NaN, paths out of the image folder, boxes the official scorer cannot score, broken
CSV rows) must be reason-coded rejects of their own record, their neighbours kept.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import tempfile

import pytest
from helpers.wilson import expected_cell, wilson_closed_form
from hypothesis import given, settings
from hypothesis import strategies as st

from groundwork.records import DataFileError, RecordError
from gui_grounding.cli import main as cli_main
from gui_grounding.data.annotations import DuplicateIdError
from gui_grounding.eval.benchmarks import get_benchmark
from gui_grounding.eval.benchmarks.mmbench_gui import MMBenchGUIL2
from gui_grounding.eval.benchmarks.showdown_clicks import ShowdownClicks, iter_csv_records
from gui_grounding.eval.benchmarks.ui_vision import UIVision
from gui_grounding.eval.run import run_eval

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MINI = os.path.join(ROOT, "data", "mini_benchmarks")
UIV, MMB, SHOWDOWN = (os.path.join(MINI, n) for n in ("ui_vision", "mmbench_gui_l2", "showdown_clicks"))
c = expected_cell


def centre(s):
    b = s.boxes[0]
    return [(b[0] + b[2]) / 2, (b[1] + b[3]) / 2]


def outside(s):
    """One pixel right of the box, at its middle height."""
    b = s.boxes[0]
    return [b[2] + 1, (b[1] + b[3]) / 2]


def write_predictions(path, points: dict) -> str:
    """One line ``{"sample_id", "point"}`` per entry (points in original pixels, or None)."""
    with open(path, "w", encoding="utf-8") as f:
        for sid, point in points.items():
            f.write(json.dumps({"sample_id": sid, "point": point}) + "\n")
    return str(path)


def rejects(report) -> list[tuple[str, str]]:
    return [(ref, reason) for ref, reason, _ in report.rejects]


# ---------------------------------------------------------------------------------------------------------------------
# UI-Vision


def uiv_predictions(tmp_path) -> str:
    s = {x.sample_id: x for x in get_benchmark("ui-vision").load(UIV)[0]}
    b0 = s["element_grounding_basic:0"].boxes[0]
    return write_predictions(
        tmp_path / "uiv.jsonl",
        {
            "element_grounding_basic:0": [b0[2], b0[3]],  # VSCode text: the far corner, edges included -> correct
            "element_grounding_basic:1": outside(s["element_grounding_basic:1"]),  # GIMP icon -> wrong
            "element_grounding_basic:2": centre(s["element_grounding_basic:2"]),  # Calc text -> correct
            "element_grounding_basic:3": [119, 122],  # VSCode text, bbox [162, 129, 76, 115]: correct once swapped
            "element_grounding_functional:0": centre(s["element_grounding_functional:0"]),  # GIMP icon -> correct
            "element_grounding_functional:1": [10, 10],  # Calc text -> wrong
            "element_grounding_functional:2": None,  # VSCode text -> wrong_format
            "element_grounding_spatial:0": outside(s["element_grounding_spatial:0"]),  # GIMP text -> wrong
            "element_grounding_spatial:1": outside(s["element_grounding_spatial:1"]),  # Calc text -> wrong
        },
    )


def test_ui_vision_final_avg_is_the_mean_of_the_file_accuracies(tmp_path):
    samples, report = get_benchmark("ui-vision").load(UIV)
    assert [s.sample_id for s in samples] == [
        *(f"element_grounding_basic:{i}" for i in range(4)),
        *(f"element_grounding_functional:{i}" for i in range(3)),
        *(f"element_grounding_spatial:{i}" for i in range(2)),
    ]
    swapped = samples[3]
    assert swapped.extra["bbox_raw"] == [162, 129, 76, 115] and swapped.boxes == [(76.0, 115.0, 162.0, 129.0)]
    assert report.rejects == [] and dict(report.notes) == {"bbox_corners_swapped": 1}
    assert (swapped.platform, swapped.ui_type, swapped.extra["category"]) == ("VSCode", "text", "Development")

    doc = run_eval("ui-vision", UIV, str(tmp_path / "out"), predictions=uiv_predictions(tmp_path))
    # Final Avg = mean of the per-file accuracies: basic 3/4, functional 1/3, spatial 0/2
    #           = (75.00 + 33.33 + 0.00) / 3 = 36.11; the pooled accuracy is 4/9 = 44.44
    assert doc["headline"] == {
        "accuracy": 36.11,
        "num_correct": None,
        "num_total": None,
        "ci95": None,
        "rule": UIVision.headline_rule,
        "denominator": "all",
        "source": UIVision.headline_source,
    }
    assert doc["files"] == {"basic": c(3, 4), "functional": c(1, 3, 1), "spatial": c(0, 2)}
    assert doc["final_avg"]["accuracy"] == 36.11 and doc["final_avg"]["num_files"] == 3
    assert {k: v for k, v in doc["overall"].items() if k != "definition"} == c(4, 9, 1)
    assert doc["by_platform"] == {"VSCode": c(2, 3, 1), "GIMP": c(1, 3), "LibreOffice Calc": c(1, 3)}
    assert doc["by_element_type"] == {"text": c(3, 7, 1), "icon": c(1, 2)}
    assert doc["by_category"] == {"Development": c(2, 3, 1), "Creativity": c(1, 3), "Productivity": c(1, 3)}
    results_md = (tmp_path / "out" / "results.md").read_text(encoding="utf-8")
    assert "**ui-vision headline**: 36.11%; denominator `all`: Final Avg" in results_md


def test_ui_vision_hostile_records_are_rejects_of_their_own(tmp_path):
    data = tmp_path / "uiv"
    shutil.copytree(UIV, data)
    path = data / "annotations" / "element_grounding" / "element_grounding_basic.json"
    records = json.loads(path.read_text(encoding="utf-8"))
    good = records[0]  # VSCode, bbox [56, 11, 130, 25] in a 320x288 image
    records += [
        {k: v for k, v in good.items() if k != "prompt_to_evaluate"},  # [4] missing field
        {**good, "bbox": [56, 11, float("nan"), 25]},  # [5] NaN
        {**good, "image_path": "../../vscode.png"},  # [6] climbs out of images/
        {**good, "image_size": [0, 288]},  # [7] no size
        {**good, "image_size": [640, 576]},  # [8] twice the file: the box is halved, as the scorer normalises it
        {k: v for k, v in good.items() if k not in ("platform", "element_type", "category")},  # [9] no labels
        {**good, "platform": 7},  # [10] a label that is no string
    ]
    path.write_text(json.dumps(records), encoding="utf-8")
    samples, report = get_benchmark("ui-vision").load(str(data))
    ref = f"{path}:[{{}}]"
    assert rejects(report) == [
        (ref.format(4), "bad_field"),
        (ref.format(5), "bad_box"),
        (ref.format(6), "path_outside_root"),
        (ref.format(7), "bad_field"),
        (ref.format(10), "bad_field"),
    ]
    by_id = {s.sample_id: s for s in samples}
    assert len(samples) == 11 and by_id["element_grounding_basic:0"].boxes == [(56.0, 11.0, 130.0, 25.0)]
    assert by_id["element_grounding_basic:8"].boxes == [(28.0, 5.5, 65.0, 12.5)]
    assert report.notes["img_size_mismatch"] == 1
    unlabelled = by_id["element_grounding_basic:9"]
    assert (unlabelled.platform, unlabelled.ui_type, unlabelled.extra["category"]) == (None, None, None)
    results = {s.sample_id: {"correctness": "correct"} for s in samples}
    m = UIVision().metrics(samples, results)
    assert m["files"]["basic"] == c(6, 6) and sum(x["num_total"] for x in m["by_platform"].values()) == 10
    # only the missing annotation file is named; the others are scored
    os.remove(data / "annotations" / "element_grounding" / "element_grounding_spatial.json")
    samples, report = get_benchmark("ui-vision").load(str(data))
    assert report.notes["missing_annotation_file"] == 1 and len(samples) == 9


# ---------------------------------------------------------------------------------------------------------------------
# MMBench-GUI L2


def mmb_predictions(tmp_path) -> str:
    s = {x.sample_id: x for x in get_benchmark("mmbench-gui-l2").load(MMB)[0]}
    b0 = s["0"].boxes[0]
    hits = {"0": [b0[2], b0[3]], **{i: centre(s[i]) for i in ("1", "3", "4", "7", "9", "10")}}
    misses = {i: outside(s[i]) for i in ("2", "5", "8")}
    return write_predictions(tmp_path / "mmb.jsonl", {**hits, **misses, "6": None})


def test_mmbench_gui_l2_average_is_the_mean_of_the_sample_weighted_levels(tmp_path):
    samples, report = get_benchmark("mmbench-gui-l2").load(MMB)
    assert [s.sample_id for s in samples] == [str(i) for i in range(11)]
    assert dict(report.notes) == {"bbox_normalised": 11} and report.rejects == []
    # normalised [0.16015625, 0.109375, 0.2890625, 0.171875] of the 512x256 os_windows image, in pixels
    assert samples[0].boxes == [(82.0, 28.0, 148.0, 44.0)]
    assert samples[0].image_path.endswith(os.path.join("offline_images", "os_windows", "glossary__1024x768.png"))

    doc = run_eval("mmbench-gui-l2", MMB, str(tmp_path / "out"), predictions=mmb_predictions(tmp_path))
    # Basic = (2/3 * 3 + 2/2 * 2) / 5 = 4/5 = 80.00 (os_windows 2/3, os_mac 2/2, weighted by their 3 and 2 records);
    # Advanced = (0/2 * 2 + 1/2 * 2 + 2/2 * 2) / 6 = 3/6 = 50.00 (os_windows, os_web, os_android);
    # Average = (80.00 + 50.00) / 2 = 65.00, not the pooled 7/11 = 63.64, nor the mean of the 5 platform cells
    # (66.67 + 100 + 0 + 50 + 100) / 5 = 63.33
    assert doc["headline"] == {
        "accuracy": 65.0,
        "num_correct": None,
        "num_total": None,
        "ci95": None,
        "rule": MMBenchGUIL2.headline_rule,
        "denominator": "all",
        "source": MMBenchGUIL2.headline_source,
    }
    assert doc["levels"] == {"basic": c(4, 5), "advanced": c(3, 6, 1)}
    assert doc["average"]["accuracy"] == 65.0 and doc["average"]["num_levels"] == 2
    assert {k: v for k, v in doc["overall"].items() if k != "definition"} == c(7, 11, 1)
    assert doc["by_level_platform"] == {
        "basic": {
            "os_windows": {"all": c(2, 3), "icon": c(0, 1), "text": c(2, 2)},
            "os_mac": {"all": c(2, 2), "icon": c(1, 1), "text": c(1, 1)},
        },
        "advanced": {
            "os_windows": {"all": c(0, 2, 1), "icon": c(0, 1), "text": c(0, 1, 1)},
            "os_android": {"all": c(2, 2), "icon": c(1, 1), "text": c(1, 1)},
            "os_web": {"all": c(1, 2), "icon": c(1, 1), "text": c(0, 1)},
        },
    }
    assert doc["by_platform"] == {"os_windows": c(2, 5, 1), "os_mac": c(2, 2), "os_android": c(2, 2), "os_web": c(1, 2)}
    assert doc["by_data_type"] == {"icon": c(3, 5), "text": c(4, 6, 1)}


def test_mmbench_gui_l2_hostile_records_follow_the_official_box_rule(tmp_path):
    data = tmp_path / "mmb"
    shutil.copytree(MMB, data)
    path = data / "L2_annotations.json"
    records = json.loads(path.read_text(encoding="utf-8"))
    good = records[0]  # os_windows 512x256, bbox normalised = (82, 28, 148, 44) px
    extra = [
        {k: v for k, v in good.items() if k != "data_type"},  # [11] missing field
        {**good, "data_type": "widget"},  # [12] not icon/text
        {**good, "grounding_type": "expert"},  # [13] not basic/advanced
        {**good, "bbox": [0.1, float("nan"), 0.2, 0.3]},  # [14] NaN
        {**good, "bbox": [10, 10, 600, 20]},  # [15] pixels past the 512-px width: the official scorer raises
        {**good, "bbox": [-1, 0.25, 0.5, 0.5]},  # [16] -1 is not in [0, 1]: pixels, -1 read as 0 (make_safe)
        {**good, "bbox": [82, 28, 148, 44]},  # [17] pixels, the same box
        {**good, "platform": "../os_mac"},  # [18] a platform folder outside offline_images/
        {**good, "image_path": "../os_mac/contents__1024x768.png"},  # [19] out of its platform folder
        {**good, "image_size": [1024, 512]},  # [20] differs from the file: the file's size is used
        {**good, "image_path": "gone.png"},  # [21] missing image, image_size stated
        {k: v for k, v in good.items() if k != "image_size"} | {"image_path": "gone.png"},  # [22] neither
    ]
    records += [{**r, "index": 11 + i} for i, r in enumerate(extra)]
    path.write_text(json.dumps(records), encoding="utf-8")
    samples, report = get_benchmark("mmbench-gui-l2").load(str(data))
    ref = f"{path}:[{{}}]"
    assert rejects(report) == [
        (ref.format(11), "bad_field"),
        (ref.format(12), "bad_field"),
        (ref.format(13), "bad_field"),
        (ref.format(14), "bad_box"),
        (ref.format(15), "bad_box"),
        (ref.format(18), "path_outside_root"),
        (ref.format(19), "path_outside_root"),
        (ref.format(21), "missing_image"),
        (ref.format(22), "missing_image"),
    ]
    assert "raises 'bbox out of range'" in report.rejects[4][2]
    by_id = {s.sample_id: s for s in samples}
    assert len(samples) == 14 and by_id["0"].boxes == [(82.0, 28.0, 148.0, 44.0)]
    assert by_id["16"].boxes == [(0.0, 0.25, 0.5, 0.5)] and by_id["16"].extra["bbox_convention"] == "pixels"
    assert by_id["17"].boxes == by_id["20"].boxes == [(82.0, 28.0, 148.0, 44.0)]
    assert report.notes["bbox_pixels"] == 2 and report.notes["bbox_normalised"] == 12
    assert report.notes["suspect_unit"] == 1 and report.notes["img_size_mismatch"] == 1
    # rescoring needs no pixels: a missing image is kept at its stated size; without one the box cannot be placed
    bench = MMBenchGUIL2()
    bench.need_pixels = False
    samples, report = bench.load(str(data))
    assert [r for r in rejects(report) if r[1] == "missing_image"] == [(ref.format(22), "missing_image")]
    assert {s.sample_id: s for s in samples}["21"].boxes == [(82.0, 28.0, 148.0, 44.0)]
    # an index handed out twice refuses the load
    path.write_text(json.dumps([good, good]), encoding="utf-8")
    with pytest.raises(DuplicateIdError, match="duplicate sample id"):
        get_benchmark("mmbench-gui-l2").load(str(data))


# ---------------------------------------------------------------------------------------------------------------------
# Showdown-clicks


def test_showdown_clicks_headline_is_in_bbox_over_every_row(tmp_path, capsys):
    samples, report = get_benchmark("showdown-clicks").load(SHOWDOWN)
    rec_a, rec_b = "7D3E1A52-0B6C-4F1E-9A1D-2C8B5E4F6A10", "C41B9E07-5D2A-4B3C-8E6F-0A1B2C3D4E5F"
    assert [s.sample_id for s in samples] == [f"{rec_a}_{i}" for i in range(3)] + [f"{rec_b}_{i}" for i in (3, 4)]
    assert report.rejects == [] and not report.warnings
    assert samples[0].boxes == [(217.0, 16.0, 334.0, 32.0)] and (samples[0].width, samples[0].height) == (512, 272)
    assert samples[0].extra["recording_id"] == rec_a
    assert samples[0].image_path.endswith(os.path.join("showdown-clicks-dev", "frames", rec_a, "3.png"))
    points = {
        samples[0].sample_id: [217, 16],  # the top-left corner: x1 <= x and y1 <= y, edges included -> correct
        samples[1].sample_id: centre(samples[1]),
        samples[2].sample_id: outside(samples[2]),
        samples[3].sample_id: None,
        samples[4].sample_id: centre(samples[4]),
    }
    preds = write_predictions(tmp_path / "sd.jsonl", points)
    doc = run_eval("showdown-clicks", SHOWDOWN, str(tmp_path / "out"), predictions=preds)
    # correct / total = 3/5 = 60.00, with its Wilson interval
    assert doc["headline"] == {
        "accuracy": 60.0,
        "num_correct": 3,
        "num_total": 5,
        "ci95": wilson_closed_form(3, 5),
        "rule": ShowdownClicks.headline_rule,
        "denominator": "all",
        "source": ShowdownClicks.headline_source,
    }
    assert doc["overall"] == c(3, 5, 1)
    # the CLI prints the headline before the table (the UI-Vision fixture: a mean of accuracies, no interval)
    capsys.readouterr()
    out = tmp_path / "cli"
    cli_main(
        [
            "eval",
            "--benchmark",
            "ui-vision",
            "--data",
            UIV,
            "--predictions",
            uiv_predictions(tmp_path),
            "--out",
            str(out),
        ]
    )
    printed = capsys.readouterr().out
    assert printed.startswith("**ui-vision headline**: 36.11%; denominator `all`: Final Avg: the mean of the three")
    assert "(uivision/UI-Vision README.md:26-55" in printed.splitlines()[0]
    assert (out / "metrics.json").is_file()


def test_showdown_clicks_csv_rows_are_records_of_their_own(tmp_path):
    data = tmp_path / "sd"
    shutil.copytree(SHOWDOWN, data)
    path = data / "showdown-clicks-dev" / "data.csv"
    text = path.read_bytes()
    frame = b"frames/7D3E1A52-0B6C-4F1E-9A1D-2C8B5E4F6A10/3.png"
    ok = b"Click," + frame + b",217,16,334,32,512,272"
    text += (
        b"\n".join(
            [
                b"n1,r,Click," + frame + b",nan,16,334,32,512,272",  # line 7: NaN
                b"n2,r,Click," + frame + b",217,16,,32,512,272",  # line 8: empty cell
                b"n3,r,Click,../../etc/passwd,217,16,334,32,512,272",  # line 9: out of the folder
                b"n4,r," + ok + b",surplus",  # line 10: more fields than the header
                b"",  # line 11: blank, skipped
                b'n5,r,"Click "x" here",' + frame + b",217,16,334,32,512,272",  # line 12: broken quoting
                b"n6,r,Click \xff," + frame + b",217,16,334,32,512,272",  # line 13: not UTF-8
                b"n7,r,Click," + frame + b",217,16,334,32,0,272",  # line 14: zero width
                b",r," + ok,  # line 15: no id -> the generated data:<row index>, kept
                b"n9,r,Click," + frame,  # line 16: a short row without its box
            ]
        )
        + b"\n"
    )
    path.write_bytes(text)
    samples, report = get_benchmark("showdown-clicks").load(str(data))
    assert rejects(report) == [
        (f"{path}:7", "bad_box"),
        (f"{path}:8", "bad_box"),
        (f"{path}:9", "path_outside_root"),
        (f"{path}:10", "unparseable_record"),
        (f"{path}:12", "unparseable_record"),
        (f"{path}:13", "bad_text"),
        (f"{path}:14", "bad_field"),
        (f"{path}:16", "bad_field"),
    ]
    assert report.num_records == 14 and len(samples) == 6  # 5 + 9 rows read, the blank line none; kept: 5 + line 15
    assert samples[-1].sample_id == "data:12" and samples[-1].boxes == [(217.0, 16.0, 334.0, 32.0)]
    # a header naming a column twice: one error for the file, nothing read
    path.write_text("id,image,image\nx,a.png,b.png\n", encoding="utf-8")
    samples, report = get_benchmark("showdown-clicks").load(str(data))
    assert samples == [] and rejects(report) == [(str(path), "duplicate_key")]
    # an id handed out twice refuses the load; a compressed file is not CSV text
    header = b"id,instruction,image,x1,y1,x2,y2\n"
    path.write_bytes(header + b"a,Click," + frame + b",1,2,3,4\na,Click," + frame + b",1,2,3,4\n")
    with pytest.raises(DuplicateIdError, match="'a' at .*data.csv:2 and .*data.csv:3"):
        get_benchmark("showdown-clicks").load(str(data))
    path.write_bytes(gzip.compress(header))
    with pytest.raises(DataFileError, match="gzip.*not CSV text"):
        get_benchmark("showdown-clicks").load(str(data))


@settings(max_examples=150, deadline=None)
@given(body=st.text(alphabet=st.sampled_from(list('ab,"\n\r \x00é')), max_size=80))
def test_csv_reader_never_raises_and_counts_every_row(body):
    """Any text after a header: one item per non-blank row (a row dict or an unparseable_record), indexes 0..n-1,
    refs ``file:<line>``; never an exception."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "data.csv")
        with open(path, "w", encoding="utf-8", newline="") as f:
            f.write("a,b\n" + body)
        items = list(iter_csv_records(path))
    assert [index for _, index, _ in items] == list(range(len(items)))
    for ref, _, row in items:
        assert ref.startswith(path + ":") and int(ref.rsplit(":", 1)[1]) >= 2
        assert isinstance(row, dict) and set(row) <= {"a", "b"} or isinstance(row, RecordError)
