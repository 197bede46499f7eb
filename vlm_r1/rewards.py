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
3. a reward the task declares (``Task.rewards``: a task plugin brings its own rewards), then a name registered by an
   installed package under the entry-point group ``vlm_r1.rewards`` (:data:`REWARDS`, a
   :class:`vlm_r1.registry.Registry`).

A task's reward that shadows a built-in name is logged; an entry point named like a built-in is an error. Never a
silent pick.

Every built-in reward is total (TRL calls each reward on every rank, and one that raises kills the step): any completion
text and any target give one finite float. The rules that make it so (plugins' rewards can share them):

* a number token whose integer part has more than :data:`MAX_NUMBER_DIGITS` (12) digits is not an answer (no ``int()``
  on unbounded digit strings; every parsed value is below 1e12);
* parsing runs in linear time: ``str.find`` scans and patterns without nested or ambiguous quantifiers (each
  equivalent to the upstream pattern it replaces, which is quoted next to it);
* a target box or an image size that is NaN, infinite, inverted, malformed or past ±1e12 (``vlm_r1.geometry``
  :func:`~vlm_r1.geometry.valid_box` / :func:`~vlm_r1.geometry.valid_size`) scores 0.0.

Configuration errors (a missing column, an unknown prompt mode) still raise: they fail the first step, not hour 6.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Callable
from typing import Any

from vlm_r1.geometry import Frame, box_iou, valid_box, valid_size
from vlm_r1.registry import Registry

logger = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "vlm_r1.rewards"

# A number token with more integer digits than this is not an answer (the issue-11 bound): every parsed value is below
# 1e12, exact as a float, and far from overflow in any reward's arithmetic.
MAX_NUMBER_DIGITS = 12

_ANSWER_OPEN, _ANSWER_CLOSE, _THINK_OPEN, _THINK_CLOSE = "<answer>", "</answer>", "<think>", "</think>"
_SPACES = re.compile(r"\s*")  # a whitespace run (str.isspace), skipped in C rather than one character at a time


def completion_text(completion) -> str:
    """Text of one TRL completion: ``[{"role": "assistant", "content": str | blocks}]`` (conversational) or ``str``.

    Total: a completion of another shape (no messages, content neither a string nor text blocks) reads as ``""``.
    """
    if isinstance(completion, str):
        return completion
    try:
        content = completion[-1]["content"]
    except (TypeError, LookupError):
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    return ""


def bounded_digits(token: str) -> bool:
    """True when the integer part of the number ``token`` (sign and fraction aside) has at most 12 digits.

    >>> bounded_digits("-123456789012.5"), bounded_digits("1234567890123")
    (True, False)
    """
    whole = token.lstrip("+-").partition(".")[0]
    return len(whole) <= MAX_NUMBER_DIGITS


def answer_blocks(text: str, limit: int) -> list[str]:
    """The first ``limit`` ``<answer>...</answer>`` blocks of ``text``, as ``re.findall(r"<answer>(.*?)</answer>",
    text, re.DOTALL)`` finds them (non-overlapping, each closed by the nearest ``</answer>``), in linear time (the
    lazy pattern rescans to the end of the text for every unclosed ``<answer>``: quadratic)."""
    blocks, pos = [], 0
    while len(blocks) < limit:
        start = text.find(_ANSWER_OPEN, pos)
        if start < 0:
            break
        end = text.find(_ANSWER_CLOSE, start + len(_ANSWER_OPEN))
        if end < 0:  # no later <answer> can be closed either
            break
        blocks.append(text[start + len(_ANSWER_OPEN) : end])
        pos = end + len(_ANSWER_CLOSE)
    return blocks


def _answer_after_think(text: str, pos: int) -> int:
    """Index just past the first ``<answer>`` that follows a ``</think>`` at or after ``pos`` with only whitespace
    between them (the regex ``</think>\\s*<answer>``, ``\\s`` = ``str.isspace``), or -1. Linear: the whitespace runs
    after distinct ``</think>`` tags are disjoint."""
    while True:
        k = text.find(_THINK_CLOSE, pos)
        if k < 0:
            return -1
        a = _SPACES.match(text, k + len(_THINK_CLOSE)).end()
        if text.startswith(_ANSWER_OPEN, a):
            return a + len(_ANSWER_OPEN)
        pos = k + 1


def think_answer(text: str) -> str | None:
    """The answer of a ``<think>...</think><answer>...</answer>`` completion, or ``None`` when it has another shape.

    Same result as ``re.match(r"^\\s*<think>.*?</think>\\s*<answer>(.*?)</answer>\\s*$", text, re.DOTALL).group(1)``
    (whitespace = ``str.isspace``, the regex's ``\\s``), found in linear time: the answer runs from the ``<answer>``
    that follows the first suitable ``</think>`` to the final ``</answer>`` (only whitespace may come after it).
    """
    body = text.rstrip()
    head = len(text) - len(text.lstrip())
    if not text.startswith(_THINK_OPEN, head) or not body.endswith(_ANSWER_CLOSE):
        return None
    close = len(body) - len(_ANSWER_CLOSE)  # where the final </answer> starts
    start = _answer_after_think(text, head + len(_THINK_OPEN))
    if start < 0 or start > close:  # later </think>s leave even less room
        return None
    return text[start:close]


def format_reward(completions: list, **kwargs) -> list[float]:
    """Upstream VLM-R1 ``format``: 1.0 when the whole completion is ``<think>...</think> <answer>...</answer>``.

    Upstream's pattern ``<think>.*?</think>\\s*<answer>.*?</answer>`` (full match of the stripped text) is quadratic
    on repeated tags; :func:`think_answer` decides the same in linear time.

    >>> format_reward([[{"role": "assistant", "content": "<think>a</think> <answer>b</answer>"}]])
    [1.0]
    """
    return [1.0 if think_answer(completion_text(c)) is not None else 0.0 for c in completions]


def _clean_answer(text: str) -> str:
    blocks = answer_blocks(text, 1)  # upstream: re.search(r"<answer>(.*?)</answer>", text, re.DOTALL)
    inner = blocks[0] if blocks else text
    return " ".join(inner.strip().lower().rstrip(".").split())


def _as_number(text: str) -> float | None:
    """The answer as a number: ``float()`` of the text without commas, when its mantissa's integer part has at most
    12 digits and the value is finite; else ``None`` (the answer is then compared as text)."""
    plain = text.replace(",", "")
    if not bounded_digits(plain.lower().partition("e")[0]):
        return None
    try:
        value = float(plain)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _solution_text(solution) -> str:
    try:
        return str(solution)
    except ValueError:  # an int past Python's int/str digit limit
        return ""


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
    (grpo_jsonl.py accuracy_reward). A number is a finite value whose integer part has at most 12 digits (see the
    module docstring); ``nan``, ``inf`` or a longer number is compared as text. Upstream's ``default`` also tries math_verify and a Levenshtein fallback; ours is
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
        pred, gold = _clean_answer(completion_text(completion)), _clean_answer(_solution_text(sol))
        if method not in ("all_match", "yes_no"):
            p, g = _as_number(pred), _as_number(gold)
            if p is not None and g is not None:
                rewards.append(1.0 if abs(p - g) < 1e-9 else 0.0)
                continue
        rewards.append(1.0 if pred == gold else 0.0)
    return rewards


# --------------------------------------------------------------------------------------------------------------------
# REC (referring expression comprehension): upstream VLM-R1 Qwen2VLModule.iou_reward / format_reward_rec
# (om-ai-lab/VLM-R1 src/open-r1-multimodal/src/open_r1/vlm_modules/qwen_module.py:87-189 at 90052f4; rules restated
# in docs/UPSTREAM.md). The rows come from vlm_r1.tasks.RECTask.

# A bbox as upstream parses it: four unsigned integers, "[a,b,c,d]" with optional whitespace after each comma only.
# Linear: a match can only start at "[", and the span it scans (digits, commas, whitespace) holds no other "[".
_REC_BOX = re.compile(r"\[(\d+),\s*(\d+),\s*(\d+),\s*(\d+)\]")
# Upstream's REC format rule, searched anywhere in the completion (think block, then an answer block holding a
# JSON-ish object "{ ... }" that contains such a bbox); polynomial as a regex, decided by :func:`has_rec_format`.
REC_FORMAT_PATTERN = r"<think>.*?</think>\s*<answer>.*?\{.*\[\d+,\s*\d+,\s*\d+,\s*\d+\].*\}.*?</answer>"


def has_rec_format(text: str) -> bool:
    """True when ``re.search(REC_FORMAT_PATTERN, text, re.DOTALL)`` would match, decided in linear time.

    The pattern holds iff, in order: a ``<think>``; a ``</think>`` after it followed by whitespace and ``<answer>``; a
    ``{``; an integer bbox ``[a, b, c, d]``; a ``}``; then a ``</answer>``. Every step only needs the previous one to
    end early, so taking the earliest candidate at each step is exact (two bbox matches never overlap, so the
    earliest one also ends first), and each step is one forward scan.
    """
    think = text.find(_THINK_OPEN)
    if think < 0:
        return False
    answer = _answer_after_think(text, think + len(_THINK_OPEN))
    if answer < 0:
        return False
    brace = text.find("{", answer)
    if brace < 0:
        return False
    box = _REC_BOX.search(text, brace + 1)
    if box is None:
        return False
    close_brace = text.find("}", box.end())
    return close_brace >= 0 and text.find(_ANSWER_CLOSE, close_brace + 1) >= 0


def extract_rec_box(text: str) -> tuple[int, int, int, int] | None:
    """The predicted box of a REC completion, in the frame the model answered in (resized pixels for Qwen2.5-VL).

    Rule (upstream ``iou_reward``): the FIRST ``<answer>...</answer>`` block, then the FIRST ``[a, b, c, d]`` of
    unsigned integers inside it (e.g. ``{"bbox_2d": [10, 20, 30, 40], "label": "cat"}``). Returns None when there is
    no answer block or no such bbox (negative or decimal numbers do not match, as upstream), or when a number of
    that bbox has more than 12 digits (not an answer; upstream's ``int()`` had no bound).

    >>> extract_rec_box('<think>t</think><answer>{"bbox_2d": [10, 20,30, 40]}</answer>')
    (10, 20, 30, 40)
    """
    blocks = answer_blocks(text, 1)
    if not blocks:
        return None
    box = _REC_BOX.search(blocks[0])
    if box is None or not all(bounded_digits(v) for v in box.groups()):
        return None
    x1, y1, x2, y2 = (int(v) for v in box.groups())
    return x1, y1, x2, y2


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
        (upstream's resize-back, which took ``W', H'`` from ``image_grid_thw * 14``). Total: an unusable ``gt_box``
        (NaN, infinite, inverted, malformed) or size (a side under 1 pixel, NaN, infinite) scores 0.0
        (:func:`vlm_r1.geometry.valid_box`, :func:`vlm_r1.geometry.valid_size`).
    """
    box = extract_rec_box(text)
    target, size, rsize = valid_box(gt_box), valid_size(image_size), valid_size(resized_size)
    if box is None or target is None or size is None or rsize is None:
        return 0.0
    frame = Frame(width=int(size[0]), height=int(size[1]), resized_width=int(rsize[0]), resized_height=int(rsize[1]))
    return box_iou(frame.box_to_original(box), target)


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
    or after ``</answer>`` is allowed, as upstream. Upstream's regex is decided in linear time by :func:`has_rec_format`.

    >>> format_reward_rec(['<think>x</think> <answer>{"bbox_2d": [1, 2, 3, 4]}</answer>',
    ...                    '<think>x</think> <answer>[1, 2, 3, 4]</answer>'])
    [1.0, 0.0]
    """
    return [1.0 if has_rec_format(completion_text(c)) else 0.0 for c in completions]


BUILTIN_REWARDS: dict[str, Callable] = {
    "accuracy": accuracy_reward,
    "format": format_reward,
    "rec_iou": iou_reward,
    "rec_format": format_reward_rec,
}


#: built-ins + the entry-point group ``vlm_r1.rewards`` + ``package.module:function`` specs; an entry point named like a
#: built-in is refused (never a silent swap of the objective)
REWARDS = Registry("reward", ENTRY_POINT_GROUP, lambda: BUILTIN_REWARDS, replace=False)


def available_rewards(task: Any = None) -> dict[str, str]:
    """Name -> where it comes from: ``builtin``, the entry point's ``module:function``, or ``task NAME`` for the
    rewards ``task`` declares (``Task.rewards``, which take precedence)."""
    from importlib.metadata import entry_points

    names = {name: "builtin" for name in BUILTIN_REWARDS}
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        names[ep.name] = ep.value if ep.name not in BUILTIN_REWARDS else f"CONFLICT: builtin and {ep.value}"
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
        if name in BUILTIN_REWARDS:
            logger.info("reward %r: task %s's own, not the built-in one", name, task.name)
        return own[name]
    if ":" not in name and name not in REWARDS.available() and name not in REWARDS.conflicts:
        listing = ", ".join(f"{n} ({src})" for n, src in sorted(available_rewards(task).items()))
        raise ValueError(f"unknown reward {name!r}. Available: {listing}; or give a 'package.module:function' "
                         "spec")  # fmt: skip
    return REWARDS.get_callable(name)


def resolve_rewards(names: list[str], task: Any = None) -> list[Callable]:
    """:func:`resolve_reward` for each name, keeping order."""
    return [resolve_reward(n, task) for n in names]
