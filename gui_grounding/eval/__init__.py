"""Evaluation: predict click points (``predict``), score them (``score``), write metrics.json + results.md.

This first slice evaluates canonical JSONL data (e.g. the collector's test split); benchmark readers (ScreenSpot-V2,
ScreenSpot-Pro, OSWorld-G, WebClick) plug in as further ``--benchmark`` choices.
"""

from __future__ import annotations

import json
import logging
import os

from gui_grounding.eval.score import format_table, read_predictions, score
from gui_grounding.schema import load_samples

logger = logging.getLogger(__name__)


def run_eval(
    data: list[str],
    out_dir: str,
    *,
    model: str | None = None,
    predictions: str | None = None,
    limit: int | None = None,
    **predict_kwargs,
) -> dict:
    """Predict (with ``model``) or rescore (``predictions``), then write ``metrics.json`` and ``results.md``.

    Args:
        data: canonical/GTA1/VLM-R1 JSONL files (boxes converted to original pixels by ``gui_grounding.schema``).
        out_dir: where predictions.jsonl (model mode), metrics.json and results.md go.
        model: checkpoint to predict with (``hf`` backend, :func:`gui_grounding.eval.predict.predict_hf`).
        predictions: existing predictions JSONL to score instead (points in original pixels).
        limit: evaluate only the first ``limit`` samples.
        **predict_kwargs: passed to ``predict_hf`` (batch_size, max_pixels, prompt_mode, max_new_tokens, ...).

    Returns:
        the metrics dict (also written to ``out_dir/metrics.json``).

    Raises:
        ValueError: neither or both of ``model`` and ``predictions``.
    """
    if (model is None) == (predictions is None):
        raise ValueError("give exactly one of model (predict, then score) or predictions (rescore a file)")
    samples, report = load_samples(data)
    if limit is not None:
        samples = samples[:limit]
    os.makedirs(out_dir, exist_ok=True)
    if model is not None:
        from gui_grounding.eval.predict import predict_hf

        predictions = predict_hf(model, samples, os.path.join(out_dir, "predictions.jsonl"), **predict_kwargs)
    metrics = score(samples, read_predictions(predictions))
    metrics["data"] = {"files": data, "num_samples": len(samples), "rejected_records": len(report.rejects),
                       "reject_reasons": dict(report.counts)}  # fmt: skip
    metrics["model"] = model
    metrics["predictions"] = os.path.abspath(predictions)
    with open(os.path.join(out_dir, "metrics.json"), "w", encoding="utf-8") as f:
        json.dump(metrics, f, indent=2)
    table = format_table(metrics, title=f"click accuracy on {len(samples)} samples ({', '.join(data)})")
    with open(os.path.join(out_dir, "results.md"), "w", encoding="utf-8") as f:
        f.write(f"```\n{table}\n```\n")
    print(table)
    for key, what in (("missing_predictions", "samples have no prediction (counted wrong)"),
                      ("unmatched_predictions", "predictions match no sample_id of the data")):  # fmt: skip
        if metrics[key]:
            logger.warning("%d %s", metrics[key], what)
    return metrics
