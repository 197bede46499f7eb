"""``run_eval``: one evaluation run (a benchmark x a model or a predictions file -> reports); the package docstring
(:mod:`gui_grounding.eval`) names the axes."""

from __future__ import annotations

import logging
import os

from groundwork import validate
from groundwork.outputs import OutputLock, check_outputs
from groundwork.records import DataFileError
from gui_grounding.data.annotations import EvalInputError
from gui_grounding.eval.backends import check_decoding, checkpoint_adapter, predict
from gui_grounding.eval.benchmarks import get_benchmark
from gui_grounding.eval.budget import resolve_eval_budget
from gui_grounding.eval.predictions import (
    ON_DUPLICATE,
    PREDICTION_FORMATS,
    load_predictions,
    results_from_predictions,
    show_path,
)
from gui_grounding.eval.report import remove_summary, write_reports
from gui_grounding.eval.tables import fmt_headline
from gui_grounding.eval.tts import tts_run
from gui_grounding.models.adapters import resolve_adapter
from gui_grounding.models.profiles import get_profile
from vlm_r1.modules import get_vlm_module

logger = logging.getLogger(__name__)

#: ``max_new_tokens`` when neither the flag nor a profile gives one (GTA1's inference snippet: 32)
DEFAULT_MAX_NEW_TOKENS = 32


#: backend options checked by :func:`run_eval` (name -> smallest value); ``min_pixels <= max_pixels`` too
_BACKEND_MINIMUMS = {
    "batch_size": 1,
    "max_new_tokens": 1,
    "concurrency": 1,
    "max_retries": 0,
    "min_pixels": 1,
    "max_pixels": 1,
    "max_tiles": 1,
}


def _check_int(name: str, value, minimum: int, *, optional: bool = False) -> None:
    """``value`` is an integer (not a boolean) ``>= minimum`` (or None when ``optional``).

    Raises:
        ValueError: naming the option and the value.
    """
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")


def check_eval_options(limit, max_failures, backend_kwargs: dict) -> None:
    """The numeric options of :func:`run_eval` (API callers get what ``gui-grounding eval``'s argparse types give
    the command line).

    Raises:
        ValueError: ``limit`` < 1, ``max_failures`` < 0, a backend option out of range (``batch_size``,
            ``max_new_tokens``, ``concurrency``, ``min_pixels``, ``max_pixels`` >= 1; ``max_retries`` >= 0), or
            ``min_pixels`` > ``max_pixels``.
    """
    _check_int("limit", limit, 1, optional=True)
    _check_int("max_failures", max_failures, 0)
    for name, minimum in _BACKEND_MINIMUMS.items():
        if name in backend_kwargs:
            _check_int(
                name,
                backend_kwargs[name],
                minimum,
                optional=name in ("min_pixels", "max_pixels", "max_tiles", "max_new_tokens"),
            )
    lo, hi = backend_kwargs.get("min_pixels"), backend_kwargs.get("max_pixels")
    if lo is not None and hi is not None and lo > hi:
        raise ValueError(f"min_pixels ({lo}) must not exceed max_pixels ({hi})")


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
    predictions_format: str = "auto",
    profile: str | None = None,
    tts=None,
    **backend_kwargs,
) -> dict:
    """Evaluate on ``benchmark``: predict with ``model`` (then score) or rescore a ``predictions`` file.

    Outputs (``groundwork.outputs``): ``out_dir`` is checked before any input is read (it must not be an existing file,
    the ``data`` folder/file or the ``predictions`` file, and must be writable) and locked for the whole run (a
    second eval on the same folder fails at once). ``predictions.jsonl`` (model mode) is appended line by line and
    resumable; ``results.md``, ``failures.html`` and ``metrics.json`` are written atomically, ``metrics.json`` last
    (an earlier one is removed when the run starts), so a complete-looking summary never sits beside missing or
    truncated outputs.

    Images: predicting needs every screenshot, so a missing or unreadable image is an error of its record (not
    scored, counted in ``metrics.json["data"]``). **Rescoring needs no pixels**: the benchmark is read with
    ``need_pixels = False``, which keeps such a sample in the denominator (the official harness scores every
    annotated record), with an ``image_unavailable`` warning; its size comes from the record where the benchmark
    states one (ScreenSpot-Pro ``img_size``), otherwise it is unknown (0x0) and its box-vs-image checks are skipped
    (``image_unavailable_size_unknown``). Its failure card says "image missing".

    Args:
        benchmark: a name of ``gui_grounding.eval.benchmarks.BENCHMARKS``.
        data: the benchmark folder laid out as published (canonical: a JSONL file or a folder with test.jsonl).
        out_dir: output folder: ``predictions.jsonl`` (model mode), ``metrics.json``, ``results.md``,
            ``failures.html``.
        model: checkpoint (hf, vllm) or served model name (openai) to predict with.
        predictions: predictions file (points in original pixels) or a ScreenSpot-Pro harness log to rescore.
        backend: ``hf``, ``openai`` or ``vllm``.
        adapter: adapter name; default: from the checkpoint's ``config.model_type`` (required for openai).
        limit: evaluate only the first ``limit`` samples (an integer >= 1, or None for all).
        strict: stop at the first bad record / prediction line instead of counting it.
        benchmark_options: passed to the benchmark (e.g. OSWorld-G ``subset``, WebClick ``cache_dir``).
        max_failures: at most this many wrong samples drawn in ``failures.html`` (>= 0).
        on_duplicate: several predictions for one sample: ``"error"`` (default: refuse the file, naming them),
            ``"first"`` or ``"last"`` (that line counts; the others are counted in ``duplicates``). ScreenSpot-Pro
            harness logs are exempt from ``"error"`` (see ``gui_grounding.eval.predictions``).
        predictions_format: ``"auto"`` (a harness log only by its full published shape), ``"jsonl"`` /
            ``"json-list"`` (our predictions), ``"harness-log"`` (``gui_grounding.eval.predictions``).
        profile: a :mod:`gui_grounding.models.profiles` name: its adapter, pixel budget, ``max_new_tokens`` and benchmark
            options apply unless given explicitly, its reading of the family's no-target answer
            (``Profile.refusal``) and its published generation settings (``Profile.decoding``, sent as the backend
            can: ``gui_grounding.eval.backends.check_decoding``) apply with its own adapter, and
            ``metrics.json``/``results.md`` show its published numbers next to ours (``published``).
        tts: a :class:`gui_grounding.eval.tts.TTSConfig` (``None``: greedy). A test-time mode predicts (model mode)
            or reads (rescoring: ``"samples"`` for consensus, ``tts.point`` for zoom modes) the mode's answer per
            sample, and the run writes both: ``metrics.json``'s tables are the mode's, ``"greedy"`` holds the
            greedy tables of the same predictions, ``"tts"`` the settings, cost per answer, agreement calibration
            and the samples the two disagree on; ``results.md`` shows both tables, ``calibration.png`` the
            calibration (consensus modes). Greedy (the default) writes exactly what it wrote before.
        **backend_kwargs: backend options (batch_size, max_new_tokens, base_url, ...) and the pixel-budget flags
            ``min_pixels``, ``max_pixels``, ``max_tiles``, which are resolved once with the profile, the checkpoint's
            recorded budget and the adapter's published one (``gui_grounding.eval.budget``) and given to the
            backend as ``budget``.

    Returns:
        the metrics document written to ``metrics.json``.

    Raises:
        ValueError: neither or both of ``model`` and ``predictions``; unknown benchmark, backend, adapter,
            ``on_duplicate`` or ``predictions_format``; a numeric option out of range (:func:`check_eval_options`).
        EvalInputError: duplicate sample ids in the benchmark, duplicate predictions (``on_duplicate="error"``), an
            unreadable predictions file, or no usable sample.
        OutputError: ``out_dir`` is unusable (a file, an input, not writable), locked by another run, or a write
            fails (disk full); no ``metrics.json`` is left behind.
    """

    _check_run_options(model, predictions, on_duplicate, predictions_format, limit, max_failures, backend_kwargs)
    budget_flags = {k: backend_kwargs.pop(k, None) for k in ("min_pixels", "max_pixels", "max_tiles")}
    prof, adapter, benchmark_options = _apply_profile(profile, benchmark, model, backend, adapter, benchmark_options)
    if backend_kwargs.get("max_new_tokens") is None:
        backend_kwargs["max_new_tokens"] = prof.max_new_tokens if prof else DEFAULT_MAX_NEW_TOKENS
    if model is not None and backend == "openai" and adapter is None:
        raise ValueError("--backend openai needs --adapter (the served model's prompt/coordinate convention)")
    if model is not None and prof is not None and prof.decoding and adapter == prof.adapter:
        # the profile's published generation settings (Profile.decoding), refused here when the backend cannot send
        # them as published (gui_grounding.eval.backends.check_decoding), before anything is read or loaded
        backend_kwargs["decoding"] = check_decoding(prof.decoding, backend)
    check_outputs(folders=[out_dir], inputs=[data, predictions])
    check_outputs(files=[os.path.join(out_dir, n) for n in _output_names(model, tts)], inputs=[data, predictions])
    with OutputLock(out_dir, folder=True):
        remove_summary(os.path.join(out_dir, "metrics.json"))  # an earlier run's summary must not outlive its outputs
        bench, samples, load_report = _load_benchmark(
            benchmark, data, benchmark_options, strict, limit, need_pixels=model is not None
        )
        meta = {
            "benchmark": benchmark,
            "data": os.path.abspath(data),
            "num_samples": len(samples),
            "on_duplicate": on_duplicate,
            "predictions_format": predictions_format,
        }
        if model is not None:
            predictions = _predict(
                model, backend, adapter, budget_flags, prof, samples, out_dir, tts, backend_kwargs, meta
            )
        meta["predictions"] = os.path.abspath(predictions)
        preds, pred_report = load_predictions(
            predictions, samples, strict=strict, on_duplicate=on_duplicate, format=predictions_format
        )
        results = results_from_predictions(samples, preds, pred_report)
        metrics = bench.score(samples, results)
        if prof is not None:
            meta["profile"] = prof.name
            metrics["published"] = _published(prof, bench, benchmark_options, metrics)
        tts_report = None
        if tts is not None and tts.mode != "greedy":
            tts_report = _test_time_scaling(bench, samples, preds, results, metrics, tts)
            meta["tts"] = tts.to_dict()
            results, metrics = tts_report["results"], tts_report["metrics"]
        doc = write_reports(
            out_dir,
            bench,
            samples,
            results,
            metrics,
            preds,
            prediction_report=pred_report,
            load_report=load_report,
            meta=meta,
            max_failures=max_failures,
            tts=tts_report,
        )
    if tts_report is not None:
        greedy = tts_report["greedy_metrics"]
        print(f"greedy (same run):\n{fmt_headline(greedy['headline'], bench.name)}\n\n{bench.table(greedy)}\n")
        print(f"{tts_report['label']}:")
    print(fmt_headline(metrics["headline"], bench.name) + "\n")
    print(bench.table(metrics))
    print(f"\nwrote {show_path(os.path.join(out_dir, 'metrics.json'))}, results.md, scores.jsonl and failures.html")
    return doc


def _check_run_options(
    model, predictions, on_duplicate: str, predictions_format: str, limit, max_failures, backend_kwargs: dict
) -> None:
    """The arguments of :func:`run_eval`, before anything is read: exactly one of ``model`` / ``predictions``, a
    known ``on_duplicate`` and ``predictions_format``, the numeric options (:func:`check_eval_options`).

    Raises:
        ValueError: one line naming the argument and its value.
    """
    if (model is None) == (predictions is None):
        raise ValueError("give exactly one of model (predict, then score) or predictions (rescore a file)")
    if on_duplicate not in ON_DUPLICATE:
        raise ValueError(f"on_duplicate must be one of {', '.join(ON_DUPLICATE)}, got {on_duplicate!r}")
    if predictions_format not in PREDICTION_FORMATS:
        raise ValueError(
            f"predictions_format must be one of {', '.join(PREDICTION_FORMATS)}, got {predictions_format!r}"
        )
    check_eval_options(limit, max_failures, backend_kwargs)


def _apply_profile(profile: str | None, benchmark: str, model, backend: str, adapter, benchmark_options):
    """``(profile or None, adapter, benchmark_options)``: a :mod:`gui_grounding.models.profiles` profile's adapter
    and benchmark options, each unless given explicitly (a warning when ``backend`` is not one the profile lists)."""
    if profile is None:
        return None, adapter, benchmark_options
    prof = get_profile(profile)
    adapter = adapter or prof.adapter
    benchmark_options = {**prof.options_for(benchmark), **(benchmark_options or {})}
    if model is not None and backend not in prof.backends:
        logger.warning(
            "profile %s lists the backends %s for %s; --backend %s may not fit it",
            prof.name,
            ", ".join(prof.backends),
            prof.model,
            backend,
        )
    return prof, adapter, benchmark_options


def _output_names(model, tts) -> tuple[str, ...]:
    """The files a run writes in its output folder (checked, all of them, before any input is read)."""
    names = ("metrics.json", "results.md", "failures.html", "scores.jsonl")
    names += ("predictions.jsonl",) if model is not None else ()
    names += ("calibration.png",) if tts is not None and tts.uses_consensus else ()
    return names


def _load_benchmark(benchmark: str, data: str, benchmark_options, strict: bool, limit, *, need_pixels: bool):
    """``(benchmark, samples, load report)``: the benchmark's records (the first ``limit``) read from ``data``;
    ``need_pixels`` False (rescoring) keeps a sample whose image is missing in the denominator.

    Raises:
        EvalInputError: a benchmark file that is not JSON text (one line), or no usable sample.
    """

    bench = get_benchmark(benchmark, **(benchmark_options or {}))
    bench.need_pixels = need_pixels
    try:
        samples, load_report = bench.load(data, strict=strict)
    except DataFileError as err:  # a benchmark file that is not JSON text (gzip, UTF-16, ...): one line
        raise EvalInputError(f"{show_path(err.ref)}: {err.message}") from None
    if limit is not None:
        samples = samples[:limit]
    if not samples:
        raise EvalInputError(_no_samples_message(benchmark, data, load_report, show_path))
    return bench, samples, load_report


def _predict(
    model: str, backend: str, adapter, budget_flags: dict, prof, samples, out_dir: str, tts, backend_kwargs, meta
):
    """Model mode: refuse images the model cannot take (:func:`_refuse_unsupported_images`,
    :func:`_refuse_unsendable_images`), predict every sample into ``out_dir/predictions.jsonl`` (resumable) and
    record the run's model, backend, adapter, options (never ``api_key``) and pixel budget in ``meta``. Returns the
    predictions file."""

    limits = _refuse_unsupported_images(model, backend, samples, show_path)
    run_adapter, budget, budget_warnings = _resolve_model_settings(model, backend, adapter, budget_flags, prof, limits)
    if tts is not None and tts.uses_zoom_tool and not run_adapter.supports_zoom_tool:
        raise ValueError(
            f"--tts zoom-tool needs an adapter with a tool-call format (supports_zoom_tool: the gta1 family, "
            f"qwen3-vl); {run_adapter.name} has none"
        )
    _refuse_unsendable_images(budget, samples, show_path)
    extra = {"tts": tts} if tts is not None and tts.mode != "greedy" else {}
    predictions = predict(
        backend,
        model,
        samples,
        os.path.join(out_dir, "predictions.jsonl"),
        adapter=run_adapter,
        budget=budget,
        **extra,
        **backend_kwargs,
    )
    if run_adapter.no_target is not None:  # how the family's no-target answer was read (Adapter.refusal_reading)
        meta["refusal_reading"] = run_adapter.refusal_reading
    if backend_kwargs.get("decoding"):  # a profile's published generation settings, as sent
        meta["decoding"] = dict(backend_kwargs["decoding"])
    meta.update(
        model=model,
        backend=backend,
        adapter=run_adapter.name,
        backend_options={k: v for k, v in backend_kwargs.items() if k not in ("api_key", "decoding")},
        pixel_budget=budget.to_dict(),
        pixel_budget_warnings=budget_warnings,
    )
    return predictions


def _published(prof, bench, benchmark_options, metrics: dict) -> dict:
    """``metrics["published"]``: the profile's published numbers beside our headline over each number's own
    denominator (``Benchmark.headline``), compared under the options the run measured with (the benchmark options
    and the subset the metrics report; the denominator is not an option to match: every denominator is measured)."""
    measured_with = {
        **{k: v for k, v in (benchmark_options or {}).items() if k != "denominator"},
        **({"subset": metrics["subset"]} if "subset" in metrics else {}),
    }
    rows = prof.comparison(bench.name, measured_with, lambda d: bench.headline(metrics, d))
    return {"profile": prof.name, "model": prof.model, "rows": rows}


def _test_time_scaling(bench, samples, preds, results, metrics: dict, tts) -> dict:
    """The test-time mode's report (``gui_grounding.eval.tts.tts_run``): its results and metrics, the greedy ones of
    the same predictions, and the label of its table."""

    return tts_run(bench, samples, preds, results, metrics, tts)


def _refuse_unsupported_images(model: str, backend: str, samples, show_path):
    """Before any request: every sample's image must be one the checkpoint's family can take
    (``VLMBaseModule.image_limits``: aspect ratio, smallest side), else the run is refused with one line naming how
    many and the first (a model call would fail mid-run, or the sample would need dropping, which changes the
    official denominator). The openai backend serves a remote model whose family is not known here: not checked.

    Returns:
        the family's :class:`groundwork.validate.ImageLimits`, or ``None`` when the family is not known here.

    Raises:
        EvalInputError: samples outside the family's limits.
    """
    if backend == "openai":
        return None

    try:
        limits = get_vlm_module(model).image_limits()
    except (ValueError, OSError):  # not a checkpoint of a known family: the backend says what is wrong
        return None
    bad = []
    for s in samples:
        try:
            limits.check(s.width, s.height, f"{s.sample_id} ({show_path(s.image_path)})")
        except validate.Invalid as err:
            bad.append(err.message)
    if bad:
        raise EvalInputError(
            f"{len(bad)} sample(s) have images the {limits.family} model cannot take "
            f"(image_unsupported); first: {bad[0]}"
        )
    return limits


def _refuse_unsendable_images(budget, samples, show_path) -> None:
    """Before any request: every sample's image must be sendable under the run's pixel budget
    (``PixelBudget.size_sent``: a too-thin image would be resized twice by the processor, or refused by it), else the
    run is refused with one line naming how many and the first (``image_unsupported``; dropping them would change the
    official denominator).

    Raises:
        EvalInputError: samples the budget cannot send.
    """
    bad = []
    for s in samples:
        try:
            budget.size_sent(s.width, s.height)
        except ValueError as err:
            bad.append(f"{s.sample_id} ({show_path(s.image_path)}): {err}")
    if bad:
        raise EvalInputError(
            f"{len(bad)} sample(s) have images that cannot be sent under the pixel budget "
            f"(image_unsupported; a larger --max-pixels may fit them); first: {bad[0]}"
        )


def _resolve_model_settings(model: str, backend: str, adapter, budget_flags: dict, profile, limits):
    """``(adapter, budget, warnings)`` of a model run: the adapter (given, else the checkpoint's default; the openai
    backend needs one), configured by the profile (``Profile.configure``: its reading of the family's no-target
    answer), and the pixel budget resolved once (``gui_grounding.eval.budget.resolve_eval_budget``), logged with every
    value's source."""

    run_adapter = resolve_adapter(adapter) if adapter is not None else checkpoint_adapter(model)
    if profile is not None:
        run_adapter = profile.configure(run_adapter)
    local = model if backend != "openai" else None
    budget, warnings = resolve_eval_budget(run_adapter, model=local, flags=budget_flags, profile=profile, limits=limits)
    logger.info("adapter %s, %s", run_adapter.name, budget.describe())
    return run_adapter, budget, warnings


def _no_samples_message(benchmark: str, data: str, report, show_path) -> str:
    """One line: no usable sample, with the counts and the first error's own message (what is actually wrong)."""
    rejects = getattr(report, "rejects", [])
    line = f"no usable samples in {show_path(data)} for {benchmark}: {getattr(report, 'num_records', 0)} records read"
    if rejects:
        ref, reason, message = rejects[0]
        counts = ", ".join(f"{k} {v}" for k, v in sorted(getattr(report, "counts", {}).items()))
        line += f", {len(rejects)} errors ({counts}); first: {ref}: {reason}: {message}"
    return " ".join(line.split())[:2000]
