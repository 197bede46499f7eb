"""End-to-end pipeline: GRPO through the CLI, 2-process torchrun, checkpoint save/reload, evaluation and rescoring."""

from __future__ import annotations

import json
import os

import pytest
import torch
from safetensors.torch import load_file

from tests.helpers.paths import SAMPLE
from tests.helpers.proc import child_env, run, run_module
from tests.helpers.train import GTA1_TINY_RECIPE, sample_subset, step_logs, tiny_train_argv


@pytest.fixture(scope="module")
def train_subset(tmp_path_factory):
    """First 6 records of the committed real sample (image paths stay relative to data/web_sample)."""
    return sample_subset(tmp_path_factory.mktemp("data") / "train.jsonl", 6)


def _grpo_args(model_dir, data, out, steps, extra=()):
    # GTA1's objective comes from its recipe (the core's own defaults are upstream VLM-R1's: beta 0.04, ...)
    return tiny_train_argv(
        model_dir, data, out, *extra, config=GTA1_TINY_RECIPE, max_steps=steps, save_strategy="steps", save_steps=1
    )


def _check_weights(initial_dir, trained_dir):
    before = load_file(os.path.join(initial_dir, "model.safetensors"))
    after = load_file(os.path.join(trained_dir, "model.safetensors"))
    assert before.keys() == after.keys()
    vision = [k for k in before if ".visual." in k or k.startswith("visual.") or "model.visual" in k]
    text = [k for k in before if k not in vision]
    assert vision and text
    assert all(torch.equal(before[k], after[k]) for k in vision), "frozen vision tower changed"
    assert any(not torch.equal(before[k], after[k]) for k in text), "no language-model weight changed"


def test_grpo_cli_two_steps(tiny_qwen25_dir, train_subset, tmp_path):
    out = str(tmp_path / "run")
    held_out = tmp_path / "held_out.jsonl"  # 3 test records; images resolved next to the file, so link them
    with open(os.path.join(SAMPLE, "test.jsonl")) as f:
        held_out.write_text("".join([line for line in f if line.strip()][:3]))
    os.symlink(os.path.join(SAMPLE, "images"), tmp_path / "images")
    extra = [
        "--dataset_name",
        "unused",
        "--reward_method",
        "default",
        "--eval_data_file_paths",
        str(held_out),
        "--eval_strategy",
        "steps",
        "--eval_steps",
        "1",
        "--per_device_eval_batch_size",
        "8",
    ]
    proc = run_module(["vlm_r1.grpo_jsonl", *_grpo_args(tiny_qwen25_dir, train_subset, out, 2, extra)])
    assert "UPSTREAM FLAG: --dataset_name='unused' has NO effect" in proc.stderr
    assert "--reward_method=default has NO effect with task_type gui_grounding" in proc.stderr
    for name in (
        "model.safetensors",
        "config.json",
        "processor_config.json",
        "chat_template.jinja",
        "checkpoint-1",
        "checkpoint-2",
        "vlm_r1_run.json",
        "trainer_state.json",
        "training_curves.png",
    ):
        assert os.path.exists(os.path.join(out, name)), name
    with open(os.path.join(out, "processor_config.json")) as f:
        assert json.load(f)["processor_class"] == "Qwen2_5_VLProcessor"
    with open(os.path.join(out, "vlm_r1_run.json")) as f:
        info = json.load(f)
    assert info["world_size"] == 1
    assert info["reward_funcs"] == ["click_reward", "completion_length_reward"]
    assert info["smart_resize"] == {"factor": 28, "min_pixels": 3136, "max_pixels": 100352}
    # the run's pixel budget is recorded with every value's source, and evaluating the checkpoint uses it (issue 19)
    budget = info["pixel_budget"]
    assert (budget["factor"], budget["min_pixels"], budget["max_pixels"]) == (28, 3136, 100352)
    assert budget["sources"]["max_pixels"] == "flag --max_pixels"
    assert budget["sources"]["factor"] == f"checkpoint {tiny_qwen25_dir} image processor"
    from gui_grounding.eval.budget import resolve_eval_budget
    from gui_grounding.models.adapters import get_adapter

    for model in (out, os.path.join(out, "checkpoint-2")):
        resolved, warnings = resolve_eval_budget(get_adapter("gta1"), model=model)
        assert (resolved.max_pixels, warnings) == (100352, []), model  # not GTA1's published 8,847,360
        assert resolved.sources["max_pixels"] == f"checkpoint {os.path.join(out, 'vlm_r1_run.json')}"
    # `gui-grounding eval --model RUN` without --max-pixels evaluates at the recorded training budget (one sample)
    from gui_grounding.cli import main as gui_grounding_main

    eval_args = ["eval", "--data", str(held_out), "--model", out, "--out", str(tmp_path / "eval")]
    gui_grounding_main([*eval_args, "--limit", "1", "--max-new-tokens", "4"])
    with open(tmp_path / "eval" / "metrics.json") as f:
        meta = json.load(f)["meta"]
    assert (meta["pixel_budget"]["factor"], meta["pixel_budget"]["min_pixels"]) == (28, 3136)
    assert meta["pixel_budget"]["max_pixels"] == 100352 and meta["pixel_budget_warnings"] == []
    assert meta["pixel_budget"]["sources"]["max_pixels"] == f"checkpoint {os.path.join(out, 'vlm_r1_run.json')}"
    assert [[i] for i in info["banned_token_ids"]] == info["generation_kwargs"]["bad_words_ids"]  # GTA1's image token
    assert len(info["banned_token_ids"]) == 1
    assert info["beta"] == 0.0 and info["num_generations"] == 8 and info["learning_rate"] == 1e-6
    assert (info["loss_type"], info["generation"]["top_k"], info["box_rounding"]) == ("grpo", 50, "gta1")
    history = step_logs(os.path.join(out, "checkpoint-2"))
    assert [h["step"] for h in history] == [1, 2]
    for h in history:
        assert 0.0 <= h["rewards/click_reward/mean"] <= 1.0
        assert h["rewards/completion_length_reward/mean"] > 0
    # greedy click accuracy on the held-out file after each step (same judge as `gui-grounding eval`), next to TRL's
    # sampled eval reward
    with open(os.path.join(out, "trainer_state.json")) as f:
        logs = json.load(f)["log_history"]
    click = [h for h in logs if "eval_click/accuracy" in h]
    assert [h["step"] for h in click] == [1, 2]
    assert all(h["eval_click/num_samples"] == 3 and 0 <= h["eval_click/accuracy"] <= 100 for h in click)
    assert any("eval_reward" in h for h in logs)
    _check_weights(tiny_qwen25_dir, out)


@pytest.mark.slow  # ~23 s: two torchrun processes (the 2-process ZeRO-2 test and the preflight tests stay fast)
def test_torchrun_two_processes_and_reload(tiny_qwen25_dir, train_subset, tmp_path):
    out = str(tmp_path / "ddp")
    proc = run(
        ["bash", "run_scripts/train_grpo.sh", *_grpo_args(tiny_qwen25_dir, train_subset, out, 2)],
        env=child_env(NPROC_PER_NODE=2),
    )
    # DDP's find_unused_parameters comes from the model (vision tower frozen: nothing can be unused), so torch's
    # per-step "find_unused_parameters=True was specified ... but did not find any unused parameters" never appears
    assert "DDP find_unused_parameters=False: the vision tower has no trainable parameter" in proc.stderr
    assert "find_unused_parameters=True was specified" not in proc.stderr, proc.stderr[-4000:]
    with open(os.path.join(out, "vlm_r1_run.json")) as f:
        info = json.load(f)
    assert info["world_size"] == 2 and info["distributed_type"].endswith("MULTI_CPU")
    assert info["global_completions_per_step"] == 16
    history = step_logs(os.path.join(out, "checkpoint-2"))
    assert [h["step"] for h in history] == [1, 2]
    # checkpoint-2 holds the same weights as the final save (both after step 2)
    final = load_file(os.path.join(out, "model.safetensors"))
    ckpt = load_file(os.path.join(out, "checkpoint-2", "model.safetensors"))
    assert all(torch.equal(final[k], ckpt[k]) for k in final)
    _check_weights(tiny_qwen25_dir, out)

    # reload with the one loader and run a forward pass on a real screenshot
    from PIL import Image

    from vlm_r1.modules import load_model, load_processor

    processor = load_processor(out)
    model = load_model(out)
    assert type(model).__name__ == "Qwen2_5_VLForConditionalGeneration"
    reloaded = {k: v for k, v in model.state_dict().items()}
    assert all(torch.equal(reloaded[k], final[k]) for k in final if k in reloaded)
    with open(train_subset) as f:
        rec = json.loads(f.readline())
    image = Image.open(os.path.join(SAMPLE, rec["image_path"])).convert("RGB")
    text = processor.apply_chat_template(
        [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": rec["instruction"]}]}],
        add_generation_prompt=True,
        tokenize=False,
    )
    batch = processor(text=[text], images=[image], return_tensors="pt")
    with torch.inference_mode():
        logits = model(**batch).logits
    assert logits.shape[:2] == batch["input_ids"].shape and torch.isfinite(logits).all()


def test_eval_predict_and_rescore(tiny_qwen25_dir, tmp_path):
    from gui_grounding.data.schema import load_samples
    from gui_grounding.eval.run import run_eval

    test_file = os.path.join(SAMPLE, "test.jsonl")
    doc = run_eval(
        "canonical",
        test_file,
        str(tmp_path / "eval"),
        model=tiny_qwen25_dir,
        limit=5,
        batch_size=4,
        max_new_tokens=8,
        max_pixels=100352,
    )
    preds = [json.loads(x) for x in open(tmp_path / "eval" / "predictions.jsonl")]
    assert len(preds) == 5 and doc["overall"]["num_total"] == 5
    assert all(set(p) >= {"sample_id", "point", "raw_response", "prompt", "adapter"} for p in preds)
    assert {p["adapter"] for p in preds} == {"gta1"}  # default for model_type qwen2_5_vl
    assert "The image resolution is height" in preds[0]["prompt"]
    assert json.load(open(tmp_path / "eval" / "metrics.json"))["overall"] == doc["overall"]
    assert (tmp_path / "eval" / "failures.html").exists()

    # rescoring mode: exact accuracy from hand-made predictions on the first four samples
    samples, _ = load_samples([test_file])
    s = samples[:4]
    b0, b1 = s[0].boxes[0], s[1].boxes[0]
    lines = [
        {"sample_id": s[0].sample_id, "point": [b0[0], b0[1]], "raw_response": "corner"},  # corner: counts
        {"sample_id": s[1].sample_id, "point": [(b1[0] + b1[2]) / 2, (b1[1] + b1[3]) / 2], "raw_response": "c"},
        {"sample_id": s[2].sample_id, "point": None, "raw_response": "no idea"},
        {"sample_id": s[3].sample_id, "point": [s[3].boxes[0][2] + 1, s[3].boxes[0][3]], "raw_response": "miss"},
    ]
    pred_file = tmp_path / "preds.jsonl"
    pred_file.write_text("".join(json.dumps(x) + "\n" for x in lines))
    m = run_eval("canonical", test_file, str(tmp_path / "rescored"), predictions=str(pred_file), limit=4)
    # Wilson 95% interval of 2/4 (z = 1.959964): centre 0.5, half-width z / (1 + z^2/4) * sqrt(1/16 + z^2/64) = 0.35
    assert m["overall"] == {"num_correct": 2, "num_total": 4, "wrong_format": 1, "accuracy": 50.0, "ci95": [15.0, 85.0]}
    with open(pred_file, "a") as f:
        f.write(json.dumps({"sample_id": "not-in-data:0", "point": [1, 1], "raw_response": ""}) + "\n")
    m = run_eval("canonical", test_file, str(tmp_path / "rescored2"), predictions=str(pred_file), limit=4)
    assert m["overall"]["num_correct"] == 2
    assert "not-in-data:0" in json.dumps(m["predictions"])


def test_cli_help_lists_subcommands(capsys):
    """In process (two interpreter start-ups cost ~10 s): ``--help`` prints and exits 0."""
    from gui_grounding.cli import main as gui_main
    from vlm_r1.grpo_jsonl import main as grpo_main

    with pytest.raises(SystemExit) as exit_info:
        gui_main(["--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    for sub in ("make-tiny-model", "collect-web", "train", "eval"):
        assert sub in out
    with pytest.raises(SystemExit) as exit_info:
        grpo_main(["--help"])
    assert exit_info.value.code == 0
    proc_stdout = capsys.readouterr().out
    for flag in (
        "--data_file_paths",
        "--image_folders",
        "--reward_funcs",
        "--max_pixels",
        "--freeze_vision_modules",
        "--task_type",
        "--is_reward_customized_from_vlm_module",
        "--use_vllm",
        "--beta",
        "--loss_type",
    ):
        assert flag in proc_stdout, flag
