"""Reward registry: built-in names, the entry-point group ``vlm_r1.rewards``, and ``package.module:function`` specs.

A reward function follows TRL's signature ``fn(completions, **kwargs) -> list[float | None]``: ``completions`` are
``[{"role": "assistant", "content": str}]`` per rollout and every dataset column arrives in ``kwargs`` as a list, one
entry per completion. Resolution order for a name given to ``--reward_funcs``:

1. a spec with ``:`` (``my_pkg.rewards:my_reward``) is imported directly, so a researcher can try a reward without
   forking or packaging anything;
2. a built-in name: upstream VLM-R1's ``accuracy`` and ``format``, and its REC rewards ``rec_iou`` (upstream
   ``iou_reward``) and ``rec_format`` (upstream ``format_reward_rec``). With ``--task_type rec`` the names
   ``accuracy``/``format`` resolve to ``rec_iou``/``rec_format`` (the task's ``reward_aliases``, applied by
   ``vlm_r1.grpo_jsonl.build_rewards``), as upstream's ``--is_reward_customized_from_vlm_module true`` did;
3. a name registered by an installed package under the entry-point group ``vlm_r1.rewards`` (``gui_grounding``
   registers ``click`` and ``click_format``).

A name found in two places is an error, never a silent pick.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable
from importlib.metadata import entry_points

from vlm_r1.geometry import Frame, box_iou

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


def check_accuracy_methods(methods) -> None:
    """Refuse, before training starts, ``accu_reward_method`` values :func:`accuracy_reward` cannot score.

    Raises:
        NotImplementedError: an upstream-only method (mcq, llm, map, math, weighted_sum, od_*), listing them.
    """
    bad = sorted({m for m in methods if m in _UPSTREAM_ONLY_METHODS})
    if bad:
        raise NotImplementedError(f"accu_reward_method {bad} is not implemented here (supported: {ACCURACY_METHODS}; "
                                  "other values score as 'default', as upstream); drop those records or pass your own "
                                  "reward with --reward_funcs package.module:function")  # fmt: skip


def accuracy_reward(completions: list, solution: list, accu_reward_method: list | None = None, **kwargs) -> list:
    """Upstream VLM-R1 ``accuracy``, dispatched per sample on the ``accu_reward_method`` column.

    Methods: ``all_match`` (exact match of the cleaned ``<answer>`` contents, case-insensitive), ``yes_no`` (same, on
    yes/no answers), ``default`` (numeric equality when both parse as numbers, else exact cleaned match). Any other
    value scores as ``default``, as upstream's dispatch falls through to ``default_accuracy_reward``
    (grpo_jsonl.py accuracy_reward). Upstream's ``default`` also tries math_verify and a Levenshtein fallback; ours is
    the strict subset. Upstream-only methods (mcq, llm, map, math, weighted_sum, od_*) are refused before training by
    :func:`check_accuracy_methods` (``python -m vlm_r1.grpo_jsonl`` calls it on the dataset); reached here anyway,
    they score 0.0 rather than stop the step.

    Returns:
        One float in {0.0, 1.0} per completion (total: any completion text and solution give a value).
    """
    methods = accu_reward_method or ["default"] * len(completions)
    rewards = []
    for completion, sol, method in zip(completions, solution, methods, strict=True):
        method = method if isinstance(method, str) else "default"
        if method in _UPSTREAM_ONLY_METHODS:
            rewards.append(0.0)
            continue
        pred, gold = _clean_answer(completion_text(completion)), _clean_answer(str(sol))
        if method not in ("all_match", "yes_no"):
            p, g = _as_number(pred), _as_number(gold)
            if p is not None and g is not None:
                rewards.append(1.0 if abs(p - g) < 1e-9 else 0.0)
                continue
        rewards.append(1.0 if pred == gold else 0.0)
    return rewards


# --------------------------------------------------------------------------------------------------------------------
# REC (referring expression comprehension): upstream VLM-R1 Qwen2VLModule.iou_reward / format_reward_rec
# (vlm_r1_upstream.md 1.4 and 1.5; rules restated in docs/UPSTREAM.md). The rows come from vlm_r1.tasks.RECTask.

# A bbox as upstream parses it: four unsigned integers, "[a,b,c,d]" with optional whitespace after each comma only.
_REC_BOX = re.compile(r"\[(\d+),\s*(\d+),\s*(\d+),\s*(\d+)\]")
# Upstream's REC format rule, searched anywhere in the completion: think block, then an answer block holding a JSON-ish
# object ("{ ... }") that contains such a bbox.
_REC_FORMAT = re.compile(r"<think>.*?</think>\s*<answer>.*?\{.*\[\d+,\s*\d+,\s*\d+,\s*\d+\].*\}.*?</answer>", re.DOTALL)


def extract_rec_box(text: str) -> tuple[int, int, int, int] | None:
    """The predicted box of a REC completion, in the frame the model answered in (resized pixels for Qwen2.5-VL).

    Rule (upstream ``iou_reward``): the FIRST ``<answer>...</answer>`` block, then the FIRST ``[a, b, c, d]`` of
    unsigned integers inside it (e.g. ``{"bbox_2d": [10, 20, 30, 40], "label": "cat"}``). Returns None when there is
    no answer block or no such bbox (negative or decimal numbers do not match, as upstream).

    >>> extract_rec_box('<think>t</think><answer>{"bbox_2d": [10, 20,30, 40]}</answer>')
    (10, 20, 30, 40)
    """
    answer = _ANSWER.search(text)
    if answer is None:
        return None
    box = _REC_BOX.search(answer.group(1))
    return None if box is None else tuple(int(v) for v in box.groups())


def score_rec_iou(text: str, gt_box, image_size, resized_size) -> float:
    """IoU in ORIGINAL pixels between the box in ``text`` (answered in the resized frame) and ``gt_box``.

    Args:
        text: the completion text.
        gt_box: ``[x1, y1, x2, y2]``, original-image pixels.
        image_size: ``[W, H]`` of the original image (pixels).
        resized_size: ``[W', H']`` the model saw (the processor's smart_resize of ``image_size``).

    Returns:
        The IoU value in ``[0, 1]`` (not thresholded; upstream's ``> 0.5 -> 1.0`` variant is commented out there),
        0.0 when no box can be parsed. The predicted box is scaled per axis by ``W / W'`` and ``H / H'`` first
        (upstream's resize-back, which took ``W', H'`` from ``image_grid_thw * 14``).
    """
    box = extract_rec_box(text)
    if box is None:
        return 0.0
    frame = Frame(width=int(image_size[0]), height=int(image_size[1]),
                  resized_width=int(resized_size[0]), resized_height=int(resized_size[1]))  # fmt: skip
    return box_iou(frame.box_to_original(box), tuple(gt_box))


def iou_reward(completions: list, gt_bbox: list | None = None, image_size: list | None = None,
               resized_size: list | None = None, **kwargs) -> list[float]:  # fmt: skip
    """REC accuracy (``rec_iou``; upstream Qwen ``iou_reward``): :func:`score_rec_iou` per completion.

    Args:
        completions: ``[[{"role": "assistant", "content": str}], ...]`` (or plain strings), one per rollout.
        gt_bbox, image_size, resized_size: per-rollout columns written by ``--task_type rec`` (see
            :func:`score_rec_iou` for units and frames).

    Returns:
        One float in ``[0, 1]`` per completion; malformed output (no ``<answer>``, no integer bbox) scores 0.0.

    Raises:
        ValueError: a column is missing (the rows were not built by the ``rec`` task).

    >>> iou_reward([[{"role": "assistant", "content": "<answer>[147, 70, 294, 140]</answer>"}]],
    ...            gt_bbox=[[480, 150, 800, 300]], image_size=[[1280, 720]], resized_size=[[588, 336]])
    [0.3333333333333333]
    """
    missing = [n for n, v in (("gt_bbox", gt_bbox), ("image_size", image_size), ("resized_size", resized_size))
               if v is None]  # fmt: skip
    if missing:
        raise ValueError(f"rec_iou (iou_reward) needs the columns {missing} that --task_type rec writes; got columns "
                         f"{sorted(kwargs)}")  # fmt: skip
    return [score_rec_iou(completion_text(c), box, size, rsize)
            for c, box, size, rsize in zip(completions, gt_bbox, image_size, resized_size, strict=True)]  # fmt: skip


def format_reward_rec(completions: list, **kwargs) -> list[float]:
    """REC format (``rec_format``; upstream Qwen ``format_reward_rec``): 1.0 when the completion contains
    ``<think>...</think>``, optional whitespace, then ``<answer>...</answer>`` whose content holds ``{...}`` around an
    integer bbox ``[a, b, c, d]``; else 0.0.

    Unlike the generic ``format`` (a full match of the whole completion), this is a search: text before ``<think>``
    or after ``</answer>`` is allowed, as upstream.

    >>> format_reward_rec(['<think>x</think> <answer>{"bbox_2d": [1, 2, 3, 4]}</answer>',
    ...                    '<think>x</think> <answer>[1, 2, 3, 4]</answer>'])
    [1.0, 0.0]
    """
    return [1.0 if _REC_FORMAT.search(completion_text(c)) else 0.0 for c in completions]


BUILTIN_REWARDS: dict[str, Callable] = {
    "accuracy": accuracy_reward,
    "format": format_reward,
    "rec_iou": iou_reward,
    "rec_format": format_reward_rec,
}


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
