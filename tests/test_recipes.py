"""Cluster recipes on CPU: batch math and dry-run, complete checkpoints, preemption and exact resume."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import time

import pytest

from tests.helpers.paths import REPO
from tests.helpers.proc import child_env, run, stop
from vlm_r1.preemption import COMPLETE_MARKER, PREEMPT_FILE, latest_complete_checkpoint

STEPS = 8  # the preemption request comes after step 2 starts: several steps of headroom before the end


#: the launchers' environment: one OpenMP thread per rank, the repository (not the test plugins) on PYTHONPATH
_env = functools.partial(child_env, threads=1, plugins=False)


def _dry_run(script, **env):
    return run(["bash", f"run_scripts/{script}", "--dry-run"], env=_env(**env), timeout=120, check=False)


def test_batch_math_and_dry_run():
    p = _dry_run("gta1_7b.sh", NNODES=4, NPROC_PER_NODE=8, MASTER_ADDR="node001", OUTPUT_DIR="/tmp/x", SLURM_JOB_ID="")
    assert p.returncode == 0, p.stderr
    assert "world size 32 = 4 node(s) x 8 process(es)" in p.stderr
    assert "128 prompts x 8 rollouts = 1024 completions" in p.stderr
    assert "= 32 processes x 8 completions/micro-step x 4 gradient accumulation steps" in p.stderr
    cmd = p.stdout
    for piece in (
        "--nnodes 4",
        "--nproc_per_node 8",
        "--rdzv_endpoint node001:29500",
        "--max_restarts 3",
        "-m gui_grounding.train",
        "--config " + os.path.join(REPO, "recipes/gta1/7b.yaml"),
        "--per_device_train_batch_size 8",
        "--gradient_accumulation_steps 4",
        "--num_generations 8",
        "configs/deepspeed/zero2.json",
    ):
        assert piece in cmd, piece
    # the resolved objective: GTA1's (recipes/gta1/7b.yaml), not the core's upstream defaults
    for key, value in (
        ("loss_type", "grpo"),
        ("beta", "0.0"),
        ("num_generations", "8"),
        ("learning_rate", "1e-06"),
        ("temperature", "1.0"),
        ("top_k", "50"),
        ("top_p", "1.0"),
        ("max_completion_length", "128"),
        ("max_pixels", "8847360"),
        ("prompt_mode", "non_thinking"),
        ("reward_funcs", "['click']"),
        ("box_rounding", "gta1"),
        ("max_steps", "250"),
        ("gradient_accumulation_steps", "4"),
    ):
        assert any(
            line.split()[1:] == [key, value] for line in p.stderr.splitlines() if line.startswith("[dry-run]")
        ), (key, value)
    # environment variables and arguments override the YAML
    q = _dry_run("gta1_7b.sh", NNODES=1, NPROC_PER_NODE=8, BETA="0.04", MAX_PIXELS="1003520")
    assert q.returncode == 0, q.stderr
    dry = {line.split()[1]: line.split(None, 2)[2] for line in q.stderr.splitlines() if line.startswith("[dry-run]")}
    assert (dry["beta"], dry["max_pixels"]) == ("0.04", "1003520")
    assert "zero3.json" in _dry_run("gta1_72b.sh", NNODES=2, NPROC_PER_NODE=8, MASTER_ADDR="n1").stdout
    one = _dry_run("gta1_32b.sh", NNODES=1, NPROC_PER_NODE=8, ROLLOUTS_PER_DEVICE=4)
    assert "= 8 processes x 4 completions/micro-step x 32 gradient accumulation steps" in one.stderr


@pytest.mark.slow  # several launcher subprocesses (~10 s; issue 19 time budget)
def test_rendezvous_ports_do_not_collide():
    """Multi-node: port and id from SLURM_JOB_ID (two jobs sharing a node differ). One node: port 0 (torchrun's store
    binds a free port itself: no probe-then-release race), this node hosts the store (a taken port fails instead of
    joining a stranger's rendezvous), and a rendezvous id of its own per launch."""

    def launch(**env):
        p = run(["bash", "run_scripts/train_grpo.sh", "--x"], env=_env(DRY_RUN=1, NPROC_PER_NODE=2, **env), timeout=120)
        words = p.stdout.split()
        conf = words[words.index("--rdzv_conf") + 1] if "--rdzv_conf" in words else None
        return words[words.index("--rdzv_endpoint") + 1], words[words.index("--rdzv_id") + 1], conf

    job = dict(NNODES=2, MASTER_ADDR="n1")
    assert launch(SLURM_JOB_ID="4242", **job) == ("n1:30742", "4242", None)  # 29500 + 4242 % 3000
    assert launch(SLURM_JOB_ID="4243", **job)[0] == "n1:30743"
    assert launch(SLURM_JOB_ID="7", MASTER_PORT="12345", **job)[0] == "n1:12345"  # an explicit port wins
    assert launch(SLURM_JOB_ID="", **job) == ("n1:29500", "local", None)  # no SLURM: the fixed default
    for port in (29500 + j % 3000 for j in (0, 2999, 10**9 + 7)):
        assert 29500 <= port < 32768  # below Linux's ephemeral range: never a probed or connecting socket's port
    one, two = launch(SLURM_JOB_ID="", NNODES=1), launch(SLURM_JOB_ID="", NNODES=1)
    assert one[0] == two[0] == "127.0.0.1:0" and one[2] == two[2] == "is_host=1"
    assert one[1] != two[1] and one[1].startswith("local-")
    assert launch(SLURM_JOB_ID="99", NNODES=1)[1] == "99"


_PROBE = """
import os, sys, torch.distributed as dist
dist.init_process_group("gloo")
attempt, rank = os.environ["TORCHELASTIC_RESTART_COUNT"], dist.get_rank()
dist.barrier()
if attempt == "0" and rank == 1:
    os.abort()  # a worker dying (as one did at exit under load): torchrun restarts the group
dist.barrier()
print(f"attempt {attempt} rank {rank} done", flush=True)
dist.destroy_process_group()
"""


def test_torchrun_restart_gets_a_working_group(tmp_path):
    """The restarted group must not read the dead attempt's store (torch 2.13 shares one store across attempts unless
    TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1: the restarted workers then dial dead gloo peers or wait forever)."""
    (tmp_path / "restart_probe.py").write_text(_PROBE)
    env = _env(
        NPROC_PER_NODE=2, NNODES=1, MAX_RESTARTS=1, ENTRY="restart_probe", PYTHONPATH=str(tmp_path), SLURM_JOB_ID=""
    )
    p = run(["bash", "run_scripts/train_grpo.sh"], env=env, timeout=300, check=False)
    assert p.returncode == 0, p.stderr[-3000:]
    assert "attempt 1 rank 0 done" in p.stdout and "attempt 1 rank 1 done" in p.stdout


def test_taken_rendezvous_port_fails_fast(tmp_path):
    """One node hosts its own store: a port already taken by another job's store is an error at once, not a silent
    join of that job's rendezvous (c10d's fallback to a client when it cannot bind)."""
    import socket

    with socket.socket() as taken:
        taken.bind(("0.0.0.0", 0))
        taken.listen()
        (tmp_path / "never.py").write_text("raise SystemExit('the workers must not start')\n")
        env = _env(
            NPROC_PER_NODE=1,
            NNODES=1,
            MASTER_PORT=taken.getsockname()[1],
            ENTRY="never",
            PYTHONPATH=str(tmp_path),
            SLURM_JOB_ID="",
        )
        start = time.time()
        p = run(["bash", "run_scripts/train_grpo.sh"], env=env, timeout=300, check=False)
    assert p.returncode != 0 and "address already in use" in p.stderr.lower(), p.stderr[-3000:]
    assert "the workers must not start" not in p.stderr
    assert time.time() - start < 120


@pytest.mark.parametrize(
    "env, message",
    [
        (
            dict(NNODES=3, NPROC_PER_NODE=8, MASTER_ADDR="n1"),
            "cannot be spread evenly over 24 processes. Use GLOBAL_PROMPTS=129",
        ),
        (dict(NNODES=1, NPROC_PER_NODE=8, ROLLOUTS_PER_DEVICE=3), "ROLLOUTS_PER_DEVICE=3 does not divide"),
    ],
)
def test_impossible_batch_is_refused(env, message):
    p = _dry_run("gta1_7b.sh", **env)
    assert p.returncode == 2 and message in p.stderr


def test_multinode_without_rendezvous_host_is_refused(tmp_path):
    p = run(["bash", "run_scripts/train_grpo.sh", "--help"], env=_env(NNODES=2), timeout=60, check=False)
    assert p.returncode == 2 and "no rendezvous host" in p.stderr


def test_latest_complete_checkpoint_skips_half_written(tmp_path):
    for step, complete in ((2, True), (4, True), (6, False)):
        d = tmp_path / f"checkpoint-{step}"
        d.mkdir()
        if complete:
            (d / COMPLETE_MARKER).write_text("ok")
    assert latest_complete_checkpoint(str(tmp_path)) == str(tmp_path / "checkpoint-4")
    assert latest_complete_checkpoint(str(tmp_path / "missing")) is None


def test_preemption_handlers_are_restored_after_training(tmp_path):
    """Past the last step a preemption request cannot be honoured: torchrun's SIGTERM must end the process again."""
    import signal

    from vlm_r1.preemption import PreemptionCallback

    before = signal.getsignal(signal.SIGUSR1)
    cb = PreemptionCallback(str(tmp_path), signals=(signal.SIGUSR1,))
    assert signal.getsignal(signal.SIGUSR1) == cb._on_signal
    cb.on_train_end(None, None, None)
    assert signal.getsignal(signal.SIGUSR1) == before


def _batches(out):
    lines = [json.loads(x) for x in open(os.path.join(out, "batches.rank0.jsonl"))]
    return [(x["step"], tuple(x["sample_ids"])) for x in lines]


def _max_recorded_step(path):
    """Highest step in a batches.rank0.jsonl being appended to (a line still being written is skipped), or 0."""
    steps = [0]
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                try:
                    steps.append(json.loads(line)["step"])
                except ValueError:
                    pass
    return max(steps)


def _recipe(out, steps, tiny_dir):
    return ["bash", "run_scripts/gta1_tiny_cpu.sh"], _env(OUTPUT_DIR=out, MAX_STEPS=steps, TINY_MODEL_DIR=tiny_dir)


def test_tiny_recipe_preempt_and_resume(tmp_path, tiny_qwen25_dir):
    # reference: an uninterrupted run
    ref = str(tmp_path / "ref")
    cmd, env = _recipe(ref, STEPS, tiny_qwen25_dir)
    p = run(cmd, env=env, check=False)
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
        "do_sample": True,
        "temperature": 1.0,
        "top_k": 50,
        "top_p": 1.0,
    }
    assert (info["task_type"], info["reward_funcs"], info["box_rounding"]) == (
        "gui_grounding",
        ["click_reward"],
        "gta1",
    )

    # preempted run: request a stop (as the SLURM wrapper does on USR1) once step 2 has started
    out = str(tmp_path / "run")
    cmd, env = _recipe(out, STEPS, tiny_qwen25_dir)
    log = tmp_path / "preempted.log"  # a file, not a pipe: an unread pipe can fill up and stall the run
    requested = False
    with open(log, "w") as logf:
        proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=logf, stderr=subprocess.STDOUT, text=True)
        try:
            deadline = time.time() + 300
            while time.time() < deadline and proc.poll() is None:
                if _max_recorded_step(os.path.join(out, "batches.rank0.jsonl")) >= 2:
                    open(os.path.join(out, PREEMPT_FILE), "w").close()
                    requested = True
                    break
                time.sleep(0.1)
            proc.wait(timeout=300)
        finally:
            stop(proc)  # never leave a run behind (its workers would load the machine for the next tests)
    err = log.read_text()
    assert requested, "step 2 never started: " + err[-3000:]
    assert proc.returncode == 0, err[-3000:]
    assert "preempted at step" in err
    stopped = max(s for s, _ in _batches(out))
    assert 2 <= stopped < STEPS, (stopped, err[-2000:])
    assert latest_complete_checkpoint(out) == os.path.join(out, f"checkpoint-{stopped}")
    assert not os.path.exists(os.path.join(out, "model.safetensors"))  # no "final" model from a preempted run
    assert os.path.exists(os.path.join(out, PREEMPT_FILE))  # tells the batch script to requeue

    # the requeued job: same command, resumes from the newest complete checkpoint and finishes
    p = run(cmd, env=env, check=False)
    assert p.returncode == 0, p.stderr[-3000:]
    assert f"resuming from {os.path.join(out, f'checkpoint-{stopped}')}" in p.stderr
    assert os.path.exists(os.path.join(out, "model.safetensors")) and not os.path.exists(
        os.path.join(out, PREEMPT_FILE)
    )
    # every step trained exactly once, on exactly the batches of the uninterrupted run
    assert _batches(out) == reference
    with open(os.path.join(out, "trainer_state.json")) as f:
        assert json.load(f)["global_step"] == STEPS
