"""The cluster recipe on a real scheduler: a single-machine SLURM (munge + slurmctld + slurmd from Debian's packages).

Not part of the default suite: marked ``slurm``, which pytest.ini deselects; run it with

    bash run_scripts/test_slurm.sh            # needs root (apt-get install munge slurm-wlm, daemons); ~3 minutes

which starts the local cluster (run_scripts/slurm/local_cluster.sh), runs ``pytest -m slurm`` and stops it. To reuse a
running cluster: ``export SLURM_CONF=/tmp/gg-slurm/slurm.conf; .venv/bin/python -m pytest -m slurm tests/test_slurm.py``.

Both cases submit ``run_scripts/slurm/gta1.sbatch`` with ``RECIPE=gta1_tiny_cpu.sh`` (tiny random Qwen2.5-VL, committed
sample, torchrun with 2 processes, checkpoint every 2 steps) via ``sbatch`` on one node with 2 tasks:

* A: runs to the end; the job must be COMPLETED with exit code 0, never requeued, with complete checkpoints and the
  final model, and one recorded batch per step.
* B: the same run, preempted after its first checkpoint with ``scancel --signal=USR1 --batch`` (what
  ``--signal=B:USR1@120`` does before the time limit). The batch script must forward it (PREEMPT file), the trainer
  must save and stop, the job must be requeued (same job id, Restarts >= 1), resume from the checkpoint, finish the
  requested steps, and train on exactly the batches of the uninterrupted run A, step by step (none repeated or
  skipped).

Environment: SLURM_CONF [$GG_SLURM_DIR/slurm.conf or /tmp/gg-slurm/slurm.conf], GG_SLURM_RECIPE [gta1_tiny_cpu.sh],
GG_SLURM_STEPS [8], GG_SLURM_JOB_TIMEOUT [600] seconds per job.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import time

import pytest

from tests.helpers.paths import REPO
from tests.helpers.proc import run

pytestmark = pytest.mark.slurm

SBATCH = os.path.join(REPO, "run_scripts", "slurm", "gta1.sbatch")
RECIPE = os.environ.get("GG_SLURM_RECIPE", "gta1_tiny_cpu.sh")
STEPS = int(os.environ.get("GG_SLURM_STEPS", "8"))
SAVE_STEPS = 2
JOB_TIMEOUT = float(os.environ.get("GG_SLURM_JOB_TIMEOUT", "600"))
RESULTS: dict[str, dict] = {}  # case A's batches, compared with case B's


@pytest.fixture(scope="module", autouse=True)
def slurm_env(request):
    """SLURM_CONF for the client commands; fails with instructions when no cluster answers (the default run
    deselects the ``slurm`` marker in pytest.ini; `bash run_scripts/test_slurm.sh` starts a cluster and selects it)."""
    if not shutil.which("sbatch"):
        pytest.fail("sbatch not found: start the cluster with `bash run_scripts/slurm/local_cluster.sh start`")
    conf = os.environ.get("SLURM_CONF") or os.path.join(os.environ.get("GG_SLURM_DIR", "/tmp/gg-slurm"), "slurm.conf")
    env = dict(os.environ, SLURM_CONF=conf)
    r = subprocess.run(["sinfo", "-h", "-N", "-o", "%N %T"], env=env, capture_output=True, text=True, timeout=30)
    if r.returncode != 0 or not r.stdout.strip():
        pytest.fail(
            f"no SLURM cluster answers with SLURM_CONF={conf} ({r.stderr.strip()}): start it with "
            "`bash run_scripts/slurm/local_cluster.sh start`"
        )
    if not os.path.isfile(os.path.join(REPO, "run_scripts", RECIPE)):
        pytest.fail(f"run_scripts/{RECIPE} does not exist")
    return env


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    """Where the recipe builds (case A) and reuses (case B) the tiny model; outside the repository."""
    return str(tmp_path_factory.mktemp("slurm_tiny") / "tiny-qwen2_5_vl")


def _submit(env, out_dir, log, tiny):
    exports = (
        f"ALL,RECIPE={RECIPE},OUTPUT_DIR={out_dir},MAX_STEPS={STEPS},SAVE_STEPS={SAVE_STEPS},TINY_MODEL_DIR={tiny}"
    )
    cmd = [
        "sbatch",
        "--parsable",
        "--nodes=1",
        "--ntasks-per-node=2",
        "--time=30",
        f"--output={log}",
        f"--export={exports}",
        SBATCH,
    ]
    r = run(cmd, env=env, timeout=60)
    return r.stdout.strip().split(";")[0]


def _job(env, job_id) -> dict:
    """`scontrol show job -o` as a dict (JobState, Restarts, ExitCode, ...); {} once the job is forgotten."""
    r = run(["scontrol", "show", "job", "-o", job_id], env=env, cwd=None, timeout=60, check=False)
    fields = {}
    for token in r.stdout.split():
        key, sep, value = token.partition("=")
        if sep:
            fields.setdefault(key, value)
    return fields


def _log_tail(log, n=60):
    try:
        with open(log, encoding="utf-8", errors="replace") as f:
            return "".join(f.readlines()[-n:])
    except OSError:
        return "(no log)"


def _wait(env, job_id, log, done, what, timeout=JOB_TIMEOUT):
    """Poll until ``done(job_fields)``; fail (with the job's log) on timeout or a failed job state."""
    t0 = time.time()
    while True:
        job = _job(env, job_id)
        if done(job):
            return job
        state = job.get("JobState", "?")
        if state in ("FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE"):
            pytest.fail(
                f"job {job_id} {state} (ExitCode {job.get('ExitCode')}) waiting for {what}; log:\n{_log_tail(log)}"
            )
        if time.time() - t0 > timeout:
            run(["scancel", job_id], env=env, cwd=None, timeout=60, check=False)
            pytest.fail(f"job {job_id} still {state} after {timeout:.0f}s waiting for {what}; log:\n{_log_tail(log)}")
        time.sleep(1)


def _complete_checkpoints(out_dir):
    steps = []
    for path in glob.glob(os.path.join(out_dir, "checkpoint-*")):
        if os.path.isfile(os.path.join(path, "CHECKPOINT_COMPLETE")):
            steps.append(int(path.rsplit("-", 1)[1]))
    return sorted(steps)


def _batches(out_dir) -> dict[str, list]:
    """{file name: [(step, sample_ids), ...] in file order} for every batches*.jsonl the trainer wrote."""
    out = {}
    for path in sorted(glob.glob(os.path.join(out_dir, "batches*.jsonl"))):
        with open(path, encoding="utf-8") as f:
            out[os.path.basename(path)] = [(r["step"], r["sample_ids"]) for r in map(json.loads, f) if r]
    return out


def _check_finished_run(out_dir):
    """Checkpoints every SAVE_STEPS up to STEPS, all complete, the final model saved, trainer_state at STEPS."""
    ckpts = _complete_checkpoints(out_dir)
    assert STEPS in ckpts, f"no complete checkpoint-{STEPS} in {out_dir}: {sorted(os.listdir(out_dir))}"
    for s in range(SAVE_STEPS, STEPS + 1, SAVE_STEPS):
        assert s in ckpts, f"checkpoint-{s} missing or incomplete in {out_dir} (complete: {ckpts})"
    with open(os.path.join(out_dir, f"checkpoint-{STEPS}", "trainer_state.json")) as f:
        assert json.load(f)["global_step"] == STEPS
    assert os.path.isfile(os.path.join(out_dir, "config.json")), "final model not saved"
    assert not os.path.exists(os.path.join(out_dir, "PREEMPT")), "PREEMPT left behind"
    return ckpts


def _check_batches(batches, out_dir):
    """One recorded batch per step 1..STEPS in every rank's file: none repeated, none skipped."""
    assert batches, f"no batches*.jsonl in {out_dir}"
    for name, rows in batches.items():
        steps = [s for s, _ in rows]
        assert steps == list(range(1, STEPS + 1)), f"{name}: steps recorded {steps}, expected 1..{STEPS} once each"


def test_a_sbatch_runs_recipe_to_completion(slurm_env, tiny_dir, tmp_path):
    out_dir, log = str(tmp_path / "run"), str(tmp_path / "slurm.out")
    t0 = time.time()
    job_id = _submit(slurm_env, out_dir, log, tiny_dir)
    job = _wait(slurm_env, job_id, log, lambda j: j.get("JobState") == "COMPLETED", "COMPLETED")
    print(f"case A: job {job_id} completed in {time.time() - t0:.0f}s")
    assert job.get("ExitCode") == "0:0", f"ExitCode {job.get('ExitCode')}; log:\n{_log_tail(log)}"
    assert job.get("Restarts") == "0", f"job was requeued ({job.get('Restarts')}) without preemption"
    text = open(log, encoding="utf-8", errors="replace").read()
    assert "nproc_per_node=2" in text, f"torchrun did not run 2 processes; log:\n{_log_tail(log)}"
    assert "requeueing" not in text
    _check_finished_run(out_dir)
    batches = _batches(out_dir)
    _check_batches(batches, out_dir)
    RESULTS["A"] = batches


def test_b_preempted_job_is_requeued_and_resumes(slurm_env, tiny_dir, tmp_path):
    out_dir, log = str(tmp_path / "run"), str(tmp_path / "slurm.out")
    t0 = time.time()
    job_id = _submit(slurm_env, out_dir, log, tiny_dir)
    # preempt once the first checkpoint is complete, so that the resume has something to start from
    _wait(
        slurm_env,
        job_id,
        log,
        lambda j: _complete_checkpoints(out_dir) or j.get("JobState") == "COMPLETED",
        "the first complete checkpoint",
    )
    assert _job(slurm_env, job_id).get("JobState") == "RUNNING", "the job finished before it could be preempted"
    before = _complete_checkpoints(out_dir)
    t_signal = time.time()
    run(["scancel", "--signal=USR1", "--batch", job_id], env=slurm_env, cwd=None, timeout=60)
    job = _wait(slurm_env, job_id, log, lambda j: int(j.get("Restarts", "0") or 0) >= 1, "the requeue", timeout=300)
    t_requeued = time.time()
    job = _wait(slurm_env, job_id, log, lambda j: j.get("JobState") == "COMPLETED", "COMPLETED after the requeue")
    print(
        f"case B: job {job_id}: signal at {t_signal - t0:.0f}s (checkpoints {before}), requeued after "
        f"{t_requeued - t_signal:.0f}s, completed at {time.time() - t0:.0f}s"
    )
    assert job.get("ExitCode") == "0:0", f"ExitCode {job.get('ExitCode')}; log:\n{_log_tail(log)}"
    assert job.get("Restarts") == "1", f"Restarts={job.get('Restarts')}, expected exactly one requeue"

    text = open(log, encoding="utf-8", errors="replace").read()  # --open-mode=append: both runs in one log
    assert "USR1 received" in text, f"the batch script did not get USR1; log:\n{_log_tail(log)}"
    assert f"requeueing job {job_id}" in text, f"the batch script did not requeue; log:\n{_log_tail(log)}"
    assert "restart 1:" in text, f"no second run of the job in the log:\n{_log_tail(log)}"
    first_run, _, second_run = text.partition("restart 1:")
    assert "preempted at step" in first_run, "the trainer did not stop on the PREEMPT request"
    stopped_at = int(first_run.split("preempted at step", 1)[1].split()[0].rstrip(":"))
    assert 0 < stopped_at < STEPS, f"preempted at step {stopped_at}: no room to test the resume"
    assert "resum" in second_run.lower(), f"the requeued run did not say it resumed; log:\n{_log_tail(log)}"
    assert f"checkpoint-{stopped_at}" in second_run, (
        f"the requeued run did not resume from checkpoint-{stopped_at}; log:\n{_log_tail(log)}"
    )

    ckpts = _check_finished_run(out_dir)
    assert stopped_at in ckpts, f"no complete checkpoint at the preemption step {stopped_at}: {ckpts}"
    batches = _batches(out_dir)
    _check_batches(batches, out_dir)
    if "A" in RESULTS:  # same seed, data and batch shape: the same batch at every step as the uninterrupted run
        assert batches.keys() == RESULTS["A"].keys()
        for name in batches:
            for (step, ids), (_, ref) in zip(batches[name], RESULTS["A"][name], strict=True):
                assert ids == ref, f"{name} step {step}: trained on {ids}, the uninterrupted run on {ref}"
