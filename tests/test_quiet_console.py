"""A quiet console for a newcomer (issue 13): no deprecation warnings from our calls, DDP's find_unused_parameters
decided from the model, and one compact line per logged step (the full dicts in ``logs.jsonl``)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import warnings

import pytest

from tests.helpers.paths import REPO
from tests.helpers.proc import child_env, run
from tests.helpers.train import GTA1_TINY_RECIPE, sample_subset, step_logs, tiny_train_argv


# ---- deprecation warnings ----------------------------------------------------------------------------------------
def test_our_sources_call_no_deprecated_checkpointing_alias():
    """transformers 5 renamed gradient checkpointing to activation checkpointing; the old model methods warn
    (modeling_utils.py). Only TRL may still call them (their warnings are filtered by message in vlm_r1.launch)."""
    pattern = re.compile(r"\.(is_gradient_checkpointing\b|gradient_checkpointing_(enable|disable)\s*\()")
    hits = []
    for package in ("vlm_r1", "gui_grounding"):
        for root, _, files in os.walk(os.path.join(REPO, package)):
            for name in files:
                if name.endswith(".py"):
                    path = os.path.join(root, name)
                    with open(path, encoding="utf-8") as f:
                        hits += [f"{path}:{i}" for i, line in enumerate(f, 1) if pattern.search(line)]
    assert not hits, hits


@pytest.mark.parametrize("kind", ["grpo", "sft"])
def test_configs_build_without_future_warning_and_keep_values(kind, tmp_path):
    from vlm_r1.configs import VLMGRPOConfig
    from vlm_r1.sft import VLMSFTConfig

    cls = VLMGRPOConfig if kind == "grpo" else VLMSFTConfig
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        default = cls(output_dir=str(tmp_path))
        old_name = cls(output_dir=str(tmp_path), gradient_checkpointing=True, gradient_checkpointing_kwargs={"a": 1})
        new_name = cls(output_dir=str(tmp_path), activation_checkpointing=False)
    deprecations = [str(w.message) for w in caught if issubclass(w.category, (FutureWarning, DeprecationWarning))]
    assert not [m for m in deprecations if "checkpointing" in m], deprecations
    # effective values as transformers' own alias resolution gives them: both keep TRL's True (upstream VLM-R1's False
    # is its command line's default: vlm_r1.upstream.defaults); the old name still works, the new one wins; both names
    # agree afterwards (TRL reads the old one)
    assert default.activation_checkpointing is True and default.gradient_checkpointing is True
    assert old_name.activation_checkpointing is True and old_name.activation_checkpointing_kwargs == {"a": 1}
    assert new_name.activation_checkpointing is False and new_name.gradient_checkpointing is False


def test_plain_trl_config_still_warns(tmp_path):
    """The warning this project avoids is real (TRL's default of the old field): if transformers drops the alias or
    TRL renames it, this fails and the workaround in vlm_r1.launch.prefer_activation_checkpointing can go."""
    from trl import GRPOConfig

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        GRPOConfig(output_dir=str(tmp_path), use_cpu=True, bf16=False)
    assert any("gradient_checkpointing" in str(w.message) for w in caught if w.category is FutureWarning)


def test_trl_alias_calls_are_filtered_narrowly():
    from vlm_r1.launch import silence_library_deprecations

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        silence_library_deprecations()
        # raised from transformers.modeling_utils: filtered; the same text from another module, or another
        # deprecation from modeling_utils: not
        warnings.warn_explicit(
            "`is_gradient_checkpointing` is deprecated and will be removed in v6.",
            FutureWarning,
            "modeling_utils.py",
            1,
            module="transformers.modeling_utils",
        )
        warnings.warn_explicit(
            "`is_gradient_checkpointing` is deprecated and will be removed in v6.",
            FutureWarning,
            "x.py",
            1,
            module="vlm_r1.trainer",
        )
        warnings.warn_explicit(
            "`something_else` is deprecated",
            FutureWarning,
            "modeling_utils.py",
            1,
            module="transformers.modeling_utils",
        )
    assert [w.filename for w in caught] == ["x.py", "modeling_utils.py"]


# ---- DDP find_unused_parameters --------------------------------------------------------------------------------------
def test_find_unused_parameters_rule(tiny_qwen25_dir):
    from datasets import Dataset

    from vlm_r1.launch import decide_find_unused_parameters, rows_all_have_images
    from vlm_r1.modules import get_vlm_module, load_model
    from vlm_r1.trainer import freeze_vision_modules

    keywords = get_vlm_module(tiny_qwen25_dir).get_vision_modules_keywords()
    with_images = Dataset.from_list([{"image_path": ["a.png"]}, {"image_path": ["b.png", "c.png"]}])
    mixed = Dataset.from_list([{"image_path": ["a.png"]}, {"image_path": []}])
    assert rows_all_have_images(with_images) is True
    assert rows_all_have_images(mixed) is False
    assert rows_all_have_images(Dataset.from_list([{"prompt": "x"}])) is False  # cannot tell: assume text rows
    assert rows_all_have_images(None) is False

    model = load_model(tiny_qwen25_dir)
    assert decide_find_unused_parameters(model, keywords, False)[0] is True  # trainable tower, text-only rows
    assert decide_find_unused_parameters(model, keywords, True)[0] is False  # trainable tower, images everywhere
    freeze_vision_modules(model, keywords)
    assert decide_find_unused_parameters(model, keywords, False)[0] is False  # frozen tower: nothing can be unused


# ---- the compact line --------------------------------------------------------------------------------------------
def test_compact_line_format():
    from vlm_r1.callbacks import compact_log_line

    logs = {
        "loss": 0.012345,
        "grad_norm": 0.5,
        "learning_rate": 1e-6,
        "reward": 0.25,
        "reward_std": 0.4330127,
        "rewards/click_reward/mean": 0.1875,
        "kl": 0.00123,
        "completions/mean_length": 12.25,
        "shared_prompt/llm_tokens": 2123.0,
        "shared_prompt/naive_llm_tokens": 16116.0,
        "timing/step_s": 1.0734,
        "step_time": 9.0,
        "completions/min_length": 3.0,
    }
    from gui_grounding.training.task import GUIGroundingTask

    # the task's console metric (its click hit rate) sits after the reward fields; the core knows no such key
    assert compact_log_line(logs, 5, 20, GUIGroundingTask.console_metrics) == (
        "[train] step 5/20 | loss 0.01235 | reward 0.25 | reward_std 0.433 | click 18.8% | kl 0.00123 | "
        "grad_norm 0.5 | len 12.25 | lr 1e-06 | shared x7.59 | 1.07 s/step"
    )
    assert compact_log_line(logs, 5, 20) == (
        "[train] step 5/20 | loss 0.01235 | reward 0.25 | reward_std 0.433 | kl 0.00123 | "
        "grad_norm 0.5 | len 12.25 | lr 1e-06 | shared x7.59 | 1.07 s/step"
    )
    assert compact_log_line({"loss": 1.0, "step_time": 2.0}, 1, 0) == "[train] step 1 | loss 1 | 2 s/step"
    assert compact_log_line({"eval_click/accuracy": 23.0, "eval_runtime": 4.0, "epoch": 1.0}, 3, 9) == (
        "[eval] step 3/9 | click/accuracy 23"
    )
    assert compact_log_line({"train_runtime": 22.21, "train_loss": 0.0, "train_samples_per_second": 14.0}, 20, 20) == (
        "[done] step 20/20 | 22.21 s | train_loss 0"
    )
    # hostile values: strings, None, booleans, NaN never crash
    assert compact_log_line({"loss": float("nan"), "reward": None, "kl": "x"}, 1, 2) == "[train] step 1/2 | loss nan"


_LINE = re.compile(r"^\[train\] step (\d+)/(\d+) \| (.*)$")


def _parse(line: str) -> dict:
    step, max_steps, rest = _LINE.match(line).groups()
    fields = {"step": int(step), "max_steps": int(max_steps)}
    for part in rest.split(" | "):
        if part.endswith(" s/step"):
            fields["step_s"] = part.removesuffix(" s/step")
        else:
            label, _, value = part.partition(" ")
            fields[label] = value
    return fields


@pytest.mark.slow  # ~15 s: a CLI training run
def test_grpo_cli_quiet_compact_and_jsonl(tiny_qwen25_dir, tmp_path):
    """A 2-step GRPO CLI run with FutureWarning/DeprecationWarning as errors: it completes, the console shows one
    compact line per step whose numbers are log_history's, the full dicts are in logs.jsonl and not on the console."""
    data = sample_subset(tmp_path / "train.jsonl", 4)
    out = tmp_path / "run"
    cmd = [
        sys.executable,
        *("-W", "error::FutureWarning", "-W", "error::DeprecationWarning"),
        *("-m", "vlm_r1.grpo_jsonl"),
        *tiny_train_argv(tiny_qwen25_dir, data, out, config=GTA1_TINY_RECIPE, reward_funcs="click"),
    ]
    proc = run(cmd, env=child_env(threads=os.environ.get("OMP_NUM_THREADS", "2")), check=False)
    console = proc.stdout + proc.stderr
    assert proc.returncode == 0, console[-4000:]
    assert "FutureWarning" not in console and "DeprecationWarning" not in console, console[-4000:]
    assert "'completions/min_length'" not in console  # the full dict is no longer printed

    history = step_logs(out)
    lines = [_parse(x) for x in console.splitlines() if _LINE.match(x)]
    assert [x["step"] for x in lines] == [h["step"] for h in history] == [1, 2]
    for line, h in zip(lines, history, strict=True):
        assert line["max_steps"] == 2
        for label, key in (
            ("loss", "loss"),
            ("reward", "reward"),
            ("reward_std", "reward_std"),
            ("grad_norm", "grad_norm"),
            ("len", "completions/mean_length"),
        ):
            assert float(line[label]) == pytest.approx(h[key], rel=1e-3, abs=1e-9), (label, line, h)
        assert float(line["click"].rstrip("%")) == pytest.approx(100 * h["rewards/click_reward/mean"], abs=0.06)
        assert float(line["step_s"]) == pytest.approx(h["timing/step_s"], rel=1e-2)
        assert "kl" not in line  # beta 0: TRL logs no kl

    with open(out / "logs.jsonl") as f:
        records = [json.loads(x) for x in f]
    train = [r for r in records if "loss" in r]
    assert len(train) == 2
    for record, h in zip(train, history, strict=True):
        assert record == h  # the full dict, every key, the same values
    assert any("train_runtime" in r for r in records)


# ---- the demo's learning stage ---------------------------------------------------------------------------------------
def test_rise_summary_numbers_and_line():
    from gui_grounding.ops.toy import rise_summary

    hits = [(s, v) for s, v in enumerate([0.1, 0.2, 0.1, 0.2, 0.1, 0.2, 0.3, 0.3, 0.4, 0.4], 1)]
    rise = rise_summary(hits, 23.0, 27.5, 100)
    assert (rise["window"], rise["steps"]) == (2, 10)
    assert rise["hit_first"] == pytest.approx(0.15) and rise["hit_last"] == pytest.approx(0.4)
    assert rise["line"] == (
        "toy GRPO reward (click hit rate of the rollouts): 0.15 -> 0.40 over 10 steps (mean of the "
        "first / last 2 steps); test click accuracy (greedy, 100 screens): 23.0% -> 27.5%"
    )
    assert rise_summary([(1, 0.5)], 0, 0, 1)["hit_first"] == 0.5  # one step: both windows are that step
    with pytest.raises(ValueError, match="no logged click reward"):
        rise_summary([], 0, 0, 1)


def test_demo_script_runs_the_toy_stage():
    with open(os.path.join(REPO, "run_scripts", "demo.sh"), encoding="utf-8") as f:
        script = f.read()
    assert "gui_grounding.cli toy demo" in script and "toy_learning_curves.png" in script
    assert subprocess.run(["bash", "-n", os.path.join(REPO, "run_scripts", "demo.sh")]).returncode == 0
