"""Third hostile-input round (issue 28): evaluation classes.

1. the consensus region size (:func:`gui_grounding.models.consensus.check_region`): a square narrower than 2 px cannot hold
   every point's vote (``int()`` truncation), so ``consensus()``, ``TTSConfig``, ``--tts-region`` and the
   ``consensus`` reward refuse it; any accepted size lets K identical points win.
2. numbers read from predictions and scores files (agreement, confidence, vote and token counts, seconds): one value
   rule (:func:`groundwork.validate.bounded_number`), applied by the predictions reader (a value out of range is dropped
   and counted in ``bad_values``) and by ``compare`` (a refusal).
3. ``compare`` pairs two runs only on the same scored data (``targets_sha256`` in ``metrics.json``, each sample's
   ``target`` in ``scores.jsonl``): two canonical files whose generated ids coincide are refused.
4. ``gui-grounding prompt --parse`` shows eval's reading (:func:`gui_grounding.eval.backends.eval_reading`): for
   every adapter and profile, the point, refusal and format error eval records for the completion.
"""

from __future__ import annotations

import argparse
import json
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

import gui_grounding.data.annotations as annotations
import gui_grounding.data.formats as formats
import gui_grounding.data.schema as schema
import gui_grounding.training.rewards as rewards
from groundwork import validate
from gui_grounding.cli import build_parser
from gui_grounding.cli import main as cli_main
from gui_grounding.data.annotations import EvalInputError
from gui_grounding.data.schema import Sample
from gui_grounding.eval.backends import (
    NO_POINT,
    eval_reading,
    no_point_reason,
    open_predictions,
    prepare_resume,
    record,
    write_records,
)
from gui_grounding.eval.budget import resolve_eval_budget
from gui_grounding.eval.compare import CompareError, compare_runs, markdown, read_run
from gui_grounding.eval.compare import main as compare_main
from gui_grounding.eval.judge import WRONG_FORMAT, judge
from gui_grounding.eval.predictions import load_predictions, results_from_predictions
from gui_grounding.eval.report import sample_target, targets_sha256
from gui_grounding.eval.run import run_eval
from gui_grounding.eval.tts import TTSConfig, calibration, cost_summary, tts_predictions
from gui_grounding.models.adapters import ADAPTERS, Request, get_adapter
from gui_grounding.models.consensus import MAX_REGION, MIN_REGION, check_region, consensus, sample_region
from gui_grounding.models.profiles import PROFILES, get_profile
from gui_grounding.ops.prompt import describe_prompt

NAN, INF = float("nan"), float("inf")

# --------------------------------------------------------------------------------------------------------------------
# 1. the consensus region size


def test_region_rule_bounds_and_message():
    assert (MIN_REGION, MAX_REGION) == (2.0, 1e6)
    assert check_region(2) == 2.0 and check_region(1e6) == 1e6 and check_region(50) == 50.0
    for bad in (0.5, 1, 1.999, 0, -3, 1e6 + 1, NAN, INF, -INF, True, "50", None, [50]):
        with pytest.raises(ValueError, match=r"region must be a number of pixels in \[2, 1e\+06\]"):
            check_region(bad)


def test_a_region_of_half_a_pixel_was_an_empty_vote_and_is_refused_everywhere(monkeypatch):
    # the instance: region 0.5 around (100.3, 100.3) is [int(100.05), int(100.55)) = [100, 100): no vote
    assert sample_region((100.3, 100.3), 0.5, 1000, 1000) == (100, 100, 100, 100)
    # region 1 still empties a point near the origin, and leaves an integer point outside its own region
    assert sample_region((0.3, 0.3), 1.0, 1000, 1000) == (0, 0, 0, 0)
    assert sample_region((10.0, 10.0), 1.0, 1000, 1000) == (9, 9, 10, 10)
    for region in (0.5, 1, 1.5):
        with pytest.raises(ValueError, match="region must be"):
            consensus([(100.3, 100.3)] * 4, 1000, 1000, region=region)
        with pytest.raises(ValueError, match="tts region must be"):
            TTSConfig(mode="consensus", region=region)
    monkeypatch.setattr(rewards, "DEFAULT_REGION", 1.5)
    with pytest.raises(ValueError, match="region must be"):
        rewards.consensus_reward(
            completions=["(10,10)"] * 2, prompts=["p", "p"], image_size=[[100, 100]] * 2, resized_size=[[100, 100]] * 2
        )


def test_tts_region_flag_refuses_half_a_pixel_before_reading(tmp_path, capsys):
    with pytest.raises(SystemExit) as err:
        cli_main(
            [
                "eval",
                "--benchmark",
                "canonical",
                "--data",
                str(tmp_path / "d.jsonl"),
                "--predictions",
                str(tmp_path / "p.jsonl"),
                "--out",
                str(tmp_path / "o"),
                "--tts",
                "consensus",
                "--tts-region",
                "0.5",
            ]
        )
    assert err.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines[-1].endswith("argument --tts-region: must be a number >= 2 and <= 1e+06, got '0.5'")
    assert not (tmp_path / "o").exists()


def test_the_consensus_reward_pays_identical_rollouts_at_the_origin():
    # (0, 0) with the reward's region: every rollout votes and is a member
    out = rewards.consensus_reward(
        completions=["(0,0)"] * 3, prompts=["p"] * 3, image_size=[[100, 100]] * 3, resized_size=[[100, 100]] * 3
    )
    assert out == [1.0, 1.0, 1.0]


@st.composite
def _unanimous(draw):
    region = draw(st.one_of(st.sampled_from([MIN_REGION, 2.5, 3.0, 50.0, MAX_REGION]), st.floats(MIN_REGION, 400)))
    known = draw(st.booleans())
    if known:
        w, h = draw(st.integers(1, 4000)), draw(st.integers(1, 4000))
        x = draw(st.one_of(st.integers(0, w - 1), st.floats(0, w, exclude_max=True)))
        y = draw(st.one_of(st.integers(0, h - 1), st.floats(0, h, exclude_max=True)))
    else:
        w = h = None
        x, y = draw(st.floats(-1e6, 1e6)), draw(st.floats(-1e6, 1e6))
    return region, w, h, (x, y), draw(st.integers(1, 16))


@settings(max_examples=50, deadline=None)
@given(_unanimous())
def test_any_accepted_region_lets_identical_points_win(case):
    region, w, h, point, k = case
    assert check_region(region) == region
    c = consensus([point] * k, w, h, region=region)
    box = sample_region(point, region, w, h)
    assert c.point == ((box[0] + box[2]) / 2, (box[1] + box[3]) / 2)
    assert (c.votes, c.num_samples, c.agreement, c.region, c.members) == (k, k, 1.0, box, (True,) * k)
    assert box[0] <= point[0] < box[2] + 1 and box[1] <= point[1] < box[3] + 1


def _tts_region_type():
    """The type argparse applies to ``--tts-region`` (the eval parser's own action)."""
    eval_parser = next(
        a for a in build_parser()._subparsers._group_actions[0].choices.values() if a.prog.endswith("eval")
    )
    return next(a for a in eval_parser._actions if "--tts-region" in a.option_strings).type


@settings(max_examples=30, deadline=None)
@given(st.one_of(st.floats(max_value=MIN_REGION, exclude_max=True), st.floats(min_value=MAX_REGION, exclude_min=True)))
def test_any_region_outside_the_range_is_refused_by_every_path(region):
    with pytest.raises(ValueError):
        consensus([(5, 5)], 10, 10, region=region)
    with pytest.raises(ValueError):
        TTSConfig(mode="consensus", region=region)
    with pytest.raises(argparse.ArgumentTypeError):
        _tts_region_type()(repr(region))


# --------------------------------------------------------------------------------------------------------------------
# 2. numbers read from predictions files: one value rule (groundwork.validate.bounded_number), applied by the reader


def _screen(tmp_path, n=4):
    path = tmp_path / "s.png"
    Image.new("RGB", (200, 100), (200, 200, 200)).save(path)
    return [Sample(f"s{i}", "Click ok", str(path), [(90.0, 40.0, 110.0, 60.0)], 200, 100) for i in range(n)]


def _canonical(tmp_path, samples, name="test.jsonl"):
    keys = ("x_min", "y_min", "x_max", "y_max")
    data = tmp_path / name
    data.write_text(
        "".join(
            json.dumps(
                {
                    "sample_id": s.sample_id,
                    "instruction": s.instruction,
                    "image_path": s.image_path,
                    "target_bbox": dict(zip(keys, s.boxes[0], strict=True)),
                    "image_width": s.width,
                    "image_height": s.height,
                }
            )
            + "\n"
            for s in samples
        )
    )
    return data


def _zc_line(sid, agreement, cost=None):
    return {
        "sample_id": sid,
        "point": [100, 50],
        "tts": {"mode": "zoom+consensus", "point": [100, 50], "agreement": agreement, "votes": 3},
        "cost": cost or {"greedy": {"calls": 1, "prompt_tokens": 10, "wall_s": 0.5}},
    }


def test_agreement_out_of_range_is_dropped_counted_and_never_binned(tmp_path):
    samples = _screen(tmp_path)
    data = _canonical(tmp_path, samples)
    preds = tmp_path / "p.jsonl"
    lines = [
        _zc_line("s0", 7.5),
        _zc_line("s1", -3),
        _zc_line("s2", True, {"greedy": {"calls": 2.5, "prompt_tokens": -5, "wall_s": 1e300, "foo": 10**9}}),
        _zc_line("s3", 1),
    ]
    preds.write_text("".join(json.dumps(x) + "\n" for x in lines))
    doc = run_eval(
        "canonical", str(data), str(tmp_path / "ev"), predictions=str(preds), tts=TTSConfig(mode="zoom+consensus")
    )
    assert doc["predictions"]["bad_values"] == 6 and doc["predictions"]["malformed"] == 0
    assert [m for _, m in doc["predictions"]["examples"]["bad_values"]] == [
        "sample s0: tts.agreement must be a finite number in [0, 1], got 7.5 (dropped)",
        "sample s1: tts.agreement must be a finite number in [0, 1], got -3 (dropped)",
        "sample s2: tts.agreement must be a finite number in [0, 1], got True (dropped)",
        "sample s2: cost.greedy.calls must be an integer in [0, 1e+15], got 2.5 (dropped)",
        "sample s2: cost.greedy.prompt_tokens must be an integer in [0, 1e+15], got -5 (dropped)",
        "sample s2: cost.greedy.wall_s must be a finite number in [0, 1e+15], got 1e+300 (dropped)",
    ]
    # the points are still scored: every answer (100, 50) is correct
    assert doc["overall"]["num_correct"] == 4
    # only s3's agreement (1 -> 1.0) reaches the mean and the calibration table
    assert doc["tts"]["agreement"]["mean"] == 1.0
    assert [b["samples"] for b in doc["tts"]["agreement"]["calibration"]] == [0, 0, 0, 0, 1]
    greedy_cost = doc["tts"]["cost"]["phases"]["greedy"]
    assert (greedy_cost["calls"], greedy_cost["prompt_tokens"], greedy_cost["wall_s"]) == (3, 30, 1.5)
    assert "foo" not in greedy_cost
    scores = [json.loads(x) for x in (tmp_path / "ev" / "scores.jsonl").read_text().splitlines()]
    assert [s["agreement"] for s in scores] == [None, None, None, 1.0]


def test_strict_mode_raises_at_the_first_bad_value(tmp_path):
    samples = _screen(tmp_path, 1)
    preds = tmp_path / "p.jsonl"
    preds.write_text(json.dumps(_zc_line("s0", 7.5)) + "\n")
    with pytest.raises(EvalInputError, match=r"p\.jsonl:1: bad value in prediction: sample s0: tts\.agreement must be"):
        load_predictions(str(preds), samples, strict=True)


def test_compare_refuses_a_scores_line_with_an_agreement_out_of_range(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.json").write_text(json.dumps({"benchmark": "canonical"}))
    (run / "scores.jsonl").write_text(
        json.dumps({"sample_id": "a", "correctness": "correct", "point": [1, 2], "agreement": 7.5}) + "\n"
    )
    with pytest.raises(
        CompareError, match=r"scores\.jsonl:1: agreement must be null or a finite number in \[0, 1\], got 7\.5"
    ):
        read_run(str(run))


_json_number_or_not = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False),
    st.floats(-0.5, 1.5),
    st.integers(-(10**20), 10**20),
    st.integers(0, 3),
    st.booleans(),
    st.none(),
    st.text(max_size=3),
    st.lists(st.integers(), max_size=2),
)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(_json_number_or_not, _json_number_or_not, _json_number_or_not), min_size=1, max_size=6))
def test_every_number_read_from_a_predictions_line_obeys_the_value_rule(tmp_path_factory, values):
    """For any values of tts.agreement, a top-level agreement, a token count and wall_s: a value is kept exactly when
    it is in range (as the number it is), every other one is dropped and counted once, and the mean and the
    calibration bins see only the kept agreements."""
    tmp = tmp_path_factory.mktemp("values")
    samples = [Sample(f"s{i}", "x", "unused.png", [(0.0, 0.0, 10.0, 10.0)], 100, 100) for i in range(len(values))]
    lines = []
    for s, (agreement, count, seconds) in zip(samples, values, strict=True):
        cost = {"sampling": {"generated_tokens": count, "wall_s": seconds}}
        line = {**_zc_line(s.sample_id, agreement, cost), "agreement": seconds}
        lines.append(line)
    path = tmp / "p.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    preds, report = load_predictions(str(path), samples)

    def fraction(v):
        ok = type(v) in (int, float) and 0 <= v <= 1
        return float(v) if ok else None

    def count_(v):
        return v if type(v) is int and 0 <= v <= 1e15 else None

    def seconds_(v):
        return float(v) if type(v) in (int, float) and 0 <= v <= 1e15 else None

    expected_bad = 0
    for s, (agreement, count, seconds) in zip(samples, values, strict=True):
        p = preds[s.sample_id]
        for got, want, raw in (
            (p["tts"].get("agreement", "absent"), fraction(agreement), agreement),
            (p.get("agreement", "absent"), fraction(seconds), seconds),
            (p["cost"]["sampling"].get("generated_tokens", "absent"), count_(count), count),
            (p["cost"]["sampling"].get("wall_s", "absent"), seconds_(seconds), seconds),
        ):
            if raw is None:
                assert got is None
            elif want is None:
                assert got == "absent"
                expected_bad += 1
            else:
                assert got == want and type(got) is type(want)
    assert len(report.bad_values) == expected_bad
    tts = TTSConfig(mode="zoom+consensus")
    answers = tts_predictions(preds, samples, tts)
    kept = [fraction(a) for a, _, _ in values if fraction(a) is not None]
    assert [answers[s.sample_id].get("agreement") for s in samples] == [fraction(a) for a, _, _ in values]
    results = {s.sample_id: {"correctness": "correct"} for s in samples}
    bins = calibration(results, answers)
    assert sum(b["samples"] for b in bins) == len(kept)
    summary = cost_summary(preds, tts)
    tokens = [count_(c) for _, c, _ in values if count_(c) is not None]
    assert summary["phases"]["sampling"].get("generated_tokens", 0) == sum(tokens)


# --------------------------------------------------------------------------------------------------------------------
# one declaration each: short_repr (groundwork.validate) and CANONICAL_KEYS (gui_grounding.data.schema)


def test_one_short_repr_with_a_limit():
    assert annotations.short_repr is validate.short_repr
    assert validate.short_repr("a" * 200, 10) == "'aaaaaaaaa... [192 more characters]"
    assert validate.short_repr("a" * 78) == "'" + "a" * 78 + "'"  # 80 characters: whole
    assert validate.short_repr(10**5000) == "<unprintable int>"


def test_one_canonical_keys_declaration():
    assert formats.CANONICAL_KEYS is schema.CANONICAL_KEYS
    assert "CANONICAL_KEYS =" not in open(formats.__file__, encoding="utf-8").read()


# --------------------------------------------------------------------------------------------------------------------
# 3. compare pairs runs on the same scored data only (targets_sha256 in metrics.json, target per scores line)


def _id_less_folder(folder, boxes):
    """A canonical benchmark folder ``folder/test.jsonl`` whose records carry no id: the reader generates
    ``test:0``, ``test:1``, ... whatever the boxes."""
    folder.mkdir()
    Image.new("RGB", (200, 100), (200, 200, 200)).save(folder / "s.png")
    keys = ("x_min", "y_min", "x_max", "y_max")
    recs = [
        {"instruction": f"click {i}", "image_path": "s.png", "target_bbox": dict(zip(keys, b, strict=True))}
        for i, b in enumerate(boxes)
    ]
    (folder / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    return folder / "test.jsonl"


def _eval_run(tmp_path, name, boxes, points):
    data = _id_less_folder(tmp_path / f"data_{name}", boxes)
    preds = tmp_path / f"{name}.jsonl"
    preds.write_text("".join(json.dumps({"sample_id": f"test:{i}", "point": p}) + "\n" for i, p in enumerate(points)))
    out = tmp_path / f"run_{name}"
    doc = run_eval("canonical", str(data), str(out), predictions=str(preds), max_failures=0)
    return str(out), doc


BOXES_A = [(10.0, 10.0, 50.0, 50.0), (100.0, 10.0, 150.0, 50.0), (10.0, 60.0, 50.0, 90.0)]
BOXES_B = [(10.0, 10.0, 50.0, 50.0), (150.0, 60.0, 190.0, 90.0), (10.0, 60.0, 50.0, 90.0)]  # test:1 elsewhere
POINTS = [[30, 30], [120, 30], [170, 75]]


def test_targets_sha256_is_the_scored_data():
    s = [Sample("b", "x", "p.png", [BOXES_A[0]], 200, 100), Sample("a", "y", "q.png", [BOXES_A[1]], 200, 100)]
    h = targets_sha256(s)
    assert len(h) == 64 and h == targets_sha256(s[::-1])  # the order does not matter
    assert targets_sha256([Sample("b", "other words", "r.png", [BOXES_A[0]], 200, 100), s[1]]) == h
    assert targets_sha256([Sample("b", "x", "p.png", [BOXES_B[1]], 200, 100), s[1]]) != h  # a box
    assert targets_sha256([Sample("b", "x", "p.png", [BOXES_A[0]], 201, 100), s[1]]) != h  # an image size
    assert targets_sha256([Sample("c", "x", "p.png", [BOXES_A[0]], 200, 100), s[1]]) != h  # an id
    assert sample_target(s[0]) == {
        "boxes": [[10.0, 10.0, 50.0, 50.0]],
        "polygons": [],
        "refusal": False,
        "image_size": [200, 100],
    }


def test_compare_refuses_runs_on_different_files_whose_generated_ids_coincide(tmp_path, capsys):
    a, doc_a = _eval_run(tmp_path, "a", BOXES_A, POINTS)
    b, doc_b = _eval_run(tmp_path, "b", BOXES_B, POINTS)
    assert doc_a["benchmark"] == doc_b["benchmark"] == "canonical"
    assert doc_a["targets_sha256"] != doc_b["targets_sha256"]
    ra, rb = read_run(a), read_run(b)
    assert list(ra["scores"]) == list(rb["scores"]) == ["test:0", "test:1", "test:2"]
    with pytest.raises(CompareError, match=r"^different scored data under the same ids: 1 of 3 samples .*'test:1'"):
        compare_runs(ra, rb)
    # the CLI: one line, exit status 2, nothing paired
    capsys.readouterr()
    with pytest.raises(SystemExit) as err:
        compare_main(argparse.Namespace(run_a=a, run_b=b, intersect=False, max_listed=50, max_gallery=0, out=None))
    assert err.value.code == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gui-grounding compare: error: different scored data")
    # the same data twice: paired, checked by the hash
    a2, _ = _eval_run(tmp_path, "a2", BOXES_A, [[30, 30], [0, 0], [0, 0]])
    doc = compare_runs(ra, read_run(a2))
    assert doc["targets"] == {"a": doc_a["targets_sha256"], "b": doc_a["targets_sha256"], "check": "sha256"}
    assert doc["paired"] == {"both_right": 1, "only_a": 1, "only_b": 0, "both_wrong": 1}


def _make_old(run, *, keep_targets):
    """Strip what a run of an older version lacks: the hash, and (unless ``keep_targets``) the per-sample targets."""
    metrics_path, scores_path = os.path.join(run, "metrics.json"), os.path.join(run, "scores.jsonl")
    metrics = json.load(open(metrics_path, encoding="utf-8"))
    metrics.pop("targets_sha256", None)
    with open(metrics_path, "w", encoding="utf-8") as f:
        json.dump(metrics, f)
    lines = [json.loads(x) for x in open(scores_path, encoding="utf-8")]
    if not keep_targets:
        for x in lines:
            del x["target"]
    with open(scores_path, "w", encoding="utf-8") as f:
        f.writelines(json.dumps(x) + "\n" for x in lines)


def test_compare_without_a_hash_checks_per_sample_targets_else_warns_loudly(tmp_path, capsys):
    a, _ = _eval_run(tmp_path, "a", BOXES_A, POINTS)
    b, _ = _eval_run(tmp_path, "b", BOXES_B, POINTS)
    _make_old(b, keep_targets=True)
    with pytest.raises(CompareError, match="different scored data under the same ids: 1 of 3"):
        compare_runs(read_run(a), read_run(b))
    _make_old(b, keep_targets=False)
    doc = compare_runs(read_run(a), read_run(b))
    assert doc["targets"]["check"] == "unverified" and doc["targets"]["b"] is None
    assert doc["targets"]["warning"].startswith(f"cannot check that both runs scored the same data: {b} records no")
    assert markdown(doc).split("\n")[2].startswith("**WARNING**: cannot check that both runs scored the same data")
    capsys.readouterr()
    compare_main(argparse.Namespace(run_a=a, run_b=b, intersect=False, max_listed=50, max_gallery=0, out=None))
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"gui-grounding compare: WARNING: {doc['targets']['warning']}"]
    # with --intersect, equal per-sample targets on the common samples pass though the hashes differ
    c, _ = _eval_run(tmp_path, "c", BOXES_A[:2], POINTS[:2])
    doc = compare_runs(read_run(a), read_run(c), intersect=True)
    assert doc["targets"]["check"] == "per-sample" and doc["num_samples"] == 2


def test_compare_refuses_a_malformed_hash_or_target(tmp_path):
    a, _ = _eval_run(tmp_path, "a", BOXES_A, POINTS)
    metrics_path = os.path.join(a, "metrics.json")
    metrics = json.load(open(metrics_path, encoding="utf-8"))
    for bad in ("abc", 7, "G" * 64):
        with open(metrics_path, "w", encoding="utf-8") as f:
            json.dump({**metrics, "targets_sha256": bad}, f)
        with pytest.raises(CompareError, match="targets_sha256 must be 64 lowercase hex digits"):
            read_run(a)


# --------------------------------------------------------------------------------------------------------------------
# 4. `prompt --parse` shows eval's reading: the predictions line eval writes, read back by eval's reader

SIZE = (640, 400)
CONFIGS = [("adapter", name) for name in sorted(ADAPTERS)] + [("profile", name) for name in PROFILES]


@pytest.fixture(scope="module")
def eval_requests():
    """Per adapter / profile: the adapter, and the request eval builds for a SIZE screenshot (the run's budget). The
    first request imports transformers' smart_resize (seconds on a busy machine; once per process)."""
    image = Image.new("RGB", SIZE, (255, 255, 255))
    out = {}
    for kind, name in CONFIGS:
        out.update(_eval_request(kind, name, image))
    return out


def _eval_request(kind, name, image):
    """``{(kind, name): (adapter, sample, request)}``: the run's adapter and budget resolved as eval resolves them."""
    prof = get_profile(name) if kind == "profile" else None
    ad = get_adapter(prof.adapter if prof else name)
    ad = prof.configure(ad) if prof else ad  # the profile's reading of the no-target answer, as run_eval applies it
    budget, _ = resolve_eval_budget(ad, model=None, flags={}, profile=prof, limits=None)
    sample = Sample(f"{kind}-{name}", "Click ok", "unused.png", [(0.0, 0.0, 10.0, 10.0)], *SIZE)
    return {(kind, name): (ad, sample, ad.build_request(sample, image, budget=budget))}


def _eval_reads(tmp, eval_requests, text):
    """What eval records for ``text`` per config: record() -> predictions file -> load_predictions."""
    samples = [sample for _, sample, _ in eval_requests.values()]
    path = tmp / "p.jsonl"
    path.write_text(
        "".join(json.dumps(record(s, r, text, ad)) + "\n" for ad, s, r in eval_requests.values()),
        encoding="utf-8",
    )
    preds, _ = load_predictions(str(path), samples)
    return {key: preds[s.sample_id] for key, (_, s, _) in eval_requests.items()}


def _prompt_parse(kind, name, text):
    return describe_prompt(
        name if kind == "adapter" else None, SIZE, "Click ok", profile=name if kind == "profile" else None, parse=text
    )


def _assert_same_reading(shown, pred):
    malformed = pred.get("malformed")
    assert shown["parsed_point"] == pred["point"]
    assert shown["refusal"] is (pred.get("refusal") is True)
    if malformed is not None:
        assert shown["format_error"] == malformed.split(": ", 1)[1] and shown["scored_as"] == "wrong_format"
    elif pred["point"] is None and pred.get("refusal") is not True:
        assert shown["format_error"] == no_point_reason(pred) and shown["scored_as"] == "wrong_format"
    else:
        assert shown["format_error"] is None and shown["scored_as"] == ("refusal" if shown["refusal"] else "point")


def test_prompt_parse_shows_the_point_eval_calls_malformed_and_the_refusal(tmp_path, eval_requests):
    shown = _prompt_parse("adapter", "gta1", "(9.9e9, 5)")
    assert shown["answer_point"] is None and shown["scored_as"] == "wrong_format"
    # a number beyond +-1e7 is no coordinate: the parser's format error, in training and eval alike
    shown = _prompt_parse("adapter", "gta1", "(9900000000, 5)")
    assert shown["answer_point"] is None and shown["parsed_point"] is None
    assert shown["format_error"] == NO_POINT and shown["scored_as"] == "wrong_format"
    # within +-1e7 on the model's 0-1000 grid, beyond it in a 40000-px-wide screenshot's pixels: written as null
    shown = describe_prompt("qwen3-vl", (40000, 400), "Click ok", parse='{"point_2d": [999999, 5]}')
    assert shown["answer_point"] == [999999.0, 5.0] and shown["parsed_point"] is None
    assert shown["format_error"] == (
        f"{NO_POINT}: its point [39999960.0, 2.0] is not 2 finite numbers within +-1e7 original pixels "
        "(written as null)"
    )
    # the UI-Venus adapter reads [-1,-1] as a refusal; the ui-venus-ground-7b profile as its 1.0 script does (eval ->
    # IndexError -> [0,0,0,0]): the point (0, 0) (Profile.refusal "origin")
    shown = _prompt_parse("adapter", "ui-venus-ground", "[-1,-1]")
    assert (shown["parsed_point"], shown["refusal"], shown["format_error"], shown["scored_as"]) == (
        None,
        True,
        None,
        "refusal",
    )
    shown = _prompt_parse("profile", "ui-venus-ground-7b", "[-1,-1]")
    assert (shown["parsed_point"], shown["refusal"], shown["format_error"], shown["scored_as"]) == (
        [0.0, 0.0],
        False,
        None,
        "point",
    )
    shown = _prompt_parse("adapter", "gta1", "(-1,-1)")  # GTA1 has no refusal answer: a point off the screen
    assert shown["refusal"] is False and shown["scored_as"] == "point" and shown["parsed_point"][0] < 0
    reads = _eval_reads(tmp_path, eval_requests, "(9900000000, 5)")
    for (kind, name), pred in reads.items():
        _assert_same_reading(_prompt_parse(kind, name, "(9900000000, 5)"), pred)


_completion = st.one_of(
    st.text(max_size=12),
    st.builds(
        lambda a, b, fmt: fmt.format(a, b),
        st.one_of(st.integers(-(10**10), 10**10), st.floats(-1e9, 1e9, allow_nan=False).map(lambda v: round(v, 2))),
        st.one_of(st.integers(-5, 2000), st.sampled_from([-1, 0, 1])),
        st.sampled_from(
            [
                "({}, {})",
                "[{}, {}]",
                "[{0},{1},{0},{1}]",
                "[{0},{1},{1},{0}]",
                '{{"coordinate": [{}, {}]}}</tool_call>',
                "<point>{} {}</point>",
                "click(start_box='({},{})')",
                "<think>x</think><answer>({}, {})</answer>",
            ]
        ),
    ),
    st.sampled_from(["[-1,-1]", " [-1, -1] ", "[-1,-1,-1,-1]", "", "(nan, 3)", "(1e400, 3)", "(3,)"]),
)


@settings(max_examples=25, deadline=None)
@given(_completion)
def test_prompt_parse_equals_the_eval_reading_for_every_adapter_and_profile(tmp_path_factory, eval_requests, text):
    reads = _eval_reads(tmp_path_factory.mktemp("parse"), eval_requests, text)
    for (kind, name), pred in reads.items():
        _assert_same_reading(_prompt_parse(kind, name, text), pred)


# the bound's edges, in every answer syntax the adapters read
_EDGE = st.sampled_from([9_999_999, 10_000_000, 10_000_001, -10_000_000, -10_000_001, 999_999_999_999, 10**13])
_round_trip_completion = st.one_of(
    _completion,
    st.builds(
        lambda a, b, fmt: fmt.format(a, b),
        st.one_of(_EDGE, st.integers(-5, 2000), st.sampled_from([9_999_999.5, 1e7 + 0.5, -1e7])),
        st.one_of(_EDGE, st.integers(-5, 2000)),
        st.sampled_from(
            [
                "({}, {})",
                "[{0},{1},{0},{1}]",
                '{{"point_2d": [{}, {}]}}',
                '{{"coordinate": [{}, {}]}}</tool_call>',
                "[[{}, {}]]",
                "[[{0},{1},{0},{1}]]",
                "<point>{} {}</point>",
                "<think>x</think><answer>({}, {})</answer>",
            ]
        ),
    ),
)
#: screenshot sizes: the model's frame mapped to a smaller, a similar and a much larger original
_ROUND_TRIP_SIZES = [(640, 400), (40000, 400), (300, 30000)]


@settings(max_examples=25, deadline=None)
@given(text=_round_trip_completion, size=st.sampled_from(_ROUND_TRIP_SIZES))
def test_what_eval_writes_reads_back_to_the_same_judgement(tmp_path_factory, text, size):
    """For any completion, every adapter and profile: the predictions line eval writes (``record`` ->
    ``write_records``) is kept by a resume (never dropped and predicted again), read by the predictions reader in
    strict mode (never malformed), and judged as eval judged it (``eval_reading``, what ``prompt --parse`` shows):
    the same point, refusal flag, reason and correctness. Every parsed point, in the model's frame and in original
    pixels, lies within +-1e7."""
    path = str(tmp_path_factory.mktemp("trip") / "predictions.jsonl")
    width, height = size
    samples, readings = [], {}
    for kind, name in CONFIGS:
        prof = get_profile(name) if kind == "profile" else None
        ad = get_adapter(prof.adapter if prof else name)
        budget, _ = resolve_eval_budget(ad, model=None, flags={}, profile=prof, limits=None)
        frame = ad.frame_for(width, height, budget)
        sample = Sample(f"{kind}-{name}", "Click ok", "unused.png", [(0.0, 0.0, width / 2, height / 2)], width, height)
        request = Request(ad.messages("Click ok", frame), None, {"frame": frame}, "p", ad.assistant_prefix)
        for strict in (True, False):
            answer = ad.parse_answer(ad.assistant_prefix + text, strict=strict)
            assert answer is None or all(abs(v) <= validate.MAX_COORD for v in answer), (name, answer)
        samples.append(sample)
        readings[sample.sample_id] = (
            sample,
            eval_reading(sample, request, text, ad),
            record(sample, request, text, ad),
        )
    appender, todo = open_predictions(path, samples)
    assert len(todo) == len(samples)
    with appender:
        write_records(appender, [rec for _, _, rec in readings.values()])
    written = open(path, "rb").read()
    assert prepare_resume(path) == set(readings) and open(path, "rb").read() == written
    preds, report = load_predictions(path, samples, strict=True)
    assert report.malformed == [] and report.bad_values == []
    results = results_from_predictions(samples, preds)
    for sid, (sample, reading, _) in readings.items():
        pred = preds[sid]
        assert (pred["point"], pred.get("refusal") is True) == (reading["point"], reading["refusal"]), sid
        if reading["scored_as"] == WRONG_FORMAT:
            assert reading["format_error"] == no_point_reason(pred) and results[sid]["correctness"] == WRONG_FORMAT
        else:
            assert reading["format_error"] is None
            assert results[sid]["correctness"] == judge(sample, reading["point"], reading["refusal"])
