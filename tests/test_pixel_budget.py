"""One pixel budget (issue 19): the object, its resolution in training and evaluation, and the record with the
checkpoint. Expected sizes are computed by hand with transformers' smart_resize rule (see tests/test_profiles.py)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

from gui_grounding.adapters import get_adapter
from gui_grounding.eval.budget import resolve_eval_budget
from vlm_r1.pixel_budget import (
    PixelBudget,
    record,
    recorded_budget,
    resize_for_model,
    resolve,
)

GTA1 = PixelBudget.published("GTA1 README", factor=28, min_pixels=3136, max_pixels=8_847_360)
TINY = PixelBudget.published("test", factor=28, min_pixels=3136, max_pixels=200_704)


def test_validation():
    for bad, match in (
        (dict(factor=28, min_pixels=10, max_pixels=5), "min_pixels 10 exceeds max_pixels 5"),
        (dict(factor=28, min_pixels=None, max_pixels=5), "a smart_resize factor needs min_pixels and max_pixels"),
        (dict(factor=0, min_pixels=1, max_pixels=5), "factor must be a positive integer"),
        (dict(factor=True, min_pixels=1, max_pixels=5), "factor must be a positive integer"),
        (dict(factor=None, min_pixels=None, max_pixels=None, max_tiles=-1), "max_tiles must be a positive integer"),
    ):
        with pytest.raises(ValueError, match=match):
            PixelBudget(**bad)


def test_size_sent_frame_and_resize():
    assert GTA1.size_sent(1920, 1080) == (1932, 1092)  # 1920/28 = 68.6 -> 69*28, 1080/28 = 38.6 -> 39*28
    assert TINY.size_sent(1280, 720) == (588, 336)  # over 200,704: scaled by sqrt(921600/200704) then floored
    assert TINY.size_sent(10, 10) == (56, 56)  # under 3,136: scaled up to 56x56
    tiles = PixelBudget.published("InternVL", max_tiles=12)
    assert (tiles.resizes, tiles.size_sent(1281, 719)) == (False, (1281, 719))  # tiling family: sent as it is
    frame = TINY.frame(1280, 720)
    assert (frame.width, frame.height, frame.resized_width, frame.resized_height) == (1280, 720, 588, 336)
    with pytest.raises(ValueError, match="aspect ratio"):
        TINY.size_sent(28 * 300, 28)
    image = Image.new("RGB", (1280, 720), (10, 20, 30))
    assert resize_for_model(image, TINY).size == (588, 336)
    already = Image.new("RGB", (588, 336))
    assert resize_for_model(already, TINY) is already  # the processor-side identity: nothing to do


@settings(max_examples=200, deadline=None)
@given(w=st.integers(1, 6000), h=st.integers(1, 6000), budget=st.sampled_from([GTA1, TINY]))
def test_size_sent_is_a_fixed_point(w, h, budget):
    """The processor's own smart_resize of an image we resized is the identity: size_sent(size_sent(x)) == size_sent(x)
    for every size the family can take (aspect ratio <= 200)."""
    if max(w, h) / min(w, h) > 200:
        return
    sent = budget.size_sent(w, h)
    assert budget.size_sent(*sent) == sent
    assert sent[0] % 28 == 0 and sent[1] % 28 == 0


def test_resolve_priority_sources_and_describe():
    budget = resolve([
        ("flag --max_pixels", {"max_pixels": 200_704}),
        ("--config recipes/gta1/7b.yaml", {"max_pixels": 8_847_360, "min_pixels": 3136}),
        ("checkpoint x image processor", {"factor": 28, "min_pixels": 1, "max_pixels": 12_845_056}),
    ])  # fmt: skip
    assert budget.values() == {"factor": 28, "min_pixels": 3136, "max_pixels": 200_704, "max_tiles": None}
    assert budget.sources == {"max_pixels": "flag --max_pixels", "min_pixels": "--config recipes/gta1/7b.yaml",
                              "factor": "checkpoint x image processor"}  # fmt: skip
    lines = budget.describe().splitlines()
    assert lines[0] == "pixel budget:"
    assert lines[3] == "  max_pixels      200,704   <- flag --max_pixels"
    assert lines[4] == "  max_tiles             -   <- not used by this family"
    tiles = resolve(
        [("flag --max_anyres_num", {"max_tiles": 3}), ("default", {"min_pixels": 3136, "max_pixels": 12_845_056})]
    )
    assert tiles.sources["max_pixels"] == "default (no effect: this family has no smart_resize frame)"


def test_record_and_read_back(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "vlm_r1_run.json").write_text(json.dumps({"world_size": 2}))
    record(str(run), TINY)
    info = json.loads((run / "vlm_r1_run.json").read_text())
    assert info["world_size"] == 2 and info["pixel_budget"]["max_pixels"] == 200_704  # other keys kept
    back = recorded_budget(str(run))
    assert back == TINY and back.sources["max_pixels"] == f"checkpoint {run / 'vlm_r1_run.json'}"
    ckpt = run / "checkpoint-10"
    ckpt.mkdir()
    assert recorded_budget(str(ckpt)) == TINY  # a checkpoint-N folder: its run's record
    assert recorded_budget(str(tmp_path)) is None and recorded_budget("Org/hub-id") is None
    (run / "vlm_r1_run.json").write_text(json.dumps({"pixel_budget": {"factor": "28"}}))
    with pytest.raises(ValueError, match="pixel budget factor must be an integer or null"):
        recorded_budget(str(run))


def test_eval_resolution_flag_profile_checkpoint_adapter(tmp_path, caplog):
    gta1 = get_adapter("gta1")
    budget, warnings = resolve_eval_budget(gta1)  # nothing else: the adapter's published budget
    assert budget == gta1.default_budget and warnings == []
    record(str(tmp_path), TINY)
    budget, warnings = resolve_eval_budget(gta1, model=str(tmp_path))  # our checkpoint: its training budget
    assert budget.max_pixels == 200_704 and budget.sources["max_pixels"].startswith("checkpoint ")
    assert warnings == []
    profile = SimpleNamespace(budget=PixelBudget.published("profile p", factor=28, min_pixels=3136, max_pixels=401_408))
    budget, warnings = resolve_eval_budget(gta1, model=str(tmp_path), profile=profile)
    assert (budget.max_pixels, budget.sources["max_pixels"]) == (401_408, "profile p")
    assert warnings == [f"pixel budget: max_pixels 401,408 (profile p) differs from the 200,704 the checkpoint was "
                        f"trained at (checkpoint {tmp_path / 'vlm_r1_run.json'}); the model sees other image sizes "
                        "than in training"]  # fmt: skip
    budget, _ = resolve_eval_budget(gta1, model=str(tmp_path), profile=profile, flags={"max_pixels": 100_352})
    assert (budget.max_pixels, budget.sources["max_pixels"], budget.min_pixels) == (100_352, "flag --max-pixels", 3136)
    with pytest.raises(ValueError, match="min_pixels 9,000,000 exceeds max_pixels 200,704"):
        resolve_eval_budget(gta1, model=str(tmp_path), flags={"min_pixels": 9_000_000})


def test_training_budget_sources_from_the_command_line(tmp_path):
    from vlm_r1.grpo_jsonl import parse_args

    yaml = tmp_path / "r.yaml"
    yaml.write_text("max_pixels: 401408\n")
    script, _, _ = parse_args(["--model_name_or_path", "m", "--data_file_paths", "d.jsonl", "--config", str(yaml),
                               "--min_pixels", "6272"])  # fmt: skip
    assert script.budget_sources["max_pixels"] == f"--config {yaml}"
    assert script.budget_sources["min_pixels"] == "flag --min_pixels"
    assert script.budget_sources["max_anyres_num"].startswith("default of vlm_r1.grpo_jsonl (upstream VLM-R1")
    from gui_grounding.train import parse_args as gta1_parse

    script, _, _ = gta1_parse(["--model_name_or_path", "m", "--data_file_paths", "d.jsonl"])
    assert (script.max_pixels, script.budget_sources["max_pixels"]) == (
        12_845_056, "default of gui_grounding.train (GTA1 src/grpo_grounding.py:61-68 GRPOScriptArguments, 81f0c4c)")  # fmt: skip
