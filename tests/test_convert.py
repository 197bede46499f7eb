"""gui-grounding convert: each format's fixture -> exact pixel boxes; rejects with reason codes and refs; clipping;
duplicates; strict mode; streaming; --workers independence; summary, rejects and CLI."""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
from collections import Counter

import pytest

from gui_grounding.data.convert import convert, iter_input, output_paths, register_cli
from gui_grounding.data.formats import FORMATS
from gui_grounding.data.formats_common import platform_from_path
from gui_grounding.data.schema import REASONS, SampleError, load_samples
from tests.helpers.images import png_bytes

FIX = os.path.join(os.path.dirname(__file__), "fixtures", "datasets")
IMAGES = {
    "shots/wide.png": (1000, 500),
    "shots/phone.png": (400, 800),
    "shots/desk.png": (800, 600),
    "desktop_domain/desk.png": (800, 600),
}
# JPEGs of the REC annotation fixture (fixtures/datasets/vlm_r1/refcoco_sample.json, COCO-style names as in
# rec_jsons_processed)
COCO_98304, COCO_9 = "train2014/COCO_train2014_000000098304.jpg", "train2014/COCO_train2014_000000000009.jpg"
JPEGS = {COCO_98304: (640, 480), COCO_9: (480, 640)}


def write_jpeg(path, width: int, height: int) -> None:
    from PIL import Image

    os.makedirs(os.path.dirname(path), exist_ok=True)
    im = Image.new("RGB", (width, height), (90, 140, 200))
    im.paste((250, 250, 250), (width // 4, height // 4, width // 2, height // 2))
    im.save(path, format="JPEG", quality=80)


@pytest.fixture
def root(tmp_path, make_image) -> str:
    """Image root with the fixtures' screenshots (sizes in IMAGES, JPEGs in JPEGS) and a garbage
    ``shots/garbage.png``."""
    folder = tmp_path / "root"
    for name, (w, h) in IMAGES.items():
        make_image(w, h, name, folder=folder)
    for name, (w, h) in JPEGS.items():
        write_jpeg(os.path.join(folder, name), w, h)
    (folder / "shots" / "garbage.png").write_bytes(b"not an image\n" * 10)
    return str(folder)


def parquet_from_rows(rows_json: str, dst: str, struct_image: bool) -> str:
    """Write the fixture rows to parquet, each ``{"png": [w, h]}`` replaced by PNG bytes (or ``{"bytes": ...}``)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    with open(rows_json) as f:
        rows = json.load(f)
    for row in rows:
        if isinstance(row.get("image"), dict) and "png" in row["image"]:
            data = png_bytes(*row["image"]["png"])
            row["image"] = {"bytes": data} if struct_image else data
    pq.write_table(pa.Table.from_pylist(rows), dst)
    return dst


def run(fmt, inputs, root, out, **kwargs):
    """Convert and return ``(report, samples, rejects, summary)`` read back from the output files."""
    report = convert(fmt, inputs, root, str(out), progress=False, **kwargs)
    rejects_path, summary_path = output_paths(str(out))
    with open(out) as f:
        samples = [json.loads(line) for line in f]
    with open(rejects_path) as f:
        rejects = [json.loads(line) for line in f]
    with open(summary_path) as f:
        summary = json.load(f)
    return report, samples, rejects, summary


def boxes_of(rec: dict) -> list[tuple]:
    items = rec["target_bbox"] if isinstance(rec["target_bbox"], list) else [rec["target_bbox"]]
    return [(b["x_min"], b["y_min"], b["x_max"], b["y_max"]) for b in items]


def fx(*parts: str) -> str:
    return os.path.join(FIX, *parts)


# --------------------------------------------------------------------------------------------------------------------
# every format on its fixture: exact samples (id, image, pixel boxes, size, platform, ui_type) and exact rejects

W, P, D = (1000, 500), (400, 800), (800, 600)  # wide, phone, desk image sizes

EXPECTED = {
    "gta1": dict(
        inputs=[fx("gta1", "gta1_sample.json")],
        samples=[
            ("gta1_sample:0", "shots/wide.png", [(100.0, 100.0, 300.0, 200.0)], W, None, None),  # x*1, y*0.5
            (
                "gta1_sample:1",
                "shots/wide.png",
                [(0.0, 0.0, 500.0, 500.0), (500.0, 250.0, 600.0, 350.0)],
                W,
                None,
                None,
            ),
            ("gta1_sample:3", "shots/wide.png", [(100.0, 100.0, 300.0, 500.0)], W, None, None),  # 502.5 clipped
            ("gta1_sample:8", "desktop_domain/desk.png", [(0.0, 0.0, 800.0, 600.0)], D, "desktop", None),
        ],
        rejects=[
            (0, ":[2]", "missing_image"),
            (0, ":[4]", "box_outside_image"),
            (0, ":[5]", "duplicate"),
            (0, ":[6]", "empty_instruction"),
            (0, ":[7]", "inverted_box"),
            (0, ":[9]", "bad_field"),
            (0, ":[10]", "unparseable_record"),
            (0, ":[11]", "unreadable_image"),
        ],
        records=12,
        clipped=1,
    ),
    "os-atlas": dict(
        inputs=[fx("os_atlas", "mobile_domain", "uibert_raw.json"), fx("os_atlas", "web_domain", "fineweb_3m.json")],
        samples=[
            ("uibert_raw:0", "shots/phone.png", [(100.0, 400.0, 300.0, 500.0)], P, "mobile", "icon"),
            ("uibert_raw:1", "shots/phone.png", [(50.0, 100.0, 400.0, 200.0)], P, "mobile", None),  # 401.6 clipped
            ("fineweb_3m:0:0", "shots/wide.png", [(125.0, 125.0, 375.0, 250.0)], W, "web", "text"),
        ],
        rejects=[
            (0, ":[2]", "suspect_unit"),  # x_max 1.02: a value above 1 in a fraction format (validate.check_unit)
            (1, ":[0].elements[1]", "empty_instruction"),
            (1, ":[0].elements[2]", "inverted_box"),
            (1, ":[1]", "bad_field"),
        ],
        records=5,
        clipped=1,
    ),
    "aria-ui-desktop": dict(
        inputs=[fx("aria_ui", "aria_ui_desktop_sample.json")],
        samples=[
            ("aria_ui_desktop_sample:0:0.0", "shots/desk.png", [(700.0, 580.0, 740.0, 597.0)], D, "desktop", None),
            ("aria_ui_desktop_sample:0:0.1", "shots/desk.png", [(700.0, 580.0, 740.0, 597.0)], D, "desktop", None),
            ("aria_ui_desktop_sample:0:3.0", "shots/desk.png", [(795.0, 590.0, 800.0, 600.0)], D, "desktop", None),
        ],
        rejects=[(0, ":[0].elements[1]", "inverted_box"), (0, ":[0].elements[2]", "empty_instruction")],
        records=1,
        clipped=1,
    ),
    "aria-ui-web": dict(
        inputs=[fx("aria_ui", "aria_ui_web_sample.json")],
        samples=[
            ("aria_ui_web_sample:0:0.0", "shots/wide.png", [(10.0, 20.0, 110.0, 70.0)], W, "web", None),
            ("aria_ui_web_sample:1:0", "shots/wide.png", [(200.0, 100.0, 250.0, 120.0)], W, "web", None),
        ],
        rejects=[(0, ":[2]", "bad_field")],
        records=3,
        clipped=0,
    ),
    "aria-ui-mobile": dict(
        inputs=[fx("aria_ui", "aria_ui_mobile_sample.json")],
        samples=[("aria_ui_mobile_sample:0", "shots/phone.png", [(0.0, 0.0, 40.0, 40.0)], P, "mobile", None)],
        rejects=[],
        records=1,
        clipped=0,
    ),
    "showui": dict(
        inputs=[fx("showui", "showui_web.json"), fx("showui", "hf_train.json"), "parquet:showui/desktop_rows.json"],
        samples=[
            ("showui_web:0:0", "shots/wide.png", [(125.0, 125.0, 375.0, 250.0)], W, None, "text"),
            ("showui_web:0:1", "shots/wide.png", [(500.0, 250.0, 750.0, 375.0)], W, None, None),
            ("hf_train:0:0", "shots/wide.png", [(500.0, 125.0, 625.0, 187.5)], W, None, "text"),
            ("showui_desktop:0", "desk_0_{sha}.png", [(200.0, 300.0, 300.0, 375.0)], D, None, "icon"),
        ],
        rejects=[
            (0, ":[0].instruction[2]", "point_only"),
            (1, ":[1].element[0]", "bad_field"),
            (2, ":[1]", "point_only"),
        ],
        records=5,
        clipped=0,
    ),
    "uground": dict(
        inputs=["parquet:uground/rows.json"],
        samples=[
            ("shard_0000:0:0", "embedded/shard_0000/00000000_{sha}.png", [(100.0, 100.0, 300.0, 200.0)], W, None, None)
        ],
        rejects=[
            (0, ":[0].conversations[3]", "point_only"),
            (0, ":[0].conversations[5]", "bad_field"),
            (0, ":[1].conversations[1]", "bad_field"),
        ],
        records=2,
        clipped=0,
    ),
    "seeclick": dict(
        inputs=[fx("seeclick", "seeclick_web.json")],
        samples=[
            ("seeclick_web:0:0", "shots/wide.png", [(500.0, 62.5, 625.0, 125.0)], W, "web", "text"),
            ("seeclick_web:0:1", "shots/wide.png", [(0.0, 0.0, 125.0, 62.5)], W, "web", None),
        ],
        rejects=[(0, ":[0].elements[2]", "bad_field")],
        records=1,
        clipped=0,
    ),
    "gui-r1": dict(
        inputs=["parquet:gui_r1/rows.json"],
        samples=[
            (
                "gui_r1_mobile:0",
                "embedded/gui_r1_mobile/00000000_{sha}.png",
                [(20.0, 40.0, 380.0, 120.0)],
                P,
                "mobile",
                "text",
            )
        ],
        rejects=[(0, ":[1]", "point_only"), (0, ":[2]", "bad_field")],
        records=3,
        clipped=0,
    ),
    "screenspot-v2": dict(
        inputs=[fx("screenspot_v2", "screenspot_web_v2.json")],
        samples=[("screenspot_web_v2:0", "shots/wide.png", [(100.0, 50.0, 300.0, 75.0)], W, "web", "text")],
        rejects=[(0, ":[1]", "inverted_box")],
        records=2,
        clipped=0,
    ),
    "screenspot-pro": dict(
        inputs=[fx("screenspot_pro", "annotations", "vscode_macos.json")],
        samples=[("vscode_macos:0", "shots/desk.png", [(10.0, 20.0, 30.0, 40.0)], D, "desktop", "icon")],
        rejects=[(0, ":[1]", "bad_field")],
        records=2,
        clipped=0,
    ),
    "vlm-r1": dict(
        inputs=[fx("vlm_r1", "rec.jsonl"), fx("vlm_r1", "refcoco_sample.json")],
        samples=[
            ("rec:0", "shots/wide.png", [(1.0, 2.0, 30.0, 40.0)], W, None, None),
            ("rec:1", "shots/wide.png", [(995.0, 10.0, 1000.0, 20.0)], W, None, None),  # 3 px past the edge: clipped
            # REC annotation records (grpo_rec.py form): solution = the box in original pixels, unchanged
            ("refcoco_sample:0", COCO_98304, [(12.5, 30.0, 210.25, 400.75)], (640, 480), None, None),
            ("refcoco_sample:1", COCO_98304, [(300.0, 20.0, 639.0, 479.0)], (640, 480), None, None),
            ("refcoco_sample:2", COCO_9, [(0.0, 0.0, 480.0, 320.5)], (480, 640), None, None),  # solution as a string
        ],
        rejects=[
            (0, ":3", "unparseable_record"),
            (0, ":4", "bad_field"),
            (1, ":[3]", "bad_field"),  # missing key 'solution'
            (1, ":[4]", "bad_field"),  # missing key 'problem'
            (1, ":[5]", "box_outside_image"),
            (1, ":[6]", "missing_image"),
            (1, ":[7]", "bad_field"),  # 3 numbers
        ],
        records=12,
        clipped=1,
    ),
    "canonical": dict(
        inputs=[fx("canonical", "canonical.jsonl")],
        samples=[("web-7", "shots/wide.png", [(12.0, 10.0, 42.0, 40.0)], W, "web", "icon")],
        rejects=[(0, ":2", "duplicate")],
        records=2,
        clipped=0,
    ),
}

PARQUET_NAMES = {
    "showui/desktop_rows.json": ("showui_desktop.parquet", False),
    "uground/rows.json": ("shard_0000.parquet", False),
    "gui_r1/rows.json": ("gui_r1_mobile.parquet", True),
}


def resolve_inputs(inputs: list[str], tmp_path) -> list[str]:
    out = []
    for item in inputs:
        if item.startswith("parquet:"):
            rel = item.removeprefix("parquet:")
            name, struct = PARQUET_NAMES[rel]
            item = parquet_from_rows(fx(*rel.split("/")), str(tmp_path / name), struct)
        out.append(item)
    return out


def test_every_format_has_a_fixture_case():
    assert (
        list(EXPECTED)
        == list(FORMATS)
        == [
            "gta1",
            "os-atlas",
            "aria-ui-desktop",
            "aria-ui-web",
            "aria-ui-mobile",
            "showui",
            "uground",
            "seeclick",
            "gui-r1",
            "screenspot-v2",
            "screenspot-pro",
            "vlm-r1",
            "canonical",
        ]
    )


@pytest.mark.parametrize("fmt", list(EXPECTED))
def test_format_fixture_exact_samples_and_rejects(fmt, root, tmp_path):
    case = EXPECTED[fmt]
    inputs = resolve_inputs(case["inputs"], tmp_path)
    report, samples, rejects, summary = run(fmt, inputs, root, tmp_path / "out" / "o.jsonl")
    got = [
        (
            s["sample_id"],
            s["image_path"],
            boxes_of(s),
            (s["image_width"], s["image_height"]),
            s.get("platform"),
            s.get("ui_type"),
        )
        for s in samples
    ]
    # embedded images are named by row and content: {sha} = first 12 hex digits of the SHA-1 of the PNG bytes
    expected = [
        (sid, image.format(sha=hashlib.sha1(png_bytes(*size)).hexdigest()[:12]), boxes, size, platform, ui)
        for sid, image, boxes, size, platform, ui in case["samples"]
    ]
    assert got == expected
    assert [(r["ref"], r["reason"]) for r in rejects] == [
        (inputs[i] + suffix, reason) for i, suffix, reason in case["rejects"]
    ]
    # nothing lost: every target is a sample or a reject line; counts agree with the files
    assert (summary["records"], summary["samples"], summary["rejected"], summary["clipped"]) == (
        case["records"],
        len(case["samples"]),
        len(case["rejects"]),
        case["clipped"],
    )
    assert summary["targets"] == summary["samples"] + summary["rejected"]
    assert summary["reasons"] == dict(sorted(Counter(reason for _, _, reason in case["rejects"]).items()))
    assert all(r["reason"] in REASONS for r in rejects)
    assert report.to_dict()["reasons"] == summary["reasons"]
    expected_source = "collector" if fmt == "canonical" else fmt
    assert {s["source"] for s in samples} == {expected_source}


# --------------------------------------------------------------------------------------------------------------------
# record contents, reject lines, messages


def test_gta1_output_records_and_reject_lines(root, tmp_path):
    path = fx("gta1", "gta1_sample.json")
    _, samples, rejects, _ = run("gta1", [path], root, tmp_path / "g.jsonl")
    assert samples[0] == {
        "sample_id": "gta1_sample:0",
        "instruction": "Click the search box",
        "image_path": "shots/wide.png",
        "target_bbox": {"x_min": 100.0, "y_min": 100.0, "x_max": 300.0, "y_max": 200.0},
        "image_width": 1000,
        "image_height": 500,
        "source": "gta1",
        "source_id": "a",
    }
    with open(path) as f:
        original = json.load(f)
    by_ref = {r["ref"]: r for r in rejects}
    assert by_ref[f"{path}:[2]"]["record"] == original[2]  # the original record, unchanged
    assert by_ref[f"{path}:[2]"]["message"] == f"image not found: {os.path.join(root, 'shots', 'missing.png')}"
    assert by_ref[f"{path}:[4]"]["message"] == (
        "0-1000 box [100.0, 200.0, 300.0, 1020.0] -> box [100.0, 100.0, 300.0, 510.0] extends 10 px outside the "
        "1000x500 image along y (clipping tolerance 4 px)"
    )
    assert by_ref[f"{path}:[5]"]["message"] == (
        "same image, instruction and box(es) as the sample on line 1 of g.jsonl "
        f"({os.path.join(root, 'shots', 'wide.png')})"
    )
    assert by_ref[f"{path}:[7]"]["message"] == (
        "0-1000 box [300.0, 200.0, 100.0, 400.0] -> box [300.0, 100.0, 100.0, 200.0] is inverted or has zero area"
    )
    assert by_ref[f"{path}:[9]"]["message"] == (
        "bbox must be 4 finite numbers [x_min, y_min, x_max, y_max], got [1, 2, 3]"
    )
    assert (by_ref[f"{path}:[10]"]["message"], by_ref[f"{path}:[10]"]["record"]) == ("not a JSON object", None)


def test_extras_and_sub_records(root, tmp_path):
    _, samples, _, _ = run("seeclick", [fx("seeclick", "seeclick_web.json")], root, tmp_path / "s.jsonl")
    assert [{k: s.get(k) for k in ("data_type", "url", "ui_type")} for s in samples] == [
        {"data_type": "text", "url": "https://example.org/shop", "ui_type": "text"},
        {"data_type": "hover", "url": "https://example.org/shop", "ui_type": None},
    ]
    _, samples, _, _ = run(
        "screenspot-pro", [fx("screenspot_pro", "annotations", "vscode_macos.json")], root, tmp_path / "p.jsonl"
    )
    assert {k: samples[0][k] for k in ("source_id", "application", "group", "os")} == {
        "source_id": "vscode_macos_0",
        "application": "vscode",
        "group": "Dev",
        "os": "macos",
    }
    _, _, rejects, _ = run("os-atlas", [fx("os_atlas", "web_domain", "fineweb_3m.json")], root, tmp_path / "o.jsonl")
    assert rejects[0]["record"] == {"instruction": "", "bbox": [0.5, 0.5, 0.75, 0.75]}  # the element, not the page


NEEDS = (
    "(a VLM-R1 record needs 'image' + 'conversations' (grpo_jsonl) or 'image', 'problem', 'solution' (REC "
    "annotation, grpo_rec.py))"
)


def test_vlm_r1_rec_annotation_records_and_missing_key_rejects(root, tmp_path):
    """upstream's rec_jsons_processed form {image, problem, solution: [x1, y1, x2, y2] original pixels, ...}"""
    path = fx("vlm_r1", "refcoco_sample.json")
    _, samples, rejects, summary = run("vlm-r1", [path], root, tmp_path / "r.jsonl")
    assert samples[0] == {
        "sample_id": "refcoco_sample:0",
        "instruction": "the man on the left",
        "image_path": COCO_98304,
        "target_bbox": {"x_min": 12.5, "y_min": 30.0, "x_max": 210.25, "y_max": 400.75},
        "image_width": 640,
        "image_height": 480,
        "source": "vlm-r1",
        "normal_caption": "man",
        "normal_solution": [12, 30, 210, 400],
    }
    assert samples[1]["instruction"] == "woman in red on the right"  # canonical instructions: whitespace collapsed
    assert [s["normal_caption"] for s in samples] == ["man", "woman", "bowl"]
    with open(path) as f:
        original = json.load(f)
    by_ref = {r["ref"]: r for r in rejects}
    assert by_ref[f"{path}:[3]"]["message"] == (
        f"missing key 'solution' {NEEDS}; record has ['image', 'normal_caption', 'problem']"
    )
    assert by_ref[f"{path}:[4]"]["message"] == (
        f"missing key 'problem' {NEEDS}; record has ['image', 'normal_caption', 'solution']"
    )
    assert by_ref[f"{path}:[5]"]["message"] == (
        "box [600.0, 400.0, 700.0, 500.0] extends 60 px outside the 640x480 image along x (clipping tolerance 4 px)"
    )
    assert by_ref[f"{path}:[6]"]["message"] == (
        f"image not found: {os.path.join(root, 'train2014', 'COCO_train2014_000000000404.jpg')}"
    )
    assert by_ref[f"{path}:[7]"]["message"] == (
        "solution must be 4 finite numbers [x_min, y_min, x_max, y_max], got [1, 2, 30]"
    )
    assert [by_ref[f"{path}:[{i}]"]["record"] for i in range(3, 8)] == original[3:8]  # the records, unchanged
    assert summary["reasons"] == {"bad_field": 3, "box_outside_image": 1, "missing_image": 1}
    with pytest.raises(SampleError) as err:
        convert("vlm-r1", [path], root, str(tmp_path / "strict.jsonl"), strict=True, progress=False)
    assert (err.value.ref, err.value.reason) == (f"{path}:[3]", "bad_field")
    assert err.value.message.startswith("missing key 'solution' (a VLM-R1 record needs")


def test_vlm_r1_hostile_records_are_rejects_never_crashes(root, tmp_path):
    good_rec = {"image": COCO_9, "problem": "bowl", "solution": [1, 2, 30, 40]}
    conv = [{"from": "human", "value": "<image>bowl"}, {"from": "gpt", "value": "[1, 2, 30, 40]"}]
    huge = "1" + "0" * 400
    lines = [
        json.dumps(good_rec),  # 1 kept
        json.dumps({"image": COCO_9, "conversations": [conv[0], {"value": [float("nan"), 0, 10, 10]}]}),  # 2
        f'{{"image": "{COCO_9}", "conversations": [{{"value": "q"}}, {{"value": [{huge}, 0, 10, 10]}}]}}',  # 3
        f'{{"image": "{COCO_9}", "problem": "p", "solution": [0, 0, {huge}, 10]}}',  # 4
        json.dumps({**good_rec, "solution": "[0, 0, Infinity, 10]"}),  # 5
        json.dumps({"conversations": conv}),  # 6 conversations without image
        json.dumps({}),  # 7
        json.dumps({**good_rec, "problem": 7}),  # 8
        json.dumps({**good_rec, "image": {"path": 1}}),  # 9
        json.dumps({**good_rec, "problem": "bad \ud800 text"}),  # 10 lone surrogate escape: legal JSON, not text
        json.dumps({**good_rec, "solution": "[" * 100_000}),  # 11 too deep to parse
        "[" * 100_000,  # 12
        '{"image": "x", "n": ' + "9" * 5000 + "}",  # 13 int beyond Python's 4300-digit limit
        None,  # 14 bytes that are not UTF-8
        json.dumps(
            {"image": COCO_9, "conversations": [{"value": "<image>the bowl"}, conv[1]], "bbox": [0, 0, 500, 500]}
        ),  # 15 bbox: not a GTA1 box
        json.dumps({**good_rec, "problem": "cup", "id": 5, "image_width": 1}),  # 16 kept; image_width not copied
    ]
    path = tmp_path / "h.jsonl"
    with open(path, "wb") as f:
        for line in lines:
            f.write(b'{"problem": "\xff\xfe"}' if line is None else line.encode("utf-8"))
            f.write(b"\n")
    _, samples, rejects, summary = run("vlm-r1", [str(path)], root, tmp_path / "h_out.jsonl")
    assert [(s["sample_id"], boxes_of(s)) for s in samples] == [
        ("h:0", [(1.0, 2.0, 30.0, 40.0)]),
        ("h:14", [(1.0, 2.0, 30.0, 40.0)]),
        ("h:15", [(1.0, 2.0, 30.0, 40.0)]),
    ]
    assert samples[1]["bbox"] == [0, 0, 500, 500]  # kept as an extra field, never read as 0-1000
    assert (samples[2]["source_id"], samples[2]["image_width"]) == (5, 480)
    got = {int(r["ref"].rsplit(":", 1)[1]): (r["reason"], r["message"]) for r in rejects}
    assert {k: v[0] for k, v in got.items()} == {
        2: "unparseable_record",
        3: "bad_box",
        4: "bad_box",
        5: "bad_box",
        6: "bad_field",
        7: "bad_field",
        8: "bad_field",
        9: "bad_field",
        10: "bad_text",
        11: "bad_field",
        12: "unparseable_record",
        13: "unparseable_record",
        14: "unparseable_record",
    }
    assert "NaN is not a JSON value" in got[2][1]  # strict JSON in: a NaN never becomes a box
    assert all("finite numbers within +-1e+07" in got[k][1] for k in (3, 4, 5)) and "inf" in got[5][1]
    assert got[6][1].startswith("missing key 'image' (a VLM-R1 record needs")
    assert got[7][1].startswith("missing keys 'image', 'problem', 'solution' (a VLM-R1 record needs")
    assert got[8][1] == "instruction must be a string, got int"
    assert "not valid Unicode" in got[10][1] and "RecursionError" in got[11][1]
    assert (got[12][1], got[14][1]) == ("invalid JSON: nested too deeply", "not valid UTF-8")
    assert "Exceeds the limit (4300 digits)" in got[13][1]
    assert summary["targets"] == summary["samples"] + summary["rejected"] == 16


def test_embedded_images_are_written_once_under_the_root(root, tmp_path):
    from PIL import Image

    inputs = resolve_inputs(["parquet:gui_r1/rows.json"], tmp_path)
    run("gui-r1", inputs, root, tmp_path / "a.jsonl")
    name = f"00000000_{hashlib.sha1(png_bytes(400, 800)).hexdigest()[:12]}.png"
    written = sorted(os.listdir(os.path.join(root, "embedded", "gui_r1_mobile")))
    assert written == [name]  # rows 1 and 2 have no usable box: their images are not extracted
    with Image.open(os.path.join(root, "embedded", "gui_r1_mobile", name)) as im:
        assert im.size == (400, 800)
    stamp = os.stat(os.path.join(root, "embedded", "gui_r1_mobile", name)).st_mtime_ns
    _, samples, _, _ = run("gui-r1", inputs, root, tmp_path / "b.jsonl")  # a second run reuses the files
    assert os.stat(os.path.join(root, "embedded", "gui_r1_mobile", name)).st_mtime_ns == stamp
    assert boxes_of(samples[0]) == [(20.0, 40.0, 380.0, 120.0)]


def test_box_unit_override_for_unconfirmed_schemas(root, tmp_path):
    _, samples, _, _ = run(
        "aria-ui-web", [fx("aria_ui", "aria_ui_web_sample.json")], root, tmp_path / "w.jsonl", box_unit="norm1000"
    )
    assert [boxes_of(s) for s in samples] == [[(10.0, 10.0, 110.0, 35.0)], [(200.0, 50.0, 250.0, 60.0)]]
    with pytest.raises(ValueError, match="box_unit must be one of"):
        convert("canonical", [fx("canonical", "canonical.jsonl")], root, str(tmp_path / "c.jsonl"), box_unit="ratio")


# --------------------------------------------------------------------------------------------------------------------
# clipping, duplicates, flags


def test_clip_tolerance_flag_and_keep_duplicates(root, tmp_path):
    path = fx("gta1", "gta1_sample.json")
    _, samples, rejects, summary = run(
        "gta1", [path], root, tmp_path / "t0.jsonl", clip_tolerance_px=0, keep_duplicates=True
    )
    # 0 px: 502.5 on a 500 px image is still within 0.005 * 500 = 2.5 px (the ratio allowance of 0-1000 formats)
    assert [s["sample_id"] for s in samples] == [
        "gta1_sample:0",
        "gta1_sample:1",
        "gta1_sample:3",
        "gta1_sample:5",
        "gta1_sample:8",
    ]
    assert summary["clipped"] == 1 and "duplicate" not in summary["reasons"]
    _, samples, rejects, summary = run(
        "vlm-r1", [fx("vlm_r1", "rec.jsonl")], root, tmp_path / "t1.jsonl", clip_tolerance_px=0
    )
    assert [s["sample_id"] for s in samples] == ["rec:0"]
    assert (rejects[0]["reason"], rejects[0]["message"]) == (
        "box_outside_image",
        "box [995.0, 10.0, 1003.0, 20.0] extends 3 px outside the 1000x500 image along x (clipping tolerance 0 px)",
    )


def test_duplicates_across_input_files(root, tmp_path):
    path = fx("screenspot_v2", "screenspot_web_v2.json")
    copy = str(tmp_path / "screenspot_web_v2.json")
    shutil.copy(path, copy)
    _, samples, rejects, summary = run("screenspot-v2", [path, copy], root, tmp_path / "d.jsonl")
    assert [s["sample_id"] for s in samples] == ["screenspot_web_v2:0"]
    assert [(r["ref"], r["reason"]) for r in rejects] == [
        (f"{path}:[1]", "inverted_box"),
        (f"{copy}:[0]", "duplicate"),
        (f"{copy}:[1]", "inverted_box"),
    ]
    assert summary["reasons"] == {"duplicate": 1, "inverted_box": 2}


def test_source_and_platform_flags(root, tmp_path):
    _, samples, _, _ = run(
        "gta1", [fx("gta1", "gta1_sample.json")], root, tmp_path / "f.jsonl", source="mix-a", platform="web"
    )
    assert {(s["source"], s["platform"]) for s in samples} == {("mix-a", "web")}
    _, samples, _, _ = run(
        "canonical", [fx("canonical", "canonical.jsonl")], root, tmp_path / "c.jsonl", source="mix-b"
    )
    assert samples[0]["source"] == "mix-b"


def test_platform_from_path():
    assert platform_from_path("dataset/Aria-UI_Data/web/images/screenshot_1_part_3.png") == "web"
    assert platform_from_path("desktop_domain/windows_images/a.png") == "desktop"
    assert platform_from_path("dataset/Aria-UI_Context-aware_Data/android_control/x.png") == "mobile"
    assert platform_from_path("dataset/omniact/x.png") == "desktop"
    assert platform_from_path("web_shots/mobile_view/x.png") is None  # ambiguous
    assert platform_from_path("web.png") is None  # the file name does not count


# --------------------------------------------------------------------------------------------------------------------
# strict mode, CLI


def cli(argv: list[str]):
    parser = argparse.ArgumentParser(prog="gui-grounding")
    register_cli(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["convert", *argv])
    return args.func(args)


def test_strict_stops_at_first_bad_record_naming_file_and_line(root, tmp_path, capsys):
    path = fx("gta1", "gta1_sample.json")
    out = tmp_path / "s.jsonl"
    with pytest.raises(SystemExit) as info:
        cli(["--format", "gta1", path, "--image-root", root, "--out", str(out), "--strict"])
    assert str(info.value) == (
        f"convert --strict: stopped at the first bad record: {path}:[2]: missing_image: image not found: "
        f"{os.path.join(root, 'shots', 'missing.png')}"
    )
    assert sorted(os.listdir(tmp_path)) == ["root"]  # nothing written, no temporary files left
    jsonl = fx("vlm_r1", "rec.jsonl")
    with pytest.raises(SampleError) as err:
        convert("vlm-r1", [jsonl], root, str(out), strict=True)
    assert (err.value.ref, err.value.reason) == (f"{jsonl}:3", "unparseable_record")


def test_cli_prints_summary_and_writes_files(root, tmp_path, capsys):
    out = tmp_path / "cli" / "seeclick.jsonl"
    cli(
        [
            "--format",
            "seeclick",
            fx("seeclick", "seeclick_web.json"),
            "--image-root",
            root,
            "--out",
            str(out),
            "--workers",
            "2",
            "--source",
            "seeclick-web",
        ]
    )
    lines = capsys.readouterr().out.splitlines()
    assert lines[:4] == [
        f"convert --format seeclick: 1 input file(s) -> {out}",
        "records read: 1   targets: 3   samples written: 2   rejected: 1   clipped (kept): 0   absolute image paths "
        "(kept): 0",
        f"  {'reason':<20} {'count':>8}   first",
        f"  {'bad_field':<20} {1:>8}   {fx('seeclick', 'seeclick_web.json')}:[0].elements[2]",
    ]
    assert sorted(os.listdir(out.parent)) == ["seeclick.jsonl", "seeclick.rejects.jsonl", "seeclick.summary.json"]


def test_cli_every_flag_has_help():
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers()
    register_cli(sub)
    p = sub.choices["convert"]
    flags = {a.dest: a.help for a in p._actions if a.dest != "help"}
    assert sorted(flags) == [
        "box_unit",
        "clip_tolerance",
        "family",
        "format",
        "image_root",
        "inputs",
        "keep_duplicates",
        "max_image_pixels",
        "model",
        "out",
        "platform",
        "source",
        "strict",
        "verify_images",
        "workers",
    ]
    assert all(h and len(h) > 20 for h in flags.values())
    assert p.get_default("func").__name__ == "_run"
    epilog = p.format_help()
    assert all(f"  {name}" in epilog for name in FORMATS)


# --------------------------------------------------------------------------------------------------------------------
# streaming, workers, round trip


def big_gta1_list(path: str, n: int) -> None:
    """``n`` GTA1 records over 20 images, with every 97th a missing image and every 89th a repeat of its predecessor."""
    recs = []
    for i in range(n):
        if i % 89 == 88:
            recs.append(dict(recs[-1]))
            continue
        x, y = (i * 37) % 900, (i * 53) % 900
        image = f"many/img_{i % 20:02d}.png" if i % 97 else f"many/none_{i}.png"
        recs.append(
            {
                "image": image,
                "bbox": [x, y, x + 50, y + 60],
                "conversations": [{"from": "human", "value": f"<image>target {i}"}, {"from": "gpt", "value": ""}],
            }
        )
    with open(path, "w") as f:
        json.dump(recs, f)


def test_streaming_json_list_workers_do_not_change_output(root, tmp_path, make_image):
    for k in range(20):
        make_image(640 + k, 480, f"many/img_{k:02d}.png", folder=root)
    data = str(tmp_path / "big.json")
    big_gta1_list(data, 20_000)
    streamed = run("gta1", [data], root, tmp_path / "a" / "out.jsonl", workers=1)
    threaded = run("gta1", [data], root, tmp_path / "c" / "out.jsonl", workers=2)
    for name in ("out.jsonl", "out.rejects.jsonl"):
        a, c = ((tmp_path / d / name).read_bytes() for d in "ac")
        assert a == c
    # 224 repeats (i % 89 == 88), 3 of them of a missing-image record (i - 1 in {2134, 10767, 19400}) -> 221
    # duplicates; 207 multiples of 97, 3 of which are repeats (1067, 9700, 18333) -> 204 + 3 = 207 missing images
    summary = streamed[3]
    assert (summary["records"], summary["samples"], summary["reasons"]) == (
        20_000,
        19_572,
        {"duplicate": 221, "missing_image": 207},
    )
    same = ("records", "targets", "samples", "rejected", "clipped", "reasons", "first_reject_refs")
    assert [{k: r[3][k] for k in same} for r in (threaded,)] == [{k: summary[k] for k in same}]
    assert threaded[3]["workers"] == 2
    first = streamed[1][0]
    assert (first["image_path"], boxes_of(first), first["image_width"]) == (
        "many/img_01.png",
        [(37 / 1000 * 641, 53 / 1000 * 480, 87 / 1000 * 641, 113 / 1000 * 480)],
        641,
    )


def test_iter_input_detects_containers_and_reports_a_broken_json_list(tmp_path):
    broken = tmp_path / "broken.json"
    broken.write_text('[{"a": 1}, {"b": 2}, {"c": ')
    items = list(iter_input(str(broken)))
    assert [(ref, index, item if isinstance(item, dict) else item.message[:29]) for ref, index, item in items] == [
        (f"{broken}:[0]", 0, {"a": 1}),
        (f"{broken}:[1]", 1, {"b": 2}),
        (f"{broken}:[2]", 2, "invalid JSON: Expecting value"),
    ]
    jsonl = tmp_path / "x.jsonl"
    jsonl.write_text('[1]\n{"a": 1}\n\n[2]\n')  # JSONL by its extension, even when the first line is a list
    assert [(ref, type(item).__name__) for ref, _, item in iter_input(str(jsonl))] == [
        (f"{jsonl}:1", "RecordError"),
        (f"{jsonl}:2", "dict"),
        (f"{jsonl}:4", "RecordError"),
    ]
    one = tmp_path / "one.json"
    one.write_text('  \n {"a": 1}')
    assert [item for _, _, item in iter_input(str(one))] == [{"a": 1}]


def test_huge_rejected_record_is_truncated(root, tmp_path):
    path = tmp_path / "huge.json"
    rec = {
        "image": "shots/missing.png",
        "bbox": [1, 2, 3, 4],
        "padding": "x" * 30_000,
        "conversations": [{"from": "human", "value": "<image>hi"}, {"from": "gpt", "value": ""}],
    }
    path.write_text(json.dumps([rec]))
    _, _, rejects, _ = run("gta1", [str(path)], root, tmp_path / "h.jsonl")
    stored, full = rejects[0]["record"], json.dumps(rec)
    assert len(full) == 30_157
    assert stored == full[:2000] + "... (truncated, 30157 chars)"


def test_output_reloads_with_load_samples(root, tmp_path):
    out = tmp_path / "all.jsonl"
    run(
        "os-atlas",
        [fx("os_atlas", "mobile_domain", "uibert_raw.json"), fx("os_atlas", "web_domain", "fineweb_3m.json")],
        root,
        out,
    )
    samples, report = load_samples([str(out)], [root])
    assert report.rejects == [] and report.num_clipped == 0  # already clipped: nothing left to clip
    assert [(s.sample_id, s.boxes, s.platform) for s in samples] == [
        ("uibert_raw:0", [(100.0, 400.0, 300.0, 500.0)], "mobile"),
        ("uibert_raw:1", [(50.0, 100.0, 400.0, 200.0)], "mobile"),
        ("fineweb_3m:0:0", [(125.0, 125.0, 375.0, 250.0)], "web"),
    ]


def test_input_errors(root, tmp_path):
    with pytest.raises(FileNotFoundError, match="input file not found: "):
        convert("gta1", [str(tmp_path / "nope.json")], root, str(tmp_path / "o.jsonl"))
    with pytest.raises(ValueError, match="unknown format 'llava'"):
        convert("llava", [], root, str(tmp_path / "o.jsonl"))
    with pytest.raises(ValueError, match="workers must be >= 1"):
        convert("gta1", [], root, str(tmp_path / "o.jsonl"), workers=0)
