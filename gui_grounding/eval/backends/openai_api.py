"""``openai`` backend: any OpenAI-compatible chat-completions endpoint (``vllm serve``, SGLang, hosted APIs).

* Each sample is one ``chat.completions.create`` call: the adapter's messages, its image as a base64 **PNG** data
  URL in an ``image_url`` part (lossless, so the server sees exactly the adapter's frame), ``temperature=0``,
  ``max_tokens=max_new_tokens``, and a profile's published settings on top (``decoding``: e.g. UI-TARS-1.5's
  ``frequency_penalty=1`` with no temperature, bytedance/UI-TARS ``README_v1.md:324-337`` at 582f3a7). Requests run in a thread pool (``concurrency``); lines are written in sample
  order as soon as all earlier samples are done, so the file stays ordered and an interrupted run loses only the
  requests in flight.
* Retries: connection errors and timeouts, HTTP 429, 408 and 5xx are retried up to ``max_retries`` times with
  exponential backoff (``retry_backoff * 2**attempt`` seconds, at most 60); other HTTP errors (400, 401, 404, ...)
  are not. A request that still fails is written with ``point: null``, the error text in ``raw_response`` and an
  ``"error"`` key; failures are logged and counted, and the next run on the same file retries them.
* Frames: no processor runs here; every screenshot is resized by the run's pixel budget (``budget``, resolved by
  ``run_eval``: flag, profile, else the adapter's published budget) before it is sent (twice for a budget that
  ``reshrinks``: the Qwen2.5-VL harness's image is shrunk again to 12,845,056 pixels, as its processor did). The
  server must not resize again: its processor's bounds must contain the image (Qwen2.5-VL's default, 3,136 ..
  12,845,056 pixels, does for the published budgets; for larger ones start the server with e.g.
  ``vllm serve MODEL --mm-processor-kwargs '{"max_pixels": 99999999}'``).

Needs the ``openai`` package: ``pip install -e .[api]``.
"""

from __future__ import annotations

import logging
import os
import time
from concurrent.futures import ThreadPoolExecutor

from gui_grounding.eval.backends import (
    check_decoding,
    greedy_settings,
    load_image,
    open_predictions,
    openai_messages,
    record,
    sampling_settings,
    write_records,
)
from gui_grounding.eval.engine import Draw
from gui_grounding.models.adapters import resolve_adapter

logger = logging.getLogger(__name__)

MAX_BACKOFF_S = 60.0


def _import_openai():
    try:
        import openai
    except ImportError as err:
        raise ImportError(
            "the openai backend needs the `openai` package: pip install -e .[api]  (or pip install 'openai>=1.40')"
        ) from err
    return openai


def _retryable(openai, err: Exception) -> bool:
    """Connection errors / timeouts, and HTTP 408, 429 and 5xx."""
    if isinstance(err, openai.APIConnectionError):  # includes APITimeoutError
        return True
    if isinstance(err, openai.APIStatusError):
        return err.status_code >= 500 or err.status_code in (408, 429)
    return False


class _Failed(Exception):
    """A request that failed for good (after retries, or not retryable)."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


def _with_retries(openai, stats: dict, sample_id: str, max_retries: int, retry_backoff: float, send):
    """``send()`` with up to ``max_retries`` retries of retryable errors (exponential backoff, capped at
    :data:`MAX_BACKOFF_S`); counts ``stats["retries"]``.

    Raises:
        _Failed: the last error (``"Type: message"``), logged as a warning.
    """
    for attempt in range(max_retries + 1):
        try:
            return send()
        except Exception as err:  # noqa: BLE001  (classified below; anything else is recorded, not raised)
            if attempt < max_retries and _retryable(openai, err):
                delay = min(MAX_BACKOFF_S, retry_backoff * 2**attempt)
                stats["retries"] += 1
                logger.info(
                    "%s: %s: %s; retry %d/%d in %.2f s",
                    sample_id,
                    type(err).__name__,
                    err,
                    attempt + 1,
                    max_retries,
                    delay,
                )
                time.sleep(delay)
                continue
            message = f"{type(err).__name__}: {err}"
            logger.warning("%s: request failed after %d attempt(s): %s", sample_id, attempt + 1, message)
            raise _Failed(message) from None
    raise AssertionError("unreachable")


class OpenAIEngine:
    """Test-time grounding against an OpenAI-compatible endpoint (:class:`gui_grounding.eval.engine.Engine`): requests in
    a thread pool (``concurrency``); K samples asked as ``n=K`` with the sample's ``seed`` (vLLM and OpenAI honour
    both); a server that returns fewer choices than asked (one that ignores ``n``) is asked again, ``n`` = the
    shortfall and ``seed + calls``, until K answers are in (at most K calls). Cost from each response's ``usage``
    (``prompt_tokens``, ``completion_tokens``; 0 when a server sends none)."""

    name = "openai"
    sampling_note = "n=K per request with a seed; repeated calls fill a shortfall"

    def __init__(self, create, *, concurrency: int, stats: dict, decoding: dict | None = None):
        self.create, self.concurrency, self.stats = create, concurrency, stats
        self.chunk_size = max(8, 4 * concurrency)
        self.requests = 0
        self.decoding = dict(decoding or {})

    def _one(self, request, n, temperature, top_p, seed):
        sid = request.context.get("sample_id", "?")
        texts, calls, prompt_tokens, generated = [], 0, 0, 0
        try:
            while len(texts) < n and calls < n:
                ask = n - len(texts)
                params = greedy_settings(self.decoding) if not temperature else {"temperature": temperature}
                if temperature:
                    params.update(sampling_settings(self.decoding))
                    params.update(n=ask, top_p=top_p, seed=None if seed is None else (seed + calls) & 0x7FFFFFFF)
                calls += 1  # an attempted request counts, also when it fails for good
                resp = self.create(sid, request, **params)
                usage = getattr(resp, "usage", None)
                prompt_tokens += int(getattr(usage, "prompt_tokens", 0) or 0)
                generated += int(getattr(usage, "completion_tokens", 0) or 0)
                texts += [(c.message.content or "") for c in (resp.choices or [])][:ask]
        except _Failed as err:
            self.stats["failed"] += 1
            return Draw([], calls, prompt_tokens, generated, error=err.message)
        return Draw(texts, calls, prompt_tokens, generated)

    def generate(self, requests, *, n, temperature, top_p=1.0, seeds=None):
        self.requests += len(requests)
        with ThreadPoolExecutor(max_workers=self.concurrency, thread_name_prefix="openai-tts") as pool:
            futures = [
                pool.submit(self._one, r, n, temperature, top_p, seeds[i] if seeds else None)
                for i, r in enumerate(requests)
            ]
            return [f.result() for f in futures]


def predict_openai(
    model: str,
    samples: list,
    out_path: str,
    *,
    adapter,
    base_url: str | None = None,
    api_key: str | None = None,
    concurrency: int = 8,
    max_retries: int = 5,
    retry_backoff: float = 1.0,
    max_new_tokens: int = 32,
    timeout: float = 120.0,
    budget=None,
    extra_body: dict | None = None,
    tts=None,
    decoding: dict | None = None,
) -> str:
    """Write predictions of the served ``model`` for ``samples`` to ``out_path`` (resumable; appends).

    Args:
        model: model name as the server knows it (``vllm serve PATH`` serves it as ``PATH`` unless
            ``--served-model-name`` is given).
        samples: canonical samples (original pixels).
        out_path: predictions JSONL.
        adapter: adapter name or instance (required: a served model has no local config to infer it from).
        base_url: endpoint base, e.g. ``http://localhost:8000/v1``; default ``$OPENAI_BASE_URL``, else that URL.
        api_key: default ``$OPENAI_API_KEY``, else ``"EMPTY"`` (vLLM accepts any key unless started with one).
        concurrency: requests in flight at once (threads).
        max_retries: retries per request after the first attempt (retryable errors only).
        retry_backoff: first backoff delay in seconds; doubles per retry, capped at 60 s.
        max_new_tokens: generation budget per answer (sent as ``max_tokens``).
        timeout: seconds per HTTP request.
        budget: the run's :class:`groundwork.pixel_budget.PixelBudget` (``None``: the adapter's published
            ``default_budget``).
        extra_body: extra JSON fields for the server (e.g. vLLM's ``{"top_k": 1}``).
        tts: a :class:`gui_grounding.eval.tts.TTSConfig` (``None`` or mode ``greedy``: one greedy request per
            sample); other modes go to ``tts.run`` (:meth:`gui_grounding.eval.tts.TTSConfig.run`) with :class:`OpenAIEngine`.
        decoding: a profile's published generation settings (``Profile.decoding``, e.g. UI-TARS-1.5's
            ``{"frequency_penalty": 1.0, "temperature": None}``): request fields of every greedy request
            (:func:`gui_grounding.eval.backends.greedy_settings`; ``temperature: None`` is not sent, the server's
            default); sampled requests keep their own temperature/top_p and add the penalty. ``None``: greedy,
            ``temperature=0``.

    Returns:
        ``out_path``.

    Raises:
        ImportError: ``openai`` is not installed (names ``pip install -e .[api]``).
        ValueError: ``adapter`` is None, ``concurrency``/``max_retries`` out of range, or invalid ``decoding``.
    """
    decoding = check_decoding(decoding, "openai")
    openai = _import_openai()
    from tqdm.auto import tqdm

    if adapter is None:
        raise ValueError("the openai backend needs an explicit adapter (e.g. 'gta1', 'ui-tars-1.5', 'qwen2-vl')")
    if concurrency < 1 or max_retries < 0:
        raise ValueError(f"need concurrency >= 1 and max_retries >= 0, got {concurrency}, {max_retries}")
    adapter = resolve_adapter(adapter)
    budget = budget or adapter.default_budget
    client = openai.OpenAI(
        base_url=base_url or os.environ.get("OPENAI_BASE_URL") or "http://localhost:8000/v1",
        api_key=api_key or os.environ.get("OPENAI_API_KEY") or "EMPTY",
        max_retries=0,
        timeout=timeout,
    )
    stats = {"retries": 0, "failed": 0}

    def create(sample_id: str, request, **params):
        """One chat completion with retries (retryable errors only); raises :class:`_Failed` after the last."""
        body = extra_body
        if request.assistant_prefix:  # continue the forced assistant prefix (vLLM's chat extension)
            body = {**(extra_body or {}), "continue_final_message": True, "add_generation_prompt": False}
        return _with_retries(
            openai,
            stats,
            sample_id,
            max_retries,
            retry_backoff,
            lambda: client.chat.completions.create(
                model=model, messages=openai_messages(request), max_tokens=max_new_tokens, extra_body=body, **params
            ),
        )

    def call(sample) -> dict:
        request = adapter.build_request(sample, load_image(sample), budget=budget)
        try:
            resp = create(sample.sample_id, request, **greedy_settings(decoding))
        except _Failed as err:
            stats["failed"] += 1
            return record(sample, request, f"ERROR: {err.message}", adapter, error=err.message)
        text = (resp.choices[0].message.content or "") if resp.choices else ""
        return record(sample, request, text, adapter)

    if tts is not None and tts.active:
        engine = OpenAIEngine(create, concurrency=concurrency, stats=stats, decoding=decoding)
        tts.run(engine, samples, out_path, adapter=adapter, budget=budget)
        logger.info(
            "openai backend: %d requests, %d retries, %d failed", engine.requests, stats["retries"], stats["failed"]
        )
        return out_path

    out, todo = open_predictions(out_path, samples)
    pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="openai-predict")
    try:
        with out, tqdm(total=len(todo), desc="predict", unit="sample") as bar:
            futures = [pool.submit(call, s) for s in todo]
            for fut in futures:  # sample order; later requests keep running meanwhile
                write_records(out, [fut.result()])
                bar.update(1)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    if stats["failed"]:
        logger.warning(
            "%d of %d requests failed after retries (point null, error in raw_response); rerun on %s to retry them",
            stats["failed"],
            len(todo),
            out_path,
        )
    logger.info("openai backend: %d requests, %d retries, %d failed", len(todo), stats["retries"], stats["failed"])
    return out_path
