"""Synthetic toy set (gui_grounding.data.synthetic) and the SFT entry point (vlm_r1.sft)."""

from __future__ import annotations

import hashlib
import json
import os

import pytest

from gui_grounding.data.synthetic import COLOURS, SyntheticConfig, make_synthetic
from tests.helpers.train import step_logs, tiny_sft_argv


def _digest(folder: str) -> str:
    h = hashlib.sha256()
    for root, _, files in sorted(os.walk(folder)):
        for name in sorted(files):
            with open(os.path.join(root, name), "rb") as f:
                h.update(name.encode() + f.read())
    return h.hexdigest()


def test_synthetic_is_seeded_and_valid(tmp_path):
    from PIL import Image

    from gui_grounding.data.schema import load_samples

    cfg = SyntheticConfig(num_train=12, num_test=4, buttons_per_image=2, samples_per_image=2, seed=3)
    out = make_synthetic(str(tmp_path / "a"), cfg)
    assert out == {"train": 24, "test": 8, "images": 16, "out_dir": str(tmp_path / "a")}
    make_synthetic(str(tmp_path / "b"), SyntheticConfig(**{**cfg.__dict__}))
    assert _digest(str(tmp_path / "a")) == _digest(str(tmp_path / "b"))
    make_synthetic(str(tmp_path / "c"), SyntheticConfig(**{**cfg.__dict__, "seed": 4}))
    assert _digest(str(tmp_path / "a")) != _digest(str(tmp_path / "c"))

    samples, report = load_samples([str(tmp_path / "a" / "train.jsonl")], None, strict=True)
    assert len(samples) == 24 and report.rejects == [] and report.num_clipped == 0
    recs = [json.loads(line) for line in open(tmp_path / "a" / "train.jsonl")]
    tests = [json.loads(line) for line in open(tmp_path / "a" / "test.jsonl")]
    assert not {r["image_path"] for r in recs} & {r["image_path"] for r in tests}  # disjoint screens
    for rec in recs:
        b = rec["target_bbox"]
        col, row = rec["cell"]
        # the box lies in its cell (56x56 cells on 112x112) and the box centre has the named colour
        assert col * 56 <= b["x_min"] < b["x_max"] < (col + 1) * 56
        assert row * 56 <= b["y_min"] < b["y_max"] < (row + 1) * 56
        assert rec["instruction"] == f"Click the {rec['colour']} button" and rec["colour"] in rec["buttons"]
        with Image.open(tmp_path / "a" / rec["image_path"]) as im:
            assert im.size == (112, 112)
            # a pixel inside the button away from its label text
            assert im.getpixel((b["x_max"] - 2, b["y_min"] + 2)) == COLOURS[rec["colour"]]
            assert im.getpixel((b["x_max"], b["y_max"])) == (60, 60, 60)  # the border is part of the box


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"buttons_per_image": 5}, "buttons_per_image=5"),
        ({"colours": ["red", "pink"]}, "unknown colours"),
        ({"colours": ["red"], "buttons_per_image": 2}, "cannot fill"),
        ({"min_fill": 0.9, "max_fill": 0.5}, "min_fill"),
    ],
)
def test_synthetic_rejects_bad_settings(tmp_path, kwargs, message):
    with pytest.raises(ValueError, match=message):
        make_synthetic(str(tmp_path), SyntheticConfig(**kwargs))


def test_make_synthetic_cli(tmp_path):
    from gui_grounding.cli import main

    main(["make-synthetic", "--out", str(tmp_path), "--num-train", "3", "--num-test", "2", "--seed", "1"])
    cfg = json.load(open(tmp_path / "synthetic_config.json"))
    assert cfg["counts"] == {"train": 3, "test": 2} and cfg["config"]["seed"] == 1


def test_sft_completion_per_prompt_mode():
    from gui_grounding.training.task import GUIGroundingTask

    task = GUIGroundingTask()
    row = {"target_boxes_resized": [[10.0, 20.0, 31.0, 41.0], [0, 0, 5, 5]], "instruction": "Click the red button"}
    assert task.sft_completion({**row, "prompt_mode": "non_thinking"}) == "(20,30)"  # round(20.5)=20, round(30.5)=30
    assert task.sft_completion({**row, "prompt_mode": "thinking"}) == (
        "<think>The element to click: Click the red button.</think><answer>(20,30)</answer>"
    )
    assert task.sft_completion({**row, "prompt_mode": "box"}) == "[10,20,31,41]"


def test_sft_loss_is_on_the_completion_only(tmp_path, tiny_qwen25_dir):
    """The SFT batch's unmasked labels are exactly the answer tokens + <|im_end|> (TRL prompt-completion data)."""
    from trl.trainer.sft_trainer import DataCollatorForVisionLanguageModeling

    from vlm_r1.modules import get_vlm_module
    from vlm_r1.sft import SFTScriptArguments, sft_dataset
    from vlm_r1.tasks import get_task

    make_synthetic(str(tmp_path / "d"), SyntheticConfig(num_train=3, num_test=1))
    args = SFTScriptArguments(data_file_paths=str(tmp_path / "d" / "train.jsonl"), task_type="gui_grounding")
    module = get_vlm_module(tiny_qwen25_dir)
    processor = module.load_processor(tiny_qwen25_dir)
    ds = sft_dataset(get_task("gui_grounding"), args, processor, module)
    rows = [ds[i] for i in range(3)]
    targets = [r["completion"][0]["content"] for r in rows]
    batch = DataCollatorForVisionLanguageModeling(processor, completion_only_loss=True)(rows)
    tok = processor.tokenizer
    for labels, target in zip(batch["labels"], targets, strict=True):
        kept = [int(t) for t in labels if t != -100]
        assert tok.decode(kept) == target + "<|im_end|>\n"
    assert batch["pixel_values"].shape[0] == 3 * 64  # 112x112 -> 8x8 patches of 14 px per image


def test_sft_run_learns_and_saves(tmp_path, tiny_qwen25_dir):
    from vlm_r1.sft import main

    make_synthetic(str(tmp_path / "d"), SyntheticConfig(num_train=32, num_test=4))
    out = tmp_path / "sft"
    own = dict(task_type="gui_grounding", max_steps=12, per_device_train_batch_size=8, learning_rate="3e-3")
    main(tiny_sft_argv(tiny_qwen25_dir, str(tmp_path / "d" / "train.jsonl"), str(out), **own))
    losses = [h["loss"] for h in step_logs(out)]
    assert len(losses) == 12 and losses[-1] < losses[0] - 1.0
    assert (out / "model.safetensors").exists() and (out / "training_curves.png").exists()
    from vlm_r1.modules import load_model, load_processor

    load_model(str(out)), load_processor(str(out))  # reloads like any checkpoint


def test_toy_curves_and_random_reward(tmp_path):
    """The toy driver's readers of trainer_state.json, its PNG, and the control reward's independence of answers."""
    from gui_grounding.ops.toy import accuracy_curve, hit_rate_curve, plot_curves, random_reward, reward_curve

    state = {
        "log_history": [
            {"step": 5, "loss": 0.1, "reward": 0.25, "rewards/click_reward/mean": 0.25},
            {"step": 10, "eval_click/accuracy": 40.0},
            {"step": 10, "loss": 0.2, "reward": 0.5, "rewards/click_reward/mean": 0.375},
            {"step": 10, "train_runtime": 3.0},
        ]
    }
    (tmp_path / "trainer_state.json").write_text(json.dumps(state))
    assert accuracy_curve(str(tmp_path), offset=100) == [(110, 40.0)]
    assert reward_curve(str(tmp_path)) == [(5, 0.25), (10, 0.5)]
    assert hit_rate_curve(str(tmp_path)) == [(5, 0.25), (10, 0.375)]
    run = {
        "rewards": reward_curve(str(tmp_path)),
        "hits": hit_rate_curve(str(tmp_path)),
        "curve": accuracy_curve(str(tmp_path)),
    }
    png = plot_curves({"click": run}, str(tmp_path / "c.png"), title="t", start=30.0)
    assert os.path.getsize(png) > 5_000

    good, bad = ["(10,10)"] * 400, ["garbage"] * 400
    r1, r2 = random_reward(good), random_reward(bad)
    assert set(r1) == set(r2) == {0.0, 1.0}
    assert 0.4 < sum(r1) / 400 < 0.6 and 0.4 < sum(r2) / 400 < 0.6  # a fair coin whatever the answers


def test_sft_targets_of_the_upstream_tasks(tmp_path, tiny_qwen25_dir):
    """default task: the gpt answer inside <answer>; rec: no SFT target (clear error, before any training)."""
    from vlm_r1.modules import get_vlm_module
    from vlm_r1.sft import SFTScriptArguments, sft_dataset
    from vlm_r1.tasks import get_task

    make_synthetic(str(tmp_path), SyntheticConfig(num_train=2, num_test=0))
    rec = {
        "image": "images/00000.png",
        "conversations": [
            {"from": "human", "value": "<image>Where is it?"},
            {"from": "gpt", "value": "[1, 2, 30, 40]"},
        ],
    }
    (tmp_path / "up.jsonl").write_text(json.dumps(rec) + "\n")
    module = get_vlm_module(tiny_qwen25_dir)
    processor = module.load_processor(tiny_qwen25_dir)
    args = SFTScriptArguments(data_file_paths=str(tmp_path / "up.jsonl"), task_type="default")
    ds = sft_dataset(get_task("default"), args, processor, module)
    assert ds[0]["completion"] == [{"role": "assistant", "content": "<answer> [1, 2, 30, 40] </answer>"}]
    args = SFTScriptArguments(data_file_paths=str(tmp_path / "up.jsonl"), task_type="rec")
    with pytest.raises(NotImplementedError, match="task 'rec' defines no SFT target"):
        sft_dataset(get_task("rec"), args, processor, module)
