"""Checkpoint retention never leaves zero complete checkpoints (issue 11).

HF's ``Trainer._save_checkpoint`` (transformers 5.23) deletes old checkpoints (``save_total_limit``) at its end, before
any callback runs, so before the new checkpoint's ``CHECKPOINT_COMPLETE`` marker exists. ``VLMGRPOTrainer`` saves
through :func:`vlm_r1.preemption.save_checkpoint_then_rotate` instead: marker first, deletion after. The kill is
simulated deterministically by making the marker write raise at a chosen step (the exception ends ``train()`` right
there, as a kill would), on a real HF ``Trainer`` with a two-parameter model.
"""

from __future__ import annotations

import logging
import os

import pytest
import torch
from transformers import Trainer, TrainingArguments

import vlm_r1.preemption as preemption
from tests.helpers.proc import child_env, run
from vlm_r1.preemption import (
    COMPLETE_MARKER,
    PreemptionCallback,
    latest_complete_checkpoint,
    rotate_checkpoints,
    save_checkpoint_then_rotate,
)


class _Killed(BaseException):
    """Stands for SIGKILL: nothing after the point it is raised at runs."""


class _Linear(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(2, 1)

    def forward(self, x, labels=None):
        out = self.lin(x).squeeze(-1)
        return {"loss": ((out - labels) ** 2).mean(), "logits": out}


class _Data(torch.utils.data.Dataset):
    def __len__(self):
        return 64

    def __getitem__(self, i):
        return {"x": torch.tensor([float(i % 7), 1.0]), "labels": torch.tensor(float(i % 3))}


class _RetainingTrainer(Trainer):
    """A plain HF Trainer with VLMGRPOTrainer's ``_save_checkpoint`` hook (the same one-line delegation)."""

    def _save_checkpoint(self, model, trial):
        save_checkpoint_then_rotate(self, super()._save_checkpoint, model, trial)


def _train(out, cls, limit=1, steps=6, resume=None):
    args = TrainingArguments(
        output_dir=str(out),
        max_steps=steps,
        save_strategy="steps",
        save_steps=2,
        save_total_limit=limit,
        per_device_train_batch_size=2,
        report_to="none",
        use_cpu=True,
        logging_steps=100,
        disable_tqdm=True,
        seed=0,
    )
    trainer = cls(model=_Linear(), args=args, train_dataset=_Data())
    trainer.add_callback(PreemptionCallback(str(out), signals=()))  # as in training: it marks on_save too
    trainer.train(resume_from_checkpoint=resume)
    return trainer


def _checkpoints(out):
    names = sorted((n for n in os.listdir(out) if n.startswith("checkpoint-")), key=lambda n: int(n.split("-")[1]))
    return [(n, os.path.isfile(os.path.join(out, n, COMPLETE_MARKER))) for n in names]


def _kill_when_marking(monkeypatch, step):
    real = preemption.write_complete_marker

    def write(checkpoint_dir, s):
        if s == step:
            raise _Killed(f"killed before marking checkpoint-{s}")
        real(checkpoint_dir, s)

    monkeypatch.setattr(preemption, "write_complete_marker", write)


def test_limit_one_keeps_exactly_one_complete_checkpoint(tmp_path):
    trainer = _train(tmp_path, _RetainingTrainer, limit=1, steps=6)
    assert trainer.args.save_total_limit == 1  # restored after each save
    assert _checkpoints(tmp_path) == [("checkpoint-6", True)]
    _train(tmp_path / "two", _RetainingTrainer, limit=2, steps=6)
    assert _checkpoints(tmp_path / "two") == [("checkpoint-4", True), ("checkpoint-6", True)]


def test_kill_between_save_and_marker_keeps_previous_complete_checkpoint(tmp_path, monkeypatch):
    _kill_when_marking(monkeypatch, step=4)
    with pytest.raises(_Killed):
        _train(tmp_path, _RetainingTrainer, limit=1, steps=6)
    # the new checkpoint is written but not marked; the old one was not deleted before the marker
    assert _checkpoints(tmp_path) == [("checkpoint-2", True), ("checkpoint-4", False)]
    assert latest_complete_checkpoint(str(tmp_path)) == str(tmp_path / "checkpoint-2")

    # the requeued run resumes from checkpoint-2 and ends with one complete checkpoint (the stale one is gone)
    monkeypatch.undo()
    trainer = _train(tmp_path, _RetainingTrainer, limit=1, steps=6, resume=str(tmp_path / "checkpoint-2"))
    assert trainer.state.global_step == 6
    assert _checkpoints(tmp_path) == [("checkpoint-6", True)]


def test_hf_order_alone_loses_every_complete_checkpoint(tmp_path, monkeypatch):
    """Why the hook exists: HF's own order with the same kill leaves nothing to resume from (transformers 5.23)."""
    _kill_when_marking(monkeypatch, step=4)
    with pytest.raises(_Killed):
        _train(tmp_path, Trainer, limit=1, steps=6)
    assert _checkpoints(tmp_path) == [("checkpoint-4", False)]
    assert latest_complete_checkpoint(str(tmp_path)) is None


def test_stale_marker_of_an_overwritten_folder_is_removed_first(tmp_path, monkeypatch):
    stale = tmp_path / "checkpoint-2"
    stale.mkdir(parents=True)
    (stale / COMPLETE_MARKER).write_text("step 2 of an older run\n")
    _kill_when_marking(monkeypatch, step=2)
    with pytest.raises(_Killed):
        _train(tmp_path, _RetainingTrainer, limit=1, steps=6)
    assert _checkpoints(tmp_path) == [("checkpoint-2", False)]  # half overwritten: not complete any more


def _fake(tmp_path, step, complete, mtime):
    d = tmp_path / f"checkpoint-{step}"
    d.mkdir()
    if complete:
        (d / COMPLETE_MARKER).write_text("ok")
    os.utime(d, (mtime, mtime))
    return str(d)


def test_rotation_never_deletes_the_newest_complete_checkpoint(tmp_path):
    c2, c4, c6 = _fake(tmp_path, 2, True, 1000), _fake(tmp_path, 4, True, 2000), _fake(tmp_path, 6, False, 3000)
    # HF would keep only checkpoint-6 (the most recent) and delete the complete ones; here the incomplete goes first
    assert rotate_checkpoints(str(tmp_path), 1) == [c6, c2]
    assert _checkpoints(tmp_path) == [("checkpoint-4", True)]
    assert rotate_checkpoints(str(tmp_path), 1) == [] and rotate_checkpoints(str(tmp_path), None) == []
    c8 = _fake(tmp_path, 8, True, 4000)
    assert rotate_checkpoints(str(tmp_path), 1, current=c8) == [c4]
    # the best checkpoint is kept besides the newest complete one, as HF keeps it
    c10 = _fake(tmp_path, 10, True, 5000)
    assert rotate_checkpoints(str(tmp_path), 1, current=c10, best_model_checkpoint=c8) == []
    assert _checkpoints(tmp_path) == [("checkpoint-8", True), ("checkpoint-10", True)]


def test_no_complete_checkpoint_is_said_loudly(tmp_path, caplog):
    _fake(tmp_path, 2, False, 1000)
    _fake(tmp_path, 4, False, 2000)
    with caplog.at_level(logging.WARNING, logger="vlm_r1.preemption"):
        assert latest_complete_checkpoint(str(tmp_path)) is None
    [record] = [r for r in caplog.records if r.name == "vlm_r1.preemption"]
    assert record.levelno == logging.ERROR
    assert "NO COMPLETE CHECKPOINT" in record.getMessage() and "checkpoint-2, checkpoint-4" in record.getMessage()
    assert "step 0" in record.getMessage() and "--resume_from_checkpoint PATH" in record.getMessage()
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="vlm_r1.preemption"):  # an empty run directory: nothing to say
        assert latest_complete_checkpoint(str(tmp_path / "fresh")) is None
    assert not caplog.records


@pytest.mark.slow  # a torchrun recipe run (~17 s): the default suite keeps the unit checks of the retention rule (issue 19 time budget)
def test_tiny_recipe_with_save_total_limit_one(tmp_path, tiny_qwen25_dir):
    """VLMGRPOTrainer itself (2 gloo processes through the recipe launcher): one complete checkpoint at the end."""
    out = tmp_path / "run"
    env = child_env(
        threads=1,
        plugins=False,
        OUTPUT_DIR=str(out),
        MAX_STEPS="4",
        SAVE_TOTAL_LIMIT="1",
        TINY_MODEL_DIR=tiny_qwen25_dir,
    )
    run(["bash", "run_scripts/gta1_tiny_cpu.sh"], env=env)
    assert _checkpoints(out) == [("checkpoint-4", True)]
