"""Evaluation on GUI grounding benchmarks, from a model or from a predictions file.

Three separate axes, combined at run time (lm-evaluation-harness style):

* benchmarks (``gui_grounding.eval.benchmarks``): ScreenSpot-V2, ScreenSpot-Pro, OSWorld-G, WebClick and our
  canonical JSONL; each reads its published layout and computes its own metric tables;
* backends (``gui_grounding.eval.backends``): ``hf`` (transformers), ``openai`` (any OpenAI-compatible endpoint),
  ``vllm`` (offline engine);
* adapters (``gui_grounding.eval.adapters``): the prompt and coordinate frame of a model family.

One scorer (``gui_grounding.eval.judge``) judges every prediction; ``gui_grounding.eval.report`` writes
``metrics.json``, ``results.md`` and ``failures.html``.
"""

from __future__ import annotations

import logging
import os

logger = logging.getLogger(__name__)

ON_DUPLICATE = ("error", "first", "last")


class EvalInputError(ValueError):
    """Input that eval refuses as a whole, with a one-line message naming the file (and the first offending records):
    a benchmark file with duplicate sample ids, a predictions file with duplicate predictions (without
    ``on_duplicate``), a predictions file that is neither of the readable formats, or data with no usable sample.
    ``gui-grounding eval`` prints the message and exits with status 1 (no traceback)."""


def run_eval(
    benchmark: str,
    data: str,
    out_dir: str,
    *,
    model: str | None = None,
    predictions: str | None = None,
    backend: str = "hf",
    adapter: str | None = None,
    limit: int | None = None,
    strict: bool = False,
    benchmark_options: dict | None = None,
    max_failures: int = 200,
    on_duplicate: str = "error",
    **backend_kwargs,
) -> dict:
    """Evaluate on ``benchmark``: predict with ``model`` (then score) or rescore a ``predictions`` file.

    Args:
        benchmark: a name of ``gui_grounding.eval.benchmarks.BENCHMARKS``.
        data: the benchmark folder laid out as published (canonical: a JSONL file or a folder with test.jsonl).
        out_dir: output folder: ``predictions.jsonl`` (model mode), ``metrics.json``, ``results.md``,
            ``failures.html``.
        model: checkpoint (hf, vllm) or served model name (openai) to predict with.
        predictions: predictions JSONL (points in original pixels) or a ScreenSpot-Pro harness log to rescore.
        backend: ``hf``, ``openai`` or ``vllm``.
        adapter: adapter name; default: from the checkpoint's ``config.model_type`` (required for openai).
        limit: evaluate only the first ``limit`` samples.
        strict: stop at the first bad record / prediction line instead of counting it.
        benchmark_options: passed to the benchmark (e.g. OSWorld-G ``subset``, WebClick ``cache_dir``).
        max_failures: at most this many wrong samples drawn in ``failures.html``.
        on_duplicate: several predictions for one sample: ``"error"`` (default: refuse the file, naming them),
            ``"first"`` or ``"last"`` (that line counts; the others are counted in ``duplicates``). ScreenSpot-Pro
            harness logs are exempt from ``"error"`` (see ``gui_grounding.eval.predictions``).
        **backend_kwargs: backend options (batch_size, min_pixels, max_pixels, max_new_tokens, base_url, ...).

    Returns:
        the metrics document written to ``metrics.json``.

    Raises:
        ValueError: neither or both of ``model`` and ``predictions``; unknown benchmark, backend or adapter.
        EvalInputError: duplicate sample ids in the benchmark, duplicate predictions (``on_duplicate="error"``), an
            unreadable predictions file, or no usable sample.
    """
    from gui_grounding.eval.benchmarks import get_benchmark
    from gui_grounding.eval.predictions import load_predictions, results_from_predictions
    from gui_grounding.eval.report import write_reports

    if (model is None) == (predictions is None):
        raise ValueError("give exactly one of model (predict, then score) or predictions (rescore a file)")
    if on_duplicate not in ON_DUPLICATE:
        raise ValueError(f"on_duplicate must be one of {', '.join(ON_DUPLICATE)}, got {on_duplicate!r}")
    bench = get_benchmark(benchmark, **(benchmark_options or {}))
    samples, load_report = bench.load(data, strict=strict)
    if limit is not None:
        samples = samples[:limit]
    if not samples:
        raise EvalInputError(f"no usable samples in {data} for {benchmark}: "
                             + "; ".join(load_report.table().splitlines()[:4]))  # fmt: skip
    os.makedirs(out_dir, exist_ok=True)
    meta = {"benchmark": benchmark, "data": os.path.abspath(data), "num_samples": len(samples),
            "on_duplicate": on_duplicate}  # fmt: skip
    if model is not None:
        from gui_grounding.eval.backends import predict

        if backend == "openai" and adapter is None:
            raise ValueError("--backend openai needs --adapter (the served model's prompt/coordinate convention)")
        predictions = predict(backend, model, samples, os.path.join(out_dir, "predictions.jsonl"), adapter=adapter,
                              **backend_kwargs)  # fmt: skip
        meta.update(model=model, backend=backend, adapter=adapter or "default for config.model_type",
                    backend_options={k: v for k, v in backend_kwargs.items() if k != "api_key"})  # fmt: skip
    meta["predictions"] = os.path.abspath(predictions)
    preds, pred_report = load_predictions(predictions, samples, strict=strict, on_duplicate=on_duplicate)
    results = results_from_predictions(samples, preds, pred_report)
    metrics = bench.metrics(samples, results)
    doc = write_reports(out_dir, bench, samples, results, metrics, preds, prediction_report=pred_report,
                        load_report=load_report, meta=meta, max_failures=max_failures)  # fmt: skip
    print(bench.table(metrics))
    print(f"\nwrote {os.path.join(out_dir, 'metrics.json')}, results.md and failures.html")
    return doc
