"""``gui-grounding compare`` (issue 19): two rescored runs on the committed mini ScreenSpot-v2, sample by sample.

Run A hits samples 0-5, run B hits samples 2, 3, 6 and 7 (of 10): both right 2 (s2, s3), only A 4 (s0, s1, s4, s5),
only B 2 (s6, s7), both wrong 2 (s8, s9)."""

from __future__ import annotations

import argparse
import json
import math
import os

import pytest
from helpers.wilson import ci_text, wilson_closed_form
from PIL import Image, ImageDraw

from gui_grounding.data.schema import Sample
from gui_grounding.eval.benchmarks import get_benchmark
from gui_grounding.eval.compare import COLOUR_A, COLOUR_B, add_parser
from gui_grounding.eval.report import TARGET, _draw_marks
from gui_grounding.eval.run import run_eval

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "data", "mini_benchmarks", "screenspot_v2")


@pytest.fixture(scope="module")
def samples():
    return get_benchmark("screenspot-v2").load(DATA)[0]


def _centre(s) -> list[float]:
    b = s.boxes[0]
    return [(b[0] + b[2]) / 2, (b[1] + b[3]) / 2]


def _run(folder, samples, hit: set[int], none: set[int] = frozenset()) -> str:
    """Rescore predictions that hit the samples at the indices ``hit`` (box centre), give no point at ``none`` and
    click the top-left corner (outside every box) elsewhere; returns the eval output folder."""
    lines = []
    for i, s in enumerate(samples):
        point = _centre(s) if i in hit else None if i in none else [0.5, 0.5]
        lines.append(json.dumps({"sample_id": s.sample_id, "point": point}) + "\n")
    os.makedirs(folder, exist_ok=True)
    preds = os.path.join(folder, "preds.jsonl")
    with open(preds, "w", encoding="utf-8") as f:
        f.writelines(lines)
    out = os.path.join(folder, "eval")
    run_eval("screenspot-v2", DATA, out, predictions=preds, max_failures=0)
    return out


@pytest.fixture(scope="module")
def runs(samples, tmp_path_factory):
    base = tmp_path_factory.mktemp("runs")
    a = _run(str(base / "a"), samples, hit={0, 1, 2, 3, 4, 5}, none={9})
    b = _run(str(base / "b"), samples, hit={2, 3, 6, 7})
    return a, b


def compare(argv: list[str]):
    parser = argparse.ArgumentParser(prog="gui-grounding")
    add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["compare", *argv])
    return args.func(args)


def test_compare_numbers_table_and_outputs(runs, samples, tmp_path, capsys):
    a, b = runs
    ids = [s.sample_id for s in samples]
    scores = [json.loads(x) for x in open(os.path.join(a, "scores.jsonl"), encoding="utf-8")]
    assert [x["sample_id"] for x in scores] == ids
    assert [x["correctness"] for x in scores] == ["correct"] * 6 + ["wrong"] * 3 + ["wrong_format"]
    target = {"boxes": [list(samples[0].boxes[0])], "polygons": [], "refusal": False, "image_size": [360, 640]}
    assert scores[0] == {
        "sample_id": ids[0],
        "correctness": "correct",
        "point": _centre(samples[0]),
        "refusal": False,
        "target": target,
    }
    out = tmp_path / "cmp"
    compare([a, b, "--out", str(out)])
    printed = capsys.readouterr().out
    doc = json.loads((out / "compare.json").read_text(encoding="utf-8"))
    assert doc["paired"] == {"both_right": 2, "only_a": 4, "only_b": 2, "both_wrong": 2}
    assert doc["a"] == {"folder": a, "model": None, "num_correct": 6, "accuracy": 60.0, "ci95": [31.27, 83.18]}
    assert doc["b"] == {"folder": b, "model": None, "num_correct": 4, "accuracy": 40.0, "ci95": [16.82, 68.73]}
    assert doc["a"]["ci95"] == wilson_closed_form(6, 10) and doc["b"]["ci95"] == wilson_closed_form(4, 10)
    assert [doc[k] for k in ("benchmark", "subset", "num_samples", "difference_b_minus_a")] == [
        "screenspot-v2",
        None,
        10,
        -20.0,
    ]
    # exact McNemar: 4 vs 2 discordant, p = 2 * (C(6,0) + C(6,1) + C(6,2)) / 2^6 = 44/64
    assert doc["mcnemar"] == {"method": "exact", "statistic": None, "p_value": pytest.approx(44 / 64), "discordant": 6}
    assert 2 * sum(math.comb(6, i) for i in range(3)) / 64 == 44 / 64
    assert doc["only_a_right"] == [ids[0], ids[1], ids[4], ids[5]] and doc["only_b_right"] == [ids[6], ids[7]]
    assert doc["left_out"] == {"only_in_a": 0, "only_in_b": 0}
    expected_md = "\n".join(
        [
            "# screenspot-v2: A vs B on 10 samples",
            "",
            "| run | folder | correct | accuracy % | 95% CI |",
            "|:---|---:|---:|---:|---:|",
            f"| A | {a} | 6 | 60.00 | {ci_text(6, 10)} |",
            f"| B | {b} | 4 | 40.00 | {ci_text(4, 10)} |",
            "",
            "Difference B - A: -20.00 points.",
            "",
            "|  | B right | B wrong |",
            "|:---|---:|---:|",
            "| A right | 2 | 4 |",
            "| A wrong | 2 | 2 |",
            "",
            "McNemar's test (exact binomial, 6 discordant samples): p = 0.6875.",
            "",
            f"Right only in A (4): {ids[0]}, {ids[1]}, {ids[4]}, {ids[5]}",
            "",
            f"Right only in B (2): {ids[6]}, {ids[7]}",
            "",
        ]
    )
    assert (out / "compare.md").read_text(encoding="utf-8") == expected_md
    assert printed.startswith(expected_md) and "compare.json, compare.md and compare.html" in printed
    page = (out / "compare.html").read_text(encoding="utf-8")
    assert page.count('<div class="card">') == 6
    assert "6 of 10 samples right in one run only (4 only in A, 2 only in B); showing 6" in page
    disagreeing = [ids[i] for i in (0, 1, 4, 5, 6, 7)]
    assert [page.index(f"<code>{sid}</code>") for sid in disagreeing] == sorted(
        page.index(f"<code>{sid}</code>") for sid in disagreeing
    )
    assert all(f"<code>{ids[i]}</code>" not in page for i in (2, 3, 8, 9))  # agreeing samples are not shown
    assert f"<code>{ids[6]}</code>: right only in B" in page and "<b>A</b> (wrong): (0.5, 0.5) px" in page
    pictures = sorted(os.listdir(out / "compare"))
    assert pictures == [f"{i:04d}{z}.jpg" for i in range(1, 7) for z in ("", "_zoom")]
    assert all(f'src="compare/{name}"' in page for name in pictures)


def test_compare_caps_the_listing_and_the_gallery(runs, tmp_path, capsys):
    a, b = runs
    out = tmp_path / "cmp"
    (out / "compare").mkdir(parents=True)
    (out / "compare" / "0009.jpg").write_bytes(b"stale")  # an earlier run's picture is removed
    compare([a, b, "--out", str(out), "--max-listed", "1", "--max-gallery", "2"])
    assert "Right only in A (4) (first 1): " in capsys.readouterr().out
    doc = json.loads((out / "compare.json").read_text(encoding="utf-8"))
    assert len(doc["only_a_right"]) == 1 and doc["max_listed"] == 1
    page = (out / "compare.html").read_text(encoding="utf-8")
    assert page.count('<div class="card">') == 2 and "showing 2, 4 omitted (--max-gallery 2)" in page
    assert sorted(os.listdir(out / "compare")) == ["0001.jpg", "0001_zoom.jpg", "0002.jpg", "0002_zoom.jpg"]


def _copy(run: str, dest, *, metrics=None, scores=None) -> str:
    """A copy of the run folder's metrics.json and scores.jsonl, either edited or left out (``False``)."""
    dest.mkdir()
    for name, edit in (("metrics.json", metrics), ("scores.jsonl", scores)):
        if edit is False:
            continue
        text = open(os.path.join(run, name), encoding="utf-8").read()
        (dest / name).write_text(edit(text) if edit else text, encoding="utf-8")
    return str(dest)


def test_compare_refuses_what_cannot_be_compared(runs, samples, tmp_path, capsys):
    a, b = runs

    def refused(argv) -> str:
        with pytest.raises(SystemExit) as exc:
            compare(argv)
        assert exc.value.code == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("gui-grounding compare: error: ")
        return err

    def as_benchmark(name, subset=None):
        def edit(text):
            return json.dumps({**json.loads(text), "benchmark": name, **({"subset": subset} if subset else {})})

        return edit

    other = _copy(a, tmp_path / "other", metrics=as_benchmark("canonical"))
    assert f"different benchmarks: {a} is screenspot-v2, {other} is canonical" in refused([a, other])
    refined = _copy(a, tmp_path / "refined", metrics=as_benchmark("screenspot-v2", "refined"))
    assert f"is screenspot-v2, {refined} is screenspot-v2 (refined)" in refused([a, refined])
    assert "nope/metrics.json not found: " in refused([a, str(tmp_path / "nope")])
    old = _copy(a, tmp_path / "old", scores=False)
    preds = os.path.join(os.path.dirname(a), "preds.jsonl")
    assert (
        f"old/scores.jsonl not found (eval runs older than scores.jsonl): re-run eval on its predictions to write it: "
        f"gui-grounding eval --benchmark screenspot-v2 --data {DATA} --predictions {preds} --out {old}"
    ) in refused([old, b])
    bad = _copy(a, tmp_path / "bad", scores=lambda t: t.replace('"correctness": "wrong"', '"correctness": "maybe"', 1))
    assert "bad/scores.jsonl:7: correctness must be correct, wrong or wrong_format, got 'maybe'" in refused([a, bad])
    twice = _copy(a, tmp_path / "twice", scores=lambda t: t + t.splitlines()[0] + "\n")
    compare([twice, b])  # a bad scores line is rejected on its own (issue 28): counted, reported, the rest compared
    printed = capsys.readouterr().out
    assert f"twice/scores.jsonl:11: duplicate_id: sample '{samples[0].sample_id}' a second time" in printed
    not_json = _copy(a, tmp_path / "not_json", metrics=lambda t: t[:-5])
    assert "not_json/metrics.json: invalid JSON: " in refused([not_json, b])
    fewer = _copy(b, tmp_path / "fewer", scores=lambda t: "".join(t.splitlines(keepends=True)[:-1]))
    message = refused([a, fewer])
    assert (
        f"different sample sets: 1 samples only in {a} (e.g. ['{samples[9].sample_id}']), 0 only in {fewer}" in message
    )
    assert "--intersect compares the common samples" in message
    compare([a, fewer, "--intersect"])
    printed = capsys.readouterr().out
    assert printed.startswith("# screenspot-v2: A vs B on 9 samples")
    assert "Compared on the common samples only (--intersect): 1 samples only in A and 0 only in B left out." in printed
    assert "| A right | 2 | 4 |\n| A wrong | 2 | 1 |" in printed  # s9 (both wrong) left out


def test_help_names_every_flag(capsys):
    with pytest.raises(SystemExit) as exc:
        compare(["--help"])
    assert exc.value.code == 0
    text = capsys.readouterr().out
    for flag in ("run_a", "run_b", "--out", "--intersect", "--max-listed", "--max-gallery"):
        assert flag in text
    assert "McNemar" in text and "--intersect" in text


def test_two_runs_points_drawn_in_their_colours():
    im = Image.new("RGB", (100, 60), (255, 255, 255))
    s = Sample("s", "i", "x.png", [(10, 10, 30, 30)], 100, 60)
    _draw_marks(
        ImageDraw.Draw(im), s, None, 0, 0, 1.0, 1.0, im.size, marks=[([60, 30], COLOUR_A), ([85, 45], COLOUR_B)]
    )
    assert im.getpixel((10, 20)) == TARGET
    assert im.getpixel((60, 30)) == COLOUR_A and im.getpixel((85, 45)) == COLOUR_B
    # the marker is a 7 px ring with a cross: B's ring at (85 - 7, 45)
    assert im.getpixel((78, 45)) == COLOUR_B and im.getpixel((60, 37)) == COLOUR_A
    blank = Image.new("RGB", (100, 60), (255, 255, 255))
    _draw_marks(ImageDraw.Draw(blank), s, [60, 30], 0, 0, 1.0, 1.0, blank.size, marks=[(None, COLOUR_A)])
    assert blank.getpixel((60, 30)) == (255, 255, 255)  # marks replace the single point; None draws nothing
