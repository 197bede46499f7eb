"""The GRPO CLI in this process: ``vlm_r1.grpo_jsonl.main(argv)`` trains the tiny Qwen2.5-VL for 2 steps.

The CLI tests (``tests/test_train_pipeline.py``) run the same entry point in a subprocess; this one calls it directly,
so a failure shows its real traceback, and the run leaves no global state behind for the next tests: the
environment, the working directory, the root and library loggers, the warning filters, torch's thread count and the
random generators are checked and put back as they were (the ``global_state`` fixture).
"""

from __future__ import annotations

import json
import logging
import math
import os
import random
import sys
import warnings

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.helpers.proc import PLUGINS
from tests.helpers.train import sample_subset, tiny_train_argv

STEPS = 2
GENERATIONS = 4


class _GlobalState:
    """What an in-process training run could change for the whole test session, as it was at construction."""

    def __init__(self):
        import transformers

        self.env, self.cwd = self._env(), os.getcwd()
        root = logging.getLogger()
        self.root_handlers, self.root_level = list(root.handlers), root.level
        self.hf_verbosity = transformers.logging.get_verbosity()
        self.threads = torch.get_num_threads()
        self.rng = (random.getstate(), np.random.get_state(), torch.get_rng_state())

    @staticmethod
    def _env() -> dict:
        return {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"}  # pytest's own, per phase

    def changes(self) -> dict:
        """What differs now (the random generators are expected to move: they are restored, not compared)."""
        import transformers

        env = self._env()
        root = logging.getLogger()
        now = {
            "env": {k: env.get(k) for k in set(env) | set(self.env) if env.get(k) != self.env.get(k)},
            "cwd": os.getcwd() if os.getcwd() != self.cwd else None,
            "root_handlers": [h for h in root.handlers if h not in self.root_handlers],
            "root_level": root.level if root.level != self.root_level else None,
            "transformers_verbosity": (
                transformers.logging.get_verbosity()
                if transformers.logging.get_verbosity() != self.hf_verbosity
                else None
            ),
            "torch_threads": torch.get_num_threads() if torch.get_num_threads() != self.threads else None,
        }
        return {k: v for k, v in now.items() if v}

    def restore(self) -> None:
        import transformers

        for key in set(self._env()) - set(self.env):
            del os.environ[key]
        os.environ.update(self.env)
        os.chdir(self.cwd)
        root = logging.getLogger()
        root.handlers[:] = self.root_handlers
        root.setLevel(self.root_level)
        transformers.logging.set_verbosity(self.hf_verbosity)
        torch.set_num_threads(self.threads)
        random.setstate(self.rng[0])
        np.random.set_state(self.rng[1])
        torch.set_rng_state(self.rng[2])


@pytest.fixture
def global_state():
    """The session-wide state before the test; restored afterwards whatever happened (warning filters too: the run
    adds some, ``vlm_r1.launch.silence_library_deprecations``)."""
    state = _GlobalState()
    with warnings.catch_warnings():
        try:
            yield state
        finally:
            state.restore()


def _argv(model_dir: str, data: str, out: str) -> list[str]:
    return tiny_train_argv(
        model_dir,
        data,
        out,
        max_steps=STEPS,
        per_device_train_batch_size=GENERATIONS,
        num_generations=GENERATIONS,
        beta="0.0",
        learning_rate="1e-3",
        bf16=False,
        dtype="float32",
        save_strategy="steps",
        save_steps=STEPS,
        disable_tqdm=True,
    )


def test_grpo_main_in_process(tiny_qwen25_dir, tmp_path, monkeypatch, global_state):
    from vlm_r1 import grpo_jsonl as grpo

    monkeypatch.syspath_prepend(PLUGINS)  # the toy reward, named as module:function
    data = tmp_path / "train.jsonl"
    sample_subset(data, 2)
    out = tmp_path / "run"

    grpo.main(_argv(tiny_qwen25_dir, str(data), str(out)))
    leaks = global_state.changes()

    # finished: the final model and processor beside the step's checkpoint and the run's records
    for name in (
        "model.safetensors",
        "config.json",
        "processor_config.json",
        "trainer_state.json",
        "vlm_r1_run.json",
        "logs.jsonl",
        f"checkpoint-{STEPS}",
    ):
        assert (out / name).exists(), name
    state = json.loads((out / "trainer_state.json").read_text())
    assert state["global_step"] == state["max_steps"] == STEPS
    history = [h for h in state["log_history"] if "loss" in h]
    assert [h["step"] for h in history] == list(range(1, STEPS + 1))
    for h in history:
        assert math.isfinite(h["loss"]) and math.isfinite(h["grad_norm"])
        assert 0.0 <= h["rewards/click_reward/mean"] <= 1.0
        assert h["rewards/completion_length_reward/mean"] > 0  # every completion has some text
        assert math.isfinite(h["reward"])
    # logs.jsonl holds the same per-step logs as trainer_state.json
    logged = [json.loads(line) for line in (out / "logs.jsonl").read_text().splitlines() if line.strip()]
    steps = [rec for rec in logged if "loss" in rec]
    assert [rec["step"] for rec in steps] == [h["step"] for h in history]
    assert [rec["loss"] for rec in steps] == pytest.approx([h["loss"] for h in history])
    info = json.loads((out / "vlm_r1_run.json").read_text())
    assert info["world_size"] == 1 and info["num_train_rows"] == 2 and info["num_generations"] == GENERATIONS
    assert info["reward_funcs"] == ["click_reward", "completion_length_reward"]
    # the frozen tower (--freeze_vision_modules true) runs without autograd, each screenshot encoded once per step
    # (vlm_r1.vision_cache): generation's G copies and the policy pass's G rows reuse it
    assert info["vision_tower"] == {
        "frozen": True,
        "no_grad": True,
        "cache": True,
        "reference": None,
        "reason": None,
        "lockstep": False,
    }
    assert [(h["vision/images_encoded"], h["vision/images_reused"]) for h in history] == [
        (1.0, 2.0 * GENERATIONS - 1)
    ] * STEPS
    # nothing left behind for the next tests (the fixture restores it all the same)
    assert leaks == {}, leaks


def test_global_state_sees_what_a_run_would_leak(global_state, tmp_path):
    """The check above is not vacuous: a variable, a working directory, a root handler, a thread count are seen."""
    os.environ["VLM_R1_LEAK_PROBE"] = "1"
    os.chdir(tmp_path)
    handler = logging.NullHandler()
    logging.getLogger().addHandler(handler)
    torch.set_num_threads(global_state.threads + 1)
    leaks = global_state.changes()
    assert leaks["env"] == {"VLM_R1_LEAK_PROBE": "1"} and leaks["cwd"] == os.getcwd()
    assert leaks["root_handlers"] == [handler] and leaks["torch_threads"] == global_state.threads + 1
    global_state.restore()
    assert global_state.changes() == {}


def test_shared_helper_fixtures(repo, sample, proc):
    from tests.helpers import paths

    assert repo == paths.REPO and sample == paths.SAMPLE and os.path.isdir(sample)
    out = proc.run([sys.executable, "-c", "import os; print(os.environ['HF_HUB_OFFLINE'])"], env=proc.child_env())
    assert out.stdout.strip() == "1"


def test_tiny_train_argv_builder_exact():
    """The tiny-run builder (``tests/helpers/train.py``): ``--config`` first, the defaults in their order with a
    test's value in place, ``None`` drops a flag, a bool is true/false, a tuple gives several values, new keys and
    then ``extra`` last."""
    from tests.helpers.paths import SAMPLE
    from tests.helpers.train import TOY_REWARD, tiny_sft_argv, tiny_train_argv

    argv = tiny_train_argv("M", "D", "O", "--deepspeed", "z.json", config="r.yaml", max_steps=3, seed=None, bf16=False)
    assert argv == [
        *("--config", "r.yaml", "--model_name_or_path", "M", "--data_file_paths", "D", "--output_dir", "O"),
        *("--task_type", "gui_grounding", "--image_folders", SAMPLE, "--reward_funcs", "click", TOY_REWARD),
        *("--max_steps", "3", "--per_device_train_batch_size", "8", "--num_generations", "8"),
        *("--max_completion_length", "8", "--max_pixels", "100352", "--freeze_vision_modules", "true"),
        *("--logging_steps", "1", "--report_to", "none", "--save_strategy", "no", "--bf16", "false"),
        *("--deepspeed", "z.json"),
    ]
    assert tiny_sft_argv("M", "D", "O", learning_rate="1e-3", disable_tqdm=None) == [
        *("--model_name_or_path", "M", "--data_file_paths", "D", "--output_dir", "O", "--task_type", "default"),
        *("--max_steps", "3", "--per_device_train_batch_size", "2", "--logging_steps", "1"),
        *("--save_strategy", "no", "--report_to", "none", "--learning_rate", "1e-3"),
    ]


_FLAG_NAMES = st.from_regex(r"[a-z][a-z_]{0,12}", fullmatch=True)
_FLAG_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 10**6),
    st.text("abc/:.-_019", min_size=1, max_size=8).filter(lambda t: not t.startswith("-")),
    st.lists(st.text("abc019", min_size=1, max_size=4), min_size=1, max_size=3).map(tuple),
)


@settings(max_examples=40, deadline=None)
@given(st.dictionaries(_FLAG_NAMES, _FLAG_VALUES, max_size=8))
def test_flags_round_trip(values):
    """``flags`` over any keywords: read back flag by flag, each flag not None is there once, in the given order,
    with exactly its values (bool -> true/false, tuple -> several values, else ``str``)."""
    from tests.helpers.train import flags

    argv, seen = flags(**values), []
    for arg in argv:
        if arg.startswith("--"):
            seen.append((arg[2:], []))
        else:
            seen[-1][1].append(arg)
    expected = []
    for key, value in values.items():
        if value is None:
            continue
        items = value if isinstance(value, tuple) else (value,)
        expected.append((key, ["true" if v is True else "false" if v is False else str(v) for v in items]))
    assert seen == expected
