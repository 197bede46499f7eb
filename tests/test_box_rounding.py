"""``--box_rounding gta1``: the click reward decides hits with GTA1's integer box rule on the published numbers.

GTA1's rule (Yan98/GTA1 ``src/grpo_grounding.py:137`` and ``155-168`` at 81f0c4c): the reward receives
``[bbox, resized_h/1000, resized_w/1000]`` with ``bbox`` in 0-1000, rescales each box edge with ``int(v * ratio)``
(x edges with the width ratio, y edges with the height ratio), and gives 1.0 when the integer point satisfies
``x0 <= x <= x1 and y0 <= y <= y1``. The reference below is written from that rule, vectorised with numpy; it is not
GTA1's code and not ours.
"""

from __future__ import annotations

import json
import math
from types import SimpleNamespace

import numpy as np
import pytest
from PIL import Image

from groundwork.pixel_budget import PixelBudget
from gui_grounding.data.schema import load_samples
from gui_grounding.models.frames import Frame, gta1_box_to_resized
from gui_grounding.training.rewards import click_reward
from gui_grounding.training.task import GUIGroundingOptions, GUIGroundingTask, sample_to_row

N = 100_000
SEED = 20250705


def _reference_hits(boxes: np.ndarray, points: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """GTA1's decision per row, from the rule's description: ratio = resized side / 1000 (a float, as the solution
    list carries it), each edge ``int(v * ratio)`` (truncation toward zero), inclusive comparison."""
    ratio_w = sizes[:, 0] / 1000.0
    ratio_h = sizes[:, 1] / 1000.0
    x0, x1 = np.trunc(boxes[:, 0] * ratio_w), np.trunc(boxes[:, 2] * ratio_w)
    y0, y1 = np.trunc(boxes[:, 1] * ratio_h), np.trunc(boxes[:, 3] * ratio_h)
    x, y = points[:, 0], points[:, 1]
    return (x0 <= x) & (x <= x1) & (y0 <= y) & (y <= y1)


def _random_triples(rng: np.random.Generator):
    """``N`` (box in 0-1000, integer point, resized size) triples, biased towards the edges where rounding matters.

    Thirds of the boxes: integer edges, edges with one or two decimals, and integer edges chosen so that the exact
    product ``edge * side / 1000`` is an integer. Points sit within two pixels of a truncated edge half of the time.
    """
    sizes = rng.integers(1, 150, size=(N, 2)) * 28  # resized sides are multiples of 28 (smart_resize)
    kind = rng.integers(0, 3, size=N)
    lo = rng.integers(0, 1000, size=(N, 2))
    hi = lo + rng.integers(1, 400, size=(N, 2))
    hi = np.minimum(hi, 1000)
    boxes = np.stack([lo[:, 0], lo[:, 1], hi[:, 0], hi[:, 1]], axis=1).astype(np.float64)
    frac = rng.integers(1, 100, size=(N, 4)) / 100  # .01 .. .99 (one or two decimals)
    boxes[kind == 1] = np.minimum(boxes[kind == 1] + frac[kind == 1], 1000.0)
    # integer products: an edge that is a multiple of 1000 / gcd(side, 1000)
    steps = np.stack([1000 // np.gcd(sizes[:, 0], 1000), 1000 // np.gcd(sizes[:, 1], 1000)], axis=1)
    steps = np.concatenate([steps, steps], axis=1)
    multiples = np.floor(boxes / steps) * steps
    boxes[kind == 2] = multiples[kind == 2]
    bad = (boxes[:, 2] <= boxes[:, 0]) | (boxes[:, 3] <= boxes[:, 1])
    boxes[bad, 2] = np.minimum(boxes[bad, 0] + steps[bad, 0], 1000)
    boxes[bad, 3] = np.minimum(boxes[bad, 1] + steps[bad, 1], 1000)

    near = rng.random(N) < 0.5
    edge_x = np.trunc(boxes[np.arange(N), rng.choice([0, 2], size=N)] * sizes[:, 0] / 1000.0)
    edge_y = np.trunc(boxes[np.arange(N), rng.choice([1, 3], size=N)] * sizes[:, 1] / 1000.0)
    points = np.stack([rng.integers(-5, sizes[:, 0] + 5), rng.integers(-5, sizes[:, 1] + 5)], axis=1)
    jitter = rng.integers(-2, 3, size=(N, 2))
    points[near, 0] = edge_x[near] + jitter[near, 0]
    points[near, 1] = edge_y[near] + jitter[near, 1]
    return boxes, points.astype(np.int64), sizes, kind


def test_gta1_rounding_equals_gta1_rule_on_100k_random_triples():
    rng = np.random.default_rng(SEED)
    boxes, points, sizes, kind = _random_triples(rng)
    # the sample really covers integer and non-integer edge products
    products = boxes[:, 0] * sizes[:, 0] / 1000.0
    integral = products == np.round(products)
    assert integral.sum() > N // 4 and (~integral).sum() > N // 4
    assert (kind == 1).sum() > N // 4

    expected = _reference_hits(boxes, points, sizes)
    assert 0.1 * N < expected.sum() < 0.9 * N  # both decisions are well represented

    completions = [f"({x},{y})" for x, y in points.tolist()]
    got = click_reward(
        completions,
        target_boxes_resized=[[[0.0, 0.0, 0.0, 0.0]]] * N,  # ignored under gta1
        box_rounding=["gta1"] * N,
        target_boxes_source=[[b] for b in boxes.tolist()],
        source_box_scale=[[1000.0, 1000.0]] * N,
        resized_size=sizes.tolist(),
    )
    assert got == [1.0 if hit else 0.0 for hit in expected.tolist()]

    # and the rule differs from float edges on a good share of these edge-biased triples
    floats = [
        [[b[0] * w / 1000, b[1] * h / 1000, b[2] * w / 1000, b[3] * h / 1000]]
        for b, (w, h) in zip(boxes.tolist(), sizes.tolist(), strict=True)
    ]
    as_float = click_reward(completions, target_boxes_resized=floats, box_rounding=["float"] * N)
    assert sum(a != b for a, b in zip(got, as_float, strict=True)) > N // 50


def test_gta1_edges_keep_gta1_float_ratio():
    # 0.7 is stored as 0.69999...: GTA1's int(90 * (700 / 1000)) is 62, although 90 * 700 / 1000 is exactly 63
    assert gta1_box_to_resized((90, 90, 500, 500), (1000, 1000), (700, 700)) == (62, 62, 350, 350)
    assert math.trunc(90 * (700 / 1000)) == 62 and 90 * 700 // 1000 == 63
    hits = click_reward(
        ["(62,62)"],
        target_boxes_resized=[[[63.0, 63.0, 350.0, 350.0]]],
        box_rounding=["gta1"],
        target_boxes_source=[[[90, 90, 500, 500]]],
        source_box_scale=[[1000, 1000]],
        resized_size=[[700, 700]],
    )
    assert hits == [1.0]
    # pixel-unit sources use the original size as the source extent: 1280 -> 588 wide, 720 -> 336 high
    assert gta1_box_to_resized((128, 72, 640, 360), (1280, 720), (588, 336)) == (58, 33, 294, 168)


def _gta1_record_rows(tmp_path, box_rounding: str) -> list[dict]:
    """A GTA1 record (bbox 0-1000) on a 1280x720 screenshot, through load_samples and the task's rows (588x336)."""
    Image.new("RGB", (1280, 720), "white").save(tmp_path / "shot.png")
    record = {
        "image": "shot.png",
        "bbox": [100, 100, 300, 300],
        "conversations": [{"from": "human", "value": "<image>Click the logo"}, {"from": "gpt", "value": ""}],
    }
    (tmp_path / "d.jsonl").write_text(json.dumps(record) + "\n")
    (sample,), _ = load_samples([str(tmp_path / "d.jsonl")])
    frame = Frame.for_image(sample.width, sample.height, factor=28, min_pixels=3136, max_pixels=200_704)
    return [sample_to_row(sample, frame, "non_thinking", box_rounding)]


def _reward(rows: list[dict], texts: list[str]) -> list[float]:
    """click_reward called as TRL calls it: every non-prompt column, repeated once per completion."""
    cols = {k: [rows[0][k]] * len(texts) for k in rows[0] if k != "prompt"}
    return click_reward(texts, **cols)


def test_one_pixel_left_of_the_float_edge_hits_only_under_gta1(tmp_path):
    rows = _gta1_record_rows(tmp_path, "gta1")
    row = rows[0]
    # 0-1000 box [100, 100, 300, 300] -> pixels (128, 72, 384, 216) -> resized floats (58.8, 33.6, 176.4, 100.8)
    assert row["resized_size"] == [588, 336]
    assert row["target_boxes_resized"][0] == pytest.approx([58.8, 33.6, 176.4, 100.8], abs=1e-9)
    assert row["target_boxes_source"] == [[100.0, 100.0, 300.0, 300.0]]
    assert (row["source_box_unit"], row["source_box_scale"], row["box_rounding"]) == (
        "norm1000",
        [1000.0, 1000.0],
        "gta1",
    )
    # GTA1: int(100 * 0.588) = 58, int(100 * 0.336) = 33, int(300 * 0.588) = 176, int(300 * 0.336) = 100
    texts = ["(58,50)", "(80,33)", "(59,34)", "(57,50)", "(176,100)", "(177,50)"]
    assert _reward(rows, texts) == [1.0, 1.0, 1.0, 0.0, 1.0, 0.0]
    # float edges: 58 < 58.8 and 33 < 33.6 miss; the rest decide the same
    float_rows = _gta1_record_rows(tmp_path, "float")
    assert _reward(float_rows, texts) == [0.0, 0.0, 1.0, 0.0, 1.0, 0.0]


def test_build_dataset_reads_box_rounding(tmp_path):
    Image.new("RGB", (1280, 720), "white").save(tmp_path / "shot.png")
    record = {
        "image": "shot.png",
        "bbox": [100, 100, 300, 300],
        "conversations": [{"from": "human", "value": "<image>Click the logo"}],
    }
    (tmp_path / "d.jsonl").write_text(json.dumps(record) + "\n")
    module = SimpleNamespace(get_image_resize_params=lambda processor: (28, 3136, 200_704), model_type="qwen2_5_vl")
    budget = PixelBudget.published("test", factor=28, min_pixels=3136, max_pixels=200_704)

    args = SimpleNamespace(data_file_list=[str(tmp_path / "d.jsonl")], image_folder_list=None, strict_data=False)
    for kw, expected in (({}, "float"), ({"box_rounding": "float"}, "float"), ({"box_rounding": "gta1"}, "gta1")):
        task = GUIGroundingTask(GUIGroundingOptions(**kw))
        task.pixel_budget = budget  # what the entry point binds
        row = task.build_dataset(args, None, module)[0]
        assert (row["box_rounding"], row["target_boxes_source"], row["image"].size) == (
            expected,
            [[100.0, 100.0, 300.0, 300.0]],
            (588, 336),
        )
    with pytest.raises(ValueError, match=r"^unknown box_rounding 'exact'; expected one of float, gta1$"):
        GUIGroundingOptions(box_rounding="exact")


def test_rows_keep_the_published_boxes(tmp_path):
    """A GTA1 record's row keeps its published 0-1000 boxes next to the original-pixel targets the greedy eval
    judges (``gui_grounding.training.train_eval.row_verdict``)."""
    from gui_grounding.training.train_eval import row_verdict

    (row,) = _gta1_record_rows(tmp_path, "gta1")
    assert row["target_boxes"] == [[128.0, 72.0, 384.0, 216.0]]  # original pixels, what the greedy eval judges
    assert (row["target_boxes_source"], row["source_box_unit"]) == ([[100.0, 100.0, 300.0, 300.0]], "norm1000")
    assert row_verdict(row, (128.0, 216.0)) == "correct" and row_verdict(row, (127.9, 100.0)) == "wrong"
    assert row_verdict(row, None) == "wrong_format"
