"""Third hostile-input round (issue 28): evaluation classes.

1. the consensus region size (:func:`gui_grounding.models.consensus.check_region`): a square narrower than 2 px cannot hold
   every point's vote (``int()`` truncation), so ``consensus()``, ``TTSConfig``, ``--tts-region`` and the
   ``consensus`` reward refuse it; any accepted size lets K identical points win.
"""

from __future__ import annotations

import argparse

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import gui_grounding.training.rewards as rewards
from gui_grounding.cli import build_parser
from gui_grounding.cli import main as cli_main
from gui_grounding.eval.tts import TTSConfig
from gui_grounding.models.consensus import MAX_REGION, MIN_REGION, check_region, consensus, sample_region

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
