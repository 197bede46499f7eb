"""Hostile input, round three (issue 28): units and images, the classes, not the cases.

1. the unit rule (``groundwork.validate.check_unit``): every format's declared unit (pixels, 0-1000, 0-1 fractions) gets
   the same check in the training loader, ``convert`` and the benchmark readers;
2. an APNG whose default image is not part of its animation is ``unsupported_image`` on every image path
   (``groundwork.validate.image_frame``: header, decode, pixels);
3. a data file that is not JSON text (gzip, bzip2, xz, zstd, zip) is one error for the file, named in the same words
   by every entry (``groundwork.records.check_data_file``);
4. an image name in NFC whose file is stored in NFD (or the reverse) is a ``missing_image`` that says so
   (``groundwork.validate.spelling_note``).
"""

from __future__ import annotations

import bz2
import gzip
import io
import json
import lzma
import os
import unicodedata
import zipfile

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PIL import Image

from groundwork import validate
from groundwork.records import DataFileError, container_problem
from gui_grounding.cli import main as cli_main
from gui_grounding.data.annotations import EvalInputError
from gui_grounding.data.convert import convert
from gui_grounding.data.schema import load_samples
from gui_grounding.eval.benchmarks import get_benchmark
from gui_grounding.eval.compare import CompareError, read_run
from gui_grounding.eval.predictions import load_predictions
from gui_grounding.eval.run import run_eval
from gui_grounding.models.frames import box_from_norm1000
from vlm_r1.upstream.tasks import SkipRecord, check_image

W, H = 1000, 500
SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def _png(path, size=(W, H), color=(10, 200, 30)) -> str:
    os.makedirs(os.path.dirname(str(path)), exist_ok=True)
    Image.new("RGB", size, color).save(path, format="PNG")
    return str(path)


def _read_jsonl(path) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def _boxes(rec: dict) -> list[tuple]:
    t = rec["target_bbox"]
    return [(b["x_min"], b["y_min"], b["x_max"], b["y_max"]) for b in (t if isinstance(t, list) else [t])]


# --------------------------------------------------------------------------------------------------------------------
# 1. units: one rule for every format's declared unit


def _record(fmt: str, box: tuple, k: int, image: str = "a.png") -> dict:
    """A record of ``fmt`` with ``box`` in that format's own unit and convention (``[x0, y0, x1, y1]``)."""
    b, text = list(box), f"click {k}"
    human = {"from": "human", "value": "<image>" + text}
    if fmt == "gta1":
        return {"image": image, "bbox": b, "conversations": [human, {"from": "gpt", "value": "(1, 1)"}]}
    if fmt == "uground":
        answer = "(" + ", ".join(repr(v) for v in b) + ")"
        return {"image": image, "conversations": [human, {"from": "gpt", "value": answer}]}
    if fmt == "aria-ui-desktop/bbox_norm":
        return {"img_file": image, "elements": [{"bbox_norm": b, "instruction": text}]}
    if fmt == "aria-ui-desktop/bbox":
        return {"img_file": image, "elements": [{"bbox": b, "instruction": text}]}
    if fmt == "os-atlas":
        return {"img_filename": image, "instruction": text, "bbox": b}
    if fmt == "seeclick":
        return {"img_filename": image, "elements": [{"instruction": text, "bbox": b}]}
    if fmt == "showui":
        return {"image_url": image, "instruction": text, "bbox": b}
    if fmt == "screenspot-pro":
        return {"img_filename": image, "bbox": b, "instruction": text}
    if fmt == "vlm-r1":
        return {"image": image, "problem": text, "solution": b}
    if fmt == "vlm-r1/grpo":
        return {"image": image, "conversations": [human, {"from": "gpt", "value": json.dumps(b)}]}
    assert fmt == "canonical", fmt
    return {
        "instruction": text,
        "image_path": image,
        "target_bbox": dict(zip(("x_min", "y_min", "x_max", "y_max"), b, strict=True)),
    }


CONVERT_UNITS = {  # the units formats.py declares (--format name / record layout -> unit)
    "gta1": "norm1000",
    "uground": "norm1000",
    "aria-ui-desktop/bbox_norm": "norm1000",
    "os-atlas": "ratio",
    "seeclick": "ratio",
    "showui": "ratio",
    "screenspot-pro": "pixel",
    "vlm-r1": "pixel",
    "canonical": "pixel",
    "aria-ui-desktop/bbox": "pixel",
}
LOADER_UNITS = {"canonical": "pixel", "gta1": "norm1000", "vlm-r1/grpo": "pixel"}  # the training loader's formats


def _pixels(box: tuple, unit: str) -> tuple:
    """``box`` in ``unit`` -> original pixels of the ``W x H`` image (the documented conversions)."""
    if unit == "pixel":
        return tuple(float(v) for v in box)
    if unit == "norm1000":
        return box_from_norm1000(box, W, H)
    return box_from_norm1000(tuple(v * 1000 for v in box), W, H)


def _span(hi: int):
    return st.tuples(st.integers(0, hi), st.integers(0, hi)).filter(lambda t: t[0] != t[1]).map(sorted)


@st.composite
def unit_box(draw, unit: str) -> tuple[tuple, bool]:
    """``(box, suspect)``: a box in ``unit`` (fractions, a normal box of that unit, or, for ratios, pixels) and
    whether the unit rule must call it ``suspect_unit``."""
    kinds = ["fraction", "normal"] + (["over"] if unit == "ratio" else [])
    kind = draw(st.sampled_from(kinds))
    if kind == "fraction" or (kind == "normal" and unit == "ratio"):
        (x0, x1), (y0, y1) = draw(_span(100)), draw(_span(100))
        return (x0 / 100, y0 / 100, x1 / 100, y1 / 100), unit != "ratio"
    xmax, ymax = (W, H) if unit == "pixel" else (1000, 1000)
    (x0, x1), (y0, y1) = draw(_span(xmax).filter(lambda t: t[1] >= 2)), draw(_span(ymax))
    return (x0, y0, x1, y1), unit == "ratio"  # pixels in a ratio format: "over"


@st.composite
def convert_case(draw):
    fmt = draw(st.sampled_from(sorted(CONVERT_UNITS)))
    boxes = draw(st.lists(unit_box(CONVERT_UNITS[fmt]), min_size=1, max_size=4))
    return fmt, boxes


def _convert(tmp_path, fmt: str, records: list[dict], **kw):
    root = tmp_path / "root"
    if not (root / "a.png").exists():
        _png(root / "a.png")
    data = tmp_path / "in.json"
    data.write_text(json.dumps(records), encoding="utf-8")
    out = tmp_path / "out.jsonl"
    report = convert(fmt.split("/")[0], [str(data)], str(root), str(out), progress=False, verify_images="header", **kw)
    return report, _read_jsonl(out), _read_jsonl(tmp_path / "out.rejects.jsonl")


@settings(max_examples=40, **SETTINGS)
@given(convert_case())
def test_convert_applies_the_unit_rule_of_every_format(tmp_path, case):
    fmt, boxes = case
    unit = CONVERT_UNITS[fmt]
    report, samples, rejects = _convert(tmp_path, fmt, [_record(fmt, b, k) for k, (b, _) in enumerate(boxes)])
    kept = [_pixels(b, unit) for b, suspect in boxes if not suspect]
    assert [_boxes(s) for s in samples] == [[b] for b in kept]
    assert [r["reason"] for r in rejects] == ["suspect_unit"] * sum(suspect for _, suspect in boxes)
    assert report.samples + report.rejected == len(boxes)


@settings(max_examples=30, **SETTINGS)
@given(
    st.sampled_from(sorted(LOADER_UNITS)).flatmap(
        lambda f: st.tuples(st.just(f), st.lists(unit_box(LOADER_UNITS[f]), min_size=1, max_size=4))
    )
)
def test_training_loader_applies_the_unit_rule(tmp_path, case):
    fmt, boxes = case
    unit = LOADER_UNITS[fmt]
    root = tmp_path / "root"
    if not (root / "a.png").exists():
        _png(root / "a.png")
    data = tmp_path / "train.jsonl"
    data.write_text("".join(json.dumps(_record(fmt, b, k)) + "\n" for k, (b, _) in enumerate(boxes)))
    samples, report = load_samples([str(data)], [str(root)], verify_images="header")
    assert [s.boxes for s in samples] == [[_pixels(b, unit)] for b, suspect in boxes if not suspect]
    assert [(ref, reason) for ref, reason, _ in report.rejects] == [
        (f"{data}:{k + 1}", "suspect_unit") for k, (_, suspect) in enumerate(boxes) if suspect
    ]


def test_unit_rule_exact_messages_and_values(tmp_path):
    assert validate.check_unit((10, 20, 30, 40), "pixel") is None
    assert validate.check_unit((0.1, 0.2, 1.005, 0.5), "ratio") is None  # 2-decimal rounding: clipped later
    with pytest.raises(validate.Invalid) as err:
        validate.check_unit((0.1, 0.2, 0.3, 0.4), "norm1000")
    assert (err.value.reason, err.value.message) == (
        "suspect_unit",
        "0-1000 box [0.1, 0.2, 0.3, 0.4] has all four values in [0, 1]: fractions of the image, not 0-1000 values",
    )
    with pytest.raises(validate.Invalid) as err:
        validate.check_unit((10, 20, 300, 400), "ratio")
    assert err.value.message == (
        "ratio box [10, 20, 300, 400] has a value above 1.005: not fractions of the image (pixels or 0-1000 values?)"
    )
    with pytest.raises(ValueError, match="unknown box unit 'inch'"):
        validate.check_unit((1, 2, 3, 4), "inch")
    # GTA1 (0-1000) in convert: fractions are rejected, the neighbour is kept with exact pixels
    report, samples, rejects = _convert(
        tmp_path, "gta1", [_record("gta1", (0.1, 0.2, 0.3, 0.4), 0), _record("gta1", (100, 200, 300, 400), 1)]
    )
    assert [_boxes(s) for s in samples] == [[(100.0, 100.0, 300.0, 200.0)]]
    assert [(r["reason"], r["message"]) for r in rejects] == [
        (
            "suspect_unit",
            "0-1000 box [0.1, 0.2, 0.3, 0.4] has all four values in [0, 1]: fractions of the image, not 0-1000 "
            "values (--box-unit ratio reads them as fractions)",
        )
    ]
    # --box-unit declares the unit: the same fractions read as ratios are kept
    report, samples, _ = _convert(tmp_path, "gta1", [_record("gta1", (0.1, 0.2, 0.3, 0.4), 0)], box_unit="ratio")
    assert [_boxes(s) for s in samples] == [[(100.0, 100.0, 300.0, 200.0)]]
    # a ratio format given pixels
    report, samples, rejects = _convert(tmp_path, "os-atlas", [_record("os-atlas", (10, 20, 300, 400), 0)])
    assert (samples, [r["reason"] for r in rejects]) == ([], ["suspect_unit"])
    assert rejects[0]["message"].endswith("(--box-unit pixel or norm1000 reads them so)")


def test_benchmark_readers_warn_with_the_unit_rule(tmp_path):
    root = tmp_path / "bench"
    _png(root / "a.png")
    recs = [
        _record("gta1", (0.1, 0.2, 0.3, 0.4), 0),  # 0-1000 fractions: warned, kept, scored as given
        _record("canonical", (0.1, 0.2, 0.3, 0.4), 1),
        _record("gta1", (100, 200, 300, 400), 2),
    ]
    (root / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    samples, report = get_benchmark("canonical").load(str(root))
    assert len(samples) == 3 and report.notes["suspect_unit"] == 2
    assert samples[0].boxes == [box_from_norm1000((0.1, 0.2, 0.3, 0.4), W, H)]
    assert [m for _, m in report.warnings if m.startswith("suspect_unit")] == [
        "suspect_unit: 0-1000 box [0.1, 0.2, 0.3, 0.4] has all four values in [0, 1]: fractions of the image, not "
        "0-1000 values (kept, scored as given)",
        "suspect_unit: pixel box [0.1, 0.2, 0.3, 0.4] has all four values in [0, 1]: fractions of the image, not "
        "pixels (kept, scored as given)",
    ]
    # ScreenSpot-V2 ([x, y, w, h] pixels)
    ss = tmp_path / "ssv2"
    _png(ss / "screenspotv2_image" / "a.png")
    rec = {"img_filename": "a.png", "bbox": [0.1, 0.1, 0.2, 0.2], "instruction": "x", "data_type": "text"}
    ok = {**rec, "bbox": [10, 10, 20, 20], "instruction": "y"}
    (ss / "screenspot_mobile_v2.json").write_text(json.dumps([rec, ok]))
    samples, report = get_benchmark("screenspot-v2").load(str(ss))
    assert len(samples) == 2 and report.notes["suspect_unit"] == 1


# --------------------------------------------------------------------------------------------------------------------
# 2. APNG: a default image outside the animation is refused on every image path


COLORS = [(255, 0, 0), (0, 255, 0), (0, 0, 255), (255, 255, 0)]


def _apng(path, size, frames: int, default_image: bool) -> str:
    first, *rest = (Image.new("RGB", size, c) for c in COLORS[: frames + 1])
    first.save(path, format="PNG", save_all=True, default_image=default_image, append_images=rest)
    return str(path)


@pytest.mark.filterwarnings("ignore:Invalid APNG")
@settings(max_examples=30, **SETTINGS)
@given(
    st.integers(0, 3),
    st.booleans(),
    st.tuples(st.integers(1, 40), st.integers(1, 40)),
    st.sampled_from(validate.VERIFY_MODES),
)
def test_apng_frame_rule_agrees_on_every_path(tmp_path, frames, default_image, size, verify):
    path = _apng(tmp_path / f"a{frames}{int(default_image)}{size[0]}x{size[1]}.png", size, frames, default_image)
    with Image.open(path) as im:
        hidden = bool(im.info.get("default_image"))
    # no frame after a hidden default image: Pillow writes an acTL of 0 frames, an invalid APNG that Pillow and
    # viewers alike show as the still default image
    assert hidden == (default_image and frames > 0)
    checker = validate.ImageChecker(verify)
    if hidden:
        with pytest.raises(validate.Invalid) as err:
            checker.check(path)
        assert err.value.reason == "unsupported_image" and path in err.value.message
        with pytest.raises(validate.Invalid) as err:
            validate.open_image(path)
        assert err.value.reason == "unsupported_image"
    else:  # a still PNG, or an APNG whose default image is frame 0: size and pixels of that image
        assert checker.check(path) == size
        rgb = validate.open_image(path)
        assert rgb.size == size and rgb.getpixel((0, 0)) == COLORS[0]


def test_apng_with_hidden_default_image_is_a_reject_and_the_neighbour_is_kept(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    _apng(root / "anim.png", (W, H), 2, True)
    _png(root / "a.png")
    recs = [_record("canonical", (10, 20, 30, 40), 0, "anim.png"), _record("canonical", (10, 20, 30, 40), 1)]
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in recs))
    for verify in ("header", "decode"):
        samples, report = load_samples([str(data)], [str(root)], verify_images=verify)
        assert [s.instruction for s in samples] == ["click 1"]
        assert [(ref, reason) for ref, reason, _ in report.rejects] == [(f"{data}:1", "unsupported_image")]
    _, samples, rejects = _convert(tmp_path, "canonical", recs)
    assert [s["instruction"] for s in samples] == ["click 1"] and [r["reason"] for r in rejects] == [
        "unsupported_image"
    ]


# --------------------------------------------------------------------------------------------------------------------
# 3. compressed data: one error per file, the same words in every entry

JSONL = (
    b'{"instruction": "x", "image_path": "a.png", "target_bbox": {"x_min": 1, "y_min": 1, "x_max": 5, "y_max": 5}}\n'
)


def _zip(data: bytes) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("d.jsonl", data)
    return buf.getvalue()


COMPRESSIONS = {
    "gzip": gzip.compress,
    "bzip2": bz2.compress,
    "xz": lzma.compress,
    "zstd": lambda data: b"\x28\xb5\x2f\xfd" + data,  # the zstd frame magic (no zstd module in the stdlib)
    "zip": _zip,
}
WORDS = {"gzip": "gzip-compressed", "bzip2": "bzip2-compressed", "xz": "xz-compressed", "zstd": "zstd-compressed"}


@pytest.mark.parametrize("kind", sorted(COMPRESSIONS))
def test_compressed_data_is_one_error_per_file_in_every_entry(tmp_path, kind):
    data = COMPRESSIONS[kind](JSONL)
    root = tmp_path / "root"
    _png(root / "a.png")
    path = tmp_path / "d.jsonl"
    path.write_bytes(data)
    problem = container_problem(str(path))
    assert problem.startswith(f"the file is {WORDS.get(kind, 'a zip archive')}")
    line = f"{path}: {problem}"
    # training loader
    with pytest.raises(DataFileError) as err:
        load_samples([str(path)], [str(root)])
    assert str(err.value) == line
    # convert: raised before anything is written
    with pytest.raises(DataFileError) as err:
        convert("canonical", [str(path)], str(root), str(tmp_path / "o.jsonl"), progress=False)
    assert str(err.value) == line and not (tmp_path / "o.jsonl").exists()
    # benchmark readers: the canonical JSONL one and a JSON-list one (ScreenSpot-V2)
    bench = tmp_path / "bench"
    bench.mkdir()
    (bench / "test.jsonl").write_bytes(data)
    with pytest.raises(DataFileError) as err:
        get_benchmark("canonical").load(str(bench))
    assert str(err.value) == f"{bench / 'test.jsonl'}: {problem}"
    ss = tmp_path / "ssv2"
    (ss / "screenspotv2_image").mkdir(parents=True)
    (ss / "screenspot_web_v2.json").write_bytes(data)
    with pytest.raises(DataFileError) as err:
        get_benchmark("screenspot-v2").load(str(ss))
    assert str(err.value) == f"{ss / 'screenspot_web_v2.json'}: {problem}"
    with pytest.raises(EvalInputError) as err:  # eval: one line
        run_eval("canonical", str(bench), str(tmp_path / "e"), predictions=str(path))
    assert str(err.value) == f"{bench / 'test.jsonl'}: {problem}"
    # predictions
    with pytest.raises(EvalInputError) as err:
        load_predictions(str(path), [])
    assert str(err.value) == line
    # compare: a run folder whose scores.jsonl is compressed
    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.json").write_text(json.dumps({"benchmark": "canonical"}))
    (run / "scores.jsonl").write_bytes(data)
    with pytest.raises(CompareError) as err:
        read_run(str(run))
    assert (
        str(err.value)
        == f"{run / 'scores.jsonl'}: {container_problem(str(run / 'scores.jsonl'))}"
        == (f"{run / 'scores.jsonl'}: {problem}")
    )


def test_convert_cli_names_a_compressed_input_in_one_line(tmp_path, capsys):
    path = tmp_path / "d.jsonl"
    path.write_bytes(gzip.compress(JSONL))
    with pytest.raises(SystemExit) as err:
        cli_main(
            [
                "convert",
                "--format",
                "canonical",
                str(path),
                "--image-root",
                str(tmp_path),
                "--out",
                str(tmp_path / "o.jsonl"),
            ]
        )
    assert err.value.code == f"convert: error: {path}: {container_problem(str(path))}"
    assert "\n" not in err.value.code and not (tmp_path / "o.jsonl").exists()


# --------------------------------------------------------------------------------------------------------------------
# 4. NFC vs NFD image names

COMPOSED = "éÅñüçĂǺḱở가Ẽ"  # every one of these has a different NFD spelling (Hangul decomposes into jamo)
letters = st.text(st.characters(categories=("Lu", "Ll", "Lo"), codec="utf-8"), max_size=6)


@settings(max_examples=30, **SETTINGS)
@given(letters, st.sampled_from(COMPOSED), letters, st.booleans())
def test_nfc_nfd_mismatch_is_named(tmp_path, prefix, composed, suffix, record_nfc):
    base = prefix + composed + suffix + ".png"
    record_form, file_form = ("NFC", "NFD") if record_nfc else ("NFD", "NFC")
    rec_name, file_name = unicodedata.normalize(record_form, base), unicodedata.normalize(file_form, base)
    assert rec_name != file_name
    root = tmp_path / f"r{len(os.listdir(tmp_path))}"
    _png(root / file_name, size=(64, 32))
    _png(root / "ok.png", size=(64, 32))
    record_path, file_path = os.path.join(root, rec_name), os.path.join(root, file_name)
    note = f" (a file with the {file_form} spelling exists: {ascii(file_path)})"
    assert validate.spelling_note(record_path) == note
    assert validate.spelling_note(file_path + ".gone") == ""
    with pytest.raises(validate.Invalid) as err:
        validate.regular_file(record_path)
    assert (err.value.reason, err.value.message) == ("missing_image", f"image not found: {record_path}{note}")
    # the training loader: a reject naming the mismatch, the neighbour kept; the file's own spelling is found
    recs = [
        {"instruction": "x", "image_path": n, "target_bbox": {"x_min": 1, "y_min": 1, "x_max": 9, "y_max": 9}}
        for n in (rec_name, "ok.png", file_name)
    ]
    data = root / "d.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in recs), encoding="utf-8")
    samples, report = load_samples([str(data)], [str(root)], verify_images="header")
    assert [s.image_path for s in samples] == [str(root / "ok.png"), file_path]
    assert report.rejects == [(f"{data}:1", "missing_image", f"image not found: {record_path}{note}")]
    # the default task's check
    with pytest.raises(SkipRecord) as err:
        check_image(record_path, validate.ImageChecker("header"))
    assert (err.value.reason, err.value.message) == ("missing_image", f"missing image {record_path}{note}")
