"""``CompletionOutput`` and ``RequestOutput`` (vLLM 0.30.0 ``vllm/outputs.py:33-68`` and ``:133-171``); the fields TRL
reads: ``RequestOutput.prompt_token_ids``, ``.outputs``; ``CompletionOutput.token_ids``, ``.logprobs``
(``trl/generation/vllm_generation.py:70-99,731-733``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass
class CompletionOutput:
    index: int
    text: str
    token_ids: list[int]
    cumulative_logprob: float | None
    logprobs: list[dict] | None
    routed_experts: Any = None
    finish_reason: str | None = None
    stop_reason: int | str | None = None
    lora_request: Any = None
    sampling_mask: Any = None
    spec_decode_metrics: Any = None

    def finished(self) -> bool:
        return self.finish_reason is not None


class RequestOutput:
    def __init__(
        self,
        request_id: str,
        prompt: str | None,
        prompt_token_ids: list[int] | None,
        prompt_logprobs: Any,
        outputs: list[CompletionOutput],
        finished: bool,
        metrics: Any = None,
        lora_request: Any = None,
        encoder_prompt: str | None = None,
        encoder_prompt_token_ids: list[int] | None = None,
        num_cached_tokens: int | None = None,
        num_cache_creation_tokens: int | None = None,
        *,
        kv_transfer_params: dict[str, Any] | None = None,
        ec_transfer_params: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        self.request_id = request_id
        self.prompt = prompt
        self.prompt_token_ids = prompt_token_ids
        self.prompt_logprobs = prompt_logprobs
        self.outputs = outputs
        self.finished = finished
        self.metrics = metrics
        self.lora_request = lora_request
        self.encoder_prompt = encoder_prompt
        self.encoder_prompt_token_ids = encoder_prompt_token_ids
        self.num_cached_tokens = num_cached_tokens
        self.num_cache_creation_tokens = num_cache_creation_tokens
        self.kv_transfer_params = kv_transfer_params
        self.ec_transfer_params = ec_transfer_params
