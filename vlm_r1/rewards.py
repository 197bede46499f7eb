"""Reward registry: the entry-point group ``vlm_r1.rewards``, a task's own rewards, and ``package.module:function``
specs.

A reward function follows TRL's signature ``fn(completions, **kwargs) -> list[float | None]``: ``completions`` are
``[{"role": "assistant", "content": str}]`` per rollout and every dataset column arrives in ``kwargs`` as a list, one
entry per completion. Resolution order for a name given to ``--reward_funcs``:

1. a spec with ``:`` (``my_pkg.rewards:my_reward``) is imported directly, so a researcher can try a reward without
   forking or packaging anything;
2. a reward the task declares (``Task.rewards``: a task plugin brings its own rewards);
3. a name in :data:`REWARDS` (a :class:`groundwork.registry.Registry` over the entry-point group ``vlm_r1.rewards``).
   This package's own entries are the built-ins: upstream VLM-R1's ``accuracy``, ``format``, ``rec_iou`` and
   ``rec_format`` (``vlm_r1.upstream.rewards``, the upstream edge, which the core never imports). With ``--task_type
   rec`` the names ``accuracy``/``format`` resolve to ``rec_iou``/``rec_format`` (the task's ``reward_aliases``,
   applied by ``vlm_r1.grpo.build_rewards``).

A task's reward that shadows a built-in name is logged; another package's entry point named like a built-in is an
error. Never a silent pick.

A reward may declare ``check_dataset(dataset)``: called once on the training set before training (``accuracy`` checks
the ``accu_reward_method`` column); it raises ``ValueError`` for data the reward cannot score.

Configuration errors (a missing column, an unknown prompt mode) raise: they fail the first step, not hour 6. The rules
that keep a reward total on any completion are in ``vlm_r1.upstream.rewards`` and ``vlm_r1.answers``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from groundwork.registry import Registry

logger = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "vlm_r1.rewards"


#: the entry-point group ``vlm_r1.rewards`` (this package's own entries are the built-ins) + ``package.module:function``
#: specs; another package's entry point named like a built-in is refused (never a silent swap of the objective)
REWARDS = Registry("reward", ENTRY_POINT_GROUP, dict, replace=False, own="vlm_r1.")


def available_rewards(task: Any = None) -> dict[str, str]:
    """Name -> where it comes from: ``builtin``, the entry point's ``module:function``, or ``task NAME`` for the
    rewards ``task`` declares (``Task.rewards``, which take precedence)."""
    from importlib.metadata import entry_points

    builtin = set(REWARDS.builtin_names())
    names = dict.fromkeys(sorted(builtin), "builtin")
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.value.startswith(REWARDS.own or "\0"):
            continue
        names[ep.name] = ep.value if ep.name not in builtin else f"CONFLICT: builtin and {ep.value}"
    if task is not None:
        names.update({name: f"task {task.name}" for name in getattr(task, "rewards", {})})
    return names


def resolve_reward(name: str, task: Any = None) -> Callable:
    """Return the reward function for a ``--reward_funcs`` entry.

    Order: a ``package.module:function`` spec; a reward ``task`` declares (``Task.rewards``); the :data:`REWARDS`
    registry (built-ins, then the ``vlm_r1.rewards`` entry points).

    Raises:
        ValueError: unknown name (the message lists the available ones), a name both built in and registered by an
            entry point, a spec that cannot be imported (``cannot load ...``), or one that does not name a callable.
    """
    own = getattr(task, "rewards", {}) if task is not None else {}
    REWARDS.refresh()  # entry points are read at each resolution (a plugin installed since; tests patch them)
    if ":" not in name and name in own:
        if name in REWARDS.builtin_names():
            logger.info("reward %r: task %s's own, not the built-in one", name, task.name)
        return own[name]
    if ":" not in name and name not in REWARDS.available() and name not in REWARDS.conflicts:
        listing = ", ".join(f"{n} ({src})" for n, src in sorted(available_rewards(task).items()))
        raise ValueError(f"unknown reward {name!r}. Available: {listing}; or give a 'package.module:function' spec")
    return REWARDS.get_callable(name)


def resolve_rewards(names: list[str], task: Any = None) -> list[Callable]:
    """:func:`resolve_reward` for each name, keeping order."""
    return [resolve_reward(n, task) for n in names]


class registered_reward:  # noqa: N801 - used like staticmethod, as a class attribute
    """A class attribute that is the reward registered as ``name`` in :data:`REWARDS`, looked up when it is read: a
    family module exposes upstream's model-specific REC rewards (``Qwen2VLModule.iou_reward``) without importing the
    upstream edge that defines them.

    Raises (on access):
        ValueError: no reward is registered under ``name``.
    """

    def __init__(self, name: str) -> None:
        self.name = name

    def __get__(self, obj: Any, owner: Any = None) -> Callable:
        return REWARDS.get_callable(self.name)
