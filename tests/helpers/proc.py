"""Child processes of the tests: one environment and one runner.

``from tests.helpers.proc import child_env, run, run_module``:

* :func:`child_env`: ``os.environ`` (which ``tests/conftest.py`` pins: 2 OpenMP threads, HF hub offline) plus what
  every CLI test needs: ``tests/plugins`` (the ``module:function`` reward plugins the tests name) and the repository
  on ``PYTHONPATH``, no tokenizer thread pool, the HF hub offline; ``threads`` sets ``OMP_NUM_THREADS`` (1 per rank
  for multi-process runs), keyword arguments set more variables (``None`` removes one).
* :func:`run`: a command to completion with its output captured as text, from the repository root; never leaves a
  run behind (on a timeout or any error the child is stopped with SIGTERM, which lets torchrun stop its workers, then
  SIGKILL after a minute); ``check`` asserts exit status 0 with the command and the end of its stderr.
* :func:`run_module`: :func:`run` of ``python -m MODULE ARGS...`` with this interpreter.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from collections.abc import Sequence
from typing import Any

from tests.helpers.paths import REPO

#: the tests' plugin modules (reward functions named as ``module:function``)
PLUGINS = os.path.join(REPO, "tests", "plugins")
#: a name that is not a local path fails at once instead of retrying the network
OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
#: where DeepSpeed JIT-compiles its ops (about 30 s, once per machine): the environment's, else the user cache
TORCH_EXTENSIONS_DIR = os.environ.get(
    "TORCH_EXTENSIONS_DIR", os.path.join(os.path.expanduser("~"), ".cache", "torch_extensions")
)


def child_env(
    *, threads: int | None = None, plugins: bool = True, pythonpath: Sequence[Any] = (), **extra: Any
) -> dict[str, str]:
    """The environment of a child process (see the module docstring).

    Args:
        threads: ``OMP_NUM_THREADS`` for the child; None keeps the parent's (conftest's 2, unless set outside).
        plugins: put ``tests/plugins`` on ``PYTHONPATH`` (False: the repository only, as a user would run it).
        pythonpath: folders put first on ``PYTHONPATH`` (a test's own plugin modules).
        **extra: more variables, as strings; ``None`` removes the variable (``PYTHONPATH`` here replaces it whole).
    """
    env = dict(os.environ)
    paths = [str(p) for p in pythonpath] + ([PLUGINS] if plugins else [])
    paths += [REPO] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])
    env["PYTHONPATH"] = os.pathsep.join(paths)
    env["TOKENIZERS_PARALLELISM"] = "false"
    for key, value in OFFLINE.items():
        env.setdefault(key, value)
    if threads is not None:
        env["OMP_NUM_THREADS"] = str(threads)
    for key, value in extra.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = str(value)
    return env


def stop(proc: subprocess.Popen) -> None:
    """Stop a child still running: SIGTERM (torchrun then stops its workers, which run in sessions of their own, so
    killing torchrun alone would leave them running), SIGKILL after a minute; its pipes are drained meanwhile."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()


def run(
    cmd: Sequence[Any],
    *,
    env: dict[str, str] | None = None,
    cwd: Any = REPO,
    timeout: float = 600,
    check: bool = True,
    tail: int = 4000,
) -> subprocess.CompletedProcess:
    """Run ``cmd`` to completion (output captured as text) and return it.

    Args:
        env: the child's environment; default :func:`child_env` ``()``.
        cwd: working directory (default the repository root; None: this process's).
        timeout: seconds; past it the child is stopped (:func:`stop`) and ``subprocess.TimeoutExpired`` raised.
        check: assert exit status 0, naming the command and the last ``tail`` characters of its stderr.
    """
    cmd = [str(c) for c in cmd]
    proc = subprocess.Popen(
        cmd,
        cwd=None if cwd is None else str(cwd),
        env=child_env() if env is None else env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    finally:
        stop(proc)
    result = subprocess.CompletedProcess(cmd, proc.returncode, out, err)
    if check:
        assert result.returncode == 0, f"command failed ({result.returncode}): {shlex.join(cmd)}\n{err[-tail:]}"
    return result


def run_module(args: Sequence[Any], **kwargs: Any) -> subprocess.CompletedProcess:
    """:func:`run` of ``python -m MODULE ARGS...`` with this interpreter: ``args`` is ``[MODULE, ARGS...]``
    (keywords as for :func:`run`)."""
    return run([sys.executable, "-m", *args], **kwargs)
