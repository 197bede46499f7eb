"""The pixel budget of an evaluation run, resolved once (:func:`resolve_eval_budget`).

Each value (smart_resize ``factor``, ``min_pixels``, ``max_pixels``, InternVL's ``max_tiles``, and a harness's
``processor_max_pixels``, which no flag sets) comes from the first of:

1. the flag (``--min-pixels`` / ``--max-pixels`` / ``--max-tiles``);
2. ``--profile NAME`` (the pinned budget of a published checkpoint, :mod:`gui_grounding.models.profiles`);
3. the budget recorded with the checkpoint (``vlm_r1_run.json`` ``pixel_budget``, written by our training runs:
   :func:`groundwork.pixel_budget.recorded_budget`), so evaluating a checkpoint we trained uses its training budget;
4. the adapter's published default (``Adapter.default_budget``; ``--adapter`` picks the adapter).

A flag or profile value that differs from the checkpoint's recorded budget is allowed (ScreenSpot-Pro at a larger
budget is a legitimate experiment) but warned about, naming both values. The result is a
:class:`groundwork.pixel_budget.PixelBudget`; every backend resizes with it (:meth:`Adapter.build_request`) and the hf
and vllm backends set their processor to it, so the frame the prompt states is the frame the model sees.
"""

from __future__ import annotations

import logging
from typing import Any

from groundwork.pixel_budget import BUDGET_FIELDS, RESOLVED_FIELDS, PixelBudget, recorded_budget, resolve

logger = logging.getLogger(__name__)

#: eval flag -> budget field
FLAG_NAMES = {"min_pixels": "--min-pixels", "max_pixels": "--max-pixels", "max_tiles": "--max-tiles"}


def budget_layers(budget: PixelBudget | None) -> list[tuple[str, dict]]:
    """``budget`` as :func:`groundwork.pixel_budget.resolve` layers, one per set value, each with its own source."""
    if budget is None:
        return []
    return [
        (budget.sources.get(name, "unknown"), {name: getattr(budget, name)})
        for name in RESOLVED_FIELDS
        if getattr(budget, name) is not None
    ]


def resolve_eval_budget(
    adapter: Any,
    *,
    model: str | None = None,
    flags: dict | None = None,
    profile: Any = None,
    limits: Any = None,
) -> tuple[PixelBudget, list[str]]:
    """``(budget, warnings)`` for an evaluation run (priority in the module docstring).

    Args:
        adapter: the run's adapter (its ``default_budget`` is the last layer).
        model: checkpoint directory or hub id (its recorded budget, when it has one); ``None`` for predictions-only
            runs and API backends without a local checkpoint.
        flags: ``{"min_pixels", "max_pixels", "max_tiles"}`` from the command line (``None`` values: not given).
        profile: a :class:`gui_grounding.models.profile_types.Profile` or ``None``.
        limits: the family's :class:`groundwork.validate.ImageLimits` (``None``: no limits).

    Returns:
        the budget and the warnings already logged (a flag or profile value that differs from the checkpoint's
        recorded budget).

    Raises:
        ValueError: ``min_pixels > max_pixels`` after resolution, or a malformed recorded budget.
    """
    flags = {k: v for k, v in (flags or {}).items() if v is not None}
    recorded = recorded_budget(model) if model else None
    layers = [(f"flag {FLAG_NAMES.get(name, name)}", {name: value}) for name, value in flags.items()]
    profile_budget = getattr(profile, "budget", None)
    layers += budget_layers(profile_budget)
    layers += budget_layers(recorded)
    layers += budget_layers(adapter.default_budget)
    budget = resolve(layers, limits=limits)
    warnings = []
    ignored = ["max_tiles"] if budget.resizes else ["min_pixels", "max_pixels"]
    for name in ignored:  # a flag the family cannot use: said, not silently dropped
        if name in flags:
            kind = "is resized with smart_resize (no tiles)" if budget.resizes else "is tiled (no smart_resize)"
            msg = f"pixel budget: {FLAG_NAMES[name]} has NO effect: the {adapter.name} adapter's family {kind}"
            warnings.append(msg)
            logger.warning(msg)
    if recorded is not None:
        for name in BUDGET_FIELDS:
            ours, theirs = getattr(budget, name), getattr(recorded, name)
            if ours is not None and theirs is not None and ours != theirs:
                msg = (
                    f"pixel budget: {name} {ours:,} ({budget.sources.get(name)}) differs from the {theirs:,} the "
                    f"checkpoint was trained at ({recorded.sources.get(name)}); the model sees other image sizes "
                    "than in training"
                )
                warnings.append(msg)
                logger.warning(msg)
    return budget, warnings
