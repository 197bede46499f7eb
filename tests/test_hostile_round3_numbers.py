"""Hostile input, round three (issue 28): numbers, the environment, the entry points, the launcher.

1. every numeric flag of every command (``gui-grounding`` subcommands, ``python -m gui_grounding.plan``,
   ``python -m vlm_r1.preflight``) is an argtypes type: NaN, infinities, ``1e999``, empty text, text that is no
   number and values out of range are refused by argparse with one line naming the flag; the training parser's
   int/float flags and their ``--config`` YAML values follow the same rule, and the batch fields TRL divides by are
   checked first;
2. the distributed environment has one reader (``groundwork.argtypes.distributed_env``), used by every consumer;
3. the training entry points end an input error with one ``error:`` line, status 2; a bug keeps its traceback;
4. the launcher's numeric variables are checked in one place (``gui_grounding.plan --launcher-env``, over the core's
   ``vlm_r1.launch.LAUNCHER_VARIABLES``; every run script: ``tests/test_hostile_round3_launchers.py``), and REPORT_TO
   with several words reaches ``--report_to`` as separate words.
"""

from __future__ import annotations

import argparse
import os
import stat
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from groundwork import argtypes
from groundwork.argtypes import BadValue, distributed_env
from gui_grounding.cli import build_parser as cli_parser
from gui_grounding.ops import plan as plan_module
from tests.helpers.paths import REPO
from vlm_r1 import configs, launch, preflight

FUZZ = settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


# ---- 1. numeric flags ------------------------------------------------------------------------------------------------
def _commands():
    """``[(parser, argv prefix)]``: every ``gui-grounding`` subcommand, the plan, the preflight."""
    cli = cli_parser()
    sub = next(a for a in cli._actions if isinstance(a, argparse._SubParsersAction))
    out = [(p, [name], cli) for name, p in sub.choices.items()]
    out.append((plan_module.build_parser(), [], None))
    out.append((preflight.build_parser(), [], None))
    return out


def _numeric_flags():
    flags = []
    for parser, prefix, top in _commands():
        for action in parser._actions:
            name = getattr(action.type, "__name__", "")
            if action.option_strings and (action.type in (int, float) or name in ("int", "float", "integer", "number")):
                flags.append((parser, prefix, top, action))
    return flags


FLAGS = _numeric_flags()
#: ("--" is not here: argparse itself drops a "--" value, before any type sees it)
NOT_NUMBERS = ["nan", "NaN", "inf", "-inf", "Infinity", "", " ", "1e999", "-1e999", "abc", "0x10", "1,5", "[1]", "1 2"]


def test_every_numeric_flag_is_an_argtypes_type_with_its_range_in_help():
    names = {(" ".join(prefix) or parser.prog, a.option_strings[0]) for parser, prefix, _, a in FLAGS}
    for expected in (
        ("estimate", "--gpu-memory-gib"),
        ("estimate", "--text-tokens"),
        ("estimate", "--completion-tokens"),
        ("estimate", "--nnodes"),
        ("make-tiny-model", "--seed"),
        ("make-tiny-model", "--min-pixels"),
        ("make-tiny-model", "--max-pixels"),
        ("toy", "--grpo-lr"),
        ("make-synthetic", "--seed"),
        ("python -m gui_grounding.plan", "--gpu-memory-gib"),
        ("python -m gui_grounding.plan", "--rollouts-per-device"),
        ("python -m vlm_r1.preflight", "--timeout"),
        ("python -m vlm_r1.preflight", "--min_free_gib"),
    ):
        assert expected in names, expected
    for parser, _prefix, _, action in FLAGS:
        where = (parser.prog, action.option_strings)
        assert action.type not in (int, float) and getattr(action.type, "range_text", None), where
        assert action.type.range_text in (action.help or ""), where


def _below_or_above(parse) -> list[str]:
    lo, hi, lo_open, hi_open = parse.bounds
    out = []
    if lo is not None:
        out.append(repr(lo) if lo_open else (str(lo - 1) if parse.__name__ == "integer" else repr(lo - 0.5)))
    if hi is not None:
        out.append(repr(hi) if hi_open else (str(hi + 1) if parse.__name__ == "integer" else repr(hi * 2 + 1)))
    if parse.__name__ == "integer":
        out.append("1.5")
    return out


def _refused(parser, action, bad, capsys):
    """``FLAG=BAD`` is refused by argparse: status 2, the last line names the flag, its range and the value."""
    with pytest.raises(SystemExit) as exc:
        parser.parse_args([f"{action.option_strings[-1]}={bad}"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    name = "/".join(action.option_strings)
    assert (
        err.rstrip("\n")
        .splitlines()[-1]
        .endswith(f"error: argument {name}: must be {action.type.range_text}, got {bad!r}")
    ), err
    assert "Traceback" not in err


@FUZZ
@given(data=st.data())
def test_every_numeric_flag_refuses_non_numbers_and_out_of_range_values(data, capsys):
    parser, prefix, _, action = data.draw(st.sampled_from(FLAGS))
    bad = data.draw(st.sampled_from(NOT_NUMBERS + _below_or_above(action.type)))
    _refused(parser, action, bad, capsys)


@pytest.mark.parametrize(
    "argv, flag, bad",
    [
        (["estimate"], "--gpu-memory-gib", "nan"),
        (["estimate"], "--gpu-memory-gib", "-5"),
        (["estimate"], "--text-tokens", "-1"),
        (["estimate"], "--completion-tokens", "1e3"),
        (["make-tiny-model"], "--min-pixels", "0"),
        (["make-tiny-model"], "--seed", "-1"),
        ([], "--timeout", "nan"),
        ([], "--min_free_gib", "-1"),
    ],
)
def test_examples_of_refused_flags(argv, flag, bad, capsys):
    parser, _, _, action = next(
        f for f in FLAGS if f[1] == argv and flag in f[3].option_strings and (argv or "preflight" in f[0].prog)
    )
    _refused(parser, action, bad, capsys)


def test_argtypes_value_and_from_env_name_the_key():
    seed = argtypes.SEED
    assert argtypes.value(seed, 7, "seed") == 7 and argtypes.value(seed, " 7 ", "seed") == 7
    for raw, shown in (
        ("abc", "'abc'"),
        (True, "True"),
        ([1, 2], "[1, 2]"),
        (1.5, "'1.5'"),
        (float("nan"), "'nan'"),
        (-1, "'-1'"),
        ({"a": 1}, "{'a': 1}"),
    ):
        with pytest.raises(BadValue) as exc:
            argtypes.value(seed, raw, "cfg.yaml: seed")
        assert str(exc.value) == f"cfg.yaml: seed: must be an integer >= 0 and <= 4294967295, got {shown}"
    gib = argtypes.number(min=0, min_open=True)
    assert argtypes.from_env("X", gib, 80.0, {}) == 80.0 and argtypes.from_env("X", gib, 80.0, {"X": ""}) == 80.0
    with pytest.raises(BadValue, match=r"^X: must be a number > 0, got 'nan'$"):
        argtypes.from_env("X", gib, 80.0, {"X": "nan"})


# the training parser (TRL's int / float fields) and its --config YAML
def _train_main(argv, capsys):
    from gui_grounding.train import GTA1, main

    with pytest.raises(SystemExit) as exc:
        main(["--data_file_paths", "unused.jsonl", "--output_dir", "unused", "--dry_run", *argv], dialect=GTA1)
    assert exc.value.code == 2
    return capsys.readouterr().err.rstrip("\n").splitlines()[-1]


def test_training_flags_and_config_values_follow_the_number_rule(tmp_path, capsys):
    line = _train_main(["--learning_rate", "nan"], capsys)
    assert line.endswith("error: argument --learning_rate/--learning-rate: must be a finite number, got 'nan'")
    line = _train_main(["--max_steps", "1e999"], capsys)
    assert line.endswith("error: argument --max_steps/--max-steps: must be an integer, got '1e999'")
    recipe = tmp_path / "recipe.yaml"
    for text, message in (
        ("max_pixels: [1, 2]\n", "max_pixels: must be an integer, got [1, 2]"),
        ("max_steps: .nan\n", "max_steps: must be an integer, got 'nan'"),
        ("seed: true\n", "seed: must be an integer, got True"),
        ("learning_rate: .inf\n", "learning_rate: must be a finite number, got 'inf'"),
        ("reward_weights: [1.0, .nan]\n", "reward_weights[1]: must be a finite number, got 'nan'"),
    ):
        recipe.write_text(text)
        line = _train_main(["--config", str(recipe)], capsys)
        assert line == f"gui_grounding.train: error: BadValue: --config {recipe}: {message}", line


@pytest.mark.parametrize(
    "flag, value, least",
    [("--num_generations", "0", 2), ("--num_generations", "1", 2), ("--per_device_train_batch_size", "0", 1)],
)
def test_batch_fields_trl_divides_by_are_checked_first(flag, value, least, capsys):
    line = _train_main([flag, value], capsys)
    assert line == f"gui_grounding.train: error: BadValue: {flag}: must be an integer >= {least}, got {value}"


@FUZZ
@given(values=st.dictionaries(st.sampled_from(list(configs.GRPO_BATCH_MINIMUMS)), st.integers(-3, 5) | st.none()))
def test_check_batch_accepts_exactly_the_minimums(values):
    args = argparse.Namespace(**{name: 8 for name in configs.GRPO_BATCH_MINIMUMS})
    vars(args).update(values)
    bad = [
        n
        for n, least in configs.GRPO_BATCH_MINIMUMS.items()
        if (getattr(args, n) is None and n not in ("num_generations_eval", "steps_per_generation"))
        or (getattr(args, n) is not None and getattr(args, n) < least)
    ]
    if bad:
        with pytest.raises(BadValue, match=rf"^--({'|'.join(bad)}): must be an integer >= \d, got "):
            configs.check_batch(args, configs.GRPO_BATCH_MINIMUMS)
    else:
        configs.check_batch(args, configs.GRPO_BATCH_MINIMUMS)


def test_report_to_takes_several_words():
    from gui_grounding.training.gta1 import parse_args

    base = ["--data_file_paths", "x.jsonl", "--output_dir", "unused", "--model_name_or_path", "m"]
    assert parse_args([*base, "--report_to", "tensorboard", "wandb"])[1].report_to == ["tensorboard", "wandb"]
    assert parse_args([*base, "--report_to", "none"])[1].report_to == []


# ---- 2. the distributed environment ----------------------------------------------------------------------------------
VARIABLES = ("WORLD_SIZE", "RANK", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "NODE_RANK", "GROUP_RANK", "MASTER_PORT")
_env_values = st.one_of(
    st.integers(-2, 9).map(str),
    st.sampled_from(["", "abc", "nan", "1.5", "99999", "65535", "0x1", " 3 ", "1e3", "-0"]),
)


def _expected(env: dict[str, str]) -> dict | str:
    """The rule, written independently: the values, or the name of the first refused variable."""

    def read(name, least, default):
        raw = env.get(name, "")
        if not raw.strip():
            return default
        try:
            value = int(raw.strip())
        except ValueError:
            raise LookupError(name) from None
        if value < least:
            raise LookupError(name)
        return value

    try:
        world = read("WORLD_SIZE", 1, 1)
        rank = read("RANK", 0, 0)
        if rank >= world:
            return "RANK"
        local_world = read("LOCAL_WORLD_SIZE", 1, None)
        if local_world is not None and local_world > world:
            return "LOCAL_WORLD_SIZE"
        local_rank = read("LOCAL_RANK", 0, 0)
        if local_rank >= (local_world or world):
            return "LOCAL_RANK"
        node = read("NODE_RANK", 0, None)
        node = read("GROUP_RANK", 0, node)
        port = read("MASTER_PORT", 1, None)
        if port is not None and port > 65535:
            return "MASTER_PORT"
    except LookupError as err:
        return err.args[0]
    return dict(
        world_size=world,
        rank=rank,
        local_rank=local_rank,
        local_world_size=local_world,
        node_rank=node,
        master_port=port,
    )


@FUZZ
@given(env=st.dictionaries(st.sampled_from(VARIABLES), _env_values))
def test_distributed_environment_is_read_whole_or_refused_naming_the_variable(env):
    expected = _expected(env)
    if isinstance(expected, str):
        with pytest.raises(BadValue) as exc:
            distributed_env(env)
        assert str(exc.value).startswith(f"{expected}: must be "), (env, str(exc.value))
        assert str(exc.value).endswith(f"got {env[expected]!r}") and "\n" not in str(exc.value)
    else:
        assert vars(distributed_env(env)) == expected


@pytest.mark.parametrize(
    "env, message",
    [
        ({"WORLD_SIZE": "abc"}, "WORLD_SIZE: must be an integer >= 1, got 'abc'"),
        ({"WORLD_SIZE": "0"}, "WORLD_SIZE: must be an integer >= 1, got '0'"),
        ({"LOCAL_RANK": "xyz"}, "LOCAL_RANK: must be an integer >= 0, got 'xyz'"),
        ({"WORLD_SIZE": "4", "RANK": "4"}, "RANK: must be below WORLD_SIZE=4 (ranks 0..3), got '4'"),
        (
            {"WORLD_SIZE": "4", "LOCAL_WORLD_SIZE": "2", "LOCAL_RANK": "2"},
            "LOCAL_RANK: must be below LOCAL_WORLD_SIZE=2, got '2'",
        ),
        ({"MASTER_PORT": "99999"}, "MASTER_PORT: must be an integer >= 1 and <= 65535, got '99999'"),
    ],
)
def test_distributed_environment_examples(env, message):
    with pytest.raises(BadValue) as exc:
        distributed_env(env)
    assert str(exc.value) == message


def test_every_reader_of_the_environment_uses_the_one_reader(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("WORLD_SIZE", "abc")
    with pytest.raises(BadValue, match="^WORLD_SIZE: "):
        launch.setup_logging()
    with pytest.raises(BadValue, match="^WORLD_SIZE: "):
        preflight.preflight_from_argv(["--output_dir", str(tmp_path)])
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "2")
    with pytest.raises(SystemExit) as exc:
        preflight.main(["--output_dir", str(tmp_path)])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err == "vlm_r1.preflight: error: BadValue: RANK: must be below WORLD_SIZE=2 (ranks 0..1), got '2'\n"
    # the preflight's own settings from the command line / --config: the flags' rule
    monkeypatch.setenv("RANK", "0")
    with pytest.raises(BadValue, match=r"^--preflight_timeout: must be a number > 0 and <= 604800, got 'nan'$"):
        preflight.preflight_from_argv(["--preflight", "on", "--preflight_timeout", "nan"])
    recipe = tmp_path / "c.yaml"
    recipe.write_text("preflight_min_free_gib: -1\n")
    with pytest.raises(BadValue, match=r"^--preflight_min_free_gib: must be a number >= 0 and <= \d+, got '-1'$"):
        preflight.settings_from_argv(["--config", str(recipe)])


# ---- 3. training entry points: one line for input errors, a traceback for bugs ----------------------------------------
def test_training_entry_points_end_input_errors_with_one_line(tiny_qwen25_dir, tmp_path, capsys, monkeypatch):
    from gui_grounding.training import gta1 as gta1_train
    from vlm_r1 import grpo_jsonl as grpo
    from vlm_r1 import sft

    mapping = tmp_path / "mapping.yaml"
    mapping.write_text("datasets:\n  a: 1\n")
    (tmp_path / "d.jsonl").write_text("")
    seed = tmp_path / "seed.yaml"
    seed.write_text(f"datasets:\n  - json_path: {tmp_path / 'd.jsonl'}\nseed: abc\n")
    base = ["--model_name_or_path", tiny_qwen25_dir, "--output_dir", str(tmp_path / "out")]
    for main, prog, extra, message in (
        (
            grpo.main,
            "vlm_r1.grpo_jsonl",
            ["--data_config", str(mapping)],
            f"ValueError: {mapping}: expected a mapping with a non-empty 'datasets:' list",
        ),
        (
            gta1_train.main,
            "gui_grounding.train",
            ["--data_config", str(seed)],
            f"BadValue: {seed}: seed: must be an integer >= 0 and <= 4294967295, got 'abc'",
        ),
        (
            sft.main,
            "vlm_r1.sft",
            ["--data_file_paths", "x.jsonl", "--gradient_accumulation_steps", "0"],
            "BadValue: --gradient_accumulation_steps: must be an integer >= 1, got 0",
        ),
    ):
        with pytest.raises(SystemExit) as exc:
            main([*base, *extra])
        assert exc.value.code == 2
        err = capsys.readouterr().err
        assert err.rstrip("\n").splitlines()[-1] == f"{prog}: error: {message}", err
        assert "Traceback" not in err
    # a bug (not an input error) keeps its traceback; so does an input error with VLM_R1_TRACEBACK set
    from vlm_r1 import grpo as grpo_core  # the library the entry point calls

    monkeypatch.setattr(grpo_core, "parse_args", lambda *a, **k: (_ for _ in ()).throw(TypeError("a bug")))
    with pytest.raises(TypeError, match="a bug"):
        grpo.main(["--output_dir", str(tmp_path)])
    monkeypatch.setattr(grpo_core, "parse_args", lambda *a, **k: (_ for _ in ()).throw(ValueError("bad input")))
    monkeypatch.setenv(launch.TRACEBACK_ENV, "1")
    with pytest.raises(ValueError, match="bad input"):
        grpo.main(["--output_dir", str(tmp_path)])


# ---- 4. the launcher --------------------------------------------------------------------------------------------------
@FUZZ
@given(name=st.sampled_from(list(plan_module.LAUNCHER_VARIABLES)), bad=st.sampled_from(NOT_NUMBERS + ["-5"]))
def test_launcher_variables_are_checked_in_one_place(name, bad):
    parse = plan_module.LAUNCHER_VARIABLES[name]
    if not bad.strip():
        assert plan_module.check_launcher_env({name: bad}) == {}  # empty: unset, as ${NAME:-default}
        return
    if bad == "-5" and parse.bounds[0] is not None and parse.bounds[0] <= -5:
        return
    with pytest.raises(BadValue) as exc:
        plan_module.check_launcher_env({name: bad})
    assert str(exc.value) == f"{name}: must be {parse.range_text}, got {bad!r}"


def test_launcher_dry_run_fails_with_one_line_naming_the_variable():
    env = {**os.environ, "PYTHON": sys.executable, "PYTHONPATH": REPO, "MAX_RESTARTS": "abc"}
    for name in ("NUM_GENERATIONS", "GPU_MEMORY_GIB", "NNODES", "MASTER_PORT"):
        env.pop(name, None)
    p = subprocess.run(
        ["bash", "run_scripts/gta1_recipe.sh", "--dry-run"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr == "[plan] ERROR: MAX_RESTARTS: must be an integer >= 0 and <= 1000000, got 'abc'\n"


def test_plan_main_checks_the_environment_before_the_flags(monkeypatch, capsys):
    monkeypatch.setenv("GPU_MEMORY_GIB", "nan")
    assert plan_module.main(["--launcher-env", "--gpu-memory-gib", "nan", "--", "--config", "x.yaml"]) == 2
    assert capsys.readouterr().err == "[plan] ERROR: GPU_MEMORY_GIB: must be a number > 0 and <= 1000000, got 'nan'\n"


def test_report_to_words_reach_the_training_command(tmp_path):
    """REPORT_TO="tensorboard, wandb" becomes ``--report_to tensorboard wandb`` (separate words, no glob): a stub
    interpreter stands in for the plan (its output: the batch flags) so that only the launcher's shell is run; the
    variable check of ``train_grpo.sh`` (``vlm_r1.launcher_env``) runs for real."""
    stub = tmp_path / "python"
    stub.write_text(
        "#!/usr/bin/env bash\n"
        'if [ "$1 $2" = "-m gui_grounding.plan" ]; then printf -- "--per_device_train_batch_size\\n8\\n"; exit 0; fi\n'
        f'if [ "$1 $2" = "-m vlm_r1.launcher_env" ]; then exec {sys.executable} "$@"; fi\n'
        "exit 1\n"
    )
    stub.chmod(stub.stat().st_mode | stat.S_IXUSR)
    (tmp_path / "wandb.txt").write_text("")  # a glob of REPORT_TO words must not expand
    env = {**os.environ, "PYTHON": str(stub), "REPORT_TO": "tensorboard, wand*", "NPROC_PER_NODE": "1", "NNODES": "1"}
    p = subprocess.run(
        ["bash", os.path.join(REPO, "run_scripts", "gta1_recipe.sh"), "--dry-run"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 0, p.stderr
    assert "--report_to tensorboard wand\\* " in p.stdout or p.stdout.rstrip().endswith(
        "--report_to tensorboard wand\\*"
    )
