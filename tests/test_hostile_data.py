"""Hostile and odd input through the one validation path (groundwork.validate): convert, the training loader and the
core readers give a reason-coded reject per bad record, never a crash, never a lost neighbour; JSON out is strict."""

from __future__ import annotations

import io
import json
import os
import zlib
from types import SimpleNamespace

import pytest
from PIL import Image

from groundwork import validate
from groundwork.records import iter_records
from gui_grounding.data.convert import convert
from gui_grounding.data.schema import REASONS, load_samples
from tests.helpers.images import raw_png


def rotated_jpeg(path: str, raw_w: int = 200, raw_h: int = 100, orientation: int = 6) -> None:
    """A JPEG stored ``raw_w x raw_h`` with EXIF orientation ``orientation`` (6: displayed rotated 90 degrees
    clockwise, so ``raw_h x raw_w``); left half red, right half blue in the stored frame."""
    im = Image.new("RGB", (raw_w, raw_h), (255, 0, 0))
    im.paste((0, 0, 255), (raw_w // 2, 0, raw_w, raw_h))
    exif = Image.Exif()
    exif[0x0112] = orientation
    im.save(path, format="JPEG", exif=exif.tobytes(), quality=95)


def strict_loads(text: str):
    def bad(name):
        raise AssertionError(f"non-JSON token {name} written")

    return json.loads(text, parse_constant=bad)


def read_strict_jsonl(path) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return [strict_loads(line) for line in f if line.strip()]


@pytest.fixture
def root(tmp_path, make_image):
    """An image root with good screenshots, hostile images and a dataset folder linked in from outside."""
    folder = tmp_path / "root"
    make_image(1000, 500, "shots/a.png", folder=folder)
    make_image(400, 800, "shots/b.png", folder=folder)
    (folder / "shots" / "bomb.png").write_bytes(raw_png(20_000, 20_000, zlib.compress(b"\0" * 20_000)))
    (folder / "shots" / "bad_idat.png").write_bytes(raw_png(8, 8, b"not a zlib stream"))
    good = (folder / "shots" / "a.png").read_bytes()
    (folder / "shots" / "truncated.png").write_bytes(good[: len(good) // 2])
    buf = io.BytesIO()
    Image.new("RGB", (640, 480), (10, 200, 30)).save(buf, format="JPEG")
    (folder / "shots" / "truncated.jpg").write_bytes(buf.getvalue()[: len(buf.getvalue()) // 2])
    (folder / "shots" / "empty.png").write_bytes(b"")
    os.mkfifo(folder / "shots" / "fifo.png")
    outside = tmp_path / "elsewhere"
    make_image(300, 300, "linked.png", folder=outside)
    os.symlink(outside, folder / "linked_dataset")  # clusters link datasets into folders: followed
    make_image(50, 50, "secret.png", folder=tmp_path)  # outside the root
    return str(folder)


def gta1(image: str, bbox, instruction: str = "<image>click it") -> dict:
    return {
        "image": image,
        "bbox": bbox,
        "conversations": [{"from": "human", "value": instruction}, {"from": "gpt", "value": ""}],
    }


# --------------------------------------------------------------------------------------------------------------------
# convert: every hostile element is one reject, the valid ones around it are kept


def test_convert_hostile_gta1_json_list(root, tmp_path):
    abs_image = os.path.join(root, "shots", "b.png")
    hostile = [  # (JSON text of the element, expected reason)
        ('{"image": "shots/a.png", "bbox": [NaN, 1, 2, 3], "conversations": []}', "unparseable_record"),
        ('{"image": "shots/a.png", "bbox": [1, 2, 3, ' + "9" * 5000 + "]}", "unparseable_record"),
        (json.dumps(gta1("shots/a.png", [1, 2, 3, int("9" * 400)])), "bad_box"),
        (json.dumps(gta1("shots/a.png", [1, 2, True, 4])), "bad_box"),
        (json.dumps(gta1("shots/a.png", [1, 2, 3, 1e8])), "bad_box"),
        (json.dumps(gta1("shots/a.png", [1, 2, 300, 400], "<image>lone \ud800 surrogate")), "bad_text"),
        (json.dumps(gta1("../secret.png", [1, 2, 300, 400])), "path_outside_root"),
        (json.dumps(gta1("shots/../../secret.png", [1, 2, 300, 400])), "path_outside_root"),
        (json.dumps(gta1("/etc/passwd", [1, 2, 300, 400])), "unreadable_image"),
        (json.dumps(gta1("/proc/self/environ", [1, 2, 300, 400])), "not_a_file"),
        (json.dumps(gta1("shots/fifo.png", [1, 2, 300, 400])), "not_a_file"),
        (json.dumps(gta1("shots/empty.png", [1, 2, 300, 400])), "not_a_file"),
        (json.dumps(gta1("shots", [1, 2, 300, 400])), "not_a_file"),
        (json.dumps(gta1("shots/bomb.png", [1, 2, 300, 400])), "image_too_large"),
        (json.dumps(gta1("shots/bad_idat.png", [1, 2, 300, 400])), "unreadable_image"),
        (json.dumps(gta1("shots/truncated.png", [1, 2, 300, 400])), "unreadable_image"),
        (json.dumps(gta1("shots/truncated.jpg", [1, 2, 300, 400])), "unreadable_image"),
        ("[" * 50_000 + "]" * 50_000, "unparseable_record"),
    ]
    outside = os.path.join(os.path.dirname(root), "secret.png")
    kept_extra = [
        gta1("linked_dataset/linked.png", [100, 100, 900, 900]),
        gta1(abs_image, [100, 100, 900, 900]),
        gta1(outside, [100, 100, 900, 900]),
    ]
    elements = []
    for i, (text, _) in enumerate(hostile):
        elements += [json.dumps(gta1("shots/a.png", [100, 100, 200 + i, 200])), text]
    elements += [json.dumps(r) for r in kept_extra]
    data = tmp_path / "hostile.json"
    data.write_bytes(b"\xef\xbb\xbf[" + ",\n".join(elements).encode("utf-8") + b"]")  # with a BOM
    out = tmp_path / "out" / "h.jsonl"
    report = convert("gta1", [str(data)], root, str(out), progress=False)
    samples = read_strict_jsonl(out)
    rejects = read_strict_jsonl(str(out).replace(".jsonl", ".rejects.jsonl"))
    with open(str(out).replace(".jsonl", ".summary.json")) as f:
        summary = strict_loads(f.read())
    assert report.records == len(elements) == summary["samples"] + summary["rejected"]
    assert len(samples) == len(hostile) + len(kept_extra)  # every valid neighbour is kept
    expected = {f"{data}:[{2 * i + 1}]": reason for i, (_, reason) in enumerate(hostile)}
    assert {r["ref"]: r["reason"] for r in rejects} == expected
    assert all(r["reason"] in REASONS for r in rejects)
    assert summary["absolute_image_paths"] == 2
    assert samples[-3]["image_path"] == "linked_dataset/linked.png"  # a symlink inside the root is followed
    assert samples[-2]["image_path"] == os.path.relpath(abs_image, root)
    assert samples[-1]["image_path"] == outside  # absolute, outside the root: written absolute (never '../..')
    reloaded, rep = load_samples([str(out)], [root])
    assert len(reloaded) == len(samples) and rep.rejects == []


def test_convert_jsonl_and_strict_output_with_nan_in_parquet(root, tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    shot = open(os.path.join(root, "shots", "a.png"), "rb").read()
    rows = [
        {"image": {"bytes": shot, "path": None}, "instruction": "ok", "gt_bbox": [10.0, 20.0, 110.0, 120.0]},
        {"image": {"bytes": shot, "path": None}, "instruction": "nan", "gt_bbox": [float("nan"), 20.0, 110.0, 120.0]},
        {"image": {"bytes": shot, "path": None}, "instruction": "inf", "gt_bbox": [10.0, 20.0, float("inf"), 120.0]},
        {"image": {"bytes": shot, "path": None}, "instruction": "ok 2", "gt_bbox": [10.0, 20.0, 210.0, 120.0]},
    ]
    path = tmp_path / "gui_r1.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path)
    out = tmp_path / "g.jsonl"
    report = convert("gui-r1", [str(path)], root, str(out), progress=False)
    assert (report.samples, dict(report.reasons)) == (2, {"bad_box": 2})
    read_strict_jsonl(out)
    rejects = read_strict_jsonl(tmp_path / "g.rejects.jsonl")  # NaN / inf stored as their names, strict JSON
    assert [r["record"]["gt_bbox"][0] for r in rejects] == ["nan", 10.0]


# --------------------------------------------------------------------------------------------------------------------
# units: GUI-R1 fractions vs pixels, suspect_unit, content-hashed embedded images


def _png(width: int, height: int, color) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (width, height), color).save(buf, format="PNG")
    return buf.getvalue()


def test_gui_r1_fraction_boxes_pixel_boxes_and_embedded_names(tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    red, blue = _png(400, 800, (255, 0, 0)), _png(1000, 500, (0, 0, 255))
    rows = [  # train parquet: fractions; eval parquet: pixels; two rows share image.path with different bytes
        {"image": {"bytes": red, "path": "shot.png"}, "instruction": "a", "gt_bbox": [0.1, 0.25, 0.5, 0.5]},
        {"image": {"bytes": blue, "path": "shot.png"}, "instruction": "b", "gt_bbox": [100.0, 50.0, 300.0, 150.0]},
        {"image": {"bytes": blue, "path": "shot.png"}, "instruction": "c", "gt_bbox": [0.0, 0.0, 1.0, 1.0]},
    ]
    path = tmp_path / "gui_r1.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path)
    root = tmp_path / "root"
    report = convert("gui-r1", [str(path)], str(root), str(tmp_path / "o.jsonl"), progress=False)
    samples = read_strict_jsonl(tmp_path / "o.jsonl")
    assert report.samples == 3
    assert [s["target_bbox"] for s in samples] == [
        {"x_min": 40.0, "y_min": 200.0, "x_max": 200.0, "y_max": 400.0},  # fractions of 400 x 800
        {"x_min": 100.0, "y_min": 50.0, "x_max": 300.0, "y_max": 150.0},  # pixels
        {"x_min": 0.0, "y_min": 0.0, "x_max": 1000.0, "y_max": 500.0},  # the whole image, as fractions
    ]
    # different bytes under one image.path: two files, each named by its content
    assert samples[0]["image_path"] != samples[1]["image_path"] == samples[2]["image_path"]
    for s, data in zip(samples[:2], (red, blue), strict=True):
        assert open(root / s["image_path"], "rb").read() == data
    # --box-unit pixel forces pixels: a pixel box with all four values in [0, 1] is suspect_unit, never a sub-pixel box
    report = convert("gui-r1", [str(path)], str(root), str(tmp_path / "p.jsonl"), box_unit="pixel", progress=False)
    assert (report.samples, dict(report.reasons)) == (1, {"suspect_unit": 2})


def test_suspect_unit_in_pixel_formats(tmp_path, make_image):
    make_image(1000, 500, "shots/a.png", folder=tmp_path)
    recs = [
        {"img_filename": "shots/a.png", "bbox": [0.1, 0.2, 0.3, 0.4], "instruction": "x", "img_size": [1000, 500]},
        {"img_filename": "shots/a.png", "bbox": [10, 20, 30, 40], "instruction": "y", "img_size": [1000, 500]},
    ]
    data = tmp_path / "pro.json"
    data.write_text(json.dumps(recs))
    report = convert("screenspot-pro", [str(data)], str(tmp_path), str(tmp_path / "o.jsonl"), progress=False)
    assert (report.samples, dict(report.reasons)) == (1, {"suspect_unit": 1})
    canonical = tmp_path / "c.jsonl"
    canonical.write_text(
        json.dumps(
            {
                "instruction": "x",
                "image_path": "shots/a.png",
                "target_bbox": {"x_min": 0, "y_min": 0, "x_max": 1, "y_max": 0.5},
            }
        )
        + "\n"
    )
    _, rep = load_samples([str(canonical)])
    assert rep.counts == {"suspect_unit": 1}


# --------------------------------------------------------------------------------------------------------------------
# images: once per unique image, verify modes, pixel limit


def test_image_checker_caches_per_path_size_mtime(tmp_path, make_image, monkeypatch):
    paths = [make_image(64, 32, f"i{k}.png") for k in range(3)]
    opened = []
    real_open = Image.open
    monkeypatch.setattr(Image, "open", lambda fp, *a, **k: opened.append(fp) or real_open(fp, *a, **k))
    checker = validate.ImageChecker("decode")
    for k in range(300):
        assert checker.check(paths[k % 3]) == (64, 32)
    assert len(opened) == 3
    Image.new("RGB", (10, 20)).save(paths[0])  # changed in place: checked again
    os.utime(paths[0], ns=(1, 1))
    assert checker.check(paths[0]) == (10, 20) and len(opened) == 4


def test_verify_modes_and_pixel_limit(root):
    shots = os.path.join(root, "shots")
    header, decode = validate.ImageChecker("header"), validate.ImageChecker("decode")
    for name in ("truncated.png", "truncated.jpg", "bad_idat.png"):
        header.check(os.path.join(shots, name))  # the header is intact
        with pytest.raises(validate.Invalid) as err:
            decode.check(os.path.join(shots, name))
        assert err.value.reason == "unreadable_image"
    for checker in (header, decode):
        with pytest.raises(validate.Invalid, match="image_too_large"):
            checker.check(os.path.join(shots, "bomb.png"))
    assert validate.ImageChecker("header", max_image_pixels=None).check(os.path.join(shots, "bomb.png")) == (
        20_000,
        20_000,
    )
    with pytest.raises(validate.Invalid, match="image_too_large"):
        validate.ImageChecker("decode", max_image_pixels=1000).check(os.path.join(shots, "a.png"))
    report = convert("gta1", [], root, os.path.join(root, "..", "empty.jsonl"), progress=False)
    assert report.to_dict()["verify_images"] == "decode"


def test_convert_verify_header_keeps_truncated_decode_rejects(root, tmp_path):
    data = tmp_path / "t.jsonl"
    data.write_text(json.dumps(gta1("shots/truncated.png", [1, 2, 300, 400])) + "\n")
    assert (
        convert("gta1", [str(data)], root, str(tmp_path / "h.jsonl"), verify_images="header", progress=False).samples
        == 1
    )
    assert dict(convert("gta1", [str(data)], root, str(tmp_path / "d.jsonl"), progress=False).reasons) == {
        "unreadable_image": 1
    }


# --------------------------------------------------------------------------------------------------------------------
# EXIF: the displayed frame everywhere (sizes, boxes, pixels fed to the model)


def test_exif_orientation_6_through_convert_and_a_training_row(tmp_path, tiny_qwen25_dir):
    from gui_grounding.training.task import GUIGroundingTask
    from vlm_r1.modules import get_vlm_module, load_processor

    root = tmp_path / "root"
    root.mkdir()
    rotated_jpeg(str(root / "phone.jpg"))  # stored 200 x 100, displayed 100 x 200
    # a box drawn on the displayed (portrait) image: outside the stored landscape frame along y
    rec = {
        "instruction": "the bottom button",
        "image_path": "phone.jpg",
        "target_bbox": {"x_min": 10, "y_min": 150, "x_max": 90, "y_max": 190},
    }
    data = tmp_path / "in.jsonl"
    data.write_text(json.dumps(rec) + "\n")
    out = tmp_path / "out.jsonl"
    report = convert("canonical", [str(data)], str(root), str(out), progress=False)
    assert report.samples == 1
    (sample,) = read_strict_jsonl(out)
    assert (sample["image_width"], sample["image_height"]) == (100, 200)
    samples, _ = load_samples([str(out)], [str(root)])
    assert (samples[0].width, samples[0].height) == (100, 200)
    assert samples[0].boxes == [(10.0, 150.0, 90.0, 190.0)]
    # the training row: sizes and pixels in the displayed frame
    script_args = SimpleNamespace(
        data_file_list=[str(out)],
        image_folder_list=[str(root)],
        reward_method_list=None,
        strict_data=False,
        task_type=None,
        prompt_mode="non_thinking",
    )
    ds = GUIGroundingTask().build_dataset(script_args, load_processor(tiny_qwen25_dir), get_vlm_module(tiny_qwen25_dir))
    row = ds[0]
    assert row["image_size"] == [100, 200]
    width, height = row["image"].size
    assert height > width  # portrait, as displayed
    # orientation 6: the stored left (red) half is displayed on top
    top, bottom = row["image"].getpixel((width // 2, 2)), row["image"].getpixel((width // 2, height - 3))
    assert top[0] > 200 and top[2] < 60 and bottom[2] > 200 and bottom[0] < 60


def test_default_task_images_validated_before_training(root, tiny_qwen25_dir, caplog):
    import logging

    from vlm_r1.modules import get_vlm_module, load_processor
    from vlm_r1.upstream.tasks import DefaultTask

    conv = [{"from": "human", "value": "<image>q"}, {"from": "gpt", "value": "a"}]
    names = [
        "shots/a.png",
        "shots/truncated.jpg",
        "shots/bad_idat.png",
        "shots/bomb.png",
        "../secret.png",
        "shots/fifo.png",
        "/proc/self/environ",
        "shots/b.png",
    ]
    data = os.path.join(root, "d.jsonl")
    with open(data, "w") as f:
        for name in names:
            f.write(json.dumps({"image": name, "conversations": conv}) + "\n")
    args = SimpleNamespace(
        data_file_list=[data], image_folder_list=[root], reward_method_list=None, strict_data=False, task_type=None
    )
    with caplog.at_level(logging.WARNING, logger="vlm_r1.tasks"):
        ds = DefaultTask().build_dataset(args, load_processor(tiny_qwen25_dir), get_vlm_module(tiny_qwen25_dir))
    assert len(ds) == 2
    assert (
        "default: skipped records: {'unreadable_image': 2, 'image_too_large': 1, 'path_outside_root': 1, "
        "'not_a_file': 2} (kept 2)"
    ) in caplog.text


# --------------------------------------------------------------------------------------------------------------------
# the validate module itself


def test_validate_numbers_text_paths():
    assert validate.box4([1, 2.5, 3, 4]) == (1.0, 2.5, 3.0, 4.0)
    for bad in (
        [1, 2, 3, float("nan")],
        [1, 2, 3, float("inf")],
        [1, 2, 3, True],
        [1, 2, 3, 10**400],
        [1, 2, 3, -1.5e7],
        [1, 2, 3, "4"],
        [1, 2, 3],
        None,
    ):
        with pytest.raises(validate.Invalid) as err:
            validate.box4(bad)
        assert err.value.reason == "bad_box"
    assert validate.is_coord(10_000_000) and not validate.is_coord(10_000_001)
    for bad in ("a\ud800b", "x\udcff"):
        with pytest.raises(validate.Invalid, match="bad_text"):
            validate.text(bad)
    with pytest.raises(validate.Invalid, match="bad_text"):
        validate.check_texts({"a": [{"b": ["ok", "\udfff"]}]})
    assert validate.resolve_path("/r", "a/../b.png") == "/r/b.png"
    assert validate.resolve_path("/r", "/abs/x.png") == "/abs/x.png"
    for bad in ("../x.png", "a/../../x.png", ".."):
        with pytest.raises(validate.Invalid, match="path_outside_root"):
            validate.resolve_path("/r", bad)
    with pytest.raises(ValueError, match="not JSON compliant"):
        validate.dumps({"x": float("nan")})


def test_iter_records_strict_numbers_and_json_list_neighbours(tmp_path):
    path = tmp_path / "l.json"
    path.write_text('[{"a": 1}, {"a": NaN}, {"a": ' + "9" * 5000 + '}, {"a": 1e999}, {"a": 2}]')
    out = [
        item if isinstance(item, dict) else item.reason if hasattr(item, "reason") else "error"
        for _, _, item in iter_records(str(path))
    ]
    assert out == [{"a": 1}, "unparseable_record", "unparseable_record", "unparseable_record", {"a": 2}]


def test_streamed_json_list_lone_surrogate_is_bad_text_not_altered(root, tmp_path):
    """A lone high-surrogate escape is kept as read (ijson's C backend, once used here, turned it into "?")."""
    recs = [
        gta1("shots/a.png", [100, 100, 300, 300], "<image>smile \U0001f600"),  # a valid pair: kept as is
        gta1("shots/a.png", [100, 100, 400, 300], "<image>lone \ud800 here"),
        gta1("shots/a.png", [100, 100, 500, 300], "<image>ok"),
    ]
    data = tmp_path / "s.json"
    data.write_text(json.dumps(recs))  # ensure_ascii: \ud83d\ude00 and \ud800 escapes
    report = convert("gta1", [str(data)], root, str(tmp_path / "s.jsonl"), progress=False)
    samples = read_strict_jsonl(tmp_path / "s.jsonl")
    assert [s["instruction"] for s in samples] == ["smile \U0001f600", "ok"]
    assert dict(report.reasons) == {"bad_text": 1}


def test_clean_never_decodes_an_image_over_the_pixel_limit(root, tmp_path, monkeypatch):
    """clean stays within bounded memory: an image declaring more than 64 Mpx is an invalid record before any
    detector opens it (``load_samples`` reads headers with the pixel limit)."""
    from gui_grounding.data import detectors
    from gui_grounding.data.clean import clean

    seen = []

    class Spy(detectors.Detector):
        name = "spy"

        def detect(self, image_path):
            seen.append(os.path.basename(image_path))
            return [{"bbox": [1.0, 1.0, 300.0, 400.0], "type": "element", "score": None, "source": "spy"}]

    monkeypatch.setitem(detectors.DETECTORS, "spy", Spy)
    data = tmp_path / "c.jsonl"
    with open(data, "w") as f:
        for name in ("shots/a.png", "shots/bomb.png"):
            f.write(
                json.dumps(
                    {
                        "instruction": "x",
                        "image_path": name,
                        "target_bbox": {"x_min": 1, "y_min": 1, "x_max": 300, "y_max": 400},
                    }
                )
                + "\n"
            )
    report = clean(
        [str(data)], str(tmp_path / "out" / "c.jsonl"), "spy", image_folders=[root], progress=False, plot=False
    )
    assert seen == ["a.png"]
    assert report["invalid_records"] == {"image_too_large": 1}
    assert len(read_strict_jsonl(tmp_path / "out" / "c.jsonl")) == 1  # the kept record, strict JSON
