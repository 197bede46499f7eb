"""Reward variants for ablations (docs/REWARDS.md): distance, iou, gaussian_point, gaussian_coverage,
click_distance_bonus, and the ``box`` prompt mode they use. Expected values are computed here from the literal numbers
of each case with ``math``, never by calling the code under test."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gui_grounding.data.schema import Sample
from gui_grounding.models import frames
from gui_grounding.models.frames import Frame
from gui_grounding.models.prompts import (
    BOX_SYSTEM_PROMPT,
    build_messages,
    parse_answer_point,
    parse_box,
    system_prompt,
)
from gui_grounding.training import rewards as gg
from gui_grounding.training.rewards import (
    centre_distance_bonus,
    gaussian_overlap,
    gaussian_point_value,
    score_click,
    score_click_distance_bonus,
    score_distance,
    score_gaussian_coverage,
    score_gaussian_point,
    score_iou,
)
from gui_grounding.training.task import sample_to_row
from tests.helpers.records import assistant
from vlm_r1 import rewards as vr
from vlm_r1.upstream import rewards as ur


def close(value: float):
    """Exact up to float rounding of the same arithmetic done in another order."""
    return pytest.approx(value, rel=1e-12, abs=1e-15)


# --------------------------------------------------------------------------------------------------------------------
# box prompt mode and parsers


def test_box_system_prompt_exact():
    # GTA1's layout (src/grpo_grounding.py:78-84): one paragraph, a blank line, the output instruction on two lines
    assert system_prompt(336, 588, "box") == (
        "You are an expert UI element locator. Given a GUI image and a user's element description, provide the "
        "bounding box of the specified element as [x1,y1,x2,y2], the coordinates of its top-left corner (x1,y1) and "
        "bottom-right corner (x2,y2). The image resolution is height 336 and width 588.\n\nOutput the box exactly:\n"
        "[x1,y1,x2,y2]"
    )
    assert BOX_SYSTEM_PROMPT.format(height=336, width=588) == system_prompt(336.0, 588.0, "box")
    assert system_prompt(336, 588, "box") != system_prompt(336, 588)


def test_box_build_messages():
    assert build_messages("Click OK", 336, 588, "box") == [
        {"role": "system", "content": system_prompt(336, 588, "box")},
        {"role": "user", "content": "Click OK"},
    ]
    assert build_messages("Click OK", 336, 588, "box", image_block=True)[0]["content"] == [
        {"type": "text", "text": system_prompt(336, 588, "box")}
    ]


def test_unknown_mode_lists_box():
    with pytest.raises(ValueError, match=r"^unknown prompt mode 'boxes'; expected one of non_thinking, thinking, box$"):
        system_prompt(336, 588, "boxes")


@pytest.mark.parametrize(
    "text, expected",
    [
        ("[10,20,30,40]", (10, 20, 30, 40)),
        ("[10, 20, 30, 40]", (10, 20, 30, 40)),  # whitespace after a comma: allowed, as in GTA1's pair pattern
        ("[10,\n20,30,40]", (10, 20, 30, 40)),
        ("The box is [10,20,30,40].", (10, 20, 30, 40)),
        ("[-5,0,3,4]", (-5, 0, 3, 4)),
        ("[010,20,30,40]", (10, 20, 30, 40)),
        ("[10,20,10,40]", (10, 20, 10, 40)),  # zero width: accepted by the parser
        ("[10,20,30,20]", (10, 20, 30, 20)),  # zero height
        ("[30,20,10,40]", None),  # x1 > x2: inverted
        ("[10,40,30,20]", None),  # y1 > y2
        ("[10.5,20,30,40]", None),  # decimal
        ("[10,20,30,40.0]", None),
        ("[10,20,30,40] [10,20,30,40]", None),  # two boxes
        ("[ 10,20,30,40]", None),  # whitespace after '['
        ("[10,20,30,40 ]", None),  # before ']'
        ("[10 ,20,30,40]", None),  # before a comma
        ("[10,20,30]", None),
        ("[10,20,30,40,50]", None),
        ("(10,20),(30,40)", None),  # the Qwen2-VL corner syntax is not the box prompt's answer
        ("(10,20)", None),
        ("", None),
    ],
)
def test_parse_box_strict(text, expected):
    result = parse_box(text)
    assert result == expected
    if result is not None:
        assert all(type(v) is int for v in result)


def test_parse_box_non_strict_takes_first_as_written():
    assert parse_box("[10.5,20,30,40] [1,2,3,4]", strict=False) == (10.5, 20.0, 30.0, 40.0)
    assert parse_box("[30,20,10,40]", strict=False) == (30.0, 20.0, 10.0, 40.0)
    assert all(type(v) is float for v in parse_box("[1,2,3,4]", strict=False))
    assert parse_box("nothing", strict=False) is None


def test_parse_box_thinking_reads_answer_only():
    assert parse_box("<think>[0,0,1,1]</think><answer>[10,20,30,40]</answer>", "thinking") == (10, 20, 30, 40)
    assert parse_box("[10,20,30,40]", "thinking") is None
    assert parse_box("[1,2,3,4]", "non_thinking") == (1, 2, 3, 4)


def test_parse_answer_point_per_mode():
    assert parse_answer_point("(15,20)") == (15, 20)
    assert parse_answer_point("<answer>(15,20)</answer>", "thinking") == (15, 20)
    assert parse_answer_point("[10,20,31,40]", "box") == (20.5, 30.0)
    assert parse_answer_point("[10,20,30,40]", "box") == (20.0, 30.0)
    assert parse_answer_point("(15,20)", "box") is None  # a point is not a box answer
    assert parse_answer_point("[10,20,30,40]") is None  # a box is not a point answer
    assert parse_answer_point("[10.5,20,31,40]", "box") is None
    assert parse_answer_point("[10.5,20,31,40] [0,0,0,0]", "box", strict=False) == (20.75, 30.0)
    with pytest.raises(ValueError, match="unknown prompt mode 'point'"):
        parse_answer_point("(1,2)", "point")


# --------------------------------------------------------------------------------------------------------------------
# click (GTA1) in box mode: the box centre is the click


@pytest.mark.parametrize(
    "text, expected",
    [
        ("[10,10,20,20]", 1.0),  # centre (15,15)
        ("[0,0,30,30]", 1.0),  # a larger box, centre (15,15): hits
        ("[0,0,40,20]", 1.0),  # centre (20,10): the target's corner, inclusive
        ("[0,0,42,20]", 0.0),  # centre (21,10): one pixel right of the edge
        ("[10,10,21,20]", 1.0),  # centre (15.5,15)
        ("[20,20,40,40]", 0.0),  # centre (30,30)
        ("(15,15)", 0.0),  # a point answer in box mode does not parse
        ("[10,10,20,20] [10,10,20,20]", 0.0),
    ],
)
def test_click_box_mode_scores_the_centre(text, expected):
    assert score_click(text, [[10, 10, 20, 20]], "box") == expected


def test_click_point_modes_unchanged_by_box_answers():
    assert score_click("[10,10,20,20]", [[10, 10, 20, 20]]) == 0.0
    assert score_click("(15,15)", [[10, 10, 20, 20]]) == 1.0


# --------------------------------------------------------------------------------------------------------------------
# distance: r = 1 - min(1, d / diag)^2, d to the nearest target centre, diag of the resized image

IMG = [300, 400]  # diagonal 500
T = [90, 90, 110, 110]  # centre (100, 100)


def test_distance_exact_values():
    assert score_distance("(100,100)", [T], IMG) == 1.0
    assert score_distance("(130,140)", [T], IMG) == close(1 - (50 / 500) ** 2)  # d = 50 (3-4-5)
    assert score_distance("(130,140)", [T], IMG) == close(0.99)
    assert score_distance("(103,104)", [T], IMG) == close(1 - (5 / 500) ** 2)
    assert score_distance("(400,500)", [T], IMG) == 0.0  # d = 500 = diagonal
    assert score_distance("(-500,100)", [T], IMG) == 0.0  # d = 600 > diagonal: clamped
    # inside vs outside the box does not matter, only the distance
    assert score_distance("(110,110)", [T], IMG) == close(1 - (math.sqrt(200) / 500) ** 2)


def test_distance_nearest_of_several_targets():
    boxes = [[0, 0, 20, 20], T]  # centres (10,10) and (100,100)
    assert score_distance("(100,130)", boxes, IMG) == close(1 - (30 / 500) ** 2)
    assert score_distance("(10,10)", boxes, IMG) == 1.0
    assert score_distance("(10,10)", [], IMG) == 0.0


def test_distance_modes_and_parse_failures():
    expected = close(1 - (50 / 500) ** 2)
    assert score_distance("<think>(0,0)</think><answer>(130,140)</answer>", [T], IMG, "thinking") == expected
    assert score_distance("(130,140)", [T], IMG, "thinking") == 0.0
    assert score_distance("[120,130,140,150]", [T], IMG, "box") == expected  # centre (130,140)
    for text in ("", "no point", "(130,140) (100,100)", "(130.0,140)", "[120,130,140,150]"):
        assert score_distance(text, [T], IMG) == 0.0


def test_distance_non_square_diagonal_uses_resized_size():
    # W'=600, H'=800 -> diagonal 1000; the same offset counts half as much
    assert score_distance("(130,140)", [T], [600, 800]) == close(1 - (50 / 1000) ** 2)


@pytest.mark.parametrize(
    "size",
    [
        [0, 400],
        [300, 0],
        [-300, 400],
        [0.5, 400],
        [float("nan"), 400],
        [300, float("inf")],
        [1e13, 400],
        [300],
        None,
        "300x400",
        [True, 400],
    ],
)
def test_distance_unusable_image_size_scores_zero(size):
    # total: a row with a size that is not two finite sides of >= 1 px scores 0.0 instead of stopping the step
    assert score_distance("(130,140)", [T], size) == 0.0
    assert score_click_distance_bonus("(130,140)", [T], size) == 0.0
    assert gg.centre_distance_bonus((130, 140), T, size) == 0.0


# --------------------------------------------------------------------------------------------------------------------
# iou: max IoU of the answered box with the targets (frames.box_iou)


def test_iou_uses_the_one_box_iou():
    assert gg.box_iou is frames.box_iou


@pytest.mark.parametrize(
    "text, expected",
    [
        ("[0,0,10,10]", 1.0),
        ("[5,0,15,10]", 50 / 150),
        ("[5, 0, 15, 10]", 50 / 150),
        ("[0,0,20,10]", 100 / 200),  # contains the target
        ("[2,2,8,8]", 36 / 100),  # inside the target
        ("[10,0,20,10]", 0.0),  # shares an edge: zero intersection
        ("[20,20,30,30]", 0.0),
        ("[5,5,5,10]", 0.0),  # zero-width answer
        ("[5,5,5,5]", 0.0),  # a point written as a box
        ("[10,10,0,0]", 0.0),  # inverted: does not parse
        ("[0,0,10.5,10]", 0.0),  # decimal
        ("[0,0,10,10] [0,0,10,10]", 0.0),  # two boxes
        ("(5,5)", 0.0),
        ("", 0.0),
    ],
)
def test_iou_exact(text, expected):
    assert score_iou(text, [[0, 0, 10, 10]]) == close(expected)


def test_iou_best_of_several_targets_and_float_targets():
    # pred [0,0,20,10] vs [10,0,30,20]: inter 100, union 200 + 400 - 100 = 500
    assert score_iou("[0,0,20,10]", [[10, 0, 30, 20], [0, 0, 10, 10]]) == close(0.5)
    assert score_iou("[0,0,20,10]", [[10, 0, 30, 20]]) == close(0.2)
    assert score_iou("[0,0,20,10]", []) == 0.0
    # resized targets are floats: [0.5,0,10.5,10] vs [0,0,10,10]: inter 9.5*10, union 200 - 95
    assert score_iou("[0,0,10,10]", [[0.5, 0, 10.5, 10]]) == close(95 / 105)


@pytest.mark.parametrize("mode", ["non_thinking", "thinking"])
def test_iou_needs_box_mode(mode):
    with pytest.raises(
        ValueError, match=rf"reward 'iou' scores a box answer and needs prompt_mode 'box', got '{mode}'"
    ):
        score_iou("[0,0,10,10]", [[0, 0, 10, 10]], mode)


# --------------------------------------------------------------------------------------------------------------------
# gaussian_point (GUI-G²): exp(-0.5 * (dx^2/sx^2 + dy^2/sy^2)), sigma = 0.5 * target w/h

G = [0, 0, 40, 20]  # centre (20, 10), sigma_x = 20, sigma_y = 10


@pytest.mark.parametrize(
    "point, expected",
    [
        ((20, 10), 1.0),
        ((30, 15), math.exp(-0.5 * (10**2 / 20**2 + 5**2 / 10**2))),  # = exp(-0.25)
        ((40, 10), math.exp(-0.5)),  # middle of the right edge: one sigma
        ((20, 0), math.exp(-0.5)),  # middle of the top edge
        ((40, 20), math.exp(-1.0)),  # corner
        ((0, 0), math.exp(-1.0)),
        ((100, 10), math.exp(-0.5 * 80**2 / 20**2)),  # far outside: small but positive
        ((17, 14), math.exp(-0.5 * (3**2 / 20**2 + 4**2 / 10**2))),
    ],
)
def test_gaussian_point_value_exact(point, expected):
    assert gaussian_point_value(point, G) == close(expected)
    assert score_gaussian_point(f"({point[0]},{point[1]})", [G]) == close(expected)


def test_gaussian_point_literal_offset():
    assert score_gaussian_point("(30,15)", [G]) == close(math.exp(-0.25))


def test_gaussian_point_best_target_modes_and_failures():
    far = [200, 200, 240, 220]
    assert score_gaussian_point("(30,15)", [far, G]) == close(math.exp(-0.25))
    assert score_gaussian_point("(30,15)", []) == 0.0
    assert score_gaussian_point("<think>t</think><answer>(30,15)</answer>", [G], "thinking") == close(math.exp(-0.25))
    assert score_gaussian_point("[20,8,40,22]", [G], "box") == close(math.exp(-0.25))  # centre (30,15)
    for text in ("", "(30,15) (20,10)", "(30.5,15)", "[20,8,40,22]"):
        assert score_gaussian_point(text, [G]) == 0.0
    assert score_gaussian_point("(30,15)", [G], "thinking") == 0.0


def test_gaussian_point_zero_size_target():
    line = [10, 0, 10, 20]  # zero width: sigma_x = 0, sigma_y = 10
    assert gaussian_point_value((10, 10), line) == 1.0
    assert gaussian_point_value((10, 15), line) == close(math.exp(-0.5 * 5**2 / 10**2))
    assert gaussian_point_value((11, 10), line) == 0.0
    assert gaussian_point_value((10, 10), [10, 10, 10, 10]) == 1.0
    assert gaussian_point_value((10, 11), [10, 10, 10, 10]) == 0.0


# --------------------------------------------------------------------------------------------------------------------
# gaussian_coverage (GUI-G²): exp(-Bhattacharyya distance) between the boxes' Gaussians


def _bhattacharyya_reference(pred, gt):
    """D_B written in its matrix form for diagonal covariances, from the literal boxes (test-side reference)."""
    mp = ((pred[0] + pred[2]) / 2, (pred[1] + pred[3]) / 2)
    mg = ((gt[0] + gt[2]) / 2, (gt[1] + gt[3]) / 2)
    vp = ((0.5 * (pred[2] - pred[0])) ** 2, (0.5 * (pred[3] - pred[1])) ** 2)
    vg = ((0.5 * (gt[2] - gt[0])) ** 2, (0.5 * (gt[3] - gt[1])) ** 2)
    s = ((vp[0] + vg[0]) / 2, (vp[1] + vg[1]) / 2)
    term1 = ((mp[0] - mg[0]) ** 2 / s[0] + (mp[1] - mg[1]) ** 2 / s[1]) / 8
    term2 = 0.5 * math.log((s[0] * s[1]) / math.sqrt(vp[0] * vp[1] * vg[0] * vg[1]))
    return term1 + term2


@pytest.mark.parametrize(
    "pred, expected",
    [
        ([0, 0, 40, 20], 1.0),  # identical
        ([10, 5, 50, 25], math.exp(-(100 / (4 * 800) + 25 / (4 * 200)))),  # same size, shifted (10,5): exp(-0.0625)
        ([10, 5, 30, 15], 0.8),  # same centre, half size: sqrt(2*10*20/500) * sqrt(2*5*10/125)
        ([0, 0, 20, 20], math.sqrt(0.8) * math.exp(-0.05)),  # x: shift 10, sigma 10 vs 20; y: identical
    ],
)
def test_gaussian_overlap_exact(pred, expected):
    assert gaussian_overlap(pred, G) == close(expected)
    assert gaussian_overlap(G, pred) == close(expected)  # symmetric
    assert math.exp(-_bhattacharyya_reference(pred, G)) == close(expected)
    text = "[{},{},{},{}]".format(*pred)
    assert score_gaussian_coverage(text, [G]) == close(expected)


def test_gaussian_overlap_general_case_matches_matrix_form():
    pred, gt = [3, 7, 50, 31], [10, 2, 36, 40]
    assert gaussian_overlap(pred, gt) == close(math.exp(-_bhattacharyya_reference(pred, gt)))


def test_gaussian_overlap_zero_size_boxes():
    assert gaussian_overlap([20, 0, 20, 20], G) == 0.0  # zero-width prediction vs a proper target
    assert gaussian_overlap([20, 10, 20, 10], G) == 0.0  # a point as a box
    assert gaussian_overlap(G, [20, 0, 20, 20]) == 0.0  # zero-width target
    assert gaussian_overlap([10, 0, 10, 20], [10, 0, 10, 20]) == 1.0  # both zero width, same line
    assert gaussian_overlap([11, 0, 11, 20], [10, 0, 10, 20]) == 0.0  # both zero width, different lines
    # both zero width on the same line, y axis still Gaussian: shift 5, sigmas 10 and 10
    assert gaussian_overlap([10, 5, 10, 25], [10, 0, 10, 20]) == close(math.exp(-(5**2) / (4 * 200)))
    assert score_gaussian_coverage("[20,0,20,20]", [G]) == 0.0


def test_gaussian_coverage_best_target_and_failures():
    assert score_gaussian_coverage("[10,5,30,15]", [[100, 100, 140, 120], G]) == close(0.8)
    assert score_gaussian_coverage("[10,5,30,15]", []) == 0.0
    for text in ("", "(20,10)", "[30,5,10,15]", "[10,5,30,15.5]", "[10,5,30,15] [0,0,40,20]"):
        assert score_gaussian_coverage(text, [G]) == 0.0
    with pytest.raises(ValueError, match=r"reward 'gaussian_coverage' .* needs prompt_mode 'box', got 'non_thinking'"):
        score_gaussian_coverage("[0,0,40,20]", [G], "non_thinking")


# --------------------------------------------------------------------------------------------------------------------
# click_distance_bonus (SE-GUI): 1[in box] + 1 - min(1, d/d_max)^2, image-normalised distances

SQ = [100, 100]  # square image
C = [40, 40, 60, 60]  # centre (0.5, 0.5) normalised; d_max = sqrt(0.5)


@pytest.mark.parametrize(
    "point, expected",
    [
        ((50, 50), 2.0),  # centre
        ((60, 60), 1 + 1 - (0.1**2 + 0.1**2) / 0.5),  # corner, inclusive: 1.96
        ((60, 50), 1 + 1 - 0.1**2 / 0.5),  # edge
        ((70, 50), 1 - 0.2**2 / 0.5),  # outside: bonus only, 0.92
        ((0, 0), 0.0),  # image corner: d = d_max
        ((100, 100), 0.0),
        ((50, -30), 0.0),  # outside the image, d = 0.8 > d_max: SE-GUI would give 1 - 0.64/0.5 < 0; clamped
        ((-100, -100), 0.0),
    ],
)
def test_click_distance_bonus_exact(point, expected):
    assert score_click_distance_bonus(f"({point[0]},{point[1]})", [C], SQ) == close(expected)


def test_click_distance_bonus_non_square_and_off_centre():
    # image 200x100, target [0,0,20,20]: centre (10,10) -> (0.05, 0.1); farthest corner (1,1)
    d_max = math.hypot(1 - 0.05, 1 - 0.1)
    assert centre_distance_bonus((30, 10), [0, 0, 20, 20], [200, 100]) == close(1 - (0.1 / d_max) ** 2)
    assert score_click_distance_bonus("(30,10)", [[0, 0, 20, 20]], [200, 100]) == close(1 - (0.1 / d_max) ** 2)
    # (20,20) is the box corner: in; d = hypot(10/200, 10/100)
    d = math.hypot(10 / 200, 10 / 100)
    assert score_click_distance_bonus("(20,20)", [[0, 0, 20, 20]], [200, 100]) == close(2 - (d / d_max) ** 2)


def test_click_distance_bonus_best_of_several_targets():
    a, b = [0, 0, 10, 10], C
    # (62,50): outside both; nearest to B's centre: d = 0.12
    assert score_click_distance_bonus("(62,50)", [a, b], SQ) == close(1 - 0.12**2 / 0.5)
    # (10,10): corner of A (in A), far from B; A: centre (0.05,0.05), d_max = hypot(0.95,0.95)
    expected_a = 2 - (math.hypot(0.05, 0.05) / math.hypot(0.95, 0.95)) ** 2
    assert score_click_distance_bonus("(10,10)", [a, b], SQ) == close(expected_a)
    assert score_click_distance_bonus("(10,10)", [b, a], SQ) == close(expected_a)
    assert score_click_distance_bonus("(10,10)", [], SQ) == 0.0


def test_click_distance_bonus_modes_and_failures():
    assert score_click_distance_bonus("<think>x</think><answer>(50,50)</answer>", [C], SQ, "thinking") == 2.0
    assert score_click_distance_bonus("[40,40,60,60]", [C], SQ, "box") == 2.0
    assert score_click_distance_bonus("[60,40,80,60]", [C], SQ, "box") == close(1 - 0.2**2 / 0.5)  # centre (70,50)
    for text in ("", "(50,50) (50,50)", "(50.0,50)", "[40,40,60,60]"):
        assert score_click_distance_bonus(text, [C], SQ) == 0.0
    assert score_click_distance_bonus("(50,50)", [C], [100, 0]) == 0.0  # unusable size: 0.0, never an exception


# --------------------------------------------------------------------------------------------------------------------
# TRL wrappers, with the columns as the trainer passes them (every dataset column, one entry per completion)


def _trainer_kwargs(rows: list, num_generations: int) -> dict:
    """What TRL's GRPOTrainer passes a reward function: each non-prompt column as a list, repeated per rollout."""
    expanded = [row for row in rows for _ in range(num_generations)]
    keys = [k for k in expanded[0] if k != "prompt"]
    kwargs = {k: [row[k] for row in expanded] for k in keys}
    kwargs["prompts"] = [row["prompt"] for row in expanded]
    kwargs["completion_ids"] = [[1, 2, 3]] * len(expanded)
    kwargs["trainer_state"] = None
    return kwargs


def _rows(mode: str) -> list:
    # 1000x500 screenshot seen at 500x250: the target (100,50)-(300,150) becomes (50,25)-(150,75), centre (100,50)
    sample = Sample("s1", "Click OK", "shot.png", [(100, 50, 300, 150)], 1000, 500)
    return [sample_to_row(sample, Frame(1000, 500, 500, 250), mode)]


def test_task_row_in_box_mode():
    row = _rows("box")[0]
    assert row["prompt"][0]["content"] == system_prompt(250, 500, "box")
    assert row["resized_size"] == [500, 250]
    assert row["target_boxes_resized"] == [[50.0, 25.0, 150.0, 75.0]]
    assert row["prompt_mode"] == "box"
    # a Sample built in code has no published boxes: its pixel boxes stand in, unit = the original image
    assert row["target_boxes_source"] == [[100.0, 50.0, 300.0, 150.0]]
    assert (row["source_box_unit"], row["source_box_scale"], row["box_rounding"]) == ("pixel", [1000.0, 500.0], "float")


def test_wrappers_point_mode_exact_lists():
    kw = _trainer_kwargs(_rows("non_thinking"), 4)
    texts = ["(100,50)", "(150,75)", "(200,50)", "[50,25,150,75]"]
    comps = [assistant(t) for t in texts]
    diag = math.hypot(500, 250)
    assert gg.click_reward(comps, **kw) == [1.0, 1.0, 0.0, 0.0]
    assert gg.distance_reward(comps, **kw) == [
        1.0,
        close(1 - (math.hypot(50, 25) / diag) ** 2),
        close(1 - (100 / diag) ** 2),
        0.0,
    ]
    # sigma = (50, 25): (150,75) is the corner -> exp(-1); (200,50) is two sigmas right -> exp(-2)
    assert gg.gaussian_point_reward(comps, **kw) == [1.0, close(math.exp(-1)), close(math.exp(-2)), 0.0]
    # normalised centre (0.2, 0.2), d_max = hypot(0.8, 0.8)
    d_max = math.hypot(0.8, 0.8)
    assert gg.click_distance_bonus_reward(comps, **kw) == [
        2.0,
        close(2 - (math.hypot(0.1, 0.1) / d_max) ** 2),
        close(1 - (0.2 / d_max) ** 2),
        0.0,
    ]
    with pytest.raises(ValueError, match="needs prompt_mode 'box', got 'non_thinking'"):
        gg.iou_reward(comps, **kw)
    with pytest.raises(ValueError, match="needs prompt_mode 'box', got 'non_thinking'"):
        gg.gaussian_coverage_reward(comps, **kw)


def test_wrappers_box_mode_exact_lists():
    kw = _trainer_kwargs(_rows("box"), 3)
    texts = ["[50,25,150,75]", "[100,25,200,75]", "(100,50)"]
    comps = [assistant(t) for t in texts]
    assert gg.iou_reward(comps, **kw) == [1.0, close(50 * 50 / (2 * 5000 - 2500)), 0.0]
    # shift 50 in x, same sigmas (50, 25): exp(-50^2 / (4 * 5000))
    assert gg.gaussian_coverage_reward(comps, **kw) == [1.0, close(math.exp(-(50**2) / (4 * 5000))), 0.0]
    assert gg.click_reward(comps, **kw) == [1.0, 1.0, 0.0]  # centres (100,50) and (150,50)
    assert gg.gaussian_point_reward(comps, **kw) == [1.0, close(math.exp(-0.5)), 0.0]
    assert gg.distance_reward(comps, **kw) == [1.0, close(1 - (50 / math.hypot(500, 250)) ** 2), 0.0]


def test_wrappers_thinking_mode_and_plain_strings():
    kw = _trainer_kwargs(_rows("thinking"), 2)
    comps = ["<think>ok</think><answer>(100,50)</answer>", "(100,50)"]
    assert gg.distance_reward(comps, **kw) == [1.0, 0.0]
    assert gg.gaussian_point_reward(comps, **kw) == [1.0, 0.0]
    assert gg.click_distance_bonus_reward(comps, **kw) == [2.0, 0.0]


def test_wrappers_defaults_without_prompt_mode_column():
    boxes = [[[0, 0, 10, 10]]]
    assert gg.distance_reward(["(5,5)"], target_boxes_resized=boxes, resized_size=[[100, 100]]) == [1.0]
    assert gg.gaussian_point_reward(["(5,5)"], target_boxes_resized=boxes) == [1.0]
    assert gg.click_distance_bonus_reward(["(5,5)"], target_boxes_resized=boxes, resized_size=[[100, 100]]) == [2.0]
    assert gg.iou_reward(["[0,0,10,10]"], target_boxes_resized=boxes) == [1.0]  # box rewards default to box mode
    assert gg.gaussian_coverage_reward(["[0,0,10,10]"], target_boxes_resized=boxes) == [1.0]


@pytest.mark.parametrize(
    "fn, extra",
    [
        (gg.distance_reward, {"resized_size": [[100, 100]]}),
        (gg.iou_reward, {}),
        (gg.gaussian_point_reward, {}),
        (gg.gaussian_coverage_reward, {}),
        (gg.click_distance_bonus_reward, {"resized_size": [[100, 100]]}),
    ],
)
def test_wrappers_length_mismatch_raises(fn, extra):
    with pytest.raises(ValueError):
        fn(["[0,0,10,10]", "[0,0,10,10]"], target_boxes_resized=[[[0, 0, 10, 10]]], **extra)


# --------------------------------------------------------------------------------------------------------------------
# registry

VARIANTS = {
    "distance": gg.distance_reward,
    "iou": gg.iou_reward,
    "gaussian_point": gg.gaussian_point_reward,
    "gaussian_coverage": gg.gaussian_coverage_reward,
    "click_distance_bonus": gg.click_distance_bonus_reward,
}


def test_variants_are_declared_by_the_task():
    from gui_grounding.training.task import GUIGroundingTask

    for name, fn in VARIANTS.items():
        assert GUIGroundingTask.rewards[name] is fn


def test_resolve_rewards_all_names():
    names = ["click", "click_format", "format", "accuracy", *VARIANTS]
    expected = [gg.click_reward, gg.click_format_reward, ur.format_reward, ur.accuracy_reward, *VARIANTS.values()]
    from gui_grounding.training.task import GUIGroundingTask

    assert vr.resolve_rewards(names, GUIGroundingTask()) == expected
    assert vr.resolve_reward("gui_grounding.training.rewards:gaussian_point_reward") is gg.gaussian_point_reward


# --------------------------------------------------------------------------------------------------------------------
# properties

coord = st.integers(min_value=-50, max_value=400)


@st.composite
def box_strategy(draw):
    x0, x1 = sorted((draw(coord), draw(coord)))
    y0, y1 = sorted((draw(coord), draw(coord)))
    return [x0, y0, x1, y1]


@settings(max_examples=300, deadline=None)
@given(box_strategy(), coord, coord)
def test_property_gaussian_point_in_unit_interval_max_at_centre(box, x, y):
    value = gaussian_point_value((x, y), box)
    assert 0.0 <= value <= 1.0
    assert gaussian_point_value(((box[0] + box[2]) / 2, (box[1] + box[3]) / 2), box) == 1.0


@settings(max_examples=300, deadline=None)
@given(box_strategy(), box_strategy())
def test_property_gaussian_overlap_symmetric_and_bounded(a, b):
    ab = gaussian_overlap(a, b)
    assert 0.0 <= ab <= 1.0 + 1e-12
    assert ab == close(gaussian_overlap(b, a))
    assert gaussian_overlap(a, a) == close(1.0)


@settings(max_examples=300, deadline=None)
@given(box_strategy(), st.integers(min_value=0, max_value=300), st.integers(min_value=0, max_value=300))
def test_property_click_distance_bonus_is_at_least_one_iff_hit(box, x, y):
    size = [301, 301]  # every drawn point is inside the image
    score = score_click_distance_bonus(f"({x},{y})", [box], size)
    hit = box[0] <= x <= box[2] and box[1] <= y <= box[3]
    assert 0.0 <= score <= 2.0
    assert (score >= 1.0) == hit
    assert score - (1.0 if hit else 0.0) == close(centre_distance_bonus((x, y), box, size))


@settings(max_examples=300, deadline=None)
@given(box_strategy(), coord, coord)
def test_property_distance_bounded_and_one_only_at_centre(box, x, y):
    score = score_distance(f"({x},{y})", [box], [450, 450])
    assert 0.0 <= score <= 1.0
    at_centre = (x, y) == ((box[0] + box[2]) / 2, (box[1] + box[3]) / 2)
    assert (score == 1.0) == at_centre


# --------------------------------------------------------------------------------------------------------------------
# totality (issue 11): unusable targets score 0, numbers past 12 digits are not answers, no exception, never NaN

NAN, INF = float("nan"), float("inf")
HUGE_PAIR = "(" + "9" * 155 + "," + "9" * 155 + ")"
HUGE_BOX = "[0,0," + "9" * 155 + "," + "9" * 155 + "]"


def _every_score(text: str, boxes, size=(100, 100)) -> dict:
    """Each score function on ``text`` in every mode it accepts."""
    out = {}
    for mode in ("non_thinking", "thinking", "box"):
        out[f"click/{mode}"] = score_click(text, boxes, mode)
        out[f"distance/{mode}"] = score_distance(text, boxes, size, mode)
        out[f"gaussian_point/{mode}"] = score_gaussian_point(text, boxes, mode)
        out[f"click_distance_bonus/{mode}"] = score_click_distance_bonus(text, boxes, size, mode)
    out["iou"] = score_iou(text, boxes)
    out["gaussian_coverage"] = score_gaussian_coverage(text, boxes)
    return out


@pytest.mark.parametrize(
    "target",
    [
        [NAN, 10, 50, 50],
        [10, 10, INF, 50],
        [-INF, -INF, INF, INF],
        [50, 10, 10, 50],  # inverted x
        [10, 50, 50, 10],  # inverted y
        [10, 10, 50],
        [10, 10, 50, 50, 60],
        None,
        "10,10,50,50",
        [10, 10, 1e13, 50],
        [10**400, 10, 10**401, 50],
        [True, 10, 50, 50],
    ],
)
def test_unusable_target_scores_zero_in_every_reward(target):
    for text in ("(30,30)", "<think>t</think><answer>(30,30)</answer>", "[10,10,50,50]"):
        assert set(_every_score(text, [[10, 10, 50, 50]]).values()) != {0.0}  # the usable target pays
        scores = _every_score(text, [target])
        assert scores == dict.fromkeys(scores, 0.0), (text, scores)
        mixed = _every_score(text, [target, [10, 10, 50, 50]])
        assert mixed == _every_score(text, [[10, 10, 50, 50]])  # an unusable target is skipped, the best one counts


@pytest.mark.parametrize("boxes", [None, [], 3.5, "[[10,10,50,50]]", [10, 10, 50, 50]])
def test_malformed_target_column_scores_zero(boxes):
    scores = _every_score("[10,10,50,50]", boxes)
    assert scores == dict.fromkeys(scores, 0.0)


def test_inverted_target_no_longer_raises_in_gaussian_coverage():
    # was "math domain error": sqrt of a negative sigma product
    assert score_gaussian_coverage("[10,10,50,50]", [[50, 50, 10, 10]]) == 0.0
    assert gaussian_overlap([10, 10, 50, 50], [50, 50, 10, 10]) == 0.0
    assert gaussian_point_value((30, 30), [50, 50, 10, 10]) == 0.0
    assert gaussian_point_value((30, 30), [NAN, 10, 50, 50]) == 0.0


def test_tiny_sigma_is_finite():
    # (d / sigma)^2 overflows: the product gives inf and exp(-inf) = 0, where ** 2 raised OverflowError
    assert gaussian_point_value((1e12, 0), [0, 0, 1e-300, 1]) == 0.0
    assert gaussian_overlap([0, 0, 1e-300, 1], [1e11, 0, 1e11 + 1e-300, 1]) == 0.0


@pytest.mark.parametrize(
    "text",
    [
        HUGE_PAIR,
        HUGE_BOX,
        "(" + "1" * 13 + ",5)",
        "[0,0," + "1" * 13 + ",5]",
        "<think>t</think><answer>" + HUGE_PAIR + "</answer>",
    ],
)
def test_numbers_past_twelve_digits_are_not_answers(text):
    # 155+ digit answers raised OverflowError in distance, gaussian_point, gaussian_coverage, click_distance_bonus,
    # iou and box-mode click
    scores = _every_score(text, [[0, 0, 10**12, 10**12]])
    assert scores == dict.fromkeys(scores, 0.0)


def test_answers_at_the_coordinate_bound_still_parse():
    # a number beyond +-1e7 is no coordinate (gui_grounding.models.prompts.answer_numbers: what eval's predictions
    # reader reads back); the bound itself is one
    big = 10**7
    assert score_click(f"({big},{big})", [[0, 0, 1e12, 1e12]]) == 1.0
    assert score_iou(f"[0,0,{big},{big}]", [[0, 0, big, big]]) == 1.0
    assert score_click(f"({big + 1},{big})", [[0, 0, 1e12, 1e12]]) == 0.0
    assert score_iou(f"[0,0,{big + 1},{big}]", [[0, 0, big, big]]) == 0.0


def test_gta1_rounding_with_unusable_source_columns_scores_zero():
    def click(source, scale, size):
        return gg.click_reward(
            ["(60,60)"],
            target_boxes_resized=[[[50, 50, 70, 70]]],
            box_rounding=["gta1"],
            target_boxes_source=[source],
            source_box_scale=[scale],
            resized_size=[size],
        )[0]

    assert click([[100, 100, 140, 140]], [1000, 1000], [500, 500]) == 1.0
    assert click([[NAN, 100, 140, 140]], [1000, 1000], [500, 500]) == 0.0
    assert click([[140, 100, 100, 140]], [1000, 1000], [500, 500]) == 0.0
    assert click([[1e300, 0, 1e308, 1]], [1000, 1000], [500, 500]) == 0.0
    assert click([[100, 100, 140, 140]], [0, 1000], [500, 500]) == 0.0
    assert click([[100, 100, 140, 140]], [1e-300, 1e-300], [500, 500]) == 0.0
    assert click([[100, 100, 140, 140]], [1000, 1000], [INF, 500]) == 0.0
    assert click(None, [1000, 1000], [500, 500]) == 0.0
    assert gg.gta1_click_boxes([[NAN, 0, 1, 1], [100, 100, 140, 140]], [1000, 1000], [500, 500]) == [(50, 50, 70, 70)]


@settings(max_examples=300, deadline=None)
@given(
    text=st.text(alphabet=st.sampled_from(list("()[],-. 0123456789")), max_size=40),
    box=st.lists(
        st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-(10**30), 10**30)),
        min_size=4,
        max_size=4,
    ),
    size=st.lists(st.floats(allow_nan=True, allow_infinity=True), min_size=2, max_size=2),
)
def test_property_every_score_is_finite(text, box, size):
    for value in _every_score(text, [box], size).values():
        assert math.isfinite(value)
