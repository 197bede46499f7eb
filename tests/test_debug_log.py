"""Upstream VLM-R1's ``DEBUG_MODE=true`` / ``LOG_PATH`` rollout log (vlm_r1/upstream/debug_log.py, the dialect's rollout log)."""

from __future__ import annotations

import functools
import logging
import re
import sys
from datetime import datetime
from types import SimpleNamespace

import pytest
import torch

from tests.helpers.proc import child_env, run
from tests.helpers.train import colour_question_argv, step_logs
from vlm_r1.upstream import debug_log
from vlm_r1.upstream.debug_log import RolloutDebugLog, RolloutLogWriter, format_log_path, render_rollouts, reward_role
from vlm_r1.upstream.rewards import UPSTREAM_REWARDS as BUILTIN_REWARDS
from vlm_r1.upstream.rewards import accuracy_reward, format_reward

T0 = datetime(2026, 11, 23, 14, 5, 9, 123456)  # -> "23-14-05-09-123456"


def _rows():
    return [
        {
            "prompt": [{"role": "user", "content": "q"}],
            "image_path": ["/d/a.png"],
            "problem": "What colour?",
            "solution": "<answer> red </answer>",
            "accu_reward_method": "default",
            "id": "7",
            "image": object(),
        },
        {
            "image_path": "/d/b.png",
            "instruction": "Click OK",
            "sample_id": "s:2",
            "target_boxes_resized": [[1, 2, 3, 4]],
        },
    ]


def test_render_exact_text_upstream_layout():
    rows = _rows()
    contents = ["<think>x</think> <answer>red</answer>", "(5,6)"]
    rewards = [[1.0, 1.0, 0.5], [0.0, 0.0, 1 / 3]]
    from gui_grounding.training.task import GUIGroundingTask

    main, fmt = render_rollouts(
        rows,
        contents,
        rewards,
        ["accuracy_reward", "format_reward", "click_reward"],
        ["accuracy", "format", None],
        now=lambda: T0,
        columns=GUIGroundingTask.debug_columns,
    )
    # without the task's columns the core shows only its own (upstream's) column names
    bare, _ = render_rollouts(rows[1:], contents[1:], rewards[1:], ["r"], [None], now=lambda: T0)
    assert bare == (
        "------------- 23-14-05-09-123456 r reward: 0.0 -------------\nimage_path: /d/b.png\nContent: (5,6)\n"
    )
    assert main == (
        "------------- 23-14-05-09-123456 Accuracy reward: 1.0 -------------\n"
        "id: 7\n"
        "accu_reward_method: default\n"
        "image_path: ['/d/a.png']\n"
        "problem: What colour?\n"
        "Content: <think>x</think> <answer>red</answer>\n"
        "Solution: <answer> red </answer>\n"
        "------------- 23-14-05-09-123456 Accuracy reward: 0.0 -------------\n"
        "id: s:2\n"
        "image_path: /d/b.png\n"
        "problem: Click OK\n"
        "Content: (5,6)\n"
        "Solution: [[1, 2, 3, 4]]\n"
        "------------- 23-14-05-09-123456 click_reward reward: 0.5 -------------\n"
        "id: 7\n"
        "accu_reward_method: default\n"
        "image_path: ['/d/a.png']\n"
        "problem: What colour?\n"
        "Content: <think>x</think> <answer>red</answer>\n"
        "Solution: <answer> red </answer>\n"
        "------------- 23-14-05-09-123456 click_reward reward: 0.33333334 -------------\n"
        "id: s:2\n"
        "image_path: /d/b.png\n"
        "problem: Click OK\n"
        "Content: (5,6)\n"
        "Solution: [[1, 2, 3, 4]]\n"
    )
    assert fmt == (
        "------------- 23-14-05-09-123456 Format reward -------------\n"
        "Content: <think>x</think> <answer>red</answer>\n"
        "Has format: True\n"
        "Content: (5,6)\n"
        "Has format: False\n"
    )


def test_render_minimal_row_and_no_format_reward():
    main, fmt = render_rollouts([{}], ["hi"], [[float("nan")]], ["r"], [None], now=lambda: T0)
    assert main == "------------- 23-14-05-09-123456 r reward: nan -------------\nContent: hi\n" and fmt == ""
    with pytest.raises(ValueError, match="2 rows, 1 completions"):
        render_rollouts([{}, {}], ["a"], [[1.0]], ["r"], [None])


def test_reward_roles_and_format_path():
    assert reward_role(BUILTIN_REWARDS["accuracy"]) == reward_role(BUILTIN_REWARDS["rec_iou"]) == "accuracy"
    assert reward_role(BUILTIN_REWARDS["format"]) == reward_role(BUILTIN_REWARDS["rec_format"]) == "format"
    assert reward_role(lambda completions, **kw: [0.0]) is None

    @functools.wraps(format_reward)  # as the step-timing callback wraps every reward during training
    def timed(*args, **kwargs):
        return format_reward(*args, **kwargs)

    assert reward_role(timed) == "format"
    assert reward_role(functools.partial(accuracy_reward, accu_reward_method=None)) == "accuracy"
    assert format_log_path("./debug_log_run.txt") == "./debug_log_run_format.txt"  # upstream's str.replace
    assert debug_log.debug_enabled({"DEBUG_MODE": "true"}) and not debug_log.debug_enabled({"DEBUG_MODE": "True"})


def test_writer_files_unset_path_and_oserror(tmp_path, monkeypatch, caplog):
    log = RolloutDebugLog()
    path = tmp_path / "sub" / "debug_log.txt"
    log.write("A\n", "F\n", str(path))
    log.write("B\n", "", str(path))
    assert path.read_text(encoding="utf-8") == "A\nB\n"
    assert (tmp_path / "sub" / "debug_log_format.txt").read_text(encoding="utf-8") == "F\n"
    log.write("é ✓\n", "", str(path))  # explicit utf-8, whatever the locale
    assert path.read_bytes().endswith("é ✓\n".encode())

    monkeypatch.delenv("LOG_PATH", raising=False)
    with caplog.at_level(logging.INFO, logger="vlm_r1.upstream.debug_log"):
        log.write("X block\n", "Y block\n")
    assert "LOG_PATH is not set" in caplog.text and "X block" in caplog.text and "Y block" in caplog.text

    caplog.clear()
    bad = tmp_path / "is_a_dir.txt"
    bad.mkdir()
    with caplog.at_level(logging.WARNING, logger="vlm_r1.upstream.debug_log"):
        log.write("Z\n", "", str(bad))
        log.write("Z\n", "", str(bad))
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "cannot write" in warnings[0].getMessage()


def test_trainer_hook_logs_the_process_slice(tmp_path, monkeypatch):
    """Rank 1 of 2: the gathered rewards hold rank 0's rows first; the hook must log rows 2-3, not 0-1."""
    from vlm_r1.trainer import VLMGRPOTrainer

    writer = RolloutLogWriter()
    fake = SimpleNamespace(
        accelerator=SimpleNamespace(process_index=1),
        reward_funcs=[accuracy_reward, format_reward],
        reward_func_names=["accuracy_reward", "format_reward"],
        rollout_log=writer,
    )
    gathered = torch.tensor([[9.0, 9.0], [8.0, 8.0], [1.0, 0.0], [0.0, 1.0]])
    inputs = [{"id": "a", "solution": "s"}, {"id": "b", "solution": "s"}]
    completions = [[{"role": "assistant", "content": "one"}], [{"role": "assistant", "content": "two"}]]
    monkeypatch.setenv("LOG_PATH", str(tmp_path / "log.txt"))
    VLMGRPOTrainer._log_rollouts(fake, inputs, completions, gathered)
    text = (tmp_path / "log.txt").read_text(encoding="utf-8")
    assert re.findall(r"Accuracy reward: (\S+) -+\nid: (\w)\nContent: (\w+)\n", text) == [
        ("1.0", "a", "one"),
        ("0.0", "b", "two"),
    ]
    fmt = (tmp_path / "log_format.txt").read_text(encoding="utf-8")
    assert fmt.endswith("Content: one\nHas format: False\nContent: two\nHas format: True\n")
    # a failure inside the writer never propagates
    VLMGRPOTrainer._log_rollouts(fake, inputs, completions[:1], gathered)
    assert writer._failed
    monkeypatch.setenv("DEBUG_MODE", "true")
    assert writer.active()
    monkeypatch.setenv("DEBUG_MODE", "True")
    assert not writer.active()  # exactly "true", as upstream


# --------------------------------------------------------------------------------------------------------------------
# end to end: DEBUG_MODE=true LOG_PATH=... python -m vlm_r1.grpo_jsonl (default task: accuracy, format and a plug-in
# reward whose value differs per rollout, so a misaligned slice or a swapped value shows)

_INFO = r"id: (.*)\naccu_reward_method: (.*)\nimage_path: (.*)\nproblem: (.*)\nContent: (.*?)\nSolution: (.*)\n"
_HEADER = r"------------- \d{2}-\d{2}-\d{2}-\d{2}-\d{6} (\S+) reward: (\S+) -------------\n"
_BLOCK = re.compile(_HEADER + _INFO, re.DOTALL)

LENGTH_REWARD = """
from vlm_r1.upstream.rewards import completion_text

def length_reward(completions, **kwargs):
    return [len(completion_text(c)) / 7 for c in completions]
"""


def _read(path) -> str:
    with open(path, encoding="utf-8", newline="") as f:  # keep a "\r" a random model may emit
        return f.read()


def _split_blocks(text: str, header: str) -> list[str]:
    starts = [m.start() for m in re.finditer(rf"^------------- \S+ {header}", text, re.MULTILINE)]
    assert starts, text[:2000]
    return [text[a:b] for a, b in zip(starts, starts[1:] + [len(text)], strict=True)]


@pytest.mark.slow  # ~11 s, a CLI training run; the log writer itself is tested above in process
def test_grpo_cli_debug_mode_writes_upstream_log(tmp_path, make_image, tiny_qwen25_dir):
    import numpy as np

    (tmp_path / "dbg_rewards.py").write_text(LENGTH_REWARD)
    out, log_path = tmp_path / "run", tmp_path / "logs" / "debug_log.txt"
    rewards = ("accuracy", "format", "dbg_rewards:length_reward")
    argv = colour_question_argv(tiny_qwen25_dir, tmp_path, make_image, out, 11, reward_funcs=rewards)
    cmd = [sys.executable, "-m", "vlm_r1.grpo_jsonl", *argv]
    env = child_env(threads=1, pythonpath=[tmp_path], DEBUG_MODE="true", LOG_PATH=log_path)
    run(cmd, env=env)

    blocks = _split_blocks(_read(log_path), "")
    parsed = [_BLOCK.fullmatch(b) for b in blocks]
    assert all(parsed), blocks
    # per reward (in --reward_funcs order) one block per rollout of the per-device batch; format is not in this file
    assert [m.group(1) for m in parsed] == ["Accuracy"] * 4 + ["length_reward"] * 4
    image = str(tmp_path / "img" / "a.png")
    for m in parsed:
        assert m.group(3, 4, 5, 6, 8) == ("11", "default", str([image]), "What colour is it?", "<answer> red </answer>")
    contents = [m.group(7) for m in parsed[:4]]
    assert [m.group(7) for m in parsed[4:]] == contents  # the same rollouts, in the same order, for every reward
    accuracy = [np.float32(m.group(2)) for m in parsed[:4]]
    expected = accuracy_reward(contents, ["<answer> red </answer>"] * 4, ["default"] * 4)
    assert accuracy == [
        float(np.float32(v)) for v in expected
    ]  # float32 as TRL keeps rewards (partial credit shows it)
    length = [np.float32(m.group(2)) for m in parsed[4:]]
    assert length == [np.float32(len(c) / 7) for c in contents]  # each rollout's own value, float32 as TRL keeps it

    fmt_blocks = _split_blocks(_read(tmp_path / "logs" / "debug_log_format.txt"), "Format reward")
    assert len(fmt_blocks) == 1  # one block per scoring call, as upstream
    pairs = re.findall(r"Content: (.*?)\nHas format: (True|False)\n", fmt_blocks[0].split("\n", 1)[1], re.DOTALL)
    assert [c for c, _ in pairs] == contents
    assert [h == "True" for _, h in pairs] == [v == 1.0 for v in format_reward(contents)]

    step = step_logs(out)[0]
    assert step["rewards/accuracy_reward/mean"] == pytest.approx(sum(accuracy) / 4)
    assert step["rewards/length_reward/mean"] == pytest.approx(float(np.mean(length)), rel=1e-6)
    assert step["rewards/format_reward/mean"] == pytest.approx(sum(h == "True" for _, h in pairs) / 4)
