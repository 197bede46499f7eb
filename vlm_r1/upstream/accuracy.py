"""The ``default`` task's ``accuracy`` reward as upstream VLM-R1 scores it: ``accuracy_reward`` and the per-method
scorers it dispatches to (``default`` text match with math_verify, ``mcq``, ``yes_no``, ``math``, ``all_match``),
bounded so that any completion gives one finite float (the rules of :mod:`vlm_r1.rewards`). Registered as the
built-in reward ``accuracy`` by :mod:`vlm_r1.rewards`.
"""

from __future__ import annotations

import functools
import gc
import logging
import re
import signal
import threading
import time
import weakref
from collections.abc import Callable

from vlm_r1.answers import _ANSWER_CLOSE, _ANSWER_OPEN, answer_blocks, completion_text

logger = logging.getLogger(__name__)

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


def _swallowed_there(frame) -> bool:
    """True when an exception raised in ``frame`` would be swallowed on its way up: some frame of the stack runs a
    finalizer (``__del__``, a ``weakref.finalize`` callback) or a garbage-collector callback (``gc.callbacks``, e.g.
    hypothesis's ``gc_cumulative_time``). Python prints "Exception ignored in ..." there and goes on, so the alarm
    waits for its next tick instead of raising into them."""
    callbacks = {getattr(cb, "__code__", None) for cb in gc.callbacks}
    while frame is not None:
        code = frame.f_code
        if code.co_name == "__del__" or code in callbacks or code is _FINALIZE_CALL:
            return True
        frame = frame.f_back
    return False


_FINALIZE_CALL = weakref.finalize.__call__.__code__


def call_with_deadline(seconds: float, fn: Callable, *args, **kwargs):
    """``fn(*args, **kwargs)``, interrupted by :class:`MathVerifyTimeout` once ``seconds`` have passed (main thread
    only: a SIGALRM timer, as math_verify's own timeout).

    Unlike math_verify's one-shot ``signal.alarm``, the timer fires again every 50 ms until ``fn`` returns, and a tick
    that lands in a garbage-collector callback or a finalizer raises nothing (:func:`_swallowed_there`): Python would
    swallow the exception there ("Exception ignored in ..."), reporting noise, and a one-shot timeout would be lost
    while the computation runs on (seen here: a 1-second parse that ran 59 s).
    A SIGALRM handler and ``setitimer`` timer already installed (another library's) are restored afterwards, with the
    time they had left.
    """
    armed = True

    def on_alarm(signum, frame):
        if armed and not _swallowed_there(frame):
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
    :func:`check_accuracy_methods` (:func:`check_dataset`, which training calls on the dataset); reached here anyway they
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


def check_dataset(dataset) -> None:
    """``accuracy_reward.check_dataset`` (the core calls a reward's ``check_dataset`` once on the training set, before
    training: ``vlm_r1.rewards``): :func:`check_accuracy_methods` on the ``accu_reward_method`` column, when there is
    one (a ``datasets.Dataset``).

    Raises:
        NotImplementedError: as :func:`check_accuracy_methods`.
    """
    if "accu_reward_method" in getattr(dataset, "column_names", ()):
        check_accuracy_methods(set(dataset.with_format(None)["accu_reward_method"]))


accuracy_reward.check_dataset = check_dataset  # type: ignore[attr-defined]
