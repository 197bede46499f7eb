"""Proof that GRPO learns (marked slow: ~10 CPU minutes; `bash run_scripts/test.sh -m slow`, also run by .ci/run).

Seeded toy run (``gui-grounding toy learning``): tiny Qwen2.5-VL -> SFT warm start on the synthetic buttons set ->
GRPO with the ``click`` reward, and the same GRPO with a reward that ignores the answer (coin flip). Greedy test click
accuracy must rise clearly with ``click`` and must not with the coin flip; a sign error in the advantage, a frame
mismatch between prompt and reward, or rewards not reaching the loss would fail the first assertion, and a test
that cannot fail would be caught by the second.
"""

from __future__ import annotations

import json
import os

import pytest

pytestmark = pytest.mark.slow

# Thresholds, with margin below what the seeded recipe measured on 2 CPU cores (README "Proof that it learns"):
# SFT start 35.0% -> click GRPO 150 steps 42.5% (rollout hit rate 0.19 -> 0.34, first/last 5 logged steps);
# random reward: hit rate 0.09 -> 0.0, test accuracy 0% (the coin-flip advantages wreck the answer format).
MIN_GAIN_CLICK = 4.0  # greedy test accuracy, points over the SFT start
MIN_HIT_RATE_GAIN = 0.08  # rollout hit rate, last 5 logged steps vs first 5
MAX_HIT_RATE_GAIN_RANDOM = 0.03
MIN_CLICK_OVER_RANDOM = 10.0  # points


@pytest.fixture(scope="module")
def learning_results(tmp_path_factory):
    from gui_grounding.ops.toy import ToyExperiments

    out = os.environ.get("TOY_LEARNING_OUT") or str(tmp_path_factory.mktemp("toy"))
    return ToyExperiments(out).learning(), out


def test_grpo_click_raises_test_accuracy(learning_results):
    results, _ = learning_results
    start = results["start_accuracy"]
    click = results["runs"]["click"]
    assert click["accuracy"] >= start + MIN_GAIN_CLICK, (start, click["curve"])
    hits = [h for _, h in click["hits"]]  # click reward of the rollouts, per logged step
    assert sum(hits[-5:]) / 5 >= sum(hits[:5]) / 5 + MIN_HIT_RATE_GAIN, hits


def test_random_reward_control_does_not_learn(learning_results):
    results, _ = learning_results
    start = results["start_accuracy"]
    run = results["runs"]["random_reward"]
    hits = [h for _, h in run["hits"]]  # click reward logged with weight 0: the control's own hit rate
    assert sum(hits[-5:]) / 5 <= sum(hits[:5]) / 5 + MAX_HIT_RATE_GAIN_RANDOM, hits
    assert run["accuracy"] <= start, (start, run["curve"])
    assert results["runs"]["click"]["accuracy"] >= run["accuracy"] + MIN_CLICK_OVER_RANDOM


def test_learning_outputs_written(learning_results):
    _, out = learning_results
    folder = os.path.join(out, "learning")
    assert os.path.getsize(os.path.join(folder, "curves.png")) > 10_000
    table = open(os.path.join(folder, "results.md")).read()
    assert "+ GRPO, click reward" in table and "random reward (control)" in table
    saved = json.load(open(os.path.join(folder, "results.json")))
    assert set(saved["runs"]) == {"click", "random_reward"}


def test_ablation_driver_smoke_incl_thinking(tmp_path):
    """The ablations driver end to end on a miniature recipe: one GRPO switch plus the thinking pair (its own
    thinking-format SFT, click + click_format rewards), one table row each."""
    from gui_grounding.ops.toy import ToyExperiments, ToyRecipe

    recipe = ToyRecipe(
        synthetic={"num_train": 32, "num_test": 8, "buttons_per_image": 1, "background": "panels"},
        sft_epochs=1,
        grpo_steps=2,
        prompts_per_step=2,
        num_generations=4,
        eval_steps=1,
        eval_samples=8,
    )
    results = ToyExperiments(str(tmp_path), recipe).ablations(["click + dynamic sampling"], thinking=True)
    assert set(results["runs"]) == {"click + dynamic sampling", "thinking prompt (click + click_format)"}
    table = open(tmp_path / "ablations" / "results.md").read()
    assert "| click + dynamic sampling |" in table and "| thinking prompt (click + click_format) |" in table
    think = json.load(open(tmp_path / "runs" / "abl_thinking" / "vlm_r1_run.json"))
    assert think["prompt_mode"] == "thinking" and think["reward_funcs"] == ["click_reward", "click_format_reward"]
