"""Cluster recipes on CPU: batch math and dry-run, complete checkpoints, preemption and exact resume."""

from __future__ import annotations

import functools
import json
import os
import re
import subprocess
import time

import pytest

from tests.helpers.paths import REPO
from tests.helpers.proc import child_env, run, stop
from vlm_r1.preemption import COMPLETE_MARKER, PREEMPT_FILE, latest_complete_checkpoint

STEPS = 8  # the preemption request comes after step 2 starts: several steps of headroom before the end


#: the launchers' environment: one OpenMP thread per rank, the repository (not the test plugins) on PYTHONPATH
_env = functools.partial(child_env, threads=1, plugins=False)


#: the launcher's optional variables, unset (a value in the caller's environment would pass a flag)
_UNSET = dict.fromkeys(
    ("NUM_GENERATIONS", "ZERO", "DEEPSPEED", "GLOBAL_PROMPTS", "ROLLOUTS_PER_DEVICE", "GPU_MEMORY_GIB", "BETA", "MODEL")
)


def _dry_run(script, **env):
    return run(["bash", f"run_scripts/{script}", "--dry-run"], env=_env(**{**_UNSET, **env}), timeout=180, check=False)


def _resolved(stderr):
    """The ``[dry-run] key value`` lines of a dry run (the objective as gui_grounding.train resolves it)."""
    return {line.split()[1]: line.split(None, 2)[2] for line in stderr.splitlines() if line.startswith("[dry-run]")}


def _recipe_with(tmp_path, **values):
    """A copy of recipes/gta1/7b.yaml with some top-level values replaced (the DeepSpeed path made absolute, as the
    copy is outside the repository)."""
    values.setdefault("deepspeed", os.path.join(REPO, "configs", "deepspeed", "zero2.json"))
    lines = []
    with open(os.path.join(REPO, "recipes", "gta1", "7b.yaml"), encoding="utf-8") as f:
        for line in f:
            key = line.split(":", 1)[0]
            lines.append(f"{key}: {values.pop(key)}\n" if key in values else line)
    assert not values, values
    path = tmp_path / "recipe.yaml"
    path.write_text("".join(lines))
    return str(path)


def test_recipe_yaml_is_the_source_and_dry_run_prints_batch_maths_and_memory(tmp_path):
    """With NUM_GENERATIONS (and ZERO, DEEPSPEED) unset the launcher passes no such flag: the recipe YAML's value is
    what training and the dry run use (a recipe whose G is 4, not the old hard-coded 8). The batch maths (Python,
    gui_grounding/ops/plan.py) and the memory estimate are printed."""
    recipe = _recipe_with(tmp_path, num_generations=4)
    p = _dry_run(
        "gta1_7b.sh",
        RECIPE_YAML=recipe,
        NNODES=4,
        NPROC_PER_NODE=8,
        MASTER_ADDR="node001",
        OUTPUT_DIR="/tmp/x",
        SLURM_JOB_ID="",
    )
    assert p.returncode == 0, p.stderr
    cmd = p.stdout
    assert "--num_generations" not in cmd and "--deepspeed" not in cmd, cmd
    for piece in (
        "--nnodes 4",
        "--nproc_per_node 8",
        "--rdzv_endpoint node001:29500",
        "--max_restarts 3",
        "-m gui_grounding.train",
        f"--config {recipe}",
        "--per_device_train_batch_size 8",
        "--gradient_accumulation_steps 2",  # 128 prompts x 4 = 512 completions = 32 GPUs x 8 x 2
    ):
        assert piece in cmd, piece
    err = p.stderr
    for line in (
        f"[plan] num_generations 4 <- --config {recipe}",
        "[plan] world size 32 = 4 node(s) x 8 process(es) per node",
        "[plan] completions per optimisation step: 4 node(s) x 8 GPU(s) per node x 8 per-device batch x 2 gradient "
        "accumulation = 512",
        "[plan] prompts (groups) per step: 512 completions / 4 num_generations = 128",
        "[plan] steps: 250 (max_steps) -> 32,000 prompts, 128,000 completions",
        "[plan] generation: 16 completions (4 prompts) per process per generate call (per-device batch x "
        "steps_per_generation 2)",
    ):
        assert line in err.splitlines(), line
    # the resolved objective: GTA1's (the recipe), not the core's upstream defaults
    dry = _resolved(err)
    for key, value in (
        ("loss_type", "grpo"),
        ("beta", "0.0"),
        ("num_generations", "4"),
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
        ("per_device_train_batch_size", "8"),
        ("gradient_accumulation_steps", "2"),
    ):
        assert dry.get(key) == value, (key, dry.get(key))
    # the memory estimate: its parts, the peak, the calibration's label
    memory = [line for line in err.splitlines() if line.startswith("[memory]")]
    assert any("ZeRO-2 (" in line for line in memory), memory
    for start in ("[memory]   parameters ", "[memory]   optimizer states ", "[memory]   KV cache "):
        assert any(line.startswith(start) for line in memory), start
    assert any(line.startswith("[memory] predicted peak per GPU: ") and "of 80 GiB" in line for line in memory)
    assert any("calibration: GPU measurement: NVIDIA H200" in line for line in memory)  # benchmarks/calibrate_memory.py


def test_environment_variables_pass_flags_that_win():
    """NUM_GENERATIONS=16 passes --num_generations 16, which wins over the YAML's 8, and the batch maths use it;
    ZERO=3 passes the ZeRO-3 config; BETA and MAX_PIXELS override the YAML too."""
    p = _dry_run(
        "gta1_7b.sh",
        NNODES=1,
        NPROC_PER_NODE=8,
        NUM_GENERATIONS=16,
        ROLLOUTS_PER_DEVICE=16,
        ZERO=3,
        BETA="0.04",
        MAX_PIXELS="1003520",
        PMI_SIZE=2,  # as srun sets it: the plan's parse in the launcher must not try to form a process group
        PMI_RANK=0,
    )
    assert p.returncode == 0, p.stderr
    for piece in (
        "--num_generations 16",
        "--deepspeed " + os.path.join(REPO, "configs/deepspeed/zero3.json"),
        "--per_device_train_batch_size 16",
        "--gradient_accumulation_steps 16",  # 128 x 16 = 2048 = 8 GPUs x 16 x 16
    ):
        assert piece in p.stdout, piece
    err = p.stderr.splitlines()
    assert "[plan] num_generations 16 <- flag --num_generations" in err
    assert (
        "[plan] completions per optimisation step: 1 node(s) x 8 GPU(s) per node x 16 per-device batch x 16 gradient "
        "accumulation = 2,048" in err
    )
    assert "[plan] prompts (groups) per step: 2,048 completions / 16 num_generations = 128" in err
    dry = _resolved(p.stderr)
    assert (dry["num_generations"], dry["beta"], dry["max_pixels"], dry["gradient_accumulation_steps"]) == (
        "16",
        "0.04",
        "1003520",
        "16",
    )
    assert any(line.startswith("[memory] input: 8 GPU(s), ZeRO-3 (") for line in err)


def test_recipe_scripts_force_no_recipe_value():
    """The size scripts set no ZeRO stage and the launcher no G: the recipe YAMLs hold them."""
    for size, stage in (("7b", 2), ("32b", 3), ("72b", 3)):
        with open(os.path.join(REPO, "run_scripts", f"gta1_{size}.sh"), encoding="utf-8") as f:
            assert "ZERO=" not in f.read(), size
        with open(os.path.join(REPO, "recipes", "gta1", f"{size}.yaml"), encoding="utf-8") as f:
            assert f"deepspeed: configs/deepspeed/zero{stage}.json" in f.read(), size
    with open(os.path.join(REPO, "run_scripts", "gta1_recipe.sh"), encoding="utf-8") as f:
        launcher = f.read()
    assert 'add --num_generations "${NUM_GENERATIONS:-}"' in launcher  # only when set
    assert not re.search(r"(NUM_GENERATIONS|ZERO):-[^}]", launcher)  # no default of its own


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


@pytest.mark.slow  # ~13 s, two torchrun attempts; run_scripts/test_slurm.sh preempts and resumes too
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


@pytest.mark.slow  # ~7 s, a launcher subprocess
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


def test_impossible_batch_is_refused():
    """The planner's refusal (gui_grounding.ops.plan.derive_batch, both messages tested in test_memory_estimate.py)
    stops the launcher with status 2."""
    p = _dry_run("gta1_7b.sh", NNODES=3, NPROC_PER_NODE=8, MASTER_ADDR="n1")
    assert p.returncode == 2 and "cannot be spread evenly over 24 processes. Use GLOBAL_PROMPTS=129" in p.stderr


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


@pytest.mark.slow  # ~90 s; the real-SLURM test (run_scripts/test_slurm.sh) preempts and resumes too
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
