"""Hostile input, round three: the launchers' environment variables, in every run script.

``MAX_RESTARTS=abc`` reached torchrun through ``run_scripts/train_grpo.sh`` run on its own (only the recipe launcher
checked its variables, through the launch plan), and ``DRY_RUN=1`` said all was well. Every run script that reads a
launcher variable now checks it by the one rule (``vlm_r1.launch.check_launcher_env`` over
``vlm_r1.launch.LAUNCHER_VARIABLES``; the plan adds its own variables to the same table): through
``python -m vlm_r1.launcher_env`` (``train_grpo.sh``, ``demo.sh``, ``slurm/gta1.sbatch``) or the plan's
``--launcher-env`` (``gta1_recipe.sh``), before anything runs: one ``[PROG] ERROR: NAME: must be ..., got '...'`` line,
exit 2, nothing on stdout. An accepted value is written back canonical (``" 02"`` -> ``2``), so the script's shell
tests and torchrun read the number Python read.
"""

from __future__ import annotations

import glob
import os
import re
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from groundwork.argtypes import value
from gui_grounding.ops import plan as plan_module
from tests.helpers.paths import REPO
from tests.helpers.proc import child_env
from vlm_r1 import launch

FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

#: what ``train_grpo.sh`` reads and checks
TRAIN_GRPO_VARIABLES = ("NNODES", "NPROC_PER_NODE", "MASTER_PORT", "MAX_RESTARTS", "DRY_RUN")
#: environment variables a launcher sets or derives that must not leak in from the test's environment
_LAUNCH_ENV = ("NNODES", "NPROC_PER_NODE", "MASTER_PORT", "MAX_RESTARTS", "DRY_RUN", "MASTER_ADDR", "SLURM_JOB_ID")
_LAUNCH_ENV += ("SLURM_JOB_NUM_NODES",)


def _env(**extra):
    base = {name: None for name in _LAUNCH_ENV}
    return child_env(threads=1, plugins=False, PYTHON=sys.executable, **{**base, **extra})


def _launch(script: str, cwd=REPO, **extra) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", os.path.join(REPO, "run_scripts", script), "--x"],
        cwd=cwd,
        env=_env(**extra),
        capture_output=True,
        text=True,
        timeout=120,
    )


def _message(name: str, raw: str) -> str:
    parse = launch.LAUNCHER_VARIABLES[name]
    return f"{name}: must be {parse.range_text}, got {raw!r}"


@pytest.mark.parametrize(
    "env, message",
    [
        ({"MAX_RESTARTS": "abc"}, _message("MAX_RESTARTS", "abc")),  # the case
        ({"MAX_RESTARTS": "-1"}, _message("MAX_RESTARTS", "-1")),
        ({"NNODES": "0"}, _message("NNODES", "0")),
        ({"NNODES": "two"}, _message("NNODES", "two")),
        ({"NPROC_PER_NODE": "1.5"}, _message("NPROC_PER_NODE", "1.5")),
        ({"NPROC_PER_NODE": "nan"}, _message("NPROC_PER_NODE", "nan")),
        ({"MASTER_PORT": "70000"}, _message("MASTER_PORT", "70000")),
        ({"MASTER_PORT": "0", "NNODES": "2", "MASTER_ADDR": "n1"}, None),
        ({"DRY_RUN": "yes"}, _message("DRY_RUN", "yes")),  # not read as "off": no real run starts
    ],
)
def test_train_grpo_refuses_a_bad_variable_before_torchrun_and_its_dry_run(env, message):
    """Run on its own (not through the recipe launcher), with DRY_RUN=1 unless the case sets it: one line, exit 2,
    no torchrun command printed."""
    p = _launch("train_grpo.sh", **{"DRY_RUN": "1", **env})
    if message is None:
        message = "MASTER_PORT: must be 1..65535 with NNODES=2 (0 binds a free port: one node only)"
    assert (p.returncode, p.stdout, p.stderr) == (2, "", f"[train_grpo] ERROR: {message}\n")


def test_train_grpo_reads_the_number_python_read():
    """A value the rule accepts in another spelling (spaces, a leading zero, ``_``) reaches torchrun and the script's
    own tests canonical: NNODES=" 01" is one node (port 0, this node hosts the store), not several."""
    p = _launch("train_grpo.sh", DRY_RUN=" 1", NNODES=" 01", NPROC_PER_NODE="0_2", MAX_RESTARTS="03")
    assert p.returncode == 0, p.stderr
    words = p.stdout.split()
    assert words[words.index("--nnodes") + 1] == "1" and words[words.index("--nproc_per_node") + 1] == "2"
    assert words[words.index("--max_restarts") + 1] == "3"
    assert words[words.index("--rdzv_endpoint") + 1] == "127.0.0.1:0" and "is_host=1" in words
    assert "[train_grpo] torchrun nnodes=1 nproc_per_node=2 " in p.stderr


def test_train_grpo_checks_from_another_working_directory(tmp_path):
    """The check is this repository's (the script puts its root first on PYTHONPATH), wherever it is run from."""
    p = _launch("train_grpo.sh", cwd=tmp_path, DRY_RUN="1", MAX_RESTARTS="x")
    assert (p.returncode, p.stderr) == (2, f"[train_grpo] ERROR: {_message('MAX_RESTARTS', 'x')}\n")


def test_the_slurm_batch_script_refuses_a_bad_node_count_before_it_starts(tmp_path):
    out = tmp_path / "run"
    env = _env(NNODES="abc", REPO=REPO, OUTPUT_DIR=str(out), RECIPE="gta1_tiny_cpu.sh")
    p = subprocess.run(
        ["bash", os.path.join(REPO, "run_scripts", "slurm", "gta1.sbatch")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (p.returncode, p.stdout, p.stderr) == (2, "", f"[gta1.sbatch] ERROR: {_message('NNODES', 'abc')}\n")
    assert not out.exists()  # nothing created, no srun


# ---- the rule itself: any text, every variable ------------------------------------------------------------------------
_raw = st.one_of(
    st.text(max_size=12),
    st.sampled_from(["nan", "inf", "-1", "0", "1", "2", " 3 ", "007", "1_0", "1e3", "1.0", "\u0662", "65536", "+4"]),
    st.integers(-(10**7), 10**7).map(str),
)


@FUZZ
@given(name=st.sampled_from(sorted(launch.LAUNCHER_VARIABLES)), raw=_raw)
def test_the_launcher_check_refuses_with_one_line_or_writes_back_what_it_read(capsys, name, raw):
    """For any text of any variable: exit 2 with one line naming it (nothing on stdout), or exit 0 with
    ``NAME=VALUE`` where VALUE is what the variable's type reads, canonical (plain digits for an integer: what bash's
    ``-gt`` and torchrun read alike), empty for a blank value. The same answer as the plan's check."""
    if "\x00" in raw:
        return  # no environment variable can hold a NUL byte
    parse = launch.LAUNCHER_VARIABLES[name]
    env = {name: raw}
    old = os.environ.get(name)
    os.environ[name] = raw
    try:
        status = launch.launcher_env_main(["--prog", "p", name])
    finally:
        if old is None:
            del os.environ[name]
        else:
            os.environ[name] = old
    out, err = capsys.readouterr()
    if status == 2:
        assert out == "" and err.count("\n") == 1 and err.startswith(f"[p] ERROR: {name}: must be ")
        with pytest.raises(ValueError):
            plan_module.check_launcher_env(env)
        return
    assert status == 0 and err == "" and out.startswith(f"{name}=") and out.endswith("\n")
    shown = out[len(name) + 1 : -1]
    if not raw.strip():
        assert shown == "" and plan_module.check_launcher_env(env) == {}
        return
    read = value(parse, raw, name)
    assert plan_module.check_launcher_env(env) == {name: read}
    if isinstance(read, int):
        assert re.fullmatch(r"-?[0-9]+", shown) and int(shown) == read
    else:
        assert float(shown) == read


def test_an_alias_is_checked_by_the_type_it_names(capsys, monkeypatch):
    monkeypatch.setenv("DEMO_STEPS", "ten")
    assert launch.launcher_env_main(["--prog", "demo", "DEMO_STEPS=MAX_STEPS"]) == 2
    assert capsys.readouterr().err == "[demo] ERROR: DEMO_STEPS: must be an integer >= -1, got 'ten'\n"
    monkeypatch.setenv("DEMO_TOY", "false")  # not read as "on"
    assert launch.launcher_env_main(["--prog", "demo", "DEMO_TOY=DRY_RUN"]) == 2
    with pytest.raises(SystemExit):  # an unknown type or a name bash cannot assign is the script's bug
        launch.launcher_env_main(["DEMO_STEPS=NO_SUCH"])
    with pytest.raises(SystemExit):
        launch.launcher_env_main(["a-b"])


# ---- every run script that reads a launcher variable checks it ------------------------------------------------------
def _scripts() -> list[str]:
    paths = glob.glob(os.path.join(REPO, "run_scripts", "**", "*.sh"), recursive=True)
    return sorted(paths + glob.glob(os.path.join(REPO, "run_scripts", "**", "*.sbatch"), recursive=True))


#: a check: the core's entry or the plan's --launcher-env
_CHECK = re.compile(r"-m vlm_r1\.launcher_env\b|-m gui_grounding\.plan\b.*--launcher-env|PLAN=\(--launcher-env")
#: a read of a launcher variable (``$NAME``, ``${NAME...}``), not an assignment
_NAMES = "|".join(sorted(plan_module.LAUNCHER_VARIABLES, key=len, reverse=True))
_READ = re.compile(rf"\$\{{?({_NAMES})\b")
#: a forwarding read: ``export NAME="${NAME:-default}"`` in a script that then execs a checking launcher
_FORWARD = re.compile(rf'^(?:export )?({_NAMES})="\$\{{\1:-[^}}]*\}}"')


def test_every_run_script_that_reads_a_launcher_variable_checks_it():
    checked, missing = [], []
    for path in _scripts():
        text = open(path, encoding="utf-8").read()
        code = [line.split(" #", 1)[0] for line in text.splitlines() if not line.lstrip().startswith("#")]
        reads = [line for line in code if _READ.search(line)]
        if not reads:
            continue
        rel = os.path.relpath(path, REPO)
        if _CHECK.search(text):
            checked.append(rel)
            continue
        # a thin wrapper may set defaults and hand over to a launcher that checks them
        forwards = re.search(r'exec bash "\$ROOT/run_scripts/(\w+\.sh)"', text)
        target = os.path.join(REPO, "run_scripts", forwards.group(1)) if forwards else None
        wrapper = target and _CHECK.search(open(target, encoding="utf-8").read())
        if not wrapper or any(not all(_FORWARD.match(part.strip()) for part in _parts(line)) for line in reads):
            missing.append(f"{rel}: {reads[0].strip()}")
    assert missing == []
    assert {"run_scripts/train_grpo.sh", "run_scripts/gta1_recipe.sh", "run_scripts/demo.sh"} <= set(checked)
    assert "run_scripts/slurm/gta1.sbatch" in checked


def _parts(line: str) -> list[str]:
    """``export A="${A:-1}" B="${B:-2}"`` -> its assignments (with the ``export``)."""
    body = line.strip().removeprefix("export ")
    return [f"export {part}" for part in re.findall(r'\w+="\$\{[^}]*\}"', body)] or [line]


def test_the_train_grpo_check_names_what_the_script_reads():
    text = open(os.path.join(REPO, "run_scripts", "train_grpo.sh"), encoding="utf-8").read()
    call = re.search(r"-m vlm_r1\.launcher_env --prog train_grpo \\\n\s*([^)]*)\)", text)
    assert call and tuple(call.group(1).split()) == TRAIN_GRPO_VARIABLES
    read = {m.group(1) for m in _READ.finditer(text)}
    assert read <= set(TRAIN_GRPO_VARIABLES), read - set(TRAIN_GRPO_VARIABLES)
