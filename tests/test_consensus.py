"""GUI-RC's region vote (``gui_grounding.models.consensus.consensus``): hand-computed answers, and a property test against a
brute-force pixel-grid GUI-RC (ZJU-REAL/GUI-RCPO ``GUI-RC/evaluation.py`` at cd3bd51) on small images.

The brute force is written here, independently of the coordinate-compressed implementation: a ``H x W`` vote grid,
each point's square region with ``int()`` edges clipped to the image (an empty region casts no vote: a naive numpy
slice with ``x2 < 0`` would count), the max-vote mask, ``scipy.ndimage.label`` (4-connected), GUI-RC's strict
``area > max_area`` loop over the labels in order, the centre of the winner's ``find_objects`` box.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gui_grounding.models.consensus import DEFAULT_REGION, MAX_SAMPLES, Consensus, consensus

NAN, INF = float("nan"), float("inf")


# --------------------------------------------------------------------------------------------------------------------
# hand-computed answers


def test_clear_majority_cluster():
    # regions (region 50): [75,125)x[75,125), [77,127)x[76,126), [73,123)x[74,124); 3 votes on [77,123)x[76,124)
    c = consensus([(100, 100), (102, 101), (98, 99), (400, 400)], 1000, 1000)
    assert c == Consensus((100.0, 100.0), 0.75, 3, 4, (77, 76, 123, 124), (True, True, True, False))
    assert c.to_dict() == {
        "point": [100.0, 100.0],
        "agreement": 0.75,
        "votes": 3,
        "num_samples": 4,
        "region": [77, 76, 123, 124],
    }
    assert DEFAULT_REGION == 50.0


def test_equal_votes_equal_area_upper_region_wins():
    # one vote each, both 50x50: the region whose first pixel comes first in raster order (top row first) wins
    c = consensus([(100, 300), (300, 100)], 1000, 1000)
    assert c == Consensus((300.0, 100.0), 0.5, 1, 2, (275, 75, 325, 125), (False, True))


def test_equal_votes_equal_area_same_row_left_region_wins():
    c = consensus([(500, 100), (100, 100)], 1000, 1000)
    assert c == Consensus((100.0, 100.0), 0.5, 1, 2, (75, 75, 125, 125), (False, True))
    # two votes each, both 49x50 from row 75: the left pair ([76,125)x[75,125)) before [476,525)x[75,125)
    c = consensus([(500, 100), (100, 100), (501, 100), (101, 100)], 1000, 1000)
    assert c == Consensus((100.5, 100.0), 0.5, 2, 4, (76, 75, 125, 125), (False, True, False, True))
    # ... but a pair starting one row higher wins although it lies to the right: [476,525)x[75,125) against
    # [75,125)x[76,125)
    c = consensus([(500, 100), (100, 100), (501, 100), (100, 101)], 1000, 1000)
    assert c == Consensus((500.5, 100.0), 0.5, 2, 4, (476, 75, 525, 125), (True, False, True, False))


def test_regions_touching_at_a_corner_are_two_components():
    # [75,125)^2 and [125,175)^2 share only the corner (125, 125): 4-connected, two components of equal area
    c = consensus([(150, 150), (100, 100)], 1000, 1000)
    assert c == Consensus((100.0, 100.0), 0.5, 1, 2, (75, 75, 125, 125), (False, True))
    # sharing a side: one component, its bounding box around both
    c = consensus([(150, 100), (100, 100)], 1000, 1000)
    assert c == Consensus((125.0, 100.0), 0.5, 1, 2, (75, 75, 175, 125), (True, True))


def test_equal_votes_larger_area_wins():
    # (0,0) is clipped to [0,25)x[0,25) (625 px, first in raster order); (500,500) keeps 2500 px and wins
    c = consensus([(0, 0), (500, 500)], 1000, 1000)
    assert c == Consensus((500.0, 500.0), 0.5, 1, 2, (475, 475, 525, 525), (False, True))
    # more votes beat a larger area: the 2-vote overlap [95,125)^2 wins over the 2500-px single vote at (700, 700)
    c = consensus([(100, 100), (120, 120), (700, 700)], 1000, 1000)
    assert c.votes == 2 and c.region == (95, 95, 125, 125) and c.point == (110.0, 110.0)
    assert c.members == (True, True, False)


def test_unusable_points_count_in_k_but_cast_no_vote():
    points = [(100, 100), None, [NAN, 1], (True, 5), "12,3", (INF, 2), (2e7, 3), (1, 2, 3), (101, 101), [100.0, 100]]
    c = consensus(points, 1000, 1000)
    # three votes: [75,125)^2, [76,126)^2, [75,125)^2 -> [76,125)^2
    assert c == Consensus(
        (100.5, 100.5),
        3 / 10,
        3,
        10,
        (76, 76, 125, 125),
        (True, False, False, False, False, False, False, False, True, True),
    )


def test_no_vote():
    assert consensus([], 100, 100) == Consensus(None, 0.0, 0, 0, None, ())
    assert consensus([None, "x"], 100, 100) == Consensus(None, 0.0, 0, 2, None, (False, False))
    # beyond the image by more than region/2: the clipped region is empty, no vote
    assert consensus([(1100, 500), (500, -30)], 1000, 1000) == Consensus(None, 0.0, 0, 2, None, (False, False))


def test_clipping_at_the_image_edges():
    # x: [int(-15), int(35)) -> [0,35); y: [965, 1015) -> [965, 1000)
    c = consensus([(10, 990)], 1000, 1000)
    assert c == Consensus((17.5, 982.5), 1.0, 1, 1, (0, 965, 35, 1000), (True,))
    # outside the image by less than region/2: it votes (the clipped region [985,1000)), but its own pixel
    # (1010, 500) is not in the image, so it is not a member
    c = consensus([(1010, 500)], 1000, 1000)
    assert c == Consensus((992.5, 500.0), 1.0, 1, 1, (985, 475, 1000, 525), (False,))
    # a non-integer image size clips at int(size)
    assert consensus([(95, 5)], 99.9, 10.5).region == (70, 0, 99, 10)


def test_unknown_size_does_not_clip():
    assert consensus([(10, 10)]).region == (-15, -15, 35, 35)
    assert consensus([(10, 10)], None, None).point == (10.0, 10.0)
    assert consensus([(10, 10)], 0, 0).region == (-15, -15, 35, 35)  # 0: unknown
    # int() truncates toward zero: int(-35.5) = -35, int(14.5) = 14
    c = consensus([(-10.5, 3)])
    assert c == Consensus((-10.5, 3.0), 1.0, 1, 1, (-35, -22, 14, 28), (True,))


def test_region_parameter():
    assert consensus([(100, 100)], 1000, 1000, region=10).region == (95, 95, 105, 105)
    # 7.5: [int(96.25), int(103.75)) = [96, 103)
    c = consensus([(100, 100)], 1000, 1000, region=7.5)
    assert c == Consensus((99.5, 99.5), 1.0, 1, 1, (96, 96, 103, 103), (True,))
    # region 2 (the smallest, gui_grounding.models.consensus.MIN_REGION) around 10.0: [int(9.0), int(11.0)) = [9, 11) holds
    # floor(10.0) = 10 (region 1 gave [9, 10), without the point's own pixel: refused since issue 28)
    c = consensus([(10.0, 10.0)], 100, 100, region=2)
    assert c.region == (9, 9, 11, 11) and c.members == (True,)
    # a larger region merges two points that a smaller one keeps apart
    assert consensus([(100, 100), (160, 100)], 1000, 1000).votes == 1
    assert consensus([(100, 100), (160, 100)], 1000, 1000, region=100).votes == 2
    for bad in (0, -1, 1, 1.99, NAN, INF, True, "50", None):
        with pytest.raises(ValueError):
            consensus([(1, 1)], 10, 10, region=bad)


def test_more_than_max_samples_raises():
    assert consensus([(5, 5)] * MAX_SAMPLES, 10, 10).votes == MAX_SAMPLES
    with pytest.raises(ValueError):
        consensus([(5, 5)] * (MAX_SAMPLES + 1), 10, 10)


def test_members_exact():
    # y: every region [75,125). x: 100 -> [75,125), 110 -> [85,135), 124.9 -> [99,149), 125 -> [100,150),
    # 75 -> [50,100), 74.99 -> [49,99): 4 votes on [85,99), [99,100) and [100,125), one component [85,125)x[75,125).
    # Members: the points whose (floor x, floor y) lies in it.
    points = [(100, 100), (110, 100), (124.9, 100), (125, 100), (75, 100), (74.99, 100)]
    c = consensus(points, 1000, 1000)
    assert c == Consensus((105.0, 100.0), 4 / 6, 4, 6, (85, 75, 125, 125), (True, True, True, False, False, False))


# --------------------------------------------------------------------------------------------------------------------
# property: equal to a brute-force pixel-grid GUI-RC


def brute_force_gui_rc(points, width: int, height: int, region: float):
    """GUI-RC on a ``height x width`` pixel grid: ``(point, votes, box, members)``."""
    import numpy as np
    from scipy import ndimage

    grid = np.zeros((height, width), dtype=np.int64)
    usable = []
    for p in points:
        ok = p is not None and all(isinstance(v, (int, float)) and math.isfinite(v) for v in p)
        usable.append(p if ok else None)
        if not ok:
            continue
        x1, y1 = max(0, int(p[0] - region / 2)), max(0, int(p[1] - region / 2))
        x2, y2 = min(width, int(p[0] + region / 2)), min(height, int(p[1] + region / 2))
        if x2 <= x1 or y2 <= y1:
            continue  # empty region: no vote (a negative slice end would otherwise count)
        grid[y1:y2, x1:x2] += 1
    top = int(grid.max())
    if top == 0:
        return None, 0, None, tuple(False for _ in points)
    labels, count = ndimage.label(grid == top)
    objects = ndimage.find_objects(labels)
    win, max_area = 0, 0
    for label in range(1, count + 1):
        area = int((labels == label).sum())
        if area > max_area:  # GUI-RC's strict loop: ties keep the first label
            win, max_area = label, area
    rows, cols = objects[win - 1]
    box = (cols.start, rows.start, cols.stop, rows.stop)
    members = []
    for p in usable:
        inside = False
        if p is not None:
            fx, fy = math.floor(p[0]), math.floor(p[1])
            inside = 0 <= fx < width and 0 <= fy < height and int(labels[fy, fx]) == win
        members.append(inside)
    return ((box[0] + box[2]) / 2, (box[1] + box[3]) / 2), top, box, tuple(members)


coordinate = st.one_of(st.integers(-60, 140), st.floats(-60, 140, allow_nan=False, allow_infinity=False))
point = st.one_of(
    st.tuples(coordinate, coordinate),
    st.tuples(st.integers(0, 80), st.integers(0, 80)),  # mostly inside the image, often shared
    st.sampled_from([None, (NAN, 3.0)]),
)


@st.composite
def votes(draw):
    width, height = draw(st.integers(1, 80)), draw(st.integers(1, 80))
    region = draw(st.sampled_from([2, 3, 10, 50, 7.5]))
    # a lattice of pitch ``region``: regions whose edges line up, touching by a side or only by a corner
    base = draw(st.integers(0, 40))
    lattice = st.integers(-1, 4).map(lambda k: base + k * region)
    cluster = draw(st.lists(st.one_of(point, st.tuples(lattice, lattice)), min_size=1, max_size=10))
    return cluster, width, height, region


def _check_against_brute_force(case):
    points, width, height, region = case
    got = consensus(points, width, height, region=region)
    want_point, want_votes, want_box, want_members = brute_force_gui_rc(points, width, height, region)
    assert (got.point, got.votes, got.region, got.members) == (want_point, want_votes, want_box, want_members)
    assert got.num_samples == len(points) and got.agreement == want_votes / len(points)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=votes())
def test_equals_brute_force_pixel_grid(case):
    _check_against_brute_force(case)


@pytest.mark.slow
@settings(max_examples=3000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=votes())
def test_equals_brute_force_pixel_grid_deep(case):
    _check_against_brute_force(case)
