"""Profiles of published checkpoints: everything that decides an evaluation score, pinned and cited.

``gui-grounding eval --profile NAME`` (and ``gui-grounding prompt --profile NAME``) takes from a :class:`Profile`:

* the **adapter** (system prompt, user prompt, image/text order, answer frame, parser: ``gui_grounding.adapters``);
* the **pixel budget** (:class:`vlm_r1.pixel_budget.PixelBudget`, each value citing the model card or the official
  evaluation script at a pinned commit);
* **decoding** (greedy; ``max_new_tokens``);
* the **benchmark options** (OSWorld-G plain vs Refined);
* the **backends** that can run the model (a 72B needs vllm with tensor parallelism or an OpenAI-compatible server;
  hf runs on one device);
* the **published numbers** (:class:`PublishedScore`), shown next to ours in ``metrics.json`` and ``results.md``,
  each flagged as within 1 point or not.

A flag given on the command line beats the profile (and is recorded as the value's source). ``gui-grounding
profiles`` lists every profile with each value's source. The profile table and the pitfalls are in
docs/EVALUATION.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from vlm_r1.pixel_budget import PixelBudget

#: how far (in accuracy points) our number may be from the published one to count as reproduced
REPRODUCED_WITHIN = 1.0


@dataclass(frozen=True)
class PublishedScore:
    """One published accuracy (percent): ``benchmark`` (a ``--benchmark`` name), ``value``, ``options`` (the benchmark
    options it was measured with, e.g. ``{"subset": "refined"}``) and ``source`` (where it is published)."""

    benchmark: str
    value: float
    source: str
    options: dict = field(default_factory=dict)
    note: str = ""

    def matches(self, benchmark: str, options: dict) -> bool:
        """True when this score was measured on ``benchmark`` with these options (unstated options: defaults)."""
        return self.benchmark == benchmark and all(options.get(k) == v for k, v in self.options.items())


@dataclass(frozen=True)
class Profile:
    """A published checkpoint's evaluation settings (module docstring); every value with a source in ``sources``.

    Attributes:
        name: ``--profile`` name, e.g. ``gta1-7b-2507``.
        model: the checkpoint's hub id.
        model_type: its ``config.model_type``.
        adapter: the adapter name (``gui_grounding.adapters``).
        budget: the pixel budget (values cite their sources).
        max_new_tokens: generation budget; decoding is greedy.
        backends: backends that can run it, most practical first (``hf`` only where one device holds the model).
        benchmark_options: ``{benchmark: {option: value}}`` applied to that benchmark (flags win).
        published: the published numbers.
        sources: ``{"adapter" | "max_new_tokens" | "model" | ...: source}``.
        notes: caveats shown by ``gui-grounding profiles``.
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

    def options_for(self, benchmark: str) -> dict:
        """The benchmark options this profile pins for ``benchmark`` (``{}`` when none)."""
        return dict(self.benchmark_options.get(benchmark, {}))

    def comparison(self, benchmark: str, options: dict, metrics: dict) -> list[dict]:
        """Our overall accuracy next to each published number for ``benchmark`` measured with ``options``:
        ``[{"published", "ours", "difference", "within_1_point", "source", "options"}]`` (accuracy in percent;
        difference = ours - published)."""
        ours = (metrics.get("overall") or {}).get("accuracy")
        rows = []
        for score in self.published:
            if not score.matches(benchmark, options) or ours is None:
                continue
            diff = round(float(ours) - score.value, 2)
            rows.append({"published": score.value, "ours": ours, "difference": diff,
                         "within_1_point": abs(diff) <= REPRODUCED_WITHIN, "source": score.source,
                         "options": dict(score.options), "note": score.note})  # fmt: skip
        return rows

    def describe(self) -> str:
        """Multi-line text of every value with its source (``gui-grounding profiles NAME``)."""
        from gui_grounding.adapters import get_adapter

        adapter = get_adapter(self.adapter)
        lines = [f"{self.name}: {self.model} (model_type {self.model_type})",
                 f"  adapter          {self.adapter} (answer frame {adapter.answer_frame})   <- "
                 f"{self.sources.get('adapter', '?')}",
                 f"  decoding         greedy, max_new_tokens {self.max_new_tokens}   <- "
                 f"{self.sources.get('max_new_tokens', '?')}",
                 f"  backends         {', '.join(self.backends)}   <- {self.sources.get('backends', '?')}"]  # fmt: skip
        for bench, opts in self.benchmark_options.items():
            lines.append(f"  {bench:<16} {opts}   <- {self.sources.get('benchmark_options', '?')}")
        lines += ["  " + line for line in self.budget.describe().splitlines()]
        for s in self.published:
            opts = f" {s.options}" if s.options else ""
            lines.append(f"  published        {s.benchmark}{opts}: {s.value:.1f}   <- {s.source}")
        if self.notes:
            lines.append(f"  notes            {self.notes}")
        return "\n".join(lines)


def _budget(source: str, **values: Any) -> PixelBudget:
    return PixelBudget.published(source, **values)


PROFILES: dict[str, Profile] = {}


def register(profile: Profile) -> Profile:
    """Add ``profile`` to :data:`PROFILES` (its adapter must exist).

    Raises:
        ValueError: the name is taken or the adapter is unknown.
    """
    from gui_grounding.adapters import ADAPTERS

    if profile.name in PROFILES:
        raise ValueError(f"profile {profile.name!r} is already registered")
    if profile.adapter not in ADAPTERS:
        raise ValueError(f"profile {profile.name!r}: unknown adapter {profile.adapter!r}")
    PROFILES[profile.name] = profile
    return profile


def get_profile(name: str) -> Profile:
    """The profile ``name``.

    Raises:
        ValueError: unknown name; the message lists the profiles.
    """
    if name not in PROFILES:
        raise ValueError(f"unknown profile {name!r}; profiles: {', '.join(PROFILES)}")
    return PROFILES[name]


def profile_dict(profile: Profile) -> dict:
    """JSON form of ``profile`` (``gui-grounding profiles --json``)."""
    return {"name": profile.name, "model": profile.model, "model_type": profile.model_type, "adapter": profile.adapter,
            "pixel_budget": profile.budget.to_dict(), "decoding": {"greedy": True,
                                                                   "max_new_tokens": profile.max_new_tokens},
            "backends": list(profile.backends), "benchmark_options": profile.benchmark_options,
            "published": [{"benchmark": s.benchmark, "options": s.options, "value": s.value, "source": s.source,
                           "note": s.note} for s in profile.published],
            "sources": dict(profile.sources), "notes": profile.notes}  # fmt: skip


def profiles_table() -> str:
    """A Markdown table of every profile: name, model, adapter, budget, max_new_tokens, backends, published."""
    from gui_grounding.eval.benchmarks import md_table

    rows = []
    for p in PROFILES.values():
        b = p.budget
        budget = (f"{b.min_pixels:,}..{b.max_pixels:,} px (factor {b.factor})" if b.resizes
                  else f"{b.max_tiles} tiles")  # fmt: skip
        published = "; ".join(f"{s.benchmark}{'/' + '/'.join(map(str, s.options.values())) if s.options else ''} "
                              f"{s.value:.1f}" for s in p.published) or "-"  # fmt: skip
        rows.append([p.name, p.model, p.adapter, budget, p.max_new_tokens, ", ".join(p.backends), published])
    return md_table(["profile", "model", "adapter", "pixel budget", "max_new_tokens", "backends", "published"], rows,
                    left=7)  # fmt: skip
