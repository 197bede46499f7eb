"""``gui-grounding toy zoom`` (issue 30): the study's command lines, its statistics and its table, with the training and
evaluation calls recorded instead of run (the study itself is a command with committed results: README, docs)."""

from __future__ import annotations

import json
import os

import pytest

from gui_grounding.ops import toy_zoom
from gui_grounding.ops.toy_zoom import ZoomRecipe, ZoomToyExperiments, pooled_interval, seed_interval


def test_intervals():
    assert pooled_interval([50, 60, 70], 100) == [54.4, 65.4]  # Wilson on 180 / 300
    low, high = seed_interval([50.0, 60.0, 70.0])  # mean 60, sd 10, t(2) = 4.303
    assert (low, high) == (round(60 - 4.303 * 10 / 3**0.5, 1), round(60 + 4.303 * 10 / 3**0.5, 1))
    assert seed_interval([42.0]) == [42.0, 42.0]


def test_zoom_study_commands_and_table(tmp_path, monkeypatch, capsys):
    launched, evaluated = [], []

    def fake_launch(self, module, name, base, prompt_mode, flags, extra):
        launched.append((module, name, base, flags, list(extra)))
        return os.path.join(self.out, "runs", name), 1.0

    accuracy = {"start_one_shot": 10, "start_zoom": 20, "one_shot": 12, "zoom": 40, "control": 19}

    def fake_eval(benchmark, data, out_dir, *, model, tts, **kw):
        name = os.path.basename(out_dir)
        evaluated.append((name, tts.mode, model, kw["max_new_tokens"]))
        arm, _, seed = name.rpartition("_s")
        acc = accuracy[name] if name.startswith("start") else accuracy[arm] + (1 if seed == "1" else 0)
        doc = {"overall": {"accuracy": float(acc), "num_correct": acc, "num_total": 100}}
        if tts.mode == "zoom-tool":
            doc["tts"] = {"zoom_tool": {"zoomed_share": 0.5}}
        return doc

    monkeypatch.setattr(ZoomToyExperiments, "_launch", fake_launch)
    monkeypatch.setattr(ZoomToyExperiments, "prepare", lambda self: None)
    monkeypatch.setattr(toy_zoom, "run_eval", fake_eval)
    out = str(tmp_path / "toy")
    results = ZoomToyExperiments(out, ZoomRecipe(seeds=(42, 1), grpo_steps=7)).run()

    modules = [(m, n) for m, n, *_ in launched]
    assert modules[:2] == [("vlm_r1.sft", "zoom_sft_one_shot"), ("vlm_r1.sft", "zoom_sft_tool")]
    assert [n for _, n in modules[2:]] == [f"zoom_{a}_s{s}" for s in (42, 1) for a in ("one_shot", "zoom", "control")]
    by_name = {n: (b, f, e) for _, n, b, f, e in launched}
    one_shot, zoom, control = by_name["zoom_one_shot_s1"], by_name["zoom_zoom_s1"], by_name["zoom_control_s1"]
    assert one_shot[0].endswith("zoom_sft_one_shot") and zoom[0].endswith("zoom_sft_tool") == control[0].endswith(
        "zoom_sft_tool"
    )
    assert "--zoom_tool" not in one_shot[2] and zoom[2][zoom[2].index("--zoom_tool") + 1] == "true"
    for _, flags, extra in (one_shot, zoom, control):
        assert flags["max_steps"] == 7 and extra[extra.index("--seed") + 1] == "1"
        assert extra[extra.index("--max_pixels") + 1] == "12544"  # the screen is sent 4x smaller
    assert zoom[2][zoom[2].index("--reward_funcs") + 1 :][:2] == ["click", "zoom_tool"]
    assert "gui_grounding.ops.toy:random_reward" in control[2]
    modes = {name: mode for name, mode, _, _ in evaluated}
    assert modes["start_one_shot"] == "greedy" and modes["zoom_s42"] == modes["control_s1"] == "zoom-tool"

    assert results["summary_zoom"]["mean"] == 40.5 and results["summary_one_shot"]["pooled_ci95"] == pooled_interval(
        [12, 13], 100
    )
    with open(os.path.join(out, "zoom", "results.json")) as f:
        assert json.load(f)["arms"]["zoom"][1] == {
            "seed": 1,
            "accuracy": 41.0,
            "hits": 41,
            "total": 100,
            "greedy_accuracy": 41.0,
            "zoomed": 0.5,
        }
    table = capsys.readouterr().out
    assert "| zoom-tool GRPO | 40.0, 41.0 | 40.5 |" in table and "| 50% |" in table


@pytest.mark.parametrize("argv", [["toy", "zoom", "--out", "X", "--seeds", "1,x"]])
def test_zoom_cli_refuses_a_bad_seed(argv, tmp_path):
    from gui_grounding.cli import main

    argv = [a.replace("X", str(tmp_path / "o")) for a in argv]
    with pytest.raises((SystemExit, ValueError)):
        main(argv)
