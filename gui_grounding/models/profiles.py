"""Profiles of published checkpoints: everything that decides an evaluation score, pinned and cited.

``gui-grounding eval --profile NAME`` (and ``gui-grounding prompt --profile NAME``) takes from a
:class:`~gui_grounding.models.profile_types.Profile`:

* the **adapter** (system prompt, user prompt, image/text order, answer frame, parser: ``gui_grounding.models.adapters``);
* the **pixel budget** (:class:`groundwork.pixel_budget.PixelBudget`, each value citing the model card or the official
  evaluation script at a pinned commit);
* **decoding** (greedy; ``max_new_tokens``);
* the **benchmark options** (OSWorld-G plain vs Refined);
* the **backends** that can run the model (a 72B needs vllm with tensor parallelism or an OpenAI-compatible server;
  hf runs on one device);
* the **published numbers** (:class:`~gui_grounding.models.profile_types.PublishedScore`), shown next to ours in ``metrics.json`` and ``results.md``,
  each flagged as within 1 point or not.

A flag given on the command line beats the profile (and is recorded as the value's source). ``gui-grounding
profiles`` lists every profile with each value's source. The profile table and the pitfalls are in
docs/EVALUATION.md.

Each family declares its own published checkpoints next to its adapters: ``PROFILES = (Profile(...), ...)`` in
``gui_grounding/models/adapters/<family>.py`` (the dataclasses are :mod:`gui_grounding.models.profile_types`). This
module collects them with the adapters' own discovery (``groundwork.registry.discover`` over the adapters package)
and looks them up: removing a family's files removes its profiles and leaves the others.
"""

from __future__ import annotations

from groundwork.markdown import md_table
from groundwork.registry import discover
from gui_grounding.models.adapters import ADAPTERS, get_adapter
from gui_grounding.models.profile_types import Profile

#: the order ``gui-grounding profiles`` and the table in docs/EVALUATION.md list these profiles in (the order they
#: were added); a profile not named here follows them in discovery order (family files alphabetically). A name whose
#: family file is gone is skipped.
LISTING_ORDER = (
    "gta1-7b-2507",
    "gta1-32b-2507",
    "gta1-72b-2507",
    "ui-tars-1.5-7b",
    "ui-tars-1.5-7b-api",
    "qwen2.5-vl-7b",
    "qwen2.5-vl-32b",
    "qwen2.5-vl-72b",
    "qwen3-vl-8b",
    "ui-venus-ground-7b",
    "gui-g2-7b",
    "internvl3-8b",
    "ui-venus-1.5-8b",
    "mai-ui-8b",
    "gui-owl-1.5-8b",
    "gui-owl-1.5-8b-osworld-g",
    "gta1-7b",
)

PROFILES: dict[str, Profile] = {}


def register(profile: Profile) -> Profile:
    """Add ``profile`` to :data:`PROFILES` (its adapter must exist).

    Raises:
        ValueError: the name is taken or the adapter is unknown.
    """

    if profile.name in PROFILES:
        raise ValueError(f"profile {profile.name!r} is already registered")
    if profile.adapter not in ADAPTERS:
        raise ValueError(f"profile {profile.name!r}: unknown adapter {profile.adapter!r}")
    PROFILES[profile.name] = profile
    return profile


def _discovered() -> list[Profile]:
    """Every family file's ``PROFILES`` (:func:`groundwork.registry.discover` over the adapters package), in
    :data:`LISTING_ORDER`, then the rest in discovery order."""
    rank = {name: i for i, name in enumerate(LISTING_ORDER)}
    found = discover("gui_grounding.models.adapters", "PROFILES")
    return sorted(found, key=lambda p: rank.get(p.name, len(rank)))


for _profile in _discovered():
    register(_profile)


def describe_profile(profile: Profile) -> str:
    """Multi-line text of every value with its source (``gui-grounding profiles NAME``)."""

    adapter = get_adapter(profile.adapter)
    lines = [
        f"{profile.name}: {profile.model} (model_type {profile.model_type})",
        f"  adapter          {profile.adapter} (answer frame {adapter.answer_frame})   <- "
        f"{profile.sources.get('adapter', '?')}",
        f"  decoding         {profile.decoding_text()}   <- "
        f"{profile.sources.get('decoding', profile.sources.get('max_new_tokens', '?'))}",
        f"  backends         {', '.join(profile.backends)}   <- {profile.sources.get('backends', '?')}",
    ]
    for bench, opts in profile.benchmark_options.items():
        lines.append(f"  {bench:<16} {opts}   <- {profile.sources.get('benchmark_options', '?')}")
    lines += ["  " + line for line in profile.budget.describe().splitlines()]
    if profile.refusal:
        lines.append(f"  refusal answer   read as {profile.refusal!r}   <- {profile.sources.get('refusal', '?')}")
    for s in profile.published:
        opts = f" {s.options}" if s.options else ""
        tags = [f"denominator {s.denominator}"] if s.denominator else []
        tags += [s.variant] if s.variant else []
        tag = f" [{', '.join(tags)}]" if tags else ""
        lines.append(f"  published        {s.benchmark}{opts}: {s.value:.1f}{tag}   <- {s.source}")
    if profile.notes:
        lines.append(f"  notes            {profile.notes}")
    return "\n".join(lines)


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
    return {
        "name": profile.name,
        "model": profile.model,
        "model_type": profile.model_type,
        "adapter": profile.adapter,
        "pixel_budget": profile.budget.to_dict(),
        "decoding": {"greedy": not profile.decoding, "max_new_tokens": profile.max_new_tokens, **profile.decoding},
        "refusal": profile.refusal or None,
        "backends": list(profile.backends),
        "benchmark_options": profile.benchmark_options,
        "published": [
            {
                "benchmark": s.benchmark,
                "options": s.options,
                "value": s.value,
                "denominator": s.denominator,
                "variant": s.variant,
                "source": s.source,
                "note": s.note,
            }
            for s in profile.published
        ],
        "sources": dict(profile.sources),
        "notes": profile.notes,
    }


def profiles_table() -> str:
    """A Markdown table of every profile: name, model, adapter, budget, max_new_tokens, backends, published."""
    rows = []
    for p in PROFILES.values():
        b = p.budget
        budget = f"{b.min_pixels:,}..{b.max_pixels:,} px (factor {b.factor})" if b.resizes else f"{b.max_tiles} tiles"
        published = (
            "; ".join(
                f"{s.benchmark}{'/' + '/'.join(map(str, s.options.values())) if s.options else ''} {s.value:.1f}"
                + (f" ({s.variant})" if s.variant else "")
                for s in p.published
            )
            or "-"
        )
        rows.append([p.name, p.model, p.adapter, budget, p.max_new_tokens, ", ".join(p.backends), published])
    return md_table(
        ["profile", "model", "adapter", "pixel budget", "max_new_tokens", "backends", "published"], rows, left=7
    )


def published_table() -> str:
    """A Markdown table of every profile's published numbers: profile, benchmark (and options), value, denominator
    (OSWorld-G's ``refusal-scored`` / ``refusal-as-miss`` / ``without-refusal``; ``authors'`` where the benchmark has
    one; ``unstated`` where the source does not say), variant (a number that is not the plain greedy run, e.g. the
    authors' ZoomIn: listed, never compared) and source."""
    rows = []
    for p in PROFILES.values():
        for s in p.published:
            opts = " ".join(f"{k}={v}" for k, v in s.options.items())
            bench = f"{s.benchmark} ({opts})" if opts else s.benchmark
            rows.append([p.name, bench, f"{s.value:.1f}", s.denominator or "authors'", s.variant or "-", s.source])
    return md_table(["profile", "benchmark", "published %", "denominator", "variant", "source"], rows, left=6)
