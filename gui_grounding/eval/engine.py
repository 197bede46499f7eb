"""What a backend gives test-time grounding: an :class:`Engine` that answers a list of requests, ``n`` answers each,
as :class:`Draw` records with their cost. Backends implement it; ``gui_grounding.eval.tts`` drives it. Backends import
this module, never ``tts`` (the test-time dispatch is :meth:`gui_grounding.eval.tts.TTSConfig.run`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass
class Draw:
    """One request's answers from an :class:`Engine`: ``texts`` (generated text, ``n`` of them, or empty on error)
    and what they cost: model ``calls`` (a ``generate`` call / HTTP request; one prefill shared by K samples is one
    call), prompt tokens processed, generated tokens."""

    texts: list[str]
    calls: int = 1
    prompt_tokens: int = 0
    generated_tokens: int = 0
    error: str | None = None

    @property
    def text(self) -> str:
        """The greedy answer's text: the first text, else ``""`` (nothing generated) or ``ERROR: ...`` (failed)."""
        return self.texts[0] if self.texts else ("" if self.error is None else f"ERROR: {self.error}")


class Engine:
    """What a backend gives test-time grounding: :meth:`generate` answers for a list of requests.

    Attributes:
        name: backend name (``hf``, ``vllm``, ``openai``).
        sampling_note: how K samples are drawn (logged at the start of the run).
        chunk_size: samples per :func:`predict_tts` chunk (one write per chunk).
    """

    name = "engine"
    sampling_note = ""
    chunk_size = 8

    def generate(
        self, requests: list, *, n: int, temperature: float, top_p: float = 1.0, seeds: Sequence[int] | None = None
    ) -> list[Draw]:
        """``n`` answers per request (``temperature`` 0: greedy, ``n`` 1), in request order. ``seeds``: one per
        request (sampling only)."""
        raise NotImplementedError
