"""The core stays GUI-agnostic and thin (issue 13): ``vlm_r1`` never imports the ``gui_grounding`` plugin, and no core
call site uses upstream's compatibility methods (``UpstreamModuleMixin``), which exist only so upstream module
subclasses instantiate."""

from __future__ import annotations

import ast
import dataclasses
import os

from tests.helpers.paths import REPO
from vlm_r1.modules.base import UpstreamModuleMixin, VLMBaseModule
from vlm_r1.tasks import Task

CORE = os.path.join(REPO, "vlm_r1")


@dataclasses.dataclass
class SpecOptions:
    level: int = dataclasses.field(default=1, metadata={"help": "A task option."})


class SpecTask(Task):
    """A task given as a ``module:Class`` spec (the registry's third source), with its own options."""

    name = "spec_task"
    options_class = SpecOptions


def _core_files():
    for root, _, files in os.walk(CORE):
        for name in files:
            if name.endswith(".py"):
                yield os.path.join(root, name)


def test_core_never_imports_the_plugin():
    offenders = []
    for path in _core_files():
        tree = ast.parse(open(path, encoding="utf-8").read(), path)
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            offenders += [
                f"{os.path.relpath(path, REPO)}:{node.lineno}"
                for n in names
                if n == "gui_grounding" or n.startswith("gui_grounding.")
            ]
    assert offenders == []


def test_compat_methods_are_never_called_by_the_core():
    compat = {n for n in vars(UpstreamModuleMixin) if not n.startswith("_")}
    assert compat == {
        "get_vlm_key",
        "is_embeds_input",
        "get_custom_multimodal_keywords",
        "get_non_generate_params",
        "prepare_prompt",
        "get_eos_token_id",
    }
    calls = []
    for path in _core_files():
        tree = ast.parse(open(path, encoding="utf-8").read(), path)
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in compat:
                calls.append(f"{os.path.relpath(path, REPO)}:{node.lineno} {node.func.attr}")
    assert calls == []
    # the abstract surface a family must implement is three methods
    assert VLMBaseModule.__abstractmethods__ == {
        "get_model_class",
        "get_vision_modules_keywords",
        "prepare_model_inputs",
    }


def test_upstream_style_module_still_instantiates():
    class Minimal(VLMBaseModule):
        model_types = ("toy_vl",)

        def get_model_class(self, model_id, model_init_kwargs):
            return object

        def get_vision_modules_keywords(self):
            return ["visual"]

        def prepare_model_inputs(self, processing_class, prompts_text, images, **kwargs):
            return {}, []

    m = Minimal()
    assert (m.get_vlm_key(), m.is_embeds_input(), m.get_custom_multimodal_keywords(), m.get_non_generate_params()) == (
        "toy_vl",
        False,
        [],
        [],
    )
    assert m.shared_prompt_positions_fn(None) is None and m.get_custom_processing_keywords() == []


def _plugin_vocabulary() -> tuple[set[str], set[str]]:
    """``(words, literals)``: what the GUI plugin declares through its task entry point, read from the plugin itself.

    ``words`` may appear nowhere in ``vlm_r1`` (code, comments, docstrings): its option names, prompt modes, reward
    names and reward function names, metric aliases and console metric keys. ``literals`` are the generic English
    words among them ("thinking", "distance", "iou", "adapter"): the core may use the word (LoRA adapters, REC IoU),
    never the string value.
    """
    from gui_grounding.training.task import GUIGroundingTask

    task = GUIGroundingTask
    names = {f.name for f in dataclasses.fields(task.options_class)}
    for f in dataclasses.fields(task.options_class):
        names |= set(f.metadata.get("choices", ()))
    names |= set(task.rewards) | {fn.__name__ for fn in task.rewards.values()}
    names |= set(task.metric_aliases) | set(task.metric_aliases.values())
    names |= {key for _, key, _ in task.console_metrics}
    # box_rounding's values: 'float' is a Python type, 'gta1' the core's own loss preset (--loss_preset gta1); and
    # upstream VLM-R1's own REC reward function name (iou_reward, vlm_r1.rewards) stays the core's
    from vlm_r1.upstream.rewards import UPSTREAM_REWARDS as BUILTIN_REWARDS

    names -= {"float", "gta1"} | {fn.__name__ for fn in BUILTIN_REWARDS.values()}
    # 'box' (a prompt mode) is also the core's REC vocabulary ("REC's boxes stay", issue 13): the other modes and the
    # option name already catch a core that knows the plugin's modes
    names.discard("box")
    generic = names & {"thinking", "distance", "iou", "adapter"}
    return names - generic, generic


def test_core_never_names_the_plugins_options_modes_rewards_or_aliases():
    import io
    import re
    import tokenize

    words, literals = _plugin_vocabulary()
    # the vocabulary really is the plugin's (so this test cannot pass by reading an empty list)
    assert {
        "prompt_mode",
        "box_rounding",
        "non_thinking",
        "click",
        "click_reward",
        "click_format",
        "click_accuracy",
        "gaussian_point",
        "rewards/click_reward/mean",
    } <= words
    assert {"thinking", "adapter", "distance", "iou"} <= literals
    pattern = re.compile(
        r"(?<![\w/])(" + "|".join(sorted(map(re.escape, words), key=len, reverse=True)) + r")(?![\w/])"
    )
    found = []
    for path in _core_files():
        text = open(path, encoding="utf-8").read()
        rel = os.path.relpath(path, REPO)
        for lineno, line in enumerate(text.splitlines(), 1):
            found += [f"{rel}:{lineno} {m.group(1)}" for m in pattern.finditer(line)]
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == tokenize.STRING:
                try:
                    value = ast.literal_eval(tok.string)
                except (ValueError, SyntaxError):  # f-strings
                    continue
                if isinstance(value, str) and value in literals:
                    found.append(f"{rel}:{tok.start[0]} {value!r}")
    assert found == []


def test_grpo_and_sft_share_one_data_arguments_dataclass(tmp_path):
    from vlm_r1.configs import DataArguments, GRPOScriptArguments
    from vlm_r1.sft import SFTScriptArguments
    from vlm_r1.sft import parse_args as sft_parse_args

    assert SFTScriptArguments is DataArguments and issubclass(GRPOScriptArguments, DataArguments)
    grpo_only = {f.name for f in dataclasses.fields(GRPOScriptArguments)} - {
        f.name for f in dataclasses.fields(DataArguments)
    }
    assert grpo_only == {"reward_funcs", "reward_method", "is_reward_customized_from_vlm_module"}
    # SFT: the same flags and the task's own, but the checkpoint's pixel budget unless given
    script, training, _ = sft_parse_args(
        [
            "--model_name_or_path",
            "m",
            "--output_dir",
            str(tmp_path),
            "--task_type",
            "gui_grounding",
            "--data_file_paths",
            "a.jsonl",
            "--prompt_mode",
            "thinking",
            "--val_split_ratio",
            "0.5",
            "--max_anyres_num",
            "6",
        ]
    )
    assert (script.max_pixels, script.min_pixels, script.val_split_ratio, script.max_anyres_num) == (None, None, 0.5, 6)
    assert training.max_length is None  # never truncate: it would cut image tokens
    assert script.task_options.prompt_mode == "thinking"


def test_one_registry_helper_serves_every_kind():
    import gui_grounding.eval.backends
    import gui_grounding.eval.benchmarks
    import gui_grounding.models.adapters
    import vlm_r1.modules
    import vlm_r1.rewards
    import vlm_r1.tasks
    from groundwork.registry import Registry

    registries = {
        "modules": vlm_r1.modules.REGISTRY,
        "adapters": gui_grounding.models.adapters.REGISTRY,
        "tasks": vlm_r1.tasks.TASKS,
        "rewards": vlm_r1.rewards.REWARDS,
        "benchmarks": gui_grounding.eval.benchmarks.REGISTRY,
        "backends": gui_grounding.eval.backends.REGISTRY,
    }
    assert {k: type(r) for k, r in registries.items()} == dict.fromkeys(registries, Registry)
    assert {k: r.group for k, r in registries.items()} == {
        "modules": "vlm_r1.modules",
        "adapters": "gui_grounding.models.adapters",
        "tasks": "vlm_r1.tasks",
        "rewards": "vlm_r1.rewards",
        "benchmarks": "gui_grounding.benchmarks",
        "backends": "gui_grounding.backends",
    }


def test_task_spec_with_its_own_options(tmp_path):
    from vlm_r1.grpo_jsonl import parse_args
    from vlm_r1.tasks import get_task

    spec = f"{__name__}:SpecTask"
    script, _, _ = parse_args(
        [
            "--model_name_or_path",
            "m",
            "--output_dir",
            str(tmp_path),
            "--data_file_paths",
            "a.jsonl",
            "--task_type",
            spec,
            "--level",
            "3",
        ]
    )
    assert script.task_options == SpecOptions(level=3)
    task = get_task(spec, script.task_options)
    assert isinstance(task, Task) and task.options.level == 3 and task.run_info(None, None) == {"level": 3}
    assert get_task(spec).options == SpecOptions(level=1)


# The files that ARE a model family (docs/ADDING_A_MODEL.md): a module file and an adapter file (plus its tests).
FAMILY_FILES = {
    "qwen3_vl": ("vlm_r1/modules/qwen3_vl.py", "gui_grounding/models/adapters/qwen3_vl.py"),
    "internvl": ("vlm_r1/modules/internvl.py", "gui_grounding/models/adapters/internvl.py"),
}


def test_a_family_is_its_two_files(tmp_path):
    """Remove a family's two files from a copy of the packages: everything still imports, the family is gone from
    every registry (its published profiles too: ``gui-grounding profiles`` lists the others, in their order), and the
    others are intact. So adding a family touches exactly those two files (and its tests)."""
    import shutil
    import subprocess
    import sys

    for pkg in ("groundwork", "vlm_r1", "gui_grounding"):  # all three layers: an installed copy must not stand in
        shutil.copytree(os.path.join(REPO, pkg), tmp_path / pkg, ignore=shutil.ignore_patterns("__pycache__"))
    for files in FAMILY_FILES.values():
        for rel in files:
            (tmp_path / rel).unlink()
    root = str(tmp_path)
    script = (
        "import json, vlm_r1, gui_grounding.models.adapters as a, vlm_r1.modules as m, vlm_r1.tiny as t\n"
        "import gui_grounding.cli, gui_grounding.training.task, gui_grounding.eval.backends.hf, vlm_r1.grpo_jsonl, vlm_r1.sft\n"
        f"assert vlm_r1.__file__.startswith({root!r}) and a.__file__.startswith({root!r}), (vlm_r1.__file__, a.__file__)\n"
        "import contextlib, io\n"
        "def cli(*argv):\n"
        "    out = io.StringIO()\n"
        "    with contextlib.redirect_stdout(out):\n"
        "        gui_grounding.cli.main(list(argv))\n"
        "    return out.getvalue()\n"
        "table = [row.split('|')[1].strip() for row in cli('profiles').splitlines() if row.startswith('| ')][1:]\n"
        "listed = list(json.loads(cli('profiles', '--json')))\n"
        "print(json.dumps({'modules': sorted(m.available_modules()), 'adapters': sorted(a.ADAPTERS), "
        "'profiles': listed, 'table': table}))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run(
        [sys.executable, "-c", script],
        cwd=tmp_path,
        env={**env, "PYTHONPATH": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    import json

    from gui_grounding.models.adapters import ADAPTERS, internvl, qwen3_vl
    from gui_grounding.models.profiles import PROFILES
    from vlm_r1.modules import available_modules

    left = json.loads(proc.stdout.strip().splitlines()[-1])
    assert left["modules"] == sorted(set(available_modules()) - {"qwen3_vl", "qwen3_vl_moe", "internvl"})
    removed = {cls.name for family in (qwen3_vl, internvl) for cls in family.ADAPTERS}
    assert {"qwen3-vl", "internvl", "internvl-gui"} <= removed
    assert left["adapters"] == sorted(set(ADAPTERS) - removed)
    assert {"qwen2_5_vl", "qwen2_vl"} <= set(left["modules"]) and {"gta1", "qwen2-vl"} <= set(left["adapters"])
    # the removed families' published profiles left with their adapter files; the rest are listed in their order
    gone = {p.name for family in (qwen3_vl, internvl) for p in family.PROFILES}
    assert {"qwen3-vl-8b", "internvl3-8b"} <= gone
    kept = [name for name in PROFILES if name not in gone]
    assert len(kept) == len(PROFILES) - len(gone)
    assert left["profiles"] == left["table"] == kept
