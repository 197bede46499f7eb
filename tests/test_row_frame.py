"""The one reading of a row's frame (``groundwork.geometry.frame_of``, ``gui_grounding.models.rows.row_frame``) and
every reader built on it are total on hostile sizes.

Stop 36's CI found the class: the zoom tool's ``final_point`` built the row's frame with ``int()`` of each side, so a
row with ``image_size`` ``[100, inf]`` raised ``OverflowError`` out of the click reward (a step killed). The same
``int()`` reading sat in ``rows.row_request`` and, behind ``valid_size``, in the REC reward (where ``1920.5`` was
silently truncated). All now go through ``frame_of``: a frame only for finite, whole-pixel sides of at least 1.
"""

from __future__ import annotations

import math

from hypothesis import example, given, settings
from hypothesis import strategies as st

from groundwork.geometry import COORD_LIMIT, Frame, frame_of
from groundwork.pixel_budget import PixelBudget
from gui_grounding.models import zoom_tool
from gui_grounding.models.rows import row_frame
from gui_grounding.training.zoom import ZoomEnvironment, final_point, sft_window
from vlm_r1.tool_rollout import ToolStop
from vlm_r1.upstream.rewards import score_rec_iou

SPECIAL = [
    float("nan"),
    float("inf"),
    float("-inf"),
    -0.0,
    0,
    0.5,
    1920.5,
    1e12,
    1e13,
    10**400,
    True,
    None,
    "100",
    b"1",
]
side = st.one_of(
    st.integers(-5, 5000),
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(-(10**30), 10**30),
    st.sampled_from(SPECIAL),
)
size = st.one_of(
    st.lists(side, min_size=2, max_size=2),
    st.tuples(side, side),
    st.lists(side, max_size=4),
    st.sampled_from([None, "100x100", {"w": 1}, 7]),
)


def _expected(image_size, resized_size):
    """The rule, spelled out: both are pairs of real numbers (no bool, str, None), finite, 1 <= side <= 1e12, whole."""

    def sides(value):
        if not isinstance(value, (list, tuple)) or len(value) != 2:
            return None
        out = []
        for v in value:
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                return None
            try:
                f = float(v)
            except OverflowError:
                return None
            if not (1 <= f <= COORD_LIMIT) or not f.is_integer():
                return None
            out.append(int(f))
        return out

    a, b = sides(image_size), sides(resized_size)
    return None if a is None or b is None else Frame(*a, *b)


@settings(max_examples=300, deadline=None)
@given(size, size)
@example([100, float("inf")], [0, 0])  # stop 36's CI case
@example([1920.0, 1080], [1932, 1092])
@example([1920.5, 1080], [1932, 1092])
def test_frame_of_is_the_rule(image_size, resized_size):
    assert frame_of(image_size, resized_size) == _expected(image_size, resized_size)


def test_frame_of_examples():
    assert frame_of([1920, 1080], [1932, 1092]) == Frame(1920, 1080, 1932, 1092)
    assert frame_of((1920.0, 1080.0), [1932, 1092]) == Frame(1920, 1080, 1932, 1092)
    assert frame_of([1920.5, 1080], [1932, 1092]) is None  # truncating would shift every mapped point
    assert frame_of([100, float("inf")], [0, 0]) is None
    assert frame_of([100, 100], [0, 100]) is None


def _row(image_size, resized_size, adapter="gta1"):
    return {
        "image_path": "/nonexistent/shot.png",
        "image_size": image_size,
        "resized_size": resized_size,
        "target_boxes": [[10, 10, 50, 50]],
        "sample_id": "s0",
        "prompt_mode": "non_thinking",
        "adapter": adapter,
    }


@settings(max_examples=150, deadline=None)
@given(size, size, st.sampled_from(["(1,2)", "(30, 30)", "[0.5, 0.5]", "no point"]))
@example([100, float("inf")], [0, 0], "(1,2)")
def test_zoom_readings_are_total_on_hostile_sizes(image_size, resized_size, text):
    row = _row(image_size, resized_size)
    frame = _expected(image_size, resized_size)
    point = final_point(row, None, text)
    if frame is None:
        assert point is None
    else:
        assert point is None or all(math.isfinite(v) for v in point)
    # a call on such a row ends the rollout with a reason, never raises
    call = zoom_tool.call_text([0, 0, 50, 50])
    out = ZoomEnvironment(PixelBudget(factor=28, min_pixels=3136, max_pixels=112 * 112)).step(row, [{"text": call}])
    if frame is None:
        assert isinstance(out, ToolStop) and out.reason == "unsendable"
    # the SFT window: a frame or a ValueError (the dropped-sample path), nothing else
    try:
        window = sft_window(row, 0.5)
    except ValueError:
        assert frame is None
    else:
        assert frame is not None and window.width > 0
    # the REC reward reads its frame the same way
    reward = score_rec_iou("<answer>{'bbox_2d': [10, 10, 50, 50]}</answer>", [10, 10, 50, 50], image_size, resized_size)
    assert reward == 0.0 if frame is None else 0.0 <= reward <= 1.0


def test_row_frame_exact_and_reasoned():
    assert row_frame(_row([1280, 720], [1288, 728])) == Frame(1280, 720, 1288, 728)
    try:
        row_frame(_row([1280, float("nan")], [1288, 728]))
    except ValueError as err:
        assert "unusable image_size/resized_size" in str(err)
    else:
        raise AssertionError("a NaN side gave a frame")
    # a point on a usable row maps back exactly: gta1 answers in resized pixels
    assert final_point(_row([1280, 720], [1288, 728]), None, "(644, 364)") == (640.0, 360.0)
