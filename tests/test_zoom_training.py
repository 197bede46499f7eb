"""The zoom tool in training (issue 30): the rollout environment, the stage rewards on exact coordinates, the core's
multi-turn rollout bookkeeping (token masks, turns, images), the flags and refusals, and (slow) a 2-process gloo run
that trains, saves and resumes with tool turns."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import types

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from groundwork.pixel_budget import PixelBudget
from gui_grounding.models import zoom_tool
from gui_grounding.models.adapters import get_adapter
from gui_grounding.models.frames import Frame
from gui_grounding.training import rewards as R
from gui_grounding.training.task import GUIGroundingOptions, GUIGroundingTask, sample_to_row
from gui_grounding.training.zoom import ZoomEnvironment, final_point, zoom_sft_rows
from vlm_r1.modules import load_processor
from vlm_r1.tool_rollout import ToolRolloutMixin, ToolStop, ToolTurn

BUDGET = PixelBudget(factor=28, min_pixels=3136, max_pixels=112 * 112)


def _row(image_path: str, box=(300, 100, 340, 130)) -> dict:
    """A gta1 row of a 448x448 screenshot sent at 112x112 (4x), target ``box`` in original pixels."""
    return {
        "image_path": image_path,
        "image_size": [448, 448],
        "resized_size": [112, 112],
        "adapter": "gta1",
        "prompt_mode": "non_thinking",
        "target_boxes": [list(box)],
        "target_boxes_answer": [[v / 4 for v in box]],
        "target_boxes_resized": [[v / 4 for v in box]],
        "sample_id": "s0",
        "instruction": "Click the striped button in the green panel",
    }


def _turns(window, crop=(224, 224, 112, 112), cost=0.0, final="(56,56)"):
    return [
        {
            "text": zoom_tool.call_text([0, 0, 1, 1]),
            "info": {"tool": "zoom", "window": window, "crop_frame": list(crop), "cost": cost},
        },
        {"text": final, "info": None},
    ]


# ---- the stage rewards, exact --------------------------------------------------------------------------------------
def test_final_point_maps_back_through_the_window():
    # the crop [224, 0, 448, 224] is sent at 112 px (2x): (56,56) in the crop -> (112,112) crop px -> (336,112)
    row = {**_row("a.png"), "rollout_turns": _turns([224, 0, 448, 224])}
    assert final_point(row, row["rollout_turns"], "(56,56)") == (336.0, 112.0)
    # no crop: the screenshot's answer frame (4x) -> (224, 224)
    assert final_point(row, None, "(56,56)") == (224.0, 224.0)
    # a final text that is a call is no answer, even where a parser would find numbers
    assert final_point(row, row["rollout_turns"], zoom_tool.call_text([1, 2, 3, 4])) is None


def _call(name, texts, rows):
    kwargs = {k: [r.get(k) for r in rows] for k in rows[0]}
    return R.REWARDS[name]([[{"role": "assistant", "content": t}] for t in texts], **kwargs)


def test_stage_rewards_exact():
    hit = {**_row("a.png"), "rollout_turns": _turns([224, 0, 448, 224], cost=0.05)}
    miss = {**_row("a.png"), "rollout_turns": _turns([224, 0, 448, 224], cost=0.05)}
    plain = {**_row("a.png"), "rollout_turns": [{"text": "(80,29)", "info": None}]}  # 4x -> (320, 116): a hit
    rows = [hit, miss, plain]
    texts = ["(58,54)", "(1,1)", "(80,29)"]  # (58,54) -> (340, 108): on the box's right edge (inclusive)
    assert _call("click", texts, rows) == [1.0, 0.0, 1.0]
    # zoom_tool: the window holds the whole target (overlap 1); centres (336,112) vs (320,115): gap sqrt(265)
    proximity = 1 - math.sqrt(16**2 + 3**2) / math.hypot(448, 448)
    assert _call("zoom_tool", texts, rows) == pytest.approx([0.5 + 0.5 * proximity] * 2 + [0.0])
    # zoom_gain: the coarse point (the window's centre, 336,112) is already in the box: hit - hit = 0, miss - hit = -1
    assert _call("zoom_gain", texts, rows) == [0.0, -1.0, 0.0]
    assert _call("zoom_cost", texts, rows) == [-0.05, -0.05, 0.0]


def test_zoom_tool_reward_partial_overlap_and_far_window():
    # the window [0, 0, 320, 112] holds 20x12 of the 40x30 target: overlap 0.2
    row = {**_row("a.png"), "rollout_turns": _turns([0, 0, 320, 112])}
    gap = math.hypot(160 - 320, 56 - 115)
    expected = 0.5 * (20 * 12) / (40 * 30) + 0.5 * (1 - gap / math.hypot(448, 448))
    assert _call("zoom_tool", ["(1,1)"], [row]) == pytest.approx([expected])


def test_rows_without_the_tool_score_as_before():
    row = _row("a.png")
    assert _call("click", ["(80,29)", "(1,1)"], [row, row]) == [1.0, 0.0]
    for name in ("zoom_tool", "zoom_gain", "zoom_cost"):
        assert _call(name, ["(80,29)"], [row]) == [0.0]


turn_info = st.one_of(
    st.none(),
    st.fixed_dictionaries(
        {
            "window": st.one_of(
                st.lists(st.one_of(st.floats(), st.integers(-(10**9), 10**9)), max_size=5), st.none(), st.just("x")
            ),
            "crop_frame": st.one_of(st.lists(st.one_of(st.floats(), st.integers(-5, 10**6)), max_size=5), st.none()),
            "cost": st.one_of(st.floats(), st.integers(), st.none(), st.just("1")),
        }
    ),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    turns=st.one_of(
        st.none(),
        st.just("junk"),
        st.lists(st.fixed_dictionaries({"text": st.text(max_size=30), "info": turn_info}), max_size=3),
    ),
    text=st.one_of(st.text(max_size=40), st.sampled_from(["(1,2)", "(nan,1)", zoom_tool.call_text([1, 2, 3, 4])])),
)
def test_stage_rewards_are_total_on_hostile_turns(turns, text):
    row = {**_row("a.png"), "rollout_turns": turns}
    for name in ("click", "zoom_tool", "zoom_gain", "zoom_cost"):
        out = _call(name, [text], [row])
        assert len(out) == 1 and isinstance(out[0], float) and math.isfinite(out[0]), (name, out)


# ---- the environment -----------------------------------------------------------------------------------------------
@pytest.fixture
def screen(make_image):
    return make_image(448, 448, "shot.png")


def test_environment_crops_the_full_resolution_screenshot(screen):
    env = ZoomEnvironment(BUDGET, max_calls=1, cost=0.1)
    row = _row(screen)
    # [56, 0, 112, 56] in the 112-px answer frame -> original [224, 0, 448, 224]
    out = env.step(row, [{"text": zoom_tool.call_text([56, 0, 112, 56]), "info": None}])
    assert isinstance(out, ToolTurn)
    assert out.info == {"window": [224, 0, 448, 224], "crop_frame": [224, 224, 112, 112], "cost": 0.1}
    assert [im.size for im in out.images] == [(112, 112)]  # 224 px sent at the 112x112 budget
    text = "".join(p.get("text", "<image>") for p in out.messages[0]["content"])
    assert (
        text == "<tool_response>\n<image>\nThe zoomed image resolution is height 112 and width 112.\n</tool_response>"
    )
    assert env.step(row, [{"text": "(5,5)", "info": None}]) is None  # an answer: final


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ('<tool_call>{"name": "zoom", "arguments": {"bbox_2d": [1, 2, 3]}}</tool_call>', "malformed"),
        ('<tool_call>{"name": "zoom", "arguments": {"bbox_2d": [NaN, 2, 3, 4]}}</tool_call>', "malformed"),
        ('<tool_call>{"name": "zoom", "arguments": {"bbox_2d": [1e99, 2, 3, 4]}}</tool_call>', "malformed"),
        ('<tool_call>{"name": "click", "arguments": {"bbox_2d": [1, 2, 3, 4]}}</tool_call>', "malformed"),
        ("<tool_call>{not json", "malformed"),
        (zoom_tool.call_text([1, 2, 3, 4]) * 2, "several_calls"),
        (zoom_tool.call_text([50, 50, 10, 10]), "inverted"),
        (zoom_tool.call_text([200, 200, 300, 300]), "outside_image"),
        (zoom_tool.call_text([10, 10, 10, 20]), "degenerate"),
        # [0, 10, 112, 10.1] -> 448 x 1 px: an aspect ratio smart_resize refuses
        ('<tool_call>{"name": "zoom", "arguments": {"bbox_2d": [0, 10, 112, 10.1]}}</tool_call>', "unsendable"),
    ],
)
def test_hostile_calls_end_the_rollout_with_a_reason(screen, text, reason):
    out = ZoomEnvironment(BUDGET).step(_row(screen), [{"text": text, "info": None}])
    assert isinstance(out, ToolStop) and out.reason == reason


def test_a_region_past_the_edges_is_clamped(screen):
    out = ZoomEnvironment(BUDGET).step(
        _row(screen), [{"text": zoom_tool.call_text([-50, 100, 1000, 900]), "info": None}]
    )
    assert out.info["window"] == [0, 400, 448, 448]


def test_calls_past_the_limit_and_a_vanished_image(screen, tmp_path):
    env = ZoomEnvironment(BUDGET, max_calls=1)
    first = env.step(_row(screen), [{"text": zoom_tool.call_text([0, 0, 56, 56]), "info": None}])
    turns = [
        {"text": zoom_tool.call_text([0, 0, 56, 56]), "info": first.info},
        {"text": zoom_tool.call_text([0, 0, 5, 5]), "info": None},
    ]
    assert env.step(_row(screen), turns).reason == "over_limit"
    # a second call (max 2) names a region of the crop: [0,0,56,56] of the crop [0,0,224,224] at 2x -> [0,0,112,112]
    second = ZoomEnvironment(BUDGET, max_calls=2).step(
        _row(screen), [turns[0], {"text": zoom_tool.call_text([0, 0, 56, 56]), "info": None}]
    )
    assert second.info["window"] == [0, 0, 112, 112]
    gone = ZoomEnvironment(BUDGET).step(
        _row(str(tmp_path / "gone.png")), [{"text": zoom_tool.call_text([0, 0, 56, 56]), "info": None}]
    )
    assert gone.reason == "unsendable"


# ---- the core's multi-turn bookkeeping -------------------------------------------------------------------------------
class _FakeGRPO:
    """The parts of trl.GRPOTrainer the mixin calls: turn 1 from ``_generate``, turn 2 from ``_generate_single_turn``."""

    def __init__(self, processor, first_ids, second_ids):
        self.processing_class = processor
        self._tokenizer = processor.tokenizer
        self.chat_template_kwargs = {}
        self.eos_token_ids = [processor.tokenizer.eos_token_id]
        self._image_pad_token_id = processor.tokenizer.convert_tokens_to_ids("<|image_pad|>")
        self._metrics = {"train": __import__("collections").defaultdict(list)}
        self.model = types.SimpleNamespace(training=True)
        self.accelerator = types.SimpleNamespace(device="cpu", gather=lambda t: t)
        self.tools = []
        self.first_ids, self.second_ids = first_ids, second_ids
        self.generated_from = None

    def _generate(self, prompts):
        texts = self._tokenizer.batch_decode(self.first_ids, skip_special_tokens=True)
        completions = [[{"role": "assistant", "content": t}] for t in texts]
        shot = [[__import__("PIL.Image").Image.new("RGB", (112, 112))] for _ in prompts]
        return [[1, 2]] * len(prompts), [list(i) for i in self.first_ids], None, completions, None, {}, shot, []

    def _generate_single_turn(self, ids, images, fields, n, has_tool_images):
        self.generated_from = (ids, images, fields)
        return [list(self.second_ids) for _ in ids], None

    def _generate_and_score_completions(self, inputs):
        return self._generate([None] * len(inputs))


def test_tool_turns_are_masked_and_recorded(tiny_qwen25_dir, screen):
    processor = load_processor(tiny_qwen25_dir)
    tok = processor.tokenizer
    eos = tok.eos_token_id
    call = tok(zoom_tool.call_text([56, 0, 112, 56]), add_special_tokens=False)["input_ids"] + [eos]
    answer = tok("(9,9)", add_special_tokens=False)["input_ids"] + [eos]
    second = tok("(56,56)", add_special_tokens=False)["input_ids"] + [eos]

    class Trainer(ToolRolloutMixin, _FakeGRPO):
        pass

    trainer = Trainer(processor, [call, answer], second)
    trainer.rollout_environment = ZoomEnvironment(BUDGET, max_calls=1)
    rows = [_row(screen), _row(screen)]
    out = trainer._generate_and_score_completions(rows)
    prompt_ids, ids, mask, messages, _logprobs, _extra, images, tool_images = out
    suffix_len = len(ids[0]) - len(call) - len(second)
    # the tool turn: rendered by the chat template, its image expanded to the crop's 4x4 merged tokens
    suffix = ids[0][len(call) : len(call) + suffix_len]
    text = tok.decode(suffix)
    assert text.startswith("\n<|im_start|>user\n<tool_response>\n<|vision_start|>")
    assert text.endswith("</tool_response><|im_end|>\n<|im_start|>assistant\n")
    assert suffix.count(trainer._image_pad_token_id) == 16
    assert mask[0] == [1] * len(call) + [0] * suffix_len + [1] * len(second)
    assert ids[1] == answer and mask[1] == [1] * len(answer)  # no call: one turn
    assert [len(t) for t in tool_images] == [1, 0] and len(images[0]) == 2 and len(images[1]) == 1
    # turn 2 was generated from prompt + call + tool turn, with the screenshot and the crop, and image-token types
    gen_ids, gen_images, fields = trainer.generated_from
    assert gen_ids == [[1, 2] + call + suffix] and len(gen_images[0]) == 2
    assert sum(fields["mm_token_type_ids"][0]) == 16 and fields["image_grid_thw"].tolist() == [[1, 8, 8]] * 2
    assert rows[0]["rollout_turns"][0]["info"]["window"] == [224, 0, 448, 224]
    assert rows[0]["rollout_turns"][1]["text"] == "(56,56)" and rows[1]["rollout_turns"][0]["info"] is None
    assert messages[0][-1] == {"role": "assistant", "content": "(56,56)"} and messages[0][1]["role"] == "user"
    assert trainer.tools == []  # only while the batch was scored
    m = trainer._metrics["train"]
    assert m["tools/calls_per_rollout"] == [0.5] and m["tools/share_called"] == [0.5]
    assert m["tools/turns_per_rollout"] == [1.5] and m["tools/rejected/over_limit"] == [0.0]


# ---- flags, prompts, refusals ----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("max_zoom_calls", 0),
        ("max_zoom_calls", 9),
        ("max_zoom_calls", 1.5),
        ("zoom_cost", float("nan")),
        ("zoom_cost", -1),
        ("zoom_sft_fraction", 0),
    ],
)
def test_bad_zoom_flags_are_refused(field, value):
    with pytest.raises(ValueError, match=f"--{field}"):
        GUIGroundingOptions(**{field: value})


def test_prompt_is_unchanged_without_the_tool_and_offers_it_with():
    from gui_grounding.data.schema import Sample

    adapter, frame = get_adapter("gta1"), Frame(448, 448, 112, 112)
    sample = Sample(
        sample_id="s", image_path="a.png", instruction="Click it", boxes=[(1, 2, 3, 4)], width=448, height=448
    )
    plain = sample_to_row(sample, frame, adapter)["prompt"]
    assert plain == adapter.messages("Click it", frame, image_block=False)
    tool = sample_to_row(sample, frame, adapter, zoom_calls=2)["prompt"]
    assert tool[0]["content"].startswith(plain[0]["content"] + "\n\n# Tools\n")
    assert tool[0]["content"].endswith("</tool_call>\n\nYou may call zoom at most 2 times.") and tool[1:] == plain[1:]


@pytest.mark.parametrize(
    ("flag", "match"),
    [("shared_prompt", "--shared_prompt"), ("use_vllm", "--use_vllm"), ("dynamic_sampling", "--dynamic_sampling")],
)
def test_zoom_tool_refuses_what_it_cannot_run(flag, match):
    task = GUIGroundingTask(GUIGroundingOptions(zoom_tool=True))
    task.pixel_budget = BUDGET
    with pytest.raises(ValueError, match=match):
        task.rollout_environment(None, types.SimpleNamespace(**{flag: True}), None, None)
    assert GUIGroundingTask().rollout_environment(None, types.SimpleNamespace(), None, None) is None


def test_zoom_tool_turns_on_the_vision_token_ban():
    task = GUIGroundingTask(GUIGroundingOptions(zoom_tool=True))
    task.pixel_budget = BUDGET
    args = types.SimpleNamespace(ban_vision_tokens=False)
    assert isinstance(task.rollout_environment(None, args, None, None), ZoomEnvironment)
    assert args.ban_vision_tokens is True


def test_zoom_sft_rows(screen):
    from datasets import Dataset

    row = {
        **_row(screen),
        "prompt": get_adapter("gta1").zoom_messages("Click it", Frame(448, 448, 112, 112), image_block=False),
    }
    out = zoom_sft_rows(Dataset.from_list([row]), BUDGET, 0.5)
    first, second = out[0], out[1]
    task = GUIGroundingTask(GUIGroundingOptions(zoom_tool=True))
    region = first["zoom_call"]
    # a 224-px window (0.5 of each side), in the 112-px answer frame: 56 wide, holding the target's centre (320,115)
    assert (
        region[2] - region[0] == 56 and region[0] * 4 <= 320 <= region[2] * 4 and region[1] * 4 <= 115 <= region[3] * 4
    )
    assert task.sft_completion(first) == zoom_tool.call_text(region)
    window = second["crop_window"]
    assert [v / 4 for v in window] == region
    # the answer in the crop (2x): the target's centre minus the window's corner, halved
    cx, cy = (320 - window[0]) / 2, (115 - window[1]) / 2
    assert task.sft_completion(second) == f"({round(cx)},{round(cy)})"
    assert [im.size for im in first["images"]] == [(112, 112)] and [im.size for im in second["images"]] == [
        (112, 112)
    ] * 2
    assert [m["role"] for m in second["prompt"]] == ["system", "user", "assistant", "user"]


# ---- end to end: 2 gloo processes train, save and resume with tool turns (slow) ----------------------------------------
@pytest.mark.slow
def test_two_process_zoom_run_trains_saves_and_resumes(tiny_qwen25_dir, tmp_path):
    from gui_grounding.data.synthetic import SyntheticConfig, make_synthetic
    from tests.helpers.forced_zoom import eos_checkpoint
    from tests.helpers.paths import REPO

    model = eos_checkpoint(tiny_qwen25_dir, str(tmp_path / "eos_model"))
    zoom_toy = dict(width=448, height=448, cols=4, rows=4, min_fill=0.15, max_fill=0.2, background="tiles")
    make_synthetic(str(tmp_path / "data"), SyntheticConfig(num_train=4, num_test=0, name_cell=True, **zoom_toy))
    out = tmp_path / "run"

    def run(steps: int) -> subprocess.CompletedProcess:
        cmd = [
            *(sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"),
            *("-m", "vlm_r1.grpo_jsonl", "--config", os.path.join(REPO, "recipes", "gta1", "tiny_cpu_zoom.yaml")),
            *("--task_type", "tests.helpers.forced_zoom:ForcedZoomTask", "--model_name_or_path", model),
            *("--data_file_paths", str(tmp_path / "data" / "train.jsonl"), "--output_dir", str(out)),
            *("--max_steps", str(steps), "--save_strategy", "steps", "--save_steps", "1", "--logging_steps", "1"),
            *("--report_to", "none", "--disable_tqdm", "true"),
        ]
        env = dict(os.environ, TOKENIZERS_PARALLELISM="false", PYTHONPATH=REPO, OMP_NUM_THREADS="1")
        return subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=900)

    first = run(1)
    assert first.returncode == 0, first.stderr[-4000:]
    assert os.path.isdir(out / "checkpoint-1")
    second = run(2)  # --resume_from_checkpoint latest (the recipe's): continues from checkpoint-1
    assert second.returncode == 0, second.stderr[-4000:]
    assert "resuming from" in second.stderr.lower() or "checkpoint-1" in second.stderr, second.stderr[-3000:]
    with open(out / "logs.jsonl") as f:
        train = [r for r in map(json.loads, f) if "loss" in r]
    assert [r["step"] for r in train][-1] == 2
    for record in train:
        assert record["tools/share_called"] == 1.0 and record["tools/calls_per_rollout"] == 1.0  # every rollout zoomed
        assert record["tools/turns_per_rollout"] == 2.0 and math.isfinite(record["loss"])
        assert "rewards/zoom_tool_reward/mean" in record and "rewards/click_reward/mean" in record
    assert os.path.isfile(out / "model.safetensors")


def test_the_screenshot_is_decoded_once_per_group(screen, monkeypatch):
    from groundwork import validate

    opened = []
    real = validate.open_image
    monkeypatch.setattr(validate, "open_image", lambda path: opened.append(path) or real(path))
    env = ZoomEnvironment(BUDGET)
    for _ in range(8):  # the G rollouts of one group
        assert isinstance(
            env.step(_row(screen), [{"text": zoom_tool.call_text([0, 0, 56, 56]), "info": None}]), ToolTurn
        )
    assert opened == [screen]


def test_zoom_flags_without_the_tool_warn(caplog):
    with caplog.at_level("WARNING"):
        GUIGroundingOptions(max_zoom_calls=2, zoom_cost=0.5)
    assert "--max_zoom_calls, --zoom_cost given without --zoom_tool true: no effect" in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING"):
        GUIGroundingOptions(zoom_tool=True, max_zoom_calls=2)
    assert "no effect" not in caplog.text
