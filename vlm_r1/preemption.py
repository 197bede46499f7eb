"""Preemption-safe training: stop cleanly on request, mark complete checkpoints, resume from the newest complete one.

On a SLURM cluster the job gets ``SIGUSR1`` shortly before its time limit (``#SBATCH --signal=B:USR1@120``); the batch
script forwards it by creating ``OUTPUT_DIR/PREEMPT`` and requeues the job after training exits. Inside training:

* :class:`PreemptionCallback` turns ``SIGUSR1``/``SIGTERM`` (when delivered to the trainer) or the ``PREEMPT`` file
  into "save a checkpoint now and stop", decided by all ranks together at the end of a step (an all-reduce of the
  flag, so no rank stops alone and hangs the others);
* after every save, once all ranks have written their part, it writes ``checkpoint-N/CHECKPOINT_COMPLETE``;
* :func:`latest_complete_checkpoint` returns the newest checkpoint with that marker, so a checkpoint cut short by a
  kill is never resumed from. The HF Trainer restores optimiser, scheduler, RNG states and the data position (same
  seeded sampler, batches already seen are skipped), so the resumed run continues with the same data order.
"""

from __future__ import annotations

import logging
import os
import re
import signal

from transformers import TrainerCallback

logger = logging.getLogger(__name__)

COMPLETE_MARKER = "CHECKPOINT_COMPLETE"
PREEMPT_FILE = "PREEMPT"
_CHECKPOINT_RE = re.compile(r"^checkpoint-(\d+)$")


def latest_complete_checkpoint(output_dir: str) -> str | None:
    """Path of the highest-numbered ``checkpoint-N`` in ``output_dir`` holding ``CHECKPOINT_COMPLETE``, or None."""
    if not os.path.isdir(output_dir):
        return None
    found = []
    for name in os.listdir(output_dir):
        m = _CHECKPOINT_RE.match(name)
        path = os.path.join(output_dir, name)
        if m and os.path.isfile(os.path.join(path, COMPLETE_MARKER)):
            found.append((int(m.group(1)), path))
    skipped = [n for n in os.listdir(output_dir) if _CHECKPOINT_RE.match(n)
               and not os.path.isfile(os.path.join(output_dir, n, COMPLETE_MARKER))]  # fmt: skip
    if skipped:
        logger.warning("ignoring incomplete checkpoints (no %s): %s", COMPLETE_MARKER, sorted(skipped))
    return max(found)[1] if found else None


def _any_rank(flag: bool) -> bool:
    """True when ``flag`` is True on any rank (all-reduce MAX); the local value without torch.distributed."""
    import torch
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        return flag
    t = torch.tensor([1 if flag else 0], dtype=torch.int32)
    if dist.get_backend() == "nccl":
        t = t.cuda()
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return bool(t.item())


def _barrier() -> None:
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.barrier()


class PreemptionCallback(TrainerCallback):
    """Save-and-stop on ``SIGUSR1``/``SIGTERM`` or ``OUTPUT_DIR/PREEMPT``; mark complete checkpoints.

    Args:
        output_dir: the run's output directory (where ``PREEMPT`` is looked for and checkpoints are written).
        signals: signals that request preemption (installed in the main thread only).

    After training, ``preempted`` tells whether the run stopped early because of a request.
    """

    def __init__(self, output_dir: str, signals: tuple[int, ...] = (signal.SIGUSR1, signal.SIGTERM)):
        self.output_dir = output_dir
        self.stop_file = os.path.join(output_dir, PREEMPT_FILE)
        self.requested = False
        self.preempted = False
        for sig in signals:
            try:
                signal.signal(sig, self._on_signal)
            except ValueError:  # not the main thread (e.g. inside a test runner thread)
                logger.warning("cannot install a handler for %s outside the main thread", sig)

    def _on_signal(self, signum, frame):
        logger.warning("received %s: will save a checkpoint and stop at the end of this step",
                       signal.Signals(signum).name)  # fmt: skip
        self.requested = True

    def on_step_end(self, args, state, control, **kwargs):
        local = self.requested or os.path.exists(self.stop_file)
        if _any_rank(local):
            self.preempted = True
            control.should_save = True
            control.should_training_stop = True
            logger.warning("preemption requested: saving checkpoint-%d and stopping", state.global_step)
        return control

    def on_save(self, args, state, control, **kwargs):
        _barrier()  # every rank has written its part of the checkpoint
        if state.is_world_process_zero:
            path = os.path.join(args.output_dir, f"checkpoint-{state.global_step}")
            if os.path.isdir(path):
                with open(os.path.join(path, COMPLETE_MARKER), "w") as f:
                    f.write(f"step {state.global_step}\n")
        _barrier()
        return control
