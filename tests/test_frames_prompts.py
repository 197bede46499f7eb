"""Coordinate frames (smart_resize, original <-> resized <-> norm1000) and the GTA1 prompts / point parser."""

from __future__ import annotations

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from gui_grounding.models.frames import Frame, box_from_norm1000, point_in_box, smart_resize
from gui_grounding.models.prompts import (
    GTA1_SYSTEM_PROMPT,
    build_messages,
    extract_answer,
    is_thinking_format,
    parse_point,
    system_prompt,
)

F, MIN = 28, 3136


# --------------------------------------------------------------------------------------------------------------------
# smart_resize: round to the factor; over max -> scale down by sqrt and floor; under min -> scale up and ceil


@pytest.mark.parametrize(
    "h, w, max_pixels, expected",
    [
        (720, 1280, 200_704, (336, 588)),  # docs/REFERENCES.md#smart-resize-reference-value
        (1080, 1920, 12_845_056, (1092, 1932)),  # round(38.57)=39 -> 1092, round(68.57)=69 -> 1932; 2.1M < max
        (1080, 1920, 1_000_000, (728, 1316)),  # beta=1.44: floor(750/28)=26 -> 728, floor(1333.3/28)=47 -> 1316
        (100, 200, 200_704, (112, 196)),  # round(3.57)=4 -> 112, round(7.14)=7 -> 196
        (336, 588, 200_704, (336, 588)),  # already a multiple of 28 within budget: identity
        (28, 28, 200_704, (56, 56)),  # 784 < 3136: beta=2 -> ceil(2)=2 -> 56
        (30, 60, 200_704, (56, 84)),  # 28x56 < min: beta=1.3199 -> ceil(1.41)=2 -> 56, ceil(2.83)=3 -> 84
        (41, 43, 200_704, (56, 84)),  # round(1.46)=1 and round(1.54)=2, then scaled up like above
    ],
)
def test_smart_resize_known_values(h, w, max_pixels, expected):
    assert smart_resize(h, w, factor=F, min_pixels=MIN, max_pixels=max_pixels) == expected


def test_smart_resize_clamps_short_side_to_factor():
    # 28x4000 over a 100352 budget: the short side would floor to 0 and is clamped to 28, so h*w (105840) exceeds
    # max_pixels. transformers' processor does exactly this, so the frame still matches what the model sees.
    assert smart_resize(28, 4000, factor=F, min_pixels=MIN, max_pixels=100_352) == (28, 3780)


def test_smart_resize_rejects_extreme_aspect_ratio():
    with pytest.raises(ValueError, match="aspect ratio must be smaller than 200"):
        smart_resize(28, 28 * 201, factor=F, min_pixels=MIN, max_pixels=200_704)


def test_smart_resize_returns_python_ints():
    h, w = smart_resize(720.0, 1280.0, factor=F, min_pixels=MIN, max_pixels=200_704)
    assert (type(h), type(w)) == (int, int)


# --------------------------------------------------------------------------------------------------------------------
# Frame


def test_frame_for_image_and_scalings_exact():
    f = Frame.for_image(1280, 720, factor=F, min_pixels=MIN, max_pixels=200_704)
    assert f == Frame(width=1280, height=720, resized_width=588, resized_height=336)
    assert f.scale_x == 588 / 1280 == 0.459375
    assert f.scale_y == 336 / 720
    assert f.point_to_resized((640, 360)) == (294.0, 168.0)
    assert f.box_to_resized((0, 0, 1280, 720)) == (0.0, 0.0, 588.0, 336.0)
    assert f.point_to_original((294, 168)) == (640.0, 360.0)
    assert f.box_to_original((0, 0, 588, 336)) == (0.0, 0.0, 1280.0, 720.0)


def test_norm1000_conversions_exact():
    f = Frame.for_image(1920, 1080, factor=F, min_pixels=MIN, max_pixels=200_704)
    assert (f.resized_width, f.resized_height) == (588, 336)
    assert f.box_from_norm1000((100, 200, 300, 400)) == (192.0, 216.0, 576.0, 432.0)
    assert f.point_from_norm1000((500, 500)) == (960.0, 540.0)
    assert f.point_to_norm1000((960, 540)) == (500.0, 500.0)
    assert f.point_from_norm1000((0, 1000)) == (0.0, 1080.0)
    assert box_from_norm1000((100, 200, 300, 400), 1000, 500) == (100.0, 100.0, 300.0, 200.0)
    assert box_from_norm1000((0, 0, 1000, 1000), 1920, 1080) == (0.0, 0.0, 1920.0, 1080.0)


def test_point_in_box_is_inclusive():
    box = (10, 20, 30, 40)
    for p in [(10, 20), (30, 40), (10, 40), (30, 20), (20, 30), (10.0, 30.5)]:
        assert point_in_box(p, box) is True, p
    for p in [(9.999, 30), (30.001, 30), (20, 19.999), (20, 40.001), (0, 0)]:
        assert point_in_box(p, box) is False, p


BUDGETS = (100_352, 200_704, 1_003_520, 8_847_360, 12_845_056)
side = st.integers(min_value=28, max_value=4000)


@settings(max_examples=300, deadline=None)
@given(
    w=side,
    h=side,
    max_pixels=st.sampled_from(BUDGETS),
    fx=st.floats(0, 1),
    fy=st.floats(0, 1),
    gx=st.floats(0, 1),
    gy=st.floats(0, 1),
)
def test_property_frame_round_trips_and_resized_dims(w, h, max_pixels, fx, fy, gx, gy):
    assume(max(w, h) / min(w, h) < 200)
    f = Frame.for_image(w, h, factor=F, min_pixels=MIN, max_pixels=max_pixels)
    rw, rh = f.resized_width, f.resized_height
    assert rw % F == 0 and rh % F == 0 and rw >= F and rh >= F
    assert rw * rh >= MIN
    # the only way above max_pixels is transformers' clamp of a too-short side to one factor
    assert rw * rh <= max_pixels or min(rw, rh) == F
    # aspect ratio kept to within one factor of rounding on each side
    assert abs(rw / rh - w / h) <= (w / h) * (F / min(rw, rh) + F / min(rw, rh)) + 1e-9

    point = (fx * w, fy * h)
    back = f.point_to_original(f.point_to_resized(point))
    assert back == pytest.approx(point, abs=1e-9)
    rpoint = (fx * rw, fy * rh)
    assert f.point_to_resized(f.point_to_original(rpoint)) == pytest.approx(rpoint, abs=1e-9)

    box = (min(fx, gx) * w, min(fy, gy) * h, max(fx, gx) * w, max(fy, gy) * h)
    assert f.box_to_original(f.box_to_resized(box)) == pytest.approx(box, abs=1e-9)
    rbox = f.box_to_resized(box)
    assert all(0 <= v <= lim + 1e-9 for v, lim in zip(rbox, (rw, rh, rw, rh), strict=True))
    # a point inside the original box stays inside the resized box (scaling is monotone per axis)
    centre = ((box[0] + box[2]) / 2, (box[1] + box[3]) / 2)
    assert point_in_box(f.point_to_resized(centre), rbox)

    n = f.point_to_norm1000(point)
    assert f.point_from_norm1000(n) == pytest.approx(point, abs=1e-9)


# --------------------------------------------------------------------------------------------------------------------
# prompts

# GTA1's SYSTEM_PROMPT (Yan98/GTA1 src/grpo_grounding.py:78-84, commit 81f0c4c) after .strip(), typed out here: one
# paragraph, a blank line, "Output the coordinate pair exactly:", a line break, "(x,y)".
GTA1_TEMPLATE = (
    "You are an expert UI element locator. Given a GUI image and a user's element description, provide the coordinates "
    "of the specified element as a single (x,y) point. The image resolution is height {height} and width {width}. For "
    "elements with area, return the center point.\n\nOutput the coordinate pair exactly:\n(x,y)"
)
GTA1_REFERENCE = (
    "You are an expert UI element locator. Given a GUI image and a user's element description, provide the coordinates "
    "of the specified element as a single (x,y) point. The image resolution is height 336 and width 588. For elements "
    "with area, return the center point.\n\nOutput the coordinate pair exactly:\n(x,y)"
)
THINKING_REFERENCE = (
    "You are an expert UI element locator. Given a GUI image and a user's element description, provide the coordinates "
    "of the specified element as a single (x,y) point. The image resolution is height 336 and width 588. For elements "
    "with area, return the center point.\n\nFirst reason about where the element is inside <think> </think> tags, "
    "then give the coordinate pair inside <answer> </answer> tags, exactly:\n<think>...</think><answer>(x,y)</answer>"
)


def test_non_thinking_system_prompt_is_gta1_byte_for_byte():
    assert GTA1_SYSTEM_PROMPT == GTA1_TEMPLATE
    text = system_prompt(336, 588)
    assert text == GTA1_REFERENCE
    assert text.encode("utf-8") == GTA1_REFERENCE.encode("utf-8")
    assert text.count("\n") == 3 and "point.\n\nOutput" in text and text.endswith("exactly:\n(x,y)")
    assert system_prompt(336.0, 588.0) == GTA1_REFERENCE  # sizes are rendered as ints
    assert GTA1_SYSTEM_PROMPT.format(height=336, width=588) == GTA1_REFERENCE


def test_thinking_system_prompt_exact():
    text = system_prompt(336, 588, "thinking")
    assert text == THINKING_REFERENCE
    # same layout as GTA1's: the shared first paragraph, a blank line, then the output instruction
    assert text.split("\n\n")[0] == GTA1_REFERENCE.split("\n\n")[0]
    assert text != system_prompt(336, 588, "non_thinking")


def test_all_prompts_share_gta1_layout():
    for mode in ("non_thinking", "thinking", "box"):
        text = system_prompt(336, 588, mode)
        paragraph, output = text.split("\n\n")
        assert "The image resolution is height 336 and width 588." in paragraph and "\n" not in paragraph
        assert output.count("\n") == 1 and output.split("\n")[0].endswith("exactly:"), mode


def test_build_messages_structures():
    sys_text = system_prompt(336, 588)
    assert build_messages("Click menu", 336, 588) == [
        {"role": "system", "content": sys_text},
        {"role": "user", "content": "Click menu"},
    ]
    assert build_messages("Click menu", 336, 588, image_block=True) == [
        {"role": "system", "content": [{"type": "text", "text": sys_text}]},
        {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "Click menu"}]},
    ]
    thinking = build_messages("Click menu", 336, 588, "thinking")
    assert thinking[0]["content"] == system_prompt(336, 588, "thinking")


@pytest.mark.parametrize("mode", ["non_thinking", "thinking", "box"])
def test_string_and_block_messages_render_identically(tiny_qwen25_dir, mode):
    from PIL import Image
    from trl.data_utils import prepare_multimodal_messages

    from vlm_r1.modules import load_processor

    processor = load_processor(tiny_qwen25_dir)
    img = Image.new("RGB", (588, 336), (255, 255, 255))
    as_strings = prepare_multimodal_messages(build_messages("Click the menu", 336, 588, mode), images=[img])
    as_blocks = build_messages("Click the menu", 336, 588, mode, image_block=True)
    render = lambda m: processor.apply_chat_template(m, tokenize=False, add_generation_prompt=True)  # noqa: E731
    expected = (
        f"<|im_start|>system\n{system_prompt(336, 588, mode)}<|im_end|>\n"
        "<|im_start|>user\n<|vision_start|><|image_pad|><|vision_end|>Click the menu<|im_end|>\n"
        "<|im_start|>assistant\n"
    )
    assert render(as_strings) == expected
    assert render(as_blocks) == expected


def test_parse_point_strict_vs_non_strict():
    assert parse_point("(1.5,2) (3,4)") is None
    assert parse_point("(1.5,2) (3,4)", strict=False) == (1.5, 2.0)
    assert parse_point("(3,4)") == (3, 4)
    assert all(type(v) is int for v in parse_point("(3,4)"))
    assert parse_point("(3,4)", strict=False) == (3.0, 4.0)
    assert all(type(v) is float for v in parse_point("(3,4)", strict=False))
    assert parse_point("(12.5,40)") is None
    assert parse_point("(.5,2)", strict=False) == (0.5, 2.0)
    assert parse_point("(-3,-4)") == (-3, -4)
    assert parse_point("no point") is None
    assert parse_point("no point", strict=False) is None
    assert parse_point("<think>(1,1)</think><answer>(7,8)</answer>", "thinking") == (7, 8)
    assert parse_point("<answer>(1.5,2) (3,4)</answer>", "thinking", strict=False) == (1.5, 2.0)
    assert parse_point("(7,8)", "thinking", strict=False) is None


def test_extract_answer():
    assert extract_answer("anything (1,2)") == "anything (1,2)"
    assert extract_answer("<think>a</think><answer> (1,2) </answer>", "thinking") == " (1,2) "
    assert extract_answer("<answer>\n(1,2)\n</answer>", "thinking") == "\n(1,2)\n"
    assert extract_answer("(1,2)", "thinking") is None
    assert extract_answer("<answer>a</answer><answer>b</answer>", "thinking") is None


def test_is_thinking_format():
    assert is_thinking_format("<think>x</think><answer>(1,2)</answer>") is True
    assert is_thinking_format("<think>x</think><answer>(1.0,2)</answer>") is False


@pytest.mark.parametrize(
    "call",
    [
        lambda: system_prompt(336, 588, "cot"),
        lambda: build_messages("x", 336, 588, "Thinking"),
        lambda: parse_point("(1,2)", "nonthinking"),
        lambda: extract_answer("(1,2)", ""),
    ],
)
def test_invalid_mode_raises(call):
    with pytest.raises(ValueError, match=r"unknown prompt mode .*; expected one of non_thinking, thinking"):
        call()


# --------------------------------------------------------------------------------------------------------------------
# the parsers are linear-time and find exactly what the original patterns found

# The patterns as first written (GTA1's pair pattern, src/grpo_grounding.py:147, and ours); quadratic on adversarial
# input, kept here as the reference for what must match.
_REF_PAIR = r"\((-?\d*\.?\d+),\s*(-?\d*\.?\d+)\)"
_REF_BOX = r"\[(-?\d*\.?\d+),\s*(-?\d*\.?\d+),\s*(-?\d*\.?\d+),\s*(-?\d*\.?\d+)\]"
_REF_ANSWER = r"<answer>(.*?)</answer>"
_REF_THINK_ANSWER = r"^\s*<think>.*?</think>\s*<answer>(.*?)</answer>\s*$"
_PIECES = [
    "<think>",
    "</think>",
    "<answer>",
    "</answer>",
    " ",
    "\n",
    "\u00a0",
    "x",
    "(1,2)",
    "(",
    ")",
    ",",
    "1",
    "-",
    ".",
    "[",
    "]",
    "2.5",
    "\x1c",
]


@settings(max_examples=3000, deadline=None)
@given(st.lists(st.sampled_from(_PIECES), max_size=14))
def test_parsers_match_the_reference_patterns(pieces):
    import re

    from gui_grounding.models import prompts

    text = "".join(pieces)
    assert prompts._PAIR_RE.findall(text) == re.findall(_REF_PAIR, text)
    assert prompts._BOX_RE.findall(text) == re.findall(_REF_BOX, text)
    assert prompts._answer_blocks(text, limit=len(text) + 1) == re.findall(_REF_ANSWER, text, re.DOTALL)
    m = re.match(_REF_THINK_ANSWER, text, re.DOTALL)
    assert prompts._think_answer(text) == (m.group(1) if m else None)


@pytest.mark.parametrize(
    "text",
    [
        "(" + "1" * 200_000,
        "(1," + "1" * 200_000,
        "[1,2,3," + "1" * 200_000,
        "<answer>" * 40_000 + "(1,2)",
        "<think></think><answer>" * 20_000,
        "<think>" + "</think><answer></answer>x" * 20_000,
        "<point>1 " + "1" * 200_000,
        '"point_2d": [1, ' + "1" * 200_000,
    ],
    ids=[
        "pair-digits",
        "pair-second-digits",
        "box-digits",
        "unclosed-answers",
        "think-answer-repeats",
        "think-answer-trailing",
        "point-tag-digits",
        "json-point-digits",
    ],
)
def test_parsers_are_linear_time_on_adversarial_text(text):
    import time

    from gui_grounding.models.prompts import parse_json_point, parse_point_or_box, parse_point_tag
    from gui_grounding.training.rewards import score_click, score_click_format

    start = time.perf_counter()
    for mode in ("non_thinking", "thinking", "box"):
        assert score_click(text, [[0, 0, 10, 10]], mode) in (0.0, 1.0)
    score_click_format(text)
    parse_point_or_box(text), parse_point_tag(text), parse_json_point(text)
    # ~200k characters: a quadratic parser needs minutes here, a linear one milliseconds
    assert time.perf_counter() - start < 2.0


# --------------------------------------------------------------------------------------------------------------------
# numbers are bounded: a number whose integer part has more than 12 digits is not an answer (issue 11, never
# converted), nor is one beyond +-1e7 (groundwork.validate.MAX_COORD: what the predictions reader reads back)

D12, D13 = "9" * 12, "1" * 13
EDGE, PAST = str(10**7), str(10**7 + 1)


@pytest.mark.parametrize(
    "text, strict, expected",
    [
        (f"({EDGE},-{EDGE})", True, (10**7, -(10**7))),
        (f"({PAST},5)", True, None),
        (f"(5,-{PAST})", True, None),
        (f"({D12},-{D12})", True, None),
        (f"({D13},5)", True, None),
        (f"(5,-{D13})", True, None),
        ("(" + "9" * 155 + ",1)", True, None),
        (f"({D13},5) (1,2)", True, None),  # still two pairs: GTA1's exactly-one rule counts the long one
        ("(9999999.5,2)", False, (9999999.5, 2.0)),
        (f"({EDGE}.5,2)", False, None),
        (f"({D12}.5,2)", False, None),
        (f"({D13}.5,2)", False, None),
        ("(0." + "1" * 40 + ",2)", False, (float("0." + "1" * 40), 2.0)),  # a long fraction cannot overflow
        ("(" + "9" * 400 + ".0,2) (1,2)", False, None),  # lenient: the first pair, and it is not an answer
    ],
)
def test_parse_point_bounds_number_digits(text, strict, expected):
    assert parse_point(text, strict=strict) == expected


@pytest.mark.parametrize(
    "text, strict, expected",
    [
        (f"[0,0,{EDGE},{EDGE}]", True, (0, 0, 10**7, 10**7)),
        (f"[0,0,{PAST},5]", True, None),
        (f"[0,0,{D12},{D12}]", True, None),
        (f"[0,0,{D13},5]", True, None),
        ("[0,0," + "9" * 200 + ",5]", True, None),
        (f"[0,0,{D13}.5,5]", False, None),
        ("[" + "1" * 203, True, None),
    ],
)
def test_parse_box_bounds_number_digits(text, strict, expected):
    from gui_grounding.models.prompts import parse_box

    assert parse_box(text, strict=strict) == expected


def test_lenient_parsers_bound_number_digits():
    from gui_grounding.models.prompts import parse_json_point, parse_point_or_box, parse_point_tag

    assert parse_point_or_box(f"({EDGE},1)") == (1e7, 1.0)
    assert parse_point_or_box(f"({D12},1)") is None
    assert parse_point_or_box(f"(1,1),({PAST},3)") is None
    assert parse_point_tag(f"<point>{PAST} 5</point>") is None
    assert parse_json_point(f'"point_2d": [{PAST}, 5]') is None
    assert parse_point_or_box(f"({D13},1)") is None
    assert parse_point_or_box(f"(1,1),({D13},3)") is None  # a box whose second corner is not an answer
    assert parse_point_or_box("(0,0),(10,20)") == (5.0, 10.0)
    assert parse_point_tag(f"<point>{D13} 5</point>") is None
    assert parse_point_tag("<point>3 5</point>") == (3.0, 5.0)
    assert parse_json_point(f'"point_2d": [{D13}, 5]') is None
    assert parse_json_point(f'"bbox_2d": [0, 0, {D13}, 5]') is None
    assert parse_json_point('"bbox_2d": [0, 0, 10, 5]') == (5.0, 2.5)
