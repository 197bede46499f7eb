"""GUI grounding rewards: pure scoring functions plus their TRL reward-function wrappers.

The pure functions (``score_click``, ``score_click_format``) take text and boxes. The wrappers follow TRL's reward
signature ``fn(completions, **kwargs) -> list[float]`` and read the dataset columns the ``gui_grounding`` task writes
(``target_boxes_resized``, ``prompt_mode``). They are registered for ``--reward_funcs`` through the entry-point group
``vlm_r1.rewards`` (see setup.py) as ``click`` and ``click_format``.
"""

from __future__ import annotations

from collections.abc import Sequence

from gui_grounding.frames import point_in_box
from gui_grounding.prompts import is_thinking_format, parse_point
from vlm_r1.rewards import completion_text


def score_click(text: str, boxes: Sequence[Sequence[float]], mode: str = "non_thinking") -> float:
    """GTA1 click reward for one completion: 1.0 when its point lands in any target box, else 0.0.

    Rules (GTA1 ``click_reward``, ``gta1_and_peers.md`` 1.2): exactly one ``(x,y)`` pair of integers, else 0.0 (none,
    two pairs, decimals, garbage); box edges count (inclusive); a hit on any of several boxes counts.

    Args:
        text: the completion text.
        boxes: target boxes ``[x_min, y_min, x_max, y_max]`` in the **same frame** as the text's coordinates (the
            resized frame for Qwen2.5-VL/GTA1 prompts).
        mode: ``non_thinking`` (point anywhere in the text) or ``thinking`` (point inside ``<answer>...</answer>``).

    Returns:
        1.0 or 0.0.

    >>> score_click("(15,20)", [[10, 10, 20, 20]])
    1.0
    >>> score_click("(21,20)", [[10, 10, 20, 20]])
    0.0
    """
    point = parse_point(text, mode, strict=True)
    if point is None:
        return 0.0
    return 1.0 if any(point_in_box(point, box) for box in boxes) else 0.0


def score_click_format(text: str) -> float:
    """Thinking-mode format reward: 1.0 for ``<think>...</think><answer>(x,y)</answer>`` (one integer pair), else 0.0.

    >>> score_click_format("<think>top left</think><answer>(3,4)</answer>")
    1.0
    >>> score_click_format("(3,4)")
    0.0
    """
    return 1.0 if is_thinking_format(text) else 0.0


def click_reward(completions: list, target_boxes_resized: list, prompt_mode: list | None = None, **kwargs) -> list:
    """TRL reward function ``click`` (GTA1): :func:`score_click` per completion.

    Args:
        completions: one per rollout; ``[{"role": "assistant", "content": str}]`` or ``str``.
        target_boxes_resized: per rollout, the list of target boxes in resized-image pixels (dataset column written by
            the ``gui_grounding`` task; repeated ``num_generations`` times by TRL).
        prompt_mode: per rollout, ``non_thinking`` or ``thinking`` (dataset column; default non_thinking).

    Returns:
        list of floats in {0.0, 1.0}, one per completion.
    """
    modes = prompt_mode or ["non_thinking"] * len(completions)
    return [
        score_click(completion_text(c), boxes, mode)
        for c, boxes, mode in zip(completions, target_boxes_resized, modes, strict=True)
    ]


def click_format_reward(completions: list, **kwargs) -> list:
    """TRL reward function ``click_format``: :func:`score_click_format` per completion (thinking mode)."""
    return [score_click_format(completion_text(c)) for c in completions]
