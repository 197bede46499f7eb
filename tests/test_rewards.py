"""GTA1 click reward rules (Yan98/GTA1 ``src/grpo_grounding.py:146-188`` at 81f0c4c), the thinking-format reward, TRL
wrappers, and the reward registry."""

from __future__ import annotations

from importlib.metadata import entry_points

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gui_grounding.models.prompts import parse_point
from gui_grounding.training import rewards as gg_rewards
from gui_grounding.training.rewards import click_format_reward, click_reward, score_click, score_click_format
from gui_grounding.training.task import GUIGroundingTask
from tests.helpers.records import assistant
from vlm_r1 import answers
from vlm_r1 import rewards as vr
from vlm_r1.upstream import accuracy
from vlm_r1.upstream import rewards as ur

BOX = [10, 10, 20, 20]


# --------------------------------------------------------------------------------------------------------------------
# score_click, non-thinking (GTA1): exactly one integer pair anywhere in the text, inclusive box test


def test_point_strictly_inside_scores_one():
    assert score_click("(15,15)", [BOX]) == 1.0


@pytest.mark.parametrize("point", ["(10,15)", "(20,15)", "(15,10)", "(15,20)"], ids=["left", "right", "top", "bottom"])
def test_each_edge_is_inside(point):
    assert score_click(point, [BOX]) == 1.0


@pytest.mark.parametrize("point", ["(10,10)", "(20,10)", "(10,20)", "(20,20)"], ids=["tl", "tr", "bl", "br"])
def test_each_corner_is_inside(point):
    assert score_click(point, [BOX]) == 1.0


@pytest.mark.parametrize("point", ["(9,15)", "(21,15)", "(15,9)", "(15,21)"], ids=["left", "right", "top", "bottom"])
def test_one_pixel_outside_each_edge_misses(point):
    assert score_click(point, [BOX]) == 0.0


def test_float_box_edges_are_inclusive():
    # target boxes in the resized frame are floats (box_to_resized does not round)
    box = [10.5, 10.5, 20.5, 20.5]
    assert score_click("(10,15)", [box]) == 0.0
    assert score_click("(11,15)", [box]) == 1.0
    assert score_click("(20,20)", [box]) == 1.0
    assert score_click("(21,15)", [box]) == 0.0


def test_two_pairs_score_zero_even_when_both_inside():
    assert score_click("(1,2) (3,4)", [[0, 0, 5, 5]]) == 0.0
    assert score_click("(15,15) then (50,50)", [BOX]) == 0.0
    assert score_click("(15,15)(15,15)", [BOX]) == 0.0


def test_decimals_score_zero_even_when_inside():
    box = [10, 30, 20, 50]
    assert score_click("(12,40)", [box]) == 1.0  # control: the integer version hits
    assert score_click("(12.5,40)", [box]) == 0.0
    assert score_click("(12,40.0)", [box]) == 0.0
    assert score_click("(15.0,40)", [box]) == 0.0


def test_negative_coordinates_parse_but_miss_real_boxes():
    assert parse_point("(-5,10)") == (-5, 10)
    assert score_click("(-5,10)", [[0, 0, 100, 100]]) == 0.0
    assert score_click("(-5,10)", [[-10, 0, 0, 20]]) == 1.0  # it was parsed: a box around it is hit


@pytest.mark.parametrize(
    "text, expected",
    [
        ("(15,20)", 1.0),
        ("(15, 20)", 1.0),  # whitespace after the comma: allowed by GTA1's \s*
        ("(15,   20)", 1.0),
        ("(15,\n20)", 1.0),  # \s matches a newline
        ("(15 ,20)", 0.0),  # whitespace before the comma: not allowed
        ("( 15,20)", 0.0),  # after the opening parenthesis: not allowed
        ("(15,20 )", 0.0),  # before the closing parenthesis: not allowed
        ("(015,020)", 1.0),  # leading zeros: int("015") == 15
        ("The element is at (15,20).", 1.0),  # non-thinking: the pair may sit anywhere in the text
        ("[15,20]", 0.0),
        ("15,20", 0.0),
        ("(15;20)", 0.0),
        ("(a,b)", 0.0),
        ("click the button", 0.0),
        ("", 0.0),
        ("(15,20,30)", 0.0),
    ],
)
def test_gta1_regex_acceptance(text, expected):
    assert score_click(text, [BOX]) == expected


def test_several_boxes_any_hit_counts():
    boxes = [[0, 0, 5, 5], [10, 10, 20, 20]]
    assert score_click("(15,20)", boxes) == 1.0  # hits the second box
    assert score_click("(3,3)", boxes) == 1.0  # hits the first
    assert score_click("(7,7)", boxes) == 0.0  # between them
    assert score_click("(15,20)", []) == 0.0  # no boxes: nothing to hit


# --------------------------------------------------------------------------------------------------------------------
# score_click, thinking mode: only the single <answer> block is scored


def test_thinking_proper_completion_hits():
    assert score_click("<think>top right button</think><answer>(15,20)</answer>", [BOX], "thinking") == 1.0


def test_thinking_without_answer_tags_scores_zero():
    assert score_click("(15,20)", [BOX], "thinking") == 0.0
    assert score_click("<think>it is at (15,20)</think>", [BOX], "thinking") == 0.0


def test_thinking_answer_without_think_is_still_scored_by_click():
    # the click reward only needs the answer block; the think block is click_format's business
    assert score_click("<answer>(15,20)</answer>", [BOX], "thinking") == 1.0
    assert score_click("<answer> (15,20) </answer>", [BOX], "thinking") == 1.0


def test_thinking_two_answer_blocks_score_zero():
    text = "<think>x</think><answer>(15,20)</answer><answer>(15,20)</answer>"
    assert score_click(text, [BOX], "thinking") == 0.0


def test_thinking_points_outside_answer_are_ignored():
    # a point in <think> is neither counted as a hit nor as a second pair
    assert score_click("<think>(50,50) is wrong</think><answer>(15,20)</answer>", [BOX], "thinking") == 1.0
    assert score_click("<think>(15,20)</think><answer>(50,50)</answer>", [BOX], "thinking") == 0.0
    assert score_click("(15,20) <answer>(50,50)</answer>", [BOX], "thinking") == 0.0
    assert score_click("<answer>(15,20)</answer> or maybe (90,90)", [BOX], "thinking") == 1.0


def test_thinking_answer_rules_match_gta1_rules():
    assert score_click("<think>a</think><answer>(15.5,20)</answer>", [BOX], "thinking") == 0.0
    assert score_click("<think>a</think><answer>(15,20) (16,16)</answer>", [BOX], "thinking") == 0.0
    assert score_click("<think>a</think><answer>(21,20)</answer>", [BOX], "thinking") == 0.0


def test_unknown_mode_raises():
    with pytest.raises(ValueError, match=r"unknown prompt mode 'cot'; expected one of non_thinking, thinking"):
        score_click("(15,20)", [BOX], "cot")


# --------------------------------------------------------------------------------------------------------------------
# score_click_format


@pytest.mark.parametrize(
    "text, expected",
    [
        ("<think>the menu is top left</think><answer>(3,4)</answer>", 1.0),
        ("<think>multi\nline\nreasoning</think><answer>(3,4)</answer>", 1.0),
        ("  <think>a</think>\n\n<answer>(3,4)</answer>\n", 1.0),  # whitespace around/between blocks
        ("<think>a</think> <answer>(3, 4)</answer>", 1.0),
        ("<answer>(3,4)</answer>", 0.0),  # missing think
        ("<think>a</think>", 0.0),  # missing answer
        ("<think>a</think>(3,4)", 0.0),  # answer without tags
        ("(3,4)", 0.0),
        ("<think>a</think><answer>(3.5,4)</answer>", 0.0),  # decimal
        ("<think>a</think><answer>(3,4) (5,6)</answer>", 0.0),  # two pairs
        ("<think>a</think><answer></answer>", 0.0),  # no pair
        ("<think>a</think><answer>(3,4)</answer> done", 0.0),  # text after
        ("sure! <think>a</think><answer>(3,4)</answer>", 0.0),  # text before
        ("<think>a</think> so <answer>(3,4)</answer>", 0.0),  # text between
        ("<think>a</think><answer>(3,4)</answer><answer>(3,4)</answer>", 0.0),  # two answers
        ("<answer>(3,4)</answer><think>a</think>", 0.0),  # wrong order
        ("", 0.0),
    ],
)
def test_score_click_format(text, expected):
    assert score_click_format(text) == expected


# --------------------------------------------------------------------------------------------------------------------
# TRL wrappers


def test_click_reward_conversational_completions_exact_list():
    texts = ["(15,20)", "(21,20)", "<think>a</think><answer>(12,12)</answer>", "(12,12)", "(1,1) (15,15)"]
    boxes = [[BOX], [BOX], [BOX], [BOX], [BOX]]
    modes = ["non_thinking", "non_thinking", "thinking", "thinking", "non_thinking"]
    out = click_reward(completions=[assistant(t) for t in texts], target_boxes_resized=boxes, prompt_mode=modes)
    assert out == [1.0, 0.0, 1.0, 0.0, 0.0]


def test_click_reward_plain_string_completions_and_default_mode():
    out = click_reward(["(15,20)", "(0,0)", "(5,5)"], target_boxes_resized=[[BOX], [BOX], [[0, 0, 5, 5], BOX]])
    assert out == [1.0, 0.0, 1.0]


def test_click_reward_structured_content_blocks_and_extra_kwargs():
    completion = [{"role": "assistant", "content": [{"type": "text", "text": "(15,"}, {"type": "text", "text": "20)"}]}]
    out = click_reward(
        [completion],
        target_boxes_resized=[[BOX]],
        prompt_mode=["non_thinking"],
        completion_ids=[[1, 2, 3]],
        trainer_state=None,
        image_path=["x.png"],
    )
    assert out == [1.0]


def test_click_reward_length_mismatch_raises():
    with pytest.raises(ValueError):
        click_reward(["(15,20)", "(15,20)"], target_boxes_resized=[[BOX]])


def test_click_reward_gta1_rounding_uses_published_boxes():
    # GTA1 record [100, 200, 300, 400] (0-1000) on a 500x250 resized image: ratio 0.5 / 0.25 -> (50, 50, 150, 100);
    # the float column deliberately disagrees, so the test shows which one is scored
    kw = dict(
        target_boxes_resized=[[[0, 0, 1, 1]]] * 4,
        target_boxes_source=[[[100, 200, 300, 400]]] * 4,
        source_box_scale=[[1000.0, 1000.0]] * 4,
        resized_size=[[500, 250]] * 4,
    )
    texts = ["(50,50)", "(150,100)", "(49,50)", "(1,1)"]
    assert click_reward(texts, box_rounding=["gta1"] * 4, **kw) == [1.0, 1.0, 0.0, 0.0]
    assert click_reward(texts, box_rounding=["float"] * 4, **kw) == [0.0, 0.0, 0.0, 1.0]
    assert click_reward(texts, **kw) == [0.0, 0.0, 0.0, 1.0]  # no column: float
    assert click_reward(texts, box_rounding=["gta1", "float", "gta1", "float"], **kw) == [1.0, 0.0, 0.0, 1.0]


def test_click_reward_gta1_needs_source_columns_and_known_rounding():
    with pytest.raises(ValueError, match=r"box_rounding 'gta1' needs the columns target_boxes_source"):
        click_reward(["(1,1)"], target_boxes_resized=[[BOX]], box_rounding=["gta1"])
    with pytest.raises(ValueError, match=r"^unknown box_rounding 'round'; expected one of float, gta1$"):
        click_reward(["(1,1)"], target_boxes_resized=[[BOX]], box_rounding=["round"])


@settings(max_examples=300, deadline=None)
@given(
    text=st.text(max_size=60),
    rounding=st.sampled_from(["float", "gta1"]),
    mode=st.sampled_from(["non_thinking", "thinking", "box"]),
)
def test_click_reward_is_total_under_both_roundings(text, rounding, mode):
    out = click_reward(
        [text],
        target_boxes_resized=[[BOX]],
        prompt_mode=[mode],
        box_rounding=[rounding],
        target_boxes_source=[[[5.5, 0, 999.9, 1000]]],
        source_box_scale=[[1000.0, 1000.0]],
        resized_size=[[588, 336]],
    )
    assert out in ([0.0], [1.0])


def test_click_format_reward_exact_list():
    comps = [
        assistant("<think>a</think><answer>(3,4)</answer>"),
        assistant("(3,4)"),
        "<think>b</think><answer>(1,2)</answer>",
    ]
    assert click_format_reward(comps, target_boxes_resized=[[BOX]] * 3) == [1.0, 0.0, 1.0]


# --------------------------------------------------------------------------------------------------------------------
# vlm_r1 built-in rewards (upstream VLM-R1 names)


def test_format_reward_exact():
    # upstream full-matches the completion as written (grpo_jsonl.py:882-897 at 90052f4): no strip
    comps = [
        assistant("<think>a</think> <answer>b</answer>"),
        assistant("<think>a</think><answer>b</answer>"),
        assistant("<think>a\nb</think>\n<answer>c</answer>"),
        assistant("  <think>a\nb</think>\n<answer>c</answer>  "),  # whitespace around: 0.0, as upstream
        assistant("<think>a</think><answer>b</answer>\n"),
        assistant("<answer>b</answer>"),
        assistant("<think>a</think> <answer>b</answer> trailing"),
        assistant("<think>a</think><answer>b</answer><answer>c</answer>"),  # .*? may hold tags
        "<think>a</think><answer>b</answer>",
    ]
    assert ur.format_reward(comps) == [1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 1.0]


@settings(max_examples=300, deadline=None)
@given(
    parts=st.lists(
        st.sampled_from(["<think>", "</think>", "<answer>", "</answer>", " ", "\n", "\u00a0", "x", "<"]), max_size=12
    )
)
def test_format_rule_is_upstreams_full_match(parts):
    import re

    text = "".join(parts)
    expected = re.fullmatch(r"<think>.*?</think>\s*<answer>.*?</answer>", text, re.DOTALL) is not None
    assert answers.has_think_answer_format(text) is expected


def _acc(pred: str, sol, method=None) -> float:
    return ur.accuracy_reward([assistant(pred)], solution=[sol], accu_reward_method=[method])[0]


def test_accuracy_default_math_verify_numbers_and_partial_credit():
    assert _acc("<answer>\\frac{7}{2}</answer>", "<answer>3.5</answer>") == 1.0  # math_verify
    assert _acc("<think>x</think><answer>3.0</answer>", "<answer> 3 </answer>") == 1.0
    assert _acc("<answer>4</answer>", "<answer> 3 </answer>") == 0.0
    assert _acc("<answer>Dark red</answer>", "<answer>Red</answer>") == 6 / 11  # Levenshtein ratio of the cleaned texts
    assert _acc("<answer>Lyon</answer>", "<answer>Paris</answer>") == 0.0
    assert _acc("<answer>Paris.</answer>", "<answer> paris </answer>") == 1.0
    assert _acc("<answer>B. a dog</answer>", "<answer>B</answer>") == 1.0  # the solution is a choice letter
    assert _acc("<answer>(B)</answer>", "<answer>B</answer>") == 0.0  # "(B)" gives no choice letter


def test_accuracy_reads_the_last_completion_block_and_the_first_single_line_solution_block():
    assert _acc("<answer>1</answer> then <answer>2</answer>", "<answer>2</answer>") == 1.0
    assert _acc("<answer>2</answer> then <answer>1</answer>", "<answer>2</answer>") == 0.0
    # a solution block spanning lines is not a block for upstream's pattern (no DOTALL): the whole solution is read
    assert accuracy.first_answer_in_line("<answer>\nB\n</answer>") is None
    assert accuracy.first_answer_in_line("<answer>a\n</answer><answer>b</answer>") == "b"
    assert accuracy.last_answer("<answer>a</answer><answer>b</answer><answer>c") == "b"


def test_clean_answer_text_is_upstreams_clean_text():
    assert accuracy.clean_answer_text("<answer> Dark\nRed. </answer>") == "dark red"
    assert accuracy.clean_answer_text("a \nb") == "a b"  # a newline after a space is dropped
    assert accuracy.clean_answer_text("a\r\nb") == "a b"
    assert accuracy.clean_answer_text("  The   Red ") == "the   red"  # inner runs kept
    assert accuracy.clean_answer_text("a .") == "a "  # strip, then the periods


def test_extract_choice_is_upstreams_heuristic():
    assert accuracy.extract_choice("B") == "B"
    assert accuracy.extract_choice("(B)") is None
    assert accuracy.extract_choice("I think A, but the answer is C.") == "C"
    assert accuracy.extract_choice("A and B.") == "B"
    assert accuracy.extract_choice("dog") is None


def test_accuracy_all_match_is_not_numeric():
    comps = [assistant("<answer>3.0</answer>"), assistant("<answer>3</answer>"), assistant("<answer>Cat.</answer>")]
    sols = ["<answer> 3 </answer>"] * 2 + ["<answer>cat</answer>"]
    assert ur.accuracy_reward(comps, solution=sols, accu_reward_method=["all_match"] * 3) == [0.0, 1.0, 1.0]
    assert _acc("<answer>a\nb</answer>", "<answer>a b</answer>", "all_match") == 1.0
    assert _acc("<answer>  The   Red  Button </answer>", "the red button", "all_match") == 0.0


def test_accuracy_yes_no_takes_the_first_yes_or_no_substring():
    assert _acc("<answer>Yes</answer>", "<answer> yes </answer>", "yes_no") == 1.0
    assert _acc("<answer>no</answer>", "<answer> yes </answer>", "yes_no") == 0.0
    assert _acc("<answer>not sure</answer>", "<answer>no</answer>", "yes_no") == 1.0  # "not" holds "no", as upstream
    assert _acc("<answer>maybe</answer>", "<answer>perhaps</answer>", "yes_no") == 1.0  # neither: "" == ""
    assert _acc("<ANSWER>No</ANSWER>", "<answer>no</answer>", "yes_no") == 1.0  # lower-cased before the tags are read


def test_accuracy_mcq():
    assert _acc("<answer>B. a dog</answer>", "<answer>B</answer>", "mcq") == 1.0
    assert _acc("<answer>b</answer>", "<answer>B</answer>", "mcq") == 1.0
    assert _acc("<answer>(B)</answer>", "<answer>B</answer>", "mcq") == 0.0
    assert _acc("<answer>C</answer><answer>D</answer>", "<answer>D</answer>", "mcq") == 0.0  # the FIRST block


def test_accuracy_math():
    assert _acc("<answer>\\boxed{\\frac{1}{2}}</answer>", "<answer>0.5</answer>", "math") == 1.0
    assert _acc("<answer>\\boxed{abc}</answer>", "<answer>abc</answer>", "math") == 1.0  # boxed content, normalised
    assert _acc("<answer>blue</answer>", "<answer>red</answer>", "math") == 0.0
    assert accuracy._normalize_math("\\dfrac{3}{4}") == accuracy._normalize_math("\\frac34") == "\\frac{3}{4}"
    assert accuracy._normalize_math("k = 3/4") == "\\frac{3}{4}"
    assert accuracy._normalize_math("\\sqrt") is None  # upstream raised: is_equiv compares the raw texts
    assert accuracy._last_boxed("a \\boxed{x{y}} b") == "\\boxed{x{y}}" and accuracy._unboxed("\\fbox{3}") is None


def test_accuracy_mixed_methods_per_sample():
    comps = [assistant("<answer>2.0</answer>"), assistant("<answer>2.0</answer>")]
    out = ur.accuracy_reward(comps, solution=["<answer>2</answer>"] * 2, accu_reward_method=["default", "all_match"])
    assert out == [1.0, 0.0]


@pytest.mark.parametrize("method", ["llm", "map", "od_ap", "od_ap50", "odLength", "weighted_sum"])
def test_accuracy_network_and_detection_methods_are_refused_before_training(method):
    with pytest.raises(
        NotImplementedError,
        match=rf"accu_reward_method \['{method}'\] is not implemented here \("
        rf"{method}: ",
    ):
        accuracy.check_accuracy_methods(["default", method])
    accuracy.check_accuracy_methods(["default", "mcq", "yes_no", "all_match", "math", "bogus", None])  # no error
    # reached at run time anyway: a 0.0, never an exception that stops the step
    assert _acc("<answer>a</answer>", "<answer>a</answer>", method) == 0.0


def test_accuracy_unknown_or_missing_method_scores_as_default_as_upstream():
    comps = [assistant("<answer>Dark red</answer>"), assistant("<answer>b</answer>")]
    sols = ["<answer>Red</answer>", "<answer>B</answer>"]
    assert ur.accuracy_reward(comps, solution=sols, accu_reward_method=["bogus", None]) == [6 / 11, 1.0]
    assert ur.accuracy_reward(comps, solution=sols) == [6 / 11, 1.0]  # no column


def test_math_verify_calls_are_timed_by_us_and_bounded(monkeypatch):
    import math_verify

    calls = []
    monkeypatch.setattr(math_verify, "parse", lambda text, **kw: calls.append(("parse", text, kw)) or [text])
    monkeypatch.setattr(math_verify, "verify", lambda g, t, **kw: calls.append(("verify", g, t, kw)) or True)
    accuracy.clear_math_verify_cache()
    try:
        assert accuracy.math_verify_match("7/2", "3.5")  # the prediction goes into math_verify's gold slot, as upstream
        # math_verify's own alarm is off: call_with_deadline times each call
        assert sorted(calls, key=str) == [
            ("parse", "3.5", {"parsing_timeout": None}),
            ("parse", "7/2", {"parsing_timeout": None}),
            ("verify", "7/2", "3.5", {"timeout_seconds": None}),
        ]
        calls.clear()
        monkeypatch.setattr(accuracy, "MATH_VERIFY_MAX_CHARS", 3)
        assert not accuracy.math_verify_match("7/22", "7/22") and calls == []  # too long: not parsed, no match
    finally:
        accuracy.clear_math_verify_cache()


def test_a_timeout_swallowed_once_fires_again(monkeypatch):
    # math_verify's one-shot alarm is lost when it lands in a gc callback or __del__ (Python swallows the exception);
    # call_with_deadline re-fires until the call gives up
    import time

    interrupted = []

    def stubborn(*args, **kwargs):
        for _ in range(3):
            try:
                time.sleep(30)
            except accuracy.MathVerifyTimeout:
                interrupted.append(len(interrupted))
                if len(interrupted) == 2:
                    raise
                # the first one is swallowed, as a gc callback would
        return "finished"

    with pytest.raises(accuracy.MathVerifyTimeout):
        accuracy.call_with_deadline(0.05, stubborn)
    assert interrupted == [0, 1]
    assert accuracy.call_with_deadline(5, lambda x: x + 1, 1) == 2  # a call in time returns its value; the timer is off
    time.sleep(0.2)  # no late alarm arrives


@pytest.mark.parametrize("where", ["gc_callback", "__del__", "weakref_finalize"])
def test_a_timeout_never_raises_where_python_would_swallow_it(where, monkeypatch):
    """The deadline passes while a gc callback / a finalizer runs: nothing is raised there (Python would swallow it and
    report "Exception ignored in"); the call is interrupted once back in its own code."""
    import gc
    import sys
    import time
    import weakref

    swallowed = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: swallowed.append(u.exc_type))

    def busy(seconds):
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            pass

    class Slow:
        def __del__(self):
            busy(0.3)

    def callback(phase, info):
        if phase == "start":
            busy(0.3)

    def call():
        if where == "gc_callback":
            gc.callbacks.append(callback)
            try:
                gc.collect()
            finally:
                gc.callbacks.remove(callback)
        elif where == "__del__":
            obj = Slow()
            del obj
        else:
            target = type("Plain", (), {})()
            weakref.finalize(target, busy, 0.3)
            del target  # the weakref's callback runs the finalizer
        busy(5)  # back in the call's own code: the next tick interrupts it
        return "finished"

    started = time.monotonic()
    with pytest.raises(accuracy.MathVerifyTimeout):
        accuracy.call_with_deadline(0.05, call)
    assert swallowed == [] and time.monotonic() - started < 2


def test_math_verify_timeouts_score_as_no_match(monkeypatch):
    import math_verify

    monkeypatch.setattr(accuracy, "MATH_VERIFY_TIMEOUT_S", 0.05)
    monkeypatch.setattr(math_verify, "verify", lambda *a, **k: __import__("time").sleep(30))
    accuracy.clear_math_verify_cache()
    try:
        assert not accuracy.math_verify_match("7/2", "3.5")
        assert _acc("<answer>7/2</answer>", "<answer>3.5</answer>") == accuracy.levenshtein_ratio("7/2", "3.5")
    finally:
        accuracy.clear_math_verify_cache()


def test_math_verify_is_skipped_outside_the_main_thread():
    import threading

    out = []
    worker = threading.Thread(target=lambda: out.append(_acc("<answer>\\frac{7}{2}</answer>", "<answer>3.5</answer>")))
    worker.start()
    worker.join()
    # upstream's math_verify raised there and its default reward fell through to the text rules: ratio, not 1.0
    assert out == [accuracy.levenshtein_ratio("\\frac{7}{2}", "3.5")] and out[0] < 1.0


def test_levenshtein_ratio_values_and_cell_bound(monkeypatch):
    assert accuracy.levenshtein_ratio("dark red", "red") == 6 / 11
    assert accuracy.levenshtein_ratio("", "") == 1.0 and accuracy.levenshtein_ratio("a", "") == 0.0
    monkeypatch.setattr(accuracy, "RATIO_MAX_CELLS", 10)
    assert accuracy.levenshtein_ratio("abcdef", "abc") == 0.0  # 18 cells: not computed


# --------------------------------------------------------------------------------------------------------------------
# registry


def test_gui_rewards_come_from_the_task_not_the_core_registry():
    # the plugin declares its rewards through its task (Task.rewards), not as core entry points
    assert not {ep.name for ep in entry_points(group="vlm_r1.rewards")} & set(gg_rewards.REWARDS)
    assert GUIGroundingTask.rewards is gg_rewards.REWARDS
    # the shape, not the full list: adding a built-in (docs/ADDING_A_REWARD.md) must not break this test
    assert {"click", "click_format"} <= set(GUIGroundingTask.rewards)
    assert all(callable(f) and isinstance(n, str) for n, f in GUIGroundingTask.rewards.items())


def test_resolve_reward_names():
    task = GUIGroundingTask()
    assert vr.resolve_reward("click", task) is gg_rewards.click_reward
    assert vr.resolve_reward("click_format", task) is gg_rewards.click_format_reward
    assert vr.resolve_reward("format", task) is ur.format_reward
    assert vr.resolve_reward("accuracy") is ur.accuracy_reward
    assert vr.resolve_reward("gui_grounding.training.rewards:click_reward") is gg_rewards.click_reward
    assert vr.resolve_rewards(["click", "format"], task) == [gg_rewards.click_reward, ur.format_reward]
    with pytest.raises(ValueError, match=r"^unknown reward 'click'\. Available: accuracy \(builtin\), format "):
        vr.resolve_reward("click")  # without the task: the core knows no GUI reward


def test_resolve_reward_unknown_lists_available():
    with pytest.raises(ValueError) as info:
        vr.resolve_reward("no_such_reward", GUIGroundingTask())
    msg = str(info.value)
    assert msg.startswith("unknown reward 'no_such_reward'. Available: ")
    for part in (
        "accuracy (builtin)",
        "format (builtin)",
        "click (task gui_grounding)",
        "click_format (task gui_grounding)",
        "'package.module:function'",
    ):
        assert part in msg


def test_resolve_reward_bad_specs():
    with pytest.raises(
        ValueError,
        match=r"^reward 'gui_grounding.training.rewards:no_such_function': cannot load "
        r"'gui_grounding.training.rewards:no_such_function': module 'gui_grounding.training.rewards' has "
        r"no attribute 'no_such_function'; registered: accuracy, format, rec_format, "
        r"rec_iou$",
    ):
        vr.resolve_reward("gui_grounding.training.rewards:no_such_function")
    with pytest.raises(
        ValueError,
        match=r"^reward 'no_such_package.rewards:fn': cannot load 'no_such_package.rewards:fn': "
        r"No module named",
    ):
        vr.resolve_reward("no_such_package.rewards:fn")
    with pytest.raises(
        ValueError,
        match=r"^reward 'gui_grounding.models.prompts:PROMPT_MODES' is \('non_thinking', "
        r"'thinking', 'box'\), not callable$",
    ):
        vr.resolve_reward("gui_grounding.models.prompts:PROMPT_MODES")


class _FakeEP:
    def __init__(self, name, value, obj=None):
        self.name, self.value, self.group, self._obj = name, value, "vlm_r1.rewards", obj

    def load(self):
        return self._obj


def _patch_reward_entry_points(monkeypatch, eps):
    import importlib.metadata

    real = importlib.metadata.entry_points

    def fake(**kw):
        return [*real(**kw), *eps] if kw.get("group") == "vlm_r1.rewards" else real(**kw)

    monkeypatch.setattr(importlib.metadata, "entry_points", fake)


def test_name_registered_twice_is_an_error(monkeypatch):
    _patch_reward_entry_points(monkeypatch, [_FakeEP("format", "evil_pkg:format", lambda *a, **k: [9.0])])
    try:
        with pytest.raises(ValueError, match=r"^reward 'format' is both built in and registered by evil_pkg:format"):
            vr.resolve_reward("format")
        assert vr.available_rewards()["format"] == "CONFLICT: builtin and evil_pkg:format"
        assert vr.resolve_reward("accuracy") is ur.accuracy_reward  # other names unaffected
    finally:
        monkeypatch.undo()
        vr.REWARDS.refresh()


def test_reward_plugin_entry_point(monkeypatch):
    def my_reward(completions, **kwargs):
        return [0.5] * len(completions)

    _patch_reward_entry_points(monkeypatch, [_FakeEP("mine", "my_pkg:my_reward", my_reward)])
    try:
        assert vr.resolve_reward("mine") is my_reward
        assert vr.available_rewards()["mine"] == "my_pkg:my_reward"
    finally:
        monkeypatch.undo()
        vr.REWARDS.refresh()


def test_available_rewards():
    assert vr.available_rewards() == {
        "accuracy": "builtin",
        "format": "builtin",
        "rec_iou": "builtin",
        "rec_format": "builtin",
    }
    avail = vr.available_rewards(GUIGroundingTask())
    assert avail["accuracy"] == "builtin"
    assert avail["click"] == avail["click_format"] == "task gui_grounding"


# --------------------------------------------------------------------------------------------------------------------
# property: the click reward is exactly the inclusive in-box test on one integer pair

coord = st.integers(min_value=-50, max_value=400)


@st.composite
def box_and_point(draw):
    x0, x1 = sorted((draw(coord), draw(coord)))
    y0, y1 = sorted((draw(coord), draw(coord)))
    # points near the box edges most of the time, anywhere otherwise
    near_x = st.integers(min_value=x0 - 2, max_value=x1 + 2)
    near_y = st.integers(min_value=y0 - 2, max_value=y1 + 2)
    x = draw(st.one_of(near_x, st.sampled_from([x0, x1, x0 - 1, x1 + 1]), coord))
    y = draw(st.one_of(near_y, st.sampled_from([y0, y1, y0 - 1, y1 + 1]), coord))
    return (x0, y0, x1, y1), (x, y)


@settings(max_examples=400, deadline=None)
@given(box_and_point())
def test_property_score_click_is_inclusive_box_membership(bp):
    box, (x, y) = bp
    expected = 1.0 if (box[0] <= x <= box[2] and box[1] <= y <= box[3]) else 0.0
    assert score_click(f"({x},{y})", [list(box)]) == expected
    assert score_click(f"<think>t</think><answer>({x}, {y})</answer>", [list(box)], "thinking") == expected
    # a second pair always voids the answer
    assert score_click(f"({x},{y}) ({x},{y})", [list(box)]) == 0.0
