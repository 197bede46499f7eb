"""Task plugins: the upstream-compatible default task and the gui_grounding task's rows and frames."""

from __future__ import annotations

import json

from PIL import Image

from gui_grounding.training.task import GUIGroundingTask
from tests.helpers.records import task_script_args
from vlm_r1.modules import get_vlm_module, load_processor
from vlm_r1.upstream.tasks import DefaultTask


def test_default_task_reads_upstream_records(tmp_path, tiny_qwen25_dir):
    Image.new("RGB", (64, 48), "white").save(tmp_path / "a.png")
    Image.new("RGB", (64, 48), "black").save(tmp_path / "b.png")
    lines = [
        {
            "id": 7,
            "image": ["a.png", "b.png"],
            "conversations": [
                {"from": "human", "value": "<image><image>Which defect?"},
                {"from": "gpt", "value": "Operation No Response"},
            ],
        },
        {
            "image": "a.png",
            "conversations": [{"from": "human", "value": "<image>Box?"}, {"from": "gpt", "value": [1, 2, 30, 40]}],
            "accu_reward_method": "all_match",
        },
        "not json",
        {"image": "missing.png", "conversations": [{"from": "human", "value": "x"}, {"from": "gpt", "value": "y"}]},
    ]
    data = tmp_path / "d.jsonl"
    data.write_text("\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines) + "\n")
    module = get_vlm_module(tiny_qwen25_dir)
    ds = DefaultTask().build_dataset(
        task_script_args([str(data)], reward_method_list=["yes_no"], task_type="gui"),
        load_processor(tiny_qwen25_dir),
        module,
    )
    assert len(ds) == 2  # the unparseable line and the missing image are skipped (and logged with counts)
    row0, row1 = ds[0], ds[1]
    assert row0["prompt"][0]["content"] == module.get_question_template("gui").format(Question="Which defect?")
    assert row0["solution"] == "<answer> Operation No Response </answer>"
    assert row0["accu_reward_method"] == "yes_no" and row0["id"] == "7"
    # each image resized once by the run's pixel budget (the processor's own, here: 3136 .. 200704, factor 28):
    # 64x48 = 3,072 px < min_pixels 3,136, so both sides round up to 56, exactly what the processor would do
    assert [im.size for im in row0["images"]] == [(56, 56), (56, 56)]
    assert row1["solution"] == "<answer> [1, 2, 30, 40] </answer>"
    assert row1["accu_reward_method"] == "all_match"  # per-line value wins over --reward_method


def test_default_task_question_and_solution_follow_upstream_exactly(tmp_path, tiny_qwen25_dir):
    """upstream grpo_jsonl.py:979-987 (at 90052f4): problem = human.replace('<image>', '') and nothing else; a string gpt value
    loses its answer tags and is stripped, any other value is str()-ed."""
    Image.new("RGB", (64, 48), "white").save(tmp_path / "a.png")
    cases = [
        ("<image>\n  Which   defect?\n", "A", "\n  Which   defect?\n", "A"),
        ("<image>x<image> y ", "  <answer> spaced </answer>  ", "x y ", "spaced"),
        ("no tag", {"a": 1, "b": [1.5, None]}, "no tag", "{'a': 1, 'b': [1.5, None]}"),  # str(), not json.dumps
        ("q", True, "q", "True"),
        ("q", None, "q", "None"),
        ("q", 2.50, "q", "2.5"),
        ("q", [1, 2.0, 30, 40], "q", "[1, 2.0, 30, 40]"),
        ("", "", "", ""),
    ]
    lines = [
        {"image": "a.png", "conversations": [{"from": "human", "value": human}, {"from": "gpt", "value": gpt}]}
        for human, gpt, _, _ in cases
    ]
    (tmp_path / "d.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    module = get_vlm_module(tiny_qwen25_dir)
    ds = DefaultTask().build_dataset(
        task_script_args([str(tmp_path / "d.jsonl")]), load_processor(tiny_qwen25_dir), module
    )
    rows = ds.with_format(None).to_list()
    template = module.get_question_template(None)
    assert [r["problem"] for r in rows] == [c[2] for c in cases]
    assert [r["prompt"] for r in rows] == [[{"role": "user", "content": template.format(Question=c[2])}] for c in cases]
    assert [r["solution"] for r in rows] == [f"<answer> {c[3]} </answer>" for c in cases]


def test_gui_task_rows_resize_once_into_the_prompt_frame(tmp_path, tiny_qwen25_dir):
    Image.new("RGB", (1280, 720), "white").save(tmp_path / "s.png")
    rec = {
        "instruction": "Click menu",
        "image_path": "s.png",
        "target_bbox": [
            {"x_min": 12, "y_min": 10, "x_max": 42, "y_max": 40},
            {"x_min": 640, "y_min": 360, "x_max": 1279, "y_max": 719},
        ],
    }
    (tmp_path / "d.jsonl").write_text(json.dumps(rec) + "\n")
    processor = load_processor(tiny_qwen25_dir)  # max_pixels 200704 -> 1280x720 becomes 588x336
    ds = GUIGroundingTask().build_dataset(
        task_script_args([str(tmp_path / "d.jsonl")]), processor, get_vlm_module(tiny_qwen25_dir)
    )
    row = ds[0]
    assert row["resized_size"] == [588, 336] and row["image_size"] == [1280, 720]
    assert row["image"].size == (588, 336)
    assert "The image resolution is height 336 and width 588." in row["prompt"][0]["content"]
    assert row["prompt"][1] == {"role": "user", "content": "Click menu"}
    sx, sy = 588 / 1280, 336 / 720
    assert row["target_boxes_resized"] == [
        [12 * sx, 10 * sy, 42 * sx, 40 * sy],
        [640 * sx, 360 * sy, 1279 * sx, 719 * sy],
    ]
    # the processor sees the pre-resized image unchanged: grid * patch = resized size
    batch = processor(text=["<|vision_start|><|image_pad|><|vision_end|>"], images=[row["image"]], return_tensors="pt")
    t, h, w = batch["image_grid_thw"][0].tolist()
    assert (w * 14, h * 14) == (588, 336)


def test_images_load_in_their_displayed_frame(tmp_path):
    """EXIF orientation 6 (stored landscape, displayed portrait): the pixels fed to the model are the displayed ones,
    as sizes and boxes are read (groundwork.validate); upstream VLM-R1 and GTA1 ignore the tag."""
    from groundwork.pixel_budget import PixelBudget
    from groundwork.validate import ImageChecker
    from vlm_r1.tasks import load_images_transform

    im = Image.new("RGB", (200, 100), (255, 0, 0))
    im.paste((0, 0, 255), (100, 0, 200, 100))
    exif = Image.Exif()
    exif[0x0112] = 6
    im.save(tmp_path / "r.jpg", exif=exif.tobytes(), quality=95)
    path = str(tmp_path / "r.jpg")
    assert ImageChecker("header").check(path) == (100, 200) == ImageChecker("decode").check(path)
    (loaded,) = load_images_transform()({"image_path": [path]})["image"]
    assert loaded.size == (100, 200)
    assert loaded.getpixel((50, 5))[0] > 200 and loaded.getpixel((50, 195))[2] > 200  # stored left half on top
    budget = PixelBudget.published("test", factor=28, min_pixels=3136, max_pixels=200_704)
    (resized,) = load_images_transform(budget)({"image_path": [path]})["image"]
    assert resized.size == (112, 196)  # smart_resize of the displayed 100x200: round(100/28)*28, round(200/28)*28


def test_ic_and_od_length_question_templates_are_upstreams():
    """Upstream's Qwen templates per task type (qwen_module.py:70-85 at 90052f4; checked against that file's
    get_question_template when written): ``ic`` puts the instruction after the question, ``odLength`` before it."""
    from vlm_r1.modules.qwen import Qwen2VLModule

    ic = Qwen2VLModule.get_question_template("ic")
    od = Qwen2VLModule.get_question_template("odLength")
    assert ic.startswith("{Question} First thinks about the reasoning process in the mind") and ic.endswith(
        "<answer> json format answer here </answer>"
    )
    assert od.startswith("First thinks about the reasoning process") and od.endswith(
        "<answer> answer here </answer>\n{Question}"
    )
    assert Qwen2VLModule.get_question_template("gui") == Qwen2VLModule.get_question_template(None) != ic
