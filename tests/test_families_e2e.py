"""Issue 13 "done when", per model family (Qwen3-VL, InternVL), end to end through the command lines:

1. a tiny random checkpoint (``gui-grounding make-tiny-model --arch ARCH``) trains 3 GRPO steps with
   ``python -m vlm_r1.grpo_jsonl --task_type gui_grounding`` on the first 4 records of the committed screenshots
   (data/web_sample/train.jsonl), and the run's rows are the family's adapter's (prompt, 0-1000 targets);
2. 3 SFT steps with ``python -m vlm_r1.sft --task_type gui_grounding`` on the same records, whose targets are the
   family's answer format;
3. both results reload (``vlm_r1.modules.load_model``) and are evaluated with ``gui-grounding eval --backend hf``,
   whose predictions name the family's adapter;
4. ``gui-grounding prompt --model CHECKPOINT`` picks the family's adapter and shows its request.

Hand-computed target (record ``about__1280x720:0``, 1280x720, box x 537..654, y 144..160 original pixels), on the
0-1000 grid (x / W * 1000, y / H * 1000): ``[419.53125, 200.0, 510.9375, 222.2...]``; centre ``(465.23..., 211.11...)``.
"""

from __future__ import annotations

import json
import os

import pytest
import torch
from safetensors.torch import load_file

from tests.helpers.paths import SAMPLE
from tests.helpers.proc import child_env, run_module
from tests.helpers.train import sample_subset, step_logs, tiny_sft_argv, tiny_train_argv

pytestmark = pytest.mark.slow  # ~3 minutes on 2 idle cores: two tiny models, 4 trainings, 4 evaluations

TEST_FILE = os.path.join(SAMPLE, "test.jsonl")
INSTRUCTION0 = 'Open the "reStructuredText" link'  # train.jsonl record 0
NORM1000_BOX0 = [419.53125, 200.0, 510.9375, 222.22222222222223]  # 537/1280, 144/720, 654/1280, 160/720 (x 1000)
EVAL_LIMIT = 3

# family -> adapter name, the user text of record 0 (no system prompt for either family), the SFT target of record 0
# (Qwen3-VL: the box centre as a JSON point_2d, rounded; InternVL: the box, each edge rounded), and the model class
QWEN3_REQUEST = (
    'Locate the UI element that matches the instruction "{}" in this screenshot. Output the point '
    'coordinates in JSON format like {{"point_2d": [x, y], "label": "element"}}.'
)
INTERNVL_REQUEST = "Please provide the bounding box coordinate of the region this sentence describes: <ref>{}</ref>"
FAMILIES = {
    "qwen3_vl": {
        "adapter": "qwen3-vl",
        "request": QWEN3_REQUEST,
        "sft_target0": '{"point_2d": [465, 211], "label": "element"}',
        "model_class": "Qwen3VLForConditionalGeneration",
        # gui-grounding prompt, 1920x1080 under the qwen3-vl budget: 1920x1088 (factor 32), one pad per 32x32 pixels
        "prompt_image_tokens": ("<|image_pad|>", 60 * 34),
        # the image sent under the runs' budget (factor 32, 3136 .. 100352): 1280x720 is over budget, scaled by
        # sqrt(921600 / 100352) = 3.03 and floored to multiples of 32: 13*32 x 7*32
        "sent0": [416, 224],
    },
    "internvl": {
        "adapter": "internvl",
        "request": INTERNVL_REQUEST,
        "sft_target0": f"<ref>{INSTRUCTION0}</ref><box>[[420, 200, 511, 222]]</box>",
        "model_class": "InternVLForConditionalGeneration",
        # 1920x1080, at most 2 tiles: a 2x1 grid + the thumbnail = 3 tiles of 256 context tokens
        "prompt_image_tokens": ("<IMG_CONTEXT>", 3 * 256),
        "sent0": [1280, 720],  # tiles: the original screenshot is sent (the processor tiles it)
    },
}
# InternVL: at most 2 tiles per image (1280x720 -> 2x1 grid + thumbnail = 3 tiles instead of 9 under the default 12).
# GRPO takes upstream's --max_anyres_num; SFT and the eval backend read the checkpoint's image processor, so the bound
# is also set there (max_patches, what InternVLModule.set_max_tiles sets and saves).
INTERNVL_MAX_TILES = 2


@pytest.fixture(scope="module", params=list(FAMILIES))
def family(request, tmp_path_factory):
    """``(arch, spec, tiny checkpoint dir, workdir)``; the checkpoint is built once per family through the CLI."""
    arch = request.param
    work = tmp_path_factory.mktemp(f"e2e_{arch}")
    out = str(work / "tiny")
    run_module(["gui_grounding.cli", "make-tiny-model", "--arch", arch, "--out", out])
    if arch == "internvl":
        path = os.path.join(out, "processor_config.json")
        with open(path) as f:
            cfg = json.load(f)
        assert cfg["image_processor"]["max_patches"] == 12  # InternVL3's default, as built
        cfg["image_processor"]["max_patches"] = INTERNVL_MAX_TILES
        with open(path, "w") as f:
            json.dump(cfg, f, indent=2)
    return arch, FAMILIES[arch], out, work


@pytest.fixture(scope="module")
def train4(tmp_path_factory):
    """The first 4 records of the committed sample (images resolved with --image_folders data/web_sample)."""
    return sample_subset(tmp_path_factory.mktemp("data") / "train4.jsonl", 4)


def _grpo_argv(model, data, out):
    own = dict(max_steps=3, per_device_train_batch_size=4, num_generations=4, max_completion_length=24, beta=0)
    return tiny_train_argv(model, data, out, **own, max_anyres_num=INTERNVL_MAX_TILES)


def _sft_argv(model, data, out):
    # InternVL SFT keeps the default --max_anyres_num 12: 9 tiles x 256 image tokens per screenshot, longer than TRL's
    # own max_length 1024, so this run also checks that SFT never truncates image tokens (VLMSFTConfig.max_length)
    own = dict(task_type="gui_grounding", image_folders=SAMPLE, per_device_train_batch_size=4, max_pixels=100352)
    return tiny_sft_argv(model, data, out, **own, freeze_vision_modules=True, seed=0, learning_rate="1e-3")


@pytest.fixture(scope="module")
def grpo_run(family, train4):
    arch, _, model, work = family
    out, log = str(work / "grpo"), str(work / "rollouts.txt")
    proc = run_module(
        ["vlm_r1.grpo_jsonl", *_grpo_argv(model, train4, out)],
        env=child_env(DEBUG_MODE="true", LOG_PATH=log),
        check=False,
    )
    return out, log, proc


def _check_grpo_ran(arch, proc):
    assert proc.returncode == 0, proc.stderr[-4000:]


@pytest.fixture(scope="module")
def sft_run(family, train4):
    _, _, model, work = family
    out = str(work / "sft")
    proc = run_module(["vlm_r1.sft", *_sft_argv(model, train4, out)])
    return out, proc


def _rows(task, script_args, model):
    """The rows the run built: the same task call with the run's parsed arguments and processor."""
    from vlm_r1.modules import get_vlm_module

    module = get_vlm_module(model)
    processor = module.load_processor(model, min_pixels=script_args.min_pixels, max_pixels=script_args.max_pixels)
    return task.build_dataset(script_args, processor, module).with_format(None).to_list()


def _check_row0(rows, spec):
    assert [r["adapter"] for r in rows] == [spec["adapter"]] * 4
    assert [r["answer_frame"] for r in rows] == ["norm1000"] * 4
    row = rows[0]
    assert (row["sample_id"], row["instruction"]) == ("about__1280x720:0", INSTRUCTION0)
    assert row["prompt"] == [{"role": "user", "content": spec["request"].format(INSTRUCTION0)}]
    assert (row["image_size"], row["resized_size"]) == ([1280, 720], spec["sent0"])  # sent under the run's budget
    assert row["answer_size"] == [1000, 1000]
    assert row["target_boxes"] == [[537, 144, 654, 160]]
    assert row["target_boxes_answer"] == [pytest.approx(NORM1000_BOX0, rel=1e-12)]


def _check_trained(initial, out, spec):
    """The saved result differs from the initial weights in the language model only, and reloads as the family."""
    from vlm_r1.modules import load_model

    before = load_file(os.path.join(initial, "model.safetensors"))
    after = load_file(os.path.join(out, "model.safetensors"))
    assert before.keys() == after.keys()
    vision = [k for k in before if "visual" in k or "vision_tower" in k or "multi_modal_projector" in k]
    assert vision and all(torch.equal(before[k], after[k]) for k in vision), "frozen vision tower changed"
    assert any(not torch.equal(before[k], after[k]) for k in before if k not in vision), "no weight changed"
    model, info = load_model(out, output_loading_info=True)  # from_pretrained's report: every saved tensor was used
    assert type(model).__name__ == spec["model_class"]
    assert (info["missing_keys"], info["unexpected_keys"], info["mismatched_keys"]) == (set(), set(), set()), info


def _check_eval(model_dir, out, spec):
    run_module(
        [
            "gui_grounding.cli",
            "eval",
            "--backend",
            "hf",
            "--data",
            TEST_FILE,
            "--model",
            model_dir,
            "--out",
            out,
            "--limit",
            str(EVAL_LIMIT),
            "--batch-size",
            str(EVAL_LIMIT),
            "--max-new-tokens",
            "8",
        ]
    )
    with open(TEST_FILE) as f:
        expected = [json.loads(line) for line in f if line.strip()][:EVAL_LIMIT]
    with open(os.path.join(out, "predictions.jsonl")) as f:
        preds = [json.loads(line) for line in f]
    assert [p["sample_id"] for p in preds] == [r["sample_id"] for r in expected]  # one line per sample
    assert [p["adapter"] for p in preds] == [spec["adapter"]] * EVAL_LIMIT
    assert [p["prompt"] for p in preds] == [
        f"user: <image>{spec['request'].format(r['instruction'])}" for r in expected
    ]
    with open(os.path.join(out, "metrics.json")) as f:
        overall = json.load(f)["overall"]
    assert overall["num_total"] == EVAL_LIMIT
    assert overall["num_correct"] == sum(
        p["point"] is not None and _inside(p["point"], r) for p, r in zip(preds, expected, strict=True)
    )


def _inside(point, record):
    b = record["target_bbox"]
    return b["x_min"] <= point[0] <= b["x_max"] and b["y_min"] <= point[1] <= b["y_max"]


# --------------------------------------------------------------------------------------------------------------------


def test_grpo_rows_use_family_adapter(family, train4, grpo_run):
    from gui_grounding.training.task import GUIGroundingTask
    from vlm_r1.grpo_jsonl import parse_args

    arch, spec, model, _ = family
    out, log, proc = grpo_run
    _check_grpo_ran(arch, proc)
    assert [h["step"] for h in step_logs(out)] == [1, 2, 3]
    with open(os.path.join(out, "vlm_r1_run.json")) as f:
        info = json.load(f)
    assert (info["model_type"], info["task_type"], info["num_train_rows"]) == (arch, "gui_grounding", 4)
    assert info["reward_funcs"] == ["click_reward", "completion_length_reward"]
    # the run's own record of its adapter (vlm_r1_run.json, and GUIGroundingTask.build_dataset's log line)
    assert (info["adapter"], info["answer_frame"]) == (spec["adapter"], "norm1000")
    assert f"adapter {spec['adapter']}: answers in norm1000" in proc.stderr
    # the rollouts it scored (DEBUG_MODE log): 4 per step, ids of the 4 records
    with open(log) as f:
        text = f.read()
    assert text.count("click_reward reward:") == 3 * 4
    ids = {line.split(": ", 1)[1] for line in text.splitlines() if line.startswith("id: ")}
    assert ids and ids <= {f"about__1280x720:{i}" for i in range(4)}
    # the rows: the same task call on the same parsed command line
    script_args, _, _ = parse_args(_grpo_argv(model, train4, out))
    _check_row0(_rows(GUIGroundingTask(), script_args, model), spec)


def test_grpo_result_reloads_and_evaluates(family, grpo_run):
    arch, spec, model, work = family
    out, _, proc = grpo_run
    _check_grpo_ran(arch, proc)
    _check_trained(model, out, spec)
    _check_eval(out, str(work / "eval_grpo"), spec)


def test_sft_targets_are_family_format(family, train4, sft_run):
    from gui_grounding.models.adapters import get_adapter
    from gui_grounding.training.task import GUIGroundingTask
    from vlm_r1.sft import parse_args

    _, spec, model, _ = family
    out, proc = sft_run
    assert [h["step"] for h in step_logs(out)] == [1, 2, 3]
    # vlm_r1.sft logs the first row's completion
    assert f"e.g. completion {spec['sft_target0']!r}" in proc.stderr
    task = GUIGroundingTask()
    script_args, _, _ = parse_args(_sft_argv(model, train4, out))
    rows = _rows(task, script_args, model)
    _check_row0(rows, spec)
    targets = [task.sft_completion(r) for r in rows]
    assert targets[0] == spec["sft_target0"]
    adapter = get_adapter(spec["adapter"])
    # each target parses back (the rewards' parser) to its box centre on the 0-1000 grid, within rounding
    for row, target in zip(rows, targets, strict=True):
        x0, y0, x1, y1 = row["target_boxes_answer"][0]
        x, y = adapter.parse_answer(target)
        assert abs(x - (x0 + x1) / 2) <= 1 and abs(y - (y0 + y1) / 2) <= 1


def test_sft_result_reloads_and_evaluates(family, sft_run):
    _, spec, model, work = family
    out, _ = sft_run
    _check_trained(model, out, spec)
    _check_eval(out, str(work / "eval_sft"), spec)


def test_prompt_cli_picks_family_adapter(family):
    _, spec, model, _ = family
    # the tiny checkpoint records no training budget, so the pixel budget is the adapter's published one; InternVL's
    # tile bound is given as the runs give it (INTERNVL_MAX_TILES; Qwen3-VL ignores it)
    proc = run_module(
        [
            "gui_grounding.cli",
            "prompt",
            "--model",
            model,
            "--image-size",
            "1920x1080",
            "--instruction",
            "Click the search box",
            "--max-tiles",
            str(INTERNVL_MAX_TILES),
        ]
    )
    out = json.loads(proc.stdout)
    assert out["adapter"] == spec["adapter"]
    assert out["image_size"] == [1920, 1080]
    assert out["messages"] == [
        {
            "role": "user",
            "content": [{"type": "image"}, {"type": "text", "text": spec["request"].format("Click the search box")}],
        }
    ]
    assert spec["request"].format("Click the search box") in out["chat_template_text"]
    token, count = spec["prompt_image_tokens"]
    assert out["chat_template_text"].count(token) == count
    assert out["num_tokens"] > count  # image tokens + the chat text
