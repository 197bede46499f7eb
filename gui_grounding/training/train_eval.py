"""Click accuracy on held-out data during GRPO training, logged next to the reward curve.

Whenever the trainer evaluates (``--eval_strategy steps --eval_steps N``) and at the end of training, the policy answers the
held-out task rows greedily, exactly as they were built for training (their prompt, their resized image, their
adapter's parser: ``gui_grounding.eval.backends.hf.predict_rows``; no prompt is rebuilt), and the trainer logs
``eval_click/accuracy`` (%: the answered point, mapped to original pixels, inside a target box) and
``eval_click/wrong_format`` (fraction of answers without a point). Rows of refusal training (column ``no_target``,
``--refusal_training true``) also give ``eval_click/accuracy_on_targets`` (% of the rows with a target) and
``eval_click/refusal_share``, ``_precision``, ``_recall`` of the held-out answers
(``gui_grounding.training.refusal.refusal_metrics``, abstaining read by ``Adapter.is_trained_refusal``). TRL's own evaluation (sampled completions,
``eval_reward``) runs as well, so the sampled reward and the greedy accuracy can be compared.

Distributed runs: every rank enters generation together (ZeRO-3 gathers parameters through TRL's
``unwrap_model_for_generation``), each predicts its own slice of the rows, and the results are gathered.
"""

from __future__ import annotations

import logging

from transformers import TrainerCallback

from gui_grounding.eval.backends.hf import predict_rows
from gui_grounding.eval.judge import CORRECT, WRONG, WRONG_FORMAT
from gui_grounding.models.frames import point_in_box
from gui_grounding.models.rows import row_adapter
from gui_grounding.training.refusal import refusal_metrics

logger = logging.getLogger(__name__)


def row_verdict(row: dict, point) -> str:
    """``"correct"``, ``"wrong"`` or ``"wrong_format"`` (``gui_grounding.eval.judge`` verdicts) for ``point``
    (original pixels, or None) against the row's ``target_boxes`` (original pixels)."""

    if point is None:
        return WRONG_FORMAT
    p = (float(point[0]), float(point[1]))
    return CORRECT if any(point_in_box(p, tuple(b)) for b in row["target_boxes"]) else WRONG


def refusal_eval(rows: list[dict], preds: list[dict], verdicts: list[str]) -> dict:
    """``eval_click/accuracy_on_targets`` (% correct of the rows whose ``no_target`` is not True; absent when none) and
    ``eval_click/refusal_share`` / ``_precision`` / ``_recall`` (:func:`gui_grounding.training.refusal.refusal_metrics`
    of the answers ``raw_response``, read by each row's adapter's ``is_trained_refusal``; TRL's own sampled eval logs
    the reward's as ``eval_refusal/...``), for rows, predictions and verdicts in one order."""
    abstained = [row_adapter(r).is_trained_refusal(p.get("raw_response")) for r, p in zip(rows, preds, strict=True)]
    flags = [r.get("no_target") for r in rows]
    out = {f"eval_click/{k.replace('/', '_')}": round(v, 4) for k, v in refusal_metrics(abstained, flags).items()}
    on_targets = [v for v, t in zip(verdicts, flags, strict=True) if t is not True]
    if on_targets:
        out["eval_click/accuracy_on_targets"] = round(100.0 * on_targets.count(CORRECT) / len(on_targets), 2)
    return out


class ClickAccuracyCallback(TrainerCallback):
    """Logs greedy click accuracy on held-out task ``rows`` after each trainer evaluation and at the end of training.

    Args:
        rows: held-out ``gui_grounding`` task rows (``gui_grounding.training.task.sample_to_row``; the image is read from
            ``image_path``).
        processor, vlm_module: the training run's processor and VLM module.
        budget: the training run's :class:`groundwork.pixel_budget.PixelBudget` (the rows' images are resized with it).
        batch_size, max_new_tokens: generation settings.

    ``trainer`` must be set (``callback.trainer = trainer``) before training starts.
    """

    def __init__(self, rows, processor, vlm_module, budget, *, batch_size: int = 8, max_new_tokens: int = 32):
        self.rows, self.processor, self.vlm_module = [dict(r) for r in rows], processor, vlm_module
        self.budget = budget
        for row in self.rows:
            row.pop("image", None)  # the callback reads the screenshot itself, as trained
        self.batch_size, self.max_new_tokens = batch_size, max_new_tokens
        self.trainer = None
        self.history: list[dict] = []

    def evaluate(self) -> dict:
        """Run the evaluation now; returns (and logs) ``{"eval_click/accuracy": %, "eval_click/wrong_format": f}``."""
        from accelerate.utils import gather_object
        from trl.models.utils import unwrap_model_for_generation

        trainer = self.trainer
        acc = trainer.accelerator
        mine = self.rows[acc.process_index :: acc.num_processes]
        with unwrap_model_for_generation(
            trainer.model_wrapped,
            acc,
            gather_deepspeed3_params=getattr(trainer.args, "ds3_gather_for_generation", True),
        ) as model:
            preds = predict_rows(
                model,
                self.processor,
                self.vlm_module,
                mine,
                self.budget,
                batch_size=self.batch_size,
                max_new_tokens=self.max_new_tokens,
            )
        preds = gather_object(preds) if acc.num_processes > 1 else preds
        by_id = {p["sample_id"]: p for p in preds}
        verdicts = [row_verdict(r, by_id[r["sample_id"]]["point"]) for r in self.rows]
        n = len(verdicts)
        metrics = {
            "eval_click/accuracy": round(100.0 * verdicts.count(CORRECT) / n, 2),
            "eval_click/wrong_format": round(verdicts.count(WRONG_FORMAT) / n, 4),
            "eval_click/num_samples": n,
        }
        if any("no_target" in r for r in self.rows):  # refusal training: the answers on targets, and the abstentions
            metrics.update(refusal_eval(self.rows, [by_id[r["sample_id"]] for r in self.rows], verdicts))
        self.history.append({"step": trainer.state.global_step, **metrics})
        trainer.log(metrics)
        return metrics

    def on_evaluate(self, args, state, control, **kwargs):
        # Runs right after TRL's own evaluation (every --eval_steps), i.e. after the step's training log: logging
        # here cannot swallow it (Trainer.log resets control.should_log, so logging from on_step_end would).
        self.evaluate()
        return control

    def on_train_end(self, args, state, control, **kwargs):
        if not self.history or self.history[-1]["step"] != state.global_step:
            self.evaluate()
        return control
