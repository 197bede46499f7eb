"""Preemption-safe training: stop cleanly on request, mark complete checkpoints, resume from the newest complete one.

On a SLURM cluster the job gets ``SIGUSR1`` shortly before its time limit (``#SBATCH --signal=B:USR1@120``); the batch
script forwards it by creating ``OUTPUT_DIR/PREEMPT`` and requeues the job after training exits. Inside training:

* :class:`PreemptionCallback` turns ``SIGUSR1``/``SIGTERM`` (when delivered to the trainer) or the ``PREEMPT`` file
  into "save a checkpoint now and stop", decided by all ranks together at the end of a step (an all-reduce of the
  flag, so no rank stops alone and hangs the others);
* after every save, once all ranks have written their part, it writes ``checkpoint-N/CHECKPOINT_COMPLETE``;
* :func:`latest_complete_checkpoint` returns the newest checkpoint with that marker, so a checkpoint cut short by a
  kill is never resumed from. The HF Trainer restores optimiser, scheduler, RNG states and the data position (same
  seeded sampler, batches already seen are skipped), so the resumed run continues with the same data order. When
  checkpoints exist but none is complete it says so loudly (the run starts from step 0).

Retention (``save_total_limit``): HF's ``Trainer._save_checkpoint`` (transformers 5.23) deletes old checkpoints at its
end, before any callback runs, i.e. before the new checkpoint's marker exists; with ``save_total_limit=1`` a kill in
that window leaves no complete checkpoint. :func:`save_checkpoint_then_rotate` (called by
``VLMGRPOTrainer._save_checkpoint``) runs HF's save with rotation off, writes the marker once every rank is done, and
only then rotates with :func:`rotate_checkpoints`, which never deletes the newest complete checkpoint.
"""

from __future__ import annotations

import logging
import os
import re
import signal
import time

from transformers import TrainerCallback

from groundwork.outputs import write_text

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
    skipped = [
        n
        for n in os.listdir(output_dir)
        if _CHECKPOINT_RE.match(n) and not os.path.isfile(os.path.join(output_dir, n, COMPLETE_MARKER))
    ]
    if skipped and not found:
        logger.error(
            "NO COMPLETE CHECKPOINT in %s: found %s, none with %s (cut short by a kill, or written without completion "
            "markers). Training starts from step 0 and will overwrite them. If one of them is known to be whole, "
            "resume from it explicitly with --resume_from_checkpoint PATH.",
            output_dir,
            ", ".join(sorted(skipped, key=_step_of)),
            COMPLETE_MARKER,
        )
    elif skipped:
        logger.warning("ignoring incomplete checkpoints (no %s): %s", COMPLETE_MARKER, sorted(skipped, key=_step_of))
    return max(found)[1] if found else None


def _step_of(name: str) -> int:
    m = _CHECKPOINT_RE.match(os.path.basename(name))
    return int(m.group(1)) if m else -1


def is_complete(checkpoint_dir: str) -> bool:
    """True when ``checkpoint_dir`` holds the completion marker."""
    return os.path.isfile(os.path.join(checkpoint_dir, COMPLETE_MARKER))


def write_complete_marker(checkpoint_dir: str, step: int) -> None:
    """Write ``checkpoint_dir/CHECKPOINT_COMPLETE`` (call only once every rank has written its part), atomically
    (``groundwork.outputs.write_text``: the marker is whole or absent)."""
    write_text(os.path.join(checkpoint_dir, COMPLETE_MARKER), f"step {step}\n")


def rotate_checkpoints(
    run_dir: str, save_total_limit: int | None, current: str | None = None, best_model_checkpoint: str | None = None
) -> list[str]:
    """Delete old ``checkpoint-*`` folders of ``run_dir`` until at most ``save_total_limit`` remain; returns them.

    Like HF's ``rotate_checkpoints`` (same order: ``sort_checkpoints`` by mtime, best checkpoint protected), except that
    it never deletes the newest complete checkpoint (by step) nor ``current`` (the one just saved and marked), and that
    incomplete checkpoints (no marker: never resumed from) go before complete ones. Nothing happens for a limit of
    None or <= 0.
    """
    if save_total_limit is None or save_total_limit <= 0:
        return []
    import shutil
    from pathlib import Path

    from transformers.trainer_utils import sort_checkpoints

    ordered = sort_checkpoints(run_dir, use_mtime=True, best_model_checkpoint=best_model_checkpoint)
    if len(ordered) <= save_total_limit:
        return []
    complete = [p for p in ordered if is_complete(p)]
    protected = set()
    if complete:
        protected.add(max(complete, key=_step_of))
    for keep in (current, best_model_checkpoint):
        if keep is not None:
            protected.add(str(Path(keep)))
    candidates = [p for p in ordered if p not in complete] + complete  # incomplete first, each part oldest first
    remaining, deleted = len(ordered), []
    for path in candidates:
        if remaining <= max(save_total_limit, len(protected)):
            break
        if path not in protected:
            shutil.rmtree(path, ignore_errors=True)
            logger.info("deleting older checkpoint %s (save_total_limit=%d)", path, save_total_limit)
            remaining -= 1
            deleted.append(path)
    return deleted


def save_checkpoint_then_rotate(trainer, save, model, trial) -> None:
    """Run HF's ``_save_checkpoint`` (``save(model, trial)``) with retention deferred until the new checkpoint is
    marked complete.

    Order: a stale marker in the target folder is removed (a folder being overwritten is not complete until this save
    is); HF saves model, optimizer, scheduler, RNG and trainer state with ``save_total_limit`` off; all ranks meet; the
    saving process writes ``CHECKPOINT_COMPLETE``; all ranks meet again; only then are old checkpoints deleted
    (:func:`rotate_checkpoints`). A kill at any point leaves the previous complete checkpoint or the new one.
    """
    args, state = trainer.args, trainer.state
    run_dir = trainer._get_output_dir(trial=trial)
    path = os.path.join(run_dir, f"checkpoint-{state.global_step}")
    if args.should_save and os.path.isfile(os.path.join(path, COMPLETE_MARKER)):
        os.remove(os.path.join(path, COMPLETE_MARKER))
    limit = args.save_total_limit
    args.save_total_limit = None  # HF's rotation, which would run before the marker exists
    try:
        save(model, trial)
    finally:
        args.save_total_limit = limit
    _barrier()  # every rank has written its part of the checkpoint
    if args.should_save and os.path.isdir(path):
        write_complete_marker(path, state.global_step)
    _barrier()
    if args.should_save:
        rotate_checkpoints(run_dir, limit, current=path, best_model_checkpoint=state.best_model_checkpoint)


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


_TEARDOWN_REGISTERED = False
_EXIT_GRACE_S = 1.0


def _tear_down_at_exit() -> None:
    """At interpreter exit (registered once per process): destroy the default process group, then let gloo's worker
    threads retire their last collectives before Python finalizes.

    Why: a worker sometimes died after its work was done, under CPU load ("terminate called without an active
    exception", SIGABRT; torchrun then counted a failed worker and stopped or restarted the whole group). gdb shows
    the aborting thread is ProcessGroupGloo's ``pt_gloo_runloop``: a collective's ``wait()`` returns before that thread
    drops its reference to the work, and when that is the last reference to a tensor created in Python, freeing it
    takes the GIL; once the main thread has begun finalizing, CPython ends such a thread with ``pthread_exit``, whose
    unwinding through gloo's C++ frames calls ``std::terminate``. A slow (descheduled) gloo thread makes the race
    likely. Releasing the GIL for a moment before finalization lets it finish. Local only (no collective), so it
    cannot wait for a peer that has gone.
    """
    global _TEARDOWN_REGISTERED
    if _TEARDOWN_REGISTERED:
        return
    import atexit

    def tear_down():
        try:
            import torch.distributed as dist

            if dist.is_available() and dist.is_initialized():
                dist.destroy_process_group()
                time.sleep(_EXIT_GRACE_S)  # GIL released: gloo's threads drop their last references
        except Exception as err:  # exiting anyway
            logger.debug("destroy_process_group at exit: %s", err)

    atexit.register(tear_down)
    _TEARDOWN_REGISTERED = True


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
        self._previous = {}
        for sig in signals:
            try:
                self._previous[sig] = signal.signal(sig, self._on_signal)
            except ValueError:  # not the main thread (e.g. inside a test runner thread)
                logger.warning("cannot install a handler for %s outside the main thread", sig)
        _tear_down_at_exit()

    def _on_signal(self, signum, frame):
        logger.warning(
            "received %s: will save a checkpoint and stop at the end of this step", signal.Signals(signum).name
        )
        self.requested = True

    def on_train_end(self, args, state, control, **kwargs):
        # Past the last step a request can no longer be honoured: SIGTERM (torchrun stopping the group) kills again.
        for sig, previous in self._previous.items():
            signal.signal(sig, previous if previous is not None else signal.SIG_DFL)
        self._previous = {}
        return control

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
        if state.is_world_process_zero:  # VLMGRPOTrainer has marked it already (save_checkpoint_then_rotate)
            path = os.path.join(args.output_dir, f"checkpoint-{state.global_step}")
            if os.path.isdir(path) and not is_complete(path):
                write_complete_marker(path, state.global_step)
        _barrier()
        return control
