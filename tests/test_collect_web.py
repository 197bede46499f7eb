"""The web collector on a hand-made page (exact boxes, names and drop counts) and the committed real sample."""

from __future__ import annotations

import json
import os
import shutil

import pytest
from PIL import Image

from gui_grounding.collect.web import DEFAULT_CHROMIUM, collect_web, find_pages, make_instruction, to_pixel_box
from gui_grounding.schema import load_samples

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURE = os.path.join(REPO, "tests", "fixtures", "html", "elements.html")
SAMPLE = os.path.join(REPO, "data", "web_sample")


@pytest.fixture(scope="module")
def collected(tmp_path_factory):
    assert os.path.exists(DEFAULT_CHROMIUM), "chromium missing: run_scripts/test.sh installs it (apt-get install chromium)"
    out = str(tmp_path_factory.mktemp("collect"))
    result = collect_web([FIXTURE], out, viewports=((1000, 600),), seed=0)
    return out, result


def test_fixture_elements_boxes_and_drops(collected):
    out, result = collected
    recs = {r["element"]["name"]: r for r in result.train}
    assert result.test == []  # one page: nothing to hold out
    assert sorted(recs) == ["Documentation", "Home", "Save file", "Search docs"]
    assert recs["Save file"]["target_bbox"] == {"x_min": 100, "y_min": 50, "x_max": 219, "y_max": 89}
    assert recs["Documentation"]["target_bbox"] == {"x_min": 300, "y_min": 60, "x_max": 449, "y_max": 79}
    assert recs["Search docs"]["target_bbox"] == {"x_min": 500, "y_min": 50, "x_max": 699, "y_max": 79}
    assert recs["Home"]["target_bbox"] == {"x_min": 750, "y_min": 50, "x_max": 781, "y_max": 81}
    assert {n: r["ui_type"] for n, r in recs.items()} == {
        "Documentation": "text", "Home": "icon", "Save file": "text", "Search docs": "text"}  # fmt: skip
    assert recs["Save file"]["element"] == {"tag": "button", "role": None, "name": "Save file"}
    assert dict(result.drops) == {"hidden": 3, "offscreen": 1, "tiny": 1, "occluded": 1, "ambiguous": 2,
                                  "wrapped": 1, "no_name": 1}  # fmt: skip
    for r in recs.values():
        assert r["image_width"] == 1000 and r["image_height"] == 600 and r["viewport"] == [1000, 600]
        assert r["platform"] == "web" and r["source"] == "web-collector" and r["page"] == "elements.html"
        assert r["element"]["name"] in r["instruction"]
        with Image.open(os.path.join(out, r["image_path"])) as im:
            assert im.size == (1000, 600)
    prov = json.load(open(os.path.join(out, "provenance.json")))
    assert prov["dropped"]["hidden"] == 3 and prov["screenshots"][0]["num_samples"] == 4
    assert prov["chromium"] and prov["seed"] == 0


def test_fixture_output_is_canonical_and_deterministic(collected, tmp_path):
    out, result = collected
    samples, report = load_samples([os.path.join(out, "train.jsonl")])
    assert len(samples) == 4 and report.rejects == []
    again = collect_web([FIXTURE], str(tmp_path), viewports=((1000, 600),), seed=0)
    assert again.train == result.train


def test_screenshot_pixels_match_the_box(collected):
    # the "Home" icon is a solid #336699 square exactly filling its box
    out, result = collected
    home = next(r for r in result.train if r["element"]["name"] == "Home")
    b = home["target_bbox"]
    with Image.open(os.path.join(out, home["image_path"])) as im:
        im = im.convert("RGB")
        assert im.getpixel((b["x_min"], b["y_min"])) == (0x33, 0x66, 0x99)
        assert im.getpixel((b["x_max"], b["y_max"])) == (0x33, 0x66, 0x99)
        assert im.getpixel((b["x_max"] + 1, b["y_max"])) == (255, 255, 255)


def test_helpers():
    assert to_pixel_box([10.4, 20.6, 30.5, 40.2], 100, 100) == {"x_min": 10, "y_min": 21, "x_max": 29, "y_max": 39}
    assert to_pixel_box([10, 10, 10.4, 30], 100, 100) is None
    import random

    assert make_instruction("link", 'Say "hi"', random.Random(0)) in {
        "Click the \"Say 'hi'\" link", "Open the \"Say 'hi'\" link", "Click \"Say 'hi'\""}  # fmt: skip
    with pytest.raises(FileNotFoundError):
        find_pages(["/no/such/page.html"])


def test_find_pages_keeps_same_named_files_apart(tmp_path):
    for d in ("a", "b"):
        (tmp_path / d).mkdir()
        shutil.copy(FIXTURE, tmp_path / d / "index.html")
    pages = find_pages([str(tmp_path / "a" / "index.html"), str(tmp_path / "b" / "index.html")])
    assert [rel for _, rel in pages] == ["a/index.html", "b/index.html"]


def test_committed_sample():
    prov = json.load(open(os.path.join(SAMPLE, "provenance.json")))
    shots = prov["screenshots"]
    assert len(shots) >= 30 and len({tuple(s["viewport"]) for s in shots}) >= 2
    samples, report = load_samples([os.path.join(SAMPLE, "train.jsonl"), os.path.join(SAMPLE, "test.jsonl")])
    assert report.rejects == [] and len(samples) >= 300
    records = [json.loads(x) for split in ("train", "test") for x in open(os.path.join(SAMPLE, f"{split}.jsonl"))]
    keys = {"sample_id", "instruction", "image_path", "target_bbox", "image_width", "image_height", "source",
            "platform", "ui_type", "element", "page", "viewport"}  # fmt: skip
    assert all(set(r) == keys for r in records)
    assert len({r["sample_id"] for r in records}) == len(records)
    sizes = {}
    for r in records:
        if r["image_path"] not in sizes:
            with Image.open(os.path.join(SAMPLE, r["image_path"])) as im:
                sizes[r["image_path"]] = im.size
        w, h = sizes[r["image_path"]]
        b = r["target_bbox"]
        assert (w, h) == (r["image_width"], r["image_height"]) == tuple(r["viewport"])
        assert 0 <= b["x_min"] < b["x_max"] < w and 0 <= b["y_min"] < b["y_max"] < h
    train_pages = {r["page"] for r in records[: len(open(os.path.join(SAMPLE, "train.jsonl")).readlines())]}
    test_pages = {json.loads(x)["page"] for x in open(os.path.join(SAMPLE, "test.jsonl"))}
    assert test_pages and not train_pages & test_pages
    assert {s["file"] for s in shots} == {"images/" + f for f in os.listdir(os.path.join(SAMPLE, "images"))}
    assert sum(s["num_samples"] for s in shots) == len(records)
    size = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(SAMPLE) for f in fs)
    assert size < 10 * 1024 * 1024
