"""Model adapters: the prompt a model family expects and the coordinate frame it answers in.

An adapter turns a sample + its original screenshot into a :class:`Request` (chat messages with one image
placeholder, the image to send, and the context needed to read the answer back), and parses the model's answer into
a point in **original-image pixels** (or ``None`` when there is no valid answer). Adapters are independent of the
backend (hf, openai, vllm) that runs the model.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Request:
    """One model call. ``messages`` hold ``{"type": "image"}`` where the image goes; ``image`` is what is sent."""

    messages: list[dict]
    image: Any  # PIL.Image.Image, already resized when the adapter's frame requires it
    context: dict = field(default_factory=dict)  # e.g. original and resized sizes, used by parse()
    prompt_text: str = ""  # the full prompt as text, stored per sample in the predictions file


class Adapter:
    """Base class; subclasses document their prompt and coordinate frame in the class docstring."""

    name = "base"

    def build_request(self, sample, image, *, resize: tuple[int, int, int] | None = None) -> Request:
        """Request for ``sample`` with its original ``image``; ``resize`` = ``(factor, min_pixels, max_pixels)`` of
        the processor when the adapter's frame depends on smart_resize."""
        raise NotImplementedError

    def parse(self, text: str, request: Request) -> tuple[float, float] | None:
        """The answer's point in original-image pixels, or ``None``."""
        raise NotImplementedError
