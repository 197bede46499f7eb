"""``hf`` backend: transformers ``generate`` in this process, batched, greedy, resumable.

* Requests come from the adapter (prompt, image already in its frame, parse rule) under the run's pixel budget
  (:class:`groundwork.pixel_budget.PixelBudget`): the adapter resizes each screenshot once with it, and the processor is
  set to the same budget, so its own smart_resize is the identity.
* Generation: greedy (``do_sample=False``), ``max_new_tokens`` (GTA1 inference: 32), **left padding** (the
  processor pads on the left; ``vlm_r1.modules`` ``prepare_model_inputs``), vision tokens banned
  (``<|image_pad|>``, ``<|video_pad|>``, ``<|vision_start|>``, ``<|vision_end|>`` via ``bad_words_ids``, as GTA1
  bans the image token), decoded with ``skip_special_tokens=True`` (GTA1; also vLLM's and the OpenAI servers'
  default, so every backend returns the same text; adapters read boxes with or without ``<|box_start|>`` tokens).
* Output: one JSONL line per sample (``gui_grounding.eval.backends``), ``point`` in original-image pixels.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor

from groundwork.pixel_budget import from_processor
from gui_grounding.eval.backends import (
    check_decoding,
    checkpoint_adapter,
    load_image,
    open_predictions,
    record,
    write_records,
)
from gui_grounding.eval.budget import resolve_eval_budget
from gui_grounding.eval.engine import Draw
from gui_grounding.models.adapters import PROMPT_MODE_ADAPTERS, resolve_adapter
from gui_grounding.models.rows import row_adapter, row_request
from vlm_r1.modules import get_vlm_module
from vlm_r1.modules.base import VLMBaseModule

logger = logging.getLogger(__name__)


def _batches(items: list, size: int) -> Iterable[list]:
    if size < 1:
        raise ValueError(f"batch_size must be >= 1, got {size}")
    for i in range(0, len(items), size):
        yield items[i : i + size]


def _build_requests(samples: list, adapter, budget, pool: ThreadPoolExecutor | None) -> list:
    """The adapter's requests for ``samples``, in order. With a ``pool`` the screenshots are decoded and resized on
    its threads (PIL releases the GIL there; adapters keep no per-call state), else in the calling thread."""

    def build(sample):
        return adapter.build_request(sample, load_image(sample), budget=budget)

    return list(pool.map(build, samples)) if pool is not None and len(samples) > 1 else [build(s) for s in samples]


def _model_inputs(processor, vlm_module, requests: list, device):
    """The processor's batch for ``requests`` (chat template + forced assistant prefix, images), on ``device``. The
    images go as one flat list in prompt order (each request's ``Request.images``: a zoom-tool turn sends the
    screenshot and its crops), as the processor takes them."""
    texts = [
        processor.apply_chat_template(r.messages, tokenize=False, add_generation_prompt=True) + r.assistant_prefix
        for r in requests
    ]
    inputs, _ = vlm_module.prepare_model_inputs(processor, texts, [im for r in requests for im in r.images])
    return inputs.to(device)


def _predict_batch(
    model, processor, vlm_module, samples: list, requests: list, adapter, *, banned, max_new_tokens: int, device
) -> list[dict]:
    """Prediction records for one batch (one left-padded greedy ``generate`` call). Caller sets eval/inference mode."""
    # a forced assistant prefix (Request.assistant_prefix) is appended after the generation prompt, as the ScreenSpot-Pro
    # harness does for Qwen2.5-VL; record() puts it back in front of the generated text
    inputs = _model_inputs(processor, vlm_module, requests, device)
    tokenizer = processor.tokenizer
    output = model.generate(
        **inputs,
        do_sample=False,
        max_new_tokens=max_new_tokens,
        bad_words_ids=banned,
        pad_token_id=tokenizer.pad_token_id,
        use_cache=True,
    )
    answers = tokenizer.batch_decode(output[:, inputs["input_ids"].shape[1] :], skip_special_tokens=True)
    return [record(s, r, text, adapter) for s, r, text in zip(samples, requests, answers, strict=True)]


class HFEngine:
    """Test-time grounding on a loaded model (:class:`gui_grounding.eval.engine.Engine`).

    * greedy: the same left-padded ``generate(do_sample=False)`` call as a greedy run, ``batch_size`` prompts each;
    * K samples: where the family has the shared-prompt prefill hook (``VLMBaseModule.shared_prompt_prefill``: the
      Qwen families), each prompt is prefilled **once** and its K continuations are sampled from the repeated cache
      (one call per batch); otherwise K independent ``generate`` calls with the same inputs (said once in the log and
      in ``sampling_note``). ``do_sample=True``, ``temperature``, ``top_p``, ``top_k=0`` (no top-k cut: a
      checkpoint's ``generation_config`` may hold ``top_k=1``, which would make sampling greedy).
    * seeding: ``torch.manual_seed`` of the batch's first per-sample seed before each sampling call, so the same seed,
      samples and batch size give the same answers.
    * cost: prompt tokens are the non-padding prompt tokens run through the model (once per prompt with the shared
      prefill, K times without); generated tokens count up to and including the first end token.
    """

    name = "hf"

    def __init__(self, model, processor, vlm_module, *, device, batch_size: int, max_new_tokens: int):
        self.model, self.processor, self.module = model, processor, vlm_module
        self.device, self.chunk_size, self.max_new_tokens = device, batch_size, max_new_tokens
        self.banned = [[i] for i in vlm_module.get_banned_token_ids(processor)]
        tok = processor.tokenizer
        eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
        eos = [eos] if isinstance(eos, int) else list(eos or [])
        self.stop_ids = sorted({*eos, *([tok.eos_token_id] if tok.eos_token_id is not None else [])})
        self.shared = type(vlm_module).shared_prompt_prefill is not _base_prefill()
        self.sampling_note = (
            "K samples per prompt from one shared prefill (shared_prompt_prefill)"
            if self.shared
            else f"{type(vlm_module).__name__} has no shared-prompt prefill: K independent generate calls per batch"
        )

    def _lengths(self, ids) -> list[int]:
        """Generated tokens per row, up to and including the first stop token."""
        import torch

        stop = torch.isin(ids, torch.tensor(self.stop_ids, device=ids.device)) if self.stop_ids else None
        out = []
        for r in range(ids.size(0)):
            hit = stop[r].nonzero() if stop is not None else []
            out.append(int(hit[0]) + 1 if len(hit) else int(ids.size(1)))
        return out

    def generate(self, requests, *, n, temperature, top_p=1.0, seeds=None):
        import torch

        tok = self.processor.tokenizer
        draws = []
        modes = [(m, m.training) for m in self.model.modules()]
        self.model.eval()
        try:
            for start in range(0, len(requests), self.chunk_size):
                batch = requests[start : start + self.chunk_size]
                with torch.inference_mode():
                    inputs = _model_inputs(self.processor, self.module, batch, self.device)
                    P = inputs["input_ids"].shape[1]
                    prompt = [int(v) for v in inputs["attention_mask"].sum(dim=1)]
                    common = {
                        "max_new_tokens": self.max_new_tokens,
                        "bad_words_ids": self.banned,
                        "pad_token_id": tok.pad_token_id,
                        "use_cache": True,
                    }
                    if n == 1 and not temperature:
                        out = self.model.generate(**inputs, do_sample=False, **common)[:, P:]
                        texts = tok.batch_decode(out, skip_special_tokens=True)
                        lengths = self._lengths(out)
                        draws += [Draw([t], 1, p, g) for t, p, g in zip(texts, prompt, lengths, strict=True)]
                        continue
                    sampling = {"do_sample": True, "temperature": temperature, "top_p": top_p, "top_k": 0, **common}
                    torch.manual_seed(int(seeds[start]) if seeds else 0)
                    if self.shared:
                        kwargs = self.module.shared_prompt_prefill(self.model, dict(inputs), n)
                        out = self.model.generate(**kwargs, **sampling)[:, P:]
                        texts = tok.batch_decode(out, skip_special_tokens=True)
                        lengths = self._lengths(out)
                        for j, p in enumerate(prompt):
                            rows = slice(j * n, (j + 1) * n)
                            draws.append(Draw(texts[rows], 1, p, sum(lengths[rows])))
                    else:
                        per = [[] for _ in batch]
                        gen = [0] * len(batch)
                        for _ in range(n):
                            out = self.model.generate(**inputs, **sampling)[:, P:]
                            for j, (t, g) in enumerate(
                                zip(tok.batch_decode(out, skip_special_tokens=True), self._lengths(out), strict=True)
                            ):
                                per[j].append(t)
                                gen[j] += g
                        draws += [Draw(per[j], n, p * n, gen[j]) for j, p in enumerate(prompt)]
        finally:
            for m, training in modes:
                m.training = training
        return draws


def _base_prefill():

    return VLMBaseModule.shared_prompt_prefill


def _iter_predictions(
    model,
    processor,
    vlm_module,
    samples: list,
    adapter,
    *,
    batch_size: int,
    max_new_tokens: int,
    device,
    budget=None,
    requests_fn=None,
) -> Iterable[list[dict]]:
    """Record lists, one per batch; the model is in eval mode under ``torch.inference_mode`` meanwhile, and every
    submodule's previous ``training`` flag is restored afterwards (also on error).

    The screenshots of a batch are decoded and resized in parallel (up to ``min(batch_size, cores, 8)`` threads).
    On a GPU this happens for the next batch while the current one generates; on CPU it happens between ``generate``
    calls, never during them: image threads competing with torch's own threads made one-at-a-time prediction 2.4x
    slower on 2 cores. Tokenisation and the processor call stay in this thread (fast tokenizers are not safe to share
    across threads).
    """
    import torch

    banned = [[i] for i in vlm_module.get_banned_token_ids(processor)]
    batches = list(_batches(samples, batch_size))
    modes = [(m, m.training) for m in model.modules()]
    model.eval()
    workers = min(batch_size, os.cpu_count() or 1, 8)
    images = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="hf-images") if workers > 1 else None
    prefetch = torch.device(device).type == "cuda"
    ahead = ThreadPoolExecutor(max_workers=1, thread_name_prefix="hf-prefetch") if prefetch else None
    try:
        build = requests_fn or (lambda batch: _build_requests(batch, adapter, budget, images))
        pending = ahead.submit(build, batches[0]) if prefetch and batches else None
        for i, batch in enumerate(batches):
            requests = pending.result() if prefetch else build(batch)
            if prefetch and i + 1 < len(batches):
                pending = ahead.submit(build, batches[i + 1])
            with torch.inference_mode():
                records = _predict_batch(
                    model,
                    processor,
                    vlm_module,
                    batch,
                    requests,
                    adapter,
                    banned=banned,
                    max_new_tokens=max_new_tokens,
                    device=device,
                )
            yield records
    finally:
        for pool in (ahead, images):
            if pool is not None:
                pool.shutdown(wait=True, cancel_futures=True)
        for m, training in modes:
            m.training = training


def predict_points(
    model,
    processor,
    vlm_module,
    samples: list,
    adapter,
    *,
    budget=None,
    batch_size: int = 8,
    max_new_tokens: int = 32,
    progress: bool = False,
) -> list[dict]:
    """Predict with an already-loaded (possibly training) model; returns the predictions records (no file).

    Meant for a training-time evaluation callback: the model is switched to eval mode for generation and every
    submodule's training flag is restored afterwards; no gradients are kept (``torch.inference_mode``). Pass the
    unwrapped model (not the DDP/DeepSpeed wrapper).

    Args:
        model: a Qwen2/2.5-VL ``...ForConditionalGeneration`` (inputs are moved to its device).
        processor: its processor, set to ``budget`` (the caller's run already applied it).
        vlm_module: the ``vlm_r1.modules`` module of the model (``get_vlm_module(model_type)``).
        samples: canonical samples (original pixels).
        adapter: adapter name or instance, e.g. ``"gta1"`` (GTA1 prompt, resized-pixel answers).
        budget: the run's :class:`groundwork.pixel_budget.PixelBudget` (``None``: the processor's own settings,
            :func:`groundwork.pixel_budget.from_processor`).
        batch_size: prompts per ``generate`` call (greedy, left padded).
        max_new_tokens: generation budget per sample.
        progress: show a tqdm bar.

    Returns:
        one dict per sample, in sample order: ``{"sample_id", "point": [x, y] | None (original pixels),
        "raw_response", "prompt", "adapter"}``.
    """
    from tqdm.auto import tqdm

    adapter = resolve_adapter(adapter)
    budget = budget or from_processor(vlm_module, processor)
    device = next(model.parameters()).device
    out = []
    with tqdm(total=len(samples), desc="predict", unit="sample", disable=not progress) as bar:
        for records in _iter_predictions(
            model,
            processor,
            vlm_module,
            samples,
            adapter,
            batch_size=batch_size,
            max_new_tokens=max_new_tokens,
            device=device,
            budget=budget,
        ):
            out.extend(records)
            bar.update(len(records))
    return out


def predict_rows(
    model, processor, vlm_module, rows: list[dict], budget, *, batch_size: int = 8, max_new_tokens: int = 32
) -> list[dict]:
    """Predict on task rows as they were trained on (``gui_grounding.training.task`` rows: ``prompt``, ``image_path``,
    ``resized_size``, ``image_size``, ``adapter``): the row's own prompt and the image resized by the training run's
    ``budget`` (as the training image transform does: ``gui_grounding.models.rows.row_request``), parsed by the row's
    adapter. No prompt is rebuilt.
    Same generation settings and model handling as :func:`predict_points`.

    Returns:
        one dict per row, in order: ``{"sample_id", "point": [x, y] | None (original pixels), "raw_response",
        "prompt", "adapter"}``.
    """
    from types import SimpleNamespace

    if not rows:
        return []
    adapter = row_adapter(rows[0])
    if any(row_adapter(r).name != adapter.name for r in rows):
        raise ValueError("rows built with different adapters")
    ids = [SimpleNamespace(sample_id=r["sample_id"], row=r) for r in rows]
    device = next(model.parameters()).device
    out = []
    for records in _iter_predictions(
        model,
        processor,
        vlm_module,
        ids,
        adapter,
        batch_size=batch_size,
        max_new_tokens=max_new_tokens,
        device=device,
        requests_fn=lambda batch: [row_request(x.row, budget, adapter) for x in batch],
    ):
        out.extend(records)
    return out


def predict_hf(
    model_path: str,
    samples: list,
    out_path: str,
    *,
    adapter=None,
    budget=None,
    batch_size: int = 8,
    max_new_tokens: int = 32,
    device: str | None = None,
    prompt_mode: str | None = None,
    tts=None,
    decoding: dict | None = None,
) -> str:
    """Write predictions of checkpoint ``model_path`` for ``samples`` to ``out_path`` (resumable; appends).

    Args:
        model_path: checkpoint directory or hub id of a model type ``vlm_r1.modules`` serves (Qwen2-VL,
            Qwen2.5-VL, Qwen3-VL, InternVL).
        samples: canonical samples (original pixels).
        out_path: predictions JSONL; sample_ids already there are skipped, a half-written last line is redone.
        adapter: adapter name or instance; ``None`` -> ``default_adapter_for(config.model_type)`` (qwen2_5_vl ->
            ``gta1``, qwen2_vl -> ``qwen2-vl``).
        budget: the run's :class:`groundwork.pixel_budget.PixelBudget` (``run_eval`` resolves it:
            ``gui_grounding.eval.budget.resolve_eval_budget``); ``None``: resolved here the same way without flags
            or profile (the checkpoint's recorded budget, else the adapter's published one). Written into the
            processor and used to resize every screenshot.
        batch_size: prompts per ``generate`` call (greedy, left padded).
        max_new_tokens: generation budget per sample (GTA1 inference: 32).
        device: torch device; default ``cuda`` when available, else ``cpu`` (bf16 on cuda, fp32 on cpu).
        prompt_mode: ``"thinking"`` / ``"box"`` select the ``gta1-thinking`` / ``gta1-box`` adapter when ``adapter``
            is None (for the CLI's ``--prompt-mode``); ``None``/``"non_thinking"`` change nothing.
        tts: a :class:`gui_grounding.eval.tts.TTSConfig` (``None`` or mode ``greedy``: the greedy run above);
            other modes go to ``tts.run`` (:meth:`gui_grounding.eval.tts.TTSConfig.run`) with :class:`HFEngine`.
        decoding: a profile's published generation settings (``Profile.decoding``); this backend decodes greedily
            and refuses any other setting (transformers has no ``frequency_penalty``:
            :func:`gui_grounding.eval.backends.check_decoding`).

    Returns:
        ``out_path``.

    Raises:
        ValueError: ``prompt_mode`` thinking/box together with an adapter, an unknown prompt mode, a budget whose
            smart_resize factor is not the checkpoint's, or ``decoding`` beyond greedy.
    """
    check_decoding(decoding, "hf")
    import torch
    from tqdm.auto import tqdm

    if prompt_mode not in (None, *PROMPT_MODE_ADAPTERS):
        raise ValueError(f"unknown prompt_mode {prompt_mode!r}; expected one of {', '.join(PROMPT_MODE_ADAPTERS)}")
    if prompt_mode in ("thinking", "box"):
        if adapter is not None:
            raise ValueError(
                f"give either prompt_mode={prompt_mode!r} or an adapter, not both (use "
                f"adapter={PROMPT_MODE_ADAPTERS[prompt_mode]!r})"
            )
        adapter = PROMPT_MODE_ADAPTERS[prompt_mode]
    adapter = checkpoint_adapter(model_path, adapter)
    module = get_vlm_module(model_path)
    if budget is None:
        budget, _ = resolve_eval_budget(adapter, model=model_path, limits=module.image_limits())
    processor = module.load_processor(model_path)
    budget.apply(processor, module)
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    dtype = torch.bfloat16 if str(device).startswith("cuda") else torch.float32
    model = module.get_model_class(model_path, {}).from_pretrained(model_path, dtype=dtype).to(device)
    logger.info("hf backend: %s, adapter %s, batch %d, %s", model_path, adapter.name, batch_size, budget.describe())

    if tts is not None and tts.active:
        return tts.run(
            HFEngine(model, processor, module, device=device, batch_size=batch_size, max_new_tokens=max_new_tokens),
            samples,
            out_path,
            adapter=adapter,
            budget=budget,
        )
    out, todo = open_predictions(out_path, samples)
    with out, tqdm(total=len(todo), desc="predict", unit="sample") as bar:
        for records in _iter_predictions(
            model,
            processor,
            module,
            todo,
            adapter,
            batch_size=batch_size,
            max_new_tokens=max_new_tokens,
            device=device,
            budget=budget,
        ):
            write_records(out, records)
            bar.update(len(records))
    return out_path
