"""``vlm_r1.preflight`` (issue 22): the multi-node preflight on CPU with gloo, "nodes" faked by ``VLM_R1_HOSTNAME`` /
``NODE_RANK`` on 127.0.0.1 and a free port; every rank is a process running ``python -m vlm_r1.preflight``'s main,
without torchrun (rank 0 hosts the store), forked from a forkserver and killed if it outlives the test.

* healthy: 4 ranks on 2 fake nodes pass; rank 0 reports world size, backend, hosts and the time of each step;
* broken, with a 3 s timeout: a rank that never joins the all_reduce (its ``all_reduce`` sleeps), a rank that never
  starts, a rank short of disk (``--min_free_gib``), a rank with another WORLD_SIZE. The healthy ranks fail within
  the timeout (the error says after how many seconds) with a message that names the broken rank and its fake host;
* the training hook's settings (command line over ``--config`` YAML), auto/on/off, and the checkpoint estimate from
  safetensors headers; the preflight followed by the ordinary ``env://`` process group in the same processes.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import socket
import sys
import time

import pytest

from vlm_r1 import preflight as pf

TIMEOUT = 3.0
#: a failure must be reported within the timeouts plus slack for loaded CI cores: a hang, not a slow machine,
#: fails the test (the timeouts themselves are unit-tested; wall-clock margins on shared cores were flaky)
HANG = 10 * TIMEOUT


def _stall_all_reduce():
    import time

    import torch.distributed as dist

    dist.all_reduce = lambda *a, **k: time.sleep(600)  # passes the barrier, never joins the all_reduce


def _reinit():
    """The preflight, then what accelerate does next (an ``env://`` gloo group) in the same process."""
    import datetime

    import torch
    import torch.distributed as dist

    report = pf.run_preflight(timeout=10)
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=30))
    t = torch.full((1,), float(dist.get_rank() + 1))
    dist.all_reduce(t)
    print(report.world_size, t.item(), flush=True)
    dist.destroy_process_group()


def _rank_main(env: dict, argv: list, fault: str | None, out_path: str, err_path: str) -> None:
    """One rank: its environment, stdout/stderr (Python's and the C libraries') to files, the fault, then
    ``python -m vlm_r1.preflight ARGV`` (or :func:`_reinit`)."""
    os.environ.update(env)
    for fd, path, name in ((1, out_path, "stdout"), (2, err_path, "stderr")):
        f = open(path, "w")
        os.dup2(f.fileno(), fd)
        setattr(sys, name, f)
    if fault == "stall_all_reduce":
        _stall_all_reduce()
    if fault == "reinit":
        _reinit()
        return
    if fault == "late":
        time.sleep(1.0)  # arrive after the others (an ordering that must not change the diagnosis)
    if fault == "slow_store":
        # rank 0 hosts the store and registers 1.5 s after starting it: the other ranks register first
        start = pf._rendezvous_store

        def slow(*args, **kwargs):
            store = start(*args, **kwargs)
            time.sleep(1.5)
            return store

        pf._rendezvous_store = slow
    sys.exit(pf.main(argv))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _launch(tmp_path, world, *, ranks=None, faults=None, args=None, env=None, limit=60.0, wait_for=None):
    """Start ``ranks`` (default all) of a ``world``-rank job, 2 ranks per fake node (``fake-node-{rank // 2}``),
    forked from a forkserver that imported torch once (a spawn per rank costs seconds on 2 busy cores); ``faults`` /
    ``args`` / ``env``: per rank. Waits until every rank in ``wait_for`` (default all started) exited or ``limit``
    seconds passed, then kills whatever still runs. Returns ``{rank: (exit status, or None if it was still running
    and killed, stdout, stderr)}``."""
    ctx = multiprocessing.get_context("forkserver")
    # everything a rank runs is imported once in the server: the ranks start within milliseconds of each other
    ctx.set_forkserver_preload(["torch", "torch.distributed", "vlm_r1.preflight", __name__])
    port = _free_port()
    ranks = list(range(world)) if ranks is None else ranks
    wait_for = set(ranks if wait_for is None else wait_for)
    procs = {}
    for r in ranks:
        rank_env = {
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(port),
            "RANK": str(r),
            "WORLD_SIZE": str(world),
            "LOCAL_RANK": str(r % 2),
            "LOCAL_WORLD_SIZE": "2",
            "NODE_RANK": str(r // 2),
            pf.HOSTNAME_ENV: f"fake-node-{r // 2}",
            **(env or {}).get(r, {}),
        }
        argv = ["--timeout", str(TIMEOUT), "--output_dir", str(tmp_path), *(args or {}).get(r, ())]
        paths = (str(tmp_path / f"rank{r}.out"), str(tmp_path / f"rank{r}.err"))
        procs[r] = ctx.Process(target=_rank_main, args=(rank_env, argv, (faults or {}).get(r), *paths))
        procs[r].start()
    deadline = time.monotonic() + limit
    killed = set()
    try:
        while time.monotonic() < deadline and any(procs[r].is_alive() for r in wait_for):
            time.sleep(0.05)
    finally:
        for r, p in procs.items():
            if p.is_alive():
                killed.add(r)
                p.kill()
            p.join(timeout=30)

    def read(path):
        return path.read_text() if path.exists() else ""  # a child that died before redirecting wrote nothing

    return {
        r: (
            None if r in killed else procs[r].exitcode,
            read(tmp_path / f"rank{r}.out"),
            read(tmp_path / f"rank{r}.err"),
        )
        for r in ranks
    }


def _failure(stderr: str) -> str:
    lines = [x for x in stderr.splitlines() if x.startswith("PREFLIGHT FAILED:")]
    assert lines, stderr[-3000:]
    return lines[-1]


def _seconds(message: str) -> float:
    return float(message.split(" after ", 1)[1].split(" s:", 1)[0])


def test_healthy_two_nodes_pass(tmp_path):
    results = _launch(tmp_path, 4, args={0: ["--json"]})
    for r, (code, _, err) in results.items():
        assert code == 0, (r, err[-3000:])
    summary, report = results[0][1].strip().splitlines()
    report = json.loads(report)
    assert report["world_size"] == 4 and report["backend"] == "gloo" and report["all_reduce_sum"] == 4.0
    assert [x["host"] for x in report["ranks"]] == ["fake-node-0", "fake-node-0", "fake-node-1", "fake-node-1"]
    assert [x["node"] for x in report["ranks"]] == ["0", "0", "1", "1"]
    assert set(report["seconds"]) == {"disk", "rendezvous", "init", "barrier", "all_reduce", "total"}
    assert 0 < report["seconds"]["total"] < 30
    assert summary.startswith("preflight passed: world size 4, backend gloo, 2 host(s)")
    assert "fake-node-0: ranks 0-1; fake-node-1: ranks 2-3" in summary
    assert results[1][1] == ""  # only rank 0 prints


def test_rank_that_never_joins_the_all_reduce_is_named(tmp_path):
    # ranks 0, 1 on fake-node-0 are healthy; rank 2 on fake-node-1 passes the barrier, then its all_reduce never starts
    results = _launch(tmp_path, 3, faults={2: "stall_all_reduce"}, wait_for=[0, 1])
    for r in (0, 1):
        code, _, err = results[r]
        assert code == 1, (r, err[-3000:])
        message = _failure(err)
        assert "all_reduce did not complete within 3 s" in message, message
        assert "rank 2 (host fake-node-1, node 1, local rank 0)" in message, message
        assert _seconds(message) < HANG, (
            message
        )  # bounded by the timeouts, not a hang (no tighter: CI cores are shared)
    assert results[2][0] is None  # still asleep when the others had failed: killed by the test


def test_rank_that_never_starts_is_named(tmp_path):
    results = _launch(tmp_path, 3, ranks=[0, 1])
    for r in (0, 1):
        code, _, err = results[r]
        assert code == 1, (r, err[-3000:])
        message = _failure(err)
        assert "1 of 3 rank(s) did not reach the rendezvous" in message, message
        assert "rank 2 (host unknown: it never reached the rendezvous, node 1 if ranks" in message, message
        assert "rank 0 (host fake-node-0, node 0, local rank 0)" in message  # the ranks present, by name
        assert _seconds(message) < HANG, message


def test_rank_short_of_disk_is_named_by_every_rank(tmp_path):
    results = _launch(tmp_path, 4, args={3: ["--min_free_gib", "1e9"]})
    for r, (code, _, err) in results.items():
        assert code == 1, (r, err[-3000:])
        message = _failure(err)
        assert "not enough free disk for checkpoints: rank 3 (host fake-node-1, node 1, local rank 1)" in message
        assert "needs 1e+09 GiB (--preflight_min_free_gib)" in message, message
        assert _seconds(message) < HANG, message  # known as soon as every rank registered; bounded, not a hang


@pytest.mark.parametrize("fault", [None, "slow_store", "late"], ids=["together", "rank0-registers-last", "rank1-late"])
def test_rank_with_another_world_size_is_named(tmp_path, fault):
    # rank 0 registering last sets "all arrived" (2 of its 2) for rank 1 too, which expects 3: rank 1 must still name
    # the differing WORLD_SIZE, not a missing rank 2
    faults = {} if fault is None else {0 if fault == "slow_store" else 1: fault}
    results = _launch(tmp_path, 2, env={1: {"WORLD_SIZE": "3"}}, faults=faults)
    expected = {
        0: "WORLD_SIZE differs: this rank has 2, rank 1 (host fake-node-0, node 0, local rank 1): 3",
        1: "WORLD_SIZE differs: this rank has 3, rank 0 (host fake-node-0, node 0, local rank 0): 2",
    }
    for r, (code, _, err) in results.items():
        assert code == 1, err[-3000:]
        message = _failure(err)
        assert expected[r] in message, message
        assert _seconds(message) < HANG, message  # at once, or after the arrival wait; bounded, not a hang


def test_training_process_group_after_the_preflight(tmp_path):
    """The preflight destroys its group and keeps rank 0's store server: the ordinary env:// group forms after it."""
    results = _launch(tmp_path, 2, faults={0: "reinit", 1: "reinit"})
    for r, (code, out, err) in results.items():
        assert code == 0, (r, err[-3000:])
        assert out.split() == ["2", "3.0"]


# ---- in-process ---------------------------------------------------------------------------------------------------------
def test_settings_from_argv_and_config(tmp_path):
    config = tmp_path / "run.yaml"
    config.write_text("preflight: on\npreflight_timeout: 42\noutput_dir: from_yaml\nuse_peft: true\n")  # on: a bool
    s = pf.settings_from_argv(["--config", str(config), "--output_dir", "from_cli", "--preflight_min_free_gib", "5"])
    assert s["preflight"] == "on" and s["preflight_timeout"] == 42.0 and s["output_dir"] == "from_cli"
    assert s["preflight_min_free_gib"] == 5.0 and s["use_peft"] is True
    s = pf.settings_from_argv(["--preflight_timeout_x", "1", "--use_cpu"])  # unrelated flags are left alone
    assert s["preflight"] == "auto" and s["preflight_timeout"] == pf.DEFAULT_TIMEOUT_S and s["use_cpu"] is True
    assert pf.settings_from_argv(["--preflight", "OFF"])["preflight"] == "off"
    assert pf.settings_from_argv(["--config", str(tmp_path / "missing.yaml")])["preflight"] == "auto"


def test_flags_in_the_training_config(tmp_path):
    from vlm_r1.configs import VLMGRPOConfig

    args = VLMGRPOConfig(output_dir=str(tmp_path), preflight=True, preflight_min_free_gib=2.5)  # YAML's bare `on`
    assert (args.preflight, args.preflight_timeout, args.preflight_min_free_gib) == ("on", pf.DEFAULT_TIMEOUT_S, 2.5)
    with pytest.raises(ValueError, match="--preflight 'sometimes'"):
        VLMGRPOConfig(output_dir=str(tmp_path), preflight="sometimes")
    with pytest.raises(ValueError, match="--preflight_timeout must be > 0"):
        VLMGRPOConfig(output_dir=str(tmp_path), preflight_timeout=0)


def test_hook_modes_in_one_process(tmp_path, monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "1")
    assert pf.preflight_from_argv(["--output_dir", str(tmp_path)]) is None  # auto: one process
    assert pf.preflight_from_argv(["--preflight", "off"]) is None
    assert pf.preflight_from_argv(["--preflight", "on", "--help"]) is None
    report = pf.preflight_from_argv(["--preflight", "on", "--output_dir", str(tmp_path / "new" / "dir")])
    assert report.world_size == 1 and report.ranks[0]["disk"]["path"] == str(tmp_path)  # nearest existing parent
    with pytest.raises(pf.PreflightError, match=r"rank 0 \(host .*\): .* GiB free at .*needs 1e\+09 GiB") as info:
        pf.run_preflight(output_dir=str(tmp_path), min_free_gib=1e9)
    assert info.value.ranks == [0]


def test_checkpoint_estimate_from_safetensors_headers(tmp_path):
    import torch
    from safetensors.torch import save_file

    save_file(
        {"a": torch.zeros(10, 20, dtype=torch.bfloat16), "b": torch.zeros(5)}, str(tmp_path / "model.safetensors")
    )
    assert pf.count_parameters(str(tmp_path)) == (205, 10 * 20 * 2 + 5 * 4)
    assert pf.estimate_checkpoint_bytes(str(tmp_path)) == 420 + 205 * 8
    assert pf.estimate_checkpoint_bytes(str(tmp_path), deepspeed=True) == 420 + 205 * 12
    assert pf.estimate_checkpoint_bytes(str(tmp_path), use_peft=True) == 420
    assert pf.estimate_checkpoint_bytes("Qwen/not-a-local-dir") is None
    disk = pf.check_disk(str(tmp_path), estimate_bytes=2**30)
    assert disk["required_gib"] == 1.0 and disk["source"] == "estimate of one checkpoint"


@pytest.mark.slow
def test_training_cli_stops_on_a_failed_preflight(tiny_qwen25_dir, tmp_path):
    """``torchrun --nproc_per_node 2 -m vlm_r1.grpo_jsonl`` (torchrun's agent store) with a disk requirement no disk
    meets: both ranks print PREFLIGHT FAILED naming both ranks, exit 1 before the model loads."""
    import subprocess

    from tests.helpers.paths import REPO, SAMPLE

    cmd = [
        *(sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"),
        *("-m", "vlm_r1.grpo_jsonl", "--model_name_or_path", tiny_qwen25_dir, "--output_dir", str(tmp_path / "out")),
        *("--data_file_paths", os.path.join(SAMPLE, "train.jsonl"), "--image_folders", SAMPLE),
        *("--preflight_min_free_gib", "1e9", "--preflight_timeout", "10"),
    ]
    env = dict(os.environ, PYTHONPATH=REPO, OMP_NUM_THREADS="1")
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0
    failures = [x for x in proc.stderr.splitlines() if x.startswith("PREFLIGHT FAILED:")]
    assert len(failures) == 2, proc.stderr[-4000:]
    for line in failures:
        assert "not enough free disk for checkpoints: rank 0 (host " in line and "; rank 1 (host " in line, line
    assert "model_type=" not in proc.stderr  # stopped before the processor and model were loaded
