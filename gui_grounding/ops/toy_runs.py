"""The toy's stage runner (``gui-grounding toy``): each stage is a real ``python -m vlm_r1.sft`` / ``vlm_r1.grpo_jsonl``
subprocess that imports the launching tree, run once and reused only when its command, its inputs and the
environment (code, libraries, CPU level: :func:`environment_fingerprint`) are the same (docs/TRAINING.md, "Why the toy
numbers moved, and what is pinned now")."""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import platform
import shutil
import subprocess
import time

from groundwork import outputs
from groundwork.records import load_json_file

logger = logging.getLogger(__name__)

_PACKAGES = ("gui_grounding", "vlm_r1", "groundwork")


def _tree_root() -> str:
    """The folder holding the ``gui_grounding`` package this process imported (its checkout, or site-packages)."""
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@functools.lru_cache(maxsize=1)
def code_digest() -> str:
    """sha256 (16 hex digits) of the ``.py`` files of :data:`_PACKAGES` in :func:`_tree_root`: the code a toy stage
    runs (names and bytes, sorted)."""
    root, digest = _tree_root(), hashlib.sha256()
    for package in _PACKAGES:
        for folder, dirs, files in os.walk(os.path.join(root, package)):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            for name in sorted(f for f in files if f.endswith(".py")):
                path = os.path.join(folder, name)
                digest.update(os.path.relpath(path, root).encode() + b"\0")
                with open(path, "rb") as f:
                    digest.update(f.read() + b"\0")
    return digest.hexdigest()[:16]


def environment_fingerprint() -> dict:
    """What a seeded toy number's bits depend on besides its command and inputs (docs/TRAINING.md "Why the toy
    numbers moved, and what is pinned now"): the code (:func:`code_digest`), the library versions and torch's CPU
    kernel level (AVX2 and AVX512 kernels round differently; ``ATEN_CPU_CAPABILITY``). The thread count is not in it:
    1, 2 and 4 threads gave bit-identical toy runs."""
    import accelerate
    import torch
    import transformers
    import trl

    return {
        "code": code_digest(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "trl": trl.__version__,
        "accelerate": accelerate.__version__,
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
    }


def file_digest(path: str) -> str:
    """sha256 (16 hex digits) of one file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()[:16]


def child_env() -> dict:
    """The environment of a toy stage's subprocess: this one, unbuffered, importing the same tree as this process
    (``PYTHONPATH`` starts with :func:`_tree_root`, and ``PYTHONSAFEPATH=1`` keeps ``python -m`` from putting the
    working folder first, Python >= 3.11). Without it, a toy started from one checkout trained with the code of
    whichever checkout the working folder or the virtual environment's editable install pointed at."""
    root = _tree_root()
    path = [root, *(p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p != root)]
    return dict(os.environ, PYTHONUNBUFFERED="1", PYTHONSAFEPATH="1", PYTHONPATH=os.pathsep.join(path))


def _read_stamp(path: str) -> dict | None:
    """A stamp file's JSON object (``<log>.done.json``, ``synthetic_config.json``), or None when it is missing or is
    not a readable JSON object (a torn, empty, non-UTF-8 or hand-edited side file means "redo", never a crash)."""
    try:
        value = load_json_file(path, "run stamp")  # the side-file rule: a regular file of strict JSON
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def _run(cmd: list[str], log_path: str, inputs: dict | None = None, out_dir: str | None = None) -> float:
    """Run ``cmd`` with its output in ``log_path``; returns the wall seconds. Raises RuntimeError naming the log.

    A run whose exact command already completed on the same ``inputs`` (``<log>.done.json`` holds the command, the
    inputs and its wall time) is reused, so experiments sharing a stage (the SFT warm start, the click GRPO run) train
    it once; a stamp that is not such a record (:func:`_read_stamp`) is ignored and the stage reruns. ``inputs`` (JSON)
    names what the result depends on besides the command (:meth:`ToyExperiments._launch`: digests of the base weights
    and the data, :func:`environment_fingerprint`), so a stage trained by other code, other libraries or from another
    checkpoint under the same paths is not reused. The subprocess runs in :func:`child_env`. The log is a live log
    (``groundwork.outputs.live_log``: one writer, readable while it grows); the stamp is written atomically after it
    (``groundwork.outputs.write_json``).

    ``out_dir``: the stage's output folder, emptied before a run that is not reused: what a stage left there that
    did not complete (a checkpoint an interrupted run saved on SIGTERM, say) is stale, and the trainers'
    ``--resume_from_checkpoint latest`` would otherwise resume from it.
    """
    done = log_path + ".done.json"
    prev = _read_stamp(done)
    seconds = prev.get("seconds") if prev else None
    if (
        prev
        and isinstance(prev.get("cmd"), list)
        and prev["cmd"][1:] == cmd[1:]
        and prev.get("inputs") == inputs
        and isinstance(seconds, (int, float))
        and not isinstance(seconds, bool)
    ):
        logger.info("reusing %s (same command on the same inputs already completed)", log_path)
        return seconds
    env = child_env()
    if out_dir is not None:
        shutil.rmtree(out_dir, ignore_errors=True)
    os.makedirs(os.path.dirname(log_path), exist_ok=True)
    start = time.time()
    with outputs.live_log(log_path) as log:
        proc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, check=False)
    if proc.returncode != 0:
        with open(log_path, encoding="utf-8", errors="replace") as f:
            tail = "".join(f.readlines()[-30:])
        raise RuntimeError(f"{' '.join(cmd[:4])} ... failed (exit {proc.returncode}); log {log_path}:\n{tail}")
    seconds = time.time() - start
    outputs.write_json(done, {"cmd": cmd, "inputs": inputs, "seconds": seconds}, indent=None)
    return seconds
