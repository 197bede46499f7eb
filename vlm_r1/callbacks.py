"""Training-log callbacks: per-step statistics a researcher reads next to TRL's own GRPO metrics.

:class:`StepStatsCallback` adds, to every training log (``trainer_state.json`` ``log_history``, the console and every
``--report_to`` backend):

=============================  =====================================================================================
key                            meaning
=============================  =====================================================================================
``timing/step_s``              wall time of the optimisation step (``on_step_begin`` -> ``on_step_end``, this rank)
``timing/generation_s``        rollout: from the start of each micro-step to its first gradient-enabled forward of the
                               policy, minus the reward time (generation, decoding, old log-probs, advantages, data)
``timing/reward_s``            time spent inside the reward functions
``timing/training_s``          the rest: forward/backward of the loss, optimiser step, gradient sync
``throughput/tokens_per_s``    prompt + completion tokens of the step (all ranks, TRL's ``num_input_tokens_seen``)
                               per second of ``timing/step_s``
(task aliases)                 each ``alias: key`` of the task's ``metric_aliases`` (``vlm_r1.tasks.Task``), when
                               ``key`` is logged: the same values under a name researchers know
=============================  =====================================================================================

``generation + reward + training == step`` for each step (up to rounding); with ``--logging_steps N`` every key is
the mean over the N steps. Already logged by TRL and deliberately not recomputed: ``reward`` and ``reward_std``
(reward mean/std), ``frac_reward_zero_std`` (fraction of groups with zero reward variance),
``completions/mean_length`` (completion length), ``step_time`` (TRL's sum of ``training_step`` calls). With
``--dynamic_sampling`` the trainer itself adds ``dynamic_sampling/*`` (``vlm_r1.trainer``), TRL's reward metrics then
average over every generation try, and ``timing/generation_s`` / ``timing/reward_s`` include all tries (they run before
the first gradient forward of the step).

How it measures, without touching TRL's code: TRL 1.16 times ``_generate`` and every reward function with
``trl.extras.profiling.profiling_context``, but sends those timings only to wandb/MLflow/Trackio, never into the
metrics dict or ``log_history``. So this callback measures the same boundaries itself through public hooks:

* a forward pre-hook (``nn.Module.register_forward_pre_hook``) on the policy model: TRL generates and computes old
  log-probs under ``torch.no_grad()``, so the first forward with gradients enabled after a micro-step starts is where
  the loss computation begins; everything before it in the micro-step is the rollout;
* the reward functions passed to the trainer are wrapped in a timing wrapper (same ``__name__``; TRL already read the
  names at construction). ``nn.Module`` reward models and async reward functions are left unwrapped: their time
  counts as generation.

Values are handed to TRL's per-mode metrics store (``trainer._metrics["train"]``) at ``on_step_end``, which TRL
averages and writes into the logs in ``GRPOTrainer.log`` before ``Trainer.log`` stores and reports them; that is the
only place keys can join ``log_history`` from a callback (``on_log`` runs after ``log_history`` was appended and after
the reporting callbacks registered before it). Timings are measured on each rank; the logs show rank 0's.

Register after building the trainer (the trainer reference is needed for the reward functions and metrics store)::

    trainer.add_callback(StepStatsCallback(trainer))

:class:`RankPerfCallback` (:class:`vlm_r1.perf.RankPerf`) adds each rank's own figures at every log, gathered from
all ranks: ``perf/rank{r}/tokens_per_s``, ``perf/rank{r}/peak_mem_gib`` (GPU: also ``perf/rank{r}/peak_mem_reserved_gib``),
``perf/tokens_per_s`` (the sum) and ``perf/peak_mem_gib_max``; ``vlm_r1.perf`` says which tokens count and how memory
is read.
"""

from __future__ import annotations

import functools
import logging
import time
from typing import Any

from transformers import TrainerCallback

from groundwork.outputs import LineAppender
from vlm_r1.perf import RankPerf

logger = logging.getLogger(__name__)

STEP_STATS_KEYS = (
    "timing/step_s",
    "timing/generation_s",
    "timing/reward_s",
    "timing/training_s",
    "throughput/tokens_per_s",
)


def _is_plain_sync_callable(func: Any) -> bool:
    import torch.nn as nn

    if isinstance(func, nn.Module):
        return False
    try:
        from trl.trainer.utils import is_async_callable
    except ImportError:  # older TRL: only coroutine functions can be async
        import inspect

        return not inspect.iscoroutinefunction(func)
    return not is_async_callable(func)


class StepStatsCallback(TrainerCallback):
    """Per-step timing split (generation / reward / training), tokens per second and the task's metric aliases.

    Args:
        trainer: the ``trl.GRPOTrainer`` (or subclass) this callback is added to. May also be set later as
            ``callback.trainer = trainer`` (the pattern of the task's evaluation callbacks), before ``train()``.
        aliases: ``{alias: metric key}`` (the task's ``metric_aliases``): each step where ``key`` is in TRL's
            metrics store, ``alias`` gets the same values (so TRL's averaging gives the same number).
    """

    def __init__(self, trainer: Any = None, aliases: dict[str, str] | None = None):
        self.trainer = trainer
        self.aliases = dict(aliases or {})
        self._hook = None
        self._original_reward_funcs: list | None = None
        self._in_step = False
        self._mark: float | None = None  # start of the current micro-step, until its first gradient forward
        self._reset_step()

    # ---- per-step accumulators -------------------------------------------------------------------------------
    def _reset_step(self) -> None:
        self._step_start = 0.0
        self._rollout = 0.0
        self._reward = 0.0
        self._tokens_start = 0

    def _on_forward(self, module, args, kwargs=None):
        import torch

        if self._in_step and self._mark is not None and torch.is_grad_enabled():
            self._rollout += time.perf_counter() - self._mark
            self._mark = None

    def _timed(self, func):
        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            if not self._in_step:
                return func(*args, **kwargs)
            start = time.perf_counter()
            try:
                return func(*args, **kwargs)
            finally:
                self._reward += time.perf_counter() - start

        wrapper.__step_stats_original__ = func
        return wrapper

    # ---- TrainerCallback events ------------------------------------------------------------------------------
    def on_train_begin(self, args, state, control, model=None, **kwargs):
        trainer = self.trainer
        if trainer is None:
            raise ValueError("StepStatsCallback needs the trainer: trainer.add_callback(StepStatsCallback(trainer))")
        policy = getattr(trainer, "model", None) or model
        self._hook = policy.register_forward_pre_hook(self._on_forward)
        funcs = getattr(trainer, "reward_funcs", None)
        if funcs is not None and self._original_reward_funcs is None:
            self._original_reward_funcs = list(funcs)
            trainer.reward_funcs = [self._timed(f) if _is_plain_sync_callable(f) else f for f in funcs]
        return control

    def on_train_end(self, args, state, control, **kwargs):
        if self._hook is not None:
            self._hook.remove()
            self._hook = None
        if self._original_reward_funcs is not None and self.trainer is not None:
            self.trainer.reward_funcs = self._original_reward_funcs
            self._original_reward_funcs = None
        self._in_step = False
        return control

    def on_step_begin(self, args, state, control, **kwargs):
        self._reset_step()
        self._tokens_start = state.num_input_tokens_seen
        self._step_start = self._mark = time.perf_counter()
        self._in_step = True
        return control

    def on_substep_end(self, args, state, control, **kwargs):
        self._mark = time.perf_counter()  # the next micro-step (gradient accumulation) starts now
        return control

    def on_step_end(self, args, state, control, **kwargs):
        if not self._in_step:
            return control
        self._in_step = False
        self._mark = None
        step = time.perf_counter() - self._step_start
        reward = min(self._reward, step)
        rollout = min(max(self._rollout, reward), step)  # rewards run inside the rollout
        tokens = state.num_input_tokens_seen - self._tokens_start
        stats = {
            "timing/step_s": step,
            "timing/generation_s": rollout - reward,
            "timing/reward_s": reward,
            "timing/training_s": step - rollout,
            "throughput/tokens_per_s": tokens / step if step > 0 else 0.0,
        }
        metrics = getattr(self.trainer, "_metrics", None)
        if metrics is None:  # not a GRPOTrainer: nothing to hand the values to
            return control
        train = metrics["train"]
        for key, value in stats.items():
            train[key].append(float(value))
        for alias, key in self.aliases.items():
            if key in train:  # same entries as TRL's key, so TRL's averaging gives the same number
                train[alias] = list(train[key])
        return control


# ---- per-rank throughput and peak memory (issue 22) -------------------------------------------------------------------
class RankPerfCallback(RankPerf, TrainerCallback):
    """:class:`vlm_r1.perf.RankPerf` as a ``TrainerCallback``: per-rank ``perf/rank{r}/tokens_per_s`` and
    ``perf/rank{r}/peak_mem_gib`` at every log, gathered from every rank (keys, units and which tokens count: its
    docstring). ``trainer.add_callback(RankPerfCallback(trainer))``."""


# ---- the console: one compact line per log (issue 13) ----------------------------------------------------------------
LOGS_JSONL = "logs.jsonl"

# (label, key, format) of the compact training line, in order; a key absent from the logs is left out. The task's
# ``console_metrics`` go between the reward fields and the rest.
_COMPACT_HEAD = (
    ("loss", "loss", "{:.4g}"),
    ("reward", "reward", "{:.4g}"),
    ("reward_std", "reward_std", "{:.4g}"),
)
_COMPACT_FIELDS = (
    ("kl", "kl", "{:.4g}"),
    ("grad_norm", "grad_norm", "{:.4g}"),
    ("len", "completions/mean_length", "{:.4g}"),
    ("token_acc", "mean_token_accuracy", "{:.4g}"),  # SFT
    ("lr", "learning_rate", "{:.3g}"),
)


def compact_log_line(logs: dict, step: int, max_steps: int, task_fields: tuple = ()) -> str:
    """One line for a log dict of a training step: ``[train] step 5/20 | loss 0.0123 | reward 0.25 | ...``.

    Training logs (with ``loss``): loss, reward, reward_std, then ``task_fields`` (the task's ``console_metrics``,
    ``(label, key, format)``), then kl, grad_norm, completion length, token accuracy (SFT) and learning rate, each
    when present; then ``shared x7.59`` (naive / shared
    LLM tokens, ``shared_prompt/*``, when prompts were shared) and the step time (``timing/step_s`` of :class:`StepStatsCallback`,
    else TRL's ``step_time``). Evaluation logs: ``[eval]`` and their ``eval_*`` scalars; the end-of-training summary:
    ``[done]`` with runtime and ``train_loss``. Numbers use 4 significant digits unless a field's format says
    otherwise.
    """
    head = f"step {step}/{max_steps}" if max_steps and max_steps > 0 else f"step {step}"
    if "loss" in logs:
        parts = [f"[train] {head}"]
        for label, key, fmt in (*_COMPACT_HEAD, *task_fields, *_COMPACT_FIELDS):
            value = logs.get(key)
            if isinstance(value, (int, float)):
                parts.append(f"{label} {fmt.format(value)}")
        naive, shared = logs.get("shared_prompt/naive_llm_tokens"), logs.get("shared_prompt/llm_tokens")
        # only where prompts were shared: a naive run logs equal counts, and "x1" would read as a shared run
        if isinstance(naive, (int, float)) and isinstance(shared, (int, float)) and 0 < shared < naive:
            parts.append(f"shared x{naive / shared:.3g}")
        step_s = logs.get("timing/step_s", logs.get("step_time"))
        if isinstance(step_s, (int, float)):
            parts.append(f"{step_s:.3g} s/step")
        return " | ".join(parts)
    if "train_runtime" in logs:
        parts = [f"[done] {head}", f"{logs['train_runtime']:.4g} s"]
        if isinstance(logs.get("train_loss"), (int, float)):
            parts.append(f"train_loss {logs['train_loss']:.4g}")
        return " | ".join(parts)
    kind = "[eval]" if any(k.startswith("eval_") for k in logs) else "[log]"
    scalars = [
        f"{k.removeprefix('eval_')} {v:.4g}"
        for k, v in logs.items()
        if isinstance(v, (int, float))
        and not isinstance(v, bool)
        and k not in ("epoch", "total_flos")
        and not k.endswith(("_runtime", "_per_second"))
    ]
    return " | ".join([f"{kind} {head}", *scalars])


class _CompactLog:
    """What both console callbacks do on ``on_log`` (main process only): append the full dict to
    ``output_dir/logs.jsonl``, log it at DEBUG level, and return the compact line to show."""

    task_fields: tuple = ()

    def _record(self, args, state, logs: dict) -> str | None:
        import json
        import os

        if not state.is_world_process_zero or not logs:
            return None
        full = {"step": state.global_step, **{k: v for k, v in logs.items() if k != "total_flos"}}
        logger.debug("logs: %s", full)
        if args.output_dir:
            os.makedirs(args.output_dir, exist_ok=True)
            with LineAppender(os.path.join(args.output_dir, LOGS_JSONL)) as log:  # whole lines, flushed, locked
                log.write(json.dumps(full, default=str))
        return compact_log_line(logs, state.global_step, state.max_steps, self.task_fields)


def _progress_callback_class():
    from transformers.trainer_callback import ProgressCallback

    class CompactProgressCallback(_CompactLog, ProgressCallback):
        """transformers' progress bar with one compact line per log instead of the full dict
        (``ProgressCallback.on_log`` writes ``str(logs)``, transformers 5.23 ``trainer_callback.py:673-690``)."""

        def on_log(self, args, state, control, logs=None, **kwargs):
            line = self._record(args, state, logs or {})
            if line is not None:
                if self.training_bar is not None:
                    self.training_bar.write(line)
                else:
                    print(line, flush=True)

    return CompactProgressCallback


class CompactPrinterCallback(_CompactLog, TrainerCallback):
    """``--disable_tqdm true``: one compact line per log instead of the full dict (transformers' ``PrinterCallback``,
    ``trainer_callback.py:698-708``, prints ``logs``)."""

    def on_log(self, args, state, control, logs=None, **kwargs):
        line = self._record(args, state, logs or {})
        if line is not None:
            print(line, flush=True)


def use_compact_console(trainer: Any, task_fields: tuple = ()) -> TrainerCallback:
    """Replace the trainer's console printer (transformers' ``ProgressCallback``, or ``PrinterCallback`` with
    ``--disable_tqdm``; added in ``Trainer.__init__``, ``trainer.py:599``) by its compact counterpart; returns it.

    The console gets one line per log (:func:`compact_log_line`, with the task's ``console_metrics`` as
    ``task_fields``); the full dict still goes to ``log_history``
    (``trainer_state.json``), every ``--report_to`` backend, ``output_dir/logs.jsonl`` (one JSON object per log, with
    its ``step``) and the ``vlm_r1.callbacks`` logger at DEBUG level.
    """
    from transformers.trainer_callback import PrinterCallback, ProgressCallback

    if trainer.args.disable_tqdm:
        trainer.remove_callback(PrinterCallback)
        callback = CompactPrinterCallback()
    else:
        trainer.remove_callback(ProgressCallback)
        callback = _progress_callback_class()()
    callback.task_fields = tuple(task_fields)
    trainer.add_callback(callback)
    return callback
