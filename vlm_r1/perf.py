"""Per-rank throughput and peak memory of a training run, gathered from every rank to the logs (issue 22).

:class:`RankPerf` (as ``vlm_r1.callbacks.RankPerfCallback``) logs, at every logging step, each rank's tokens per
second and peak memory (``perf/rank{r}/tokens_per_s``, ``perf/rank{r}/peak_mem_gib``, ...); :func:`peak_memory` reads
one process's peak memory (CUDA allocator peaks or the peak resident set size), :func:`gather_to_all` is
``all_gather_object`` that also works in a single process. Imports torch only (no transformers).
"""

from __future__ import annotations

import functools
import logging
import time
from typing import Any

logger = logging.getLogger(__name__)

PERF_TOTAL_KEY = "perf/tokens_per_s"
PERF_MAX_MEM_KEY = "perf/peak_mem_gib_max"
_GIB = float(2**30)


def perf_keys(rank: int) -> tuple[str, str, str]:
    """``(tokens_per_s, peak_mem_gib, peak_mem_reserved_gib)`` keys of ``rank`` (:class:`RankPerf`)."""
    return (f"perf/rank{rank}/tokens_per_s", f"perf/rank{rank}/peak_mem_gib", f"perf/rank{rank}/peak_mem_reserved_gib")


def peak_memory(device: Any = None, reset: bool = False) -> dict[str, float]:
    """This process's peak memory in GiB (2**30 bytes).

    * CUDA ``device``: ``{"peak_mem_gib": torch.cuda.max_memory_allocated, "peak_mem_reserved_gib":
      torch.cuda.max_memory_reserved}`` (tensors allocated / memory held by the caching allocator), peaks since the
      last :func:`torch.cuda.reset_peak_memory_stats`; ``reset=True`` resets them after reading.
    * otherwise (CPU): ``{"peak_mem_gib": peak resident set size}`` from ``resource.getrusage(RUSAGE_SELF).ru_maxrss``
      (KiB on Linux, bytes on macOS). This is a high-water mark since the process started: the kernel cannot reset
      it, so ``reset`` has no effect and the value never goes down. ``{}`` where ``resource`` does not exist
      (Windows).
    """
    import torch

    if device is not None and torch.device(device).type == "cuda":
        out = {
            "peak_mem_gib": torch.cuda.max_memory_allocated(device) / _GIB,
            "peak_mem_reserved_gib": torch.cuda.max_memory_reserved(device) / _GIB,
        }
        if reset:
            torch.cuda.reset_peak_memory_stats(device)
        return out
    try:
        import resource
    except ImportError:
        return {}
    import sys

    maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"peak_mem_gib": maxrss / (_GIB if sys.platform == "darwin" else 2**20)}


def gather_to_all(obj: Any) -> list:
    """``[rank 0's obj, rank 1's obj, ...]``: ``torch.distributed.all_gather_object`` when a process group is
    initialised (a collective: every rank must call it at the same point), ``[obj]`` in a single process."""
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return [obj]
    out: list = [None] * dist.get_world_size()
    dist.all_gather_object(out, obj)
    return out


class RankPerf:
    """Per-rank tokens per second and peak memory, gathered to every log (``logs.jsonl``, ``trainer_state.json``,
    TensorBoard and every other ``--report_to`` backend).

    At each logging step (``control.should_log`` after the step, or at the end of an epoch with
    ``--logging_strategy epoch``) every rank measures its own figures over the window since the previous log, the
    ranks exchange them with :func:`gather_to_all` (``torch.distributed.all_gather_object``; a collective, so every
    rank runs it at the same step) and the logs get, for each rank ``r``:

    =====================================  ==============================================================================
    key                                    meaning
    =====================================  ==============================================================================
    ``perf/rank{r}/tokens_per_s``          tokens rank ``r`` processed in the window / wall seconds of the window (see
                                           below which tokens count)
    ``perf/rank{r}/peak_mem_gib``          GPU: ``torch.cuda.max_memory_allocated`` in GiB, peak of the window (reset
                                           after each log). CPU: peak resident set size of the process
                                           (``ru_maxrss``) in GiB, a high-water mark since the process started
    ``perf/rank{r}/peak_mem_reserved_gib`` GPU only: ``torch.cuda.max_memory_reserved`` in GiB (what the caching
                                           allocator held), peak of the window
    ``perf/tokens_per_s``                  the sum of every rank's ``tokens_per_s`` (the job's throughput)
    ``perf/peak_mem_gib_max``              the largest ``peak_mem_gib`` of all ranks
    =====================================  ==============================================================================

    Tokens that count: those TRL adds to ``state.num_input_tokens_seen`` (``GRPOTrainer._generate``, TRL 1.16
    ``grpo_trainer.py:2274-2292``), restricted to this rank: for every completion row this rank generated in training
    mode, the prompt's tokens (without padding; image placeholder tokens included) plus the completion's tokens (up to
    and including EOS; with tool calls only model-generated ones). Generation retries of ``--dynamic_sampling`` count,
    held-out evaluation does not. So the ranks' tokens add up to TRL's ``num_input_tokens_seen`` increase, and one token
    of a completion row counts once although it is processed several times (generation, old/reference log-probs,
    the training forward and backward). They are counted by wrapping the trainer's ``_generate`` (an instance
    attribute, removed at the end of training); a trainer without ``_generate`` falls back to the increase of
    ``state.num_input_tokens_seen`` divided by the world size.

    Wall seconds: ``time.perf_counter`` from the previous log (or the start of training) to this one, so they include
    everything the rank did in between: generation, rewards, training, and any evaluation or checkpoint save that ran
    after the previous log.

    Values reach the logs through TRL's metrics store (``trainer._metrics["train"]``, averaged and written by
    ``GRPOTrainer.log``), as ``vlm_r1.callbacks.StepStatsCallback`` does. The methods are ``TrainerCallback``
    events; ``vlm_r1.callbacks.RankPerfCallback`` is this class as a ``TrainerCallback`` (this module imports no
    transformers, so a process that only measures or gathers stays light). Register after building the trainer::

        trainer.add_callback(RankPerfCallback(trainer))

    Args:
        trainer: the ``trl.GRPOTrainer`` (or subclass); may be set later as ``callback.trainer`` before ``train()``.
        clock: seconds as a float (default ``time.perf_counter``; tests pass a fake).
    """

    def __init__(self, trainer: Any = None, clock: Any = None):
        self.trainer = trainer
        self.clock = clock or time.perf_counter
        self._tokens = 0
        self._window_start = 0.0
        self._seen_start = 0
        self._last_step = -1
        self._wrapped = False
        self.last: dict[str, float] = {}  # the keys and values of the latest log (every rank has them)
        self.last_ranks: list[dict[str, float]] = []  # every rank's :meth:`rank_stats` of the latest log

    # ---- counting ----------------------------------------------------------------------------------------------
    def _count(self, result: Any) -> None:
        prompt_ids, completion_ids, tool_mask = result[0], result[1], result[2]
        completion = sum(sum(m) for m in tool_mask) if tool_mask is not None else sum(len(c) for c in completion_ids)
        self._tokens += int(sum(len(p) for p in prompt_ids) + completion)

    def _wrap_generate(self, trainer: Any) -> None:
        generate = getattr(trainer, "_generate", None)
        if generate is None or self._wrapped:
            return

        @functools.wraps(generate)
        def counting_generate(*args, **kwargs):
            result = generate(*args, **kwargs)
            model = getattr(trainer, "model", None)
            if model is None or model.training:  # TRL counts training-mode generations only
                try:
                    self._count(result)
                except (TypeError, IndexError):  # not TRL 1.16's tuple: fall back to num_input_tokens_seen
                    logger.warning("RankPerfCallback: unexpected _generate output; tokens/s from num_input_tokens_seen")
                    self._unwrap_generate()
            return result

        trainer._generate = counting_generate
        self._wrapped = True

    def _unwrap_generate(self) -> None:
        if self._wrapped and self.trainer is not None and "_generate" in vars(self.trainer):
            del self.trainer._generate
        self._wrapped = False

    def _device(self) -> Any:
        accelerator = getattr(self.trainer, "accelerator", None)
        if accelerator is not None:
            return accelerator.device
        import torch

        return torch.device("cuda", torch.cuda.current_device()) if torch.cuda.is_available() else torch.device("cpu")

    # ---- the figures -------------------------------------------------------------------------------------------
    def rank_stats(self, state: Any) -> dict[str, float]:
        """This rank's figures for the window since the previous call (then a new window starts): ``tokens``,
        ``seconds``, ``tokens_per_s``, ``peak_mem_gib`` and, on a GPU, ``peak_mem_reserved_gib``."""
        now = self.clock()
        seconds = now - self._window_start
        if self._wrapped:
            tokens = self._tokens
        else:
            import torch.distributed as dist

            world = dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1
            tokens = (state.num_input_tokens_seen - self._seen_start) / world
        out = {"tokens": float(tokens), "seconds": seconds, "tokens_per_s": tokens / seconds if seconds > 0 else 0.0}
        out.update(peak_memory(self._device(), reset=True))
        self._tokens = 0
        self._seen_start = state.num_input_tokens_seen
        self._window_start = now
        return out

    def publish(self, state: Any) -> dict[str, float]:
        """Measure this rank (:meth:`rank_stats`), gather every rank's figures and hand the log keys to TRL's metrics
        store; returns them. A collective: every rank calls it at the same step."""
        ranks = gather_to_all(self.rank_stats(state))
        logs: dict[str, float] = {}
        for rank, stats in enumerate(ranks):
            tps, mem, reserved = perf_keys(rank)
            logs[tps] = stats["tokens_per_s"]
            if "peak_mem_gib" in stats:
                logs[mem] = stats["peak_mem_gib"]
            if "peak_mem_reserved_gib" in stats:
                logs[reserved] = stats["peak_mem_reserved_gib"]
        logs[PERF_TOTAL_KEY] = sum(s["tokens_per_s"] for s in ranks)
        mems = [s["peak_mem_gib"] for s in ranks if "peak_mem_gib" in s]
        if mems:
            logs[PERF_MAX_MEM_KEY] = max(mems)
        self._last_step = state.global_step
        self.last, self.last_ranks = logs, ranks
        metrics = getattr(self.trainer, "_metrics", None)
        if metrics is not None:  # one entry each: TRL's mean over the log window is the value itself
            train = metrics["train"]
            for key, value in logs.items():
                train[key] = [float(value)]
        return logs

    # ---- TrainerCallback events --------------------------------------------------------------------------------
    def on_train_begin(self, args, state, control, **kwargs):
        if self.trainer is None:
            raise ValueError("RankPerfCallback needs the trainer: trainer.add_callback(RankPerfCallback(trainer))")
        self._wrap_generate(self.trainer)
        self._tokens = 0
        self._seen_start = state.num_input_tokens_seen
        self._last_step = state.global_step
        device = self._device()
        peak_memory(device, reset=True)  # the first window starts now (GPU; the CPU figure cannot be reset)
        self._window_start = self.clock()
        return control

    def on_step_end(self, args, state, control, **kwargs):
        # DefaultFlowCallback (always first in the list) has set should_log for this step on every rank alike
        if control.should_log and state.global_step > self._last_step:
            self.publish(state)
        return control

    def on_epoch_end(self, args, state, control, **kwargs):
        if control.should_log and state.global_step > self._last_step:  # --logging_strategy epoch
            self.publish(state)
        return control

    def on_train_end(self, args, state, control, **kwargs):
        self._unwrap_generate()
        return control
