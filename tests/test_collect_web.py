"""The web collector on a hand-made page (exact boxes, names and drop counts), its CLI, and the committed real sample.

These tests need Playwright and Debian's ``/usr/bin/chromium``; they fail (never skip) when either is missing, since
CI installs both (``run_scripts/test.sh``).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil

import pytest
from PIL import Image

from gui_grounding.data.collect.web import (
    DEFAULT_CHROMIUM,
    DROP_REASONS,
    collect_web,
    find_pages,
    make_instruction,
    register_cli,
    to_pixel_box,
)
from gui_grounding.data.schema import load_samples
from tests.helpers.paths import REPO, SAMPLE

FIXTURE = os.path.join(REPO, "tests", "fixtures", "html", "elements.html")
KEYS = {
    "sample_id",
    "instruction",
    "image_path",
    "target_bbox",
    "image_width",
    "image_height",
    "source",
    "platform",
    "ui_type",
    "element",
    "page",
    "viewport",
}


def _require_browser():
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        pytest.fail("playwright is missing: pip install -e .[collect]")
    assert os.path.exists(DEFAULT_CHROMIUM), (
        f"{DEFAULT_CHROMIUM} is missing: apt-get install chromium (run_scripts/test.sh does it)"
    )


@pytest.fixture(scope="module")
def collected(tmp_path_factory):
    _require_browser()
    out = str(tmp_path_factory.mktemp("collect"))
    result = collect_web([FIXTURE], out, viewports=((1000, 600),), seed=0)
    return out, result


def test_fixture_elements_boxes_and_drops(collected):
    out, result = collected
    recs = {r["element"]["name"]: r for r in result.train}
    assert result.test == []  # one page: nothing to hold out
    assert len(recs) == len(result.train)
    assert sorted(recs) == ["Documentation", "Expand all", "Home", "Overview", "Save file", "Search docs", "Settings"]
    # boxes from the fixture CSS: left/top .. left+width-1 / top+height-1 (inclusive pixel edges)
    assert recs["Save file"]["target_bbox"] == {"x_min": 100, "y_min": 50, "x_max": 219, "y_max": 89}
    assert recs["Documentation"]["target_bbox"] == {"x_min": 300, "y_min": 60, "x_max": 449, "y_max": 79}
    assert recs["Search docs"]["target_bbox"] == {"x_min": 500, "y_min": 50, "x_max": 699, "y_max": 79}
    assert recs["Home"]["target_bbox"] == {"x_min": 750, "y_min": 50, "x_max": 781, "y_max": 81}
    assert recs["Settings"]["target_bbox"] == {"x_min": 850, "y_min": 50, "x_max": 873, "y_max": 73}
    assert recs["Overview"]["target_bbox"] == {"x_min": 100, "y_min": 500, "x_max": 199, "y_max": 529}
    assert recs["Expand all"]["target_bbox"] == {"x_min": 250, "y_min": 500, "x_max": 339, "y_max": 529}
    assert {n: r["ui_type"] for n, r in recs.items()} == {
        "Documentation": "text",
        "Expand all": "text",
        "Home": "icon",
        "Overview": "text",
        "Save file": "text",
        "Search docs": "text",
        "Settings": "icon",
    }
    assert recs["Save file"]["element"] == {"tag": "button", "role": None, "name": "Save file"}
    assert recs["Settings"]["element"] == {"tag": "a", "role": None, "name": "Settings"}  # name from the img alt
    assert recs["Overview"]["element"] == {"tag": "div", "role": "tab", "name": "Overview"}
    assert recs["Expand all"]["element"]["tag"] == "span"  # [onclick]
    assert dict(result.drops) == {
        "hidden": 3,
        "offscreen": 1,
        "tiny": 1,
        "occluded": 1,
        "ambiguous": 2,
        "wrapped": 1,
        "no_name": 1,
        "long_name": 1,
    }
    for r in result.train:
        assert set(r) == KEYS
        assert r["image_width"] == 1000 and r["image_height"] == 600 and r["viewport"] == [1000, 600]
        assert r["platform"] == "web" and r["source"] == "web-collector" and r["page"] == "elements.html"
        assert r["element"]["name"] in r["instruction"]
        assert r["sample_id"].startswith("elements__1000x600:")
        assert r["image_path"] == "images/elements__1000x600.png"
    with Image.open(os.path.join(out, "images", "elements__1000x600.png")) as im:
        assert im.size == (1000, 600)  # the viewport, not the 3000 px tall page
    assert recs["Overview"]["instruction"] in {'Click the "Overview" tab', 'Switch to the "Overview" tab'}
    prov = json.load(open(os.path.join(out, "provenance.json")))
    assert prov["dropped"] == {reason: result.drops.get(reason, 0) for reason in DROP_REASONS}
    assert prov["screenshots"] == [
        {
            "file": "images/elements__1000x600.png",
            "page": "elements.html",
            "viewport": [1000, 600],
            "scroll_y": 0,
            "num_samples": 7,
            "split": "train",
        }
    ]
    assert prov["chromium"] and prov["seed"] == 0 and prov["tool"] == "gui_grounding.data.collect.web"
    assert prov["root"] == os.path.dirname(os.path.realpath(FIXTURE))
    assert "dropped elements:" in result.table() and "long_name" in result.table()


def test_fixture_output_is_canonical_and_deterministic(collected, tmp_path):
    out, result = collected
    samples, report = load_samples([os.path.join(out, "train.jsonl")])
    assert len(samples) == 7 and report.rejects == []
    assert open(os.path.join(out, "test.jsonl")).read() == ""
    again = collect_web([FIXTURE], str(tmp_path), viewports=((1000, 600),), seed=0)
    assert again.train == result.train


def test_screenshot_pixels_match_the_box(collected):
    # the "Home" icon is a solid #336699 square exactly filling its box; "Settings" a green data: SVG (not blocked)
    out, result = collected
    by_name = {r["element"]["name"]: r for r in result.train}
    with Image.open(os.path.join(out, by_name["Home"]["image_path"])) as im:
        im = im.convert("RGB")
        b = by_name["Home"]["target_bbox"]
        assert im.getpixel((b["x_min"], b["y_min"])) == (0x33, 0x66, 0x99)
        assert im.getpixel((b["x_max"], b["y_max"])) == (0x33, 0x66, 0x99)
        assert im.getpixel((b["x_max"] + 1, b["y_max"])) == (255, 255, 255)
        b = by_name["Settings"]["target_bbox"]
        assert im.getpixel((b["x_min"], b["y_min"])) == im.getpixel((b["x_max"], b["y_max"])) == (0, 0xAA, 0)
        assert im.getpixel((b["x_max"] + 1, b["y_max"] + 1)) == (255, 255, 255)


def test_cli_runs_scrolls_and_replaces_an_earlier_run(tmp_path, capsys):
    _require_browser()
    parser = argparse.ArgumentParser(prog="gui-grounding")
    register_cli(parser.add_subparsers(dest="command", required=True))
    pages = tmp_path / "pages"
    pages.mkdir()
    shutil.copy(FIXTURE, pages / "old.html")
    out = tmp_path / "out"
    args = parser.parse_args(["collect-web", str(pages), "--out", str(out), "--viewports", "800x600"])
    args.func(args)
    assert os.listdir(out / "images") == ["old__800x600.png"]

    (pages / "old.html").unlink()
    shutil.copy(FIXTURE, pages / "new.html")
    args = parser.parse_args(
        [
            "collect-web",
            str(pages),
            "--out",
            str(out),
            "--viewports",
            "800x600,640x480",
            "--scroll-offsets",
            "0,400",
            "--max-per-screenshot",
            "2",
            "--seed",
            "3",
        ]
    )
    args.func(args)
    printed = capsys.readouterr().out
    assert "screenshots: 4" in printed and "over_cap" in printed
    # the earlier run's screenshot is gone: the folder matches provenance.json
    assert sorted(os.listdir(out / "images")) == [
        "new__640x480.png",
        "new__640x480__s400.png",
        "new__800x600.png",
        "new__800x600__s400.png",
    ]
    prov = json.load(open(out / "provenance.json"))
    assert {s["file"] for s in prov["screenshots"]} == {"images/" + f for f in os.listdir(out / "images")}
    assert prov["viewports"] == [[800, 600], [640, 480]] and prov["scroll_offsets"] == [0, 400]
    records = [json.loads(x) for x in open(out / "train.jsonl")]
    assert 0 < len(records) <= 4 * 2 and prov["dropped"]["over_cap"] > 0
    scrolled = [r for r in records if "__s400" in r["sample_id"]]
    assert all(r["image_path"].endswith("__s400.png") for r in scrolled)

    for bad in (["--viewports", "1280by720"], ["--viewports", "0x10"], ["--scroll-offsets", "-5"]):
        with pytest.raises(SystemExit):
            parser.parse_args(["collect-web", str(pages), "--out", str(out), *bad])


def test_helpers():
    assert to_pixel_box([10.4, 20.6, 30.5, 40.2], 100, 100) == {"x_min": 10, "y_min": 21, "x_max": 29, "y_max": 39}
    assert to_pixel_box([10, 10, 10.4, 30], 100, 100) is None
    assert to_pixel_box([-3, 90, 50, 120], 100, 100) == {"x_min": 0, "y_min": 90, "x_max": 49, "y_max": 99}
    assert make_instruction("link", 'Say "hi"', random.Random(0)) in {
        "Click the \"Say 'hi'\" link",
        "Open the \"Say 'hi'\" link",
        "Click \"Say 'hi'\"",
    }
    with pytest.raises(FileNotFoundError):
        find_pages(["/no/such/page.html"])


def test_bad_arguments_fail_before_rendering(tmp_path):
    with pytest.raises(ValueError, match="viewports"):
        collect_web([FIXTURE], str(tmp_path), viewports=((0, 600),))
    with pytest.raises(ValueError, match="test_fraction"):
        collect_web([FIXTURE], str(tmp_path), test_fraction=1.0)
    with pytest.raises(FileNotFoundError, match="no .html"):
        collect_web([str(tmp_path)], str(tmp_path / "out"))
    with pytest.raises(FileNotFoundError, match="Chromium not found"):
        collect_web([FIXTURE], str(tmp_path), chromium=str(tmp_path / "no-chromium"))


def test_find_pages_keeps_same_named_files_apart(tmp_path):
    for d in ("a", "b"):
        (tmp_path / d).mkdir()
        shutil.copy(FIXTURE, tmp_path / d / "index.html")
    pages = find_pages([str(tmp_path / "a" / "index.html"), str(tmp_path / "b" / "index.html")])
    assert [rel for _, rel in pages] == ["a/index.html", "b/index.html"]
    assert [rel for _, rel in find_pages([str(tmp_path)])] == ["a/index.html", "b/index.html"]


def test_committed_sample():
    prov = json.load(open(os.path.join(SAMPLE, "provenance.json")))
    shots = prov["screenshots"]
    assert len(shots) >= 30 and len({tuple(s["viewport"]) for s in shots}) >= 2
    samples, report = load_samples([os.path.join(SAMPLE, "train.jsonl"), os.path.join(SAMPLE, "test.jsonl")])
    assert report.rejects == [] and len(samples) >= 300
    splits = {s: [json.loads(x) for x in open(os.path.join(SAMPLE, f"{s}.jsonl"))] for s in ("train", "test")}
    records = splits["train"] + splits["test"]
    assert all(set(r) == KEYS for r in records)
    assert len({r["sample_id"] for r in records}) == len(records)
    sizes = {}
    for r in records:
        if r["image_path"] not in sizes:
            with Image.open(os.path.join(SAMPLE, r["image_path"])) as im:
                sizes[r["image_path"]] = im.size
        w, h = sizes[r["image_path"]]
        b = r["target_bbox"]
        assert all(isinstance(v, int) for v in b.values())
        assert (w, h) == (r["image_width"], r["image_height"]) == tuple(r["viewport"])
        assert 0 <= b["x_min"] < b["x_max"] < w and 0 <= b["y_min"] < b["y_max"] < h
        assert r["source"] == "web-collector" and r["platform"] == "web" and r["ui_type"] in {"text", "icon"}
    train_pages = {r["page"] for r in splits["train"]}
    test_pages = {r["page"] for r in splits["test"]}
    assert train_pages and test_pages and not train_pages & test_pages
    assert {s["file"] for s in shots} == {"images/" + f for f in os.listdir(os.path.join(SAMPLE, "images"))}
    assert sum(s["num_samples"] for s in shots) == len(records)
    assert {s["split"] for s in shots if s["page"] in test_pages} == {"test"}
    assert prov["num_samples"] == {"train": len(splits["train"]), "test": len(splits["test"])}
    assert set(prov["dropped"]) == set(DROP_REASONS) and prov["chromium"] and "date" in prov and "root" in prov
    size = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(SAMPLE) for f in fs)
    assert size < 10 * 1024 * 1024
