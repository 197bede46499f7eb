"""The two dataclasses of a published checkpoint's profile (:class:`Profile`, :class:`PublishedScore`).

Each family's adapter module (``gui_grounding/models/adapters/<family>.py``) lists its published checkpoints in
``PROFILES = (Profile(...), ...)``; :mod:`gui_grounding.models.profiles` collects them (``groundwork.registry.discover``
over the adapters package) and looks them up. This module imports nothing of the adapters, so the family files can
import it without a cycle.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from groundwork.pixel_budget import PixelBudget

#: how far (in accuracy points) our number may be from the published one to count as reproduced
REPRODUCED_WITHIN = 1.0


@dataclass(frozen=True)
class PublishedScore:
    """One published accuracy (percent): ``benchmark`` (a ``--benchmark`` name), ``value``, ``options`` (the benchmark
    options it was measured with, e.g. ``{"subset": "refined"}``), ``source`` (where it is published) and
    ``denominator`` (which of the benchmark's ``denominators`` it divides by: OSWorld-G ``refusal-scored`` /
    ``refusal-as-miss`` / ``without-refusal``; ``""``: the authors' rule, the benchmark's first; ``"unstated"``: the
    source does not say, so ours is shown over the authors' rule and the row says so).

    ``variant`` names a published number that is not the plain greedy one (e.g. ``"authors' ZoomIn"``); such rows are
    listed, never compared with a plain run."""

    benchmark: str
    value: float
    source: str
    options: dict = field(default_factory=dict)
    note: str = ""
    denominator: str = ""
    variant: str = ""

    def matches(self, benchmark: str, options: dict) -> bool:
        """True when this score was measured on ``benchmark`` with these options (unstated options: defaults)."""
        return self.benchmark == benchmark and all(options.get(k) == v for k, v in self.options.items())


@dataclass(frozen=True)
class Profile:
    """A published checkpoint's evaluation settings (:mod:`gui_grounding.models.profiles`); every value with a source
    in ``sources``.

    Attributes:
        name: ``--profile`` name, e.g. ``gta1-7b-2507``.
        model: the checkpoint's hub id.
        model_type: its ``config.model_type``.
        adapter: the adapter name (``gui_grounding.models.adapters``; one of the same family file).
        budget: the pixel budget (values cite their sources).
        max_new_tokens: generation budget; decoding is greedy.
        backends: backends that can run it, most practical first (``hf`` only where one device holds the model).
        benchmark_options: ``{benchmark: {option: value}}`` applied to that benchmark (flags win).
        published: the published numbers.
        sources: ``{"adapter" | "max_new_tokens" | "model" | ...: source}``.
        notes: caveats shown by ``gui-grounding profiles``.
        refusal: how this checkpoint's published code reads the family's "no target" answer (e.g. ``[-1,-1]``):
            ``""`` the adapter's default, ``"refusal"`` an explicit refusal, ``"origin"`` the point (0, 0) (a parser
            that falls back to ``[0,0,0,0]``), ``"point"`` read as the point it writes. Two checkpoints of one family
            may differ (issue 31).
        refusal_prompt: the refusal clause enters this checkpoint's prompt (``Adapter.prompt_messages``: the family's
            published clause, else ours), e.g. a checkpoint trained with ``--refusal_training true``; False: the
            family's prompt as published.
        refusal_answer: this checkpoint's refusal answer in place of the family's (``Adapter.refusal_answer``; it
            must be one the family reads as no target, ``Adapter.is_trained_refusal``); ``""``: the family's.
        decoding: generation settings beyond greedy ``max_new_tokens`` that the published request sends (e.g.
            ``{"frequency_penalty": 1.0}``), each with its source in ``sources["decoding"]``; ``{}``: greedy only.
    """

    name: str
    model: str
    model_type: str
    adapter: str
    budget: PixelBudget
    max_new_tokens: int
    backends: tuple[str, ...]
    sources: dict
    benchmark_options: dict = field(default_factory=dict)
    published: tuple[PublishedScore, ...] = ()
    notes: str = ""
    refusal: str = ""
    decoding: dict = field(default_factory=dict)
    refusal_prompt: bool = False
    refusal_answer: str = ""

    def __post_init__(self) -> None:
        if self.refusal not in PROFILE_REFUSALS:
            raise ValueError(
                f"profile {self.name!r}: refusal must be one of {', '.join(map(repr, PROFILE_REFUSALS))}, "
                f"got {self.refusal!r}"
            )
        problem = decoding_problem(self.decoding)
        if problem is not None:
            raise ValueError(f"profile {self.name!r}: {problem}")

    def decoding_text(self) -> str:
        """One line: ``greedy, max_new_tokens N`` and any published generation setting (:attr:`decoding`)."""
        if not self.decoding:
            return f"greedy, max_new_tokens {self.max_new_tokens}"
        shown = ", ".join(f"{k} {'the server default' if v is None else v}" for k, v in sorted(self.decoding.items()))
        return f"{shown}, max_new_tokens {self.max_new_tokens}"

    def configure(self, adapter):
        """The run's ``adapter`` reading the family's no-target answer as this profile says (:attr:`refusal`, via
        ``Adapter.configured``), with its refusal clause and answer (:attr:`refusal_prompt`, :attr:`refusal_answer`)
        when it is this profile's adapter; otherwise (another ``--adapter``, or no reading
        pinned) ``adapter`` as it is. The one place a profile's reading reaches the adapter of a run (``gui-grounding
        eval`` and ``gui-grounding prompt``).

        Raises:
            ValueError: the reading does not apply to the adapter's family (no no-target answer).
        """
        wants = self.refusal or self.refusal_prompt or self.refusal_answer
        if wants and getattr(adapter, "name", None) == self.adapter:
            return adapter.configured(
                refusal=self.refusal, refusal_prompt=self.refusal_prompt, refusal_answer=self.refusal_answer or None
            )
        return adapter

    def options_for(self, benchmark: str) -> dict:
        """The benchmark options this profile pins for ``benchmark`` (``{}`` when none)."""
        return dict(self.benchmark_options.get(benchmark, {}))

    def comparison(self, benchmark: str, options: dict, headline) -> list[dict]:
        """Our headline next to each published plain number for ``benchmark`` measured with ``options``:
        ``[{"published", "ours", "difference", "within_1_point", "denominator", "ours_over", "source", "options",
        "note"}]`` (``denominator``: the published number's, ``"unstated"`` when its source does not say; ``ours_over``:
        the one ours is computed over)
        (accuracy in percent; difference = ours - published). ``headline(denominator)`` is our headline document
        over that denominator (``None``: the authors' rule), so a number published over 510 items is compared with
        ours over the same 510. Numbers with a ``variant`` (the authors' ZoomIn, ...) are not compared."""
        rows = []
        for score in self.published:
            if score.variant or not score.matches(benchmark, options):
                continue
            ours = headline(score.denominator if score.denominator not in ("", "unstated") else None)
            diff = round(float(ours["accuracy"]) - score.value, 2)
            rows.append(
                {
                    "published": score.value,
                    "ours": ours["accuracy"],
                    "difference": diff,
                    "within_1_point": abs(diff) <= REPRODUCED_WITHIN,
                    "denominator": score.denominator or ours["denominator"],
                    "ours_over": ours["denominator"],
                    "source": score.source,
                    "options": dict(score.options),
                    "note": score.note,
                }
            )
        return rows


#: values of :attr:`Profile.refusal`: ``""`` (the adapter's default) or one of the adapters' readings
#: (``gui_grounding.models.adapters.base.REFUSAL_READINGS``, spelled here so this module imports no adapter)
PROFILE_REFUSALS = ("", "refusal", "origin", "point")

#: the generation settings a profile's :attr:`Profile.decoding` may pin, and the values each takes:
#: ``frequency_penalty``: a finite number in [-2, 2] (OpenAI / vLLM's additive penalty on repeated tokens; not
#: transformers' multiplicative ``repetition_penalty``); ``temperature``: ``None`` (not sent: the server's default, as
#: a published request that names none) or a finite number in [0, 2]; ``top_p``: a finite number in (0, 1].
#: How each backend sends them: ``gui_grounding.eval.backends.decoding_request``.
DECODING_FIELDS = ("frequency_penalty", "temperature", "top_p")


def decoding_problem(decoding) -> str | None:
    """Why ``decoding`` is not a valid :attr:`Profile.decoding` (:data:`DECODING_FIELDS`), or ``None``."""
    if not isinstance(decoding, dict):
        return f"decoding must be a dict, got {type(decoding).__name__}"
    for key, value in decoding.items():
        if key not in DECODING_FIELDS:
            return f"decoding: unknown setting {key!r} (known: {', '.join(DECODING_FIELDS)})"
        number = not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value)
        if key == "temperature" and value is None:
            continue
        low, high, low_open = {
            "frequency_penalty": (-2, 2, False),
            "temperature": (0, 2, False),
            "top_p": (0, 1, True),
        }[key]
        if not number or not ((low < value) if low_open else (low <= value)) or value > high:
            return f"decoding: {key} must be a number in {'(' if low_open else '['}{low}, {high}], got {value!r}"
    return None


#: the backends of a checkpoint one device holds, most practical first
ONE_GPU = ("hf", "vllm", "openai")
#: the backends of a checkpoint that needs tensor parallelism (32B, 72B)
TENSOR_PARALLEL = ("vllm", "openai")
