"""A command-line dialect: what a foreign command line (upstream VLM-R1's, GTA1's) adds to the core's, handed down by
the entry point that speaks it.

The core parses its own flags (:mod:`vlm_r1.command_line`) with the dataclasses' defaults (TRL's and transformers'),
trains and logs. A :class:`Dialect` is the one place a foreign command line's conventions enter that flow; the core
never imports a dialect, it receives one. Entry points pass theirs: ``python -m vlm_r1.grpo_jsonl``,
``python -m vlm_r1.sft`` and ``python -m gui_grounding.train`` pass upstream VLM-R1's (:mod:`vlm_r1.upstream`, the edge
package only entry points import; docs/ARCHITECTURE.md). A library caller that passes none gets :data:`CORE`: no
extra flags, TRL's defaults, no rollout log.

The hooks, in the order a run meets them:

1. ``argument_classes``: dataclasses parsed together with the core's (the foreign flags: upstream's renamed or
   dropped flags, transformers 4.x flags);
2. ``defaults``: field values that replace the dataclasses' defaults (an entry point's own defaults, the recipe and
   the flags win over them), each with the reason shown by ``--help`` (``default_notes``);
3. ``translate(parser, namespace, given) -> notices``: rewrites the parsed foreign flags into core values, before any
   dataclass is built (``given``: the fields set by a flag or the recipe, never overwritten);
4. ``finish(extras, script_args, training_args, model_args, given) -> None``: the last rewrites that need the built
   dataclasses (``extras``: the instances of ``argument_classes``), logging what it changed;
5. ``rollout_log(columns) -> callable | None``: a writer the trainer calls with the rollouts rank 0 scored
   (``(inputs, completion texts, rewards [rollouts x reward functions], reward function names, reward functions)``;
   it must never raise), or None.

Tasks and reward functions are not part of a dialect: they are registered under the entry-point groups
``vlm_r1.tasks`` and ``vlm_r1.rewards`` like any plugin's (setup.py), so every entry point sees the same ones.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any


def _no_notices(parser: Any, namespace: Any, given: set[str]) -> list[str]:
    return []


def _no_finish(extras: list, script_args: Any, training_args: Any, model_args: Any, given: set[str]) -> None:
    return None


def _no_rollout_log(columns: Mapping[str, tuple[str, ...]] | None) -> None:
    return None


@dataclasses.dataclass(frozen=True)
class Dialect:
    """The hooks of a command-line dialect (module docstring); every one is optional.

    Attributes:
        name: for logs and for the one-parse cache key.
        argument_classes: dataclasses parsed with the core's (their instances reach ``finish``).
        defaults: ``{field: value}`` over the dataclasses' own defaults.
        default_notes: ``{field: why}``; ``--help`` appends ``Default here: WHY.`` to the flag's help.
        translate: ``(parser, namespace, given) -> [notice, ...]``, see the module docstring.
        finish: ``(extras, script_args, training_args, model_args, given) -> None``.
        rollout_log: ``(columns) -> writer or None``; ``columns`` is the task's ``debug_columns``.
    """

    name: str = "core"
    argument_classes: tuple[type, ...] = ()
    defaults: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    default_notes: Mapping[str, str] = dataclasses.field(default_factory=dict)
    translate: Callable[..., list[str]] = _no_notices
    finish: Callable[..., None] = _no_finish
    rollout_log: Callable[..., Any] = _no_rollout_log

    def extra_fields(self) -> set[str]:
        """The field names of :attr:`argument_classes`."""
        return {f.name for cls in self.argument_classes for f in dataclasses.fields(cls)}


#: the core's own command line: its flags, TRL's and transformers' defaults
CORE = Dialect()
