"""DeepSpeed ZeRO on CPU: the three configs load, and 2-process ZeRO-2 / ZeRO-3 GRPO runs match plain DDP.

The runs go through the real launcher (``run_scripts/train_grpo.sh`` -> torchrun -> ``python -m vlm_r1.grpo_jsonl``)
with 2 processes over gloo on the tiny Qwen2.5-VL, 2 steps, ``--seed 0 --data_seed 0 --bf16 false``. With the same
seeds DDP and ZeRO see the same batches and generate the same completions, so per-step ``loss`` and ``grad_norm``
agree (measured: loss bit-identical, grad_norm within ~1e-6 relative: ZeRO reduces gradients in a different order),
and the saved models agree to ~1e-8.

DeepSpeed JIT-compiles its ``deepspeed_shm_comm_op`` on first use (about 30 s); ``TORCH_EXTENSIONS_DIR`` defaults to
``~/.cache/torch_extensions`` here so that happens once per machine (cache that directory in CI).
"""

from __future__ import annotations

import json
import os
import sys

import pytest

from tests.helpers.paths import REPO
from tests.helpers.proc import run
from tests.helpers.train import launch, launch_env, sample_subset, step_logs, tiny_train_argv

pytest.importorskip("deepspeed", reason="DeepSpeed not installed: pip install -e .[deepspeed] (or .[dev])")

CONFIGS = os.path.join(REPO, "configs", "deepspeed")
LOSS_TOL = dict(rel=1e-5, abs=1e-7)
WEIGHT_ATOL = 1e-6


# zero3_offload (~7 s) in the slow suite: the zero3 load covers the same stage
@pytest.mark.parametrize("name", ["zero2", "zero3", pytest.param("zero3_offload", marks=pytest.mark.slow)])
def test_config_loads(name, tmp_path):
    """Each config: HF fills every "auto", DeepSpeed's own config class accepts the result (in a subprocess, so the
    global ZeRO-3 state HF keeps for ``from_pretrained`` does not leak into other tests)."""
    script = f"""
import json, sys
from transformers import TrainingArguments
from deepspeed.runtime.config import DeepSpeedConfig
args = TrainingArguments(output_dir={str(tmp_path)!r}, deepspeed={os.path.join(CONFIGS, name + ".json")!r},
                         use_cpu=True, bf16=False, per_device_train_batch_size=8, gradient_accumulation_steps=2,
                         max_grad_norm=1.0, report_to="none")
hf = args.hf_deepspeed_config
class Cfg:  # what trainer_config_finalize reads from the model
    hidden_size = 64
class Model:
    config = Cfg()
hf.trainer_config_finalize(args, Model(), num_training_steps=10)
cfg = hf.config
autos = [k for k, v in json.loads(json.dumps(cfg)).items() if v == "auto"]
autos += [k for k, v in cfg.get("zero_optimization", {{}}).items() if v == "auto"]
assert not autos, autos
ds = DeepSpeedConfig(cfg)
print(json.dumps({{"stage": ds.zero_optimization_stage, "micro": ds.train_micro_batch_size_per_gpu,
                   "accum": ds.gradient_accumulation_steps, "batch": ds.train_batch_size, "clip": ds.gradient_clipping,
                   "bf16": ds.bfloat16_config.enabled, "fp16": ds.float16_config.enabled,
                   "gather16": ds.zero_config.gather_16bit_weights_on_model_save,
                   "offload_opt": str(ds.zero_config.offload_optimizer.device) if ds.zero_config.offload_optimizer else None,
                   "offload_param": str(ds.zero_config.offload_param.device) if ds.zero_config.offload_param else None}}))
"""
    proc = run([sys.executable, "-c", script], env=launch_env(None), timeout=300)
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert (got["micro"], got["accum"], got["batch"], got["clip"]) == (8, 2, 16, 1.0)
    assert got["bf16"] is False and got["fp16"] is False
    assert got["stage"] == (2 if name == "zero2" else 3)
    if name != "zero2":
        assert got["gather16"] is True, "ZeRO-3 must save full 16-bit weights with the model"
    offload = name == "zero3_offload"
    assert (got["offload_opt"] is not None, got["offload_param"] is not None) == (offload, offload)
    if offload:
        assert "cpu" in got["offload_opt"] and "cpu" in got["offload_param"]


@pytest.fixture(scope="module")
def ds_train_subset(tmp_path_factory):
    return sample_subset(tmp_path_factory.mktemp("ds_data") / "train.jsonl", 6)


def _train(model_dir, data, out, extra=()):
    args = tiny_train_argv(model_dir, data, out, *extra, save_strategy="steps", save_steps=2, data_seed=0, bf16=False)
    launch(args)
    history = step_logs(os.path.join(out, "checkpoint-2"))
    assert [h["step"] for h in history] == [1, 2]
    return history


def _state_dict(path):
    from vlm_r1.modules import load_model

    return {k: v.detach().float() for k, v in load_model(path).state_dict().items()}


@pytest.fixture(scope="module")
def ddp_run(tiny_qwen25_dir, ds_train_subset, tmp_path_factory):
    out = str(tmp_path_factory.mktemp("ds_runs") / "ddp")
    history = _train(tiny_qwen25_dir, ds_train_subset, out)
    assert any(h["loss"] != 0 for h in history) and all(h["grad_norm"] > 0 for h in history)
    return out, history


# ~40 s per stage with the DDP reference run: slow suite (test_config_loads keeps each config's load in the default one)
@pytest.mark.parametrize(
    "stage", [pytest.param("zero2", marks=pytest.mark.slow), pytest.param("zero3", marks=pytest.mark.slow)]
)
def test_zero_matches_ddp(stage, ddp_run, tiny_qwen25_dir, ds_train_subset, tmp_path):
    ddp_out, ddp_history = ddp_run
    out = str(tmp_path / stage)
    history = _train(tiny_qwen25_dir, ds_train_subset, out, ["--deepspeed", os.path.join(CONFIGS, f"{stage}.json")])
    with open(os.path.join(out, "vlm_r1_run.json")) as f:
        info = json.load(f)
    assert info["world_size"] == 2 and info["distributed_type"].endswith("DEEPSPEED")
    # the frozen tower is cached; under ZeRO-3 the processes decide its hits together (vlm_r1.vision_cache)
    assert info["vision_tower"]["cache"] is True and info["vision_tower"]["lockstep"] == (stage == "zero3")
    for ours, ref in zip(history, ddp_history, strict=True):
        assert ours["loss"] == pytest.approx(ref["loss"], **LOSS_TOL), (stage, ours["step"], "loss")
        assert ours["grad_norm"] == pytest.approx(ref["grad_norm"], **LOSS_TOL), (stage, ours["step"], "grad_norm")
    # the final save holds full weights (ZeRO-3: stage3_gather_16bit_weights_on_model_save), loadable by the one loader
    ref, got = _state_dict(ddp_out), _state_dict(out)
    assert got.keys() == ref.keys()
    worst = max((got[k] - ref[k]).abs().max().item() for k in ref)
    assert worst <= WEIGHT_ATOL, f"{stage}: final weights differ from DDP by {worst}"
    assert os.path.isfile(os.path.join(out, "checkpoint-2", "model.safetensors")), "checkpoint without full weights"
