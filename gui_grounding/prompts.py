"""Prompts (GTA1 non-thinking, a thinking variant, a box variant) and the answer parsers.

Source: GTA1 ``src/grpo_grounding.py`` (``gta1_and_peers.md`` section 1.2). The non-thinking system prompt is GTA1's
byte for byte (``src/grpo_grounding.py:78-84``, line breaks included); it states the *resized* image size (the
smart_resize frame, ``gui_grounding.frames``) and asks for ``(x,y)`` in that frame. The user turn is the image, then
the instruction (``src/grpo_grounding.py:110-116``: ``[{"type": "image"}, {"type": "text", "text": instruction}]``,
where GTA1's instruction is the human text with only ``"<image>"`` removed, lines 106-107; ``gui_grounding.schema``).

Prompt modes (``--prompt_mode``):

* ``non_thinking``: GTA1 verbatim, answer ``(x,y)`` anywhere in the completion;
* ``thinking``: ``<think>...</think><answer>(x,y)</answer>``, the point is read inside ``<answer>``;
* ``box``: GTA1's wording asking for the element's box ``[x1,y1,x2,y2]`` (top-left and bottom-right corners, resized
  pixels), the whole completion is the answer; for the box rewards (``iou``, ``gaussian_coverage``, GUI-G² style).
  Point rewards score a box answer on its centre (:func:`parse_answer_point`), the benchmark convention for models
  that answer boxes (``gta1_and_peers.md`` 2.1).
"""

from __future__ import annotations

import re

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
# of quadratic time on long digit runs (a 100k-digit completion took minutes), and every match is the same.
_NUM = r"-?(?:\d+(?:\.\d+)?|\.\d+)"
# GTA1's pair pattern: "(x, y)" with optional sign and decimals; decimals are then rejected by int() in strict mode.
_PAIR_RE = re.compile(rf"\(({_NUM}),\s*({_NUM})\)")
# The box counterpart of _PAIR_RE, same number syntax and whitespace rule (only after a comma): "[x1,y1,x2,y2]".
_BOX_RE = re.compile(rf"\[({_NUM}),\s*({_NUM}),\s*({_NUM}),\s*({_NUM})\]")
_ANSWER_OPEN, _ANSWER_CLOSE, _THINK_OPEN, _THINK_CLOSE = "<answer>", "</answer>", "<think>", "</think>"


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
    answers = _answer_blocks(text, limit=2)
    return answers[0] if len(answers) == 1 else None


def _answer_blocks(text: str, limit: int) -> list[str]:
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


def parse_point(text: str, mode: str = "non_thinking", *, strict: bool = True) -> tuple[float, float] | None:
    """Parse the ``(x,y)`` point of a completion; ``None`` when there is no valid answer.

    Args:
        text: the model's completion.
        mode: ``non_thinking`` (whole text) or ``thinking`` (inside ``<answer>``); ``box`` reads the whole text like
            ``non_thinking`` (a box answer's point is :func:`parse_answer_point`'s business).
        strict: GTA1 reward semantics (``click_reward``): **exactly one** pair, both **integers** (``(12.5,40)`` is
            invalid because GTA1 applies ``int()`` to the captured string). ``strict=False`` is GTA1's inference rule:
            take the **first** pair, decimals allowed.

    Returns:
        ``(x, y)`` in whatever frame the model answers in (resized pixels for Qwen2.5-VL/GTA1), or ``None``.
    """
    answer = extract_answer(text, mode)
    if answer is None:
        return None
    pairs = _PAIR_RE.findall(answer)
    if not pairs or (strict and len(pairs) != 1):
        return None
    xs, ys = pairs[0]
    if strict:
        try:
            return int(xs), int(ys)
        except ValueError:  # a decimal such as "12.5"
            return None
    return float(xs), float(ys)


def parse_box(text: str, mode: str = "box", *, strict: bool = True) -> tuple[float, float, float, float] | None:
    """Parse the ``[x1,y1,x2,y2]`` box of a completion; ``None`` when there is no valid answer.

    The box counterpart of :func:`parse_point`, with the same number syntax and rules: optional sign, whitespace
    allowed only after a comma (``[10, 20, 30, 40]`` parses, ``[ 10,20,30,40]`` does not).

    Args:
        text: the model's completion.
        mode: ``box`` / ``non_thinking`` (whole text) or ``thinking`` (inside the single ``<answer>`` block).
        strict: reward semantics: **exactly one** box, all four numbers **integers**, and ordered corners
            (``x1 <= x2`` and ``y1 <= y2``; a zero-width or zero-height box is accepted, an inverted one is not).
            ``strict=False`` (inference): the **first** box, decimals allowed, corners returned as written.

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
    answer = extract_answer(text, mode)
    if answer is None:
        return None
    boxes = _BOX_RE.findall(answer)
    if not boxes or (strict and len(boxes) != 1):
        return None
    if not strict:
        x1, y1, x2, y2 = (float(v) for v in boxes[0])
        return x1, y1, x2, y2
    try:
        x1, y1, x2, y2 = (int(v) for v in boxes[0])
    except ValueError:  # a decimal, rejected like GTA1's int() on a point
        return None
    if x1 > x2 or y1 > y2:
        return None
    return x1, y1, x2, y2


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
    answer = _think_answer(text)
    if answer is None:
        return False
    return parse_point(f"<answer>{answer}</answer>", "thinking", strict=True) is not None


def _think_answer(text: str) -> str | None:
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
    pos = head + len(_THINK_OPEN)
    while True:
        k = text.find(_THINK_CLOSE, pos)
        if k < 0:
            return None
        a = k + len(_THINK_CLOSE)
        while a < len(text) and text[a].isspace():
            a += 1
        if text.startswith(_ANSWER_OPEN, a):
            if a + len(_ANSWER_OPEN) > close:  # later </think>s leave even less room
                return None
            return text[a + len(_ANSWER_OPEN) : close]
        pos = k + 1


# --------------------------------------------------------------------------------------------------------------------
# Other answer syntaxes (model families other than GTA1; used by gui_grounding.eval.adapters). Pairs are still found
# with GTA1's ``_PAIR_RE``; the helpers below only add the syntaxes that are not a bare ``(x,y)``.

_BOX_JOIN_RE = re.compile(r"\s*,\s*")  # between the two corners of a box "(x1,y1),(x2,y2)"
_POINT_TAG_RE = re.compile(rf"<point>\s*({_NUM})[\s,]+({_NUM})\s*</point>")
_JSON_POINT_RE = re.compile(rf'"point_2d"\s*:\s*\[\s*({_NUM})\s*,\s*({_NUM})\s*\]')
_JSON_BOX_RE = re.compile(rf'"bbox_2d"\s*:\s*\[\s*({_NUM})\s*,\s*({_NUM})\s*,\s*({_NUM})\s*,\s*({_NUM})\s*\]')


def parse_point_or_box(text: str) -> tuple[float, float] | None:
    """First ``(x,y)`` of ``text``; when it is a box's first corner, the box centre. ``None`` without a pair.

    A box is two pairs joined by a comma, ``(x1,y1),(x2,y2)``, as Qwen2-VL / OS-Atlas write it inside
    ``<|box_start|>...<|box_end|>`` (those special tokens are usually stripped by decoding; both forms are read).
    Models that answer a box are scored on its centre (``gta1_and_peers.md`` 2.1, ScreenSpot-Pro harness). Values
    stay in the model's frame (no scaling here). Examples: ``"(294,168)"`` -> ``(294.0, 168.0)``;
    ``"<|box_start|>(100,200),(300,400)<|box_end|>"`` -> ``(200.0, 300.0)``; ``"click(start_box='(5,7)')"`` ->
    ``(5.0, 7.0)``.
    """
    matches = _PAIR_RE.finditer(text)
    first = next(matches, None)
    if first is None:
        return None
    x1, y1 = float(first.group(1)), float(first.group(2))
    second = next(matches, None)
    if second is not None and _BOX_JOIN_RE.fullmatch(text[first.end() : second.start()]):
        x2, y2 = float(second.group(1)), float(second.group(2))
        return (x1 + x2) / 2, (y1 + y2) / 2
    return x1, y1


def parse_point_tag(text: str) -> tuple[float, float] | None:
    """First ``<point>x y</point>`` of ``text`` (UI-TARS ``GROUNDING_DOUBAO`` action syntax), or ``None``."""
    m = _POINT_TAG_RE.search(text)
    return (float(m.group(1)), float(m.group(2))) if m else None


def parse_json_point(text: str) -> tuple[float, float] | None:
    """First ``"point_2d": [x, y]`` of ``text``, else the centre of the first ``"bbox_2d": [x1, y1, x2, y2]``.

    This is Qwen3-VL's grounding JSON (``{"point_2d": [x, y], "label": ...}``, possibly inside a list and a
    ```` ```json ```` fence). Read with a pattern rather than ``json.loads`` so that fenced, listed or truncated
    answers still give their first point. Values stay in the model's frame (0-1000 for Qwen3-VL).
    """
    m = _JSON_POINT_RE.search(text)
    if m:
        return float(m.group(1)), float(m.group(2))
    m = _JSON_BOX_RE.search(text)
    if m:
        x1, y1, x2, y2 = (float(v) for v in m.groups())
        return (x1 + x2) / 2, (y1 + y2) / 2
    return None
