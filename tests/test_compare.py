"""``gui-grounding compare`` (issue 19): two rescored runs on the committed mini OSWorld-G, sample by sample."""

from __future__ import annotations

import json

import pytest

from gui_grounding.cli import main
from gui_grounding.eval import run_eval
from gui_grounding.eval.benchmarks import get_benchmark

DATA = "data/mini_benchmarks/osworld_g"


def _run(tmp_path, name: str, hit: set[str]) -> str:
    """Rescore a predictions file that hits the bbox items in ``hit`` (centre) and misses the others."""
    samples, _ = get_benchmark("osworld-g").load(DATA)
    lines = []
    for s in samples:
        if s.refusal:
            lines.append({"sample_id": s.sample_id, "point": None, "refusal": True})
        elif s.sample_id in hit and s.boxes:
            b = s.boxes[0]
            lines.append({"sample_id": s.sample_id, "point": [(b[0] + b[2]) / 2, (b[1] + b[3]) / 2]})
        else:
            lines.append({"sample_id": s.sample_id, "point": [0.5, 0.5]})
    preds = tmp_path / f"{name}.jsonl"
    preds.write_text("".join(json.dumps(r) + "\n" for r in lines))
    out = tmp_path / name
    run_eval("osworld-g", DATA, str(out), predictions=str(preds))
    return str(out)


def test_compare_counts_test_and_outputs(tmp_path, capsys):
    samples, _ = get_benchmark("osworld-g").load(DATA)
    boxed = [s.sample_id for s in samples if s.boxes]
    assert len(boxed) == 4 and len(samples) == 8 and sum(s.refusal for s in samples) == 2
    a = _run(tmp_path, "a", set(boxed[:3]))  # A: 3 boxes + 2 refusals right = 5 of 8
    b = _run(tmp_path, "b", set(boxed[2:]))  # B: 2 boxes + 2 refusals right = 4 of 8
    scores = [json.loads(x) for x in open(f"{a}/scores.jsonl")]
    assert [x["sample_id"] for x in scores] == [s.sample_id for s in samples]
    assert sum(x["correctness"] == "correct" for x in scores) == 5 and sum(x["refusal"] for x in scores) == 2
    main(["compare", a, b, "--out", str(tmp_path / "cmp")])
    out = capsys.readouterr().out
    assert "Difference B - A: -12.50 points." in out
    doc = json.loads((tmp_path / "cmp" / "compare.json").read_text())
    assert doc["paired"] == {"both_right": 3, "only_a": 2, "only_b": 1, "both_wrong": 2}
    assert (doc["a"]["accuracy"], doc["b"]["accuracy"], doc["difference_b_minus_a"]) == (62.5, 50.0, -12.5)
    assert doc["mcnemar"] == {"method": "exact", "statistic": None, "p_value": pytest.approx(1.0)}  # 2 vs 1 of 3
    assert doc["only_a_right"] == boxed[:2] and doc["only_b_right"] == boxed[3:]
    assert doc["a"]["ci95"] == [30.57, 86.32] and doc["subset"] == "plain"
    page = (tmp_path / "cmp" / "compare.html").read_text()
    assert page.count('class="card"') == 3 and all(sid in page for sid in boxed[:2] + boxed[3:])
    assert (tmp_path / "cmp" / "compare.md").read_text().startswith("# osworld-g (plain): A vs B on 8 samples")


def test_compare_refuses_what_cannot_be_compared(tmp_path, capsys):
    a = _run(tmp_path, "a", set())
    other = tmp_path / "other"
    run_eval("canonical", "data/web_sample/test.jsonl", str(other),
             predictions=str(_empty_predictions(tmp_path)))  # fmt: skip
    for argv, message in (
        ([a, str(other)], "different benchmarks"),
        ([a, str(tmp_path / "nope")], "metrics.json not found"),
    ):
        with pytest.raises(SystemExit) as exc:
            main(["compare", *argv])
        assert exc.value.code == 2 and message in capsys.readouterr().err
    lines = open(f"{a}/scores.jsonl").read().splitlines()
    fewer = tmp_path / "fewer"
    fewer.mkdir()
    (fewer / "metrics.json").write_text(open(f"{a}/metrics.json").read())
    (fewer / "scores.jsonl").write_text("\n".join(lines[:-1]) + "\n")
    with pytest.raises(SystemExit):
        main(["compare", a, str(fewer)])
    assert "different sample sets: 1 samples only in" in capsys.readouterr().err
    main(["compare", a, str(fewer), "--intersect"])
    assert "A vs B on 7 samples" in capsys.readouterr().out


def _empty_predictions(tmp_path):
    path = tmp_path / "empty.jsonl"
    path.write_text("")
    return path
