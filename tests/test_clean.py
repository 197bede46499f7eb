"""Detector-IoU cleaning (``gui-grounding clean``): the detectors on real screenshots with deliberately shifted boxes,
and the engine (cache, resume, shards, failures, report, CLI) with a fake detector and exact values.

The real-screenshot part uses ``data/web_sample`` (python-docs pages rendered by our collector): 40 true samples from
10 screenshots, each also copied with its box shifted (a) by 3x its width/height into blank space (or, failing that,
to a random blank place) and (b) to a uniformly random place. "Removed" should mean "shifted": the test prints
precision and recall per detector and shift kind and asserts the thresholds the measurements support.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys

import numpy as np
import pytest
from PIL import Image, ImageDraw

from gui_grounding.data import clean as clean_mod
from gui_grounding.data import detectors as det_mod
from gui_grounding.data.clean import clean, output_paths, register_cli
from gui_grounding.data.clean_cache import CacheIncompleteError, parse_shard, shard_bounds, shard_images
from gui_grounding.data.detectors import (
    ClassicDetector,
    OCRDetector,
    OmniParserDetector,
    UnionDetector,
    build_detector,
    merge_ocr_and_icons,
    parse_detector_spec,
    quad_to_box,
)
from gui_grounding.data.schema import load_samples
from gui_grounding.models.frames import box_iou
from tests.helpers.detectors import dict_detector
from tests.helpers.jsonl import read_jsonl
from tests.helpers.paths import SAMPLE

NUM_IMAGES, PER_IMAGE = 10, 4


# --------------------------------------------------------------------------------------------------------------------
# real screenshots, shifted boxes


def _box(rec) -> tuple[int, int, int, int]:
    b = rec["target_bbox"]
    return b["x_min"], b["y_min"], b["x_max"], b["y_max"]


def _blank(grey: np.ndarray, x: int, y: int, w: int, h: int) -> bool:
    region = grey[y : y + h, x : x + w]
    return int(region.max()) - int(region.min()) <= 16


def _shift_blank(box, grey, rng: random.Random) -> tuple[int, int, int, int]:
    """The box moved by 3x its width and/or height (8 directions, seeded order) onto blank pixels; else a random blank
    place."""
    x0, y0, x1, y1 = box
    w, h = x1 - x0, y1 - y0
    height, width = grey.shape
    moves = [(dx, dy) for dx in (-1, 0, 1) for dy in (-1, 0, 1) if (dx, dy) != (0, 0)]
    rng.shuffle(moves)
    for dx, dy in moves:
        nx, ny = x0 + 3 * w * dx, y0 + 3 * h * dy
        if 0 <= nx and 0 <= ny and nx + w <= width and ny + h <= height and _blank(grey, nx, ny, w, h):
            return nx, ny, nx + w, ny + h
    for _ in range(2000):
        nx, ny = rng.randint(0, width - w), rng.randint(0, height - h)
        if _blank(grey, nx, ny, w, h):
            return nx, ny, nx + w, ny + h
    raise AssertionError(f"no blank place for a {w}x{h} box")


def _shift_random(box, grey, rng: random.Random) -> tuple[int, int, int, int]:
    w, h = box[2] - box[0], box[3] - box[1]
    height, width = grey.shape
    nx, ny = rng.randint(0, width - w), rng.randint(0, height - h)
    return nx, ny, nx + w, ny + h


@pytest.fixture(scope="module")
def shifted_data(tmp_path_factory) -> str:
    """JSONL of 40 true samples (source "true") + their blank-shifted and random-shifted copies."""
    rng = random.Random(0)
    with open(os.path.join(SAMPLE, "train.jsonl"), encoding="utf-8") as f:
        records = [json.loads(line) for line in f]
    by_image: dict[str, list[dict]] = {}
    for rec in records:
        by_image.setdefault(rec["image_path"], []).append(rec)
    images = rng.sample(sorted(by_image), NUM_IMAGES)
    out = []
    for image in images:
        path = os.path.join(SAMPLE, image)
        grey = np.asarray(Image.open(path).convert("L"))
        for rec in rng.sample(by_image[image], PER_IMAGE):
            base = {**rec, "image_path": path}
            out.append({**base, "source": "true"})
            for kind, shift in (("blank", _shift_blank), ("random", _shift_random)):
                x0, y0, x1, y1 = shift(_box(rec), grey, rng)
                out.append(
                    {
                        **base,
                        "sample_id": f"{rec['sample_id']}:{kind}",
                        "source": f"shifted-{kind}",
                        "target_bbox": {"x_min": x0, "y_min": y0, "x_max": x1, "y_max": y1},
                    }
                )
    folder = tmp_path_factory.mktemp("shifted")
    data = os.path.join(folder, "shifted.jsonl")
    with open(data, "w", encoding="utf-8") as f:
        f.writelines(json.dumps(r) + "\n" for r in out)
    return data


@pytest.fixture(scope="module")
def cleaned(shifted_data) -> dict[str, dict]:
    """Run the cleaner with ocr, classic and ocr+classic (one shared detection cache); detector -> report + records."""
    folder = os.path.dirname(shifted_data)
    cache = os.path.join(folder, "cache")
    results = {}
    for spec in ("ocr", "classic", "ocr+classic"):
        out = os.path.join(folder, spec.replace("+", "_"), "kept.jsonl")
        report = clean([shifted_data], out, spec, cache_dir=cache, progress=False)
        paths = output_paths(out)
        with open(paths["kept"], encoding="utf-8") as f:
            kept = [json.loads(line) for line in f]
        with open(paths["rejected"], encoding="utf-8") as f:
            rejected = [json.loads(line) for line in f]
        results[spec] = {"report": report, "kept": kept, "rejected": rejected, "paths": paths}
    return results


def _precision_recall(result: dict, kind: str) -> tuple[float, float, int, int]:
    """Precision and recall of "removed" (reason low_iou) vs "is shifted", on the true samples + one shift kind."""
    rows = [
        (r["source"], "reason" in r)
        for r in result["kept"] + result["rejected"]
        if r["source"] in ("true", f"shifted-{kind}")
    ]
    tp = sum(1 for src, removed in rows if removed and src != "true")
    fp = sum(1 for src, removed in rows if removed and src == "true")
    shifted = sum(1 for src, _ in rows if src != "true")
    return (tp / (tp + fp) if tp + fp else 1.0), tp / shifted, tp, fp


def test_shifted_boxes_removed_true_boxes_kept(cleaned, capsys):
    table = [
        "",
        f"{'detector':<12} {'shift':<7} {'precision':>9} {'recall':>7} {'removed':>8} {'true removed':>13} "
        f"{'s/image':>8}",
    ]
    measured = {}
    for spec, result in cleaned.items():
        seconds = result["report"]["seconds_per_image"]
        for kind in ("blank", "random"):
            p, r, tp, fp = _precision_recall(result, kind)
            measured[spec, kind] = (p, r)
            table.append(
                f"{spec:<12} {kind:<7} {p:>9.3f} {r:>7.3f} {tp + fp:>8} {fp:>13} "
                f"{' + '.join(f'{v:.2f}' for v in seconds.values()):>8}"
            )
    with capsys.disabled():
        print("\n".join(table))
    for spec, result in cleaned.items():
        report = result["report"]
        assert report["samples"] == 3 * NUM_IMAGES * PER_IMAGE
        assert report["per_source"]["true"]["kept"] == NUM_IMAGES * PER_IMAGE, spec  # no true box removed
        assert report["rejected"]["detection_failed"] == 0 and report["images"]["failed"] == 0
        p, r = measured[spec, "blank"]
        assert p >= 0.9 and r >= 0.9, (spec, p, r)
        p, r = measured[spec, "random"]  # random places often land on other text: GTA1's 0.1 is lenient
        assert p >= 0.9 and r >= 0.4, (spec, p, r)
    # the union reuses the ocr and classic caches: nothing detected again
    assert cleaned["ocr+classic"]["report"]["images"] == {
        "total": NUM_IMAGES,
        "detected_now": 0,
        "cached": NUM_IMAGES,
        "failed": 0,
    }


def test_outputs_on_real_screenshots(cleaned):
    result = cleaned["ocr+classic"]
    report, paths = result["report"], result["paths"]
    assert len(result["kept"]) + len(result["rejected"]) == report["samples"] == 120
    assert report["kept"] == len(result["kept"])
    assert report["rejected"]["low_iou"] == len(result["rejected"])
    assert all(r["reason"] == "low_iou" and r["best_iou"] < 0.1 for r in result["rejected"])
    assert all(r["best_iou"] >= 0.1 and r["best_match"]["source"] in ("ocr", "classic") for r in result["kept"])
    assert sum(report["iou_histogram"]["counts"]) == 120 and len(report["iou_histogram"]["bin_edges"]) == 51
    with Image.open(paths["hist"]) as im:
        assert im.format == "PNG" and im.size == (700, 400)
    # kept records load back as samples, image paths relative to the output's folder
    samples, load = load_samples([paths["kept"]])
    assert len(samples) == report["kept"] and load.rejects == []
    assert all(os.path.isfile(s.image_path) for s in samples)
    # union detections carry their component as source
    with open(os.path.join(report["cache_dir"], "ocr.jsonl"), encoding="utf-8") as f:
        line = json.loads(f.readline())
    assert set(line) == {"image", "detector", "config", "seconds", "detections"} and line["detector"] == "ocr"
    assert {tuple(sorted(d)) for d in line["detections"]} == {("bbox", "score", "source", "type")}
    assert {(d["type"], d["source"], d["score"]) for d in line["detections"]} == {("text", "ocr", None)}


def test_ocr_recognition_scores_on_a_real_screenshot():
    image = det_mod.read_image_bgr(os.path.join(SAMPLE, "images", "about__1280x720.png"))
    plain = OCRDetector().text_lines(image)
    scored = OCRDetector(min_text_score=0.9).text_lines(image)
    assert all(s is None for _, s in plain) and all(s >= 0.9 for _, s in scored)
    assert 0 < len(scored) <= len(plain)
    # the page title "About these documents" (h1 at y ~ 97) is a detected line
    assert any(box_iou(b, (265, 81, 602, 113)) > 0.8 for b, _ in scored)


# --------------------------------------------------------------------------------------------------------------------
# detectors: pure parts, exact values


def test_quad_to_box_and_word_split():
    assert quad_to_box([[128.0, 21.0], [439.0, 22.0], [439.0, 38.0], [128.0, 37.0]]) == (128.0, 21.0, 439.0, 38.0)
    image = np.full((20, 100, 3), 255, np.uint8)
    image[5:15, 10:20] = 0  # word 1: two glyphs 2 px apart (a letter gap, not a word gap)
    image[5:15, 22:30] = 0
    image[5:15, 40:60] = (200, 80, 0)  # word 2 (blue ink), 10 blank columns after word 1
    ocr = OCRDetector()
    # line height 20 -> a word gap is >= max(2, round(0.2 * 20)) = 4 blank columns
    assert ocr.split_line(image, (0, 0, 100, 20)) == [(10, 0, 30, 20), (40, 0, 60, 20)]
    assert ocr.split_line(image, (35, 0, 70, 20)) == []  # one word: no extra box


def test_classic_detector_on_a_drawn_button(tmp_path):
    im = Image.new("RGB", (200, 120), "white")
    draw = ImageDraw.Draw(im)
    draw.rectangle((40, 30, 119, 59), fill=(30, 120, 200))  # a filled button, pixels x 40..119, y 30..59
    draw.rectangle((140, 80, 179, 99), outline=(0, 0, 0))  # an outlined input, pixels x 140..179, y 80..99
    path = str(tmp_path / "ui.png")
    im.save(path)
    boxes = ClassicDetector().boxes(det_mod.read_image_bgr(path))
    assert boxes == [
        (32, 28, 127, 61),
        (36, 28, 123, 61),
        (38, 28, 121, 61),  # button edges dilated 15x3, 7x3, 3x3
        (39, 29, 120, 60),  # button outline contour (Canny edge pixels)
        (41, 31, 119, 59),  # button's flat interior (its border pixels are not flat)
        (132, 78, 188, 102),
        (136, 78, 184, 102),
        (138, 78, 182, 102),  # input edges dilated
        (141, 81, 179, 99),  # input outline contour
        (142, 82, 178, 98),  # input's flat white interior, a region apart from the page background
    ]
    assert round(max(box_iou(b, (40, 30, 120, 60)) for b in boxes), 4) == 0.9558  # button, pixel edges
    assert round(max(box_iou(b, (140, 80, 180, 100)) for b in boxes), 4) == 0.855  # input
    dets = ClassicDetector().detect(path)
    assert {(d["type"], d["source"], d["score"]) for d in dets} == {("element", "classic", None)}
    assert len(dets) == len(boxes)


def _d(box, type_="text", source="omniparser", score=None):
    return {"bbox": list(box), "type": type_, "score": score, "source": source}


def test_merge_ocr_and_icons_follows_omniparser_rules():
    ocr = [
        _d((0, 0, 100, 20)),  # a text line; the small icon below sits inside it
        _d((200, 0, 240, 20)),  # text inside the big icon: absorbed
        _d((400, 400, 500, 420)),
    ]  # unrelated text: kept
    icons = [
        _d((10, 2, 20, 18), "icon", score=0.9),  # inside text line 0 -> dropped
        _d((195, -5, 260, 25), "icon", score=0.8),  # contains text 1 -> kept, text 1 absorbed
        _d((300, 300, 340, 340), "icon", score=0.7),  # duplicate pair: the larger one is dropped
        _d((302, 302, 338, 338), "icon", score=0.6),  # ... the smaller one is kept
        _d((600, 600, 620, 620), "icon", score=0.5),
    ]
    merged = merge_ocr_and_icons(ocr, icons, iou_threshold=0.7)
    assert [tuple(d["bbox"]) for d in merged] == [
        (0, 0, 100, 20),
        (400, 400, 500, 420),
        (195, -5, 260, 25),
        (302, 302, 338, 338),
        (600, 600, 620, 620),
    ]
    # no icons: OCR unchanged; no OCR: only icon de-duplication
    assert merge_ocr_and_icons(ocr, []) == ocr
    assert [tuple(d["bbox"]) for d in merge_ocr_and_icons([], icons)] == [
        (10, 2, 20, 18),
        (195, -5, 260, 25),
        (302, 302, 338, 338),
        (600, 600, 620, 620),
    ]


def test_omniparser_errors_name_the_fix(tmp_path, monkeypatch):
    with pytest.raises(FileNotFoundError, match=r"pip install ultralytics.*--omniparser-weights \.\.\./icon_detect"):
        OmniParserDetector().load()
    with pytest.raises(FileNotFoundError, match=r"weights not found: .*nope\.pt.*pip install ultralytics"):
        OmniParserDetector(str(tmp_path / "nope.pt")).load()
    weights = tmp_path / "model.pt"
    weights.write_bytes(b"not really weights")
    monkeypatch.setitem(sys.modules, "ultralytics", None)  # import fails as when it is not installed
    with pytest.raises(ImportError, match=r"ultralytics is not installed.*pip install ultralytics; pass"):
        OmniParserDetector(str(weights)).load()
    # through the cleaner: fails before any image, writes no cache and no output
    data = _write_items(tmp_path)
    out = tmp_path / "out" / "clean.jsonl"
    with pytest.raises(FileNotFoundError, match="--omniparser-weights"):
        clean([data], str(out), "omniparser", progress=False)
    assert not os.path.exists(out.parent)


def test_detector_specs():
    assert parse_detector_spec("ocr+classic+ocr") == ["ocr", "classic"]
    with pytest.raises(ValueError, match="unknown detector 'yolo'.*known: ocr, classic, omniparser"):
        parse_detector_spec("ocr+yolo")
    union = build_detector("classic+omniparser", {"ocr": {"min_text_score": 0.9}, "omniparser": {"weights": "w.pt"}})
    assert isinstance(union, UnionDetector) and union.name == "classic+omniparser"
    assert [c.name for c in union.components] == ["classic", "omniparser"]
    omni = union.components[1]
    assert omni.config()["ocr"]["min_text_score"] == 0.9 and omni.ocr.source == "omniparser"
    assert omni.config()["box_threshold"] == 0.05 and omni.config()["merge_iou"] == 0.7
    assert isinstance(build_detector("ocr"), OCRDetector)


# --------------------------------------------------------------------------------------------------------------------
# engine with a fake detector: cache, resume, shards, failures, report


# detections read from a dict keyed by the image's file name; records its calls; fails on ``raising`` names
FakeDetector = dict_detector("fake")


@pytest.fixture
def fake(monkeypatch):
    monkeypatch.setitem(det_mod.DETECTORS, "fake", FakeDetector)
    FakeDetector.calls = []
    FakeDetector.raising = {"bad.png"}
    FakeDetector.boxes = {
        "a.png": [(10, 10, 50, 50)],
        "b.png": [(0, 0, 20, 20)],
        "c.png": [],
        "d.png": [(5, 5, 15, 15)],
    }
    return FakeDetector


ITEMS = [
    ("a.png", (10, 10, 50, 50), "x"),  # IoU 1.0 -> kept
    ("a.png", (30, 10, 70, 50), "x"),  # IoU 800/2400 = 1/3 -> kept
    ("a.png", (46, 10, 86, 50), "y"),  # IoU 160/3040 = 1/19 -> low_iou
    ("b.png", (0, 0, 10, 10), "y"),  # IoU 100/400 = 0.25 -> kept
    ("b.png", [(60, 60, 90, 90), (0, 0, 20, 4)], "y"),  # second box: IoU 80/400 = 0.2 -> kept
    ("c.png", (1, 1, 9, 9), "y"),  # no detections -> best 0.0 -> low_iou
    ("bad.png", (1, 1, 9, 9), "x"),  # detector error -> detection_failed
    ("d.png", (5, 5, 15, 15), "x"),
]  # IoU 1.0 -> kept


def _write_items(folder) -> str:
    folder = str(folder)
    lines = []
    os.makedirs(os.path.join(folder, "images"), exist_ok=True)
    for i, (name, box, source) in enumerate(ITEMS):
        path = os.path.join(folder, "images", name)
        if not os.path.exists(path):
            Image.new("RGB", (100, 100), "white").save(path)
        boxes = box if isinstance(box, list) else [box]
        bbox = [dict(zip(("x_min", "y_min", "x_max", "y_max"), b, strict=True)) for b in boxes]
        lines.append(
            {
                "sample_id": f"s{i}",
                "instruction": f"click {i}",
                "image_path": f"images/{name}",
                "target_bbox": bbox[0] if len(bbox) == 1 else bbox,
                "source": source,
            }
        )
    lines.append(
        {
            "sample_id": "s8",
            "instruction": "click 8",
            "image_path": "images/missing.png",
            "target_bbox": {"x_min": 1, "y_min": 1, "x_max": 5, "y_max": 5},
            "source": "x",
        }
    )
    data = os.path.join(folder, "data.jsonl")
    with open(data, "w", encoding="utf-8") as f:
        f.writelines(json.dumps(r) + "\n" for r in lines)
        f.write("{not json\n")
    return data


def test_clean_keeps_rejects_and_reports_exactly(fake, tmp_path, capsys):
    data = _write_items(tmp_path)
    out = str(tmp_path / "out" / "clean.jsonl")
    report = clean([data], out, "fake", progress=False)
    kept, rejected = read_jsonl(out), read_jsonl(str(tmp_path / "out" / "clean.rejected.jsonl"))
    assert [(r["sample_id"], r["best_iou"]) for r in kept] == [
        ("s0", 1.0),
        ("s1", 0.333333),
        ("s3", 0.25),
        ("s4", 0.2),
        ("s7", 1.0),
    ]
    assert [(r.get("sample_id", r.get("ref")), r["reason"], r["best_iou"]) for r in rejected] == [
        ("s2", "low_iou", 0.052632),
        ("s5", "low_iou", 0.0),
        ("s6", "detection_failed", None),
        (f"{data}:9", "invalid_record", None),
        (f"{data}:10", "invalid_record", None),
    ]
    assert rejected[2]["error"] == "fake: OSError: cannot decode"
    assert rejected[3]["invalid_reason"] == "missing_image" and rejected[4]["invalid_reason"] == "unparseable_record"
    assert kept[0]["image_path"] == "../images/a.png"  # relative to the output's folder
    assert kept[0]["best_match"] == {"bbox": [10, 10, 50, 50], "type": "element", "source": "fake"}
    assert rejected[1]["best_match"] is None
    assert report["records"] == 10 and report["samples"] == 8 and report["kept"] == 5
    assert report["rejected"] == {"low_iou": 2, "detection_failed": 1, "invalid_record": 2}
    assert report["invalid_records"] == {"missing_image": 1, "unparseable_record": 1}
    assert report["per_source"] == {
        "x": {"samples": 4, "kept": 3, "low_iou": 0, "detection_failed": 1, "filtered_fraction": 0.25},
        "y": {"samples": 4, "kept": 2, "low_iou": 2, "detection_failed": 0, "filtered_fraction": 0.5},
    }
    assert report["overall"] == {
        "samples": 8,
        "kept": 5,
        "low_iou": 2,
        "detection_failed": 1,
        "filtered_fraction": 0.375,
    }
    assert report["images"] == {"total": 5, "detected_now": 5, "cached": 0, "failed": 1}
    counts = report["iou_histogram"]["counts"]
    assert (counts[0], counts[2], counts[10], counts[12], counts[16], counts[49]) == (1, 1, 1, 1, 1, 2)
    assert sum(counts) == 7
    printed = capsys.readouterr().out
    assert "x                                4         3         0          1    25.00%" in printed
    assert "ALL                              8         5         2          1    37.50%" in printed
    assert "invalid records (rejected as invalid_record, not cleaned): missing_image 1, unparseable_record 1" in printed
    with open(str(tmp_path / "out" / "clean.report.json"), encoding="utf-8") as f:
        assert json.load(f) == report
    assert os.path.getsize(str(tmp_path / "out" / "clean.iou_hist.png")) > 1000
    # threshold 0.25 (kept when >=): s3 (exactly 0.25) stays, s4 (0.2) goes
    report = clean([data], out, "fake", 0.25, progress=False)
    assert [r["sample_id"] for r in read_jsonl(out)] == ["s0", "s1", "s3", "s7"]
    assert report["images"] == {"total": 5, "detected_now": 0, "cached": 5, "failed": 1}


def test_cache_resume_half_written_line_and_retry(fake, tmp_path):
    data = _write_items(tmp_path)
    out = str(tmp_path / "clean.jsonl")
    clean([data], out, "fake", progress=False, plot=False)
    cache = str(tmp_path / "clean.detections" / "fake.jsonl")
    assert sorted(FakeDetector.calls) == ["a.png", "b.png", "bad.png", "c.png", "d.png"]
    lines = open(cache, encoding="utf-8").read().splitlines(keepends=True)
    assert [os.path.basename(json.loads(line)["image"]) for line in lines] == [
        "a.png",
        "b.png",
        "bad.png",
        "c.png",
        "d.png",
    ]
    assert json.loads(lines[2])["error"] == "OSError: cannot decode"
    # a killed run: the last line half written
    with open(cache, "w", encoding="utf-8") as f:
        f.writelines(lines[:4])
        f.write(lines[4][:25])
    FakeDetector.calls = []
    report = clean([data], out, "fake", progress=False, plot=False)
    assert FakeDetector.calls == ["d.png"]  # only the half-written image is redone
    assert report["images"]["detected_now"] == 1 and report["kept"] == 5
    assert open(cache, encoding="utf-8").read().splitlines(keepends=True)[:4] == lines[:4]
    assert len(open(cache, encoding="utf-8").read().splitlines()) == 5
    # errors are final unless --retry-failed; a success then wins over the old error line
    FakeDetector.calls = []
    clean([data], out, "fake", progress=False, plot=False)
    assert FakeDetector.calls == []
    FakeDetector.raising = set()
    FakeDetector.boxes["bad.png"] = [(1, 1, 9, 9)]
    report = clean([data], out, "fake", retry_failed=True, progress=False, plot=False)
    assert FakeDetector.calls == ["bad.png"]
    assert report["kept"] == 6 and report["rejected"]["detection_failed"] == 0
    # another detector configuration ignores the cached lines and detects again
    FakeDetector.calls = []
    clean([data], out, "fake", detector_options={"fake": {"version": 2}}, progress=False, plot=False)
    assert sorted(FakeDetector.calls) == ["a.png", "b.png", "bad.png", "c.png", "d.png"]


def test_shards_fill_the_cache_and_a_final_run_merges(fake, tmp_path, capsys):
    data = _write_items(tmp_path)
    out = str(tmp_path / "clean.jsonl")
    # 5 unique images a, b, bad, c, d (sorted absolute paths) in 2 shards: [a, b, bad] and [c, d]
    summary = clean([data], out, "fake", shard="0/2", progress=False)
    assert sorted(FakeDetector.calls) == ["a.png", "b.png", "bad.png"]
    assert summary == {
        "shard": "0/2",
        "detector": "fake",
        "cache_dir": str(tmp_path / "clean.detections"),
        "images": 3,
        "detected_now": 3,
        "cached": 0,
        "failed": 1,
    }
    assert not os.path.exists(out)  # a shard run writes no output
    assert os.listdir(tmp_path / "clean.detections") == ["fake.shard-0-of-2.jsonl"]
    with pytest.raises(CacheIncompleteError, match=r"2 of 5 images have no cached detections .*--shard 1/2"):
        clean([data], out, "fake", from_cache=True, progress=False)
    FakeDetector.calls = []
    clean([data], out, "fake", shard="1/2", progress=False)
    assert sorted(FakeDetector.calls) == ["c.png", "d.png"]
    FakeDetector.calls = []
    report = clean([data], out, "fake", from_cache=True, progress=False)
    assert FakeDetector.calls == [] and report["kept"] == 5 and report["images"]["cached"] == 5
    assert sorted(os.listdir(tmp_path / "clean.detections")) == ["fake.shard-0-of-2.jsonl", "fake.shard-1-of-2.jsonl"]
    for kwargs in ({"shard": "0/2"}, {"retry_failed": True}):
        with pytest.raises(ValueError, match="use one or the other"):
            clean([data], out, "fake", from_cache=True, progress=False, **kwargs)


def test_shard_split_is_numpy_array_split():
    assert [shard_bounds(10, i, 3) for i in range(3)] == [(0, 4), (4, 7), (7, 10)]
    assert [shard_bounds(2, i, 4) for i in range(4)] == [(0, 1), (1, 2), (2, 2), (2, 2)]
    for n, k in ((10, 3), (7, 7), (3, 5), (100, 8)):
        split = [list(x) for x in np.array_split(np.arange(n), k)]
        assert [list(range(*shard_bounds(n, i, k))) for i in range(k)] == split
    images = ["c", "a", "b", "a", "e", "d"]
    assert [shard_images(images, i, 2) for i in range(2)] == [["a", "b", "c"], ["d", "e"]]
    assert parse_shard("3/8") == (3, 8) and parse_shard(" 0 / 1 ") == (0, 1)
    for bad in ("8/8", "1", "-1/4", "a/b"):
        with pytest.raises(ValueError, match="0-based"):
            parse_shard(bad)


def test_cli_flags_help_and_run(fake, tmp_path, capsys):
    parser = argparse.ArgumentParser(prog="gui-grounding")
    register_cli(parser.add_subparsers(dest="command", required=True))
    sub = parser._subparsers._group_actions[0].choices["clean"]
    flags = [a for a in sub._actions if a.dest != "help"]
    assert {a.dest for a in flags} == {
        "inputs",
        "out",
        "detector",
        "iou_threshold",
        "image_folders",
        "cache_dir",
        "shard",
        "from_cache",
        "retry_failed",
        "ocr_min_text_score",
        "omniparser_weights",
        "omniparser_box_threshold",
        "strict",
    }
    assert all(a.help for a in flags)
    args = parser.parse_args(["clean", "in.jsonl", "--out", "o.jsonl"])
    assert (args.detector, args.iou_threshold, args.omniparser_box_threshold, args.shard) == ("ocr", 0.1, 0.05, None)
    assert args.func is clean_mod._run_cli
    data = _write_items(tmp_path)
    out = str(tmp_path / "cli" / "clean.jsonl")
    args = parser.parse_args(["clean", data, "--detector", "fake", "--out", out, "--iou-threshold", "0.3"])
    args.func(args)
    assert [r["sample_id"] for r in read_jsonl(out)] == ["s0", "s1", "s7"]
    args = parser.parse_args(["clean", data, "--detector", "fake", "--out", out, "--shard", "2/2"])
    with pytest.raises(SystemExit, match="--shard must be I/N with 0 <= I < N"):
        args.func(args)
    args = parser.parse_args(["clean", data, "--detector", "omniparser", "--out", out])
    with pytest.raises(SystemExit, match="pip install ultralytics; pass --omniparser-weights"):
        args.func(args)
