"""Prompts (GTA1 non-thinking, a thinking variant, a box variant) and the answer parsers.

Source: GTA1 ``src/grpo_grounding.py`` (Yan98/GTA1 at 81f0c4c). The non-thinking system prompt is GTA1's
byte for byte (``src/grpo_grounding.py:78-84``, line breaks included); it states the *resized* image size (the
smart_resize frame, ``gui_grounding.models.frames``) and asks for ``(x,y)`` in that frame. The user turn is the image, then
the instruction (``src/grpo_grounding.py:110-116``: ``[{"type": "image"}, {"type": "text", "text": instruction}]``,
where GTA1's instruction is the human text with only ``"<image>"`` removed, lines 106-107; ``gui_grounding.data.schema``).

Prompt modes (``--prompt_mode``):

* ``non_thinking``: GTA1 verbatim, answer ``(x,y)`` anywhere in the completion;
* ``thinking``: ``<think>...</think><answer>(x,y)</answer>``, the point is read inside ``<answer>``;
* ``box``: GTA1's wording asking for the element's box ``[x1,y1,x2,y2]`` (top-left and bottom-right corners, resized
  pixels), the whole completion is the answer; for the box rewards (``iou``, ``gaussian_coverage``, GUI-G² style).
  Point rewards score a box answer on its centre (:func:`parse_answer_point`), the benchmark convention for models
  that answer boxes (the ScreenSpot-Pro harness takes a 4-number answer's centre:
  likaixin2000/ScreenSpot-Pro-GUI-Grounding ``models/qwen2_5vl.py:199-204`` at bd8bbbb).
"""

from __future__ import annotations

import ast
import re
from itertools import islice

from groundwork.validate import is_coord
from vlm_r1.answers import answer_blocks, bounded_digits, think_answer

PROMPT_MODES = ("non_thinking", "thinking", "box")
POINT_MODES = ("non_thinking", "thinking")  # modes whose answer is a point; "box" answers a box

# GTA1's system prompt, byte for byte: the triple-quoted SYSTEM_PROMPT of Yan98/GTA1 src/grpo_grounding.py:78-84 (commit
# 81f0c4c) after its ``.strip()`` (line 84), identical to the README inference snippet (README.md:123-129). One
# paragraph, a blank line, then the output instruction on two lines. ``{height}``/``{width}`` are the resized sizes.
GTA1_SYSTEM_PROMPT = (
    "You are an expert UI element locator. Given a GUI image and a user's element description, provide the "
    "coordinates of the specified element as a single (x,y) point. The image resolution is height {height} and "
    "width {width}. For elements with area, return the center point.\n"
    "\n"
    "Output the coordinate pair exactly:\n"
    "(x,y)"
)

# Our thinking variant: GTA1's first paragraph unchanged, a blank line, then the output instruction (same layout as
# GTA1's prompt, so the three prompts read alike).
THINKING_SYSTEM_PROMPT = (
    "You are an expert UI element locator. Given a GUI image and a user's element description, provide the "
    "coordinates of the specified element as a single (x,y) point. The image resolution is height {height} and "
    "width {width}. For elements with area, return the center point.\n"
    "\n"
    "First reason about where the element is inside <think> </think> tags, then give the coordinate pair inside "
    "<answer> </answer> tags, exactly:\n"
    "<think>...</think><answer>(x,y)</answer>"
)

# GTA1's prompt, asking for the element's box instead of a point (our variant; the box syntax is GUI-G²'s
# "[x1,y1,x2,y2]", in absolute pixels of the resized image like GTA1's point). Same layout as GTA1's prompt.
BOX_SYSTEM_PROMPT = (
    "You are an expert UI element locator. Given a GUI image and a user's element description, provide the "
    "bounding box of the specified element as [x1,y1,x2,y2], the coordinates of its top-left corner (x1,y1) and "
    "bottom-right corner (x2,y2). The image resolution is height {height} and width {width}.\n"
    "\n"
    "Output the box exactly:\n"
    "[x1,y1,x2,y2]"
)

_SYSTEM_PROMPTS = {"non_thinking": GTA1_SYSTEM_PROMPT, "thinking": THINKING_SYSTEM_PROMPT, "box": BOX_SYSTEM_PROMPT}

# One number: GTA1's ``-?\d*\.?\d+`` (src/grpo_grounding.py:147), written without its ambiguity. ``\d*\.?\d+`` matches
# exactly the strings ``\d+``, ``\d+\.\d+`` and ``\.\d+``; spelled that way a failed match backtracks in linear instead
# of quadratic time on long digit runs (a 100k-digit completion took minutes), and every match is the same. The
# patterns below start at a literal ("(", "[", "<point>", '"point_2d"') and the span a match scans holds no second
# such literal, so a whole search is linear. A matched number is then an answer only as a coordinate
# (:func:`answer_numbers`): an integer part of at most MAX_NUMBER_DIGITS (12) digits (no int()/float() of unbounded
# digit strings) and a value within +-1e7 (``groundwork.validate.MAX_COORD``: the bound of every box the data holds and
# of every point a predictions file holds), so every parsed point is one the predictions reader reads back.
_NUM = r"-?(?:\d+(?:\.\d+)?|\.\d+)"
# GTA1's pair pattern: "(x, y)" with optional sign and decimals; decimals are then rejected by int() in strict mode.
_PAIR_RE = re.compile(rf"\(({_NUM}),\s*({_NUM})\)")
# The box counterpart of _PAIR_RE, same number syntax and whitespace rule (only after a comma): "[x1,y1,x2,y2]".
_BOX_RE = re.compile(rf"\[({_NUM}),\s*({_NUM}),\s*({_NUM}),\s*({_NUM})\]")
# The linear answer-block scanners live in the core (vlm_r1.rewards) with the core's format rewards; the old private
# names stay for the tests that compare them with the reference patterns.
_answer_blocks, _think_answer = answer_blocks, think_answer


def _number(token: str, *, integer: bool) -> float | None:
    """A matched number token as ``int`` (``integer``: a decimal is not an answer, GTA1's ``int()``) or ``float``;
    ``None`` when it is no coordinate: an integer part of more than 12 digits (``vlm_r1.answers.MAX_NUMBER_DIGITS``,
    never converted) or a value beyond +-1e7 (:func:`groundwork.validate.is_coord`, the reader's rule)."""
    if not bounded_digits(token):
        return None
    if integer:
        if "." in token:
            return None
        value = int(token)
    else:
        value = float(token)
    return value if is_coord(value) else None


def answer_numbers(tokens, *, integer: bool = False) -> tuple | None:
    """The number tokens of one answer (a point's two, a box's four) as coordinates (:func:`_number`: ints with
    ``integer``, else floats), or ``None`` when any of them is not one (more than 12 digits, beyond +-1e7, a decimal
    with ``integer``): then the answer is no answer, a format error, in every reward and in eval. The one number rule
    of every answer parser (this module's and the adapters' own patterns)."""
    values = tuple(_number(t, integer=integer) for t in tokens)
    return None if any(v is None for v in values) else values


def check_mode(mode: str) -> str:
    """Return ``mode`` or raise ``ValueError`` naming the allowed prompt modes."""
    if mode not in PROMPT_MODES:
        raise ValueError(f"unknown prompt mode {mode!r}; expected one of {', '.join(PROMPT_MODES)}")
    return mode


def system_prompt(resized_height: int, resized_width: int, mode: str = "non_thinking") -> str:
    """System prompt for an image the model sees at ``resized_width x resized_height`` pixels.

    Raises:
        ValueError: unknown ``mode``.
    """
    template = _SYSTEM_PROMPTS[check_mode(mode)]
    return template.format(height=int(resized_height), width=int(resized_width))


def build_messages(
    instruction: str, resized_height: int, resized_width: int, mode: str = "non_thinking", *, image_block: bool = False
) -> list:
    """Chat messages for one sample: the system prompt, then a user turn with the image followed by the instruction.

    With ``image_block=False`` (training rows) contents are plain strings and TRL inserts the image placeholder before
    the user text; with ``image_block=True`` (our own inference) the user content is ``[{"type": "image"}, text]``.
    Both render to the same chat-template text.
    """
    system = system_prompt(resized_height, resized_width, mode)
    if not image_block:
        return [{"role": "system", "content": system}, {"role": "user", "content": instruction}]
    return [
        {"role": "system", "content": [{"type": "text", "text": system}]},
        {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": instruction}]},
    ]


def extract_answer(text: str, mode: str = "non_thinking") -> str | None:
    """The part of a completion that holds the coordinates.

    ``non_thinking`` and ``box``: the whole text. ``thinking``: the content of the single ``<answer>...</answer>``
    block, or ``None`` when there is no such block or more than one.
    """
    if check_mode(mode) != "thinking":
        return text
    answers = answer_blocks(text, limit=2)
    return answers[0] if len(answers) == 1 else None


def _answer_numbers(pattern: re.Pattern, text: str, mode: str, strict: bool) -> tuple | None:
    """The numbers of the match of ``pattern`` in the answer of ``text`` (:func:`extract_answer` for ``mode``), or
    ``None`` (no answer, no match, a number that is not an answer): strict, the **only** match (a second one makes no
    answer), integers; otherwise the **first** match, decimals allowed (:func:`answer_numbers`). The rule :func:`parse_point`
    and :func:`parse_box` share; matches are found in ``findall`` order, stopping at the second (strict) or the first.

    Raises:
        ValueError: unknown ``mode``.
    """
    answer = extract_answer(text, mode)
    if answer is None:
        return None
    matches = [m.groups() for m in islice(pattern.finditer(answer), 2 if strict else 1)]
    if not matches or (strict and len(matches) != 1):
        return None
    return answer_numbers(matches[0], integer=strict)


def parse_point(text: str, mode: str = "non_thinking", *, strict: bool = True) -> tuple[float, float] | None:
    """Parse the ``(x,y)`` point of a completion; ``None`` when there is no valid answer.

    Args:
        text: the model's completion.
        mode: ``non_thinking`` (whole text) or ``thinking`` (inside ``<answer>``); ``box`` reads the whole text like
            ``non_thinking`` (a box answer's point is :func:`parse_answer_point`'s business).
        strict: GTA1 reward semantics (``click_reward``): **exactly one** pair, both **integers** (``(12.5,40)`` is
            invalid because GTA1 applies ``int()`` to the captured string). ``strict=False`` is GTA1's inference rule:
            take the **first** pair, decimals allowed. Either way a number that is no coordinate (more than 12
            digits, beyond +-1e7: :func:`answer_numbers`) makes the pair no answer.

    Returns:
        ``(x, y)`` in whatever frame the model answers in (resized pixels for Qwen2.5-VL/GTA1), or ``None``.
    """
    return _answer_numbers(_PAIR_RE, text, mode, strict)


def parse_box(text: str, mode: str = "box", *, strict: bool = True) -> tuple[float, float, float, float] | None:
    """Parse the ``[x1,y1,x2,y2]`` box of a completion; ``None`` when there is no valid answer.

    The box counterpart of :func:`parse_point`, with the same number syntax and rules: optional sign, whitespace
    allowed only after a comma (``[10, 20, 30, 40]`` parses, ``[ 10,20,30,40]`` does not).

    Args:
        text: the model's completion.
        mode: ``box`` / ``non_thinking`` (whole text) or ``thinking`` (inside the single ``<answer>`` block).
        strict: reward semantics: **exactly one** box, all four numbers **integers**, and ordered corners
            (``x1 <= x2`` and ``y1 <= y2``; a zero-width or zero-height box is accepted, an inverted one is not).
            ``strict=False`` (inference): the **first** box, decimals allowed, corners returned as written. Either
            way a number that is no coordinate (:func:`answer_numbers`) makes the box no answer.

    Returns:
        ``(x1, y1, x2, y2)`` in the model's frame (resized pixels for the ``box`` prompt), ints when strict, floats
        otherwise; or ``None``.

    Raises:
        ValueError: unknown ``mode``.

    >>> parse_box("[10, 20, 30, 40]")
    (10, 20, 30, 40)
    >>> parse_box("[10,20,30,40] [1,2,3,4]") is None
    True
    """
    values = _answer_numbers(_BOX_RE, text, mode, strict)  # strict: a decimal is rejected like GTA1's int() on a point
    if values is None or (strict and (values[0] > values[2] or values[1] > values[3])):
        return None
    return values


def parse_answer_point(text: str, mode: str = "non_thinking", *, strict: bool = True) -> tuple[float, float] | None:
    """The point a completion answers under prompt ``mode``: what the point rewards score.

    Point modes (``non_thinking``, ``thinking``): :func:`parse_point`. ``box`` mode: the centre
    ``((x1+x2)/2, (y1+y2)/2)`` of :func:`parse_box` (the ScreenSpot-Pro convention for box answers, and GUI-G²'s
    Gaussian point reward, which scores the predicted box's centre). Same ``strict`` meaning as those parsers.

    Returns:
        ``(x, y)`` in the model's frame (resized pixels), or ``None``.

    Raises:
        ValueError: unknown ``mode``.

    >>> parse_answer_point("[10,20,31,40]", "box")
    (20.5, 30.0)
    """
    if check_mode(mode) in POINT_MODES:
        return parse_point(text, mode, strict=strict)
    box = parse_box(text, mode, strict=strict)
    if box is None:
        return None
    return (box[0] + box[2]) / 2, (box[1] + box[3]) / 2


def is_thinking_format(text: str) -> bool:
    """True when ``text`` is exactly ``<think>...</think><answer>(x,y)</answer>`` with one integer pair.

    Whitespace between and around the blocks is allowed; anything else outside them is not.
    """
    answer = think_answer(text)
    if answer is None:
        return False
    return parse_point(f"<answer>{answer}</answer>", "thinking", strict=True) is not None


# --------------------------------------------------------------------------------------------------------------------
# Other answer syntaxes (model families other than GTA1; used by gui_grounding.models.adapters). Pairs are still found
# with GTA1's ``_PAIR_RE``; the helpers below only add the syntaxes that are not a bare ``(x,y)``.

_BOX_JOIN_RE = re.compile(r"\s*,\s*")  # between the two corners of a box "(x1,y1),(x2,y2)"
_POINT_TAG_RE = re.compile(rf"<point>\s*({_NUM})[\s,]+({_NUM})\s*</point>")
_JSON_POINT_RE = re.compile(rf'"point_2d"\s*:\s*\[\s*({_NUM})\s*,\s*({_NUM})\s*\]')
_JSON_BOX_RE = re.compile(rf'"bbox_2d"\s*:\s*\[\s*({_NUM})\s*,\s*({_NUM})\s*,\s*({_NUM})\s*,\s*({_NUM})\s*\]')


def parse_point_or_box(text: str) -> tuple[float, float] | None:
    """First ``(x,y)`` of ``text``; when it is a box's first corner, the box centre. ``None`` without a pair.

    A box is two pairs joined by a comma, ``(x1,y1),(x2,y2)``, as Qwen2-VL / OS-Atlas write it inside
    ``<|box_start|>...<|box_end|>`` (those special tokens are usually stripped by decoding; both forms are read).
    Models that answer a box are scored on its centre (ScreenSpot-Pro harness: likaixin2000/ScreenSpot-Pro-GUI-Grounding
    ``models/osatlas7b.py:166-169`` and ``models/qwen2_5vl.py:199-204`` at bd8bbbb). Values
    stay in the model's frame (no scaling here). Examples: ``"(294,168)"`` -> ``(294.0, 168.0)``;
    ``"<|box_start|>(100,200),(300,400)<|box_end|>"`` -> ``(200.0, 300.0)``; ``"click(start_box='(5,7)')"`` ->
    ``(5.0, 7.0)``.
    """
    matches = _PAIR_RE.finditer(text)
    first = next(matches, None)
    if first is None:
        return None
    corner = answer_numbers(first.groups())
    second = next(matches, None)
    if second is not None and _BOX_JOIN_RE.fullmatch(text[first.end() : second.start()]):
        other = answer_numbers(second.groups())
        if corner is None or other is None:
            return None
        return (corner[0] + other[0]) / 2, (corner[1] + other[1]) / 2
    return corner


def parse_point_tag(text: str) -> tuple[float, float] | None:
    """First ``<point>x y</point>`` of ``text`` (UI-TARS ``GROUNDING_DOUBAO`` action syntax), or ``None``."""
    m = _POINT_TAG_RE.search(text)
    return answer_numbers(m.groups()) if m else None


def parse_json_point(text: str) -> tuple[float, float] | None:
    """First ``"point_2d": [x, y]`` of ``text``, else the centre of the first ``"bbox_2d": [x1, y1, x2, y2]``.

    This is Qwen3-VL's grounding JSON (``{"point_2d": [x, y], "label": ...}``, possibly inside a list and a
    ```` ```json ```` fence). Read with a pattern rather than ``json.loads`` so that fenced, listed or truncated
    answers still give their first point. Values stay in the model's frame (0-1000 for Qwen3-VL).
    """
    m = _JSON_POINT_RE.search(text)
    if m:
        return answer_numbers(m.groups())
    m = _JSON_BOX_RE.search(text)
    box = answer_numbers(m.groups()) if m else None
    return None if box is None else ((box[0] + box[2]) / 2, (box[1] + box[3]) / 2)


# --------------------------------------------------------------------------------------------------------------------
# A box written as a Python list/tuple literal (UI-Venus-Ground, GUI-G²): read as data, never executed.

#: the longest bracketed span :func:`parse_literal_box` evaluates, brackets included (a box of four 12-digit decimals
#: with generous spacing fits many times over); a longer span is not an answer
MAX_LITERAL_CHARS = 256
#: at most this many bracketed spans are evaluated per answer (a hostile answer of many short spans stays cheap)
MAX_LITERAL_SPANS = 64
_OPEN_CLOSE = {"[": "]", "(": ")"}
_CLOSE = frozenset("])")


def _bracket_spans(text: str):
    """The top-level ``[...]`` / ``(...)`` spans of ``text`` in order, each as ``(start, end)`` (``end`` exclusive),
    at most :data:`MAX_LITERAL_CHARS` long: a span that is not closed within that many characters is skipped from
    where the scan stopped, so the whole scan is linear in ``len(text)``. Brackets of either kind nest in one depth
    count (a literal's own brackets then match; a mismatched pair fails the literal, not the scan)."""
    i, n = 0, len(text)
    while i < n:
        if text[i] not in _OPEN_CLOSE:
            i += 1
            continue
        depth, j, stop = 0, i, min(n, i + MAX_LITERAL_CHARS)
        while j < stop:
            c = text[j]
            if c in _OPEN_CLOSE:
                depth += 1
            elif c in _CLOSE:
                depth -= 1
                if depth == 0:
                    break
            j += 1
        if j < stop:
            yield i, j + 1
            i = j + 1
        else:
            i = stop


def parse_literal_box(text: str) -> tuple[float, float, float, float] | None:
    """The box of an answer written as a Python list or tuple of numbers, read as **data** (``ast.literal_eval`` of a
    bounded substring), never executed; ``None`` when there is none.

    Source: UI-Venus-Ground-7B's script (inclusionAI/UI-Venus ``models/grounding/ui_venus_ground_7b.py:88-98`` at
    fc7670d) and GUI-G²'s README snippet (ZJU-REAL/GUI-G2 ``README.md:213-221`` at 5c5c365) both ``eval()`` the whole
    answer, then read ``box[0..3]`` (divided by the resized size) and take the centre; anything that raises gives
    ``[0,0,0,0]``. So every spelling Python reads as a list or tuple of numbers is a box there: spaces or newlines
    anywhere (``[ 850, 1149, 967, 1177 ]``, ``[850 ,1149 ,967 ,1177]``), a tuple ``(850, 1149, 967, 1177)``, a
    trailing comma, ``1e3``, ``0x10``, ``1_000``, a sign.

    Rule here: the first top-level bracketed span of ``text`` (at most :data:`MAX_LITERAL_CHARS` characters; the first
    :data:`MAX_LITERAL_SPANS` spans are tried) that ``ast.literal_eval`` reads as a list or tuple decides (spans that
    are not literals, e.g. ``[OK button]``, are passed over); it is a box when it holds at least four items, all real
    numbers (int/float, not bool) that are coordinates (:func:`groundwork.validate.is_coord`: finite, within +-1e7),
    and the box is its first four (``box[0..3]``, as the official scripts index it). Anything else -- fewer than four
    numbers (``[-1,-1]``: the official scripts' ``IndexError``), a nested list (``[[1,2,3,4]]``: their ``TypeError``),
    a string, a boolean, a complex number, an infinite or out-of-range value -- is no box (``None``). Never raises.

    Differences from the official ``eval``: text around the literal is allowed (``eval`` raises on it, giving the
    point (0, 0)); booleans are not numbers here (``eval`` divides ``True`` as 1); nothing is executed.

    Returns:
        ``(x1, y1, x2, y2)`` as floats, corners as written (the model's frame), or ``None``.

    >>> parse_literal_box("[ 850, 1149, 967, 1177 ]")
    (850.0, 1149.0, 967.0, 1177.0)
    >>> parse_literal_box("[[850, 1149, 967, 1177]]") is None
    True
    """
    if not isinstance(text, str):
        return None
    for start, end in islice(_bracket_spans(text), MAX_LITERAL_SPANS):
        try:
            value = ast.literal_eval(text[start:end])
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            continue
        if not isinstance(value, (list, tuple)):
            continue
        items = list(value[:4]) if len(value) >= 4 else None
        if items is None or not all(is_coord(v) for v in value):
            return None
        return tuple(float(v) for v in items)
    return None
