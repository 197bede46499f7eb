"""Record readers (canonical, GTA1, VLM-R1), validation reason codes with file:line refs, strict vs skip-and-count."""

from __future__ import annotations

import json
import logging
import os
import zlib
from collections import Counter

import pytest

from gui_grounding.data.schema import REASONS, Sample, SampleError, load_samples, record_to_sample
from tests.helpers.images import raw_png


@pytest.fixture
def data_dir(tmp_path, make_image):
    """tmp_path with images/screen.png (1000x500), images/small.png (200x100), a garbage and a truncated PNG."""
    make_image(1000, 500, "images/screen.png")
    make_image(200, 100, "images/small.png")
    (tmp_path / "images" / "garbage.png").write_bytes(b"this is not an image at all\n" * 20)
    good = (tmp_path / "images" / "screen.png").read_bytes()
    (tmp_path / "images" / "truncated.png").write_bytes(good[: len(good) // 2])
    # a 20000 x 20000 PNG in a few KB (declared size over the 64 Mpx limit) and a PNG with valid chunk CRCs whose
    # IDAT is not a zlib stream
    (tmp_path / "images" / "bomb.png").write_bytes(raw_png(20_000, 20_000, zlib.compress(b"\0" * 20_000)))
    (tmp_path / "images" / "bad_idat.png").write_bytes(raw_png(8, 8, b"not a zlib stream at all"))
    return tmp_path


def write_jsonl(path, lines) -> str:
    """Write ``lines`` (dicts are JSON-dumped, strings written verbatim, bytes as they are) one per line."""
    with open(path, "wb") as f:
        for line in lines:
            if isinstance(line, dict):
                line = json.dumps(line)
            f.write((line if isinstance(line, bytes) else line.encode("utf-8")) + b"\n")
    return str(path)


def canonical_text(x_max: str) -> str:
    """A canonical record line whose ``x_max`` is the JSON text ``x_max``, verbatim."""
    return (
        '{"instruction": "a", "image_path": "images/screen.png", "target_bbox": '
        f'{{"x_min": 1, "y_min": 2, "x_max": {x_max}, "y_max": 4}}}}'
    )


def canonical(instruction="Click menu", image="images/screen.png", box=(12, 10, 42, 40), **extra):
    rec = {
        "instruction": instruction,
        "image_path": image,
        "target_bbox": dict(zip(("x_min", "y_min", "x_max", "y_max"), box, strict=True)),
    }
    return {**rec, **extra}


def gta1(bbox, instruction="<image>Click the button", image="images/screen.png", **extra):
    conv = [{"from": "human", "value": instruction}, {"from": "gpt", "value": "anything"}]
    return {"image": image, "bbox": bbox, "conversations": conv, **extra}


def vlm_r1(answer, instruction="<image>Find the logo", image="images/screen.png"):
    return {
        "image": image,
        "conversations": [{"from": "human", "value": instruction}, {"from": "gpt", "value": answer}],
    }


# --------------------------------------------------------------------------------------------------------------------
# good records


def test_canonical_dict_box(data_dir):
    path = write_jsonl(data_dir / "train.jsonl", [canonical()])
    samples, report = load_samples([path])
    assert (report.num_records, report.num_samples, report.rejects) == (1, 1, [])
    s = samples[0]
    assert s.instruction == "Click menu"
    assert s.image_path == str(data_dir / "images" / "screen.png")
    assert s.boxes == [(12.0, 10.0, 42.0, 40.0)]
    assert (s.width, s.height) == (1000, 500)
    assert s.sample_id == "train:0"  # default id: file stem and 0-based index
    assert (s.source, s.platform, s.ui_type, s.extra) == (None, None, None, {})


def test_canonical_list_of_boxes_and_optional_keys(data_dir):
    rec = canonical(sample_id="s-7", source="web", platform="desktop", ui_type="icon", note="kept")
    rec["target_bbox"] = [
        {"x_min": 0, "y_min": 0, "x_max": 10, "y_max": 10},
        {"x_min": 990, "y_min": 490, "x_max": 1000, "y_max": 500},
    ]
    rec["instruction"] = "  <image>Open   the\nsettings  "
    path = write_jsonl(data_dir / "train.jsonl", [rec])
    (s,), _ = load_samples([path])
    assert s.boxes == [(0.0, 0.0, 10.0, 10.0), (990.0, 490.0, 1000.0, 500.0)]  # edge-touching box is inside
    assert s.instruction == "Open the settings"  # <image> removed, whitespace collapsed
    assert (s.sample_id, s.source, s.platform, s.ui_type, s.extra) == (
        "s-7",
        "web",
        "desktop",
        "icon",
        {"note": "kept"},
    )


def test_gta1_record_norm1000_to_pixels(data_dir):
    path = write_jsonl(
        data_dir / "gta1.jsonl",
        [
            gta1([100, 200, 300, 400], id="g1"),
            gta1([[0, 0, 1000, 1000], [500, 500, 600, 700]]),
        ],
    )
    (a, b), report = load_samples([path])
    assert report.num_samples == 2
    assert a.boxes == [(100.0, 100.0, 300.0, 200.0)]  # 1000x500 image: x*1, y*0.5
    assert a.instruction == "Click the button"
    assert a.sample_id == "g1"
    assert b.boxes == [(0.0, 0.0, 1000.0, 500.0), (500.0, 250.0, 600.0, 350.0)]
    assert b.sample_id == "gta1:1"


def test_gta1_instruction_is_byte_for_byte_minus_image_tags(data_dir):
    # GTA1 builds the user text with instruction.replace("<image>", "") only (src/grpo_grounding.py:106-107)
    human = "<image>\n  Click   the\tbutton <image> "
    path = write_jsonl(data_dir / "gta1.jsonl", [gta1([100, 200, 300, 400], instruction=human)])
    (s,), _ = load_samples([path])
    assert s.instruction == "\n  Click   the\tbutton  "
    # canonical and VLM-R1 records keep collapsing whitespace
    path = write_jsonl(data_dir / "c.jsonl", [canonical(instruction=human), vlm_r1([1, 2, 3, 4], instruction=human)])
    assert [s.instruction for s in load_samples([path])[0]] == ["Click the button"] * 2


def test_published_boxes_unit_and_scale(data_dir):
    path = write_jsonl(
        data_dir / "mixed.jsonl",
        [
            gta1([[100, 200, 300, 400], [0, 0, 1003, 1000]]),  # second box clipped in pixels, published as is
            canonical(box=(900, 10, 1003, 40)),  # clipped to 1000 in pixels, published 1003
            vlm_r1([1, 2, 30, 40]),
        ],
    )
    (g, c, v), report = load_samples([path])
    assert report.num_clipped == 2
    assert g.boxes == [(100.0, 100.0, 300.0, 200.0), (0.0, 0.0, 1000.0, 500.0)]
    assert g.source_boxes == [(100.0, 200.0, 300.0, 400.0), (0.0, 0.0, 1003.0, 1000.0)]
    assert (g.source_box_unit, g.source_box_scale()) == ("norm1000", (1000.0, 1000.0))
    assert c.boxes == [(900.0, 10.0, 1000.0, 40.0)]
    assert c.source_boxes == [(900.0, 10.0, 1003.0, 40.0)]
    assert (c.source_box_unit, c.source_box_scale()) == ("pixel", (1000.0, 500.0))
    assert (v.source_boxes, v.source_box_unit, v.source_box_scale()) == (
        [(1.0, 2.0, 30.0, 40.0)],
        "pixel",
        (1000.0, 500.0),
    )
    assert g.published_boxes() == g.source_boxes
    # a Sample built in code: its pixel boxes stand in for the published ones
    plain = Sample("p", "x", "a.png", [(1.0, 2.0, 3.0, 4.0)], 640, 480)
    assert (plain.published_boxes(), plain.source_box_unit, plain.source_box_scale()) == (
        [(1.0, 2.0, 3.0, 4.0)],
        "pixel",
        (640.0, 480.0),
    )
    with pytest.raises(ValueError, match=r"unknown source_box_unit 'inch'; expected one of pixel, norm1000"):
        Sample("p", "x", "a.png", [], 640, 480, source_box_unit="inch").source_box_scale()


def test_vlm_r1_records_list_and_string_answers(data_dir):
    path = write_jsonl(
        data_dir / "rec.jsonl",
        [
            vlm_r1([1, 2, 30, 40]),
            vlm_r1("<answer>[1,2,30,40]</answer>"),
            vlm_r1(" [1, 2, 30, 40] "),
            {**vlm_r1([5, 6, 7, 8]), "image": ["images/small.png"]},
        ],
    )
    samples, report = load_samples([path])
    assert report.rejects == []
    assert [s.boxes for s in samples] == [[(1.0, 2.0, 30.0, 40.0)]] * 3 + [[(5.0, 6.0, 7.0, 8.0)]]
    assert samples[0].instruction == "Find the logo"
    assert (samples[3].width, samples[3].height) == (200, 100)


def test_json_list_file_and_refs(data_dir):
    path = str(data_dir / "data.json")
    with open(path, "w") as f:
        json.dump([canonical(), gta1([100, 200, 300, 400]), canonical(image="images/missing.png")], f)
    samples, report = load_samples([path])
    assert [s.sample_id for s in samples] == ["data:0", "data:1"]
    assert report.rejects == [
        (f"{path}:[2]", "missing_image", f"image not found: {data_dir / 'images' / 'missing.png'}")
    ]


def test_single_object_json_file(data_dir):
    path = str(data_dir / "one.json")
    with open(path, "w") as f:
        json.dump(canonical(), f)
    samples, _ = load_samples([path])
    assert len(samples) == 1 and samples[0].boxes == [(12.0, 10.0, 42.0, 40.0)]


def test_image_folders_resolve_relative_paths(tmp_path, make_image):
    make_image(300, 200, "shots/a.png", folder=tmp_path / "imgs")
    path = write_jsonl(tmp_path / "elsewhere.jsonl", [canonical(image="shots/a.png", box=(0, 0, 300, 200))])
    (s,), _ = load_samples([path], [str(tmp_path / "imgs")])
    assert s.image_path == str(tmp_path / "imgs" / "shots" / "a.png")
    assert (s.width, s.height) == (300, 200)


def test_to_record_round_trip(data_dir):
    rec = canonical(sample_id="x1", platform="web", note=3)
    rec["target_bbox"] = [rec["target_bbox"], {"x_min": 1, "y_min": 2, "x_max": 3, "y_max": 4}]
    (s,), _ = load_samples([write_jsonl(data_dir / "t.jsonl", [rec])])
    out = s.to_record(str(data_dir))
    assert out == {
        "sample_id": "x1",
        "instruction": "Click menu",
        "image_path": os.path.join("images", "screen.png"),
        "target_bbox": rec["target_bbox"],
        "image_width": 1000,
        "image_height": 500,
        "platform": "web",
        "note": 3,
    }
    again = record_to_sample(out, "mem:1", base_dir=str(data_dir), default_id="unused")
    assert (again.boxes, again.sample_id, again.extra) == (s.boxes, "x1", {"note": 3})


# --------------------------------------------------------------------------------------------------------------------
# bad records: one reason code each, ref = file:1-based line

BAD_RECORDS = {
    "missing_image": (canonical(image="images/nope.png"), "missing_image"),
    "garbage_png": (canonical(image="images/garbage.png"), "unreadable_image"),
    "truncated_png": (canonical(image="images/truncated.png"), "unreadable_image"),
    # just beyond the clipping tolerance (schema.clip_box: 4 px; 0-1000 boxes: max(4 px, 0.005 * side))
    "box_past_right_edge": (canonical(box=(900, 10, 1005, 40)), "box_outside_image"),
    "box_past_bottom_edge": (canonical(box=(10, 10, 40, 505)), "box_outside_image"),
    "box_negative": (canonical(box=(-5, 10, 40, 40)), "box_outside_image"),
    "gta1_box_over_1000": (gta1([100, 200, 300, 1010]), "box_outside_image"),  # y_max 505 px on a 500 px image
    "inverted_x": (canonical(box=(50, 10, 40, 40)), "inverted_box"),
    "inverted_y": (canonical(box=(10, 40, 40, 10)), "inverted_box"),
    "zero_width": (canonical(box=(40, 10, 40, 40)), "inverted_box"),
    "zero_height": (canonical(box=(10, 20, 40, 20)), "inverted_box"),
    "empty_instruction": (canonical(instruction=""), "empty_instruction"),
    "whitespace_instruction": (canonical(instruction="  \n\t "), "empty_instruction"),
    "image_tag_only_instruction": (canonical(instruction="<image>"), "empty_instruction"),
    "image_tags_only_gta1": (gta1([1, 2, 3, 4], instruction="<image> <image>\n"), "empty_instruction"),
    "unparseable_line": ('{"instruction": "Click", "image_path": ', "unparseable_record"),
    "json_array_line": ("[1, 2, 3]", "unparseable_record"),
    "unknown_format": ({"text": "Click", "picture": "images/screen.png"}, "unknown_format"),
    "bbox_missing_key": (
        {"instruction": "a", "image_path": "images/screen.png", "target_bbox": {"x_min": 1}},
        "bad_field",
    ),
    "vlm_r1_answer_not_a_box": (vlm_r1("<answer>the logo</answer>"), "bad_field"),
    # JSON's NaN / Infinity literals are not JSON: the line is unparseable (strict JSON, groundwork.records)
    "gta1_nan_edge": (
        '{"image": "images/screen.png", "bbox": [NaN, 2, 3, 4], "conversations": '
        '[{"from": "human", "value": "<image>Click"}]}',
        "unparseable_record",
    ),
    "canonical_infinite_edge": (
        '{"instruction": "a", "image_path": "images/screen.png", "target_bbox": '
        '{"x_min": 1, "y_min": 2, "x_max": Infinity, "y_max": 4}}',
        "unparseable_record",
    ),
    "float_overflow_edge": (canonical_text("1e999"), "unparseable_record"),
    # groundwork.validate: box numbers are finite, within +-1e7, never booleans
    "boolean_edge": (canonical_text("true"), "bad_box"),
    "huge_int_edge": (canonical_text("9" * 400), "bad_box"),
    "past_1e7_edge": (canonical_text("10000001"), "bad_box"),
    "string_edge": (canonical_text('"12"'), "bad_box"),
    "gta1_boolean_bbox": (gta1([1, 2, True, 4]), "bad_box"),
    "vlm_r1_huge_answer": (vlm_r1("[1, 2, 3, " + "9" * 5000 + "]"), "bad_field"),
    "too_many_digits_line": (canonical_text("9" * 5000), "unparseable_record"),
    "lone_surrogate_instruction": (canonical(instruction="Click \ud800 here"), "bad_text"),
    "lone_surrogate_extra": (canonical(note="\udfff"), "bad_text"),
    "invalid_utf8_line": (b'{"instruction": "Click \xff", "image_path": "images/screen.png"}', "unparseable_record"),
    "deep_nesting": ("[" * 100_000 + "]" * 100_000, "unparseable_record"),
    "image_is_a_directory": (canonical(image="images"), "not_a_file"),
    "absolute_proc_file": (canonical(image="/proc/self/environ"), "not_a_file"),
    "absolute_non_image": (canonical(image="/etc/hostname"), "unreadable_image"),
    "suspect_unit_fractions": (canonical(box=(0.1, 0.2, 0.3, 0.25)), "suspect_unit"),
    "bomb_png": (canonical(image="images/bomb.png"), "image_too_large"),
    "bad_idat_png": (canonical(image="images/bad_idat.png"), "unreadable_image"),
}


@pytest.mark.parametrize("kind", list(BAD_RECORDS))
def test_bad_record_strict_raises_with_reason_and_ref(data_dir, kind):
    record, reason = BAD_RECORDS[kind]
    # good line 1, blank line 2 (skipped, but counted for line numbers), bad line 3
    path = write_jsonl(data_dir / "bad.jsonl", [canonical(), "", record])
    with pytest.raises(SampleError) as info:
        load_samples([path], strict=True)
    err = info.value
    assert err.reason == reason
    assert err.ref == f"{path}:3"
    assert str(err).startswith(f"{path}:3: {reason}: ")
    assert reason in REASONS


@pytest.mark.parametrize("kind", list(BAD_RECORDS))
def test_bad_record_non_strict_is_skipped_and_counted(data_dir, kind):
    record, reason = BAD_RECORDS[kind]
    path = write_jsonl(data_dir / "bad.jsonl", [record, canonical()])
    samples, report = load_samples([path])
    assert [s.boxes for s in samples] == [[(12.0, 10.0, 42.0, 40.0)]]
    assert (report.num_records, report.num_samples) == (2, 1)
    assert [(ref, r) for ref, r, _ in report.rejects] == [(f"{path}:1", reason)]
    assert report.counts == Counter({reason: 1})


def test_error_messages_name_the_problem(data_dir):
    def message(record):
        path = write_jsonl(data_dir / "m.jsonl", [record])
        return load_samples([path])[1].rejects[0][2]

    assert message(canonical(image="images/nope.png")) == f"image not found: {data_dir / 'images' / 'nope.png'}"
    assert message(canonical(box=(900, 10, 1005, 40))) == (
        "box [900.0, 10.0, 1005.0, 40.0] extends 5 px outside the 1000x500 image along x (clipping tolerance 4 px)"
    )
    assert message(canonical(box=(50, 10, 40, 40))) == "box [50.0, 10.0, 40.0, 40.0] is inverted or has zero area"
    assert message(gta1([100, 200, 300, 1010])) == (
        "0-1000 box [100.0, 200.0, 300.0, 1010.0] -> box [100.0, 100.0, 300.0, 505.0] extends 5 px outside the "
        "1000x500 image along y (clipping tolerance 4 px)"
    )
    assert message(canonical(image="images/garbage.png")).startswith(
        f"cannot decode {data_dir / 'images' / 'garbage.png'}: UnidentifiedImageError"
    )


def test_mixed_file_non_strict_counts_table_and_warning(data_dir, caplog):
    lines = [
        canonical(),  # 1 good
        canonical(image="images/nope.png"),  # 2 missing_image
        "",  # 3 blank
        canonical(image="images/garbage.png"),  # 4 unreadable_image
        canonical(image="images/truncated.png"),  # 5 unreadable_image
        gta1([100, 200, 300, 400]),  # 6 good
        canonical(box=(0, 0, 1005, 10)),  # 7 box_outside_image
        canonical(box=(5, 5, 5, 9)),  # 8 inverted_box
        canonical(instruction="<image>"),  # 9 empty_instruction
        "not json",  # 10 unparseable_record
        {"foo": 1},  # 11 unknown_format
        vlm_r1([1, 2, 30, 40]),  # 12 good
    ]
    path = write_jsonl(data_dir / "mixed.jsonl", lines)
    with caplog.at_level(logging.WARNING, logger="gui_grounding.data.schema"):
        samples, report = load_samples([path])
    assert [s.sample_id for s in samples] == ["mixed:0", "mixed:4", "mixed:10"]
    assert (report.num_records, report.num_samples) == (11, 3)
    assert report.counts == Counter(
        {
            "missing_image": 1,
            "unreadable_image": 2,
            "box_outside_image": 1,
            "inverted_box": 1,
            "empty_instruction": 1,
            "unparseable_record": 1,
            "unknown_format": 1,
        }
    )
    assert [(ref, r) for ref, r, _ in report.rejects] == [
        (f"{path}:2", "missing_image"),
        (f"{path}:4", "unreadable_image"),
        (f"{path}:5", "unreadable_image"),
        (f"{path}:7", "box_outside_image"),
        (f"{path}:8", "inverted_box"),
        (f"{path}:9", "empty_instruction"),
        (f"{path}:10", "unparseable_record"),
        (f"{path}:11", "unknown_format"),
    ]
    table = report.table()
    assert table.splitlines()[0] == "records read: 11   samples kept: 3   rejected: 8"
    for reason, n, first in [
        ("box_outside_image", 1, 7),
        ("empty_instruction", 1, 9),
        ("inverted_box", 1, 8),
        ("missing_image", 1, 2),
        ("unknown_format", 1, 11),
        ("unparseable_record", 1, 10),
        ("unreadable_image", 2, 4),
    ]:
        assert f"  {reason:<20} {n:>7}   e.g. {path}:{first}" in table.splitlines()
    assert "skipped 8 bad records" in caplog.text

    with pytest.raises(SampleError) as info:
        load_samples([path], strict=True)
    assert (info.value.ref, info.value.reason) == (f"{path}:2", "missing_image")
    assert f"{path}:2" in str(info.value)


def test_boxes_within_tolerance_are_clipped_and_counted(data_dir, caplog):
    path = write_jsonl(
        data_dir / "clip.jsonl",
        [
            canonical(box=(900, 10, 1004, 40)),  # 4 px past the right edge: clipped
            canonical(box=(-4, -4, 40, 504)),  # 4 px out on three sides: clipped
            gta1([100, 200, 1005, 1005]),  # 0-1000: x_max 1005 px (tolerance max(4, 0.005 * 1000) = 5), y_max 502.5 px
            canonical(box=(1001, 10, 1003, 40)),  # within tolerance but no area inside the image
            canonical(box=(12, 10, 42, 40)),  # untouched
        ],
    )
    with caplog.at_level(logging.WARNING, logger="gui_grounding.data.schema"):
        samples, report = load_samples([path])
    assert [s.boxes for s in samples] == [
        [(900.0, 10.0, 1000.0, 40.0)],
        [(0.0, 0.0, 40.0, 500.0)],
        [(100.0, 100.0, 1000.0, 500.0)],
        [(12.0, 10.0, 42.0, 40.0)],
    ]
    assert report.num_clipped == 3
    assert [(ref, r, m) for ref, r, m in report.rejects] == [
        (f"{path}:4", "box_outside_image", "box [1001.0, 10.0, 1003.0, 40.0] has no area inside the 1000x500 image")
    ]
    assert "  (kept, box clipped to the image: 3)" in report.table().splitlines()
    expected = r"^mem:1: box_outside_image: box \[900.0, 10.0, 1001.0, 40.0\] extends 1 px outside the 1000x500 image"
    with pytest.raises(SampleError, match=expected + r" along x \(clipping tolerance 0 px\)$"):
        record_to_sample(
            canonical(box=(900, 10, 1001, 40)), "mem:1", base_dir=str(data_dir), default_id="z", clip_tolerance_px=0
        )


def test_refs_name_the_right_file_among_several(data_dir):
    a = write_jsonl(data_dir / "a.jsonl", [canonical(), canonical()])
    b = write_jsonl(data_dir / "b.jsonl", [canonical(), canonical(instruction="")])
    samples, report = load_samples([a, b])
    assert [s.sample_id for s in samples] == ["a:0", "a:1", "b:0"]
    assert report.rejects[0][:2] == (f"{b}:2", "empty_instruction")


def test_verify_images_false_reads_only_the_header(data_dir):
    path = write_jsonl(
        data_dir / "t.jsonl", [canonical(image="images/truncated.png"), canonical(image="images/garbage.png")]
    )
    samples, report = load_samples([path], verify_images=False)
    assert [(s.width, s.height) for s in samples] == [(1000, 500)]  # truncated file: header is intact
    assert report.counts == Counter({"unreadable_image": 1})  # garbage has no header at all


def test_paths_climbing_out_of_the_image_folder(data_dir, make_image):
    make_image(10, 10, "outside.png", folder=data_dir.parent)
    lines = [
        canonical(image="../outside.png", box=(1, 1, 5, 5)),
        canonical(image="images/../../images/screen.png"),
        canonical(image="images/../images/screen.png"),
        canonical(image=str(data_dir / "images" / "small.png"), box=(1, 1, 20, 20)),
    ]
    path = write_jsonl(data_dir / "p.jsonl", lines)
    samples, report = load_samples([path], [str(data_dir)])  # an image folder named: '..' may not climb out of it
    assert [r for _, r, _ in report.rejects] == ["path_outside_root", "path_outside_root"]
    assert len(samples) == 2 and report.num_absolute_paths == 1  # absolute paths are accepted, and counted
    samples, report = load_samples([path])  # no folder named: paths are relative to the file's own folder
    assert [r for _, r, _ in report.rejects] == ["missing_image"] and len(samples) == 3


def test_image_folders_count_mismatch_raises(data_dir):
    a = write_jsonl(data_dir / "a.jsonl", [canonical()])
    b = write_jsonl(data_dir / "b.jsonl", [canonical()])
    with pytest.raises(ValueError, match=r"^2 data files but 1 image folders; give one folder per file$"):
        load_samples([a, b], [str(data_dir)])


def test_missing_data_file_raises(data_dir):
    with pytest.raises(FileNotFoundError, match="data file not found: "):
        load_samples([str(data_dir / "absent.jsonl")])
