"""Evaluation on GUI grounding benchmarks, from a model or from a predictions file.

Three separate axes, combined at run time (lm-evaluation-harness style):

* benchmarks (``gui_grounding.eval.benchmarks``): ScreenSpot-V2, ScreenSpot-Pro, OSWorld-G, WebClick and our
  canonical JSONL; each reads its published layout and computes its own metric tables;
* backends (``gui_grounding.eval.backends``): ``hf`` (transformers), ``openai`` (any OpenAI-compatible endpoint),
  ``vllm`` (offline engine);
* adapters (``gui_grounding.models.adapters``): the prompt and coordinate frame of a model family.

One scorer (``gui_grounding.eval.judge``) judges every prediction; ``gui_grounding.eval.report`` writes
``metrics.json``, ``results.md`` and ``failures.html``; :func:`gui_grounding.eval.run.run_eval` runs one evaluation.
The package itself imports nothing, so a module of one layer above (training's held-out evaluation) can use one eval
module without loading the rest.
"""
