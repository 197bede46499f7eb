"""``vllm`` backend: an offline ``vllm.LLM`` engine on this machine's GPUs (``pip install -e .[gpu]``).

* Engine: ``vllm.LLM(model, limit_mm_per_prompt={"image": 1}, mm_processor_kwargs={"min_pixels", "max_pixels"})``
  (``--tts zoom-tool``: ``1 + max_zoom_calls`` images per prompt, the screenshot and its crops);
  chats go through ``llm.chat`` (OpenAI-format messages, each image as a base64 PNG data URL) with greedy
  ``SamplingParams(temperature=0, max_tokens=max_new_tokens)``; vLLM decodes with ``skip_special_tokens=True``, as
  the hf backend does.
* Frames: the run's pixel budget (:class:`groundwork.pixel_budget.PixelBudget`, resolved by ``run_eval``) resizes each
  screenshot (the adapter's request; twice for a budget that ``reshrinks``, the Qwen2.5-VL harness's) and is given to
  vLLM's processor (``mm_processor_kwargs`` min/max pixels: ``PixelBudget.processor_bounds``), whose smart_resize is
  then the identity.
* Resumable like the other backends; samples go to the engine in chunks of ``chunk_size`` (vLLM batches inside a
  chunk) and each chunk's lines are written before the next starts.

vLLM is imported lazily: without it this module raises ``ImportError`` naming ``pip install -e .[gpu]``.
"""

from __future__ import annotations

import logging

from gui_grounding.eval.backends import (
    check_decoding,
    checkpoint_adapter,
    greedy_settings,
    load_image,
    open_predictions,
    openai_messages,
    record,
    sampling_settings,
    write_records,
)
from gui_grounding.eval.budget import resolve_eval_budget
from gui_grounding.eval.engine import Draw

logger = logging.getLogger(__name__)


def _import_vllm():
    try:
        import vllm
    except ImportError as err:
        raise ImportError(
            "the vllm backend needs vLLM (CUDA GPUs): pip install -e .[gpu]  (or use --backend hf, "
            "or --backend openai against a `vllm serve` endpoint)"
        ) from err
    return vllm


class VLLMEngine:
    """Test-time grounding on an offline ``vllm.LLM`` (:class:`gui_grounding.eval.engine.Engine`): one ``llm.chat`` per
    chunk; greedy with the greedy run's ``SamplingParams(temperature=0, max_tokens)``, K samples with one
    ``SamplingParams(n=K, temperature, top_p, seed=<the sample's seed>, max_tokens)`` per request (vLLM prefills the
    prompt once for its n sequences; a per-request seed makes the draws independent of batching). Cost: one call per
    request, ``len(prompt_token_ids)`` prompt tokens, the sum of ``len(token_ids)`` over the n outputs."""

    name = "vllm"
    sampling_note = "SamplingParams(n=K, seed per sample): one prefill per prompt"

    def __init__(self, vllm, llm, *, max_new_tokens: int, chunk_size: int, decoding: dict | None = None):
        self.vllm, self.llm, self.max_new_tokens, self.chunk_size = vllm, llm, max_new_tokens, chunk_size
        self.decoding = dict(decoding or {})

    def generate(self, requests, *, n, temperature, top_p=1.0, seeds=None):
        if not requests:
            return []
        if n == 1 and not temperature:
            params = self.vllm.SamplingParams(**greedy_settings(self.decoding), max_tokens=self.max_new_tokens)
        else:
            params = [
                self.vllm.SamplingParams(
                    n=n,
                    temperature=temperature,
                    top_p=top_p,
                    seed=int(seeds[i]) if seeds else None,
                    max_tokens=self.max_new_tokens,
                    **sampling_settings(self.decoding),
                )
                for i in range(len(requests))
            ]
        prefix = bool(requests[0].assistant_prefix)  # one adapter per run: all or none
        outputs = self.llm.chat(
            [openai_messages(r) for r in requests],
            sampling_params=params,
            use_tqdm=False,
            continue_final_message=prefix,
            add_generation_prompt=not prefix,
        )
        return [
            Draw(
                [o.text for o in out.outputs],
                1,
                len(getattr(out, "prompt_token_ids", None) or []),
                sum(len(getattr(o, "token_ids", None) or []) for o in out.outputs),
            )
            for out in outputs
        ]


def predict_vllm(
    model_path: str,
    samples: list,
    out_path: str,
    *,
    adapter=None,
    budget=None,
    max_new_tokens: int = 32,
    chunk_size: int = 256,
    tensor_parallel_size: int = 1,
    gpu_memory_utilization: float = 0.9,
    max_model_len: int | None = None,
    dtype: str = "auto",
    llm_kwargs: dict | None = None,
    tts=None,
    decoding: dict | None = None,
) -> str:
    """Write predictions of checkpoint ``model_path`` for ``samples`` to ``out_path`` with vLLM (resumable).

    Args:
        model_path: checkpoint directory or hub id vLLM supports (Qwen2-VL, Qwen2.5-VL, Qwen3-VL, ...).
        samples: canonical samples (original pixels).
        out_path: predictions JSONL.
        adapter: adapter name or instance; ``None`` -> ``default_adapter_for(config.model_type)``.
        budget: the run's :class:`groundwork.pixel_budget.PixelBudget` (``None``: resolved as ``run_eval`` does without
            flags or profile: the checkpoint's recorded budget, else the adapter's published one).
        max_new_tokens: generation budget per answer (greedy).
        chunk_size: samples per ``llm.chat`` call (and per file write).
        tensor_parallel_size, gpu_memory_utilization, max_model_len, dtype: ``vllm.LLM`` arguments.
        llm_kwargs: further ``vllm.LLM`` keyword arguments.
        tts: a :class:`gui_grounding.eval.tts.TTSConfig` (``None`` or mode ``greedy``: the greedy run above); other
            modes go to ``tts.run`` (:meth:`gui_grounding.eval.tts.TTSConfig.run`) with :class:`VLLMEngine`.
        decoding: a profile's published generation settings (``Profile.decoding``): ``SamplingParams`` fields of the
            greedy pass (:func:`gui_grounding.eval.backends.greedy_settings`; sampled passes add the penalty only).
            ``temperature: None`` (a server's default) is refused (:func:`gui_grounding.eval.backends.check_decoding`).

    Returns:
        ``out_path``.

    Raises:
        ImportError: vLLM is not installed (names ``pip install -e .[gpu]``).
        ValueError: ``decoding`` this backend cannot send as published.
    """
    decoding = check_decoding(decoding, "vllm")
    vllm = _import_vllm()
    from tqdm.auto import tqdm

    adapter = checkpoint_adapter(model_path, adapter)
    if budget is None:
        budget, _ = resolve_eval_budget(adapter, model=model_path)
    lo, hi = budget.processor_bounds()  # the processor leaves the image sent as it is (PixelBudget.processor_bounds)
    mm_processor_kwargs = {"min_pixels": lo, "max_pixels": hi} if budget.resizes else {}
    llm = vllm.LLM(
        model=model_path,
        limit_mm_per_prompt={"image": tts.images_per_prompt if tts is not None else 1},
        mm_processor_kwargs=mm_processor_kwargs or None,
        tensor_parallel_size=tensor_parallel_size,
        gpu_memory_utilization=gpu_memory_utilization,
        max_model_len=max_model_len,
        dtype=dtype,
        **(llm_kwargs or {}),
    )
    params = vllm.SamplingParams(**greedy_settings(decoding), max_tokens=max_new_tokens)
    logger.info(
        "vllm backend: %s, adapter %s, mm_processor_kwargs %s, %s",
        model_path,
        adapter.name,
        mm_processor_kwargs,
        budget.describe(),
    )

    if tts is not None and tts.active:
        return tts.run(
            VLLMEngine(vllm, llm, max_new_tokens=max_new_tokens, chunk_size=chunk_size, decoding=decoding),
            samples,
            out_path,
            adapter=adapter,
            budget=budget,
        )
    out, todo = open_predictions(out_path, samples)
    with out, tqdm(total=len(todo), desc="predict", unit="sample") as bar:
        for i in range(0, len(todo), chunk_size):
            chunk = todo[i : i + chunk_size]
            requests = [adapter.build_request(s, load_image(s), budget=budget) for s in chunk]
            prefix = bool(requests and requests[0].assistant_prefix)  # one adapter per run: all or none
            outputs = llm.chat(
                [openai_messages(r) for r in requests],
                sampling_params=params,
                use_tqdm=False,
                continue_final_message=prefix,
                add_generation_prompt=not prefix,
            )
            write_records(
                out,
                [record(s, r, o.outputs[0].text, adapter) for s, r, o in zip(chunk, requests, outputs, strict=True)],
            )
            bar.update(len(chunk))
    return out_path
