"""The authors' headline of every benchmark, and OSWorld-G's three denominators (issue 31, item 2).

Each benchmark states one headline number first (``metrics.json["headline"]``, results.md, the terminal), with its
rule, its denominator and its source; a profile's published number is compared with our headline over the
published number's own denominator.
"""

from __future__ import annotations

import json

import pytest

from gui_grounding.eval.benchmarks import get_benchmark
from gui_grounding.eval.run import run_eval
from gui_grounding.models.profile_types import Profile, PublishedScore

OSWORLD = "data/mini_benchmarks/osworld_g"


def _centre(box):
    return [(box[0] + box[2]) / 2, (box[1] + box[3]) / 2]


def _write(path, lines):
    path.write_text("".join(json.dumps(r) + "\n" for r in lines))
    return str(path)


def _osworld_predictions(tmp_path):
    """The mini OSWorld-G (8 items: 4 bbox, 2 polygon, 2 refusal): bbox items hit at their centre, polygons missed
    with no point, the first refusal item refused, the second answered with an on-screen point."""
    samples, _ = get_benchmark("osworld-g", subset="plain").load(OSWORLD)
    lines, refusals = [], 0
    for s in samples:
        if s.refusal:
            refusals += 1
            lines.append(
                {"sample_id": s.sample_id, **({"point": None, "refusal": True} if refusals == 1 else {"point": [5, 5]})}
            )
        else:
            lines.append({"sample_id": s.sample_id, "point": _centre(s.boxes[0]) if s.boxes else None})
    return samples, _write(tmp_path / "p.jsonl", lines)


@pytest.mark.parametrize(
    ("denominator", "expected"),
    [
        # refusal-scored: 4 bbox hits + 1 refusal refused = 5 of all 8 items
        (None, (5, 8, 62.5)),
        ("refusal-scored", (5, 8, 62.5)),
        # refusal-as-miss: the 4 bbox hits of all 8 (both refusal items misses whatever the answer)
        ("refusal-as-miss", (4, 8, 50.0)),
        # without-refusal: the 4 bbox hits of the 6 bbox + polygon items
        ("without-refusal", (4, 6, 66.67)),
    ],
)
def test_osworld_g_headline_over_each_denominator(tmp_path, denominator, expected):
    _, preds = _osworld_predictions(tmp_path)
    options = {"subset": "plain", **({"denominator": denominator} if denominator else {})}
    doc = run_eval("osworld-g", OSWORLD, str(tmp_path / "out"), predictions=preds, benchmark_options=options)
    head = doc["headline"]
    assert (head["num_correct"], head["num_total"], head["accuracy"]) == expected
    assert head["denominator"] == (denominator or "refusal-scored")
    assert list(doc)[1] == "headline"  # first after the benchmark name
    # every denominator's cell is in metrics.json whichever one is the headline
    assert doc["overall"]["num_correct"] == 5 and doc["overall"]["num_total"] == 8
    assert doc["overall_refusal_as_miss"]["num_correct"] == 4 and doc["overall_refusal_as_miss"]["num_total"] == 8
    assert doc["overall_without_refusal"]["num_correct"] == 4 and doc["overall_without_refusal"]["num_total"] == 6
    assert doc["denominator"] == (denominator or "refusal-scored")
    md = (tmp_path / "out" / "results.md").read_text()
    assert f"**osworld-g headline**: {expected[2]:.2f}%" in md
    assert f"denominator `{denominator or 'refusal-scored'}`" in md


def test_unknown_denominator_is_refused():
    with pytest.raises(ValueError, match="refusal-scored, refusal-as-miss, without-refusal"):
        get_benchmark("osworld-g", denominator="510")
    with pytest.raises(ValueError, match="denominator must be one of all"):
        get_benchmark("screenspot-v2").headline({"overall": {"accuracy": 1.0}}, "refusal-scored")


def test_published_numbers_are_compared_over_their_own_denominator(tmp_path):
    """A number published over the 510 non-refusal items is compared with ours over the same 510; an unstated one
    with ours over the authors' rule; a variant (the authors' ZoomIn) is listed, never compared."""
    samples, preds = _osworld_predictions(tmp_path)
    bench = get_benchmark("osworld-g", subset="plain")
    bench.load(OSWORLD)
    doc = run_eval(
        "osworld-g", OSWORLD, str(tmp_path / "out"), predictions=preds, benchmark_options={"subset": "plain"}
    )
    profile = Profile(
        name="t",
        model="m",
        model_type="qwen2_5_vl",
        adapter="gta1",
        budget=None,
        max_new_tokens=32,
        backends=("hf",),
        sources={},
        published=(
            PublishedScore("osworld-g", 60.0, "s1", denominator="without-refusal"),
            PublishedScore("osworld-g", 60.0, "s2", denominator="unstated"),
            PublishedScore("osworld-g", 60.0, "s3", denominator="refusal-as-miss"),
            PublishedScore("osworld-g", 70.0, "s4", variant="authors' ZoomIn"),
            PublishedScore("osworld-g", 60.0, "s5", options={"subset": "refined"}),
        ),
    )
    rows = profile.comparison("osworld-g", {"subset": "plain"}, lambda d: bench.headline(doc, d))
    assert [(r["source"], r["ours"], r["difference"], r["denominator"], r["ours_over"]) for r in rows] == [
        ("s1", 66.67, 6.67, "without-refusal", "without-refusal"),
        ("s2", 62.5, 2.5, "unstated", "refusal-scored"),
        ("s3", 50.0, -10.0, "refusal-as-miss", "refusal-as-miss"),
    ]


def test_screenspot_pro_profile_comparison_uses_the_percent_headline(tmp_path):
    """ScreenSpot-Pro's harness cells hold fractions (action_acc 0-1): the headline is the percent, so a profile's
    50.1 is compared with our percent (before the headline, the comparison found no "accuracy" and listed nothing)."""
    data = "data/mini_benchmarks/screenspot_pro"
    samples, _ = get_benchmark("screenspot-pro").load(data)
    lines = [
        {"sample_id": s.sample_id, "point": _centre(s.boxes[0]) if i < 3 else [0, 0]} for i, s in enumerate(samples)
    ]
    doc = run_eval(
        "screenspot-pro",
        data,
        str(tmp_path / "out"),
        predictions=_write(tmp_path / "p.jsonl", lines),
        profile="gta1-7b-2507",
    )
    # 3 of the 9 samples hit: 33.33%
    assert (doc["headline"]["num_correct"], doc["headline"]["num_total"], doc["headline"]["accuracy"]) == (3, 9, 33.33)
    assert [(r["published"], r["ours"], r["difference"]) for r in doc["published"]["rows"]] == [(50.1, 33.33, -16.77)]


def test_screenspot_v2_headline_is_the_micro_average(tmp_path):
    data = "data/mini_benchmarks/screenspot_v2"
    samples, _ = get_benchmark("screenspot-v2").load(data)
    lines = [
        {"sample_id": s.sample_id, "point": _centre(s.boxes[0]) if i % 2 == 0 else None} for i, s in enumerate(samples)
    ]
    doc = run_eval("screenspot-v2", data, str(tmp_path / "out"), predictions=_write(tmp_path / "p.jsonl", lines))
    # samples 0, 2, 4, 6, 8 hit: 5 of 10 (the macro average of the 6 cells is reported beside it, not as the headline)
    assert (doc["headline"]["num_correct"], doc["headline"]["num_total"], doc["headline"]["accuracy"]) == (5, 10, 50.0)
    assert doc["headline"]["accuracy"] == doc["micro_avg"]["accuracy"]
    assert doc["headline"]["rule"].startswith("micro average")


def test_documented_tables_are_the_registries():
    """docs/EVALUATION.md's benchmark table and published-numbers table are the registries' (regenerate with
    ``.venv/bin/python docs/generated_tables.py``)."""
    from gui_grounding.eval.benchmarks import benchmarks_table
    from gui_grounding.models.profiles import published_table

    with open("docs/EVALUATION.md", encoding="utf-8") as f:
        doc = f.read()
    assert benchmarks_table() in doc
    assert published_table() in doc
