"""``Logprob`` (vLLM 0.30.0 ``vllm/logprobs.py:13-24``)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Logprob:
    logprob: float
    rank: int | None = None
    decoded_token: str | None = None
