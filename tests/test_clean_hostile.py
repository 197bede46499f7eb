"""Hostile input for ``gui-grounding clean``: the detection cache, detector failures, outputs, the image frame and
the numeric flags. Every bad unit is a counted, reason-coded reject (never a crash, never a lost neighbour); outputs
are checked before any input is read, locked and written atomically, the report last. Exact counts, no timing."""

from __future__ import annotations

import argparse
import io
import json
import os
import struct
import tempfile
import zlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image, ImageOps, PngImagePlugin

from groundwork.outputs import OutputError, OutputLock
from gui_grounding.data import clean as clean_mod
from gui_grounding.data import detectors as det_mod
from gui_grounding.data.clean import clean, output_paths, register_cli
from gui_grounding.data.clean_cache import (
    CACHE_LINE_REASONS,
    CacheIncompleteError,
    CacheLineError,
    DetectionCache,
    detect_one,
    parse_cache_line,
    parse_shard,
    scan_cache_lines,
    shard_bounds,
    shard_of,
)
from gui_grounding.models.frames import box_iou
from tests.helpers.detectors import dict_detector
from tests.helpers.jsonl import read_jsonl

# --------------------------------------------------------------------------------------------------------------------
# a stub detector and a small data set


# detections from a dict keyed by file name; a name in ``raising`` raises; ``outputs`` overrides the return
Stub = dict_detector("stub")


@pytest.fixture
def stub(monkeypatch):
    monkeypatch.setitem(det_mod.DETECTORS, "stub", Stub)
    Stub.calls, Stub.raising, Stub.outputs = [], set(), {}
    Stub.boxes = {
        "a.png": [(10, 10, 50, 50)],
        "b.png": [(0, 0, 20, 20)],
        "c.png": [(5, 5, 15, 15)],
        "d.png": [(30, 30, 60, 60)],
        "e.png": [(1, 1, 9, 9)],
    }
    return Stub


NAMES = ["a.png", "b.png", "c.png", "d.png", "e.png"]
BOXES = {
    "a.png": (10, 10, 50, 50),
    "b.png": (0, 0, 20, 20),
    "c.png": (5, 5, 15, 15),
    "d.png": (30, 30, 60, 60),
    "e.png": (1, 1, 9, 9),
}  # each sample's box equals its image's detection: best IoU 1.0


def _data(folder, names=NAMES, extra=None) -> str:
    folder = str(folder)
    os.makedirs(os.path.join(folder, "images"), exist_ok=True)
    lines = []
    for i, name in enumerate(names):
        path = os.path.join(folder, "images", name)
        if not os.path.exists(path):
            Image.new("RGB", (100, 100), "white").save(path)
        x0, y0, x1, y1 = BOXES[name]
        rec = {
            "sample_id": f"s{i}",
            "instruction": f"click {i}",
            "image_path": f"images/{name}",
            "target_bbox": {"x_min": x0, "y_min": y0, "x_max": x1, "y_max": y1},
            "source": "x",
        }
        rec.update((extra or {}).get(name, {}))
        lines.append(json.dumps(rec) + "\n")
    data = os.path.join(folder, "data.jsonl")
    with open(data, "w", encoding="utf-8") as f:
        f.writelines(lines)
    return data


def _run(data, out, **kwargs):
    return clean([data], str(out), "stub", progress=False, plot=False, **kwargs)


def _line(image, **fields) -> bytes:
    entry = {"image": image, "detector": "stub", "config": {"version": 1}, "seconds": 0.1, **fields}
    if "detections" not in fields and "error" not in fields:
        entry["detections"] = [{"bbox": [1, 2, 3, 4], "type": "element", "score": None, "source": "stub"}]
    return (json.dumps(entry) + "\n").encode()


# --------------------------------------------------------------------------------------------------------------------
# 1. one validation of cache lines


GOOD = json.loads(_line("/x/a.png"))
BAD_LINES = [
    (b'{"image": "/x/a.png"', "torn_line"),
    (b"\n", "blank_line"),
    (b" \t\r\n", "blank_line"),
    (b'\xff\xfe{"image": 1}\n', "not_utf8"),
    (b"{not json\n", "not_json"),
    (b'{"image": "/x/a.png", "seconds": NaN}\n', "not_json"),
    (b'{"image": "/x/a.png", "seconds": 1e999}\n', "not_json"),
    (b'{"seconds": ' + b"9" * 5000 + b"}\n", "not_json"),
    (b"[" * 100_000 + b"]" * 100_000 + b"\n", "not_json"),
    (_line("/x/a.png")[:-1] + b"\r" + _line("/x/b.png"), "not_json"),  # a CR joining two lines
    (b"[1, 2, 3, 4]\n", "not_object"),
    (b'"/x/a.png"\n', "not_object"),
    (b"null\n", "not_object"),
    (b'{"detector": "stub", "config": {}, "detections": []}\n', "bad_field"),
    (_line(5), "bad_field"),
    (_line(""), "bad_field"),
    (json.dumps({**GOOD, "detector": None}).encode() + b"\n", "bad_field"),
    (json.dumps({**GOOD, "config": [1]}).encode() + b"\n", "bad_field"),
    (json.dumps({**GOOD, "seconds": "fast"}).encode() + b"\n", "bad_field"),
    (json.dumps({**GOOD, "seconds": -1}).encode() + b"\n", "bad_field"),
    (json.dumps({**GOOD, "seconds": True}).encode() + b"\n", "bad_field"),
    (json.dumps({**GOOD, "seconds": 10**30}).encode() + b"\n", "bad_field"),
    (json.dumps({**GOOD, "error": "boom"}).encode() + b"\n", "bad_field"),  # both detections and error
    (json.dumps({k: v for k, v in GOOD.items() if k != "detections"}).encode() + b"\n", "bad_field"),  # neither
    (_line("/x/a.png", error=3), "bad_field"),
    (_line("/x/a.png", detections={"bbox": [1, 2, 3, 4]}), "bad_detections"),
    (_line("/x/a.png", detections=[[1, 2, 3, 4]]), "bad_detections"),
    (_line("/x/a.png", detections=[{"bbox": [1, 2, 3]}]), "bad_detections"),
    (_line("/x/a.png", detections=[{"bbox": [1, 2, 3, "4"]}]), "bad_detections"),
    (_line("/x/a.png", detections=[{"bbox": [1, 2, 3, True]}]), "bad_detections"),
    (_line("/x/a.png", detections=[{"bbox": [1, 2, 3, 1e300]}]), "bad_detections"),
    (_line("/x/a.png", detections=[{"type": "text"}]), "bad_detections"),
    (_line("/x/a.png", detections=[{"bbox": [5, 2, 3, 4]}]), "bad_detections"),  # inverted
    (_line("/x/a.png", detections=[{"bbox": [1, 2, 3, 4], "score": "high"}]), "bad_detections"),
    (_line("/x/a.png", detections=[{"bbox": [1, 2, 3, 4], "type": 5}]), "bad_detections"),
    (_line("/x/a.png", detections=[{"bbox": [1, 2, 3, 4], "source": ["x"]}]), "bad_detections"),
    (_line("/x/a.png", error="lone \ud800 surrogate"), "bad_text"),
    (_line("/x/\udcff.png"), "bad_text"),
]


@pytest.mark.parametrize(("line", "reason"), BAD_LINES, ids=[f"{r}-{i}" for i, (_, r) in enumerate(BAD_LINES)])
def test_every_bad_cache_line_has_its_reason(line, reason):
    with pytest.raises(CacheLineError) as err:
        parse_cache_line(line)
    assert err.value.reason == reason
    assert reason in CACHE_LINE_REASONS


def test_good_cache_lines_pass_as_written():
    assert parse_cache_line(_line("/x/a.png")) == GOOD
    assert parse_cache_line(_line("/x/a.png").replace(b"\n", b"\r\n")) == GOOD  # CRLF: JSON whitespace
    assert parse_cache_line(_line("/x/a.png", error="OSError: x"))["error"] == "OSError: x"
    no_config = {k: v for k, v in GOOD.items() if k not in ("config", "seconds")}
    assert parse_cache_line(json.dumps(no_config).encode() + b"\n")["config"] == {}
    dets = [{"bbox": [0, 0, 0, 0]}, {"bbox": [1.5, 2, 3, 4], "score": 0.5, "extra": [1]}]  # zero area, extra keys
    assert parse_cache_line(_line("/x/a.png", detections=dets))["detections"] == dets


def test_scan_yields_every_line_once_with_offsets():
    data = _line("/x/a.png") + b"junk\n" + b"\n" + _line("/x/b.png") + b'{"image": "/x/c.png"'
    rows = list(scan_cache_lines(io.BytesIO(data)))
    assert [(off, n) for off, n, _ in rows] == [
        (0, len(_line("/x/a.png"))),
        (len(_line("/x/a.png")), 5),
        (len(_line("/x/a.png")) + 5, 1),
        (len(_line("/x/a.png")) + 6, len(_line("/x/b.png"))),
        (len(data) - 20, 20),
    ]
    assert [r.reason if isinstance(r, CacheLineError) else r["image"] for _, _, r in rows] == [
        "/x/a.png",
        "not_json",
        "blank_line",
        "/x/b.png",
        "torn_line",
    ]


def test_bad_cache_lines_are_counted_and_their_images_redone(stub, tmp_path, caplog):
    data = _data(tmp_path)
    out = tmp_path / "out" / "clean.jsonl"
    first = _run(data, out)
    assert sorted(Stub.calls) == NAMES and first["kept"] == 5
    cache = tmp_path / "out" / "clean.detections" / "stub.jsonl"
    lines = cache.read_bytes().splitlines(keepends=True)
    by_name = {os.path.basename(json.loads(line)["image"]): line for line in lines}
    img = {name: json.loads(by_name[name])["image"] for name in NAMES}
    hostile = [
        b"[1, 2]\n",  # valid JSON, not an object
        by_name["a.png"].replace(b'"detections"', b'"detectionz"'),  # a's only line: a key missing -> a redone
        _line(img["b.png"], detections=[{"bbox": [1, 2, 3, float("nan")]}]),  # b: NaN in a box
        b"\xff\xfe\xfd\n",  # not UTF-8
        by_name["c.png"],  # c: fine
        by_name["c.png"],  # c again: a duplicate entry (same content)
        _line(img["d.png"], detections=[[0, 0, 5, 5]]),  # d: detections not objects, but d has a good line below
        by_name["d.png"].replace(b"\n", b"\r\n"),  # d: CRLF line, fine
        _line(img["e.png"], seconds=1.0).replace(b'"stub"', b'"other"', 1),  # e: another detector's line (stale)
        by_name["e.png"][:30],  # e: torn last line
    ]
    cache.write_bytes(b"".join(hostile))
    Stub.calls = []
    report = _run(data, out)
    assert sorted(Stub.calls) == ["a.png", "b.png", "e.png"]  # not cached: bad lines, stale, torn
    assert report["cache_lines"]["stub"] == {
        "lines": 10,
        "indexed": 3,
        "stale": 1,
        "duplicates": 1,
        "unreadable_files": 0,
        "bad_lines": {
            "bad_detections": 1,
            "bad_field": 1,
            "not_json": 1,
            "not_object": 1,
            "not_utf8": 1,
            "torn_line": 1,
        },
    }
    assert report["kept"] == 5 and report["images"] == {"total": 5, "detected_now": 3, "cached": 2, "failed": 0}
    assert [r["sample_id"] for r in read_jsonl(str(out))] == ["s0", "s1", "s2", "s3", "s4"]
    assert "6 bad cache lines of stub ignored" in caplog.text
    # the torn tail was cut before appending: every line of the file now reads, or is one of the old bad lines
    reloaded = DetectionCache(str(cache.parent), Stub())
    reloaded.load()
    assert reloaded.lines == 12 and reloaded.rejects["torn_line"] == 0 and reloaded.bad_lines == 5
    assert sorted(os.path.basename(p) for p in reloaded.index) == NAMES


def test_from_cache_reports_images_behind_bad_lines_as_missing(stub, tmp_path):
    data = _data(tmp_path)
    out = tmp_path / "clean.jsonl"
    _run(data, out)
    cache = tmp_path / "clean.detections" / "stub.jsonl"
    text = cache.read_bytes()
    cache.write_bytes(text.replace(b'"detector": "stub"', b'"detector": 5', 2))  # a, b: bad_field
    with pytest.raises(
        CacheIncompleteError,
        match=r"^2 of 5 images have no cached detections \(e\.g\. .*a\.png; 2 "
        r"bad cache lines ignored\); no shard cache files found",
    ):
        _run(data, out, from_cache=True)
    # shard files with a hostile name (N = 0) are ignored when naming the missing shards
    (tmp_path / "clean.detections" / "stub.shard-0-of-0.jsonl").write_bytes(b"\x00garbage")
    (tmp_path / "clean.detections" / "stub.shard-0-of-3.jsonl").write_bytes(b"")
    with pytest.raises(CacheIncompleteError, match=r"2 of 5 images .*incomplete shards: --shard 0/3$"):
        _run(data, out, from_cache=True)


def test_shard_of_matches_shard_bounds():
    for n in range(0, 12):
        for k in range(1, 7):
            for i in range(k):
                start, stop = shard_bounds(n, i, k)
                assert all(shard_of(n, p, k) == i for p in range(start, stop))


# --------------------------------------------------------------------------------------------------------------------
# 1b. detector failures are per-sample rejects


def test_detector_failures_are_detection_failed_rejects_and_the_rest_is_written(stub, tmp_path):
    data = _data(tmp_path)
    Stub.raising = {"a.png"}
    Stub.outputs = {
        "b.png": [{"bbox": [1.0, 2.0, 3.0, float("nan")]}],  # NaN box
        "c.png": {"bbox": [1, 2, 3, 4]},  # not a list
        "d.png": [{"bbox": np.array([1.0, 2.0, 3.0, 4.0])}],
    }  # not JSON numbers
    out = tmp_path / "clean.jsonl"
    report = _run(data, out)
    kept, rejected = read_jsonl(str(out)), read_jsonl(output_paths(str(out))["rejected"])
    assert [r["sample_id"] for r in kept] == ["s4"]
    assert [(r["sample_id"], r["reason"], r["best_iou"]) for r in rejected] == [
        ("s0", "detection_failed", None),
        ("s1", "detection_failed", None),
        ("s2", "detection_failed", None),
        ("s3", "detection_failed", None),
    ]
    assert rejected[0]["error"] == "stub: OSError: cannot decode"
    assert rejected[1]["error"].startswith("stub: bad detector output: detection 0 bbox [1.0, 2.0, 3.0, nan] must hold")
    assert rejected[2]["error"] == "stub: bad detector output: detections is dict, not a list"
    assert rejected[3]["error"].startswith("stub: bad detector output: detection 0 bbox")
    assert report["rejected"] == {"low_iou": 0, "detection_failed": 4, "invalid_record": 0}
    assert report["images"]["failed"] == 4
    # every line written reads back through the one validation (errors are final: nothing detected again)
    cache = DetectionCache(str(tmp_path / "clean.detections"), Stub())
    cache.load()
    assert (cache.lines, cache.indexed, cache.bad_lines) == (5, 5, 0)
    Stub.calls = []
    _run(data, out)
    assert Stub.calls == []


def test_an_undecodable_image_is_detection_failed_with_a_real_detector(tmp_path):
    """A truncated JPEG passes the header read of the load (its size is known) and fails when the detector decodes
    it: that image's sample is detection_failed, the other image's sample is cleaned."""
    data = _data(tmp_path, names=["a.png", "b.png"])
    buf = io.BytesIO()
    Image.effect_noise((100, 100), 64).convert("RGB").save(buf, "JPEG", quality=95)
    (tmp_path / "images" / "b.jpg").write_bytes(buf.getvalue()[: len(buf.getvalue()) // 2])
    with open(data, encoding="utf-8") as f:
        text = f.read().replace("images/b.png", "images/b.jpg")
    with open(data, "w", encoding="utf-8") as f:
        f.write(text)
    out = tmp_path / "clean.jsonl"
    report = clean([data], str(out), "classic", progress=False, plot=False)
    rejected = read_jsonl(output_paths(str(out))["rejected"])
    assert [(r["sample_id"], r["reason"]) for r in rejected] == [("s0", "low_iou"), ("s1", "detection_failed")]
    assert rejected[1]["error"].startswith("classic: OSError: ") and rejected[1]["best_iou"] is None
    assert report["rejected"] == {"low_iou": 1, "detection_failed": 1, "invalid_record": 0}
    assert report["images"]["failed"] == 1 and report["samples"] == 2


def test_a_records_own_output_fields_never_decide_its_status(stub, tmp_path):
    extra = {
        "a.png": {"reason": "invalid_record", "best_iou": 0.0, "error": "x"},  # looks rejected, is kept
        "b.png": {"best_match": "nope", "invalid_reason": 5, "source": ["a", "list"]},
        "c.png": {"source": 7},
    }
    data = _data(tmp_path, extra=extra)
    out = tmp_path / "clean.jsonl"
    report = _run(data, out)
    kept = read_jsonl(str(out))
    assert [r["sample_id"] for r in kept] == ["s0", "s1", "s2", "s3", "s4"]
    assert all("reason" not in r and "error" not in r and "invalid_reason" not in r for r in kept)
    assert kept[0]["best_iou"] == 1.0 and kept[1]["best_match"]["source"] == "stub"
    assert report["rejected"] == {"low_iou": 0, "detection_failed": 0, "invalid_record": 0}
    assert report["per_source"]["x"]["samples"] == 3 and report["per_source"]["7"]["samples"] == 1
    assert report["per_source"]["['a', 'list']"]["kept"] == 1


# --------------------------------------------------------------------------------------------------------------------
# 2. safe outputs


def _no_reading(monkeypatch):
    def boom(*args, **kwargs):
        raise AssertionError("an input was read")

    monkeypatch.setattr(clean_mod, "load_samples", boom)


def test_bad_out_is_refused_before_any_input_is_read(stub, tmp_path, monkeypatch):
    data = _data(tmp_path)
    before = open(data, "rb").read()
    _no_reading(monkeypatch)
    with pytest.raises(OutputError, match=r"--out .*data\.jsonl is one of the inputs"):
        _run(data, data)
    assert open(data, "rb").read() == before
    (tmp_path / "folder").mkdir()
    with pytest.raises(OutputError, match=r"--out .*folder is a folder; name a file"):
        _run(data, tmp_path / "folder")
    (tmp_path / "afile").write_text("x")
    with pytest.raises(OutputError, match=r"afile exists and is not a folder"):
        _run(data, tmp_path / "afile" / "clean.jsonl")
    with pytest.raises(OutputError, match=r"--out .* is one of the inputs"):  # --out equal to the cache folder
        _run(data, tmp_path / "c.jsonl", cache_dir=str(tmp_path / "c.jsonl"))
    with pytest.raises(OutputError, match=r"--cache-dir .*data\.jsonl is one of the inputs"):
        _run(data, tmp_path / "c.jsonl", cache_dir=data)
    with pytest.raises(OutputError, match=r"--cache-dir .*afile is a file; name a folder"):
        _run(data, tmp_path / "c.jsonl", cache_dir=str(tmp_path / "afile"))
    with pytest.raises(OutputError, match=r"--out: '' is not a usable path"):
        _run(data, "")
    assert sorted(os.listdir(tmp_path)) == ["afile", "data.jsonl", "folder", "images"]  # nothing left behind


def test_a_second_run_on_the_same_out_fails_at_once(stub, tmp_path):
    data = _data(tmp_path)
    out = tmp_path / "clean.jsonl"
    with OutputLock(str(out)), pytest.raises(OutputError, match=r"another run is writing .*clean\.jsonl"):
        _run(data, out)
    assert Stub.calls == [] and not out.exists()
    with OutputLock(str(out)):  # shard runs write no --out: they run side by side
        summary = _run(data, out, shard="0/2")
    assert summary["images"] == 3 and not out.exists()


def test_one_writer_per_cache_file(stub, tmp_path):
    data = _data(tmp_path)
    out = tmp_path / "clean.jsonl"
    _run(data, out, shard="0/2")
    shard_file = str(tmp_path / "clean.detections" / "stub.shard-1-of-2.jsonl")
    with OutputLock(shard_file):
        with pytest.raises(OutputError, match=r"another run is writing .*stub\.shard-1-of-2\.jsonl"):
            _run(data, out, shard="1/2")
        _run(data, out, shard="0/2")  # another cache file: fine (all cached)
    _run(data, out, shard="1/2")
    with OutputLock(str(tmp_path / "clean.detections" / "stub.jsonl")):
        report = _run(data, out, from_cache=True)  # reading needs no lock
    assert report["kept"] == 5


def test_outputs_atomic_and_the_report_last(stub, tmp_path, monkeypatch):
    data = _data(tmp_path)
    out = tmp_path / "o" / "clean.jsonl"
    paths = output_paths(str(out))
    order = []
    real_writer, real_json = clean_mod.atomic_writer, clean_mod.write_json

    def writer(path, *args, **kwargs):
        order.append(os.path.basename(path))
        return real_writer(path, *args, **kwargs)

    def write_json(path, value, **kwargs):
        order.append(os.path.basename(path))
        return real_json(path, value, **kwargs)

    monkeypatch.setattr(clean_mod, "atomic_writer", writer)
    monkeypatch.setattr(clean_mod, "write_json", write_json)
    clean([data], str(out), "stub", progress=False)
    assert order == ["clean.jsonl", "clean.rejected.jsonl", "clean.iou_hist.png", "clean.report.json"]
    assert sorted(os.listdir(out.parent)) == [
        "clean.detections",
        "clean.iou_hist.png",
        "clean.jsonl",
        "clean.rejected.jsonl",
        "clean.report.json",
    ]
    with Image.open(paths["hist"]) as im:
        assert im.format == "PNG" and im.size == (700, 400)
    # a run that fails while writing leaves no report beside the new files, and no temporary file
    Stub.boxes["a.png"] = []

    def broken(*args, **kwargs):
        raise OutputError("cannot write the histogram: disk full")

    monkeypatch.setattr(clean_mod, "plot_iou_histogram", broken)
    with pytest.raises(OutputError, match="disk full"):
        clean([data], str(out), "stub", progress=False, cache_dir=str(tmp_path / "c2"))
    assert not os.path.exists(paths["report"])
    assert [r["sample_id"] for r in read_jsonl(paths["kept"])] == ["s1", "s2", "s3", "s4"]  # the new kept file
    assert sorted(os.listdir(out.parent)) == [
        "clean.detections",
        "clean.iou_hist.png",
        "clean.jsonl",
        "clean.rejected.jsonl",
    ]


# --------------------------------------------------------------------------------------------------------------------
# 3. the image frame: EXIF orientation in XMP, or in an eXIf chunk after the pixels


def _rotated_png(path: str, where: str) -> None:
    """A 200x100 PNG (stored) with a black 40x30 block at x 20..60, y 10..40, orientation 6 (displayed 100x200,
    the block at x 60..90, y 20..60)."""
    im = Image.new("RGB", (200, 100), "white")
    im.paste((0, 0, 0), (20, 10, 60, 40))
    if where == "xmp":
        xmp = (
            '<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#">'
            '<rdf:Description xmlns:tiff="http://ns.adobe.com/tiff/1.0/" tiff:Orientation="6"/></rdf:RDF>'
            "</x:xmpmeta>"
        )
        info = PngImagePlugin.PngInfo()
        info.add_itxt("XML:com.adobe.xmp", xmp)
        im.save(path, pnginfo=info)
        return
    buf = io.BytesIO()
    im.save(buf, "PNG")
    data = buf.getvalue()
    exif = Image.Exif()
    exif[0x0112] = 6
    payload = exif.tobytes()[6:]  # without "Exif\0\0", as a PNG eXIf chunk holds it
    chunk = struct.pack(">I", len(payload)) + b"eXIf" + payload + struct.pack(">I", zlib.crc32(b"eXIf" + payload))
    iend = data.rfind(b"IEND") - 4
    with open(path, "wb") as f:
        f.write(data[:iend] + chunk + data[iend:])  # the orientation follows the pixel data


@pytest.mark.parametrize("where", ["xmp", "exif_after_pixels"])
def test_boxes_and_detections_are_in_the_displayed_frame(tmp_path, where):
    folder = tmp_path / "images"
    folder.mkdir()
    image = str(folder / "rot.png")
    _rotated_png(image, where)
    with Image.open(image) as im:
        assert im.size == (200, 100) and ImageOps.exif_transpose(im).size == (100, 200)
    boxes = {
        "block": (60, 20, 90, 60),  # the block as displayed
        "low": (10, 150, 40, 190),  # only inside the displayed frame (y > stored height 100): blank -> low_iou
        "out": (120, 10, 150, 40),
    }  # only inside the stored frame (x > displayed width 100)
    data = tmp_path / "d.jsonl"
    with open(data, "w", encoding="utf-8") as f:
        for name, (x0, y0, x1, y1) in boxes.items():
            f.write(
                json.dumps(
                    {
                        "sample_id": name,
                        "instruction": "click",
                        "image_path": "images/rot.png",
                        "target_bbox": {"x_min": x0, "y_min": y0, "x_max": x1, "y_max": y1},
                    }
                )
                + "\n"
            )
    out = tmp_path / "clean.jsonl"
    report = clean([str(data)], str(out), "classic", progress=False, plot=False)
    kept, rejected = read_jsonl(str(out)), read_jsonl(output_paths(str(out))["rejected"])
    assert [(r["sample_id"], r["image_width"], r["image_height"]) for r in kept] == [("block", 100, 200)]
    assert kept[0]["best_iou"] > 0.9
    assert [(r.get("sample_id"), r["reason"], r.get("invalid_reason")) for r in rejected] == [
        ("low", "low_iou", None),
        (None, "invalid_record", "box_outside_image"),
    ]
    assert report["samples"] == 2
    with open(os.path.join(report["cache_dir"], "classic.jsonl"), encoding="utf-8") as f:
        dets = json.loads(f.readline())["detections"]
    assert dets and all(
        0 <= d["bbox"][0] <= d["bbox"][2] <= 100 and 0 <= d["bbox"][1] <= d["bbox"][3] <= 200 for d in dets
    )
    assert round(max(box_iou(boxes["block"], tuple(d["bbox"])) for d in dets), 6) == kept[0]["best_iou"]


# --------------------------------------------------------------------------------------------------------------------
# 4. numeric flags


def _parser():
    parser = argparse.ArgumentParser(prog="gui-grounding")
    register_cli(parser.add_subparsers(dest="command", required=True))
    return parser


@pytest.mark.parametrize(
    ("flag", "value"),
    [
        ("--iou-threshold", "nan"),
        ("--iou-threshold", "inf"),
        ("--iou-threshold", "-0.1"),
        ("--iou-threshold", "1.5"),
        ("--iou-threshold", "abc"),
        ("--ocr-min-text-score", "2"),
        ("--ocr-min-text-score", "nan"),
        ("--omniparser-box-threshold", "-1"),
        ("--omniparser-box-threshold", "1e999"),
    ],
)
def test_numeric_flags_are_finite_and_in_range(flag, value, capsys):
    with pytest.raises(SystemExit) as exc:
        _parser().parse_args(["clean", "in.jsonl", "--out", "o.jsonl", flag, value])
    assert exc.value.code == 2
    assert f"argument {flag}: must be a number >= 0 and <= 1, got '{value}'" in capsys.readouterr().err


def test_numeric_flags_show_their_range_and_accept_the_bounds(capsys):
    args = _parser().parse_args(["clean", "i", "--out", "o", "--iou-threshold", "1", "--ocr-min-text-score", "0"])
    assert (args.iou_threshold, args.ocr_min_text_score) == (1.0, 0.0)
    with pytest.raises(SystemExit):
        _parser().parse_args(["clean", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert text.count("(a number >= 0 and <= 1)") == 3
    assert "(integers 0 <= I < N <= 1000000)" in text


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -0.01, 1.01, True, "0.1", None])
def test_clean_refuses_a_bad_threshold_before_anything(value, tmp_path, monkeypatch):
    _no_reading(monkeypatch)
    with pytest.raises(ValueError, match=r"--iou-threshold must be a number >= 0 and <= 1"):
        clean(["in.jsonl"], str(tmp_path / "o.jsonl"), "classic", value, progress=False)
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize(
    "text",
    ["\u0663/8", "+1/4", "-0/4", "1/4x", "0/0", "0/1000001", "1.0/4", "0x1/4", "1//4", "1/4\n", "", "1_0/20", "1/4/5"],
)
def test_shard_text_is_parsed_strictly(text):
    with pytest.raises(ValueError, match=r"--shard must be I/N with 0 <= I < N <= 1000000 \(0-based\)"):
        parse_shard(text)


def test_shard_accepts_plain_forms_and_tuples(stub, tmp_path):
    assert (
        parse_shard("0/1000000") == (0, 1000000) and parse_shard("\t2 /3 ") == (2, 3) and parse_shard("007/8") == (7, 8)
    )
    data = _data(tmp_path)
    for bad in ((True, 2), (0, 2.0), (2, 2), (-1, 2), [0, 1, 2], "2/2"):
        with pytest.raises(ValueError, match="--shard must be I/N"):
            _run(data, tmp_path / "o.jsonl", shard=bad)
    assert _run(data, tmp_path / "o.jsonl", shard=(1, 2))["shard"] == "1/2"


def test_cli_errors_are_one_line(stub, tmp_path):
    data = _data(tmp_path)
    args = _parser().parse_args(["clean", data, "--detector", "stub", "--out", data])
    with pytest.raises(SystemExit) as exc:
        args.func(args)
    message = str(exc.value.code)
    assert message.startswith("gui-grounding clean: error: --out ") and "is one of the inputs" in message
    assert "\n" not in message and "[Errno" not in message


# --------------------------------------------------------------------------------------------------------------------
# 5. property: the cache-line reader never raises and accounts for every line


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=12,
)
near_entries = st.fixed_dictionaries(
    {
        "image": st.sampled_from(["/x/a.png", "/x/b.png", "", 3]) | st.text(max_size=5),
        "detector": st.sampled_from(["stub", "other", None]),
        "config": st.sampled_from([{"version": 1}, {"version": 2}, {}, [1]]),
    },
    optional={
        "seconds": st.none() | st.floats() | st.integers(-2, 2),
        "error": st.text(max_size=5) | st.integers(),
        "detections": st.lists(
            st.fixed_dictionaries(
                {"bbox": st.lists(st.floats() | st.integers(-5, 50), min_size=3, max_size=5)},
                optional={"score": st.none() | st.floats(), "type": st.text(max_size=3) | st.integers()},
            ),
            max_size=3,
        )
        | json_values,
    },
)
line_bytes = st.one_of(
    st.binary(max_size=40),
    json_values.map(lambda v: json.dumps(v).encode()),
    near_entries.map(lambda v: json.dumps(v).encode()),
    st.sampled_from([_line("/x/a.png"), _line("/x/b.png", error="e"), b"\r", b"\xff"]),
)


def _check_reader(parts: list[bytes], joiner: bytes, tail: bool) -> None:
    data = joiner.join(parts) + (b"\n" if tail else b"")
    expected = data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)
    rows = list(scan_cache_lines(io.BytesIO(data)))
    assert len(rows) == expected
    assert sum(n for _, n, _ in rows) == len(data)
    for _, _, r in rows:
        assert isinstance(r, dict) or r.reason in CACHE_LINE_REASONS
    again = list(scan_cache_lines(io.BytesIO(data)))
    assert [(o, n, r if isinstance(r, dict) else r.reason) for o, n, r in rows] == [
        (o, n, r if isinstance(r, dict) else r.reason) for o, n, r in again
    ]
    with tempfile.TemporaryDirectory() as folder:
        with open(os.path.join(folder, "stub.jsonl"), "wb") as f:
            f.write(data)
        results = []
        for _ in range(2):
            cache = DetectionCache(folder, Stub())
            cache.load()
            assert cache.indexed + cache.stale + cache.bad_lines == cache.lines == expected
            assert len(cache.index) <= cache.indexed and cache.duplicates == cache.indexed - len(cache.index)
            for image in cache.index:  # every indexed line reads back (a dict with detections or an error)
                entry = cache.read(image)
                assert ("detections" in entry) != ("error" in entry)
            results.append((cache.stats(), dict(cache.index)))
        assert results[0] == results[1]


@settings(max_examples=25, deadline=None)
@given(st.lists(line_bytes, max_size=8), st.sampled_from([b"\n", b"\r\n", b"\r"]), st.booleans())
def test_cache_reader_never_raises_and_counts_every_line(parts, joiner, tail):
    _check_reader(parts, joiner, tail)


@pytest.mark.slow
@settings(max_examples=1000, deadline=None)
@given(st.lists(line_bytes, max_size=20), st.sampled_from([b"\n", b"\r\n", b"\r"]), st.booleans())
def test_cache_reader_never_raises_and_counts_every_line_deep(parts, joiner, tail):
    _check_reader(parts, joiner, tail)


def test_an_entry_that_cannot_be_written_stays_an_error_in_memory(stub, tmp_path):
    """An image path that is not valid Unicode (an undecodable byte of a folder name) cannot be a cache line: the
    image counts as failed for this run and nothing is appended."""
    from groundwork.outputs import LineAppender

    cache = DetectionCache(str(tmp_path), Stub())
    path = str(tmp_path / "stub.jsonl")
    with LineAppender(path) as appender:
        cache.append(appender, detect_one(Stub(), "/x/\udcff.png"))
        cache.append(appender, detect_one(Stub(), "/x/e.png"))
    assert cache.index["/x/\udcff.png"].path == "" and cache.index["/x/\udcff.png"].error.startswith("bad detector")
    assert cache.read("/x/\udcff.png")["error"] == cache.index["/x/\udcff.png"].error
    assert cache.read("/x/e.png")["detections"] == [
        {"bbox": [1, 1, 9, 9], "type": "element", "score": None, "source": "stub"}
    ]
    with open(path, "rb") as f:
        assert [r["image"] for _, _, r in scan_cache_lines(f)] == ["/x/e.png"]
