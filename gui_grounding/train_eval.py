"""Click accuracy on held-out data during GRPO training, logged next to the reward curve.

Whenever the trainer evaluates (``--eval_strategy steps --eval_steps N``) and at the end of training, the policy answers the held-out
samples greedily with the same adapter and scorer as ``gui-grounding eval`` (``gui_grounding.eval.judge``), and the
trainer logs ``eval_click/accuracy`` (%) and ``eval_click/wrong_format`` (fraction of answers without a point). TRL's
own evaluation (sampled completions, ``eval_reward``) runs as well, so the sampled reward and the greedy accuracy can
be compared.

Distributed runs: every rank enters generation together (ZeRO-3 gathers parameters through TRL's
``unwrap_model_for_generation``), each predicts its own slice of the samples, and the results are gathered.
"""

from __future__ import annotations

import logging

from transformers import TrainerCallback

from gui_grounding.eval.judge import CORRECT, WRONG_FORMAT, judge
from gui_grounding.schema import Sample

logger = logging.getLogger(__name__)


def rows_to_samples(rows) -> list[Sample]:
    """Samples (original pixels) from ``gui_grounding`` task rows (see ``gui_grounding.task.sample_to_row``).

    The published boxes and their unit come back too when the rows carry them (``target_boxes_source``,
    ``source_box_unit``); the greedy click accuracy itself is judged on ``target_boxes`` (original pixels).
    """
    samples = []
    for r in rows:
        w, h = r["image_size"]
        source = [tuple(b) for b in r.get("target_boxes_source") or []]
        samples.append(Sample(r["sample_id"], r["instruction"], r["image_path"], [tuple(b) for b in r["target_boxes"]],
                              int(w), int(h), source_boxes=source,
                              source_box_unit=r.get("source_box_unit") or "pixel"))  # fmt: skip
    return samples


class ClickAccuracyCallback(TrainerCallback):
    """Logs greedy click accuracy on ``samples`` after each trainer evaluation and at the end of training.

    Args:
        samples: held-out samples (original pixels).
        processor, vlm_module: the training run's processor and VLM module.
        adapter: prompt/frame adapter (``gui_grounding.eval.adapters``), e.g. ``gta1``.
        batch_size, max_new_tokens: generation settings.

    ``trainer`` must be set (``callback.trainer = trainer``) before training starts.
    """

    def __init__(self, samples, processor, vlm_module, adapter, *, batch_size: int = 8, max_new_tokens: int = 32):
        self.samples, self.processor, self.vlm_module, self.adapter = samples, processor, vlm_module, adapter
        self.batch_size, self.max_new_tokens = batch_size, max_new_tokens
        self.trainer = None
        self.history: list[dict] = []

    def evaluate(self) -> dict:
        """Run the evaluation now; returns (and logs) ``{"eval_click/accuracy": %, "eval_click/wrong_format": f}``."""
        from trl.models.utils import unwrap_model_for_generation

        from gui_grounding.eval.backends.hf import predict_points

        trainer = self.trainer
        acc = trainer.accelerator
        mine = self.samples[acc.process_index :: acc.num_processes]
        with unwrap_model_for_generation(trainer.model_wrapped, acc,
                                         gather_deepspeed3_params=getattr(trainer.args, "ds3_gather_for_generation", True)) as model:  # fmt: skip
            preds = predict_points(model, self.processor, self.vlm_module, mine, self.adapter,
                                   batch_size=self.batch_size, max_new_tokens=self.max_new_tokens)  # fmt: skip
        from accelerate.utils import gather_object

        preds = gather_object(preds) if acc.num_processes > 1 else preds
        by_id = {p["sample_id"]: p for p in preds}
        verdicts = [judge(s, by_id[s.sample_id]["point"]) for s in self.samples]
        n = len(verdicts)
        metrics = {
            "eval_click/accuracy": round(100.0 * verdicts.count(CORRECT) / n, 2),
            "eval_click/wrong_format": round(verdicts.count(WRONG_FORMAT) / n, 4),
            "eval_click/num_samples": n,
        }
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
