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
``click_accuracy``             alias of ``rewards/click_reward/mean`` when a reward named ``click_reward`` exists
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
"""

from __future__ import annotations

import functools
import logging
import time
from typing import Any

from transformers import TrainerCallback

logger = logging.getLogger(__name__)

CLICK_REWARD_KEY = "rewards/click_reward/mean"
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
    """Per-step timing split (generation / reward / training), tokens per second and a ``click_accuracy`` alias.

    Args:
        trainer: the ``trl.GRPOTrainer`` (or subclass) this callback is added to. May also be set later as
            ``callback.trainer = trainer`` (the pattern of the task's evaluation callbacks), before ``train()``.
    """

    def __init__(self, trainer: Any = None):
        self.trainer = trainer
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
        if CLICK_REWARD_KEY in train:  # same entries as TRL's key, so TRL's averaging gives the same number
            train["click_accuracy"] = list(train[CLICK_REWARD_KEY])
        return control
