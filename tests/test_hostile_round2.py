"""Hostile input, round two: the classes, not the cases.

1. one image-frame function (orientation sources x formats: validator, header fast path, pixel loader agree);
2. one identity rule (null / non-scalar ids, explicit id equal to a generated one, 1 vs "1");
3. whole-file reading (concatenated JSON, list + JSONL, CR-only / CRLF / raw CR, compressed input named);
4. model image limits before step 1 (convert --family, the training loader, the default task's checker, prompt);
5. safe outputs of convert (out == input, a folder, a second writer, disk full: one line, no stale summary);
6. parquet value types and embedded images that cannot be written; 7. field shadowing; 10. CLI numbers;
11. property-based fuzzing of the record reader, the training loader and convert (small budget here, a deeper run
    under the slow marker).
"""

from __future__ import annotations

import datetime as dt
import decimal
import io
import json
import os
import struct
import subprocess
import sys
import zlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PIL import Image, ImageOps

from groundwork import outputs, validate
from groundwork.records import DataFileError, iter_records
from gui_grounding.data.convert import convert
from gui_grounding.data.schema import load_samples
from tests.helpers.paths import REPO

XMP = (
    '<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#">'
    '<rdf:Description xmlns:tiff="http://ns.adobe.com/tiff/1.0/" tiff:Orientation="{o}"/></rdf:RDF></x:xmpmeta>'
)


def strict_loads(text: str):
    def bad(name):
        raise AssertionError(f"non-JSON token {name} written")

    return json.loads(text, parse_constant=bad)


# --------------------------------------------------------------------------------------------------------------------
# images with their orientation stored in every way Pillow reads it


def exif_bytes(orientation: int, tiff_type: int = 3) -> bytes:
    """A little-endian EXIF block whose one entry is Orientation, stored as TIFF type ``tiff_type`` (3 SHORT,
    4 LONG, 5 RATIONAL, 12 DOUBLE)."""
    extra = b""
    if tiff_type == 3:
        value = struct.pack("<HH", orientation, 0)
    elif tiff_type == 4:
        value = struct.pack("<I", orientation)
    else:
        value = struct.pack("<I", 26)
        extra = struct.pack("<II", orientation, 1) if tiff_type == 5 else struct.pack("<d", float(orientation))
    ifd = struct.pack("<H", 1) + struct.pack("<HHI", 0x0112, tiff_type, 1) + value + struct.pack("<I", 0)
    return b"Exif\x00\x00II*\x00" + struct.pack("<I", 8) + ifd + extra


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def _png_append(path: str, kind: bytes, data: bytes) -> None:
    raw = open(path, "rb").read()
    cut = raw.rindex(b"IEND") - 4
    with open(path, "wb") as f:
        f.write(raw[:cut] + _chunk(kind, data) + raw[cut:])


SOURCES = (
    "exif_short",
    "exif_long",
    "exif_rational",
    "exif_double",
    "xmp",
    "exif_after_pixels",
    "xmp_after_pixels",
    "raw_profile_after_pixels",
    "tiff_tag",
)
FORMATS = {"png": "PNG", "jpeg": "JPEG", "webp": "WEBP", "tiff": "TIFF"}


def oriented_image(path: str, fmt: str, source: str, orientation: int, size=(40, 20)) -> bool:
    """Write a ``size`` image with ``orientation`` stored as ``source``; False when ``fmt`` cannot carry it."""
    im = Image.new("RGB", size, (200, 30, 30))
    im.paste((30, 30, 200), (size[0] // 2, 0, size[0], size[1]))
    pil = FORMATS[fmt]
    types = {"exif_short": 3, "exif_long": 4, "exif_rational": 5, "exif_double": 12}
    if source in types:
        if fmt == "tiff":
            return False
        im.save(path, pil, exif=exif_bytes(orientation, types[source]))
    elif source == "xmp":
        xmp = XMP.format(o=orientation)
        if fmt == "png":
            from PIL.PngImagePlugin import PngInfo

            info = PngInfo()
            info.add_itxt("XML:com.adobe.xmp", xmp)
            im.save(path, pil, pnginfo=info)
        elif fmt in ("jpeg", "webp"):
            im.save(path, pil, xmp=xmp.encode())
        else:
            return False
    elif source.endswith("after_pixels"):
        if fmt != "png":
            return False
        im.save(path, pil)
        if source == "exif_after_pixels":
            _png_append(path, b"eXIf", exif_bytes(orientation)[6:])
        elif source == "xmp_after_pixels":
            _png_append(path, b"iTXt", b"XML:com.adobe.xmp\x00\x00\x00\x00\x00" + XMP.format(o=orientation).encode())
        else:
            e = exif_bytes(orientation)
            _png_append(path, b"tEXt", b"Raw profile type exif\x00" + f"\nexif\n{len(e):8}\n{e.hex()}\n".encode())
    elif source == "tiff_tag":
        if fmt != "tiff":
            return False
        im.save(path, pil, tiffinfo={274: orientation})
    return True


def truth(path: str) -> tuple[int, int]:
    with Image.open(path) as im:
        return ImageOps.exif_transpose(im).size


# every way each format can carry an orientation (oriented_image writes them)
CARRIERS = [(f, src) for f in ("png", "jpeg", "webp") for src in SOURCES[:5]]
CARRIERS += [("png", src) for src in SOURCES[5:8]] + [("tiff", "tiff_tag")]


@pytest.mark.parametrize("fmt, source", CARRIERS)
@pytest.mark.parametrize("orientation", [1, 3, 6, 8])
def test_image_frame_matrix(tmp_path, fmt, source, orientation):
    path = str(tmp_path / f"im.{fmt}")
    assert oriented_image(path, fmt, source, orientation)
    expected = (20, 40) if orientation in (6, 8) else (40, 20)
    assert truth(path) == expected  # Pillow's exif_transpose honours this source
    assert validate.ImageChecker("header").check(path) == expected
    assert validate.ImageChecker("decode").check(path) == expected
    assert validate.open_image(path).size == expected
    with Image.open(path) as im:
        assert validate.image_frame(im, path, decode=False)[:2] == expected


def test_image_frame_reaches_convert_loader_and_boxes(tmp_path):
    """A PNG whose orientation 6 sits after the pixel data: every reader sees 20x40, so a box that fits 20x40 is kept
    and one that only fits the stored 40x20 frame is rejected (header and decode alike)."""
    root = tmp_path / "root"
    root.mkdir()
    oriented_image(str(root / "a.png"), "png", "exif_after_pixels", 6)
    recs = [
        {
            "instruction": "tall",
            "image_path": "a.png",
            "target_bbox": {"x_min": 2, "y_min": 20, "x_max": 18, "y_max": 38},
        },
        {
            "instruction": "wide",
            "image_path": "a.png",
            "target_bbox": {"x_min": 25, "y_min": 2, "x_max": 38, "y_max": 18},
        },
    ]
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in recs))
    for verify in ("header", "decode"):
        samples, report = load_samples([str(data)], [str(root)], verify_images=verify)
        assert [(s.instruction, s.width, s.height) for s in samples] == [("tall", 20, 40)]
        assert report.counts == {"box_outside_image": 1}
        rep = convert(
            "canonical",
            [str(data)],
            str(root),
            str(tmp_path / f"out_{verify}.jsonl"),
            verify_images=verify,
            progress=False,
        )
        assert (rep.samples, dict(rep.reasons)) == (1, {"box_outside_image": 1})


# --------------------------------------------------------------------------------------------------------------------
# identity


def _canonical(i, **extra):
    rec = {
        "instruction": f"click {i}",
        "image_path": "a.png",
        "target_bbox": {"x_min": 1 + i, "y_min": 1, "x_max": 5 + i, "y_max": 5},
    }
    rec.update(extra)
    return rec


@pytest.fixture
def img_root(tmp_path, make_image):
    root = tmp_path / "root"
    make_image(64, 48, "a.png", folder=root)
    return root


def test_identity_rule_in_the_training_loader_and_convert(tmp_path, img_root):
    data = tmp_path / "train.jsonl"
    recs = [
        _canonical(0, sample_id=None),
        _canonical(1, sample_id=None),
        _canonical(2, sample_id="train:3"),
        _canonical(3),
        _canonical(4, id=7),
        _canonical(5, sample_id="7"),
        _canonical(6, sample_id=[1]),
        _canonical(7, sample_id=True),
        _canonical(8, sample_id=""),
    ]
    data.write_text("".join(json.dumps(r) + "\n" for r in recs))
    samples, report = load_samples([str(data)], [str(img_root)])
    assert [s.sample_id for s in samples] == ["train:0", "train:1", "train:3", "7", "train:6", "train:7", "train:8"]
    assert [(ref.rsplit(":", 1)[1], reason) for ref, reason, _ in report.rejects] == [
        ("4", "duplicate_id"),  # no id: generated "train:3", already the explicit id of line 3
        ("6", "duplicate_id"),  # "7" is the id 7 of line 5
    ]
    rep = convert("canonical", [str(data)], str(img_root), str(tmp_path / "c.jsonl"), progress=False)
    assert (rep.samples, dict(rep.reasons)) == (7, {"duplicate_id": 2})
    ids = [json.loads(line)["sample_id"] for line in open(tmp_path / "c.jsonl")]
    assert len(ids) == len(set(ids)) == 7


def test_explicit_id_rule():
    assert [validate.explicit_id(v) for v in (None, True, "", "a", 3, 3.5, float("nan"), [1], {"a": 1})] == [
        None,
        None,
        None,
        "a",
        "3",
        "3.5",
        None,
        None,
        None,
    ]
    reg = validate.IdRegistry()
    assert reg.assign(None, "f:0") == "f:0"
    with pytest.raises(validate.Invalid, match="duplicate_id"):
        reg.assign("f:0", "f:1")


# --------------------------------------------------------------------------------------------------------------------
# whole-file reading


def _read(path):
    return [(os.path.basename(ref), item if isinstance(item, dict) else "ERR") for ref, _, item in iter_records(path)]


@pytest.mark.parametrize("nl", ["\n", "\r\n", "\r"])
def test_every_document_any_line_ending(tmp_path, nl):
    raw_cr = "\r" if nl != "\r" else "\t"  # in a CR-only file every CR ends a line
    lines = [
        '[{"a": 1},',
        ' {"a": 2}]',
        '{"a": 3}',
        "",
        '{"a":' + raw_cr + " 4}",
        '[{"a": 5}][{"a": 6}]',
        "junk",
        '{"a": 7}',
    ]
    path = tmp_path / "mixed.json"
    path.write_bytes(nl.join(lines).encode() + nl.encode())
    got = _read(str(path))
    assert [item for _, item in got] == [{"a": 1}, {"a": 2}, {"a": 3}, {"a": 4}, {"a": 5}, {"a": 6}, "ERR", {"a": 7}]
    assert [ref for ref, _ in got] == [
        "mixed.json:[0]",
        "mixed.json:[1]",
        "mixed.json:3",
        "mixed.json:5",
        "mixed.json:6[0]",
        "mixed.json:6:11[0]",
        "mixed.json:7",
        "mixed.json:8",
    ]


def test_raw_cr_never_splits_a_record_or_shifts_line_refs(tmp_path):
    path = tmp_path / "cr.jsonl"
    path.write_bytes(b'{"a": "x\ry"}\n{"b":\r2}\n{"c": 3}\n')
    assert _read(str(path)) == [("cr.jsonl:1", "ERR"), ("cr.jsonl:2", {"b": 2}), ("cr.jsonl:3", {"c": 3})]


@pytest.mark.parametrize(
    "magic, word",
    [(b"\x1f\x8b\x08\x00", "gzip"), (b"PK\x03\x04", "zip"), (b"\xff\xfe{\x00", "UTF-16"), (b"PAR1", "parquet")],
)
def test_containers_are_named(tmp_path, magic, word):
    path = tmp_path / "x.jsonl"
    path.write_bytes(magic + b"rest")
    with pytest.raises(
        DataFileError
    ) as err:  # one error for the file, never a record (groundwork.records.check_data_file)
        list(iter_records(str(path)))
    assert word in err.value.message and err.value.ref == str(path)


def test_jsonl_in_a_json_file_and_a_list_then_jsonl_through_the_loader(tmp_path, img_root):
    data = tmp_path / "d.json"
    data.write_text(json.dumps([_canonical(0)]) + "\n" + json.dumps(_canonical(1)) + "\n" + json.dumps(_canonical(2)))
    samples, report = load_samples([str(data)], [str(img_root)])
    assert [s.instruction for s in samples] == ["click 0", "click 1", "click 2"] and not report.rejects


# --------------------------------------------------------------------------------------------------------------------
# model image limits


def test_family_limits_reject_before_step_1(tmp_path, make_image):
    root = tmp_path / "root"
    make_image(3000, 14, "thin.png", folder=root)  # 214:1
    make_image(2000, 10, "ok_ratio_small.png", folder=root)  # 200:1 but a 10-px side
    make_image(2800, 14, "edge.png", folder=root)  # exactly 200:1, 14 px: accepted
    make_image(13, 40, "narrow.png", folder=root)
    recs = [
        {"instruction": "x", "image_path": n, "target_bbox": {"x_min": 0, "y_min": 0, "x_max": 5, "y_max": 5}}
        for n in ("thin.png", "ok_ratio_small.png", "edge.png", "narrow.png")
    ]
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in recs))
    from vlm_r1.modules import get_vlm_module

    limits = get_vlm_module("qwen2_5_vl").image_limits()
    samples, report = load_samples([str(data)], [str(root)], limits=limits)
    assert [os.path.basename(s.image_path) for s in samples] == ["edge.png"]
    assert report.counts == {"image_unsupported": 3}
    assert validate.module_limits(get_vlm_module("internvl")).max_aspect_ratio is None
    from gui_grounding.cli import main

    main(
        [
            "convert",
            "--format",
            "canonical",
            str(data),
            "--image-root",
            str(root),
            "--out",
            str(tmp_path / "o.jsonl"),
            "--family",
            "qwen3_vl",
        ]
    )
    summary = json.load(open(tmp_path / "o.summary.json"))
    assert (summary["samples"], summary["reasons"]) == (0, {"image_unsupported": 4})  # qwen3_vl: a 16-px patch


def test_default_task_checker_applies_the_limits(make_image, tmp_path):
    from vlm_r1.modules import get_vlm_module

    checker = validate.ImageChecker("decode", limits=validate.module_limits(get_vlm_module("qwen2_vl")))
    with pytest.raises(validate.Invalid, match="image_unsupported"):
        checker.check(make_image(4020, 20, "t.png"))
    assert checker.check(make_image(40, 20, "u.png")) == (40, 20)


def test_prompt_image_size_limits_and_huge_sizes_without_a_canvas(capsys):
    from gui_grounding.cli import main
    from gui_grounding.ops.prompt import describe_prompt

    info = describe_prompt("gta1", (30000, 30000), "Click menu")
    assert info["image_size"] == [30000, 30000] and info["resized_size"][0] * info["resized_size"][1] <= 8_847_360
    with pytest.raises(ValueError, match="aspect ratio 250.0:1"):
        describe_prompt("gta1", (5000, 20), "Click menu")
    with pytest.raises(SystemExit) as exit_:
        main(["prompt", "--adapter", "gta1", "--image-size", "5000x20", "--instruction", "x"])
    message = str(exit_.value.code)
    assert message.startswith("gui-grounding prompt: error: ") and "\n" not in message and "250.0:1" in message


# --------------------------------------------------------------------------------------------------------------------
# safe outputs (convert)


def _convert_cli(*args):
    return subprocess.run(
        [sys.executable, "-m", "gui_grounding.cli", "convert", *args], capture_output=True, text=True, cwd=REPO
    )


def test_convert_refuses_out_equal_to_an_input_before_reading(tmp_path, img_root):
    data = tmp_path / "d.jsonl"
    data.write_text(json.dumps(_canonical(0)) + "\n")
    before = data.read_bytes()
    rep = _convert_cli("--format", "canonical", str(data), "--image-root", str(img_root), "--out", str(data))
    assert rep.returncode != 0 and "one of the inputs" in rep.stderr and "Traceback" not in rep.stderr
    assert data.read_bytes() == before
    rep = _convert_cli("--format", "canonical", str(data), "--image-root", str(img_root), "--out", str(tmp_path))
    assert rep.returncode != 0 and "is a folder" in rep.stderr and len(rep.stderr.strip().splitlines()) == 1


def test_convert_second_writer_fails_at_once(tmp_path, img_root):
    data = tmp_path / "d.jsonl"
    data.write_text(json.dumps(_canonical(0)) + "\n")
    out = tmp_path / "o.jsonl"
    with outputs.OutputLock(str(out)):
        with pytest.raises(outputs.OutputError, match="another run is writing"):
            convert("canonical", [str(data)], str(img_root), str(out), progress=False)
    assert not out.exists()
    assert convert("canonical", [str(data)], str(img_root), str(out), progress=False).samples == 1
    assert sorted(os.listdir(tmp_path)) == ["d.jsonl", "o.jsonl", "o.rejects.jsonl", "o.summary.json", "root"]


def test_convert_disk_full_leaves_no_summary_and_no_temp(tmp_path, img_root, monkeypatch):
    data = tmp_path / "d.jsonl"
    data.write_text(json.dumps(_canonical(0)) + "\n")
    out = tmp_path / "o.jsonl"
    assert convert("canonical", [str(data)], str(img_root), str(out), progress=False).samples == 1
    real_fsync = os.fsync

    def full(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(outputs.OutputError, match="No space left"):
        convert("canonical", [str(data)], str(img_root), str(out), progress=False)
    monkeypatch.setattr(os, "fsync", real_fsync)
    assert not (tmp_path / "o.summary.json").exists()  # the old summary went before anything was replaced
    assert not [n for n in os.listdir(tmp_path) if n.endswith(".tmp")]


# --------------------------------------------------------------------------------------------------------------------
# value types, embedded images, shadowing


def test_parquet_values_json_cannot_hold(tmp_path, img_root):
    import pyarrow as pa
    import pyarrow.parquet as pq

    box = {"x_min": 1.0, "y_min": 1.0, "x_max": 9.0, "y_max": 9.0}
    table = pa.table(
        {
            "instruction": ["a", "b"],
            "image_path": ["a.png", "a.png"],
            "target_bbox": [box, {**box, "x_max": 10.0}],
            "when": [dt.datetime(2024, 1, 2, 3, 4, 5), None],
            "day": [dt.date(2024, 1, 2), dt.date(2025, 2, 3)],
            "blob": [b"\x00\xff", b"ok"],
            "price": pa.array([decimal.Decimal("1.25"), None], pa.decimal128(5, 2)),
        }
    )
    path = tmp_path / "d.parquet"
    pq.write_table(table, path)
    rep = convert("canonical", [str(path)], str(img_root), str(tmp_path / "o.jsonl"), progress=False)
    lines = [strict_loads(line) for line in open(tmp_path / "o.jsonl")]
    assert (rep.samples, rep.targets, len(lines)) == (2, 2, 2)
    assert [(x["when"], x["day"], x["blob"], x["price"]) for x in lines] == [
        ("2024-01-02T03:04:05", "2024-01-02", "AP8=", 1.25),
        (None, "2025-02-03", "b2s=", None),
    ]


def test_embedded_image_that_cannot_be_written_is_a_per_record_reject(tmp_path, monkeypatch):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from gui_grounding.data import convert as conv_mod

    png = io.BytesIO()
    Image.new("RGB", (64, 48)).save(png, "PNG")
    pq.write_table(
        pa.table(
            {
                "image": [{"bytes": png.getvalue(), "path": None}],
                "instruction": ["a"],
                "gt_bbox": [[0.1, 0.1, 0.5, 0.5]],
            }
        ),
        tmp_path / "d.parquet",
    )

    def fail(path, data):
        raise OSError(30, "Read-only file system")

    monkeypatch.setattr(outputs, "write_bytes", fail)
    rep = conv_mod.convert(
        "gui-r1", [str(tmp_path / "d.parquet")], str(tmp_path / "root"), str(tmp_path / "o.jsonl"), progress=False
    )
    assert (rep.samples, dict(rep.reasons)) == (0, {"image_write_failed": 1})


def test_stray_source_keys_never_replace_converted_fields(tmp_path, img_root):
    rec = {
        "image": "a.png",
        "conversations": [{"from": "human", "value": "<image>the cat"}, {"from": "gpt", "value": "[2, 3, 20, 30]"}],
        "target_bbox": {"x_min": 0, "y_min": 0, "x_max": 1e6, "y_max": 1e6},
        "image_width": 5,
        "instruction": "evil",
    }
    data = tmp_path / "d.jsonl"
    data.write_text(json.dumps(rec) + "\n")
    rep = convert("vlm-r1", [str(data)], str(img_root), str(tmp_path / "o.jsonl"), progress=False)
    (line,) = [json.loads(x) for x in open(tmp_path / "o.jsonl")]
    assert line["target_bbox"] == {"x_min": 2.0, "y_min": 3.0, "x_max": 20.0, "y_max": 30.0}
    assert (line["image_width"], line["instruction"]) == (64, "the cat")
    assert rep.to_dict()["shadowed_source_keys"] == {"target_bbox": 1}


# --------------------------------------------------------------------------------------------------------------------
# CLI numbers


@pytest.mark.parametrize(
    "flag, value",
    [
        ("--clip-tolerance", "nan"),
        ("--clip-tolerance", "inf"),
        ("--clip-tolerance", "-1"),
        ("--max-image-pixels", "-5"),
        ("--workers", "0"),
        ("--workers", "1e3"),
        ("--max-pixels", "nan"),
    ],
)
def test_convert_numeric_flags_refused_by_argparse(tmp_path, flag, value):
    rep = _convert_cli(
        "--format", "canonical", "x.jsonl", "--image-root", ".", "--out", str(tmp_path / "o.jsonl"), flag, value
    )
    assert rep.returncode == 2 and "argument " in rep.stderr and flag in rep.stderr and "Traceback" not in rep.stderr
    assert not (tmp_path / "o.jsonl").exists()


# --------------------------------------------------------------------------------------------------------------------
# property-based fuzzing of the readers


json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(10**20), 10**20)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8)
)
json_values = st.recursive(
    json_scalars, lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=4), c, max_size=3), max_leaves=8
)
records = st.dictionaries(st.text(max_size=6), json_values, max_size=4)
garbage = st.sampled_from(["NaN", "{", "]", "nope", '{"a": 1e999}', "[1, 2", '"str"', "\x00", '{"a": "x\ry"}'])


def _framed(items, framing, nl):
    """A file's text: ``items`` are ("rec", dict) or ("bad", text)."""
    if framing == "jsonl":
        return nl.join(json.dumps(v) if k == "rec" else v for k, v in items) + nl
    if framing == "list":
        return "[" + ("," + nl).join(json.dumps(v) if k == "rec" else v for k, v in items) + "]" + nl
    half = len(items) // 2  # a list followed by JSONL lines
    head = "[" + ",".join(json.dumps(v) if k == "rec" else v for k, v in items[:half]) + "]"
    return nl.join([head, *[json.dumps(v) if k == "rec" else v for k, v in items[half:]]]) + nl


item_st = st.one_of(st.tuples(st.just("rec"), records), st.tuples(st.just("bad"), garbage))


def _check_reader(tmp_path, items, framing, nl, bom):
    path = tmp_path / ("f.jsonl" if framing == "jsonl" else "f.json")
    text = _framed(items, framing, nl)
    path.write_bytes((b"\xef\xbb\xbf" if bom else b"") + text.encode("utf-8", "surrogatepass"))
    first = list(iter_records(str(path)))
    assert [(r, i, x if isinstance(x, dict) else x.message) for r, i, x in first] == [
        (r, i, x if isinstance(x, dict) else x.message) for r, i, x in iter_records(str(path))
    ]  # the same twice
    kept = [x for _, _, x in first if isinstance(x, dict)]
    good = [v for k, v in items if k == "rec"]
    if all(k == "rec" for k, _ in items):
        assert kept == good  # nothing lost, nothing invented, in order
    assert len({r for r, _, _ in first}) == len(first)  # every ref names one record
    assert [i for _, i, _ in first] == list(range(len(first)))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.lists(item_st, max_size=6),
    st.sampled_from(["jsonl", "list", "list+jsonl"]),
    st.sampled_from(["\n", "\r\n", "\r"]),
    st.booleans(),
)
def test_fuzz_record_reader(tmp_path, items, framing, nl, bom):
    _check_reader(tmp_path, items, framing, nl, bom)


@pytest.mark.slow
@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.lists(item_st, max_size=20),
    st.sampled_from(["jsonl", "list", "list+jsonl"]),
    st.sampled_from(["\n", "\r\n", "\r"]),
    st.booleans(),
)
def test_fuzz_record_reader_deep(tmp_path, items, framing, nl, bom):
    _check_reader(tmp_path, items, framing, nl, bom)


coord = st.one_of(
    st.integers(-50, 120),
    st.floats(-50, 120, allow_nan=False),
    st.just(float("nan")),
    st.just(1e400),
    st.booleans(),
    st.text(max_size=3),
    st.none(),
)
image_name = st.sampled_from(
    [
        "a.png",
        "rot.png",
        "xmp.jpg",
        "../outside.png",
        "/etc/passwd",
        "missing.png",
        "",
        "sub/../a.png",
        "tall.png",
        "\udc80.png",
    ]
)
ident = st.one_of(
    st.none(),
    st.integers(0, 3),
    st.text(alphabet="ab:0123", max_size=4),
    st.booleans(),
    st.lists(st.integers(), max_size=1),
)


@st.composite
def training_record(draw):
    box = [draw(coord) for _ in range(4)]
    kind = draw(st.sampled_from(["canonical", "gta1", "vlm_r1"]))
    rec: dict = {}
    if kind == "canonical":
        rec = {
            "instruction": draw(st.text(max_size=6)),
            "image_path": draw(image_name),
            "target_bbox": dict(zip(("x_min", "y_min", "x_max", "y_max"), box, strict=True)),
        }
    elif kind == "gta1":
        rec = {
            "image": draw(image_name),
            "bbox": box,
            "conversations": [
                {"from": "human", "value": "<image>" + draw(st.text(max_size=6))},
                {"from": "gpt", "value": "x"},
            ],
        }
    else:
        rec = {
            "image": draw(image_name),
            "conversations": [
                {"from": "human", "value": draw(st.text(max_size=6))},
                {"from": "gpt", "value": json.dumps(box)},
            ],
        }
    if draw(st.booleans()):
        rec[draw(st.sampled_from(["sample_id", "id"]))] = draw(ident)
    return rec


@pytest.fixture(scope="module")
def fuzz_root(tmp_path_factory):
    base = tmp_path_factory.mktemp("fuzz")
    root = base / "root"
    (root / "sub").mkdir(parents=True)
    Image.new("RGB", (64, 48), (9, 9, 9)).save(root / "a.png")
    Image.new("RGB", (30, 2000), (9, 9, 9)).save(root / "tall.png")
    oriented_image(str(root / "rot.png"), "png", "exif_after_pixels", 6, size=(80, 40))
    oriented_image(str(root / "xmp.jpg"), "jpeg", "xmp", 8, size=(80, 40))
    Image.new("RGB", (10, 10)).save(base / "outside.png")
    return root


def _sample_key(s):
    return (s.sample_id, s.instruction, s.image_path, s.boxes, s.width, s.height)


def _check_loader(tmp_path, fuzz_root, recs, nl):
    from vlm_r1.modules import get_vlm_module

    data = tmp_path / "t.jsonl"
    data.write_bytes(nl.join(json.dumps(r) for r in recs).encode("utf-8", "surrogatepass") + nl.encode())
    limits = get_vlm_module("qwen2_5_vl").image_limits()
    samples, report = load_samples([str(data)], [str(fuzz_root)], limits=limits)
    assert report.num_records == len(recs) == len(samples) + len(report.rejects)
    ids = [s.sample_id for s in samples]
    assert len(ids) == len(set(ids))
    for s in samples:
        assert os.path.commonpath([os.path.realpath(s.image_path), os.path.realpath(fuzz_root)]) == str(
            os.path.realpath(fuzz_root)
        )
        assert truth(s.image_path) == (s.width, s.height)  # the displayed frame
        for x0, y0, x1, y1 in s.boxes:
            assert 0 <= x0 < x1 <= s.width and 0 <= y0 < y1 <= s.height
        strict_loads(validate.dumps(s.to_record()))
    again, _ = load_samples([str(data)], [str(fuzz_root)], limits=limits)
    assert [_sample_key(s) for s in again] == [_sample_key(s) for s in samples]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(training_record(), max_size=6), st.sampled_from(["\n", "\r\n", "\r"]))
def test_fuzz_training_loader(tmp_path, fuzz_root, recs, nl):
    _check_loader(tmp_path, fuzz_root, recs, nl)


@pytest.mark.slow
@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(training_record(), max_size=12), st.sampled_from(["\n", "\r\n", "\r"]))
def test_fuzz_training_loader_deep(tmp_path, fuzz_root, recs, nl):
    _check_loader(tmp_path, fuzz_root, recs, nl)


def _check_convert(tmp_path, fuzz_root, fmt, recs):
    data = tmp_path / "in.json"
    data.write_bytes(json.dumps(recs).encode("utf-8", "surrogatepass"))
    out = tmp_path / "o.jsonl"
    rep = convert(fmt, [str(data)], str(fuzz_root), str(out), progress=False, limits=None)
    lines = [strict_loads(x) for x in open(out, encoding="utf-8")]
    rejects = [strict_loads(x) for x in open(tmp_path / "o.rejects.jsonl", encoding="utf-8")]
    assert rep.targets == rep.samples + rep.rejected == len(lines) + len(rejects)
    assert len({x["sample_id"] for x in lines}) == len(lines)
    for line in lines:
        path = os.path.join(str(fuzz_root), line["image_path"])
        assert not os.path.isabs(line["image_path"]) or line["image_path"].startswith(str(fuzz_root))
        w, h = truth(path)
        assert (line["image_width"], line["image_height"]) == (w, h)
        boxes = line["target_bbox"] if isinstance(line["target_bbox"], list) else [line["target_bbox"]]
        for b in boxes:
            assert 0 <= b["x_min"] < b["x_max"] <= w and 0 <= b["y_min"] < b["y_max"] <= h
    summary = json.load(open(tmp_path / "o.summary.json"))
    assert summary["samples"] == len(lines)
    first = out.read_bytes()
    convert(fmt, [str(data)], str(fuzz_root), str(out), progress=False)
    assert out.read_bytes() == first  # the same result twice


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.sampled_from(["canonical", "gta1", "vlm-r1"]), st.lists(training_record(), max_size=6))
def test_fuzz_convert(tmp_path, fuzz_root, fmt, recs):
    _check_convert(tmp_path, fuzz_root, fmt, recs)


@pytest.mark.slow
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.sampled_from(["canonical", "gta1", "vlm-r1"]), st.lists(training_record(), max_size=12))
def test_fuzz_convert_deep(tmp_path, fuzz_root, fmt, recs):
    _check_convert(tmp_path, fuzz_root, fmt, recs)


image_case = st.tuples(
    st.sampled_from(sorted(FORMATS)),
    st.sampled_from(SOURCES),
    st.integers(0, 9),
    st.integers(1, 60),
    st.integers(1, 60),
)


def _check_image(tmp_path, case):
    fmt, source, orientation, w, h = case
    path = str(tmp_path / f"f.{fmt}")
    try:
        if not oriented_image(path, fmt, source, orientation, size=(w, h)):
            return
    except (OSError, ValueError, struct.error):
        return  # Pillow cannot write this combination
    sizes = []
    for verify in ("header", "decode"):
        try:
            sizes.append(validate.ImageChecker(verify).check(path))
        except validate.Invalid as err:
            sizes.append(err.reason)
    try:
        pixels = validate.open_image(path).size
    except Exception:
        pixels = "unreadable_image"
    assert sizes[1] == pixels
    if sizes[0] != "unreadable_image":
        assert sizes[0] == sizes[1]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(image_case)
def test_fuzz_image_frame(tmp_path, case):
    _check_image(tmp_path, case)


@pytest.mark.slow
@settings(max_examples=800, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(image_case)
def test_fuzz_image_frame_deep(tmp_path, case):
    _check_image(tmp_path, case)


# --------------------------------------------------------------------------------------------------------------------
# own attack round: inputs that are not regular files, a line longer than any record


def test_reader_refuses_what_is_not_a_regular_file(tmp_path):
    fifo = tmp_path / "pipe.jsonl"
    os.mkfifo(fifo)
    for path in (str(fifo), "/dev/zero", str(tmp_path)):
        with pytest.raises(DataFileError) as err:  # at once: nothing is read from the FIFO or /dev/zero
            list(iter_records(path))
        assert "not a regular file" in err.value.message


def test_a_line_longer_than_any_record_is_one_error_and_the_next_line_is_read(tmp_path, monkeypatch):
    import groundwork.records as data_mod

    monkeypatch.setattr(data_mod, "MAX_DOCUMENT_CHARS", 64)
    monkeypatch.setattr(data_mod, "JSON_LIST_CHUNK_CHARS", 16)
    path = tmp_path / "long.jsonl"
    path.write_text('{"a": 1}\n{"s": "' + "x" * 5000 + '"}\n{"a": 3}\n')
    got = [
        (os.path.basename(r), x if isinstance(x, dict) else x.message) for r, _, x in data_mod.iter_records(str(path))
    ]
    assert got == [
        ("long.jsonl:1", {"a": 1}),
        ("long.jsonl:2", "a line of more than 64 characters"),
        ("long.jsonl:3", {"a": 3}),
    ]


def test_rescoring_the_canonical_benchmark_keeps_samples_whose_image_is_missing(tmp_path, img_root):
    from gui_grounding.eval.run import run_eval

    recs = [
        _canonical(0, sample_id="s0"),
        {**_canonical(1, sample_id="s1"), "image_path": "gone.png"},
        {**_canonical(2, sample_id="s2"), "image_path": "gone.png", "image_width": 64, "image_height": 48},
    ]
    data = img_root / "test.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in recs))
    preds = tmp_path / "p.jsonl"
    preds.write_text("".join(json.dumps({"sample_id": f"s{i}", "point": [3 + i, 3]}) + "\n" for i in range(3)))
    doc = run_eval("canonical", str(data), str(tmp_path / "out"), predictions=str(preds))
    assert (doc["data"]["num_samples"], doc["data"]["rejected"]) == (3, 0)
    assert doc["data"]["notes"] == {"image_unavailable": 2}
    metrics = json.load(open(tmp_path / "out" / "metrics.json"))
    assert metrics["data"]["num_samples"] == 3


def test_eval_model_refuses_images_the_family_cannot_take_before_any_request(tmp_path, make_image, tiny_qwen25_dir):
    from gui_grounding.data.annotations import EvalInputError
    from gui_grounding.eval.run import run_eval

    root = tmp_path / "bench"
    make_image(64, 48, "a.png", folder=root)
    make_image(4200, 20, "thin.png", folder=root)
    recs = [_canonical(0, sample_id="a"), {**_canonical(1, sample_id="t"), "image_path": "thin.png"}]
    (root / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    with pytest.raises(EvalInputError, match=r"^1 sample\(s\) have images the qwen2_5_vl model cannot take"):
        run_eval("canonical", str(root), str(tmp_path / "out"), model=tiny_qwen25_dir)
    assert not (tmp_path / "out" / "predictions.jsonl").exists()


@pytest.mark.parametrize(
    "argv",
    [
        [b"prompt", b"--adapter", b"gta1", b"--image-size", b"100x100", b"--instruction", b"click \xff\xfe"],
        [
            b"convert",
            b"--format",
            b"canonical",
            b"x.jsonl",
            b"--image-root",
            b".",
            b"--out",
            b"o.jsonl",
            b"--source",
            b"web\xc3",
        ],
    ],
)
def test_text_flags_that_are_not_utf8_are_refused_by_argparse(tmp_path, argv):
    rep = subprocess.run(
        [sys.executable.encode(), b"-m", b"gui_grounding.cli", *argv],
        capture_output=True,
        cwd=str(tmp_path),
        env={**os.environ, "PYTHONPATH": REPO},
    )
    err = rep.stderr.decode("utf-8", "replace")
    assert rep.returncode == 2 and "is not valid UTF-8 text" in err and "Traceback" not in err
    assert not (tmp_path / "o.jsonl").exists()


def test_a_record_of_two_formats_is_ambiguous_not_guessed(tmp_path, img_root):
    """Format detection by keys: a VLM-R1 record carrying a stray ``target_bbox`` is neither read as canonical (the
    stray box) nor as VLM-R1 (silently): it is refused as ambiguous; convert --format vlm-r1 reads it as VLM-R1."""
    rec = {
        "image": "a.png",
        "conversations": [{"from": "human", "value": "<image>cat"}, {"from": "gpt", "value": "[2, 3, 20, 30]"}],
        "target_bbox": {"x_min": 0, "y_min": 0, "x_max": 60, "y_max": 40},
        "instruction": "x",
        "image_path": "a.png",
    }
    data = tmp_path / "d.jsonl"
    data.write_text(json.dumps(rec) + "\n")
    samples, report = load_samples([str(data)], [str(img_root)])
    assert samples == [] and [(r, m[:17]) for _, r, m in report.rejects] == [("unknown_format", "ambiguous record:")]
    rep = convert("vlm-r1", [str(data)], str(img_root), str(tmp_path / "o.jsonl"), progress=False)
    (line,) = [json.loads(x) for x in open(tmp_path / "o.jsonl")]
    assert rep.samples == 1 and line["target_bbox"] == {"x_min": 2.0, "y_min": 3.0, "x_max": 20.0, "y_max": 30.0}
