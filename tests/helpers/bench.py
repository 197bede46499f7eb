"""Scoring saved predictions and writing ScreenSpot-Pro harness logs, for the benchmark tests.

``from tests.helpers.bench import rescore, rescore_full, harness_detail``:

* :func:`rescore`: a predictions file scored against a benchmark's samples the way ``gui-grounding eval
  --predictions`` scores it (``gui_grounding.eval.predictions.load_predictions``, then ``results_from_predictions``,
  then the benchmark's ``metrics``); :func:`rescore_full` also returns the predictions read.
* :func:`harness_detail`: one ``details`` entry of the official ScreenSpot-Pro harness log (its keys, in its order).
"""

from __future__ import annotations

from typing import Any


def rescore_full(bench, samples, path, **kw) -> tuple[dict, list, dict, Any]:
    """``(metrics, results, predictions, report)`` of the predictions file ``path`` (``kw``: ``load_predictions``'s
    keywords, e.g. ``on_duplicate``, ``format``)."""
    from gui_grounding.eval.predictions import load_predictions, results_from_predictions

    preds, report = load_predictions(str(path), samples, **kw)
    results = results_from_predictions(samples, preds, report)
    return bench.metrics(samples, results), results, preds, report


def rescore(bench, samples, path, **kw) -> tuple[dict, list, Any]:
    """``(metrics, results, report)`` of the predictions file ``path`` (:func:`rescore_full` without the
    predictions)."""
    metrics, results, _, report = rescore_full(bench, samples, path, **kw)
    return metrics, results, report


def harness_detail(sample, pred, *, img_path: str, raw_response: str = "", correctness: str = "correct") -> dict:
    """The harness log's detail of ``sample`` (a ScreenSpot-Pro ``Sample``): a positive, English, instruction-style
    query whose prediction is ``pred`` (pixels, or None) and whose target is the sample's first box."""
    return {
        "img_path": img_path,
        "group": sample.extra["group"],
        "platform": sample.platform,
        "application": sample.extra["application"],
        "lang": "en",
        "instruction_style": "instruction",
        "prompt_to_evaluate": sample.instruction,
        "gt_type": "positive",
        "ui_type": sample.ui_type,
        "task_filename": sample.extra["task_filename"],
        "pred": pred,
        "raw_response": raw_response,
        "bbox": list(sample.boxes[0]),
        "correctness": correctness,
    }
