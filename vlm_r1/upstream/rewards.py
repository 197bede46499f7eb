"""Upstream VLM-R1's reward functions: ``accuracy`` (:mod:`vlm_r1.upstream.accuracy`), ``format``, and its REC rewards
``rec_iou`` (upstream ``iou_reward``) and ``rec_format`` (upstream ``format_reward_rec``). With ``--task_type rec``
the names ``accuracy``/``format`` resolve to ``rec_iou``/``rec_format`` (the task's ``reward_aliases``, applied by
``vlm_r1.grpo.build_rewards``), as upstream's ``--is_reward_customized_from_vlm_module true`` did.

They are registered under the entry-point group ``vlm_r1.rewards`` (setup.py); the core's registry
(``vlm_r1.rewards.REWARDS``) counts this package's own entries as built-ins and never imports this module.

Every reward here is total (TRL calls each reward on every rank, and one that raises kills the step): any completion
text and any target give one finite float. The rules that make it so (plugins' rewards can share them):

* a coordinate token whose integer part has more than :data:`MAX_NUMBER_DIGITS` (12) digits is not an answer (no
  ``int()`` on unbounded digit strings; every parsed coordinate is below 1e12); ``accuracy`` compares numbers with
  ``float()`` as upstream did (an overflow is ``inf``, a finite comparison);
* parsing runs in linear time: ``str.find`` scans and patterns without nested or ambiguous quantifiers (each
  equivalent to the upstream pattern it replaces, which is quoted next to it);
* ``accuracy``'s two library steps are bounded: math_verify (``parse``/``verify``) by a timeout and an input length
  (:data:`MATH_VERIFY_TIMEOUT_S`, :data:`MATH_VERIFY_MAX_CHARS`; skipped outside the main thread, where its signal
  alarm cannot work) and the Levenshtein ratio (O(n*m/64)) by :data:`RATIO_MAX_CELLS`;
* a target box or an image size that is NaN, infinite, inverted, malformed or past ±1e12 (``groundwork.geometry``
  :func:`~groundwork.geometry.valid_box` / :func:`~groundwork.geometry.valid_size`) scores 0.0.

Configuration errors (a missing column, an unknown prompt mode) still raise: they fail the first step, not hour 6.
"""

from __future__ import annotations

from groundwork.geometry import box_iou, frame_of, valid_box
from vlm_r1.answers import (
    _ANSWER_CLOSE,
    _THINK_OPEN,
    REC_BOX,
    _answer_after_think,
    answer_blocks,
    bounded_digits,
    completion_text,
    has_think_answer_format,
)
from vlm_r1.upstream.accuracy import accuracy_reward


def format_reward(completions: list, **kwargs) -> list[float]:
    """Upstream VLM-R1 ``format``: 1.0 when the whole completion is ``<think>...</think>``, optional whitespace, then
    ``<answer>...</answer>``, else 0.0 (:func:`has_think_answer_format`).

    As upstream (om-ai-lab/VLM-R1 src/open-r1-multimodal/src/open_r1/grpo_jsonl.py:882-897 at 90052f4), the text is
    matched as the model wrote it, NOT stripped: whitespace before ``<think>`` or after ``</answer>`` scores 0.0.
    Upstream's lazy regex is quadratic on repeated tags; the linear scan decides the same.

    >>> format_reward([[{"role": "assistant", "content": "<think>a</think> <answer>b</answer>"}], "<think>a</think>"
    ...                "<answer>b</answer>\\n"])
    [1.0, 0.0]
    """
    return [1.0 if has_think_answer_format(completion_text(c)) else 0.0 for c in completions]


# --------------------------------------------------------------------------------------------------------------------
# REC (referring expression comprehension): upstream VLM-R1 Qwen2VLModule.iou_reward / format_reward_rec
# (om-ai-lab/VLM-R1 src/open-r1-multimodal/src/open_r1/vlm_modules/qwen_module.py:87-189 at 90052f4; rules restated
# in docs/UPSTREAM.md). The rows come from vlm_r1.tasks.RECTask.

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
    box = REC_BOX.search(text, brace + 1)
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
    box = REC_BOX.search(blocks[0])
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
        (:func:`groundwork.geometry.valid_box`, :func:`groundwork.geometry.frame_of`: a side that is not a whole
        pixel too).
    """
    box = extract_rec_box(text)
    target, frame = valid_box(gt_box), frame_of(image_size, resized_size)
    if box is None or target is None or frame is None:
        return 0.0
    return box_iou(frame.box_to_original(box), target)


def iou_reward(
    completions: list,
    gt_bbox: list | None = None,
    image_size: list | None = None,
    resized_size: list | None = None,
    **kwargs,
) -> list[float]:
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
    missing = [
        n for n, v in (("gt_bbox", gt_bbox), ("image_size", image_size), ("resized_size", resized_size)) if v is None
    ]
    if missing:
        raise ValueError(
            f"rec_iou (iou_reward) needs the columns {missing} that --task_type rec writes; got columns "
            f"{sorted(kwargs)}"
        )
    return [
        score_rec_iou(completion_text(c), box, size, rsize)
        for c, box, size, rsize in zip(completions, gt_bbox, image_size, resized_size, strict=True)
    ]


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


#: name -> function, as registered under ``vlm_r1.rewards`` (setup.py; ``tests/test_upstream_edge.py`` checks they agree)
UPSTREAM_REWARDS = {
    "accuracy": accuracy_reward,
    "format": format_reward,
    "rec_iou": iou_reward,
    "rec_format": format_reward_rec,
}
