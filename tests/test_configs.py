"""Command line of ``python -m vlm_r1.grpo_jsonl``: upstream VLM-R1 flags, GTA1 defaults, compat warnings, tasks."""

from __future__ import annotations

import logging

import pytest

from gui_grounding.training.task import GUIGroundingOptions
from tests.helpers.train import flags
from vlm_r1.grpo_jsonl import parse_args

BASE = ["--model_name_or_path", "some/model", "--data_file_paths", "a.jsonl"]


def args(tmp_path, *extra):
    return [*BASE, "--output_dir", str(tmp_path / "out"), *extra]


def _two_files(tmp_path, **more):
    """Model ``m``, output ``tmp_path``, the data files ``a.jsonl:b.jsonl`` (colon-separated, upstream's form)."""
    return flags(model_name_or_path="m", output_dir=tmp_path, data_file_paths="a.jsonl:b.jsonl", **more)


def test_colon_separated_files_and_folders(tmp_path):
    argv = _two_files(tmp_path, image_folders="x:y", reward_method="default:yes_no")
    script, training, model = parse_args(argv)
    assert script.data_file_list == ["a.jsonl", "b.jsonl"]
    assert script.image_folder_list == ["x", "y"]
    assert script.reward_method_list == ["default", "yes_no"]
    assert model.model_name_or_path == "m"


def test_single_file_and_no_folders(tmp_path):
    script, _, _ = parse_args(args(tmp_path))
    assert script.data_file_list == ["a.jsonl"]
    assert script.image_folder_list is None
    assert script.reward_method_list is None


@pytest.mark.parametrize(
    "flag, value, message",
    [
        ("--image_folders", "x", "--image_folders has 1 entries but --data_file_paths has 2"),
        ("--image_folders", "x:y:z", "--image_folders has 3 entries but --data_file_paths has 2"),
        ("--reward_method", "default", "--reward_method has 1 entries but --data_file_paths has 2"),
    ],
)
def test_mismatched_counts_raise(tmp_path, flag, value, message):
    argv = [*_two_files(tmp_path), flag, value]
    with pytest.raises(ValueError, match=f"^{message}$"):
        parse_args(argv)


def test_core_defaults_are_upstream_vlm_r1s(tmp_path):
    # the full table is pinned in tests/test_upstream_defaults.py; GTA1's values live in recipes/gta1/*.yaml
    script, training, model = parse_args(args(tmp_path))
    assert training.beta == 0.04
    assert training.loss_type == "grpo"
    assert training.max_completion_length == 256
    assert (training.temperature, training.top_k, training.top_p) == (1.0, 50, 1.0)
    assert training.num_generations == 8
    assert training.learning_rate == 1e-6
    assert training.ban_vision_tokens is False  # upstream bans nothing (TRL suppresses the image token itself)
    assert training.use_vllm is False
    assert training.bf16 is False
    assert script.task_type is None and script.reward_funcs is None
    assert script.task_options is None and not hasattr(script, "prompt_mode")  # the default task has no options
    assert script.strict_data is False
    assert (script.max_pixels, script.min_pixels) == (12845056, 3136)
    assert model.freeze_vision_modules is False


def test_bare_bf16_without_a_gpu_warns_and_runs_fp32(tmp_path, monkeypatch, caplog):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with caplog.at_level(logging.WARNING):
        _, training, _ = parse_args(args(tmp_path, "--bf16", "--tf32", "--logging_steps", "1"))
    assert training.bf16 is False and not training.tf32
    assert training.logging_steps == 1
    assert "--bf16 given but this machine has no bf16-capable GPU: training in fp32 instead" in caplog.messages
    _, training, _ = parse_args(args(tmp_path, "--bf16", "false"))
    assert training.bf16 is False


def test_script_flags_parse(tmp_path):
    script, training, model = parse_args(
        args(
            tmp_path,
            "--task_type",
            "gui_grounding",
            "--reward_funcs",
            "click",
            "click_format",
            "--max_pixels",
            "100352",
            "--min_pixels",
            "6272",
            "--prompt_mode",
            "thinking",
            "--strict_data",
            "true",
            "--val_split_ratio",
            "0.25",
            "--freeze_vision_modules",
            "true",
            "--ban_vision_tokens",
            "false",
            "--beta",
            "0.04",
        )
    )
    assert script.task_type == "gui_grounding"
    assert script.reward_funcs == ["click", "click_format"]
    assert (script.max_pixels, script.min_pixels) == (100352, 6272)
    assert script.task_options == GUIGroundingOptions(prompt_mode="thinking", adapter=None, box_rounding="float")
    assert script.strict_data is True
    assert script.val_split_ratio == 0.25
    assert model.freeze_vision_modules is True
    assert training.ban_vision_tokens is False
    assert training.beta == 0.04


def test_torch_dtype_maps_to_dtype_with_warning(tmp_path, caplog):
    with caplog.at_level(logging.WARNING, logger="vlm_r1"):
        _, _, model = parse_args(args(tmp_path, "--torch_dtype", "bfloat16"))
    assert model.dtype == "bfloat16"
    assert "UPSTREAM FLAG: --torch_dtype is upstream's name; mapped to --dtype=bfloat16" in caplog.messages


def test_vllm_renames_and_reentrant_mapping(tmp_path, caplog):
    with caplog.at_level(logging.WARNING, logger="vlm_r1"):
        _, training, _ = parse_args(
            args(tmp_path, "--vllm_max_model_len", "4096", "--gradient_checkpointing_use_reentrant", "false")
        )
    assert training.vllm_max_model_length == 4096
    assert training.gradient_checkpointing_kwargs == {"use_reentrant": False}
    assert "UPSTREAM FLAG: --vllm_max_model_len is upstream's name; mapped to --vllm_max_model_length=4096" in (
        caplog.messages
    )


@pytest.mark.parametrize(
    "flag, value, expected",
    [
        (
            "--dataset_name",
            "x",
            "UPSTREAM FLAG: --dataset_name='x' has NO effect here: data comes from --data_file_paths",
        ),
        (
            "--max_prompt_length",
            "512",
            "UPSTREAM FLAG: --max_prompt_length=512 has NO effect here: TRL 1.16 never "
            "truncates prompts (image tokens stay intact)",
        ),
        (
            "--vllm_device",
            "cuda:7",
            "UPSTREAM FLAG: --vllm_device='cuda:7' has NO effect here: TRL places vLLM itself "
            "(--vllm_mode colocate|server)",
        ),
    ],
)
def test_dropped_upstream_flags_are_accepted_and_warned(tmp_path, caplog, flag, value, expected):
    with caplog.at_level(logging.WARNING, logger="vlm_r1"):
        parse_args(args(tmp_path, flag, value))
    assert expected in caplog.messages
    assert flag in caplog.text


def test_no_warning_without_upstream_flags(tmp_path, caplog):
    with caplog.at_level(logging.WARNING, logger="vlm_r1"):
        parse_args(args(tmp_path))
    assert not [m for m in caplog.messages if "UPSTREAM FLAG" in m]


def test_unknown_flag_is_rejected(tmp_path, capsys):
    # an unknown flag is an argparse error (exit 2) naming it, never silently dropped
    with pytest.raises(SystemExit) as info:
        parse_args(args(tmp_path, "--no_such_flag", "1"))
    assert info.value.code == 2
    assert "unrecognized arguments: --no_such_flag 1" in capsys.readouterr().err


def test_invalid_choice_exits(tmp_path, capsys):
    with pytest.raises(SystemExit) as info:
        parse_args(args(tmp_path, "--task_type", "gui_grounding", "--prompt_mode", "cot"))
    assert info.value.code == 2
    assert "argument --prompt_mode/--prompt-mode: invalid choice: 'cot'" in capsys.readouterr().err


def test_task_options_are_the_tasks_own(tmp_path, capsys):
    # two-phase parse: a plugin's flag exists only once --task_type names the plugin, and the error says whose it is
    with pytest.raises(SystemExit) as info:
        parse_args(args(tmp_path, "--prompt_mode", "thinking", "--box_rounding", "gta1"))
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert (
        "unrecognized arguments: --prompt_mode thinking --box_rounding gta1 (--prompt_mode is an option of "
        "--task_type gui_grounding; --box_rounding is an option of --task_type gui_grounding; this run's "
        "task_type is default)"
    ) in err
    with pytest.raises(SystemExit):
        parse_args(args(tmp_path, "--task_type", "rec", "--adapter", "gta1"))
    assert "--adapter is an option of --task_type gui_grounding; this run's task_type is rec" in capsys.readouterr().err
    for spelling in (["--task_type=gui_grounding"], ["--task-type", "gui_grounding"], ["--task-type=gui_grounding"]):
        script, _, _ = parse_args(args(tmp_path, *spelling, "--adapter", "qwen3-vl", "--box_rounding", "gta1"))
        assert script.task_options == GUIGroundingOptions(
            prompt_mode="non_thinking", adapter="qwen3-vl", box_rounding="gta1"
        )
    # the last --task_type wins, in both phases
    script, _, _ = parse_args(
        args(tmp_path, "--task_type", "rec", "--task_type", "gui_grounding", "--prompt_mode", "box")
    )
    assert (script.task_type, script.task_options.prompt_mode) == ("gui_grounding", "box")


def test_task_and_its_options_from_config_yaml(tmp_path):
    config = tmp_path / "run.yaml"
    config.write_text("task_type: gui_grounding\nprompt_mode: box\nmax_pixels: 100352\n")
    script, _, _ = parse_args(args(tmp_path, "--config", str(config)))
    assert (script.task_type, script.max_pixels) == ("gui_grounding", 100352)
    assert script.task_options == GUIGroundingOptions(prompt_mode="box")
    # the command line wins over the YAML, for the task too
    script, _, _ = parse_args(args(tmp_path, "--config", str(config), "--prompt_mode", "thinking"))
    assert script.task_options.prompt_mode == "thinking"


def test_unknown_task_type_is_a_usage_error(tmp_path, capsys):
    with pytest.raises(SystemExit) as info:
        parse_args(args(tmp_path, "--task_type", "nope"))
    assert info.value.code == 2
    assert (
        "error: unknown task_type 'nope'; registered: default, gui, gui_defect, ic, odLength, rec, gui_grounding"
    ) in capsys.readouterr().err


def test_help_lists_the_tasks_options(tmp_path, capsys):
    with pytest.raises(SystemExit):
        parse_args(["--help"])
    out = capsys.readouterr().out
    assert "Installed tasks with options:\n  gui_grounding: --prompt_mode, --adapter, --box_rounding" in out
    assert "--prompt_mode {" not in out  # listed by name only: they belong to that task
    with pytest.raises(SystemExit):
        parse_args(["--task_type", "gui_grounding", "--help"])
    out = capsys.readouterr().out
    assert "--prompt_mode {non_thinking,thinking,box}" in out and "--box_rounding {float,gta1}" in out
    assert "--adapter ADAPTER" in out


@pytest.mark.parametrize(
    "argv, message",
    [
        (
            ["--model_name_or_path", "m"],
            "--data_file_paths (':'-separated JSONL/JSON files) or --data_config (mixture YAML) is required",
        ),
        (["--data_file_paths", "a.jsonl"], "--model_name_or_path is required"),
    ],
)
def test_required_flags_exit(tmp_path, capsys, argv, message):
    with pytest.raises(SystemExit) as info:
        parse_args([*argv, "--output_dir", str(tmp_path)])
    assert info.value.code == 2
    assert f"error: {message}" in capsys.readouterr().err


def test_yaml_config_with_cli_override(tmp_path):
    cfg = tmp_path / "run.yaml"
    cfg.write_text(
        "model_name_or_path: runs/tiny\n"
        "data_file_paths: a.jsonl:b.jsonl\n"
        "image_folders: x:y\n"
        f"output_dir: {tmp_path / 'out'}\n"
        "task_type: gui_grounding\n"
        "max_pixels: 100352\n"
        "num_generations: 4\n"
        "learning_rate: 2.0e-6\n"
        "beta: 0.0\n"
        "torch_dtype: float32\n"
    )
    script, training, model = parse_args(["--config", str(cfg), "--beta", "0.04"])
    assert script.data_file_list == ["a.jsonl", "b.jsonl"]
    assert script.image_folder_list == ["x", "y"]
    assert script.task_type == "gui_grounding"
    assert script.max_pixels == 100352
    assert training.num_generations == 4
    assert training.learning_rate == 2e-6
    assert training.beta == 0.04  # the command line wins over the file
    assert model.model_name_or_path == "runs/tiny"
    assert model.dtype == "float32"  # upstream key in the YAML is mapped too


# --------------------------------------------------------------------------------------------------------------------
# task registry


def test_get_task_gui_grounding_via_entry_point():
    from importlib.metadata import entry_points

    from gui_grounding.training.task import GUIGroundingTask
    from vlm_r1.tasks import get_task

    eps = {ep.name: ep.value for ep in entry_points(group="vlm_r1.tasks")}
    assert eps.get("gui_grounding") == "gui_grounding.training.task:GUIGroundingTask", (
        "package not installed with entry points"
    )
    task = get_task("gui_grounding")
    assert type(task) is GUIGroundingTask
    assert task.default_reward_funcs == ("click",)


def test_get_task_builtin_and_upstream_types():
    from vlm_r1.tasks import get_task
    from vlm_r1.upstream.tasks import DefaultTask, RECTask

    assert type(get_task(None)) is DefaultTask
    assert type(get_task("default")) is DefaultTask
    assert type(get_task("rec")) is RECTask
    for name in ("ic", "odLength", "gui", "gui_defect"):
        assert type(get_task(name)) is DefaultTask
    assert get_task(None).default_reward_funcs == ("accuracy", "format")


def test_get_task_unknown_lists_names():
    from vlm_r1.tasks import get_task

    with pytest.raises(ValueError) as info:
        get_task("no_such_task")
    assert str(info.value) == (
        "unknown task_type 'no_such_task'; registered: default, gui, gui_defect, ic, odLength, rec, gui_grounding"
    )


def test_beta_help_states_one_default_and_cites_the_repository():
    """--beta's help in upstream VLM-R1's dialect keeps TRL's text without TRL's "(default)" mark (TRL's default is
    0.0, upstream's 0.04) and cites upstream's grpo_config.py:291-292 at 90052f4 with its repository; the core's own
    parser keeps TRL's help and default."""
    from vlm_r1.command_line import _build_parser, _dialect_defaults
    from vlm_r1.dialect import CORE
    from vlm_r1.grpo import ARG_DATACLASSES
    from vlm_r1.upstream import UPSTREAM

    def beta(dialect):
        parser = _build_parser((*ARG_DATACLASSES, *dialect.argument_classes), None, "--config")
        _dialect_defaults(parser, dialect)
        return next(a for a in parser._actions if a.dest == "beta")

    up, core = beta(UPSTREAM), beta(CORE)
    assert "(default)" not in up.help and "If `0.0`, the reference model is not loaded" in up.help
    assert "om-ai-lab/VLM-R1@90052f4 src/open-r1-multimodal/src/open_r1/trainer/grpo_config.py:291-292" in up.help
    assert (up.default, core.default) == (0.04, 0.0) and "If `0.0` (default)" in core.help
