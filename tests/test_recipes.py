"""Cluster recipes on CPU: batch math and dry-run, complete checkpoints, preemption and exact resume."""

from __future__ import annotations

import json
import os
import subprocess
import time

import pytest

from vlm_r1.preemption import COMPLETE_MARKER, PREEMPT_FILE, latest_complete_checkpoint

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STEPS = 8  # the preemption request comes after step 2 starts: several steps of headroom before the end


def _env(**extra):
    env = dict(os.environ, TOKENIZERS_PARALLELISM="false", OMP_NUM_THREADS="1")
    env.update({k: str(v) for k, v in extra.items()})
    return env


def _dry_run(script, **env):
    return subprocess.run(["bash", f"run_scripts/{script}", "--dry-run"], cwd=REPO, env=_env(**env),
                          capture_output=True, text=True, timeout=120)  # fmt: skip


def test_batch_math_and_dry_run():
    p = _dry_run("gta1_7b.sh", NNODES=4, NPROC_PER_NODE=8, MASTER_ADDR="node001", OUTPUT_DIR="/tmp/x")
    assert p.returncode == 0, p.stderr
    assert "world size 32 = 4 node(s) x 8 process(es)" in p.stderr
    assert "128 prompts x 8 rollouts = 1024 completions" in p.stderr
    assert "= 32 processes x 8 completions/micro-step x 4 gradient accumulation steps" in p.stderr
    cmd = p.stdout
    for piece in ("--nnodes 4", "--nproc_per_node 8", "--rdzv_endpoint node001:29500", "--max_restarts 3",
                  "-m gui_grounding.train", "--config " + os.path.join(REPO, "recipes/gta1/7b.yaml"),
                  "--per_device_train_batch_size 8", "--gradient_accumulation_steps 4", "--num_generations 8",
                  "configs/deepspeed/zero2.json"):
        assert piece in cmd, piece
    # the resolved objective: GTA1's (recipes/gta1/7b.yaml), not the core's upstream defaults
    for key, value in (("loss_type", "grpo"), ("beta", "0.0"), ("num_generations", "8"), ("learning_rate", "1e-06"),
                       ("temperature", "1.0"), ("top_k", "50"), ("top_p", "1.0"), ("max_completion_length", "128"),
                       ("max_pixels", "8847360"), ("prompt_mode", "non_thinking"), ("reward_funcs", "['click']"),
                       ("box_rounding", "gta1"), ("max_steps", "250"), ("gradient_accumulation_steps", "4")):
        assert any(line.split()[1:] == [key, value] for line in p.stderr.splitlines()
                   if line.startswith("[dry-run]")), (key, value)
    # environment variables and arguments override the YAML
    q = _dry_run("gta1_7b.sh", NNODES=1, NPROC_PER_NODE=8, BETA="0.04", MAX_PIXELS="1003520")
    assert q.returncode == 0, q.stderr
    dry = {line.split()[1]: line.split(None, 2)[2] for line in q.stderr.splitlines() if line.startswith("[dry-run]")}
    assert (dry["beta"], dry["max_pixels"]) == ("0.04", "1003520")
    assert "zero3.json" in _dry_run("gta1_72b.sh", NNODES=2, NPROC_PER_NODE=8, MASTER_ADDR="n1").stdout
    one = _dry_run("gta1_32b.sh", NNODES=1, NPROC_PER_NODE=8, ROLLOUTS_PER_DEVICE=4)
    assert "= 8 processes x 4 completions/micro-step x 32 gradient accumulation steps" in one.stderr


@pytest.mark.parametrize("env, message", [
    (dict(NNODES=3, NPROC_PER_NODE=8, MASTER_ADDR="n1"), "cannot be spread evenly over 24 processes. Use GLOBAL_PROMPTS=129"),
    (dict(NNODES=1, NPROC_PER_NODE=8, ROLLOUTS_PER_DEVICE=3), "ROLLOUTS_PER_DEVICE=3 does not divide"),
])  # fmt: skip
def test_impossible_batch_is_refused(env, message):
    p = _dry_run("gta1_7b.sh", **env)
    assert p.returncode == 2 and message in p.stderr


def test_multinode_without_rendezvous_host_is_refused(tmp_path):
    p = subprocess.run(["bash", "run_scripts/train_grpo.sh", "--help"], cwd=REPO, env=_env(NNODES=2),
                       capture_output=True, text=True, timeout=60)  # fmt: skip
    assert p.returncode == 2 and "no rendezvous host" in p.stderr


def test_latest_complete_checkpoint_skips_half_written(tmp_path):
    for step, complete in ((2, True), (4, True), (6, False)):
        d = tmp_path / f"checkpoint-{step}"
        d.mkdir()
        if complete:
            (d / COMPLETE_MARKER).write_text("ok")
    assert latest_complete_checkpoint(str(tmp_path)) == str(tmp_path / "checkpoint-4")
    assert latest_complete_checkpoint(str(tmp_path / "missing")) is None


def _batches(out):
    lines = [json.loads(x) for x in open(os.path.join(out, "batches.rank0.jsonl"))]
    return [(x["step"], tuple(x["sample_ids"])) for x in lines]


def _recipe(out, steps, tiny_dir):
    return ["bash", "run_scripts/gta1_tiny_cpu.sh"], _env(OUTPUT_DIR=out, MAX_STEPS=steps, TINY_MODEL_DIR=tiny_dir)


def test_tiny_recipe_preempt_and_resume(tmp_path, tiny_qwen25_dir):
    # reference: an uninterrupted run
    ref = str(tmp_path / "ref")
    cmd, env = _recipe(ref, STEPS, tiny_qwen25_dir)
    p = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    assert {"checkpoint-2", "checkpoint-4"} <= set(os.listdir(ref))
    assert all(os.path.isfile(os.path.join(ref, f"checkpoint-{s}", COMPLETE_MARKER)) for s in (2, 4))
    reference = _batches(ref)
    assert [s for s, _ in reference] == list(range(1, STEPS + 1))
    # the recipe trains GTA1's objective (recipes/gta1/tiny_cpu.yaml), as generate resolves it
    with open(os.path.join(ref, "vlm_r1_run.json")) as f:
        info = json.load(f)
    assert (info["loss_type"], info["beta"], info["num_generations"], info["has_ref_model"]) == ("grpo", 0.0, 8, False)
    assert {k: info["generation"][k] for k in ("do_sample", "temperature", "top_k", "top_p")} == {
        "do_sample": True, "temperature": 1.0, "top_k": 50, "top_p": 1.0}
    assert (info["task_type"], info["reward_funcs"], info["box_rounding"]) == ("gui_grounding", ["click_reward"], "gta1")

    # preempted run: request a stop (as the SLURM wrapper does on USR1) once step 2 has started
    out = str(tmp_path / "run")
    cmd, env = _recipe(out, STEPS, tiny_qwen25_dir)
    log = tmp_path / "preempted.log"  # a file, not a pipe: an unread pipe can fill up and stall the run
    with open(log, "w") as logf:
        proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=logf, stderr=subprocess.STDOUT, text=True)
        deadline = time.time() + 300
        while time.time() < deadline and proc.poll() is None:
            path = os.path.join(out, "batches.rank0.jsonl")
            if os.path.exists(path) and any(json.loads(x)["step"] >= 2 for x in open(path)):
                open(os.path.join(out, PREEMPT_FILE), "w").close()
                break
            time.sleep(0.1)
        proc.wait(timeout=300)
    err = log.read_text()
    assert proc.returncode == 0, err[-3000:]
    assert "preempted at step" in err
    stopped = max(s for s, _ in _batches(out))
    assert 2 <= stopped < STEPS, (stopped, err[-2000:])
    assert latest_complete_checkpoint(out) == os.path.join(out, f"checkpoint-{stopped}")
    assert not os.path.exists(os.path.join(out, "model.safetensors"))  # no "final" model from a preempted run
    assert os.path.exists(os.path.join(out, PREEMPT_FILE))  # tells the batch script to requeue

    # the requeued job: same command, resumes from the newest complete checkpoint and finishes
    p = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    assert f"resuming from {os.path.join(out, f'checkpoint-{stopped}')}" in p.stderr
    assert os.path.exists(os.path.join(out, "model.safetensors")) and not os.path.exists(os.path.join(out, PREEMPT_FILE))
    # every step trained exactly once, on exactly the batches of the uninterrupted run
    assert _batches(out) == reference
    with open(os.path.join(out, "trainer_state.json")) as f:
        assert json.load(f)["global_step"] == STEPS
