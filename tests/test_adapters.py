"""One home per model family (issue 13): each adapter's prompt, answer frame and parser, round trip for round trip,
and the same adapter serving training rows, rewards, the SFT target and evaluation.

Round trip per adapter: a target box in original pixels -> the answer frame (``boxes_to_answer``) -> the SFT target
text (``sft_target``) -> parsed back in the answer frame (``parse_answer``, training rules) lands inside the target
box -> the ``click`` reward on a training row built by the task is 1.0 -> the evaluation parse (``parse`` on the
request) maps it back into the original box.
"""

from __future__ import annotations

import json

import pytest

from groundwork.pixel_budget import PixelBudget
from gui_grounding.data.schema import Sample
from gui_grounding.models.adapters import (
    ADAPTERS,
    DEFAULT_ADAPTER_FOR_MODEL_TYPE,
    GTA1Adapter,
    default_adapter_for,
    get_adapter,
    training_adapter,
)
from gui_grounding.models.frames import point_in_box
from gui_grounding.training.rewards import click_reward, distance_reward
from gui_grounding.training.task import GUIGroundingOptions, GUIGroundingTask, sample_to_row

SAMPLE = Sample("s0", "Open the menu", "unused.png", [(100.0, 50.0, 300.0, 150.0)], 1280, 720)
BUDGET = PixelBudget.published("test", factor=28, min_pixels=3136, max_pixels=200704)  # 1280x720 -> 588x336


def _row(adapter, budget=BUDGET):
    frame = adapter.frame_for(SAMPLE.width, SAMPLE.height, budget)
    return sample_to_row(SAMPLE, frame, adapter), frame


@pytest.mark.parametrize("name", sorted(ADAPTERS))
def test_round_trip_every_adapter(name):
    adapter = get_adapter(name)
    row, frame = _row(adapter)
    (answer_box,) = row["target_boxes_answer"]
    target = adapter.sft_target(answer_box, SAMPLE.instruction)
    point = adapter.parse_answer(target)
    assert point is not None and point_in_box(point, tuple(answer_box)), (name, target, point)
    assert click_reward([target], **{k: [v] for k, v in row.items() if k != "prompt"}) == [1.0]
    # evaluation: the same text parsed on the request maps back inside the original box
    from PIL import Image

    request = adapter.build_request(SAMPLE, Image.new("RGB", (1280, 720)), budget=BUDGET)
    original = adapter.parse(target, request)
    assert point_in_box(original, SAMPLE.boxes[0]), (name, original)
    # the row's prompt and the request's prompt are the same text (plain strings vs content blocks)
    assert [m["role"] for m in row["prompt"]] == [m["role"] for m in request.messages]
    assert "".join(m["content"] for m in row["prompt"]) == "".join(
        p.get("text", "") for m in request.messages for p in m["content"]
    )


def test_frames_exact():
    gta1, qwen3, internvl = get_adapter("gta1"), get_adapter("qwen3-vl"), get_adapter("internvl")
    row, _ = _row(gta1)
    assert (row["answer_frame"], row["answer_size"], row["resized_size"]) == ("resized", [588.0, 336.0], [588, 336])
    assert row["target_boxes_answer"] == row["target_boxes_resized"] == [[45.9375, 23.333333333333332, 137.8125, 70.0]]
    # 0-1000 grid of the original image; the image sent is the budget's: smart_resized under a budget with a factor
    # (Qwen3-VL here at factor 28, 588x336), the original under InternVL's (no factor: the processor tiles it)
    for adapter, budget, sent, boxes in (
        (qwen3, BUDGET, [588, 336], [[45.9375, 23.333333333333332, 137.8125, 70.0]]),
        (internvl, internvl.default_budget, [1280, 720], [[100.0, 50.0, 300.0, 150.0]]),
    ):
        row, _ = _row(adapter, budget)
        assert (row["answer_frame"], row["answer_size"], row["resized_size"]) == ("norm1000", [1000.0, 1000.0], sent)
        assert row["target_boxes_answer"] == [[78.125, 69.44444444444444, 234.375, 208.33333333333334]]
        assert row["target_boxes_resized"] == boxes  # pixels of the sent image


def test_prompts_and_parsers_exact():
    qwen3 = get_adapter("qwen3-vl")
    row, frame = _row(qwen3)
    assert row["prompt"] == [
        {
            "role": "user",
            "content": 'Locate the UI element that matches the instruction "Open the '
            'menu" in this screenshot. Output the point coordinates in JSON format like '
            '{"point_2d": [x, y], "label": "element"}.',
        }
    ]
    assert json.loads(qwen3.sft_target([78.125, 69.4, 234.375, 208.3], "x")) == {
        "point_2d": [156, 139],
        "label": "element",
    }
    assert qwen3.parse_answer('```json\n[{"point_2d": [500, 250], "label": "menu"}]\n```') == (500.0, 250.0)
    assert qwen3.point_to_original((500, 250), frame) == (640.0, 180.0)
    internvl = get_adapter("internvl")
    assert internvl.messages("Open the menu", frame, image_block=False) == [
        {
            "role": "user",
            "content": (
                "Please provide the bounding box coordinate of the region this sentence describes: <ref>Open the menu</ref>"
            ),
        }
    ]
    assert internvl.sft_target([78.125, 69.4, 234.375, 208.3], "Open the menu") == (
        "<ref>Open the menu</ref><box>[[78, 69, 234, 208]]</box>"
    )
    assert internvl.parse_answer("<ref>menu</ref><box>[[100, 200, 300, 400]]</box>") == (200.0, 300.0)
    assert internvl.parse_answer("[[300, 200, 100, 400]]") is None  # inverted: no training answer
    assert internvl.parse_answer("[[300, 200, 100, 400]]", strict=False) == (200.0, 300.0)
    gta1 = get_adapter("gta1")
    assert gta1.sft_target([45.9, 23.3, 137.8, 70.0], "x") == "(92,47)"
    assert get_adapter("gta1-box").sft_target([45.9, 23.3, 137.8, 70.0], "x") == "[46,23,138,70]"
    assert get_adapter("gta1-thinking").sft_target([45.9, 23.3, 137.8, 70.0], "Open") == (
        "<think>The element to click: Open.</think><answer>(92,47)</answer>"
    )


def test_rewards_read_the_answer_frame_and_the_row_parser():
    row, _ = _row(get_adapter("qwen3-vl"))
    cols = {k: [v] * 3 for k, v in row.items() if k != "prompt"}
    answers = ['{"point_2d": [150, 100]}', '{"point_2d": [500, 900]}', "(150,100)"]
    assert click_reward(answers, **cols) == [1.0, 0.0, 1.0]  # JSON point, miss, plain point also read
    # distance on the 0-1000 grid: centre of the target (156.25, 138.89) -> 1.0
    assert distance_reward(
        ['{"point_2d": [156.25, 138.8888888888889]}'], **{k: [v] for k, v in row.items() if k != "prompt"}
    ) == [1.0]
    # an older row (no adapter columns) is read as before: resized pixels, GTA1's parser
    old = {"target_boxes_resized": [[[10, 10, 20, 20]]], "prompt_mode": ["non_thinking"]}
    assert click_reward(["(15,15)"], **old) == [1.0]
    assert click_reward(['{"point_2d": [15, 15]}'], **old) == [0.0]


def test_choice_follows_model_type_prompt_mode_and_override():
    assert DEFAULT_ADAPTER_FOR_MODEL_TYPE == {
        "qwen2_5_vl": "gta1",
        "qwen2_vl": "qwen2-vl",
        "qwen3_vl": "qwen3-vl",
        "qwen3_vl_moe": "qwen3-vl",
        "internvl": "internvl",
    }
    assert isinstance(default_adapter_for("qwen2_5_vl"), GTA1Adapter)
    assert training_adapter("qwen2_5_vl", "thinking").name == "gta1-thinking"
    assert training_adapter("qwen2_5_vl", "box").name == "gta1-box"
    assert training_adapter("qwen3_vl", "non_thinking").name == "qwen3-vl"
    assert training_adapter("qwen3_vl", "non_thinking", "gta1").name == "gta1"  # --adapter wins
    with pytest.raises(ValueError, match="exists for the gta1 adapter family only"):
        training_adapter("qwen3_vl", "thinking")
    with pytest.raises(ValueError, match="contradicts --adapter qwen3-vl"):
        training_adapter("qwen2_5_vl", "box", "qwen3-vl")
    with pytest.raises(ValueError, match="no default adapter for model_type 'llava'"):
        default_adapter_for("llava")


def test_gta1_rounding_needs_a_resized_frame():
    adapter = get_adapter("qwen3-vl")
    frame = adapter.frame_for(1280, 720)
    with pytest.raises(ValueError, match="--box_rounding gta1 needs a resized-pixel answer frame"):
        sample_to_row(SAMPLE, frame, adapter, "gta1")


def test_task_builds_rows_with_the_model_types_adapter(tmp_path, make_image):
    """build_dataset picks the adapter from the module's model_type; --adapter overrides it."""
    from types import SimpleNamespace

    image = make_image(1280, 720, "shot.png", folder=tmp_path)
    data = tmp_path / "train.jsonl"
    data.write_text(
        json.dumps(
            {
                "sample_id": "a",
                "instruction": "Open the menu",
                "image_path": "shot.png",
                "target_bbox": {"x_min": 100, "y_min": 50, "x_max": 300, "y_max": 150},
                "image_width": 1280,
                "image_height": 720,
            }
        )
        + "\n"
    )
    assert image.endswith("shot.png")

    class Module:
        model_type = "qwen3_vl"

    def task(options=None, budget=BUDGET):  # the entry point binds the run's pixel budget to the task
        t = GUIGroundingTask(options)
        t.pixel_budget = budget
        return t

    args = SimpleNamespace(data_file_list=[str(data)], image_folder_list=[str(tmp_path)], strict_data=False)
    # Qwen3-VL budget (factor 32): round(720 / 32) = 22 -> 704 rows, 1280 / 32 = 40 -> 1280 columns
    qwen3 = PixelBudget.published("test", factor=32, min_pixels=65536, max_pixels=16777216)
    row = task(budget=qwen3).build_dataset(args, None, Module())[0]
    assert (row["adapter"], row["answer_frame"], row["image"].size) == ("qwen3-vl", "norm1000", (1280, 704))
    Module.model_type = "qwen2_5_vl"
    row = task().build_dataset(args, None, Module())[0]
    assert (row["adapter"], row["answer_frame"], row["image"].size) == ("gta1", "resized", (588, 336))
    row = task(GUIGroundingOptions(adapter="ui-tars-1.5")).build_dataset(args, None, Module())[0]
    assert row["adapter"] == "ui-tars-1.5" and row["prompt"][0]["content"].startswith("Output only the coordinate")
    assert GUIGroundingTask().sft_completion(row) == "(92,47)"


HOSTILE = [
    "",
    "\x00" * 100,
    "(" * 100_000,
    "[" * 100_000 + "1,2,3,4",
    '{"point_2d": [' * 20_000,
    "9" * 5000,
    '{"point_2d": [NaN, Infinity]}',
    '{"point_2d": [1e400, 5]}',
    "[[1e999, 2, 3, 4]]",
    "\ud800 (10,20)",
    "<box>[[" + ",".join(["1"] * 10_000) + "]]</box>",
    '```json\n[{"point_2d": [-5, -7]}]\n```',
    "(1" + "0" * 40 + ",2)",
    "[[3, 2, 1, 0]]",
]


@pytest.mark.parametrize("name", sorted(ADAPTERS))
def test_rewards_are_total_for_every_adapter(name):
    """Any completion gives one finite float for rows of every adapter (the rewards' totality rule)."""
    import math

    row, _ = _row(get_adapter(name))
    cols = {k: [v] * len(HOSTILE) for k, v in row.items() if k != "prompt"}
    for reward in (click_reward, distance_reward):
        values = reward(HOSTILE, **cols)
        assert len(values) == len(HOSTILE) and all(isinstance(v, float) and math.isfinite(v) for v in values)
    assert click_reward(HOSTILE, **cols)[-3] == 0.0  # a negative point is outside every target
