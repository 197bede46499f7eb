"""``python -m gui_grounding.train``: GTA1's flags and script defaults (docs/GTA1.md), and its dry run."""

from __future__ import annotations

import json
import subprocess
import sys

from gui_grounding.training.gta1 import GTA1_DEFAULTS
from gui_grounding.training.gta1 import parse_args as gta1_parse_args
from vlm_r1.upstream import GTA1


def parse_args(argv):
    """``python -m gui_grounding.train``'s parse: the library in GTA1's dialect, as the entry point runs it."""
    return gta1_parse_args(argv, dialect=GTA1)


def test_gta1_script_defaults_and_flags(tmp_path):
    argv = [
        "--model_name_or_path",
        "m",
        "--output_dir",
        str(tmp_path),
        "--dataset_name",
        "inp.json",
        "--image_root",
        "./preprocessing",
    ]
    script, training, model = parse_args(argv)
    assert script.data_file_list == ["inp.json"] and script.image_folder_list == ["./preprocessing"]
    assert script.task_type == "gui_grounding"
    assert script.reward_funcs == ["click", "click_format"]  # GTA1's default `accuracy format`, its meanings
    assert (script.task_options.prompt_mode, script.task_options.box_rounding) == ("non_thinking", "gta1")
    assert (script.max_pixels, script.min_pixels) == (12845056, 3136)  # grpo_grounding.py:61-68
    # GTA1's GRPOConfig defaults (src/trainer/grpo_config.py) = upstream's; its sampling and loss as they ran
    assert (training.beta, training.max_completion_length, training.num_generations) == (0.04, 256, 8)
    assert (training.loss_type, training.temperature, training.top_k, training.top_p) == ("grpo", 1.0, 50, 1.0)
    assert model.dtype == GTA1_DEFAULTS["dtype"] == "float32"
    assert training.ban_vision_tokens is True  # GTA1 bans its image token (src/trainer/grpo_trainer.py:520)
    script, _, _ = parse_args([*argv, "--reward_funcs", "accuracy"])
    assert script.reward_funcs == ["click"]


def test_dry_run_prints_the_objective(tmp_path):
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "gui_grounding.train",
            "--config",
            "recipes/gta1/32b.yaml",
            "--data_file_paths",
            "x.jsonl",
            "--output_dir",
            str(tmp_path),
            "--beta",
            "0.01",
            "--dry_run",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    resolved = json.loads(proc.stdout)
    assert resolved["beta"] == 0.01  # the command line beats the recipe
    assert {
        k: resolved[k]
        for k in (
            "loss_type",
            "top_k",
            "max_completion_length",
            "max_pixels",
            "reward_funcs",
            "box_rounding",
            "num_generations",
        )
    } == {
        "loss_type": "grpo",
        "top_k": 50,
        "max_completion_length": 128,
        "max_pixels": 8847360,
        "reward_funcs": ["click"],
        "box_rounding": "gta1",
        "num_generations": 8,
    }
    assert not (tmp_path / "vlm_r1_run.json").exists()  # nothing ran
