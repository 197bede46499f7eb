"""``vllm.LLM`` (vLLM 0.30.0 ``vllm/entrypoints/llm.py``): the constructor's parameters, defaults and keyword-only marker
(``:179-225``; the rest go to ``EngineArgs``), ``generate`` (``:418-481``), ``reset_prefix_cache`` / ``sleep`` /
``wake_up`` (``:796-841``), and the engine attributes TRL reads (``llm_engine.model_config.max_model_len``,
``llm_engine.model_executor.driver_worker.model_runner.model.load_weights``: ``trl/trainer/grpo_trainer.py:2050``,
``trl/generation/vllm_generation.py:509-511``). Behaviour: :mod:`vllm._fake`."""

from __future__ import annotations

import threading
import zlib
from collections.abc import Callable, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from vllm import _fake
from vllm.logprobs import Logprob
from vllm.outputs import CompletionOutput, RequestOutput
from vllm.sampling_params import SamplingParams

#: ``EngineArgs`` fields this fake accepts through ``**kwargs`` (each checked in vllm/engine/arg_utils.py at v0.30.0:
#: max_model_len :461, distributed_executor_backend :472, max_num_batched_tokens :556, max_num_seqs :559,
#: logprobs_mode :563, enable_sleep_mode :724, model_impl :730; disable_log_stats: LLM.__init__ sets it itself)
ENGINE_KWARGS = frozenset(
    {
        "max_model_len",
        "distributed_executor_backend",
        "max_num_batched_tokens",
        "max_num_seqs",
        "logprobs_mode",
        "enable_sleep_mode",
        "model_impl",
        "disable_log_stats",
    }
)


class _Weights:
    """``model_executor.driver_worker.model_runner.model``: records what ``load_weights`` receives."""

    def load_weights(self, weights):
        for name, tensor in weights:
            _fake.RECORD["weights"].append((name, tuple(tensor.shape)))
        return {name for name, _ in weights}


class LLM:
    def __init__(
        self,
        model: str,
        *,
        runner: str = "auto",
        convert: str = "auto",
        tokenizer: str | None = None,
        tokenizer_mode: str = "auto",
        skip_tokenizer_init: bool = False,
        trust_remote_code: bool = False,
        allowed_local_media_path: str = "",
        allowed_media_domains: list[str] | None = None,
        tensor_parallel_size: int = 1,
        dtype: str = "auto",
        quantization: str | None = None,
        revision: str | None = None,
        tokenizer_revision: str | None = None,
        chat_template: Path | str | None = None,
        seed: int = 0,
        gpu_memory_utilization: float = 0.92,
        cpu_offload_gb: float = 0,
        offload_group_size: int = 0,
        offload_num_in_group: int = 1,
        offload_prefetch_step: int = 1,
        offload_params: set[str] | None = None,
        enforce_eager: bool = False,
        enable_return_routed_experts: bool = False,
        return_sampling_mask: bool = False,
        disable_custom_all_reduce: bool = False,
        hf_token: bool | str | None = None,
        hf_overrides: Any = None,
        mm_processor_kwargs: dict[str, Any] | None = None,
        pooler_config: Any = None,
        structured_outputs_config: Any = None,
        profiler_config: Any = None,
        attention_config: Any = None,
        kv_cache_memory_bytes: int | None = None,
        compilation_config: Any = None,
        quantization_config: Any = None,
        logits_processors: list | None = None,
        spec_method: str | None = None,
        spec_model: str | None = None,
        spec_tokens: int | None = None,
        **kwargs: Any,
    ) -> None:
        unknown = set(kwargs) - ENGINE_KWARGS
        if unknown:
            raise TypeError(f"fake vLLM: EngineArgs fields not known to this fake: {sorted(unknown)}")
        _fake.RECORD["inits"].append(
            {
                "model": model,
                "tensor_parallel_size": tensor_parallel_size,
                "gpu_memory_utilization": gpu_memory_utilization,
                "seed": seed,
                "quantization": quantization,
                "trust_remote_code": trust_remote_code,
                "mm_processor_kwargs": mm_processor_kwargs,
                **kwargs,
            }
        )
        self.engine = _fake.FakeEngine(model, tokenizer, mm_processor_kwargs, seed)
        self.seed = seed
        max_len = kwargs.get("max_model_len") or self.engine.max_model_len
        executor = SimpleNamespace(driver_worker=SimpleNamespace(model_runner=SimpleNamespace(model=_Weights())))
        self.llm_engine = SimpleNamespace(
            model_config=SimpleNamespace(max_model_len=max_len, logprobs_mode=kwargs.get("logprobs_mode")),
            model_executor=executor,
        )
        self.sleeping: int | None = None
        self._counter = 0
        # TRL's server client sends its requests from a thread pool (trl/generation/vllm_client.py:367,492,612): the
        # request ids and the record are taken under a lock, and a completion's seed depends on the prompt and its
        # place in the call, never on arrival order, so concurrent requests give the same answers in any order
        self._lock = threading.Lock()

    def get_tokenizer(self):
        return self.engine.tokenizer

    def generate(
        self,
        prompts: Any,
        sampling_params: SamplingParams | Sequence[SamplingParams] | None = None,
        *,
        use_tqdm: bool | Callable[..., Any] = True,
        lora_request: Any = None,
        priority: list[int] | None = None,
        tokenization_kwargs: dict[str, Any] | None = None,
        mm_processor_kwargs: dict[str, Any] | None = None,
    ) -> list[RequestOutput]:
        if self.sleeping is not None:
            raise RuntimeError("fake vLLM: generate() while the engine sleeps")
        prompts = [prompts] if isinstance(prompts, (dict, str)) else list(prompts)
        params = sampling_params if sampling_params is not None else SamplingParams()
        params = list(params) if isinstance(params, Sequence) else [params] * len(prompts)
        if len(params) != len(prompts):
            raise ValueError("fake vLLM: one SamplingParams per prompt, or one for all")
        outputs, record = [], []
        for k, (prompt, p) in enumerate(zip(prompts, params, strict=True)):
            if not isinstance(prompt, dict) or "prompt_token_ids" not in prompt:
                raise NotImplementedError("fake vLLM: token prompts ({'prompt_token_ids': ...}) only, as TRL sends")
            ids = list(prompt["prompt_token_ids"])
            images = (prompt.get("multi_modal_data") or {}).get("image")
            images = [] if images is None else list(images) if isinstance(images, (list, tuple)) else [images]
            sizes = [tuple(im.size) for im in images]
            self.engine.check_placeholders(ids, sizes)
            with self._lock:
                request_id = str(self._counter)
                self._counter += 1
            done = self.engine.complete(ids, p, self.seed * 1_000_003 + zlib.crc32(repr(ids).encode()) + 7919 * k)
            record.append({"prompt_token_ids": ids, "image_sizes": sizes, "images": images, "params": p})
            outs = [
                CompletionOutput(
                    index=j,
                    text=c["text"],
                    token_ids=c["token_ids"],
                    cumulative_logprob=None if c["logprobs"] is None else sum(c["logprobs"]),
                    logprobs=None
                    if c["logprobs"] is None
                    else [
                        {t: Logprob(logprob=lp, rank=1)} for t, lp in zip(c["token_ids"], c["logprobs"], strict=True)
                    ],
                    finish_reason=c["finish"],
                )
                for j, c in enumerate(done)
            ]
            outputs.append(RequestOutput(request_id, None, ids, None, outs, True))
        with self._lock:
            _fake.RECORD["generate"].append({"requests": record, "use_tqdm": use_tqdm})
        return outputs

    def reset_prefix_cache(self, reset_running_requests: bool = False, reset_connector: bool = False) -> bool:
        return True

    def sleep(self, level: int = 1, mode: str = "abort"):
        self.sleeping = level

    def wake_up(self, tags: list[str] | None = None):
        self.sleeping = None
