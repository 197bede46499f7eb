"""Reward registry: built-in names, the entry-point group ``vlm_r1.rewards``, and ``package.module:function`` specs.

A reward function follows TRL's signature ``fn(completions, **kwargs) -> list[float | None]``: ``completions`` are
``[{"role": "assistant", "content": str}]`` per rollout and every dataset column arrives in ``kwargs`` as a list, one
entry per completion. Resolution order for a name given to ``--reward_funcs``:

1. a spec with ``:`` (``my_pkg.rewards:my_reward``) is imported directly, so a researcher can try a reward without
   forking or packaging anything;
2. a built-in name: upstream VLM-R1's ``accuracy`` and ``format``, and its REC rewards ``rec_iou`` (upstream
   ``iou_reward``) and ``rec_format`` (upstream ``format_reward_rec``). With ``--task_type rec`` the names
   ``accuracy``/``format`` resolve to ``rec_iou``/``rec_format`` (the task's ``reward_aliases``, applied by
   ``vlm_r1.grpo.build_rewards``), as upstream's ``--is_reward_customized_from_vlm_module true`` did;
3. a reward the task declares (``Task.rewards``: a task plugin brings its own rewards), then a name registered by an
   installed package under the entry-point group ``vlm_r1.rewards`` (:data:`REWARDS`, a
   :class:`groundwork.registry.Registry`).

A task's reward that shadows a built-in name is logged; an entry point named like a built-in is an error. Never a
silent pick.

Every built-in reward is total (TRL calls each reward on every rank, and one that raises kills the step): any completion
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

import functools
import logging
import re
import signal
import threading
import time
from collections.abc import Callable
from typing import Any

from groundwork.geometry import Frame, box_iou, valid_box, valid_size
from groundwork.registry import Registry

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
# accuracy: upstream VLM-R1 ``accuracy_reward`` and the per-method rewards it dispatches to, restated in our words
# (om-ai-lab/VLM-R1 src/open-r1-multimodal/src/open_r1/grpo_jsonl.py:116-235 and 745-879, and
# src/open-r1-multimodal/src/open_r1/utils/math.py:1-219, at 90052f4). Upstream's regexes are quoted next to the
# linear scans that replace them. Probes of every method, with the values upstream's own functions gave on the same
# library versions: tests/data/upstream_reward_probes.json (tests/test_upstream_reward_probes.py).

#: seconds math_verify may spend on one ``parse`` and on one comparison inside ``verify``: 5, the defaults of
#: math_verify's ``parsing_timeout`` / ``timeout_seconds``, which upstream ran with, so an answer that upstream's
#: math_verify settled in time scores the same. Enforced by :func:`call_with_deadline` (a SIGALRM timer that re-fires,
#: main thread only), not by math_verify's own one-shot alarm, which can be lost.
MATH_VERIFY_TIMEOUT_S = 5.0
#: an answer (or solution) longer than this many characters is not given to math_verify: it scores as if math_verify
#: had found no match (upstream parsed any length). 16,384 characters are about 4,000 tokens of English, twice the
#: 2,048-token completions of om-ai-lab/VLM-R1 run_scripts/run_grpo_gui.sh:51 at 90052f4; only a completion without
#: ``<answer>`` tags (read whole) comes near. math_verify's Python-level work is bounded by the timeout; this bound keeps its C-level
#: steps (regex scans of the whole text, big-integer and string conversions), which an alarm cannot cut short, small.
MATH_VERIFY_MAX_CHARS = 16_384
#: the Levenshtein ``ratio`` of two cleaned answers is computed only when ``len(a) * len(b)`` is at most this many
#: cells (its cost is O(len(a) * len(b) / 64): about 0.25 s at the bound); past it the partial credit is 0.0. No
#: training batch gets there (a 4,000-token completion would need a solution of a million characters).
RATIO_MAX_CELLS = 2**32

_LINE_BREAKS = ("\n", "\r")
_BREAK_AFTER_SPACE = {c: re.compile(r"(?<=\s)" + c) for c in _LINE_BREAKS}
_WHITESPACE_RUN = re.compile(r"\s+")
# a choice: an ASCII capital letter not preceded by one and followed by . , ? ! : ; or the end of the text (upstream:
# (?<![A-Z])([A-Z])(?=[\.\,\?\!\:\;]|$) on text without newlines, where $ is the end)
_CHOICE = re.compile(r"(?<![A-Z])[A-Z](?=[.,?!:;]|\Z)")
# words that make a choice letter near them (20 characters either side) the likelier answer, one point each
_CHOICE_KEYWORDS = (
    "答案",
    "选择",
    "正确",
    "是",
    "对",
    "ANSWER",
    "CORRECT",
    "CHOOSE",
    "SELECT",
    "RIGHT",
    "认为",
    "应该",
    "觉得",
    "THINK",
    "BELIEVE",
    "SHOULD",
)
_CHOICE_END_MARKS = "。.!！,，"
_DIGIT = re.compile(r"\d")
_BRACE = re.compile(r"[{}]")


def last_answer(text: str) -> str | None:
    """The last of ``re.findall(r"<answer>(.*?)</answer>", text, re.DOTALL)``, or None; linear (the lazy pattern
    rescans to the end of the text for every unclosed ``<answer>``: quadratic)."""
    last, pos = None, 0
    while (start := text.find(_ANSWER_OPEN, pos)) >= 0:
        end = text.find(_ANSWER_CLOSE, start + len(_ANSWER_OPEN))
        if end < 0:
            break
        last, pos = text[start + len(_ANSWER_OPEN) : end], end + len(_ANSWER_CLOSE)
    return last


def first_answer(text: str) -> str | None:
    """``re.search(r"<answer>(.*?)</answer>", text, re.DOTALL).group(1)``, or None (:func:`answer_blocks`)."""
    blocks = answer_blocks(text, 1)
    return blocks[0] if blocks else None


def first_answer_in_line(text: str) -> str | None:
    """``re.search(r"<answer>(.*?)</answer>", text).group(1)`` WITHOUT ``re.DOTALL`` (how upstream reads a solution),
    or None: the first ``<answer>`` whose nearest ``</answer>`` follows with no ``\\n`` in between. Linear: the nearest
    ``</answer>`` and ``\\n`` are found once and reused while they lie ahead, and a failed tag skips past its ``\\n``
    (every tag before that newline fails on it too)."""
    pos, close, newline = 0, -1, -1
    while (start := text.find(_ANSWER_OPEN, pos)) >= 0:
        body = start + len(_ANSWER_OPEN)
        if close < body:
            close = text.find(_ANSWER_CLOSE, body)
            if close < 0:
                return None
        if newline < body:
            newline = text.find("\n", body)
            if newline < 0:
                newline = len(text)
        if newline >= close:
            return text[body:close]
        pos = newline + 1
    return None


def _tagged_or_whole(text: str, block: str | None) -> str:
    return (block if block is not None else text).strip()


def clean_answer_text(text: str) -> str:
    """Upstream ``clean_text`` (grpo_jsonl.py:757-774): the last ``<answer>`` block (or the whole text), each ``\\n`` then each ``\\r`` dropped
    when whitespace precedes it and turned into a space otherwise, then stripped, trailing periods removed, and
    lower-cased. Inner whitespace runs are kept (``"a  b"`` stays two spaces).

    >>> clean_answer_text("<answer> Dark\\nRed. </answer>")
    'dark red'
    """
    block = last_answer(text)
    text = block if block is not None else text
    for brk in _LINE_BREAKS:
        # upstream: re.sub(r"(?<=\s)" + brk, "", t), then re.sub(r"(?<!\s)" + brk, " ", t); every break left by the
        # first pass has a non-space before it (or starts the text), so the second replaces them all
        if brk in text:
            text = _BREAK_AFTER_SPACE[brk].sub("", text).replace(brk, " ")
    return text.strip().rstrip(".").lower()


def extract_choice(text: str) -> str | None:
    """Upstream ``extract_choice`` (grpo_jsonl.py:116-160): the multiple-choice letter a text gives, or None.

    Upper-cased, whitespace runs made one space; a choice is an ASCII capital letter with no capital letter before it
    and one of ``. , ? ! : ;`` or the end of the text after it (``"B."``, ``"so B"``; not ``"(B)"``). One choice is
    the answer; among several, each occurrence of a letter scores, at the FIRST place that letter appears in the
    text: +1 per keyword (answer, correct, choose, ... and their Chinese forms) within 20 characters either side, +2
    when past 70% of the text, +1 when ``。.!！,，`` follows; the first letter (in order of appearance) with the
    highest total wins. Linear: each distinct letter is scored once and multiplied by its count.

    >>> extract_choice("I think A, but the answer is C."), extract_choice("(B)")
    ('C', None)
    """
    text = _WHITESPACE_RUN.sub(" ", text.upper())
    counts: dict[str, int] = {}
    for m in _CHOICE.finditer(text):
        counts[m.group()] = counts.get(m.group(), 0) + 1
    if len(counts) <= 1:  # no choice, or one letter (however often: upstream's scoring then has one candidate)
        return next(iter(counts), None)
    best, best_score = "", -1
    for letter, count in counts.items():
        pos = text.find(letter)
        context = text[max(0, pos - 20) : min(len(text), pos + 20)]
        score = sum(1 for word in _CHOICE_KEYWORDS if word in context)
        score += 2 if pos > len(text) * 0.7 else 0
        score += 1 if pos < len(text) - 1 and text[pos + 1] in _CHOICE_END_MARKS else 0
        if score * count > best_score:
            best, best_score = letter, score * count
    return best


def levenshtein_ratio(a: str, b: str) -> float:
    """Upstream's partial credit, python-Levenshtein's ``ratio``: ``1 - indel_distance / (len(a) + len(b))`` (1.0 for
    two empty strings). ``Levenshtein.ratio`` is ``rapidfuzz.distance.Indel.normalized_similarity`` (Levenshtein
    0.27.5 calls it), used here directly. 0.0 past :data:`RATIO_MAX_CELLS`."""
    if len(a) * len(b) > RATIO_MAX_CELLS:
        return 0.0
    from rapidfuzz.distance import Indel

    return float(Indel.normalized_similarity(a, b))


_math_verify_warned = False


def _warn_not_main_thread() -> None:
    global _math_verify_warned
    if not _math_verify_warned:
        _math_verify_warned = True
        logger.warning(
            "accuracy: math_verify skipped outside the main thread (its timeout is a signal alarm); answers "
            "score by the text rules only, as upstream's did there (its math_verify raised and was caught)"
        )


class MathVerifyTimeout(BaseException):
    """A math_verify call ran past :data:`MATH_VERIFY_TIMEOUT_S`. A BaseException, like math_verify's own
    ``TimeoutException``, so that no ``except Exception`` inside math_verify, sympy or antlr swallows it."""


_REARM_S = 0.05  # after the deadline the alarm fires again every 50 ms until the call gives up


def call_with_deadline(seconds: float, fn: Callable, *args, **kwargs):
    """``fn(*args, **kwargs)``, interrupted by :class:`MathVerifyTimeout` once ``seconds`` have passed (main thread
    only: a SIGALRM timer, as math_verify's own timeout).

    Unlike math_verify's one-shot ``signal.alarm``, the timer fires again every 50 ms until ``fn`` returns: an alarm
    that lands in a garbage-collector callback or a ``__del__`` is swallowed by Python ("Exception ignored in ..."),
    and a one-shot timeout is then lost while the computation runs on (seen here: a 1-second parse that ran 59 s).
    A SIGALRM handler and ``setitimer`` timer already installed (another library's) are restored afterwards, with the
    time they had left.
    """
    armed = True

    def on_alarm(signum, frame):
        if armed:
            raise MathVerifyTimeout(f"past {seconds} s")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    outer_delay, outer_interval, started = 0.0, 0.0, time.monotonic()
    try:
        outer_delay, outer_interval = signal.setitimer(signal.ITIMER_REAL, seconds, _REARM_S)
        return fn(*args, **kwargs)
    finally:
        armed = False  # first: from here on a late alarm is a no-op
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if outer_delay > 0:
            left = max(outer_delay - (time.monotonic() - started), 1e-3)
            signal.setitimer(signal.ITIMER_REAL, left, outer_interval)


def _math_verify():
    """The math_verify module. Its calls get ``parsing_timeout=None`` / ``timeout_seconds=None`` (no alarm of its own:
    :func:`call_with_deadline` times them instead), so its one-time warning that nobody interrupts them is switched
    off."""
    import math_verify
    import math_verify.grader
    import math_verify.parser

    math_verify.parser.TIMEOUT_WARNING_SHOWN = math_verify.grader.TIMEOUT_WARNING_SHOWN = True
    return math_verify


def _math_verify_failures() -> tuple[type[BaseException], ...]:
    """What a math_verify call may raise that means "no result": errors, our deadline, and math_verify's own
    ``TimeoutException`` (not raised with its alarm off; caught all the same)."""
    from math_verify.errors import TimeoutException

    return (Exception, MathVerifyTimeout, TimeoutException)


@functools.lru_cache(maxsize=1024)
def _math_parse(text: str, timeout_s: float) -> tuple:
    """``math_verify.parse(text)`` with upstream's extraction settings under a deadline, as a tuple; () on any failure
    or a timeout (math_verify's own result on those)."""
    math_verify = _math_verify()
    try:
        return tuple(call_with_deadline(timeout_s, math_verify.parse, text, parsing_timeout=None))
    except _math_verify_failures():
        logger.debug("math_verify.parse failed or timed out on %.200r", text, exc_info=True)
        return ()


def clear_math_verify_cache() -> None:
    """Forget the cached math_verify parses (a benchmark timing cold calls; a test that patches math_verify)."""
    _math_parse.cache_clear()


def math_verify_match(pred: str, gold: str) -> bool:
    """``verify(parse(pred), parse(gold))`` as upstream calls it (the prediction in math_verify's ``gold`` slot:
    math_verify is not symmetric).

    As math_verify does with its own timeouts, each ``parse`` and each comparison of one parsed item with one other
    (``verify`` compares every pair, in order, until one is equal) gets :data:`MATH_VERIFY_TIMEOUT_S`; a parse past it
    yields nothing, a comparison past it is unequal (:func:`call_with_deadline`, which cannot lose a timeout). False,
    without calling math_verify, when either text is longer than :data:`MATH_VERIFY_MAX_CHARS`, or outside the main
    thread (no signal there: upstream's ``default`` caught math_verify's error and fell through to its text rules,
    the same as False; its ``math`` raised). Parses are cached (a group's solution is parsed once).
    """
    if len(pred) > MATH_VERIFY_MAX_CHARS or len(gold) > MATH_VERIFY_MAX_CHARS:
        return False
    if threading.current_thread() is not threading.main_thread():
        _warn_not_main_thread()
        return False
    math_verify, timeout_s = _math_verify(), MATH_VERIFY_TIMEOUT_S
    parsed_gold = _math_parse(gold, timeout_s)
    for item in _math_parse(pred, timeout_s) if parsed_gold else ():
        for target in parsed_gold:
            try:
                if call_with_deadline(timeout_s, math_verify.verify, item, target, timeout_seconds=None):
                    return True
            except _math_verify_failures():
                logger.debug("math_verify.verify failed or timed out", exc_info=True)
    return False


def _float_or_none(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def _default_score(content: str, sol: str) -> float:
    """Upstream ``default_accuracy_reward`` (grpo_jsonl.py:781-824, with ``numeric_reward`` 745-752).

    1. The answer: the LAST ``<answer>`` block of the completion (DOTALL), stripped, or the whole stripped completion;
       the solution: its FIRST single-line ``<answer>`` block (upstream's pattern has no DOTALL), stripped, or the
       whole stripped solution.
    2. math_verify (:func:`math_verify_match`) says equal: 1.0.
    3. Else, when the solution holds a digit (``\\d``, any script): 1.0/0.0 when both :func:`clean_answer_text` forms
       parse with ``float()`` (equal or not), else their :func:`levenshtein_ratio`.
    4. Else, when the solution gives a choice letter (:func:`extract_choice`): 1.0 when the answer gives the same
       letter, else 0.0.
    5. Else the :func:`levenshtein_ratio` of the cleaned texts (``"Dark red"`` vs ``"Red"``: 6/11).
    """
    block = first_answer_in_line(sol)
    gold = _tagged_or_whole(sol, block)
    pred = _tagged_or_whole(content, last_answer(content))
    if math_verify_match(pred, gold):
        return 1.0
    if _DIGIT.search(gold):
        p, g = _float_or_none(clean_answer_text(pred)), _float_or_none(clean_answer_text(gold))
        if p is not None and g is not None:
            return 1.0 if p == g else 0.0
        return levenshtein_ratio(clean_answer_text(pred), clean_answer_text(gold))
    gold_choice = extract_choice(gold)
    if gold_choice is not None:
        return 1.0 if extract_choice(pred) == gold_choice else 0.0
    return levenshtein_ratio(clean_answer_text(pred), clean_answer_text(gold))


def _mcq_score(content: str, sol: str) -> float:
    """Upstream ``mcq_reward`` (grpo_jsonl.py:197-213): the letters :func:`extract_choice` finds in the FIRST ``<answer>`` block of each text
    (the solution's single-line), 1.0 when equal. A solution without a choice letter is compared whole (stripped)
    with the answer's letter, which can only match a one-letter solution."""
    gold_choice = extract_choice(_tagged_or_whole(sol, first_answer_in_line(sol)))
    target = gold_choice if gold_choice is not None else sol.strip()
    pred_choice = extract_choice(_tagged_or_whole(content, first_answer(content)))
    return 1.0 if pred_choice is not None and pred_choice == target else 0.0


def _first_yes_no(text: str) -> str:
    """The first ``yes`` or ``no`` substring of ``text`` (``re.search(r"(yes|no)", text)``), or ``""``."""
    yes, no = text.find("yes"), text.find("no")
    if yes < 0 and no < 0:
        return ""
    return "yes" if no < 0 or 0 <= yes < no else "no"


def _yes_no_score(content: str, sol: str) -> float:
    """Upstream ``yes_no_reward`` (grpo_jsonl.py:216-235): both texts lower-cased first (so ``<ANSWER>`` tags count), then the first
    ``yes``/``no`` SUBSTRING of the answer (first ``<answer>`` block) and of the solution (first single-line block):
    1.0 when they agree, including when neither has one. ``"not sure"`` reads as ``no``, ``"I know"`` too."""
    content, sol = content.lower(), sol.lower()
    gold = _tagged_or_whole(sol, first_answer_in_line(sol))
    pred = _tagged_or_whole(content, first_answer(content))
    return 1.0 if _first_yes_no(pred) == _first_yes_no(gold) else 0.0


def _all_match_score(content: str, sol: str) -> float:
    """Upstream ``all_match_reward`` (grpo_jsonl.py:776-779): 1.0 when the :func:`clean_answer_text` forms are equal (no numeric rule)."""
    return 1.0 if clean_answer_text(content) == clean_answer_text(sol) else 0.0


# the math method's answer normalisation (upstream utils/math.py ``strip_string``, after lm-evaluation-harness's
# hendrycks_math): literal edits in order, the units rule, then more literal edits
_MATH_EDITS_BEFORE_UNITS = (
    ("\n", ""),
    ("\\!", ""),
    ("\\\\", "\\"),
    ("tfrac", "frac"),
    ("dfrac", "frac"),
    ("\\left", ""),
    ("\\right", ""),
    ("^{\\circ}", ""),
    ("^\\circ", ""),
    ("\\$", ""),
)
# a backslash-percent pair is removed twice: upstream's second pattern, a backslash and a percent sign written without
# escaping, is the same two characters, and the second pass matters when the first joins a backslash to a percent sign
_MATH_EDITS_AFTER_UNITS = (("\\%", ""), ("\\%", ""), (" .", " 0."), ("{.", "{0."))
_TEXT_UNIT = "\\text{ "


def _braced_sqrt(s: str) -> str | None:
    """``\\sqrt3`` -> ``\\sqrt{3}`` (one character braced); None where upstream raised (``\\sqrt`` at the end)."""
    head, *rest = s.split("\\sqrt")
    out = [head]
    for piece in rest:
        if not piece:
            return None
        out.append("\\sqrt" + piece if piece[0] == "{" else "\\sqrt{" + piece[0] + "}" + piece[1:])
    return "".join(out)


def _braced_fracs(s: str) -> str | None:
    """``\\frac12`` -> ``\\frac{1}{2}``, ``\\frac1{x}`` -> ``\\frac{1}{x}``; ``s`` unchanged when a ``\\frac`` has a
    single character after it; None where upstream raised (``\\frac`` at the end)."""
    head, *rest = s.split("\\frac")
    out = [head]
    for piece in rest:
        if not piece:
            return None
        if piece[0] == "{":
            out.append("\\frac" + piece)
        elif len(piece) < 2:
            return s
        elif piece[1] == "{":
            out.append("\\frac{" + piece[0] + "}" + piece[1:])
        else:
            out.append("\\frac{" + piece[0] + "}{" + piece[1] + "}" + piece[2:])
    return "".join(out)


def _slash_to_frac(s: str) -> str | None:
    """``3/4`` -> ``\\frac{3}{4}`` when ``s`` is exactly two ``int()``-readable parts that print back as ``s``;
    None where upstream's ``int()`` raised."""
    parts = s.split("/")
    if len(parts) != 2:
        return s
    try:
        a, b = int(parts[0]), int(parts[1])
    except ValueError:  # not an integer, or past Python's int digit limit
        return None
    return f"\\frac{{{a}}}{{{b}}}" if s == f"{a}/{b}" else s


def _normalize_math(s: str) -> str | None:
    """Upstream ``strip_string`` (utils/math.py:158-219), or None where it raised (its caller then compares the raw texts)."""
    for old, new in _MATH_EDITS_BEFORE_UNITS:
        s = s.replace(old, new)
    if _TEXT_UNIT in s:
        head, *rest = s.split(_TEXT_UNIT)
        if len(rest) != 1:
            return None
        s = head
    for old, new in _MATH_EDITS_AFTER_UNITS:
        s = s.replace(old, new)
    if not s:
        return s
    if s[0] == ".":
        s = "0" + s
    sides = s.split("=")
    if len(sides) == 2 and len(sides[0]) <= 2:
        s = sides[1]
    if "\\sqrt" in s and (s := _braced_sqrt(s)) is None:
        return None
    s = s.replace(" ", "")
    if (s := _braced_fracs(s)) is None:
        return None
    if s == "0.5":
        s = "\\frac{1}{2}"
    return _slash_to_frac(s)


def _math_equivalent(a: str, b: str) -> bool:
    """Upstream ``is_equiv`` (utils/math.py:68-82): equal after :func:`_normalize_math`, or equal as given when either normalisation fails."""
    na, nb = _normalize_math(a), _normalize_math(b)
    return a == b if na is None or nb is None else na == nb


def _last_boxed(s: str) -> str | None:
    """Upstream ``last_boxed_only_string`` (utils/math.py:38-65): when ``"\\boxed "`` occurs, ``"\\boxed "`` plus what follows its last
    occurrence up to the first ``$``; else the last ``\\boxed`` (or, without one, the last ``\\fbox``) up to the ``}``
    that brings the brace depth counted from it back to 0, or None."""
    spaced = "\\boxed "
    if spaced in s:
        return spaced + s[s.rfind(spaced) + len(spaced) :].partition("$")[0]
    start = s.rfind("\\boxed")
    if start < 0:
        start = s.rfind("\\fbox")
        if start < 0:
            return None
    depth = 0
    for m in _BRACE.finditer(s, start):
        depth += 1 if m.group() == "{" else -1
        if m.group() == "}" and depth == 0:
            return s[start : m.end()]
    return None


def _unboxed(s: str) -> str | None:
    """Upstream ``remove_boxed`` (utils/math.py:25-36): the content of ``\\boxed X`` or ``\\boxed{X}``; None where its asserts failed (an
    ``\\fbox{...}``, a ``\\boxed`` not followed by ``{`` or a space)."""
    if "\\boxed " in s:
        return s[len("\\boxed ") :] if s.startswith("\\boxed ") else None
    return s[len("\\boxed{") : -1] if s.startswith("\\boxed{") and s.endswith("}") else None


def _math_score(content: str, sol: str) -> float:
    """Upstream ``math_reward`` (grpo_jsonl.py:753-756: ``utils/math.py:2-22`` ``compute_score`` on the :func:`clean_answer_text` forms): 1.0 when
    equal as text, or math_verify says equal, or the last ``\\boxed{}`` content of the answer (the whole answer
    without one) matches the solution after the MATH normalisation (``\\dfrac`` -> ``\\frac``, ``\\left``/``\\right``,
    degrees, ``\\%``, a right ``\\text{ unit}``, ``x=`` prefixes, ``\\sqrt3``, ``\\frac12``, ``0.5``, ``a/b``)."""
    pred, gold = clean_answer_text(content), clean_answer_text(sol)
    if pred == gold or math_verify_match(pred, gold):
        return 1.0
    boxed = _last_boxed(pred)
    answer = pred if boxed is None else _unboxed(boxed)
    return 1.0 if answer is not None and _math_equivalent(answer, gold) else 0.0


_SCORERS: dict[str, Callable[[str, str], float]] = {
    "default": _default_score,
    "mcq": _mcq_score,
    "yes_no": _yes_no_score,
    "all_match": _all_match_score,
    "math": _math_score,
}
#: the ``accu_reward_method`` values :func:`accuracy_reward` scores as upstream does; any other string (and None)
#: scores as ``default``, as upstream's dispatch falls through to ``default_accuracy_reward``
ACCURACY_METHODS = tuple(_SCORERS)
#: upstream's other methods, refused before training by :func:`check_accuracy_methods`, with the reason
REFUSED_ACCURACY_METHODS = {
    "llm": "asks an OpenAI-compatible LLM judge over the network",
    "map": "object detection (COCO mAP of JSON boxes)",
    "od_ap": "object detection (COCO AP)",
    "od_ap50": "object detection (COCO AP50)",
    "odLength": "object detection (AP with a length term)",
    "weighted_sum": "object detection (IoU / label / completeness score)",
}


def check_accuracy_methods(methods) -> None:
    """Refuse, before training starts, ``accu_reward_method`` values :func:`accuracy_reward` does not score.

    Raises:
        NotImplementedError: a method of :data:`REFUSED_ACCURACY_METHODS` (llm, map, od_ap, od_ap50, odLength,
            weighted_sum), naming each with its reason.
    """
    bad = sorted({m for m in methods if isinstance(m, str) and m in REFUSED_ACCURACY_METHODS})
    if bad:
        reasons = "; ".join(f"{m}: {REFUSED_ACCURACY_METHODS[m]}" for m in bad)
        raise NotImplementedError(
            f"accu_reward_method {bad} is not implemented here ({reasons}). Supported as upstream: "
            f"{', '.join(ACCURACY_METHODS)}; any other value scores as 'default', as upstream. "
            "Drop those records or pass your own reward with --reward_funcs "
            "package.module:function"
        )


def _solution_text(solution) -> str:
    if isinstance(solution, str):
        return solution
    try:
        return str(solution)
    except ValueError:  # an int past Python's int/str digit limit
        return ""


def accuracy_reward(completions: list, solution: list, accu_reward_method: list | None = None, **kwargs) -> list:
    """Upstream VLM-R1 ``accuracy``, dispatched per sample on the ``accu_reward_method`` column.

    Methods (upstream grpo_jsonl.py:826-879 at 90052f4; each scorer's docstring states its rules): ``default``
    (math_verify, then exact numbers, choice letters or Levenshtein partial credit), ``mcq``, ``yes_no``,
    ``all_match``, ``math``. Any other value, None included, scores as ``default``, as upstream's dispatch falls
    through. The methods of :data:`REFUSED_ACCURACY_METHODS` are refused before training by
    :func:`check_accuracy_methods` (``python -m vlm_r1.grpo_jsonl`` calls it on the dataset); reached here anyway they
    score 0.0 rather than stop the step. A missing column scores every sample as ``default``.

    Bounds (the only places where a value can differ from upstream's): math_verify runs under
    :data:`MATH_VERIFY_TIMEOUT_S` (upstream's own default), only on texts of at most :data:`MATH_VERIFY_MAX_CHARS`
    characters and only in the main thread; the Levenshtein ratio only up to :data:`RATIO_MAX_CELLS`.

    Returns:
        One float in ``[0, 1]`` per completion (total: any completion text and solution give a finite value).
    """
    methods = accu_reward_method if accu_reward_method is not None else [None] * len(completions)
    rewards = []
    for completion, sol, method in zip(completions, solution, methods, strict=True):
        if isinstance(method, str) and method in REFUSED_ACCURACY_METHODS:
            rewards.append(0.0)
            continue
        scorer = _SCORERS.get(method, _default_score) if isinstance(method, str) else _default_score
        rewards.append(float(scorer(completion_text(completion), _solution_text(sol))))
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
        (:func:`groundwork.geometry.valid_box`, :func:`groundwork.geometry.valid_size`).
    """
    box = extract_rec_box(text)
    target, size, rsize = valid_box(gt_box), valid_size(image_size), valid_size(resized_size)
    if box is None or target is None or size is None or rsize is None:
        return 0.0
    frame = Frame(width=int(size[0]), height=int(size[1]), resized_width=int(rsize[0]), resized_height=int(rsize[1]))
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
        raise ValueError(f"unknown reward {name!r}. Available: {listing}; or give a 'package.module:function' spec")
    return REWARDS.get_callable(name)


def resolve_rewards(names: list[str], task: Any = None) -> list[Callable]:
    """:func:`resolve_reward` for each name, keeping order."""
    return [resolve_reward(n, task) for n in names]
