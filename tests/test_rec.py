"""``--task_type rec``: upstream VLM-R1's REC task on our core (RECTask, rec_iou / rec_format rewards, geometry).

Frames: the tiny Qwen2.5-VL processor has factor 28 and max_pixels 200704, so a 1280x720 screenshot is seen at 588x336
(x scale 1280/588 = 320/147, y scale 720/336 = 15/7) and a 1024x768 one at 504x364 (x 128/63, y 192/91). Predicted
boxes below are picked so that the resize-back lands on whole pixels and every IoU can be checked by hand.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from groundwork.geometry import Frame, box_iou, smart_resize
from tests.helpers.paths import REPO, SAMPLE
from tests.helpers.proc import child_env, run
from tests.helpers.train import tiny_train_argv
from vlm_r1 import answers
from vlm_r1 import rewards as vr
from vlm_r1.grpo import build_rewards
from vlm_r1.modules import Qwen2VLModule, get_vlm_module, load_processor
from vlm_r1.tasks import get_task
from vlm_r1.upstream import rewards as ur
from vlm_r1.upstream.tasks import DefaultTask, RECTask, parse_rec_gt

W720 = dict(image_size=[1280, 720], resized_size=[588, 336])


def _c(text: str) -> list[dict]:
    return [{"role": "assistant", "content": text}]


def _iou(text: str, gt, image_size=(1280, 720), resized_size=(588, 336)) -> float:
    return ur.iou_reward(
        [_c(text)], gt_bbox=[list(gt)], image_size=[list(image_size)], resized_size=[list(resized_size)]
    )[0]


# --------------------------------------------------------------------------------------------------------------------
# one geometry for the project


def test_gui_grounding_frames_reexports_vlm_r1_geometry():
    from gui_grounding.models import frames

    assert frames.box_iou is box_iou and frames.Frame is Frame and frames.smart_resize is smart_resize
    assert frames.Box is not None and frames.Point is not None
    assert smart_resize(720, 1280, factor=28, min_pixels=3136, max_pixels=200_704) == (336, 588)


def test_vlm_r1_never_imports_gui_grounding():
    code = (
        "import sys, groundwork.geometry, vlm_r1.rewards, vlm_r1.tasks, vlm_r1.modules, vlm_r1.grpo_jsonl; "
        "bad = sorted(m for m in sys.modules if m.startswith('gui_grounding')); assert not bad, bad"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_box_iou_continuous_values():
    assert box_iou((0, 0, 10, 10), (5, 0, 15, 10)) == 50 / 150
    assert box_iou((0, 0, 10, 10), (0, 0, 10, 10)) == 1.0
    assert box_iou((0, 0, 10, 10), (10, 0, 20, 10)) == 0.0  # touching edges
    assert box_iou((10, 10, 0, 0), (0, 0, 10, 10)) == 0.0  # inverted box overlaps nothing
    assert box_iou((5, 5, 5, 5), (5, 5, 5, 5)) == 0.0  # zero union


# --------------------------------------------------------------------------------------------------------------------
# rec_iou (upstream Qwen iou_reward): IoU value in original pixels after the resize-back


def test_iou_reward_resizes_the_answer_back_to_original_pixels():
    frame = Frame(1280, 720, 588, 336)
    assert frame.box_to_original((147, 70, 294, 140)) == (320.0, 150.0, 640.0, 300.0)
    # answer [147,70,294,140] in the 588x336 frame is [320,150,640,300] in the 1280x720 original
    assert _iou("<think>t</think><answer>[147, 70, 294, 140]</answer>", (320, 150, 640, 300)) == 1.0
    # read in the wrong (original) frame, the same answer would not even overlap the GT
    assert box_iou((147, 70, 294, 140), (320, 150, 640, 300)) == 0.0
    # half-shifted GT: inter 160*150 = 24000, union 2*48000 - 24000 = 72000 -> 1/3 (the IoU value, not thresholded)
    assert _iou('<answer>{"bbox_2d": [147, 70, 294, 140], "label": "x"}</answer>', (480, 150, 800, 300)) == 1 / 3


def test_iou_reward_on_web_sample_boxes():
    # data/web_sample/test.jsonl line 1: "index" link [1220, 21, 1253, 36] on a 1280x720 screenshot (area 33*15 = 495)
    # answer [441, 7, 588, 21] -> original [960, 15, 1280, 45] (area 320*30 = 9600) contains it: 495 / 9600
    assert _iou("<answer>[441, 7, 588, 21]</answer>", (1220, 21, 1253, 36)) == 495 / 9600 == 0.0515625
    # the same page at 1024x768 (seen at 504x364): "index" [964, 21, 997, 36]; answer [441, 0, 504, 91] ->
    # original [896, 0, 1024, 192] (area 128*192 = 24576): 495 / 24576
    assert _iou("<answer>[441,0,504,91]</answer>", (964, 21, 997, 36), (1024, 768), (504, 364)) == 495 / 24576


def test_iou_reward_parse_rules_first_answer_first_box():
    gt = (320, 150, 640, 300)
    good = "[147, 70, 294, 140]"
    assert _iou(f"<answer>{good} then [0, 0, 1, 1]</answer>", gt) == 1.0  # first bbox in the answer
    assert _iou(f"<answer>[0, 0, 1, 1]</answer> <answer>{good}</answer>", gt) == 0.0  # first answer block only
    assert _iou('<answer>\n{"bbox_2d": [147,70,294,140]}\n</answer>', gt) == 1.0  # multi-line answer


@pytest.mark.parametrize(
    "text",
    [
        "",
        "[147, 70, 294, 140]",  # no answer block
        "<think>[147, 70, 294, 140]</think><answer>none</answer>",  # bbox outside the answer
        "<answer>[147, 70, 294, 140]",  # unclosed answer
        "<answer>[147.0, 70, 294, 140]</answer>",  # decimals do not match (upstream: integers only)
        "<answer>[-147, 70, 294, 140]</answer>",  # negative numbers do not match
        "<answer>[147, 70, 294]</answer>",  # three numbers
        "<answer>[147 , 70, 294, 140]</answer>",  # space before a comma
        "<answer>[294, 140, 147, 70]</answer>",  # inverted box: no area, no overlap
        "<answer>[99999999999999999999, 0, 1, 1]</answer>",  # absurd numbers still score (0), never raise
    ],
)
def test_iou_reward_malformed_answers_score_zero(text):
    assert _iou(text, (320, 150, 640, 300)) == 0.0


def test_iou_reward_sub_pixel_overlap_differs_from_upstream_convention():
    # upstream's iou() applies -1/+1 to the intersection only: the area is the same continuous one, but an overlap
    # of <= 1 px on an axis counts as 0 there. Ours is the one continuous box_iou: 1*10 / (100 + 110 - 10) = 0.05.
    assert _iou("<answer>[9, 0, 20, 10]</answer>", (0, 0, 10, 10), (588, 336), (588, 336)) == 0.05


def test_iou_reward_batch_and_missing_columns():
    out = ur.iou_reward(
        [_c("<answer>[147, 70, 294, 140]</answer>"), "<answer>[0, 0, 1, 1]</answer>"],
        gt_bbox=[[320, 150, 640, 300]] * 2,
        image_size=[[1280, 720]] * 2,
        resized_size=[[588, 336]] * 2,
    )
    assert out == [1.0, 0.0]
    with pytest.raises(ValueError, match=r"needs the columns \['image_size', 'resized_size'\] that --task_type rec"):
        ur.iou_reward([_c("x")], gt_bbox=[[0, 0, 1, 1]], solution=["<answer> [0, 0, 1, 1] </answer>"])


# --------------------------------------------------------------------------------------------------------------------
# rec_format (upstream Qwen format_reward_rec)


@pytest.mark.parametrize(
    "text, expected",
    [
        ('<think>a</think><answer>{"bbox_2d": [1, 2, 3, 4]}</answer>', 1.0),
        ('<think>a\nb</think>\n\n<answer>\n{"bbox_2d": [1,2,3,4], "label": "dog"}\n</answer>', 1.0),
        ('preamble <think>a</think> <answer>{"bbox": [10, 20, 30, 40]}</answer> trailing', 1.0),  # search, not full
        ("<think>a</think><answer>[1, 2, 3, 4]</answer>", 0.0),  # no JSON object braces
        ('<think>a</think><answer>{"bbox_2d": [1.5, 2, 3, 4]}</answer>', 0.0),  # decimals
        ('<think>a</think><answer>{"bbox_2d": [1, 2, 3]}</answer>', 0.0),  # three numbers
        ('<answer>{"bbox_2d": [1, 2, 3, 4]}</answer>', 0.0),  # no think block
        ('<answer>{"bbox_2d": [1, 2, 3, 4]}</answer><think>a</think>', 0.0),  # wrong order
        ('<think>a</think> x <answer>{"bbox_2d": [1, 2, 3, 4]}</answer>', 0.0),  # text between the blocks
        ('<think>a</think><answer>{"bbox_2d": [1, 2, 3, 4]}', 0.0),  # unclosed answer
        ("", 0.0),
    ],
)
def test_format_reward_rec_cases(text, expected):
    assert ur.format_reward_rec([_c(text)]) == [expected]
    assert ur.format_reward_rec([text]) == [expected]  # plain-string completions too


# --------------------------------------------------------------------------------------------------------------------
# reward selection: rec task aliases, the module path, registry names


def _args(**kw):
    base = dict(reward_funcs=None, is_reward_customized_from_vlm_module=False, task_type="rec")
    base.update(kw)
    return SimpleNamespace(**base)


def test_rec_rewards_resolve_the_same_three_ways():
    rec, module = get_task("rec"), Qwen2VLModule("qwen2_5_vl")
    assert type(rec) is RECTask
    expected = [ur.iou_reward, ur.format_reward_rec]
    assert build_rewards(_args(), rec, module) == expected  # the task's defaults
    assert build_rewards(_args(reward_funcs=["accuracy", "format"]), rec, module) == expected
    assert build_rewards(_args(is_reward_customized_from_vlm_module=True), rec, module) == expected  # upstream path
    assert build_rewards(_args(reward_funcs=["rec_iou", "rec_format"]), rec, module) == expected
    assert [f.__name__ for f in expected] == ["iou_reward", "format_reward_rec"]  # upstream's logged names
    assert module.iou_reward is ur.iou_reward and module.format_reward_rec is ur.format_reward_rec
    # other tasks keep the generic names
    assert build_rewards(_args(task_type=None), DefaultTask(), module) == [ur.accuracy_reward, ur.format_reward]
    assert vr.available_rewards()["rec_iou"] == vr.available_rewards()["rec_format"] == "builtin"


def test_module_reward_path_rejects_other_tasks_and_names():
    module = Qwen2VLModule("qwen2_5_vl")
    with pytest.raises(ValueError, match=r"no Qwen-specific reward 'accuracy' for task_type 'gui'"):
        build_rewards(_args(is_reward_customized_from_vlm_module=True, task_type="gui"), DefaultTask(), module)
    with pytest.raises(ValueError, match=r"no Qwen-specific reward 'length' for task_type 'rec'"):
        module.select_reward_func("length", "rec")


# --------------------------------------------------------------------------------------------------------------------
# RECTask: records -> rows, bad records skipped and counted (or strict error naming file:line)


def test_parse_rec_gt_forms_and_errors():
    assert parse_rec_gt([1, 2, 3, 4]) == [1.0, 2.0, 3.0, 4.0]
    assert parse_rec_gt("[1.5, 2, 3, 4]") == [1.5, 2.0, 3.0, 4.0]
    assert parse_rec_gt("<answer> [1, 2, 3, 4] </answer>") == [1.0, 2.0, 3.0, 4.0]
    for bad, msg in [
        ("x1 y1", "is not JSON"),
        ([1, 2, 3], "list of 4 numbers"),
        ([1, 2, 3, "4"], "list of 4 numbers"),
        ([True, 2, 3, 4], "list of 4 numbers"),
        ({"bbox_2d": [1, 2, 3, 4]}, "list of 4 numbers"),
        ([1, 2, 1, 4], "no area"),
        ([1, 5, 3, 4], "no area"),
        ([0, 0, float("inf"), 4], "non-finite"),
        ("[0, 0, NaN, 4]", "non-finite"),
    ]:
        with pytest.raises(ValueError, match=msg):
            parse_rec_gt(bad)


def _sample_boxes() -> dict[str, tuple[str, list[int]]]:
    """Instruction -> (image path relative to data/web_sample, [x1, y1, x2, y2]) for the first records of test.jsonl."""
    out = {}
    with open(os.path.join(SAMPLE, "test.jsonl"), encoding="utf-8") as f:
        for line in f:
            rec = json.loads(line)
            b = rec["target_bbox"]
            out.setdefault(rec["image_path"], []).append(
                (rec["instruction"], [b["x_min"], b["y_min"], b["x_max"], b["y_max"]])
            )
    return out


def _rec_line(image, question, gt, **extra):
    return json.dumps(
        {
            "image": image,
            "conversations": [{"from": "human", "value": f"<image>{question}"}, {"from": "gpt", "value": gt}],
            **extra,
        }
    )


@pytest.fixture
def rec_jsonl(tmp_path):
    """6 good REC records on committed screenshots (both viewports) + 8 bad lines; images relative to SAMPLE."""
    boxes = _sample_boxes()
    wide = "images/installing-index__1280x720.png"
    narrow = "images/installing-index__1024x768.png"
    (q0, b0), (q1, b1), (q2, b2) = boxes[wide][:3]
    (q3, b3), (q4, b4) = boxes[narrow][:2]
    lines = [
        _rec_line(wide, q0, b0, id="w0"),
        _rec_line([wide], q1, json.dumps(b1), id="w1"),  # one-element image list, GT as a JSON string
        _rec_line(wide, q2, f"<answer>{json.dumps(b2)}</answer>"),  # GT string with answer tags, no id
        _rec_line(narrow, q3, b3, id="n0"),
        _rec_line(narrow, q4, [b4[0] + 0.5, b4[1], b4[2], b4[3]], id="n1"),  # float GT
        _rec_line(wide, "Box of the top bar", [0, 0, 1280, 60], id="w-top"),
        "not json",  # unparseable_record
        json.dumps({"image": wide, "conversations": [{"from": "human", "value": "q"}]}),  # unparseable_record
        _rec_line([wide, narrow], "two images", b0),  # needs_one_image
        _rec_line(None, "no image", b0),  # needs_one_image
        _rec_line("images/no_such.png", "missing", b0),  # missing_image
        _rec_line(wide, "bad gt json", "[1, 2, 3"),  # bad_gt_box (upstream: json.loads crash mid-training)
        _rec_line(wide, "bad gt shape", [1, 2, 3]),  # bad_gt_box
        _rec_line(wide, "zero-area gt", [5, 5, 5, 9]),  # bad_gt_box
    ]
    path = tmp_path / "rec.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return str(path), [b0, b1, b2, b3, [b4[0] + 0.5, b4[1], b4[2], b4[3]], [0, 0, 1280, 60]], [q0, q1, q2, q3, q4]


def _task_args(files, **kw):
    base = dict(
        data_file_list=files,
        image_folder_list=[SAMPLE] * len(files),
        reward_method_list=None,
        strict_data=False,
        task_type="rec",
        prompt_mode="non_thinking",
    )
    base.update(kw)
    return SimpleNamespace(**base)


def test_rec_task_rows_and_skip_counts(rec_jsonl, tiny_qwen25_dir, caplog):
    path, gts, questions = rec_jsonl
    processor, module = load_processor(tiny_qwen25_dir), get_vlm_module(tiny_qwen25_dir)
    with caplog.at_level(logging.WARNING, logger="vlm_r1.tasks"):
        ds = RECTask().build_dataset(_task_args([path]), processor, module)
    assert (
        "rec: skipped records: {'unparseable_record': 2, 'needs_one_image': 2, 'missing_image': 1, "
        "'bad_gt_box': 3} (kept 6)"
    ) in caplog.text
    assert len(ds) == 6
    assert [r["gt_bbox"] for r in ds.with_format(None)] == [[float(v) for v in b] for b in gts]
    assert [r["id"] for r in ds.with_format(None)] == ["w0", "w1", f"{path}:3", "n0", "n1", "w-top"]
    row0, row3 = ds[0], ds[3]
    template = module.get_question_template("rec")
    assert template.endswith("<answer> </answer> tags. Output the final answer in JSON format.")
    assert row0["prompt"] == [{"role": "user", "content": template.format(Question=questions[0])}]
    assert row0["problem"] == questions[0] and "<image>" not in row0["problem"]
    assert row0["solution"] == f"<answer> {json.dumps([float(v) for v in gts[0]])} </answer>"
    assert row0["image_path"] == os.path.join(SAMPLE, "images/installing-index__1280x720.png")
    assert (row0["image_size"], row0["resized_size"]) == ([1280, 720], [588, 336])
    assert (row3["image_size"], row3["resized_size"]) == ([1024, 768], [504, 364])
    # resized once by the run's budget to exactly the size the processor would pick itself (upstream lets the
    # processor resize the original): 1280x720 under 3136 .. 200704 -> 588x336
    assert row0["image"].size == (588, 336)
    # the resized size written in the row is exactly the frame the processor produces (grid * patch size 14)
    for row in (row0, row3):
        batch = processor(
            text=["<|vision_start|><|image_pad|><|vision_end|>"], images=[row["image"]], return_tensors="pt"
        )
        _, h, w = batch["image_grid_thw"][0].tolist()
        assert [w * 14, h * 14] == row["resized_size"]
    # the rows feed the rewards directly: a perfect answer in the resized frame scores 1.0 for every row
    rows = ds.with_format(None).to_list()
    answers = []
    for r in rows:
        sx, sy = r["resized_size"][0] / r["image_size"][0], r["resized_size"][1] / r["image_size"][1]
        box = [round(v * s) for v, s in zip(r["gt_bbox"], (sx, sy, sx, sy), strict=True)]
        answers.append(_c(f"<answer>{json.dumps(box)}</answer>"))
    scores = ur.iou_reward(answers, **{k: [r[k] for r in rows] for k in ("gt_bbox", "image_size", "resized_size")})
    # the top bar [0, 0, 1280, 60] -> [0, 0, 588, 28] exactly; the small links lose a little to integer rounding
    assert scores[5] == 1.0 and all(0.7 < s <= 1.0 for s in scores), scores


def test_rec_task_strict_names_file_and_line(tmp_path, tiny_qwen25_dir):
    good = _rec_line("images/installing-index__1280x720.png", "q", [1, 2, 3, 4])
    path = tmp_path / "strict.jsonl"
    path.write_text(good + "\n\n" + _rec_line("images/installing-index__1280x720.png", "q", "[1, 2") + "\n")
    processor, module = load_processor(tiny_qwen25_dir), get_vlm_module(tiny_qwen25_dir)
    with pytest.raises(ValueError, match=rf"^{path}:3: bad_gt_box: gt box '\[1, 2' is not JSON"):
        RECTask().build_dataset(_task_args([str(path)], strict_data=True), processor, module)
    path.write_text(_rec_line("images/installing-index__1280x720.png", "q", [1, 2, 1, 4]) + "\n")
    with pytest.raises(ValueError, match=r"no usable REC records .*'bad_gt_box': 1"):
        RECTask().build_dataset(_task_args([str(path)]), processor, module)


def test_rec_task_unreadable_and_degenerate_images(tmp_path, tiny_qwen25_dir, make_image):
    (tmp_path / "corrupt.png").write_bytes(b"not a png")
    make_image(20, 20, "tiny.png")  # under min_pixels: smart_resize scales it up to 56x56, so it is kept
    make_image(6000, 28, "thin.png")  # aspect ratio 214 > 200: the family's limit (smart_resize's) rejects it
    make_image(10, 40, "under_a_patch.png")  # a side under one 14-px vision patch: rejected before step 1
    make_image(100, 60, "ok.png")
    path = tmp_path / "d.jsonl"
    names = ("corrupt.png", "corrupt.png", "tiny.png", "thin.png", "under_a_patch.png", "ok.png")
    path.write_text("\n".join(_rec_line(n, "q", [1, 2, 8, 9]) for n in names) + "\n")
    processor, module = load_processor(tiny_qwen25_dir), get_vlm_module(tiny_qwen25_dir)
    ds = RECTask().build_dataset(_task_args([str(path)], image_folder_list=None), processor, module)
    rows = ds.with_format(None).to_list()
    assert [(r["image_size"], r["resized_size"]) for r in rows] == [([20, 20], [56, 56]), ([100, 60], [112, 56])]
    with pytest.raises(ValueError, match=r"d.jsonl:1: unreadable_image: unreadable image .*corrupt.png"):
        RECTask().build_dataset(_task_args([str(path)], image_folder_list=None, strict_data=True), processor, module)
    path.write_text(_rec_line("thin.png", "q", [1, 2, 8, 9]) + "\n")
    with pytest.raises(
        ValueError, match=r"d.jsonl:1: image_unsupported: .*aspect ratio 214.3:1 is over the qwen2_5_vl"
    ):
        RECTask().build_dataset(_task_args([str(path)], image_folder_list=None, strict_data=True), processor, module)


# --------------------------------------------------------------------------------------------------------------------
# REC annotation records (upstream grpo_rec.py / rec_jsons_processed/*.json): {image, problem, solution, ...}

REFCOCO = os.path.join(REPO, "tests", "fixtures", "datasets", "vlm_r1", "refcoco_sample.json")
COCO_98304, COCO_9 = "train2014/COCO_train2014_000000098304.jpg", "train2014/COCO_train2014_000000000009.jpg"


@pytest.fixture
def coco_root(tmp_path):
    """Image root with the two JPEGs refcoco_sample.json refers to (640x480 and 480x640)."""
    from PIL import Image

    for name, size in ((COCO_98304, (640, 480)), (COCO_9, (480, 640))):
        os.makedirs(tmp_path / "coco" / "train2014", exist_ok=True)
        Image.new("RGB", size, (90, 140, 200)).save(tmp_path / "coco" / name, format="JPEG")
    return str(tmp_path / "coco")


def test_rec_task_reads_rec_annotation_json(coco_root, tiny_qwen25_dir, caplog):
    processor, module = load_processor(tiny_qwen25_dir), get_vlm_module(tiny_qwen25_dir)
    with caplog.at_level(logging.WARNING, logger="vlm_r1.tasks"):
        ds = RECTask().build_dataset(_task_args([REFCOCO], image_folder_list=[coco_root]), processor, module)
    assert "rec: skipped records: {'missing_key': 2, 'missing_image': 1, 'bad_gt_box': 1} (kept 4)" in caplog.text
    assert (
        f"rec: first missing_key: {REFCOCO}:[3]: missing key 'solution' (a REC record needs 'conversations'"
        in caplog.text
    )
    rows = ds.with_format(None).to_list()
    # record 5's box lies partly outside its image: upstream REC trains on it as it is (the IoU is computed anyway)
    assert [r["id"] for r in rows] == [f"{REFCOCO}:[{i}]" for i in (0, 1, 2, 5)]
    assert [r["gt_bbox"] for r in rows] == [
        [12.5, 30.0, 210.25, 400.75],
        [300.0, 20.0, 639.0, 479.0],
        [0.0, 0.0, 480.0, 320.5],
        [600.0, 400.0, 700.0, 500.0],
    ]
    template = module.get_question_template("rec")
    # the problem text is used unchanged (upstream grpo_rec.py: QUESTION_TEMPLATE.format(Question=example["problem"]))
    assert rows[1]["problem"] == "woman in red  on the right"
    assert rows[1]["prompt"] == [{"role": "user", "content": template.format(Question="woman in red  on the right")}]
    assert rows[0]["solution"] == "<answer> [12.5, 30.0, 210.25, 400.75] </answer>"
    assert rows[2]["solution"] == "<answer> [0.0, 0.0, 480.0, 320.5] </answer>"  # a solution string, parsed
    assert rows[0]["image_path"] == os.path.join(coco_root, COCO_98304)
    # 640x480 at max_pixels 200704, factor 28 -> 504x364 (as 1024x768 above); 480x640 -> 364x504
    assert [(r["image_size"], r["resized_size"]) for r in rows[1:3]] == [
        ([640, 480], [504, 364]),
        ([480, 640], [364, 504]),
    ]
    assert smart_resize(480, 640, factor=28, min_pixels=3136, max_pixels=200_704) == (364, 504)
    # extra keys pass through as columns (union of keys: None where a record lacks one)
    assert [r["normal_caption"] for r in rows] == ["man", "woman", "bowl", "car"]
    assert [r["normal_solution"] for r in rows] == [[12, 30, 210, 400], None, None, None]
    assert ds[0]["image"].size == (504, 364)  # 640x480 smart_resized under 3136 .. 200704 (the processor's frame)


def test_rec_annotation_and_conversation_forms_give_the_same_row(coco_root, tmp_path, tiny_qwen25_dir):
    box = [12.5, 30.0, 210.25, 400.75]
    rec_form = {"image": COCO_98304, "problem": "the man", "solution": box, "id": 3}
    conv_form = {
        "image": COCO_98304,
        "id": 3,
        "conversations": [{"from": "human", "value": "<image>the man"}, {"from": "gpt", "value": box}],
    }
    processor, module = load_processor(tiny_qwen25_dir), get_vlm_module(tiny_qwen25_dir)
    rows = []
    for name, rec in (("a.jsonl", rec_form), ("b.jsonl", conv_form)):
        (tmp_path / name).write_text(json.dumps(rec) + "\n")
        ds = RECTask().build_dataset(
            _task_args([str(tmp_path / name)], image_folder_list=[coco_root]), processor, module
        )
        rows.append(ds.with_format(None)[0])
    assert rows[0] == rows[1]
    assert rows[0]["id"] == "3" and rows[0]["problem"] == "the man"


@pytest.mark.parametrize(
    "record, reason, message",
    [
        ({"image": COCO_9, "problem": "p"}, "missing_key", "missing key 'solution' (a REC record needs"),
        ({"image": COCO_9, "solution": [1, 2, 3, 4]}, "missing_key", "missing key 'problem' ("),
        ({"problem": "p", "solution": [1, 2, 3, 4]}, "missing_key", "missing key 'image' ("),
        ({"normal_caption": "x"}, "missing_key", "missing keys 'image', 'problem', 'solution' ("),
        (
            {"image": COCO_9, "problem": 5, "solution": [1, 2, 3, 4]},
            "bad_question",
            "'problem' must be a string, got int",
        ),
        ({"image": [COCO_9, COCO_9], "problem": "p", "solution": [1, 2, 3, 4]}, "needs_one_image", "exactly one image"),
        ({"image": COCO_9, "problem": "p", "solution": [0, 0, 10**400, 4]}, "bad_gt_box", "non-finite"),
        ({"image": COCO_9, "problem": "p", "solution": "[0, 0, NaN, 4]"}, "bad_gt_box", "non-finite"),
        ({"image": COCO_9, "problem": "p", "solution": "[" * 50_000}, "bad_gt_box", "is not JSON"),
        ({"image": COCO_9, "problem": "p", "solution": {"bbox": [1, 2, 3, 4]}}, "bad_gt_box", "list of 4 numbers"),
        (
            {"image": COCO_9, "problem": "bad \ud800", "solution": [1, 2, 3, 4]},
            "bad_text",
            "question is not valid Unicode",
        ),
        (
            {"image": COCO_9, "conversations": [{"value": 3}, {"value": [1, 2, 3, 4]}]},
            "bad_question",
            "the question (conversations[0].value) must be a string, got int",
        ),
    ],
)
def test_rec_task_bad_records_name_the_problem(record, reason, message, coco_root, tmp_path, tiny_qwen25_dir, caplog):
    good = {"image": COCO_9, "problem": "ok", "solution": [1, 2, 3, 4]}
    path = tmp_path / "d.json"  # a JSON list, as rec_jsons_processed files are
    path.write_text(json.dumps([good, record, good]))
    processor, module = load_processor(tiny_qwen25_dir), get_vlm_module(tiny_qwen25_dir)
    with caplog.at_level(logging.WARNING, logger="vlm_r1.tasks"):
        ds = RECTask().build_dataset(_task_args([str(path)], image_folder_list=[coco_root]), processor, module)
    assert len(ds) == 2  # the neighbours are kept
    assert f"rec: skipped records: {{'{reason}': 1}} (kept 2)" in caplog.text
    assert f"rec: first {reason}: {path}:[1]: " in caplog.text and message in caplog.text
    with pytest.raises(ValueError, match=rf"^{path}:\[1\]: {reason}: ") as err:
        RECTask().build_dataset(
            _task_args([str(path)], image_folder_list=[coco_root], strict_data=True), processor, module
        )
    assert message in str(err.value)


# --------------------------------------------------------------------------------------------------------------------
# end to end: python -m vlm_r1.grpo_jsonl --task_type rec


@pytest.mark.slow  # ~16 s, a CLI training run (tests/test_train_pipeline.py::test_grpo_cli_two_steps keeps one)
def test_grpo_cli_rec_two_steps(rec_jsonl, tiny_qwen25_dir, tmp_path):
    path, _, _ = rec_jsonl
    out = str(tmp_path / "run")
    os.symlink(os.path.join(SAMPLE, "images"), tmp_path / "images")  # held-out images resolve next to the file
    rec = dict(task_type="rec", reward_funcs=("accuracy", "format"), per_device_train_batch_size=4, num_generations=4)
    held_out = dict(eval_data_file_paths=path, eval_strategy="steps", eval_steps=2, per_device_eval_batch_size=4)
    argv = tiny_train_argv(tiny_qwen25_dir, path, out, **rec, freeze_vision_modules=None, **held_out)
    cmd = [sys.executable, "-m", "vlm_r1.grpo_jsonl", *argv]
    proc = run(cmd, env=child_env(threads=1))
    assert "task_type rec: reward 'accuracy' resolves to 'rec_iou'" in proc.stderr
    assert "task_type rec: reward 'format' resolves to 'rec_format'" in proc.stderr
    assert "rec: skipped records: {'unparseable_record': 2, 'needs_one_image': 2" in proc.stderr
    with open(os.path.join(out, "vlm_r1_run.json")) as f:
        info = json.load(f)
    assert info["task_type"] == "rec" and info["num_train_rows"] == 6
    assert info["reward_funcs"] == ["iou_reward", "format_reward_rec"]
    assert info["smart_resize"] == {"factor": 28, "min_pixels": 3136, "max_pixels": 100352}
    with open(os.path.join(out, "trainer_state.json")) as f:
        logs = json.load(f)["log_history"]
    history = [h for h in logs if "loss" in h]
    assert [h["step"] for h in history] == [1, 2]
    for h in history:
        assert 0.0 <= h["rewards/iou_reward/mean"] <= 1.0 and 0.0 <= h["rewards/format_reward_rec/mean"] <= 1.0
    evals = [h for h in logs if "eval_rewards/iou_reward/mean" in h]
    assert [h["step"] for h in evals] == [2] and 0.0 <= evals[0]["eval_rewards/iou_reward/mean"] <= 1.0
    assert os.path.exists(os.path.join(out, "model.safetensors"))


# --------------------------------------------------------------------------------------------------------------------
# rewards are total and linear (issue 11): bounded numbers, unusable targets score 0, the upstream regexes' answers

_REF_ANSWER_RE = r"<answer>(.*?)</answer>"
_REF_FORMAT_RE = r"<think>.*?</think>\s*<answer>.*?</answer>"
_PIECES = [
    "<think>",
    "</think>",
    "<answer>",
    "</answer>",
    "{",
    "}",
    "[",
    "]",
    "1",
    "12",
    ",",
    ", ",
    " ",
    "\n",
    "\u00a0",
    "x",
    "[1,2,3,4]",
    "[1, 2,3,  4]",
    "-",
]


@settings(max_examples=3000, deadline=None)
@given(st.lists(st.sampled_from(_PIECES), max_size=14))
def test_linear_rec_and_format_rules_match_upstream_patterns(pieces):
    import re

    text = "".join(pieces)
    assert ur.has_rec_format(text) == bool(re.search(ur.REC_FORMAT_PATTERN, text, re.DOTALL))
    # upstream matches the completion as written, not stripped (vlm_r1.upstream.rewards.format_reward)
    assert ur.format_reward([text]) == [1.0 if re.fullmatch(_REF_FORMAT_RE, text, re.DOTALL) else 0.0]
    m = re.search(_REF_ANSWER_RE, text, re.DOTALL)
    assert answers.answer_blocks(text, 1) == ([m.group(1)] if m else [])
    box = re.search(r"\[(\d+),\s*(\d+),\s*(\d+),\s*(\d+)\]", m.group(1)) if m else None
    assert ur.extract_rec_box(text) == (tuple(int(v) for v in box.groups()) if box else None)


def test_rec_box_numbers_are_bounded():
    d12, d13 = "9" * 12, "1" * 13
    assert ur.extract_rec_box(f"<answer>[0, 0, {d12}, 5]</answer>") == (0, 0, int(d12), 5)
    assert ur.extract_rec_box(f"<answer>[0, 0, {d13}, 5] [1, 2, 3, 4]</answer>") is None  # the first bbox counts
    assert _iou("<answer>[0, 0, " + "9" * 155 + ", 5]</answer>", [0, 0, 10, 10]) == 0.0


@pytest.mark.parametrize(
    "gt, sizes",
    [
        ([float("nan"), 150, 800, 300], W720),
        ([480, 150, float("inf"), 300], W720),
        ([800, 150, 480, 300], W720),  # inverted
        ([480, 150, 800], W720),
        (None, W720),
        ([480, 150, 800, 300], dict(image_size=[0, 720], resized_size=[588, 336])),
        ([480, 150, 800, 300], dict(image_size=[1280, 720], resized_size=[float("nan"), 336])),
        ([480, 150, 800, 300], dict(image_size=[10**400, 720], resized_size=[588, 336])),
        ([480, 150, 800, 300], dict(image_size=None, resized_size="588x336")),
    ],
)
def test_rec_iou_unusable_targets_and_sizes_score_zero(gt, sizes):
    text = "<answer>[147, 70, 294, 140]</answer>"
    assert _iou(text, [480, 150, 800, 300]) == pytest.approx(1 / 3)  # the same answer on a usable row
    out = ur.iou_reward(
        [_c(text)], gt_bbox=[gt], image_size=[sizes["image_size"]], resized_size=[sizes["resized_size"]]
    )
    assert out == [0.0]


def test_box_iou_never_nan():
    nan, inf = float("nan"), float("inf")
    assert box_iou((0, 0, inf, 10), (0, 0, inf, 10)) == 0.0
    assert box_iou((nan, 0, 10, 10), (0, 0, 10, 10)) == 0.0
    assert box_iou((-inf, -inf, inf, inf), (0, 0, 10, 10)) == 0.0


def test_geometry_validators():
    from groundwork.geometry import finite_number, valid_box, valid_size

    assert finite_number(3) == 3.0 and finite_number(-1e12) == -1e12
    for bad in (float("nan"), float("inf"), 1e12 + 1, 10**400, True, "3", None, [3]):
        assert finite_number(bad) is None
    assert valid_box([0, 0, 10, 20]) == (0.0, 0.0, 10.0, 20.0)
    assert valid_box((5, 5, 5, 5)) == (5.0, 5.0, 5.0, 5.0)  # zero size is usable
    for bad in (
        [10, 0, 0, 20],
        [0, 20, 10, 0],
        [0, 0, 10],
        [0, 0, 10, 20, 30],
        [0, float("nan"), 1, 1],
        "0,0,1,1",
        None,
        7,
        {0: 1, 1: 1, 2: 2, 3: 2},
        {1, 2, 3, 4},
    ):
        assert valid_box(bad) is None
    assert valid_size([588, 336]) == (588.0, 336.0)
    for bad in ([0, 336], [588, -1], [0.5, 336], [float("inf"), 336], [588], [588, 336, 3], None, "588x336"):
        assert valid_size(bad) is None


def test_completion_text_is_total():
    assert ur.completion_text([{"role": "assistant", "content": "x"}]) == "x"
    assert (
        ur.completion_text([{"role": "assistant", "content": [{"type": "text", "text": "a"}, {"text": 3}, "b"]}]) == "a"
    )
    for odd in ([], None, [{"role": "assistant"}], [{"content": None}], [{"content": 5}], 7):
        assert ur.completion_text(odd) == ""


def test_accuracy_bounds_numbers_and_is_total():
    def acc(pred: str, sol) -> float:
        return ur.accuracy_reward([_c(pred)], solution=[sol])[0]

    d12 = "9" * 12
    assert acc(f"<answer>{d12}.0</answer>", f"<answer> {d12} </answer>") == 1.0  # numeric equality
    # upstream compares numbers with math_verify and float(): no digit bound, the same value scores 1.0
    assert acc("<answer>" + "1" * 13 + ".0</answer>", "<answer>" + "1" * 13 + "</answer>") == 1.0
    assert acc("<answer>" + "1" * 400 + "</answer>", "<answer>" + "1" * 400 + "</answer>") == 1.0  # same text
    # math_verify says 10^400 != 10^401, then upstream's float() overflows both to inf, and inf == inf (as upstream)
    assert acc("<answer>1e400</answer>", "<answer>1e401</answer>") == 1.0
    assert acc("<answer>nan</answer>", float("nan")) == 1.0  # the same text
    assert acc("<answer>5</answer>", 10**5000) == 0.0  # str() refuses this int: no crash
