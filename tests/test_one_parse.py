"""One parse per command line (docs/ARCHITECTURE.md): a training command line is parsed once per process into the
parsed values and the source of each (flag, recipe, default); training, the preflight, the dry run and the launch plan
share that result, and the recipe file is read once.

Counted at their sources: every ``trl.TrlParser`` built (its ``__init__`` wrapped) and every read of the recipe file
(``groundwork.records.load_yaml_file`` wrapped), over the whole chain a ``gta1_recipe.sh --dry-run`` runs in one
process: the launch plan (G, the batch flags, the final training arguments), the dry run's objective, and the
preflight's settings.
"""

from __future__ import annotations

import os

import pytest
import trl
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import groundwork.records
from gui_grounding.ops import plan
from gui_grounding.training import gta1
from tests.helpers.paths import REPO
from vlm_r1 import command_line, grpo
from vlm_r1.preflight import settings_from_argv
from vlm_r1.upstream import GTA1

RECIPE = os.path.join(REPO, "recipes", "gta1", "tiny_cpu.yaml")


@pytest.fixture
def counted(monkeypatch):
    """``{"parsers": n, "recipe_reads": n}`` counted from a clean per-process cache."""
    command_line.clear_cache()
    counts = {"parsers": 0, "recipe_reads": 0}
    init, load = trl.TrlParser.__init__, groundwork.records.load_yaml_file

    def counting_init(self, *args, **kwargs):
        counts["parsers"] += 1
        init(self, *args, **kwargs)

    def counting_load(path, what, **kwargs):
        counts["recipe_reads"] += what == "--config"
        return load(path, what, **kwargs)

    monkeypatch.setattr(trl.TrlParser, "__init__", counting_init)
    monkeypatch.setattr(command_line, "load_yaml_file", counting_load)
    yield counts
    command_line.clear_cache()


def _argv(tmp_path) -> list[str]:
    data = tmp_path / "train.jsonl"
    data.write_text("{}\n", encoding="utf-8")
    return ["--config", RECIPE, "--data_file_paths", str(data), "--output_dir", str(tmp_path / "out")]


def test_a_launch_builds_one_parser_and_reads_the_recipe_once(tmp_path, counted):
    argv = [*_argv(tmp_path), "--model_name_or_path", "tiny", "--num_generations", "4"]
    p = plan.resolve(
        argv, nnodes=1, nproc_per_node=2, global_prompts=4, rollouts_per_device=4, final=True, dialect=GTA1
    )
    resolved = gta1.objective(*p.args)  # the dry run's objective, from the plan's own arguments
    cl = gta1.command_line(
        argv, dialect=GTA1
    )  # training's parse in this process: the same result, nothing parsed again
    preflight = settings_from_argv(argv, cl)
    assert counted == {"parsers": 1, "recipe_reads": 1}
    assert cl is gta1.command_line(argv, dialect=GTA1)
    # the values: flag > recipe > GTA1's entry defaults > dataclass defaults, each with its source
    assert resolved["num_generations"] == p.batch.num_generations == 4
    assert cl.source("num_generations") == "flag --num_generations"
    assert cl.source("max_completion_length") == f"--config {RECIPE}" and resolved["max_completion_length"] == 8
    assert cl.source("box_rounding") == f"--config {RECIPE}"
    assert cl.source("dtype") == f"--config {RECIPE}" and cl.value("dtype") == "float32"
    assert cl.source("min_p") == "default"
    # GLOBAL_PROMPTS 4 x G 4 = 16 completions = 2 processes x 4 per device x 2 accumulation
    assert (p.batch.per_device, p.batch.grad_accum, p.batch.completions_per_step) == (4, 2, 16)
    assert p.launcher_args == ["--per_device_train_batch_size", "4", "--gradient_accumulation_steps", "2"]
    assert (p.args[1].per_device_train_batch_size, p.args[1].gradient_accumulation_steps) == (4, 2)
    assert preflight == settings_from_argv(argv)  # the same settings as the preflight's own small parser
    assert preflight["output_dir"] == str(tmp_path / "out") and preflight["preflight"] == "auto"


def test_a_users_batch_flag_wins_over_the_launchers(tmp_path, counted):
    argv = [*_argv(tmp_path), "--model_name_or_path", "tiny", "--per_device_train_batch_size", "8"]
    p = plan.resolve(
        argv, nnodes=1, nproc_per_node=1, global_prompts=2, rollouts_per_device=8, final=True, dialect=GTA1
    )
    # the launcher puts its flags first, the user's come after and win, as argparse's last value does
    assert p.launcher_args[:2] == ["--per_device_train_batch_size", "8"]
    assert p.args[1].per_device_train_batch_size == 8 and p.batch.grad_accum == 2
    assert counted == {"parsers": 1, "recipe_reads": 1}


def test_training_parses_once_through_the_preflight_and_the_arguments(tmp_path, counted, monkeypatch):
    """``python -m gui_grounding.train``'s flow with the trainer stubbed: the preflight and the arguments of training
    come from one parse."""
    seen = {}
    monkeypatch.setattr(gta1, "train", lambda *args, **kw: seen.setdefault("args", args))
    monkeypatch.setattr(gta1, "preflight_from_argv", lambda argv, parsed: seen.setdefault("parsed", parsed))
    argv = [*_argv(tmp_path), "--model_name_or_path", "tiny"]
    gta1.main(argv, dialect=GTA1)
    assert counted == {"parsers": 1, "recipe_reads": 1}
    assert seen["parsed"] is gta1.command_line(argv, dialect=GTA1)
    assert seen["args"][1].num_generations == 8 and seen["args"][0].reward_funcs == ["click"]


FIELDS = {  # field -> (flag text, recipe value, parsed value of either)
    "max_completion_length": ("12", 12, 12),
    "top_k": ("7", 7, 7),
    "learning_rate": ("0.5", 0.5, 0.5),
    "prompt_mode": ("thinking", "thinking", "thinking"),
}


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(where=st.dictionaries(st.sampled_from(sorted(FIELDS)), st.sampled_from(["flag", "recipe", "both"])))
def test_every_value_has_the_source_that_set_it(tmp_path_factory, where):
    tmp = tmp_path_factory.mktemp("p")
    recipe = {"task_type": "gui_grounding", "num_generations": 4}
    argv = ["--data_file_paths", "x.jsonl", "--model_name_or_path", "tiny", "--output_dir", str(tmp / "o")]
    for name, place in where.items():
        flag, value, _ = FIELDS[name]
        if place in ("recipe", "both"):
            recipe[name] = value
        if place in ("flag", "both"):
            argv += [f"--{name}", flag]
    (tmp / "r.yaml").write_text(yaml.safe_dump(recipe), encoding="utf-8")
    cl = grpo.command_line(["--config", str(tmp / "r.yaml"), *argv], defaults={"top_k": 3})
    for name in FIELDS:
        place = where.get(name)
        want = {"flag": "flag", "both": "flag", "recipe": "--config", None: "default"}[place]
        assert cl.source(name).startswith(want), (name, place, cl.source(name))
        if place is not None:
            assert cl.value(name) == FIELDS[name][2]
    if "top_k" not in where:
        assert cl.value("top_k") == 3  # the entry point's default, under the recipe and the flags
    (script_args, training_args, _), options = cl.objects()
    assert training_args.max_completion_length == cl.value("max_completion_length")
    assert options.prompt_mode == cl.value("prompt_mode")
