"""The completion-text rules every reward shares (one home): the text of a completion, the ``<think>`` / ``<answer>``
blocks as upstream VLM-R1's regexes read them (restated as linear scans, each quoting the pattern it replaces), and the
bound on number tokens (:data:`MAX_NUMBER_DIGITS`) that keeps every parsed coordinate finite. Used by the core's
rewards (:mod:`vlm_r1.upstream.rewards`, :mod:`vlm_r1.upstream.accuracy`), the family modules and the GUI plugin's point parser.
"""

from __future__ import annotations

import re

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


def completion_transcript(completion) -> str:
    """The whole of one completion for a log: :func:`completion_text` of a one-turn completion; for a multi-turn one
    (a tool's rollouts, :mod:`vlm_r1.tool_rollout`: assistant, tool turn, assistant, ...) every turn, each as
    ``[role] text`` on its own lines, so both turns (and the tool's answer between them) are shown. Total."""
    if not isinstance(completion, list) or len(completion) < 2:
        return completion_text(completion)
    return "\n".join(
        f"[{m.get('role', '?') if isinstance(m, dict) else '?'}] {completion_text([m])}" for m in completion
    )


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


def has_think_answer_format(text: str) -> bool:
    """True when ``re.fullmatch(r"<think>.*?</think>\\s*<answer>.*?</answer>", text, re.DOTALL)`` would match.

    Upstream's ``format`` rule, decided in linear time: ``text`` itself (not stripped: a leading space or a trailing
    newline fails) starts with ``<think>`` and ends with ``</answer>``, and some ``</think>`` after the opening tag is
    followed by whitespace (``str.isspace``, the regex's ``\\s``) and an ``<answer>`` that ends before that final
    ``</answer>`` starts. Both ``.*?`` may hold anything, tags included; the earliest suitable ``</think>`` leaves the
    most room, so one forward scan decides.
    """
    if not (text.startswith(_THINK_OPEN) and text.endswith(_ANSWER_CLOSE)):
        return False
    start = _answer_after_think(text, len(_THINK_OPEN))
    return 0 <= start <= len(text) - len(_ANSWER_CLOSE)


# A bbox as upstream VLM-R1's REC rewards parse it (qwen_module.py / internvl_module.py at 90052f4): four unsigned
# integers, "[a,b,c,d]" with optional whitespace after each comma only. Linear: a match can only start at "[", and the
# span it scans (digits, commas, whitespace) holds no other "[".
REC_BOX = re.compile(r"\[(\d+),\s*(\d+),\s*(\d+),\s*(\d+)\]")
