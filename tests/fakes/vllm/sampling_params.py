"""``SamplingParams``, ``StructuredOutputsParams``, ``RequestOutputKind`` of vLLM 0.30.0 (``vllm/sampling_params.py``).

The public fields, their order and defaults are vLLM's (``:215-374``); the real class is a ``msgspec.Struct`` (an
unknown keyword is a ``TypeError`` there as here). The private fields (``_eos_token_id``, ``_all_stop_token_ids``,
``_bad_words_token_ids``) are not constructor arguments here. :meth:`SamplingParams.update_from_tokenizer` applies
vLLM's documented rule (``:720-788``) for turning ``bad_words`` strings into banned token-id sequences: each word is
tokenized without special tokens, as is and with one leading space; the spaced form is kept only when it is a new
token sequence of the same length; an id outside the vocabulary is an error.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from vllm.exceptions import VLLMValidationError


@dataclass
class StructuredOutputsParams:
    json: str | dict | None = None
    regex: str | None = None
    choice: list[str] | None = None
    grammar: str | None = None
    json_object: bool | None = None
    disable_any_whitespace: bool = False
    disable_additional_properties: bool = False
    whitespace_pattern: str | None = None
    structural_tag: str | None = None

    def __post_init__(self) -> None:
        kinds = (self.json, self.regex, self.choice, self.grammar, self.json_object, self.structural_tag)
        count = sum(k is not None for k in kinds)
        if count != 1:
            raise VLLMValidationError(f"structured outputs need exactly one constraint, got {count}")


class RequestOutputKind(Enum):
    CUMULATIVE = 0
    DELTA = 1
    FINAL_ONLY = 2


@dataclass
class SamplingParams:
    n: int = 1
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    repetition_penalty: float = 1.0
    temperature: float = 1.0
    watermarking: bool = True
    top_p: float = 1.0
    top_k: int = 0
    min_p: float = 0.0
    seed: int | None = None
    stop: str | list[str] | None = None
    stop_token_ids: list[int] | None = None
    ignore_eos: bool = False
    max_tokens: int | None = 16
    min_tokens: int = 0
    logprobs: int | None = None
    prompt_logprobs: int | None = None
    logprob_token_ids: list[int] | None = None
    flat_logprobs: bool = False
    detokenize: bool = True
    skip_special_tokens: bool = True
    spaces_between_special_tokens: bool = True
    include_stop_str_in_output: bool = False
    output_kind: RequestOutputKind = RequestOutputKind.CUMULATIVE
    stream_interval: int | None = None
    skip_clone: bool = False
    output_text_buffer_length: int = 0
    structured_outputs: StructuredOutputsParams | None = None
    logit_bias: dict[int, float] | None = None
    allowed_token_ids: list[int] | None = None
    extra_args: dict[str, Any] | None = None
    bad_words: list[str] | None = None
    skip_reading_prefix_cache: bool | None = None
    thinking_token_budget: int | None = None
    repetition_detection: Any = None
    routed_experts_prompt_start: int = 0
    trace_decode_token_ids: list[int] | None = None
    _bad_words_token_ids: list[list[int]] | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.seed == -1:
            self.seed = None
        self.stop = [] if self.stop is None else [self.stop] if isinstance(self.stop, str) else list(self.stop)
        self.stop_token_ids = [] if self.stop_token_ids is None else list(dict.fromkeys(self.stop_token_ids))
        self.bad_words = [] if self.bad_words is None else list(dict.fromkeys(self.bad_words))
        if not isinstance(self.output_kind, RequestOutputKind):
            raise TypeError(f"output_kind must be a RequestOutputKind, got {self.output_kind!r}")
        if any(not word for word in self.bad_words):
            raise VLLMValidationError(f"bad_words cannot contain an empty string. Got bad_words={self.bad_words}")

    def update_from_tokenizer(self, tokenizer: Any) -> None:
        """Resolve ``bad_words`` to token-id sequences (the rule in the module docstring)."""
        if not self.bad_words:
            return
        self._bad_words_token_ids = []
        for word in self.bad_words:
            for prefix in ("", " "):
                ids = tokenizer.encode(prefix + word.lstrip(), add_special_tokens=False)
                if not ids:
                    if not prefix:
                        raise VLLMValidationError("bad_words entries must tokenize to at least one token.")
                    continue
                last = self._bad_words_token_ids[-1] if prefix else None
                if not prefix or (ids[0] != last[0] and len(ids) == len(last)):
                    self._bad_words_token_ids.append(ids)
        top = len(tokenizer) - 1
        bad = [i for seq in self._bad_words_token_ids for i in seq if i < 0 or i > top]
        if bad:
            raise VLLMValidationError(f"bad_words token ids outside the vocabulary: {bad}")

    @property
    def bad_words_token_ids(self) -> list[list[int]] | None:
        return self._bad_words_token_ids
