"""Tiny training runs of the tests: their command lines, data, launcher environment and logs, in one place.

``from tests.helpers.train import tiny_train_argv, tiny_sft_argv, sample_subset, step_logs``:

* :func:`flags`: keyword arguments as a command line (``max_steps=2`` -> ``--max_steps 2``), in the order given.
* :func:`tiny_train_argv`: the command line of a tiny GRPO run (``python -m vlm_r1.grpo_jsonl`` /
  ``vlm_r1.grpo_jsonl.main`` / ``run_scripts/train_grpo.sh``): :data:`TINY_GRPO` (the flags the runs share: the
  committed sample's screenshots, the click + toy rewards, 2 steps, groups of 8, 8 completion tokens, a 100352-pixel
  budget, frozen vision, seed 0, no reports, no checkpoints), with a test's own values over it.
* :func:`tiny_sft_argv`: the same for ``python -m vlm_r1.sft`` (:data:`TINY_SFT`).
* :func:`sample_subset`: the first records of the committed sample, as a JSONL file of their own.
* :func:`launch_env` / :func:`launch`: the 2-process launcher (``run_scripts/train_grpo.sh``, torchrun over gloo).
* :func:`step_logs`: the logged training steps of a run (``trainer_state.json``'s ``log_history`` entries with a loss).
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterable, Mapping
from typing import Any

from tests.helpers.paths import REPO, SAMPLE
from tests.helpers.proc import TORCH_EXTENSIONS_DIR, child_env, run
from tests.helpers.records import conversation

#: the toy reward of ``tests/plugins/toy_rewards.py`` (needs ``tests/plugins`` on the path: ``proc.child_env`` has it)
TOY_REWARD = "toy_rewards:completion_length_reward"

#: GTA1's recipe for the tiny CPU runs (``--config``): GTA1's objective, where the core's defaults are upstream's
GTA1_TINY_RECIPE = os.path.join(REPO, "recipes", "gta1", "tiny_cpu.yaml")

#: the flags every tiny GRPO run shares unless it says otherwise (a test passes its own value, or None to drop one)
TINY_GRPO: Mapping[str, Any] = {
    "task_type": "gui_grounding",
    "image_folders": SAMPLE,
    "reward_funcs": ("click", TOY_REWARD),
    "max_steps": 2,
    "per_device_train_batch_size": 8,
    "num_generations": 8,
    "max_completion_length": 8,
    "max_pixels": 100352,
    "freeze_vision_modules": True,
    "logging_steps": 1,
    "report_to": "none",
    "save_strategy": "no",
    "seed": 0,
}

#: the flags every tiny SFT run shares unless it says otherwise
TINY_SFT: Mapping[str, Any] = {
    "task_type": "default",
    "max_steps": 3,
    "per_device_train_batch_size": 2,
    "logging_steps": 1,
    "save_strategy": "no",
    "report_to": "none",
    "disable_tqdm": True,
}


def _text(value: Any) -> str:
    """A flag value as the command line spells it: booleans as ``true`` / ``false`` (HfArgumentParser's)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def flags(**values: Any) -> list[str]:
    """``--key value`` per keyword, in the order given: ``None`` leaves the flag out, a list or tuple gives the flag
    several values (``reward_funcs=("click", "format")`` -> ``--reward_funcs click format``), a bool is
    ``true`` / ``false``, anything else its ``str``."""
    argv: list[str] = []
    for key, value in values.items():
        if value is None:
            continue
        argv += [f"--{key}", *(_text(v) for v in (value if isinstance(value, (list, tuple)) else (value,)))]
    return argv


def _argv(defaults: Mapping[str, Any], model: Any, data: Any, out: Any, extra: Iterable[Any], own: dict) -> list[str]:
    start = {"config": own.pop("config", None), "model_name_or_path": model, "data_file_paths": data, "output_dir": out}
    merged = {**start, **defaults, **own}
    return flags(**merged) + [str(e) for e in extra]


def tiny_train_argv(model: Any, data: Any, out: Any, *extra: Any, **own: Any) -> list[str]:
    """The command line of a tiny GRPO run: ``--config`` first where ``config`` is given (a recipe YAML; the command
    line beats it wherever it stands), ``--model_name_or_path model --data_file_paths data --output_dir out``, then :data:`TINY_GRPO` with ``own`` over it (a key of ``TINY_GRPO`` keeps its place, a new one comes after them;
    ``None`` drops a flag), then ``extra`` as given (strings after everything, e.g. ``"--deepspeed", path``)."""
    return _argv(TINY_GRPO, model, data, out, extra, own)


def tiny_sft_argv(model: Any, data: Any, out: Any, *extra: Any, **own: Any) -> list[str]:
    """The command line of a tiny SFT run (``python -m vlm_r1.sft``): as :func:`tiny_train_argv`, over
    :data:`TINY_SFT`."""
    return _argv(TINY_SFT, model, data, out, extra, own)


def sample_subset(path: Any, count: int, split: str = "train") -> str:
    """Write the first ``count`` records of the committed sample's ``{split}.jsonl`` to ``path`` (their image paths
    stay relative to data/web_sample: pass ``--image_folders`` SAMPLE) and return ``str(path)``; asserts the sample
    holds that many."""
    with open(os.path.join(SAMPLE, f"{split}.jsonl"), encoding="utf-8") as f:
        lines = [line for line in f if line.strip()][:count]
    assert len(lines) == count, f"data/web_sample/{split}.jsonl must hold at least {count} records"
    with open(path, "w", encoding="utf-8") as f:
        f.write("".join(lines))
    return str(path)


def step_logs(run_dir: Any) -> list[dict]:
    """The training steps ``run_dir/trainer_state.json`` logged (its ``log_history`` entries that have a loss)."""
    with open(os.path.join(run_dir, "trainer_state.json"), encoding="utf-8") as f:
        return [h for h in json.load(f)["log_history"] if "loss" in h]


def launch_env(nproc: int | None = 2, **extra: Any) -> dict[str, str]:
    """The environment of a launcher run: one OpenMP thread per rank, DeepSpeed's JIT ops cached once per machine
    (``proc.TORCH_EXTENSIONS_DIR``), ``NPROC_PER_NODE=nproc`` (None: the parent's), ``extra`` as for ``child_env``."""
    if nproc is not None:
        extra["NPROC_PER_NODE"] = nproc
    return child_env(threads=1, TORCH_EXTENSIONS_DIR=TORCH_EXTENSIONS_DIR, **extra)


def launch(argv: Iterable[Any], nproc: int = 2) -> subprocess.CompletedProcess:
    """``bash run_scripts/train_grpo.sh ARGV`` on ``nproc`` processes (:func:`launch_env`), checked, with the end
    of its stderr (6000 characters) in the failure message."""
    return run(["bash", "run_scripts/train_grpo.sh", *argv], env=launch_env(nproc), tail=6000)


def colour_question_argv(model: Any, folder: Any, make_image, out: Any, record_id: Any, **own: Any) -> list[str]:
    """A one-record default-task data set and the command line of a 1-step GRPO run on it.

    Writes ``folder/img/a.png`` (84 x 84, with conftest's ``make_image`` factory) and ``folder/d.jsonl``: one record
    ``{"id": record_id, "image": "a.png"}`` asking ``"<image>What colour is it?"``, answered ``"red"``. The command
    line is :func:`tiny_train_argv` without ``--task_type`` and ``--freeze_vision_modules`` (the core's defaults),
    ``--image_folders folder/img``, ``--beta 0``, 1 step of one group of 4, a 50176-pixel budget; ``own`` over it.
    """
    make_image(84, 84, "a.png", folder=os.path.join(folder, "img"))
    data = os.path.join(folder, "d.jsonl")
    record = {"id": record_id, "image": "a.png", "conversations": conversation("<image>What colour is it?", "red")}
    with open(data, "w", encoding="utf-8") as f:
        f.write(json.dumps(record) + "\n")
    colour = dict(task_type=None, image_folders=os.path.join(folder, "img"), freeze_vision_modules=None, beta=0)
    colour.update(max_steps=1, per_device_train_batch_size=4, num_generations=4, max_pixels=50176)
    return tiny_train_argv(model, data, out, **{**colour, **own})
