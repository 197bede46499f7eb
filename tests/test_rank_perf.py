"""RankPerfCallback (``vlm_r1.perf.RankPerf``, issue 22): per-rank tokens/s and peak memory at every log, gathered
from every rank.

* ``test_window_figures_with_a_fake_trainer``: the figures of one window from a fake trainer and a fake clock (which
  tokens count, the division, eval generations left out, the metrics store, unwrapping at the end);
* ``test_falls_back_to_num_input_tokens_seen``: a trainer without ``_generate``;
* ``test_two_gloo_ranks_gathered``: 2 processes (gloo): every rank gets both ranks' values;
* ``test_grpo_cli_logs_perf_keys`` (slow): a 2-step tiny GRPO CLI run on 2 torchrun ranks writes both ranks' keys,
  finite and positive, to ``logs.jsonl`` and TensorBoard.

The fast tests use ``vlm_r1.perf.RankPerf`` (the callback's logic without transformers, so the spawned ranks start in
about 2 s).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from collections import defaultdict
from types import SimpleNamespace

import pytest

from tests.helpers.gloo import gloo_ranks
from tests.helpers.paths import REPO, SAMPLE
from vlm_r1.perf import PERF_MAX_MEM_KEY, PERF_TOTAL_KEY, RankPerf, perf_keys


class FakeTrainer:
    """What RankPerfCallback reads of a GRPOTrainer: ``_generate`` (TRL 1.16's output tuple), ``model.training``,
    ``_metrics["train"]``."""

    def __init__(self, prompt_len=5, completion_len=3):
        self._metrics = {"train": defaultdict(list)}
        self.model = SimpleNamespace(training=True)
        self.prompt_len, self.completion_len = prompt_len, completion_len

    def _generate(self, prompts):
        prompt_ids = [[1] * self.prompt_len for _ in prompts]
        completion_ids = [[2] * self.completion_len for _ in prompts]
        return prompt_ids, completion_ids, None, ["x"] * len(prompts), None, {}, None, None


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def _events(cb, trainer, clock, steps):
    """on_train_begin, then per step ``(seconds, n prompts generated, should_log)``."""
    state = SimpleNamespace(global_step=0, num_input_tokens_seen=0)
    control = SimpleNamespace(should_log=False)
    cb.on_train_begin(None, state, control)
    for seconds, prompts, should_log in steps:
        trainer._generate(["p"] * prompts)
        clock.now += seconds
        state.global_step += 1
        control.should_log = should_log
        cb.on_step_end(None, state, control)
    return state, control


def test_window_figures_with_a_fake_trainer():
    trainer, clock = FakeTrainer(prompt_len=5, completion_len=3), Clock()
    cb = RankPerf(trainer, clock=clock)
    tps, mem, reserved = perf_keys(0)
    # two steps in the first log window: 4 + 2 rows of 5 prompt + 3 completion tokens over 2 + 2 s
    state, control = _events(cb, trainer, clock, [(2.0, 4, False), (2.0, 2, True)])
    assert cb.last_ranks[0]["tokens"] == 6 * 8 and cb.last_ranks[0]["seconds"] == 4.0
    assert cb.last[tps] == pytest.approx(48 / 4.0)
    assert cb.last[PERF_TOTAL_KEY] == cb.last[tps]
    assert cb.last[mem] > 0 and math.isfinite(cb.last[mem]) and cb.last[PERF_MAX_MEM_KEY] == cb.last[mem]
    assert reserved not in cb.last  # CPU: resident set size only
    # handed to TRL's store as one entry each (TRL's mean over the window is the value itself)
    assert trainer._metrics["train"][tps] == [cb.last[tps]]

    # eval-mode generations do not count; a new window starts after each log
    trainer.model.training = False
    trainer._generate(["p"] * 10)
    trainer.model.training = True
    trainer._generate(["p"])
    clock.now += 0.5
    state.global_step += 1
    control.should_log = True
    cb.on_step_end(None, state, control)
    assert cb.last_ranks[0]["tokens"] == 8 and cb.last[tps] == pytest.approx(16.0)
    # the epoch's end right after a logged step publishes nothing new
    cb.on_epoch_end(None, state, control)
    assert cb.last_ranks[0]["seconds"] == 0.5

    cb.on_train_end(None, state, control)
    assert "_generate" not in vars(trainer)  # the class's own method again


def test_callback_is_the_trainer_callback_of_rank_perf():
    from transformers import TrainerCallback

    from vlm_r1.callbacks import RankPerfCallback

    assert issubclass(RankPerfCallback, TrainerCallback) and issubclass(RankPerfCallback, RankPerf)
    assert RankPerfCallback.on_step_end is RankPerf.on_step_end  # not TrainerCallback's no-op


def test_falls_back_to_num_input_tokens_seen():
    trainer, clock = SimpleNamespace(_metrics={"train": defaultdict(list)}), Clock()
    cb = RankPerf(trainer, clock=clock)
    state = SimpleNamespace(global_step=0, num_input_tokens_seen=1000)
    control = SimpleNamespace(should_log=False)
    cb.on_train_begin(None, state, control)
    state.num_input_tokens_seen, state.global_step, control.should_log = 1300, 1, True
    clock.now += 3.0
    cb.on_step_end(None, state, control)
    assert cb.last[perf_keys(0)[0]] == pytest.approx(100.0)


def _rank_body(rank: int) -> tuple:
    """On each of 2 gloo ranks: the callback's gathered logs and the trainer's metrics after one logged step."""
    trainer, clock = FakeTrainer(prompt_len=10 * (rank + 1), completion_len=2), Clock()
    cb = RankPerf(trainer, clock=clock)
    _events(cb, trainer, clock, [(2.0, 4, True)])  # rank 0: 4 x 12 tokens, rank 1: 4 x 22 tokens, in 2 s
    return cb.last, dict(trainer._metrics["train"])


def test_two_gloo_ranks_gathered(tmp_path):
    results, exit_codes = gloo_ranks(_rank_body, tmp_path)
    assert exit_codes == [0, 0]
    logs0, metrics0 = results[0]
    assert logs0 == results[1][0]  # every rank has every rank's values
    assert logs0[perf_keys(0)[0]] == pytest.approx(4 * 12 / 2.0)
    assert logs0[perf_keys(1)[0]] == pytest.approx(4 * 22 / 2.0)
    assert logs0[PERF_TOTAL_KEY] == pytest.approx(24.0 + 44.0)
    for rank in (0, 1):
        assert logs0[perf_keys(rank)[1]] > 0  # each process's own resident set
    assert metrics0[perf_keys(1)[0]] == [logs0[perf_keys(1)[0]]]


@pytest.mark.slow
def test_grpo_cli_logs_perf_keys(tiny_qwen25_dir, tmp_path):
    """``torchrun --nproc_per_node 2 -m vlm_r1.grpo_jsonl`` (gloo): the preflight passes first (auto with 2 ranks),
    then 2 logged steps where both ranks' perf keys are finite and positive in logs.jsonl and in the TensorBoard
    events; tokens were counted from TRL's ``_generate`` output (no fallback)."""
    data = tmp_path / "train.jsonl"
    with open(os.path.join(SAMPLE, "train.jsonl"), encoding="utf-8") as f:
        data.write_text("".join([line for line in f if line.strip()][:2]))
    out = tmp_path / "run"
    cmd = [
        *(sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"),
        *("-m", "vlm_r1.grpo_jsonl", "--config", os.path.join(REPO, "recipes", "gta1", "tiny_cpu.yaml")),
        *("--model_name_or_path", tiny_qwen25_dir, "--data_file_paths", str(data), "--image_folders", SAMPLE),
        *("--output_dir", str(out), "--max_steps", "2", "--per_device_train_batch_size", "8"),
        *("--max_completion_length", "4", "--logging_steps", "1", "--report_to", "tensorboard"),
        *("--save_strategy", "no", "--resume_from_checkpoint", "false", "--disable_tqdm", "true"),
    ]
    env = dict(os.environ, TOKENIZERS_PARALLELISM="false", PYTHONPATH=REPO, OMP_NUM_THREADS="1")
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "preflight passed: world size 2, backend gloo" in proc.stderr, proc.stderr[-4000:]
    assert "unexpected _generate output" not in proc.stderr
    with open(out / "logs.jsonl") as f:
        train = [r for r in map(json.loads, f) if "loss" in r]
    assert [r["step"] for r in train] == [1, 2]
    keys = [*perf_keys(0)[:2], *perf_keys(1)[:2], PERF_TOTAL_KEY, PERF_MAX_MEM_KEY]
    for record in train:
        for key in keys:
            assert math.isfinite(record[key]) and record[key] > 0, (key, record)
        rates = record[perf_keys(0)[0]] + record[perf_keys(1)[0]]
        assert record[PERF_TOTAL_KEY] == pytest.approx(rates)
        assert "perf/rank2/tokens_per_s" not in record
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    runs = [os.path.join(d, f) for d, _, files in os.walk(out) for f in files if f.startswith("events.out")]
    assert runs, "no TensorBoard event file"
    tags = set()
    for path in runs:
        acc = EventAccumulator(path)
        acc.Reload()
        tags |= set(acc.Tags()["scalars"])
    for key in keys:
        assert f"train/{key}" in tags, (key, sorted(tags))
