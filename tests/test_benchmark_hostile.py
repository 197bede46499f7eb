"""Benchmarks on hostile and odd input: official denominators, warnings not drops, refusals as one-line errors.

Crafted from the committed mini benchmarks (data/mini_benchmarks/) and small synthetic images. Every metric table is
checked exactly: a sample the official harness would score stays in the denominator (box past the image edge, box
outside the image as we read it, EXIF-rotated image, malformed prediction line), and only what the harness itself
cannot score (missing image, unparseable element) is an error with a count.
"""

from __future__ import annotations

import json
import os
import shutil

import pytest
from helpers.wilson import expected_cell
from PIL import Image

from gui_grounding.cli import main as cli_main
from gui_grounding.data.annotations import DuplicateIdError, EvalInputError
from gui_grounding.eval.benchmarks import get_benchmark
from gui_grounding.eval.judge import CORRECT, WRONG, WRONG_FORMAT
from gui_grounding.eval.predictions import load_predictions
from gui_grounding.eval.run import run_eval
from tests.helpers.bench import harness_detail, rescore

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MINI = os.path.join(ROOT, "data", "mini_benchmarks")
SSV2, SSPRO, OSWG = (os.path.join(MINI, n) for n in ("screenspot_v2", "screenspot_pro", "osworld_g"))


def c(correct, total, wf=0):
    """Expected accuracy cell, with its 95% Wilson interval from the closed form (tests/helpers/wilson.py)."""
    return expected_cell(correct, total, wf)


def centre(s):
    b = s.boxes[0]
    return [(b[0] + b[2]) / 2, (b[1] + b[3]) / 2]


def write_lines(path, lines: list, bom: bool = False) -> str:
    """Write ``lines`` (dicts become JSON, str and bytes are written as given) one per line."""
    data = b"\xef\xbb\xbf" if bom else b""
    for line in lines:
        if isinstance(line, dict):
            line = json.dumps(line)
        data += (line if isinstance(line, bytes) else line.encode("utf-8")) + b"\n"
    with open(path, "wb") as f:
        f.write(data)
    return str(path)


def raw_line(sample_id: str, point_text: str) -> str:
    """A predictions line whose ``point`` is written as given (``NaN``, 400 digits, deep nesting, ...)."""
    return '{"sample_id": ' + json.dumps(sample_id) + ', "point": ' + point_text + "}"


def strict_json(path):
    """metrics.json parsed with NaN/Infinity refused (it must be strict JSON)."""

    def refuse(token):
        raise ValueError(f"non-JSON token {token}")

    with open(path, encoding="utf-8") as f:
        return json.load(f, parse_constant=refuse)


@pytest.fixture()
def ssv2_copy(tmp_path):
    data = tmp_path / "ssv2"
    shutil.copytree(SSV2, data)
    return data


# ---------------------------------------------------------------------------------------------------------------------
# odd boxes: warned, kept, scored unclipped


def test_ssv2_odd_boxes_keep_the_official_denominator(ssv2_copy, tmp_path):
    web = ssv2_copy / "screenspot_web_v2.json"
    records = json.loads(web.read_text(encoding="utf-8"))
    records[0]["bbox"] = [760, 500, 20, 20]  # 768x512 image: past the right and bottom edges
    records[1]["bbox"] = [800, 10, 20, 20]  # entirely right of the image
    records[2]["bbox"] = [337, 21, -5, 17]  # negative width: inverted, no point can hit it (as in the harness)
    web.write_text(json.dumps(records), encoding="utf-8")
    bench = get_benchmark("screenspot-v2")
    samples, report = bench.load(str(ssv2_copy))
    assert (report.num_records, report.num_samples, report.rejects) == (10, 10, [])
    assert report.notes == {"box_partly_outside_image": 1, "box_outside_image": 1, "inverted_box": 1}
    points = {s.sample_id: centre(s) for s in samples}
    points["screenspot_web_v2:0"] = [775, 515]  # beyond the image, inside the unclipped box: the harness counts it
    points["screenspot_web_v2:1"] = [810, 20]
    path = write_lines(tmp_path / "p.jsonl", [{"sample_id": k, "point": p} for k, p in points.items()])
    m, results, _ = rescore(bench, samples, path)
    assert results["screenspot_web_v2:0"]["correctness"] == CORRECT
    assert results["screenspot_web_v2:1"]["correctness"] == CORRECT
    assert results["screenspot_web_v2:2"]["correctness"] == WRONG
    assert m["by_platform"] == {"mobile": c(4, 4), "desktop": c(3, 3), "web": c(2, 3)}
    assert m["by_platform_ui_type"]["web"] == {"text": c(2, 2), "icon": c(0, 1)}
    assert {k: m["micro_avg"][k] for k in ("num_correct", "num_total")} == {"num_correct": 9, "num_total": 10}
    assert m["macro_avg"]["accuracy"] == round(100 * 5 / 6, 2)
    # every warning is listed in metrics.json with its ref
    out = tmp_path / "out"
    doc = run_eval("screenspot-v2", str(ssv2_copy), str(out), predictions=path)
    saved = strict_json(out / "metrics.json")
    assert saved["data"]["num_samples"] == 10 and saved["data"]["rejected"] == 0
    assert saved["data"]["num_warnings"] == 3 and saved["data"]["warnings_omitted"] == 0
    assert [w["ref"] for w in saved["data"]["warnings"]] == [f"{web}:[{i}]" for i in range(3)]
    assert saved["data"]["notes"] == {"box_outside_image": 1, "box_partly_outside_image": 1, "inverted_box": 1}
    assert doc["micro_avg"]["num_total"] == 10
    assert "Warnings (kept and scored): 3" in (out / "results.md").read_text(encoding="utf-8")


def test_only_what_the_harness_cannot_score_is_an_error(ssv2_copy):
    web = ssv2_copy / "screenspot_web_v2.json"
    records = json.loads(web.read_text(encoding="utf-8"))
    good = records[0]
    records += [
        {**good, "img_filename": "nope.png"},  # [3] missing image
        {**good, "bbox": [1, 2, 10**400, 4]},  # [4] a 400-digit number is no box
        {**good, "bbox": [1, 2, float("nan"), 4]},  # [5] NaN
        {**good, "bbox": [1, 2, True, 4]},  # [6] boolean
        {**good, "instruction": ""},  # [7] empty instruction: scored, warned
        7,  # [8] not an object
        {**good, "img_filename": "../../etc/passwd"},  # [9] climbs out of the image folder
        {**good, "instruction": "Click \ud800"},
    ]  # [10] lone surrogate: no model can read it
    web.write_text(json.dumps(records), encoding="utf-8")
    # a BOM on an annotation file is accepted; an element nested too deeply or over the parser's digit limit is one
    # error, and the elements after it are still scored
    desktop = ssv2_copy / "screenspot_desktop_v2.json"
    desktop.write_bytes(b"\xef\xbb\xbf" + desktop.read_bytes())
    mobile = ssv2_copy / "screenspot_mobile_v2.json"
    elements = [json.dumps(r) for r in json.loads(mobile.read_text(encoding="utf-8"))]
    elements.insert(1, "[" * 100_000 + "]" * 100_000)
    elements.insert(3, '{"bbox": [' + "7" * 5000 + "]}")
    mobile.write_text("[" + ", ".join(elements) + "]", encoding="utf-8")
    samples, report = get_benchmark("screenspot-v2").load(str(ssv2_copy))
    assert report.num_samples == len(samples) == 4 + 3 + 4
    assert [s.sample_id for s in samples][:4] == [f"screenspot_mobile_v2:{i}" for i in (0, 2, 4, 5)]
    assert [(r, why) for r, why, _ in report.rejects] == [
        (f"{mobile}:[1]", "unparseable_record"),
        (f"{mobile}:[3]", "unparseable_record"),
        (f"{web}:[3]", "missing_image"),
        (f"{web}:[4]", "bad_box"),
        (f"{web}:[5]", "bad_box"),
        (f"{web}:[6]", "bad_box"),
        (f"{web}:[8]", "unparseable_record"),
        (f"{web}:[9]", "path_outside_root"),
        (f"{web}:[10]", "bad_text"),
    ]
    assert "nested too deeply" in report.rejects[0][2] and "digit" in report.rejects[1][2]
    assert "more characters" in report.rejects[3][2]  # the 400 digits are cut in the message
    assert report.notes == {"empty_instruction": 1}


def _exif_rotated_jpeg(path, raw_size=(200, 100), orientation=6):
    im = Image.new("RGB", raw_size, (200, 200, 200))
    exif = Image.Exif()
    exif[0x0112] = orientation
    im.save(path, exif=exif)


def test_exif_rotated_image_stays_in_the_denominator(ssv2_copy, tmp_path):
    """A box drawn on the displayed (rotated) frame is scored whatever size we read for the image."""
    img_dir = ssv2_copy / "screenspotv2_image"
    _exif_rotated_jpeg(img_dir / "rotated.jpg")  # raw 200x100, displayed 100x200
    web = ssv2_copy / "screenspot_web_v2.json"
    records = json.loads(web.read_text(encoding="utf-8"))
    records.append({**records[0], "img_filename": "rotated.jpg", "bbox": [20, 150, 40, 40]})  # below y=100
    web.write_text(json.dumps(records), encoding="utf-8")
    bench = get_benchmark("screenspot-v2")
    samples, report = bench.load(str(ssv2_copy))
    assert (report.num_samples, report.rejects) == (11, [])
    assert set(report.notes) <= {"box_outside_image", "box_partly_outside_image"}  # depends on EXIF-aware sizes
    points = {s.sample_id: centre(s) for s in samples}
    m, results, _ = rescore(
        bench, samples, write_lines(tmp_path / "p.jsonl", [{"sample_id": k, "point": p} for k, p in points.items()])
    )
    assert results["screenspot_web_v2:3"]["correctness"] == CORRECT
    assert m["by_platform"]["web"] == c(4, 4)
    # canonical data: same rule (never clipped, never dropped)
    (tmp_path / "canon").mkdir()
    _exif_rotated_jpeg(tmp_path / "canon" / "r.jpg")
    rec = {
        "sample_id": "r0",
        "instruction": "Click it",
        "image_path": "r.jpg",
        "target_bbox": {"x_min": 20, "y_min": 150, "x_max": 60, "y_max": 190},
    }
    write_lines(
        tmp_path / "canon" / "test.jsonl",
        [rec, {**rec, "sample_id": "r1", "target_bbox": {"x_min": 90, "y_min": 95, "x_max": 130, "y_max": 120}}],
    )
    canon = get_benchmark("canonical")
    got, rep = canon.load(str(tmp_path / "canon"))
    assert [s.sample_id for s in got] == ["r0", "r1"] and rep.rejects == []
    assert got[0].boxes == [(20.0, 150.0, 60.0, 190.0)] and got[1].boxes == [(90.0, 95.0, 130.0, 120.0)]
    assert rep.notes.get("box_partly_outside_image", 0) + rep.notes.get("box_outside_image", 0) >= 1
    m, _, _ = rescore(
        canon,
        got,
        write_lines(
            tmp_path / "c.jsonl", [{"sample_id": "r0", "point": [40, 170]}, {"sample_id": "r1", "point": [125, 118]}]
        ),
    )
    assert m["overall"] == c(2, 2)


# ---------------------------------------------------------------------------------------------------------------------
# duplicate ids in benchmark files


def test_duplicate_id_in_canonical_file_is_an_error_naming_it(tmp_path):
    src = os.path.join(ROOT, "data", "web_sample", "test.jsonl")
    with open(src, encoding="utf-8") as f:
        lines = [json.loads(x) for x in f][:3]
    for rec in lines:
        rec["image_path"] = os.path.join(ROOT, "data", "web_sample", rec["image_path"])
    lines.append({**lines[0], "instruction": "Another target, same id"})
    path = write_lines(tmp_path / "test.jsonl", lines)
    sid = lines[0]["sample_id"]
    with pytest.raises(DuplicateIdError, match=f"1 duplicate sample id.*'{sid}' at {path}:1 and {path}:4"):
        get_benchmark("canonical").load(path)
    with pytest.raises(SystemExit) as err:
        cli_main(
            ["eval", "--benchmark", "canonical", "--data", path, "--predictions", path, "--out", str(tmp_path / "out")]
        )
    message = str(err.value.code)
    assert message.startswith("gui-grounding eval: error: ") and sid in message and "\n" not in message


# ---------------------------------------------------------------------------------------------------------------------
# duplicate predictions


def test_duplicate_predictions_error_first_last(tmp_path):
    bench = get_benchmark("screenspot-v2")
    samples, _ = bench.load(SSV2)
    lines = [{"sample_id": s.sample_id, "point": centre(s)} for s in samples]
    lines.append({"sample_id": samples[0].sample_id, "point": [-5, -5]})  # the same sample again, now wrong
    path = write_lines(tmp_path / "dup.jsonl", lines)
    with pytest.raises(EvalInputError, match=f"'{samples[0].sample_id}' at {path}:1 and {path}:11.*--on-duplicate"):
        load_predictions(path, samples)
    m_first, _, rep = rescore(bench, samples, path, on_duplicate="first")
    assert m_first["by_platform"]["mobile"] == c(4, 4) and rep.duplicates == [(f"{path}:11", samples[0].sample_id)]
    m_last, _, _ = rescore(bench, samples, path, on_duplicate="last")
    assert m_last["by_platform"]["mobile"] == c(3, 4)
    assert m_last["by_platform_ui_type"]["mobile"] == {"text": c(2, 3), "icon": c(1, 1)}
    # through run_eval and the CLI flag
    with pytest.raises(EvalInputError, match="duplicate prediction"):
        run_eval("screenspot-v2", SSV2, str(tmp_path / "e"), predictions=path)
    doc = run_eval("screenspot-v2", SSV2, str(tmp_path / "l"), predictions=path, on_duplicate="last")
    assert doc["micro_avg"]["num_correct"] == 9 and doc["predictions"]["on_duplicate"] == "last"
    assert doc["predictions"]["duplicates"] == 1
    eval_args = ["eval", "--benchmark", "screenspot-v2", "--data", SSV2, "--predictions", path]
    cli_main([*eval_args, "--out", str(tmp_path / "f"), "--on-duplicate", "first"])
    saved = strict_json(tmp_path / "f" / "metrics.json")
    assert saved["micro_avg"]["num_correct"] == 10 and saved["meta"]["on_duplicate"] == "first"
    with pytest.raises(SystemExit) as err:
        cli_main([*eval_args, "--out", str(tmp_path / "g")])
    assert "duplicate prediction" in str(err.value.code) and "\n" not in str(err.value.code)


def test_harness_log_repeated_keys_are_exempt(tmp_path):
    bench = get_benchmark("screenspot-pro")
    samples, _ = bench.load(SSPRO)
    # the first sample twice, with its id (the serial script's log)
    details = [
        {"id": s.sample_id, **harness_detail(s, centre(s), img_path=s.image_path)} for s in samples + samples[:1]
    ]
    details[-1]["pred"] = [-1, -1]
    path = tmp_path / "log.json"
    path.write_text(json.dumps({"metrics": {}, "details": details}), encoding="utf-8")
    m, _, rep = rescore(bench, samples, path)  # no error: harness logs repeat keys
    assert rep.format == "screenspot_pro_log" and rep.duplicates == [(f"{path}:details[9]", samples[0].sample_id)]
    assert m["overall"]["num_correct_action"] == 8 and m["overall"]["num_total"] == 9  # the later detail counts
    m, _, _ = rescore(bench, samples, path, on_duplicate="first")
    assert m["overall"]["num_correct_action"] == 9


# ---------------------------------------------------------------------------------------------------------------------
# malformed prediction lines


def test_malformed_lines_are_wrong_format_and_counted(tmp_path):
    bench = get_benchmark("screenspot-v2")
    samples, _ = bench.load(SSV2)
    ids = [s.sample_id for s in samples]
    lines = [
        {"sample_id": ids[0], "point": centre(samples[0])},  # 1: after a BOM, still read
        raw_line(ids[1], "[NaN, 3]"),  # 2 NaN
        raw_line(ids[2], f"[{'9' * 400}, 3]"),  # 3: 400 digits
        raw_line(ids[3], f"[{'9' * 5000}, 3]"),  # 4: over the parser's digit limit
        b'{"sample_id": "' + ids[4].encode() + b'", "point": [1, 2], "raw_response": "\xff\xfe"}',  # 5: not UTF-8
        raw_line(ids[5], "[" * 100_000 + "]" * 100_000),  # 6: deep nesting
        {"sample_id": ids[6], "point": "no number here"},  # 7
        raw_line(ids[7], "[1e400, Infinity]"),  # 8: inf
        {"sample_id": ids[8], "point": [True, False]},  # 9: booleans
        "[" * 50_000,  # 10: deep and broken, no sample_id
        {"sample_id": ids[9], "point": centre(samples[9]), "raw_response": "\ud800 lone surrogate"},  # 11: fine
    ]
    path = write_lines(tmp_path / "hostile.jsonl", lines, bom=True)
    m, results, rep = rescore(bench, samples, path)
    assert [r for r, _ in rep.malformed] == [f"{path}:{n}" for n in range(2, 11)]
    assert rep.malformed_samples == ids[1:9]
    assert [results[i]["correctness"] for i in ids] == [CORRECT] + [WRONG_FORMAT] * 8 + [CORRECT]
    assert rep.counts() == {
        "records": 11,
        "predictions": 10,
        "malformed": 9,
        "malformed_samples": 8,
        "unknown_ids": 0,
        "bad_values": 0,
        "duplicates": 0,
        "not_mapped": 0,
        "missing": 0,
        "harness_disagreements": 0,
    }
    assert m["by_platform"] == {"mobile": c(1, 4, 3), "desktop": c(0, 3, 3), "web": c(1, 3, 2)}
    assert m["micro_avg"]["num_total"] == 10 and m["micro_avg"]["wrong_format"] == 8
    # end to end: no crash, strict metrics.json, the reports are written
    out = tmp_path / "out"
    run_eval("screenspot-v2", SSV2, str(out), predictions=path)
    saved = strict_json(out / "metrics.json")
    assert saved["predictions"]["malformed"] == 9 and saved["predictions"]["malformed_samples"] == 8
    assert saved["micro_avg"] == {**c(2, 10, 8), "definition": "correct / total over all samples"}
    assert "malformed prediction record" in (out / "failures.html").read_text(encoding="utf-8")


def test_malformed_answer_on_a_refusal_item_is_not_an_abstention(tmp_path):
    bench = get_benchmark("osworld-g")
    samples, _ = bench.load(OSWG)
    by_id = {s.sample_id: s for s in samples}
    assert by_id["mini_3"].refusal and by_id["mini_7"].refusal
    path = write_lines(tmp_path / "p.jsonl", [raw_line("mini_3", "[NaN, 1]"), {"sample_id": "mini_7", "point": None}])
    m, results, _ = rescore(bench, samples, path)
    # a null point is no answer, not the refusal answer (the official rule: only a refusal answer, parsed to negative
    # coordinates, abstains; gui_grounding.eval.judge)
    assert (results["mini_3"]["correctness"], results["mini_7"]["correctness"]) == (WRONG_FORMAT, WRONG_FORMAT)
    assert m["by_box_type"]["refusal"] == c(0, 2, 2) and m["overall"] == c(0, 8, 8)


# ---------------------------------------------------------------------------------------------------------------------
# predictions given as a JSON list


def test_json_list_predictions(tmp_path):
    bench = get_benchmark("screenspot-v2")
    samples, _ = bench.load(SSV2)
    items = [{"sample_id": s.sample_id, "point": centre(s)} for s in samples[:9]] + [7]
    path = tmp_path / "list.json"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(items, indent=2).encode())
    m, _, rep = rescore(bench, samples, path)
    assert rep.format == "json_list" and rep.malformed == [(f"{path}:[9]", "not a JSON object: int")]
    assert m["by_platform"] == {"mobile": c(4, 4), "desktop": c(3, 3), "web": c(2, 3, 1)}
    # one element over the parser's digit limit, one nested too deeply, one not UTF-8: each is one malformed record,
    # the elements after them are read (pretty-printed or not)
    text = json.dumps(items[:9], indent=2)[:-1]
    text += ',\n  {"sample_id": "x", "point": [' + "1" * 5000 + ", 1]}"
    text += ',\n  {"sample_id": "y",\n "point": ' + "[" * 100_000 + "]" * 100_000 + "}"
    broken = tmp_path / "broken.json"
    broken.write_bytes(text.encode() + b',\n  {"sample_id": "z\xff"},\n  ' + json.dumps(items[-1]).encode() + b"\n]")
    m, _, rep = rescore(bench, samples, broken)
    assert rep.format == "json_list" and rep.num_records == 13
    assert [r for r, _ in rep.malformed] == [f"{broken}:[{i}]" for i in (9, 10, 11, 12)]
    assert "digit" in rep.malformed[0][1] and "nested too deeply" in rep.malformed[1][1]
    assert m["by_platform"] == {"mobile": c(4, 4), "desktop": c(3, 3), "web": c(2, 3, 1)}
    # a list with no prediction object in it: refused with one line, never a traceback
    hopeless = tmp_path / "hopeless.json"
    hopeless.write_text("[" + "[" * 100_000 + ", 1e999999999999]", encoding="utf-8")
    with pytest.raises(EvalInputError, match="JSON list that cannot be read.*write JSONL") as err:
        load_predictions(str(hopeless), samples)
    assert "\n" not in str(err.value)
    with pytest.raises(SystemExit) as exit_err:
        cli_main(
            [
                "eval",
                "--benchmark",
                "screenspot-v2",
                "--data",
                SSV2,
                "--predictions",
                str(hopeless),
                "--out",
                str(tmp_path / "o"),
            ]
        )
    assert "JSON list that cannot be read" in str(exit_err.value.code)
    # an object that is no predictions file at all
    other = tmp_path / "metrics.json"
    other.write_text(json.dumps({"overall": {}}), encoding="utf-8")
    with pytest.raises(EvalInputError, match="neither a predictions JSONL"):
        load_predictions(str(other), samples)


def test_resume_drops_hostile_prediction_lines(tmp_path):
    # a resumed --model run reads its own predictions.jsonl: hostile lines are dropped and redone, never a crash
    from gui_grounding.eval.backends import prepare_resume

    path = tmp_path / "predictions.jsonl"
    path.write_bytes(
        b'{"sample_id": "a", "point": [1, 2]}\n'
        + b"[" * 100_000
        + b"\n"
        + b'{"sample_id": '
        + b"9" * 5000
        + b"}\n"
        + b"\xff\xfe\n"
        + b'{"sample_id": "b", "point": null}\n'
    )
    assert prepare_resume(str(path)) == {"a", "b"}
    assert path.read_bytes() == b'{"sample_id": "a", "point": [1, 2]}\n{"sample_id": "b", "point": null}\n'
