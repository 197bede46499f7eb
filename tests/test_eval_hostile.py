"""`gui-grounding eval` outside the benchmark readers, on hostile input: the predictions reader, flags, outputs, the
failure gallery and the messages.

Every check asserts exact values (counts, metrics, pixels); nothing is timed.
"""

from __future__ import annotations

import errno
import gzip
import json
import os
import shutil

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PIL import Image, ImageDraw

from groundwork.outputs import OutputError, OutputLock
from gui_grounding.cli import main as cli_main
from gui_grounding.data.annotations import EvalInputError
from gui_grounding.data.schema import Sample
from gui_grounding.eval.backends import open_predictions, prepare_resume, write_records
from gui_grounding.eval.benchmarks import get_benchmark
from gui_grounding.eval.judge import CORRECT, WRONG, WRONG_FORMAT
from gui_grounding.eval.predictions import (
    HARNESS_LOG,
    JSON_LIST,
    JSONL,
    harness_shape_problem,
    load_predictions,
    results_from_predictions,
)
from gui_grounding.eval.report import POINT, TARGET, ZOOM_SIZE, _draw_marks, clip_segment, zoom_box
from gui_grounding.eval.run import run_eval
from tests.helpers.bench import harness_detail, rescore

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MINI = os.path.join(ROOT, "data", "mini_benchmarks")
SSV2, SSPRO = os.path.join(MINI, "screenspot_v2"), os.path.join(MINI, "screenspot_pro")


def centre(s):
    b = s.boxes[0]
    return [(b[0] + b[2]) / 2, (b[1] + b[3]) / 2]


@pytest.fixture(scope="module")
def ssv2():
    bench = get_benchmark("screenspot-v2")
    samples, _ = bench.load(SSV2)
    return bench, samples


def mixed_points(samples):
    """Centre for even samples, a miss for odd ones, null for the last one."""
    points = {}
    for i, s in enumerate(samples):
        points[s.sample_id] = centre(s) if i % 2 == 0 else [s.boxes[0][0] - 5, s.boxes[0][1] - 5]
    points[samples[-1].sample_id] = None
    return points


def expected_correctness(samples):
    out = {s.sample_id: CORRECT if i % 2 == 0 else WRONG for i, s in enumerate(samples)}
    out[samples[-1].sample_id] = WRONG_FORMAT
    return out


def write_bytes(path, data: bytes) -> str:
    with open(path, "wb") as f:
        f.write(data)
    return str(path)


def jsonl(records, ending: str = "\n") -> bytes:
    return "".join(json.dumps(r) + ending for r in records).encode("utf-8")


# ---------------------------------------------------------------------------------------------------------------------
# 1. format by full shape: extra keys never change how a file is read


EXTRAS = {
    "details": [{"img_path": "a.png", "pred": [1, 2]}],
    "metrics": {"overall": {}},
    "malformed": "boom",
    "harness_correctness": "wrong",
    "ref": "elsewhere:1",
    "missing": True,
    "correctness": "correct",
    "gt_type": "negative",
}


def test_extra_keys_score_exactly_as_without_them(ssv2, tmp_path):
    bench, samples = ssv2
    points = mixed_points(samples)
    plain = [{"sample_id": k, "point": p, "raw_response": "r"} for k, p in points.items()]
    extra = [{**r, **EXTRAS} for r in plain]
    m0, r0, rep0 = rescore(bench, samples, write_bytes(tmp_path / "plain.jsonl", jsonl(plain)))
    m1, r1, rep1 = rescore(bench, samples, write_bytes(tmp_path / "extra.jsonl", jsonl(extra)))
    assert m1 == m0 and r1 == r0
    assert {k: v["correctness"] for k, v in r1.items()} == expected_correctness(samples)
    assert rep1.format == rep0.format == JSONL and rep1.counts() == rep0.counts()
    assert rep1.malformed == [] and rep1.harness_disagreements == []
    # a single-line file, and a single object, with "details" and "metrics" are still our predictions
    one = write_bytes(tmp_path / "one.jsonl", jsonl(extra[:1]))
    _, r2, rep2 = rescore(bench, samples, one)
    assert rep2.format == JSONL and rep2.num_predictions == 1 and rep2.malformed == []
    assert r2[samples[0].sample_id]["correctness"] == CORRECT
    one_obj = write_bytes(tmp_path / "one.json", json.dumps(extra[0], indent=2).encode())
    _, r3, rep3 = rescore(bench, samples, one_obj)
    assert rep3.format == JSONL and r3 == r2
    # the kept record carries the user's extras, but never the reader's bookkeeping keys
    preds, _ = load_predictions(one, samples)
    pred = preds[samples[0].sample_id]
    assert pred["details"] == EXTRAS["details"] and pred["ref"] == f"{one}:1" and "malformed" not in pred


def _harness_details(samples, points):
    return [harness_detail(s, points[s.sample_id], img_path=f"/x/{s.extra['img_filename']}") for s in samples]


def test_harness_log_only_by_its_full_shape_or_the_flag(tmp_path):
    bench = get_benchmark("screenspot-pro")
    samples, _ = bench.load(SSPRO)
    points = {s.sample_id: centre(s) for s in samples}
    details = _harness_details(samples, points)
    log = {"metrics": {"overall": {}}, "details": details}
    assert harness_shape_problem(log) is None
    path = write_bytes(tmp_path / "log.json", json.dumps(log, indent=4).encode())
    m, _, rep = rescore(bench, samples, path)
    assert rep.format == HARNESS_LOG and m["overall"]["num_correct_action"] == len(samples) == 9
    # one extra top-level key, or a detail without a harness key: not the harness's shape -> refused in auto mode,
    # with the reason and the flag that reads it anyway
    for broken, why in (
        ({**log, "extra": 1}, "not exactly ['details', 'metrics']"),
        (
            {**log, "details": details[:3] + [{k: v for k, v in details[3].items() if k != "group"}]},
            "details[3] lacks the harness key(s) ['group']",
        ),
    ):
        bad = write_bytes(tmp_path / "bad.json", json.dumps(broken).encode())
        with pytest.raises(EvalInputError, match="neither a predictions JSONL") as err:
            load_predictions(bad, samples)
        assert why in str(err.value) and "--predictions-format harness-log" in str(err.value)
        m, _, rep = rescore(bench, samples, bad, format="harness-log")
        assert rep.format == HARNESS_LOG and m["overall"]["num_total"] == 9
    m, _, rep = rescore(bench, samples, bad, format="harness-log")
    assert m["overall"]["num_correct_action"] == 4  # details[0..3] mapped (the 4th lacks only "group")
    # the flag "jsonl" never takes a file for a harness log: the log is one record without a sample_id -> refused
    with pytest.raises(EvalInputError, match="neither a predictions JSONL"):
        load_predictions(path, samples, format="jsonl")
    # the flag "harness-log" on a predictions JSONL: refused, naming what it found
    lines = write_bytes(tmp_path / "p.jsonl", jsonl([{"sample_id": s.sample_id, "point": None} for s in samples]))
    with pytest.raises(EvalInputError, match=r"harness-log needs one JSON object.*found 9 documents"):
        load_predictions(lines, samples, format="harness-log")
    with pytest.raises(ValueError, match="predictions format must be one of"):
        load_predictions(lines, samples, format="csv")


# ---------------------------------------------------------------------------------------------------------------------
# 2. framing: the shared reader (line endings, a list followed by JSONL)


def test_line_endings_and_framings_score_the_same(ssv2, tmp_path):
    bench, samples = ssv2
    points = mixed_points(samples)
    records = [{"sample_id": k, "point": p, "raw_response": "r"} for k, p in points.items()]
    base_m, base_r, _ = rescore(bench, samples, write_bytes(tmp_path / "lf.jsonl", jsonl(records)))
    for name, ending in (("crlf", "\r\n"), ("cr", "\r")):
        m, r, rep = rescore(bench, samples, write_bytes(tmp_path / f"{name}.jsonl", jsonl(records, ending)))
        assert (m, r) == (base_m, base_r)
        assert rep.num_records == 10 and rep.malformed == []
        assert [p["ref"] for p in load_predictions(str(tmp_path / f"{name}.jsonl"), samples)[0].values()] == [
            f"{tmp_path / name}.jsonl:{i}" for i in range(1, 11)
        ]
    # a raw CR inside a line (between tokens) is whitespace: it splits nothing
    text = b"".join(json.dumps(r).replace(", ", ",\r ").encode() + b"\n" for r in records)
    m, r, rep = rescore(bench, samples, write_bytes(tmp_path / "cr_inside.jsonl", text))
    assert (m, r, rep.num_records, rep.malformed) == (base_m, base_r, 10, [])
    # a JSON list followed by JSONL lines (and JSONL in a file called .json): every prediction is read
    mixed = json.dumps(records[:4], indent=2).encode() + b"\n" + jsonl(records[4:])
    m, r, rep = rescore(bench, samples, write_bytes(tmp_path / "mixed.json", mixed))
    assert (m, r) == (base_m, base_r)
    assert rep.format == JSON_LIST and rep.num_records == rep.num_predictions == 10 and rep.missing == []
    m, r, rep = rescore(bench, samples, write_bytes(tmp_path / "lines.json", jsonl(records)))
    assert (m, r, rep.format, rep.num_predictions) == (base_m, base_r, JSONL, 10)
    # a record that does not parse names its sample whatever the line endings (its text is found by its ref)
    ids = list(points)
    lines = [json.dumps(r) for r in records]
    lines[6] = f'{{"sample_id": "{ids[6]}", "point": [NaN, 2]}}'
    outcomes = []
    for name, ending in (("bad_lf", "\n"), ("bad_crlf", "\r\n"), ("bad_cr", "\r")):
        path = write_bytes(tmp_path / f"{name}.jsonl", "".join(line + ending for line in lines).encode())
        m, r, rep = rescore(bench, samples, path)
        assert rep.malformed_samples == [ids[6]] and [x[0] for x in rep.malformed] == [f"{path}:7"]
        assert r[ids[6]]["correctness"] == WRONG_FORMAT
        outcomes.append((m, r))
    assert outcomes[0] == outcomes[1] == outcomes[2]


def test_unparseable_records_name_their_sample(ssv2, tmp_path):
    bench, samples = ssv2
    ids = [s.sample_id for s in samples]

    def good(i):
        return json.dumps({"sample_id": ids[i], "point": centre(samples[i])})

    nan = f'{{"sample_id": "{ids[1]}", "point": [NaN, 1]}}'
    path = write_bytes(tmp_path / "p.jsonl", f"{good(0)}\n{nan}\n5 {good(2)}\n".encode())
    _, results, rep = rescore(bench, samples, path)
    # the NaN record is wrong_format for its own sample; the number before a good record on line 3 takes nothing
    # from it (its text ends where the next document starts)
    assert [r for r, _ in rep.malformed] == [f"{path}:2", f"{path}:3"]
    assert rep.malformed[0][1].startswith(f"sample {ids[1]}: invalid JSON")
    assert rep.malformed[1][1] == "not a JSON object: int"
    assert rep.malformed_samples == [ids[1]]
    assert [results[i]["correctness"] for i in ids[:3]] == [CORRECT, WRONG_FORMAT, CORRECT]
    # a list element over the float range: wrong_format for its own sample, the next element read
    far = f'{{"sample_id": "{ids[3]}", "point": [1e999, 1]}}'
    path = write_bytes(tmp_path / "l.json", f"[{far}, {good(4)}]".encode())
    _, results, rep = rescore(bench, samples, path)
    assert rep.malformed == [
        (f"{path}:[0]", f"sample {ids[3]}: invalid JSON: number 1e999 is out of range for a float")
    ]
    assert rep.malformed_samples == [ids[3]]
    assert [results[i]["correctness"] for i in ids[3:5]] == [WRONG_FORMAT, CORRECT]


# ---------------------------------------------------------------------------------------------------------------------
# 3. numeric flags


def _cli(args, capsys=None):
    with pytest.raises(SystemExit) as err:
        cli_main(["eval", *args])
    return err.value.code


@pytest.mark.parametrize(
    ("flag", "value", "expected"),
    [
        ("--limit", "-3", "an integer >= 1"),
        ("--limit", "0", "an integer >= 1"),
        ("--limit", "1.5", "integer"),
        ("--batch-size", "0", ">= 1"),
        ("--max-new-tokens", "-1", ">= 1"),
        ("--concurrency", "0", ">= 1"),
        ("--concurrency", "5000", "<= 1024"),
        ("--max-retries", "-1", ">= 0"),
        ("--max-failures", "-1", ">= 0"),
        ("--min-pixels", "0", ">= 1"),
        ("--max-pixels", "nan", ">= 1"),
    ],
)
def test_numeric_flags_are_range_checked(tmp_path, capsys, flag, value, expected):
    code = _cli(
        [
            "--benchmark",
            "screenspot-v2",
            "--data",
            SSV2,
            "--predictions",
            "p.jsonl",
            "--out",
            str(tmp_path / "o"),
            flag,
            value,
        ]
    )
    assert code == 2
    err = capsys.readouterr().err
    assert f"argument {flag}: must be" in err and expected in err
    assert not (tmp_path / "o").exists()  # refused before anything is read or written


def test_option_ranges_for_api_callers_and_help(ssv2, tmp_path, capsys):
    path = write_bytes(tmp_path / "p.jsonl", jsonl([{"sample_id": "screenspot_mobile_v2:0", "point": None}]))
    for kw, match in (
        ({"limit": -1}, "limit must be an integer >= 1"),
        ({"limit": 0}, "limit"),
        ({"limit": True}, "limit"),
        ({"max_failures": -1}, "max_failures"),
        ({"batch_size": 0}, "batch_size"),
        ({"min_pixels": 10, "max_pixels": 5}, "must not exceed"),
    ):
        with pytest.raises(ValueError, match=match):
            run_eval("screenspot-v2", SSV2, str(tmp_path / "o"), predictions=path, **kw)
    assert not (tmp_path / "o").exists()
    # --limit 3: exactly 3 samples scored
    doc = run_eval("screenspot-v2", SSV2, str(tmp_path / "l"), predictions=path, limit=3)
    assert doc["micro_avg"]["num_total"] == 3 and doc["meta"]["num_samples"] == 3
    code = _cli(
        [
            "--benchmark",
            "screenspot-v2",
            "--data",
            SSV2,
            "--model",
            "m",
            "--out",
            str(tmp_path / "x"),
            "--min-pixels",
            "100",
            "--max-pixels",
            "10",
        ]
    )
    assert code == "gui-grounding eval: error: --min-pixels 100 exceeds --max-pixels 10"
    with pytest.raises(SystemExit):
        cli_main(["eval", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    for text in (
        "evaluate only the first N samples (an integer >= 1)",
        "(an integer >= 1 and <= 1024)",
        "wrong samples drawn in failures.html (an integer >= 0)",
        "{auto,jsonl,json-list,harness-log}",
    ):
        assert text in help_text


# ---------------------------------------------------------------------------------------------------------------------
# 4. rescoring needs no pixels: samples with a missing image stay in the denominator


def test_rescoring_keeps_samples_whose_image_is_missing(tmp_path):
    data = tmp_path / "ssv2"
    shutil.copytree(SSV2, data)
    os.remove(data / "screenspotv2_image" / "web_bugs__1024x768.png")  # the 3 web samples' screenshot
    bench = get_benchmark("screenspot-v2")
    full, _ = get_benchmark("screenspot-v2").load(SSV2)
    points = {s.sample_id: centre(s) for s in full}
    path = write_bytes(tmp_path / "p.jsonl", jsonl([{"sample_id": k, "point": p} for k, p in points.items()]))
    # predicting needs the pixels: those records are errors (counted), as before
    samples, report = bench.load(str(data))
    assert len(samples) == 7 and report.counts == {"missing_image": 3}
    # rescoring: all 10 kept, each warned, sizes unknown, no box-vs-image check; the official denominator
    doc = run_eval("screenspot-v2", str(data), str(tmp_path / "out"), predictions=path)
    assert doc["micro_avg"]["num_total"] == 10 and doc["micro_avg"]["num_correct"] == 10
    assert doc["by_platform"]["web"]["num_total"] == 3
    assert doc["data"]["num_samples"] == 10 and doc["data"]["rejected"] == 0
    assert doc["data"]["notes"] == {"image_unavailable_size_unknown": 3}
    assert [w["ref"] for w in doc["data"]["warnings"]] == [f"{data / 'screenspot_web_v2.json'}:[{i}]" for i in range(3)]
    # the failure gallery says "image missing" instead of failing
    wrong = dict(points)
    wrong["screenspot_web_v2:0"] = [-5, -5]
    path2 = write_bytes(tmp_path / "w.jsonl", jsonl([{"sample_id": k, "point": p} for k, p in wrong.items()]))
    doc = run_eval("screenspot-v2", str(data), str(tmp_path / "out2"), predictions=path2)
    page = (tmp_path / "out2" / "failures.html").read_text(encoding="utf-8")
    assert doc["micro_avg"]["num_correct"] == 9 and "image missing (missing_image" in page
    assert "size unknown" in page and os.listdir(tmp_path / "out2" / "failures") == []


def test_rescoring_screenspot_pro_uses_the_stated_size(tmp_path):
    data = tmp_path / "sspro"
    shutil.copytree(SSPRO, data)
    os.remove(data / "images" / "vscode_macos" / "library-json__1280x720.png")
    bench = get_benchmark("screenspot-pro")
    full, _ = bench.load(SSPRO)
    bench.need_pixels = False
    samples, report = bench.load(str(data))
    assert [s.sample_id for s in samples] == [s.sample_id for s in full]
    assert [s.boxes for s in samples] == [s.boxes for s in full]  # not scaled: size = img_size
    vscode = [s for s in samples if s.extra["task_filename"] == "vscode_macos"]
    stated = {r["id"]: r["img_size"] for r in json.loads((data / "annotations" / "vscode_macos.json").read_text())}
    assert len(vscode) == 3 and all([s.width, s.height] == stated[s.sample_id] for s in vscode)
    assert report.notes == {"image_unavailable": 3} and report.rejects == []


# ---------------------------------------------------------------------------------------------------------------------
# 5. outputs: checked first, locked, atomic, summary last


def test_out_is_checked_before_anything_is_read(ssv2, tmp_path):
    path = write_bytes(tmp_path / "p.jsonl", jsonl([{"sample_id": "screenspot_mobile_v2:0", "point": None}]))
    a_file = tmp_path / "file.txt"
    a_file.write_text("x")
    with pytest.raises(OutputError, match="is a file; name a folder"):
        run_eval("screenspot-v2", SSV2, str(a_file), predictions=path)
    assert a_file.read_text() == "x"
    code = _cli(["--benchmark", "screenspot-v2", "--data", SSV2, "--predictions", path, "--out", str(a_file)])
    assert code.startswith("gui-grounding eval: error: --out") and "\n" not in code
    data = tmp_path / "ssv2"
    shutil.copytree(SSV2, data)
    with pytest.raises(OutputError, match="is one of the inputs"):
        run_eval("screenspot-v2", str(data), str(data), predictions=path)
    out = tmp_path / "out"
    out.mkdir()
    inside = write_bytes(out / "metrics.json", b"{}")
    with pytest.raises(OutputError, match="is one of the inputs"):
        run_eval("screenspot-v2", SSV2, str(out), predictions=inside)
    # a second run on a locked --out fails at once
    with OutputLock(str(out), folder=True), pytest.raises(OutputError, match="another run is writing"):
        run_eval("screenspot-v2", SSV2, str(out), predictions=path)
    assert (out / "metrics.json").read_bytes() == b"{}"  # nothing touched


def test_disk_full_leaves_no_summary(ssv2, tmp_path, monkeypatch):
    path = write_bytes(tmp_path / "p.jsonl", jsonl([{"sample_id": "screenspot_mobile_v2:0", "point": [-1, -1]}]))
    out = tmp_path / "out"
    run_eval("screenspot-v2", SSV2, str(out), predictions=path)
    assert (out / "metrics.json").exists() and (out / "failures.html").exists()
    real_fsync = os.fsync

    def fsync(fd):  # the disk fills up while failures.html is written
        if "failures.html" in os.readlink(f"/proc/self/fd/{fd}"):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    with pytest.raises(OutputError, match="No space left on device"):
        run_eval("screenspot-v2", SSV2, str(out), predictions=path)
    assert not (out / "metrics.json").exists()  # the earlier summary went first; the new one never came
    assert sorted(n for n in os.listdir(out) if n.endswith(".tmp") or n.startswith(".")) == []
    code = _cli(["--benchmark", "screenspot-v2", "--data", SSV2, "--predictions", path, "--out", str(out)])
    assert "No space left on device" in code and "\n" not in code
    assert not (out / "metrics.json").exists()
    monkeypatch.setattr(os, "fsync", real_fsync)
    run_eval("screenspot-v2", SSV2, str(out), predictions=path)
    assert json.loads((out / "metrics.json").read_text())["micro_avg"]["num_total"] == 10


def test_resume_file_is_rewritten_atomically_and_appended_whole(tmp_path):
    path = tmp_path / "predictions.jsonl"
    (tmp_path / "predictions.jsonl.tmp").mkdir()  # the old fixed temp name: in the way of nothing now
    path.write_bytes(b'{"sample_id": "a", "point": [1, 2]}\n{"sample_id": "b", "point": "x"}\n{"sample_id": "c"')
    samples = [Sample(sid, "i", "x.png", [(0, 0, 1, 1)], 10, 10) for sid in ("a", "b", "c", "d")]
    out, todo = open_predictions(str(path), samples)
    assert [s.sample_id for s in todo] == ["b", "c", "d"]
    assert path.read_bytes() == b'{"sample_id": "a", "point": [1, 2]}\n'
    assert sorted(os.listdir(tmp_path)) == ["predictions.jsonl", "predictions.jsonl.tmp"]
    with out:
        write_records(
            out,
            [
                {"sample_id": "b", "point": [float("nan"), 1.0], "raw_response": "nan"},
                {"sample_id": "c", "point": None, "raw_response": "lone \ud800 surrogate"},
                {"sample_id": "d", "point": [3.0, 4.0], "raw_response": "line\nbreak é"},
            ],
        )
    lines = path.read_bytes().split(b"\n")
    assert len(lines) == 5 and lines[-1] == b""
    recs = [json.loads(line.decode("utf-8")) for line in lines[:-1]]  # every line valid UTF-8 and strict JSON
    assert recs[1] == {"sample_id": "b", "point": None, "raw_response": "nan", "invalid_point": "[nan, 1.0]"}
    assert recs[2]["raw_response"] == "lone \ud800 surrogate" and recs[3]["raw_response"] == "line\nbreak é"
    assert prepare_resume(str(path)) == {"a", "b", "c", "d"}


# ---------------------------------------------------------------------------------------------------------------------
# 6. the gallery clips every mark to the picture


def test_clip_segment():
    size = (100, 50)
    assert clip_segment((10, 10), (20, 20), size) == ((10, 10), (20, 20))
    (ax, ay), (bx, by) = clip_segment((-1e7, 10), (1e7, 10), size)
    assert (ax, ay, by) == (-16.0, 10.0, 10.0) and bx == pytest.approx(116.0)
    assert clip_segment((-1e7, -1e7), (-1e7, 1e7), size) is None
    (ax, ay), (bx, by) = clip_segment((0, -1e7), (0, 1e7), size)
    assert (ax, ay, bx) == (0.0, -16.0, 0.0) and by == pytest.approx(66.0)


def _colours(im):
    return {im.getpixel((x, y)) for x in range(im.width) for y in range(im.height)}


def test_extreme_boxes_and_points_are_drawn_clipped():
    white = (255, 255, 255)
    # a box around the whole picture, 1e7 px out on every side: no edge is inside it, nothing green is drawn
    s = Sample("s", "i", "x.png", [(-1e7, -1e7, 1e7, 1e7)], 100, 50, polygons=[[(-1e7, -1e7), (1e7, -1e7), (0, 1e7)]])
    im = Image.new("RGB", (100, 50), white)
    _draw_marks(ImageDraw.Draw(im), s, None, 0, 0, 1.0, 1.0, im.size)
    assert _colours(im) == {white}
    # a box from (10, 10) to 1e7 to the right: its top and bottom edges run to the picture's edge, its right edge
    # is not drawn; a point at (1e7, 1e7) is the marker at the bottom-right corner
    s = Sample("s", "i", "x.png", [(10, 10, 1e7, 20)], 100, 50)
    im = Image.new("RGB", (100, 50), white)
    _draw_marks(ImageDraw.Draw(im), s, [1e7, 1e7], 0, 0, 1.0, 1.0, im.size)
    assert all(im.getpixel((x, 10)) == TARGET for x in range(10, 80))
    assert all(im.getpixel((x, 20)) == TARGET for x in range(10, 80))
    assert all(im.getpixel((10, y)) == TARGET for y in range(10, 21))
    assert im.getpixel((99, 15)) == white
    assert im.getpixel((99, 49)) == POINT and im.getpixel((88, 49)) == POINT
    # the zoom window lies inside the image whatever the extent
    assert zoom_box(Sample("s", "i", "x.png", [(-1e7, -1e7, 1e7, 1e7)], 100, 50), None, 100, 50) == (0, 0, 100, 50)
    assert zoom_box(Sample("s", "i", "x.png", [(1e7, 1e7, 1e7 + 1, 1e7 + 1)], 100, 50), None, 100, 50) is None


def test_gallery_on_extreme_predictions_and_targets(tmp_path):
    image = tmp_path / "shot.png"
    Image.new("RGB", (1600, 900), (250, 250, 250)).save(image)
    samples = [
        Sample("big", "i", str(image), [(-1e7, 5, 1e7, 1e7)], 1600, 900),
        Sample("far", "i", str(image), [(100, 100, 200, 150)], 1600, 900),
    ]
    preds = {"big": {"sample_id": "big", "point": [1e7, -1e7]}, "far": {"sample_id": "far", "point": [-1e7, 1e7]}}
    from gui_grounding.eval.report import write_failures_html

    results = {sid: {"correctness": WRONG, "point": p["point"], "missing": False} for sid, p in preds.items()}
    write_failures_html(str(tmp_path / "out"), samples, results, preds)
    names = sorted(os.listdir(tmp_path / "out" / "failures"))
    assert names == ["0001.jpg", "0001_zoom.jpg", "0002.jpg", "0002_zoom.jpg"]
    for name in names:
        with Image.open(tmp_path / "out" / "failures" / name) as im:
            limit = ZOOM_SIZE if "zoom" in name else (800, 450)
            assert im.width <= limit[0] and im.height <= limit[1]
    page = (tmp_path / "out" / "failures.html").read_text(encoding="utf-8")
    assert "(1e+07, -1e+07) px -- outside the 1600x900 image (marker at the edge)" in page


# ---------------------------------------------------------------------------------------------------------------------
# 7. messages name the actual problem


def test_messages_name_the_problem(ssv2, tmp_path):
    bench, samples = ssv2
    records = [{"sample_id": s.sample_id, "point": centre(s)} for s in samples]
    gz = tmp_path / "p.jsonl.gz"
    gz.write_bytes(gzip.compress(jsonl(records)))
    with pytest.raises(EvalInputError, match=r"p\.jsonl\.gz: the file is gzip-compressed .*gunzip"):
        load_predictions(str(gz), samples)
    utf16 = write_bytes(tmp_path / "p16.jsonl", jsonl(records).decode().encode("utf-16"))
    with pytest.raises(EvalInputError, match="UTF-16 text"):
        load_predictions(utf16, samples)
    code = _cli(
        ["--benchmark", "screenspot-v2", "--data", SSV2, "--predictions", str(gz), "--out", str(tmp_path / "o")]
    )
    assert "gzip-compressed" in code and "\n" not in code
    assert not (tmp_path / "o" / "metrics.json").exists()
    with pytest.raises(EvalInputError, match="is a folder; name a predictions file"):
        load_predictions(str(tmp_path), samples)
    # a path that is not UTF-8: read and written; messages show its bytes as \xNN
    odd = os.fsdecode(str(tmp_path).encode() + b"/pred\xff.jsonl")
    write_bytes(odd, jsonl(records))
    out = os.fsdecode(str(tmp_path).encode() + b"/out\xfe")
    doc = run_eval("screenspot-v2", SSV2, out, predictions=odd)
    assert doc["micro_avg"]["num_correct"] == 10
    with open(os.path.join(out, "metrics.json"), encoding="ascii") as f:  # strict, ASCII-escaped JSON
        assert json.load(f)["predictions"]["path"] == odd
    missing = os.fsdecode(str(tmp_path).encode() + b"/gone\xff.jsonl")
    with pytest.raises(FileNotFoundError) as err:
        load_predictions(missing, samples)
    assert str(err.value).endswith("gone\\xff.jsonl") and str(err.value).encode("utf-8")
    # a benchmark file that is not JSON text: one error for the file, in the predictions reader's words
    canon = tmp_path / "canon.jsonl"
    canon.write_bytes(gzip.compress(b'{"instruction": "x"}\n'))
    with pytest.raises(EvalInputError, match=r"canon\.jsonl: the file is gzip-compressed .*gunzip"):
        run_eval("canonical", str(canon), str(tmp_path / "c"), predictions=str(gz))


# ---------------------------------------------------------------------------------------------------------------------
# 8. property: any predictions file is read without a crash, every sample scored exactly once, deterministically

SAMPLES = get_benchmark("screenspot-v2").load(SSV2)[0]
IDS = [s.sample_id for s in SAMPLES]

_points = st.one_of(
    st.none(),
    st.lists(st.floats(allow_nan=False, allow_infinity=False, width=32), min_size=2, max_size=2),
    st.lists(st.integers(min_value=-(10**20), max_value=10**20), min_size=2, max_size=2),
    st.sampled_from(["12", "NaN", "nan", "Infinity", [True, False], [1, 2, 3], {"x": 1}, [], [[1, 2]]]),
)
_ids = st.one_of(st.sampled_from(IDS), st.sampled_from(["ghost", "", 7, None, True, 1.5, ["a"]]))
_extras = st.dictionaries(
    st.sampled_from(["details", "metrics", "raw_response", "malformed", "ref", "x"]),
    st.one_of(st.none(), st.text(max_size=5), st.integers(), st.lists(st.integers(), max_size=2)),
    max_size=3,
)


@st.composite
def _line(draw) -> bytes:
    kind = draw(st.sampled_from(["record", "record", "record", "raw", "junk"]))
    if kind == "record":
        rec = {**draw(_extras), "sample_id": draw(_ids), "point": draw(_points)}
        if draw(st.booleans()):
            del rec["point"]
        return json.dumps(rec).encode()
    if kind == "raw":  # a point written as given: NaN tokens, huge numbers, bad syntax
        token = draw(
            st.sampled_from(
                [
                    "[NaN, 1]",
                    "[1e999, 2]",
                    "[" + "9" * 5000 + ", 1]",
                    "[1, Infinity]",
                    "[-0.0, 1e-400]",
                    "[1, 2",
                    "[" * 300,
                ]
            )
        )
        return (
            b'{"sample_id": ' + json.dumps(draw(st.sampled_from(IDS))).encode() + b', "point": ' + token.encode() + b"}"
        )
    return draw(
        st.sampled_from(
            [
                b"\xff\xfe\x00garbage",
                b"[",
                b"]",
                b"{}",
                b"[1, 2]",
                b"null",
                b'"sample_id": "x"',
                b"\x1f\x8b",
                b"",
                b"   ",
                b'{"sample_id": "a\xff", "point": null}',
            ]
        )
    )


def _check_any_predictions_file(path: str, on_duplicate: str) -> None:
    bench = get_benchmark("screenspot-v2")
    outcomes = []
    for _ in range(2):
        try:
            preds, report = load_predictions(path, SAMPLES, on_duplicate=on_duplicate)
        except EvalInputError as err:  # the documented refusal: one line
            assert "\n" not in str(err)
            outcomes.append(("refused", str(err)))
            continue
        results = results_from_predictions(SAMPLES, preds, report)
        assert list(results) == IDS  # every sample exactly once
        metrics = bench.metrics(SAMPLES, results)
        assert metrics["micro_avg"]["num_total"] == len(SAMPLES)
        assert set(preds) <= set(IDS) and report.num_predictions == len(preds)
        assert len(report.missing) == len(SAMPLES) - len(preds)
        assert sum(r["correctness"] == CORRECT for r in results.values()) == metrics["micro_avg"]["num_correct"]
        json.dumps(report.to_dict(), allow_nan=False)  # the summary stays strict JSON
        outcomes.append((results, metrics, report.counts()))
    assert outcomes[0] == outcomes[1]


_files = {
    "lines": st.lists(_line(), max_size=12),
    "endings": st.lists(st.sampled_from([b"\n", b"\r\n", b"\r"]), min_size=1),
    "bom": st.booleans(),
    "on_duplicate": st.sampled_from(["error", "first", "last"]),
}


def _file_bytes(lines, endings, bom) -> bytes:
    body = b"".join(line + endings[i % len(endings)] for i, line in enumerate(lines))
    return (b"\xef\xbb\xbf" if bom else b"") + body


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(**_files)
def test_property_any_predictions_file(tmp_path_factory, lines, endings, bom, on_duplicate):
    path = write_bytes(tmp_path_factory.mktemp("prop") / "p.jsonl", _file_bytes(lines, endings, bom))
    _check_any_predictions_file(path, on_duplicate)


@pytest.mark.slow
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(**_files, suffix=st.sampled_from([".jsonl", ".json"]))
def test_property_any_predictions_file_deep(tmp_path_factory, lines, endings, bom, on_duplicate, suffix):
    path = write_bytes(tmp_path_factory.mktemp("prop") / f"p{suffix}", _file_bytes(lines, endings, bom))
    _check_any_predictions_file(path, on_duplicate)
