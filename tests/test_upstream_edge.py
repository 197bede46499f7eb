"""The upstream edge (``vlm_r1.upstream``, docs/ARCHITECTURE.md "The upstream edge"): the core parses its own flags with
TRL's defaults; ``python -m vlm_r1.grpo_jsonl`` hands it upstream VLM-R1's dialect (legacy flags, effective
defaults); upstream's tasks and rewards reach the core's registries through the entry-point groups only."""

from __future__ import annotations

import dataclasses
from importlib.metadata import entry_points

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vlm_r1 import grpo, grpo_jsonl
from vlm_r1.configs import VLMGRPOConfig
from vlm_r1.rewards import REWARDS, resolve_reward
from vlm_r1.tasks import TASKS, get_task_class
from vlm_r1.upstream import GTA1, TRANSFORMERS_4, UPSTREAM
from vlm_r1.upstream.defaults import UPSTREAM_EFFECTIVE_DEFAULTS
from vlm_r1.upstream.rewards import UPSTREAM_REWARDS
from vlm_r1.upstream.tasks import UPSTREAM_TASK_TYPES, DefaultTask, RECTask

BASE = ["--model_name_or_path", "m", "--data_file_paths", "d.jsonl", "--output_dir", "unused"]


def test_the_upstream_tasks_and_rewards_are_registered_as_this_packages_own_entry_points():
    own_rewards = {ep.name: ep.load() for ep in entry_points(group="vlm_r1.rewards") if ep.value.startswith("vlm_r1.")}
    assert own_rewards == UPSTREAM_REWARDS
    own_tasks = {ep.name: ep.load() for ep in entry_points(group="vlm_r1.tasks") if ep.value.startswith("vlm_r1.")}
    assert own_tasks == {"default": DefaultTask, "rec": RECTask, **dict.fromkeys(UPSTREAM_TASK_TYPES, DefaultTask)}
    assert sorted(REWARDS.builtin_names()) == sorted(UPSTREAM_REWARDS)
    assert sorted(TASKS.builtin_names()) == sorted(own_tasks)
    assert get_task_class(None) is DefaultTask  # the task of a command line without --task_type
    assert resolve_reward("rec_iou") is UPSTREAM_REWARDS["rec_iou"]


def test_a_family_module_exposes_upstreams_rec_rewards_by_registry_name():
    from vlm_r1.modules.internvl import InternVLModule
    from vlm_r1.modules.qwen import Qwen2VLModule

    assert Qwen2VLModule.iou_reward is UPSTREAM_REWARDS["rec_iou"]
    assert Qwen2VLModule.format_reward_rec is UPSTREAM_REWARDS["rec_format"]
    assert Qwen2VLModule.select_reward_func("accuracy", "rec") is UPSTREAM_REWARDS["rec_iou"]
    assert InternVLModule.select_reward_func("accuracy", "rec") is UPSTREAM_REWARDS["rec_iou"]
    assert InternVLModule.iou_reward is UPSTREAM_REWARDS["rec_iou"]


def test_the_core_parses_with_trls_defaults_and_the_upstream_command_line_with_upstreams():
    core = grpo.command_line(BASE)
    upstream = grpo_jsonl.command_line(BASE)
    trl_defaults = {f.name: f.default for f in dataclasses.fields(VLMGRPOConfig)}
    for name, (value, _) in UPSTREAM_EFFECTIVE_DEFAULTS.items():
        assert upstream.value(name) == value, name
        assert upstream.source(name) == "default"
        assert core.value(name) == trl_defaults[name], name
    assert core.dialect is not upstream.dialect and upstream.dialect is UPSTREAM
    assert core.value("beta") != upstream.value("beta")  # the dialect matters: TRL 0.0, upstream 0.04


def test_foreign_flags_parse_only_in_their_dialect(capsys):
    legacy = [*BASE, "--overwrite_output_dir", "--warmup_ratio", "0.1", "--torch_dtype", "float32"]
    with pytest.raises(SystemExit) as info:
        grpo.command_line(legacy)
    assert info.value.code == 2
    assert "unrecognized arguments: --overwrite_output_dir --warmup_ratio 0.1 --torch_dtype float32" in (
        capsys.readouterr().err
    )
    cl = grpo_jsonl.command_line(legacy)
    assert cl.value("warmup_steps") == 0.1  # translated into the core's flag before any dataclass
    assert any("--overwrite_output_dir=True is a transformers 4.x flag with NO effect" in n for n in cl.notices)
    script, training, model = grpo_jsonl.parse_args(legacy)
    assert model.dtype == "float32"  # upstream's renamed flag, mapped by the dialect's finish hook
    # SFT speaks transformers 4.x only: upstream's renamed GRPO flags and defaults are not its
    assert TRANSFORMERS_4.defaults == {} and TRANSFORMERS_4.extra_fields() == {
        f.name for f in dataclasses.fields(TRANSFORMERS_4.argument_classes[0])
    }


def test_gta1s_dialect_reads_dataset_name_as_the_data_file_and_upstreams_as_no_data():
    argv = ["--model_name_or_path", "m", "--dataset_name", "train.json", "--output_dir", "unused"]
    script, _, _ = grpo.parse_args(argv, dialect=GTA1)
    assert script.data_file_paths == "train.json"
    with pytest.raises(SystemExit):  # upstream: --dataset_name FILE.json has no effect, so no data is given
        grpo_jsonl.parse_args(argv)


_VALUES = {
    "beta": st.sampled_from(["0.0", "0.04", "0.5"]),
    "max_completion_length": st.sampled_from(["16", "256", "512"]),
    "top_k": st.sampled_from(["0", "50", "7"]),
    "logging_steps": st.sampled_from(["1", "500"]),
    "loss_type": st.sampled_from(["grpo", "dr_grpo", "bnpo"]),
}


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(chosen=st.dictionaries(st.sampled_from(sorted(_VALUES)), st.just(None), max_size=len(_VALUES)), data=st.data())
def test_a_flag_always_beats_the_dialects_default_and_says_so(chosen, data):
    """For any subset of the fields upstream's dialect re-defaults, given on the command line with any value: the flag's
    value and source win; every other field keeps upstream's value with source ``default``."""
    flags = {name: data.draw(_VALUES[name], label=name) for name in chosen}
    argv = [*BASE, *(x for name, value in flags.items() for x in (f"--{name}", value))]
    cl = grpo_jsonl.command_line(argv)
    for name, (default, _) in UPSTREAM_EFFECTIVE_DEFAULTS.items():
        if name in flags:
            got = cl.value(name)
            assert (float(got) == float(flags[name])) if isinstance(got, (int, float)) else got == flags[name]
            assert cl.source(name) == f"flag --{name}"
        else:
            assert (cl.value(name), cl.source(name)) == (default, "default"), name
