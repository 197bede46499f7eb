"""Training to refuse (issue 32, item 2): the ``no_target`` flag through the readers and the converter, each family's
refusal answer and clause (published prompts unchanged when off), the exact ``click_refusal`` reward, the refusal
metrics of a hand-made batch, and the training-time eval's refusal numbers. The toy study is a command
(``gui-grounding toy refusal``, docs/results/toy_refusal.md), not a test."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

from gui_grounding.data.convert import convert
from gui_grounding.data.schema import Sample, load_samples
from gui_grounding.data.synthetic import SyntheticConfig, make_synthetic
from gui_grounding.models.adapters import ADAPTERS, get_adapter
from gui_grounding.models.adapters.base import OUR_REFUSAL_CLAUSE
from gui_grounding.models.adapters.qwen3_vl import GUI_OWL_15_INFEASIBLE
from gui_grounding.models.frames import Frame
from gui_grounding.models.profile_types import Profile
from gui_grounding.models.profiles import PROFILES
from gui_grounding.training.refusal import refusal_metrics
from gui_grounding.training.rewards import click_refusal_reward, score_click_refusal
from gui_grounding.training.task import GUIGroundingOptions, GUIGroundingTask, sample_to_row
from gui_grounding.training.train_eval import refusal_eval

OWL_REFUSAL = (
    '<tool_call>\n{"name": "computer_use", "arguments": {"action": "terminate", "status": "failure"}}\n</tool_call>'
)
FRAME = Frame(200, 100, 200, 100)


# ---- readers and converter -----------------------------------------------------------------------------------------
def _records(tmp_path, records: list) -> str:
    Image.new("RGB", (200, 100), "white").save(tmp_path / "a.png")
    path = tmp_path / "d.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    return str(path)


CANON_BOX = {"x_min": 10, "y_min": 10, "x_max": 50, "y_max": 40}
GTA1_TURNS = [{"from": "human", "value": "<image>Click the save icon"}, {"from": "gpt", "value": "(1,1)"}]


def test_canonical_and_gta1_readers_carry_no_target_and_reject_hostile_values(tmp_path):
    good = [
        {"sample_id": "c", "instruction": "Click the red button", "image_path": "a.png", "target_bbox": [],
         "no_target": True},
        {"sample_id": "g", "image": "a.png", "bbox": None, "no_target": True, "conversations": GTA1_TURNS},
        {"sample_id": "t", "instruction": "Click OK", "image_path": "a.png", "target_bbox": CANON_BOX,
         "no_target": False},
    ]  # fmt: skip
    hostile = [  # each a bad_field reject; the neighbours are kept
        {"instruction": "x", "image_path": "a.png", "target_bbox": [], "no_target": value}
        for value in ("true", 1, 0, None, [], {}, 1.0, "false")
    ] + [
        {"instruction": "x", "image_path": "a.png", "target_bbox": CANON_BOX, "no_target": True},  # a box and none
        {"image": "a.png", "bbox": [1, 2, 3, 4], "no_target": True, "conversations": GTA1_TURNS},
        {"image": "a.png", "conversations": GTA1_TURNS, "no_target": True},  # VLM-R1 shape: cannot mark it
    ]
    samples, report = load_samples([_records(tmp_path, good + hostile)])
    assert [(s.sample_id, s.refusal, s.boxes) for s in samples] == [
        ("c", True, []),
        ("g", True, []),
        ("t", False, [(10.0, 10.0, 50.0, 40.0)]),
    ]
    assert samples[1].instruction == "Click the save icon" and samples[1].source_box_unit == "norm1000"
    assert [reason for _, reason, _ in report.rejects] == ["bad_field"] * len(hostile)
    # the canonical record of a no-target sample says so, and reads back as one; a sample with a target gains no key
    assert samples[0].to_record()["target_bbox"] == [] and samples[0].to_record()["no_target"] is True
    assert "no_target" not in samples[2].to_record()


def test_the_gta1_converter_carries_no_target(tmp_path):
    path = _records(
        tmp_path,
        [
            {"id": 1, "image": "a.png", "bbox": [], "no_target": True, "conversations": GTA1_TURNS},
            {"id": 2, "image": "a.png", "bbox": [100, 100, 500, 400], "conversations": GTA1_TURNS},
            {"id": 3, "image": "a.png", "bbox": [], "no_target": "yes", "conversations": GTA1_TURNS},
        ],
    )
    out = str(tmp_path / "out.jsonl")
    report = convert("gta1", [path], str(tmp_path), out, progress=False)
    lines = [json.loads(line) for line in open(out)]
    assert [(r["target_bbox"], r.get("no_target")) for r in lines] == [
        ([], True),
        ({"x_min": 20.0, "y_min": 10.0, "x_max": 100.0, "y_max": 40.0}, None),
    ]
    assert report.reasons == {"bad_field": 1} and report.samples == 2
    samples, _ = load_samples([out], [str(tmp_path)])  # the converted file reads back with the flag
    assert [s.refusal for s in samples] == [True, False]


def test_synthetic_no_target_share_names_a_colour_on_no_button(tmp_path):
    cfg = SyntheticConfig(num_train=40, num_test=0, no_target_share=0.5, seed=3)
    make_synthetic(str(tmp_path / "s"), cfg)
    records = [json.loads(line) for line in open(tmp_path / "s" / "train.jsonl")]
    empty = [r for r in records if r.get("no_target")]
    assert len(empty) == 21 and all(r["target_bbox"] == [] and r["cell"] is None for r in empty)
    assert all(r["colour"] not in r["buttons"] and r["colour"] in r["instruction"] for r in empty)
    assert all(r["colour"] in r["buttons"] for r in records if "no_target" not in r)
    # share 0 (the default) draws nothing from the no-target stream: the files of the set as it was
    make_synthetic(str(tmp_path / "a"), SyntheticConfig(num_train=5, num_test=2))
    make_synthetic(str(tmp_path / "b"), SyntheticConfig(num_train=5, num_test=2, no_target_share=0.0))
    for name in ("train.jsonl", "test.jsonl", "images/00003.png"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    with pytest.raises(ValueError, match="colour on no button"):
        SyntheticConfig(colours=["red"], no_target_share=0.1).validate()


def test_synthetic_empty_screen_kind_paints_no_button_on_no_target_screens(tmp_path):
    from PIL import Image

    from gui_grounding.data.synthetic import COLOURS

    cfg = SyntheticConfig(num_train=30, num_test=0, no_target_share=0.4, no_target_kind="empty_screen", seed=5)
    make_synthetic(str(tmp_path / "s"), cfg)
    records = [json.loads(line) for line in open(tmp_path / "s" / "train.jsonl")]
    empty = [r for r in records if r.get("no_target")]
    assert 0 < len(empty) < len(records)
    assert all(r["buttons"] == [] and r["target_bbox"] == [] and r["cell"] is None for r in empty)
    assert all(r["colour"] in r["buttons"] for r in records if "no_target" not in r)
    painted = set(COLOURS.values())
    for r in records:  # an empty screen holds only the grey panels; every other screen shows its button's colour
        pixels = set(Image.open(tmp_path / "s" / r["image_path"]).convert("RGB").getdata())
        assert bool(pixels & painted) is ("no_target" not in r)
        if "no_target" in r:
            assert all(p[0] == p[1] == p[2] for p in pixels)  # grey panels only
    # the main stream is untouched: the screens with a button are the set drawn without no-target screens
    make_synthetic(str(tmp_path / "plain"), SyntheticConfig(num_train=30, num_test=0, seed=5))
    plain = [json.loads(line) for line in open(tmp_path / "plain" / "train.jsonl")]
    for r, p in zip(records, plain, strict=True):
        if "no_target" not in r:
            assert r == p
            assert (tmp_path / "s" / r["image_path"]).read_bytes() == (
                tmp_path / "plain" / p["image_path"]
            ).read_bytes()
        else:
            assert r["colour"] == p["colour"]  # the colour that would have been painted
    with pytest.raises(ValueError, match="no_target_kind"):
        SyntheticConfig(no_target_kind="blank").validate()
    SyntheticConfig(
        colours=["red"], no_target_share=0.1, no_target_kind="empty_screen"
    ).validate()  # no spare colour needed


# ---- adapters: the refusal answer, its reading, the clause -----------------------------------------------------------
def test_each_family_refusal_answer_is_read_as_no_target_by_its_own_reading():
    answers = {name: get_adapter(name).refusal_answer("Click x") for name in ADAPTERS}
    assert answers["ui-venus-1.5"] == "[-1,-1]"  # published
    assert answers["gui-owl-1.5"] == answers["gui-owl-1.5-infeasible"] == OWL_REFUSAL  # published
    assert answers["gta1"] == "(-1,-1)"  # ours: the point (-1,-1) in the family's syntax
    assert answers["gta1-box"] == answers["ui-venus-ground"] == "[-1,-1,-1,-1]"
    assert answers["gta1-thinking"] == "<think>The element to click: Click x.</think><answer>(-1,-1)</answer>"
    assert answers["qwen3-vl"] == '{"point_2d": [-1, -1], "label": "element"}'
    unsupported = sorted(name for name in ADAPTERS if not get_adapter(name).supports_refusal_training)
    assert unsupported == ["mai-ui", "opencua"]  # their parsers read no negative point; they publish no refusal
    for name in ADAPTERS:
        adapter = get_adapter(name)
        real = adapter.sft_target((10, 10, 30, 30), "Click x")
        assert not adapter.is_trained_refusal(real), name
        assert adapter.is_trained_refusal(answers[name]) is (name not in unsupported), name
        assert not adapter.is_trained_refusal(None) and not adapter.is_trained_refusal("")


def test_published_prompts_are_unchanged_unless_the_refusal_clause_is_asked_for():
    for name in ADAPTERS:
        adapter = get_adapter(name)
        for block in (True, False):
            published = adapter.messages("Click OK", FRAME, image_block=block)
            assert adapter.prompt_messages("Click OK", FRAME, image_block=block) == published, name
        assert adapter.configured() is adapter
    gta1 = get_adapter("gta1").configured(refusal_prompt=True)
    user = gta1.prompt_messages("Click OK", FRAME, image_block=True)[-1]
    assert (
        user["content"][-1]["text"] == "Click OK\nIf no element on the screen matches the instruction, answer (-1,-1)"
    )
    assert get_adapter("gta1").messages("Click OK", FRAME)[-1]["content"][-1]["text"] == "Click OK"  # registry intact
    assert get_adapter("qwen2.5-vl").refusal_clause() == OUR_REFUSAL_CLAUSE.format(
        answer='<tool_call>\n{"name": "computer_use", "arguments": {"action": "left_click", "coordinate": [-1, -1]}}'
        "\n</tool_call>"
    )
    assert get_adapter("gta1-thinking").refusal_clause().endswith("answer <answer>(-1,-1)</answer>")
    venus = get_adapter("ui-venus-1.5")  # its published request already asks for [-1,-1]: nothing added
    on = venus.configured(refusal_prompt=True)
    assert on.prompt_messages("Click OK", FRAME) == venus.messages("Click OK", FRAME)
    owl = get_adapter("gui-owl-1.5").configured(refusal_prompt=True)  # the infeasible clause in the system turn
    assert owl.prompt_messages("Click OK", FRAME) == get_adapter("gui-owl-1.5-infeasible").messages("Click OK", FRAME)
    assert owl.prompt_messages("Click OK", FRAME)[0]["content"][-1]["text"].endswith("\n" + GUI_OWL_15_INFEASIBLE)


def test_a_profile_or_a_run_may_override_the_refusal_answer_only_with_one_the_family_reads():
    gta1 = get_adapter("gta1")
    assert gta1.configured(refusal_answer=" (-1,-1) ").refusal_answer("x") == " (-1,-1) "
    with pytest.raises(ValueError, match="not read as 'no target'"):
        gta1.configured(refusal_answer="none")
    venus = get_adapter("ui-venus-1.5").configured(refusal_answer="[-1, -1]", refusal_prompt=True)
    assert venus.refusal_answer("x") == "[-1, -1]"
    assert venus.refusal_clause() == OUR_REFUSAL_CLAUSE.format(answer="[-1, -1]")  # an override states itself
    base = next(p for p in PROFILES.values() if not p.refusal and get_adapter(p.adapter).supports_refusal_training)
    profile = Profile(**{**base.__dict__, "refusal_prompt": True, "refusal_answer": ""})
    configured = profile.configure(get_adapter(base.adapter))
    assert configured.refusal_prompt and not get_adapter(base.adapter).refusal_prompt


# ---- rows and the task --------------------------------------------------------------------------------------------
def _sample(refusal: bool) -> Sample:
    boxes = [] if refusal else [(10.0, 10.0, 50.0, 40.0)]
    return Sample("s", "Click the red button", "/x/a.png", boxes, 200, 100, refusal=refusal)


def test_rows_gain_the_refusal_columns_only_with_refusal_training():
    gta1 = get_adapter("gta1")
    plain = sample_to_row(_sample(False), FRAME, gta1)
    assert not {"no_target", "refusal_answer", "refusal_penalty"} & set(plain)
    assert plain["prompt"] == gta1.messages("Click the red button", FRAME, image_block=False)
    on = gta1.configured(refusal_prompt=True)
    row = sample_to_row(_sample(True), FRAME, on, refusal_penalty=0.25)
    assert (row["no_target"], row["refusal_answer"], row["refusal_penalty"]) == (True, "(-1,-1)", 0.25)
    assert row["target_boxes_answer"] == [] and row["prompt"][-1]["content"].endswith("answer (-1,-1)")
    task = GUIGroundingTask(GUIGroundingOptions(refusal_training=True))
    assert task.sft_completion(row) == "(-1,-1)"
    assert task.sft_completion(sample_to_row(_sample(False), FRAME, on, refusal_penalty=0.0)) == "(30,25)"


def test_refusal_options_are_checked():
    with pytest.raises(ValueError, match="--refusal_penalty"):
        GUIGroundingOptions(refusal_training=True, refusal_penalty=-1)
    with pytest.raises(ValueError, match="--zoom_tool"):
        GUIGroundingOptions(refusal_training=True, zoom_tool=True)

    class Module:
        model_type = "qwen3_vl"

    with pytest.raises(ValueError, match="reads no refusal answer"):
        GUIGroundingTask(GUIGroundingOptions(refusal_training=True, adapter="mai-ui")).adapter_for(Module())
    adapter = GUIGroundingTask(GUIGroundingOptions(refusal_training=True)).adapter_for(Module())
    assert adapter.name == "qwen3-vl" and adapter.refusal_prompt


# ---- the reward -----------------------------------------------------------------------------------------------------
BOX = [[10, 10, 50, 40]]
CASES = [  # (completion, target boxes, no_target, adapter, penalty) -> reward
    ("(-1,-1)", [], True, None, 0.0, 1.0),  # abstains where nothing matches
    ("(20,20)", [], True, None, 0.0, 0.0),  # clicks where nothing matches
    ("garbage", [], True, None, 0.0, 0.0),
    ("(20,20)", BOX, False, None, 0.0, 1.0),  # clicks inside
    ("(60,20)", BOX, False, None, 0.0, 0.0),  # clicks outside
    ("(-1,-1)", BOX, False, None, 0.0, 0.0),  # abstains where a target exists: 0 ...
    ("(-1,-1)", BOX, False, None, 0.5, -0.5),  # ... or the stated penalty
    ("(-1,-1)", BOX, "true", None, 0.5, -0.5),  # only True marks no target
    ("(-1,-1)", BOX, False, None, float("nan"), 0.0),  # an unusable penalty counts as 0
    ("[-1,-1]", [], True, "ui-venus-1.5", 0.0, 1.0),
    ("[500,500]", [[400, 400, 600, 600]], False, "ui-venus-1.5", 0.0, 1.0),
    ("[-1,-1]", [[400, 400, 600, 600]], False, "ui-venus-1.5", 2.0, -2.0),
    (OWL_REFUSAL, [], True, "gui-owl-1.5", 0.0, 1.0),
    ('{"point_2d": [-1, -1], "label": "element"}', [], True, "qwen3-vl", 0.0, 1.0),
    ('{"point_2d": [-1, -1], "label": "element"}', [[400, 400, 600, 600]], False, "qwen3-vl", 1.0, -1.0),
]


@pytest.mark.parametrize(("text", "boxes", "no_target", "adapter", "penalty", "expected"), CASES)
def test_click_refusal_exact(text, boxes, no_target, adapter, penalty, expected):
    assert score_click_refusal(text, boxes, no_target, "non_thinking", adapter, penalty) == expected


def test_the_batch_logs_share_precision_and_recall():
    texts = ["(-1,-1)", "(-1,-1)", "(20,20)", "(-1,-1)", "(20,20)", "(20,20)"]
    no_target = [True, True, True, False, False, False]
    logged = []
    out = click_refusal_reward(
        [[{"role": "assistant", "content": t}] for t in texts],
        [[] if t else BOX for t in no_target],
        no_target=no_target,
        refusal_penalty=[0.0] * 6,
        log_metric=lambda name, value: logged.append((name, value)),
    )
    assert out == [1.0, 1.0, 0.0, 0.0, 1.0, 1.0]
    # 3 abstentions of 6 answers, 2 of them on the 3 no-target samples
    assert logged == [("refusal/share", 0.5), ("refusal/precision", 2 / 3), ("refusal/recall", 2 / 3)]
    assert refusal_metrics([False, False], [False, False]) == {"refusal/share": 0.0}  # no precision, no recall
    assert refusal_metrics([], []) == {}


def test_the_training_eval_reports_clicks_on_targets_and_refusals():
    rows = [
        {"sample_id": str(i), "adapter": "gta1", "no_target": t, "target_boxes": [] if t else [[0, 0, 10, 10]]}
        for i, t in enumerate([True, True, False, False, False])
    ]
    answers = ["(-1,-1)", "(5,5)", "(5,5)", "(50,50)", "(-1,-1)"]
    preds = [{"sample_id": str(i), "raw_response": a} for i, a in enumerate(answers)]
    verdicts = ["wrong", "wrong", "correct", "wrong", "wrong"]
    assert refusal_eval(rows, preds, verdicts) == {
        "eval_click/refusal_share": 0.4,
        "eval_click/refusal_precision": 0.5,
        "eval_click/refusal_recall": 0.5,
        "eval_click/accuracy_on_targets": 33.33,
    }


@settings(max_examples=60, deadline=None)
@given(
    text=st.one_of(st.text(max_size=40), st.sampled_from(["(-1,-1)", "(5,5)", "[-1,-1]", OWL_REFUSAL])),
    no_target=st.sampled_from([True, False, None, "true", 1, float("nan")]),
    penalty=st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([True, None, "1", 10**400])),
    adapter=st.sampled_from([None, "gta1", "ui-venus-1.5", "gui-owl-1.5", "qwen3-vl", "gui-g2"]),
)
def test_click_refusal_is_one_of_its_three_values(text, no_target, penalty, adapter):
    value = score_click_refusal(text, BOX, no_target, "non_thinking", adapter, penalty)
    allowed = {0.0, 1.0}
    if isinstance(penalty, float) and 0 <= penalty <= 1e6:
        allowed.add(-penalty)
    assert isinstance(value, float) and math.isfinite(value) and value in allowed


def test_build_dataset_skips_no_target_samples_unless_refusal_training(tmp_path, tiny_qwen25_dir):
    from tests.helpers.records import task_script_args
    from vlm_r1.modules import get_vlm_module, load_processor

    path = _records(
        tmp_path,
        [
            {"sample_id": "t", "instruction": "Click OK", "image_path": "a.png", "target_bbox": CANON_BOX},
            {"sample_id": "n", "instruction": "Click Help", "image_path": "a.png", "target_bbox": [],
             "no_target": True},
        ],
    )  # fmt: skip
    processor, module = load_processor(tiny_qwen25_dir), get_vlm_module(tiny_qwen25_dir)
    plain = GUIGroundingTask().build_dataset(task_script_args([path]), processor, module)
    assert plain["sample_id"] == ["t"] and "no_target" not in plain.column_names
    assert plain[0]["prompt"][1] == {"role": "user", "content": "Click OK"}  # the published prompt
    task = GUIGroundingTask(GUIGroundingOptions(refusal_training=True, refusal_penalty=0.5))
    rows = task.build_dataset(task_script_args([path]), processor, module)
    assert rows["sample_id"] == ["t", "n"] and rows["no_target"] == [False, True]
    assert rows["refusal_answer"] == ["", "(-1,-1)"] and rows["refusal_penalty"] == [0.5, 0.5]
    clause = "\nIf no element on the screen matches the instruction, answer (-1,-1)"
    assert [r["prompt"][1]["content"] for r in rows] == ["Click OK" + clause, "Click Help" + clause]


def test_the_toy_lists_the_refusal_study():
    from gui_grounding.cli import build_parser

    args = build_parser().parse_args(["toy", "refusal", "--out", "x", "--seeds", "1,2", "--grpo-steps", "7"])
    assert args.experiment == "refusal" and args.seeds == "1,2" and args.grpo_steps == 7


def test_the_refusal_study_table_and_verdicts_are_exact():
    from dataclasses import asdict

    from gui_grounding.ops.toy_refusal import RefusalRecipe, arms, summary_rows

    def run(seed, acc, recall=None, precision=None, share=0.0):
        out = {"seed": seed, "eval_click/accuracy_on_targets": acc, "eval_click/refusal_share": share}
        if recall is not None:
            out["eval_click/refusal_recall"] = recall
        if precision is not None:  # a run that never refused logs no precision
            out["eval_click/refusal_precision"] = precision
        return out

    assert [a[0] for a in arms((0.0, 0.5))] == ["click", "click_refusal", "click_refusal_p0.5"]
    results = {
        "recipe": asdict(RefusalRecipe()),
        "no_target_test_share": 0.25,
        "start": run(None, 2.0, 1.0, 0.25, 1.0),
        "arms": {
            "click": [run(42, 20.0, 0.0), run(1, 22.0, 0.0), run(2, 24.0, 0.0)],
            "click_refusal": [run(42, 21.0, 1.0, 0.5, 0.5), run(1, 21.0, 0.8, 0.4, 0.5), run(2, 18.0, 0.9, 0.45, 0.5)],
            "click_refusal_p0.5": [run(42, 10.0, 0.0)],
        },
    }
    lines = summary_rows(results)
    # control: mean 22, sd 2, t(2) 4.303: 22 -+ 4.303 * 2 / sqrt(3) = 17.0 to 27.0
    assert lines[3] == (
        "| GRPO, click reward (no refusal reward) | 42, 1, 2 | 20.0, 22.0, 24.0 | 22.0 | 17.0 to 27.0 | 0.0, 0.0, 0.0 "
        "| 0.0 | 0.0 to 0.0 | - | 0.0, 0.0, 0.0 |"
    )
    # recall 90 -+ 4.303 * 10 / sqrt(3) = 65.2 to 114.8, clipped to 100
    assert "| 90.0 | 65.2 to 100.0 |" in lines[4]
    assert lines[-2:] == [
        "- GRPO, click_refusal reward (penalty 0), 3 seed(s): refusal recall 90.0%, precision 45.0% (refusing at "
        "random: 25.0%); click accuracy on targets 20.0%, inside the control's 95% interval 17.0 to 27.0.",
        "- GRPO, click_refusal reward (penalty 0.5), 1 seed(s): refusal recall 0.0%, never refused (no precision); "
        "click accuracy on targets 10.0%, outside the control's 95% interval 17.0 to 27.0.",
    ]


def test_the_study_table_reads_results_written_before_the_penalty_arms():
    from gui_grounding.ops.toy_refusal import summary_rows

    with open("docs/results/toy_refusal_absent_colour.json", encoding="utf-8") as f:
        old = json.load(f)  # stop 36's file: recipe.refusal_penalty, two arms, no no_target_test_share
    lines = summary_rows(old)
    assert lines[3].startswith("| GRPO, click reward (no refusal reward) | 42, 1 | 19.5, 26.2 | 22.9 |")
    assert lines[4].startswith("| GRPO, click_refusal reward (penalty 0) | 42 | 16.9 | 16.9 | - | 0.0 |")
    assert lines[-1].endswith("inside the control's 95% interval 0.0 to 64.9.")  # t interval -19.2 to 64.9, clipped
