"""Reward registry: built-in names, the entry-point group ``vlm_r1.rewards``, and ``package.module:function`` specs.

A reward function follows TRL's signature ``fn(completions, **kwargs) -> list[float | None]``: ``completions`` are
``[{"role": "assistant", "content": str}]`` per rollout and every dataset column arrives in ``kwargs`` as a list, one
entry per completion. Resolution order for a name given to ``--reward_funcs``:

1. a spec with ``:`` (``my_pkg.rewards:my_reward``) is imported directly, so a researcher can try a reward without
   forking or packaging anything;
2. a built-in name (upstream VLM-R1's ``accuracy`` and ``format``);
3. a name registered by an installed package under the entry-point group ``vlm_r1.rewards`` (``gui_grounding``
   registers ``click`` and ``click_format``).

A name found in two places is an error, never a silent pick.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable
from importlib.metadata import entry_points

ENTRY_POINT_GROUP = "vlm_r1.rewards"

_THINK_ANSWER_FULL = re.compile(r"<think>.*?</think>\s*<answer>.*?</answer>", re.DOTALL)
_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)


def completion_text(completion) -> str:
    """Text of one TRL completion: ``[{"role": "assistant", "content": str | blocks}]`` (conversational) or ``str``."""
    if isinstance(completion, str):
        return completion
    content = completion[-1]["content"]
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return content


def format_reward(completions: list, **kwargs) -> list[float]:
    """Upstream VLM-R1 ``format``: 1.0 when the whole completion is ``<think>...</think> <answer>...</answer>``.

    >>> format_reward([[{"role": "assistant", "content": "<think>a</think> <answer>b</answer>"}]])
    [1.0]
    """
    return [1.0 if _THINK_ANSWER_FULL.fullmatch(completion_text(c).strip()) else 0.0 for c in completions]


def _clean_answer(text: str) -> str:
    m = _ANSWER.search(text)
    inner = m.group(1) if m else text
    return " ".join(inner.strip().lower().rstrip(".").split())


def _as_number(text: str) -> float | None:
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return None


ACCURACY_METHODS = ("default", "all_match", "yes_no")
_UPSTREAM_ONLY_METHODS = ("mcq", "llm", "map", "math", "weighted_sum", "od_ap", "od_ap50", "odLength")


def accuracy_reward(completions: list, solution: list, accu_reward_method: list | None = None, **kwargs) -> list:
    """Upstream VLM-R1 ``accuracy``, dispatched per sample on the ``accu_reward_method`` column.

    Methods: ``all_match`` (exact match of the cleaned ``<answer>`` contents, case-insensitive), ``yes_no`` (same, on
    yes/no answers), ``default`` (numeric equality when both parse as numbers, else exact cleaned match). Upstream's
    ``default`` also tries math_verify and a Levenshtein fallback; ours is the strict subset. Upstream-only methods
    (mcq, llm, map, math, weighted_sum, od_*) raise instead of silently scoring differently.

    Raises:
        NotImplementedError: an upstream-only method.
        ValueError: an unknown method.
    """
    methods = accu_reward_method or ["default"] * len(completions)
    rewards = []
    for completion, sol, method in zip(completions, solution, methods, strict=True):
        method = method or "default"
        if method in _UPSTREAM_ONLY_METHODS:
            raise NotImplementedError(f"accu_reward_method {method!r} is not implemented; supported: {ACCURACY_METHODS}")
        if method not in ACCURACY_METHODS:
            raise ValueError(f"unknown accu_reward_method {method!r}; supported: {ACCURACY_METHODS}")
        pred, gold = _clean_answer(completion_text(completion)), _clean_answer(str(sol))
        if method == "default":
            p, g = _as_number(pred), _as_number(gold)
            if p is not None and g is not None:
                rewards.append(1.0 if abs(p - g) < 1e-9 else 0.0)
                continue
        rewards.append(1.0 if pred == gold else 0.0)
    return rewards


BUILTIN_REWARDS: dict[str, Callable] = {"accuracy": accuracy_reward, "format": format_reward}


def _entry_point_rewards() -> dict[str, object]:
    return {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP)}


def available_rewards() -> dict[str, str]:
    """Name -> where it comes from (``builtin`` or the entry point's ``module:function``)."""
    names = {name: "builtin" for name in BUILTIN_REWARDS}
    for name, ep in _entry_point_rewards().items():
        names[name] = ep.value if name not in names else f"CONFLICT: builtin and {ep.value}"
    return names


def resolve_reward(name: str) -> Callable:
    """Return the reward function for a ``--reward_funcs`` entry.

    Raises:
        ValueError: unknown name (the message lists the available ones) or a name registered twice.
        ImportError / AttributeError: a ``module:function`` spec that cannot be imported.
    """
    if ":" in name:
        module_name, _, attr = name.partition(":")
        func = getattr(importlib.import_module(module_name), attr)
        if not callable(func):
            raise ValueError(f"reward spec {name!r} does not name a callable")
        return func
    eps = _entry_point_rewards()
    if name in BUILTIN_REWARDS and name in eps:
        raise ValueError(f"reward {name!r} is both built in and registered by {eps[name].value}; rename the plugin")
    if name in BUILTIN_REWARDS:
        return BUILTIN_REWARDS[name]
    if name in eps:
        return eps[name].load()
    listing = ", ".join(f"{n} ({src})" for n, src in sorted(available_rewards().items()))
    raise ValueError(f"unknown reward {name!r}. Available: {listing}; or give a 'package.module:function' spec")


def resolve_rewards(names: list[str]) -> list[Callable]:
    """:func:`resolve_reward` for each name, keeping order."""
    return [resolve_reward(n) for n in names]
