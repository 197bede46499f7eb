"""One pixel budget (issue 19): the object, its resolution in training and evaluation, and the record with the
checkpoint. Expected sizes are computed by hand with transformers' smart_resize rule (see tests/test_profiles.py)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

from groundwork.geometry import Frame
from groundwork.pixel_budget import (
    PixelBudget,
    record,
    recorded_budget,
    resize_for_model,
    resolve,
)
from groundwork.validate import ImageLimits
from gui_grounding.eval.budget import resolve_eval_budget
from gui_grounding.models.adapters import ADAPTERS, get_adapter

GTA1 = PixelBudget.published("GTA1 README", factor=28, min_pixels=3136, max_pixels=8_847_360)
TINY = PixelBudget.published("test", factor=28, min_pixels=3136, max_pixels=200_704)


def test_validation():
    for bad, match in (
        (dict(factor=28, min_pixels=10, max_pixels=5), "min_pixels 10 exceeds max_pixels 5"),
        (dict(factor=28, min_pixels=None, max_pixels=5), "a smart_resize factor needs min_pixels and max_pixels"),
        (dict(factor=0, min_pixels=1, max_pixels=5), "factor must be a positive integer"),
        (dict(factor=True, min_pixels=1, max_pixels=5), "factor must be a positive integer"),
        (dict(factor=None, min_pixels=None, max_pixels=None, max_tiles=-1), "max_tiles must be a positive integer"),
        (
            dict(factor=28, min_pixels=3136, max_pixels=200704.0),
            r"max_pixels must be a positive integer or None, got 200704\.0",
        ),
        (dict(factor=28, min_pixels=-1, max_pixels=5), "min_pixels must be a positive integer or None, got -1"),
        (dict(factor=28, min_pixels=1, max_pixels=None), "a smart_resize factor needs min_pixels and max_pixels"),
    ):
        with pytest.raises(ValueError, match=match):
            PixelBudget(**bad)
    # a published budget cites its source for the values it sets, and only those
    assert PixelBudget.published("InternVL", max_tiles=12).sources == {"max_tiles": "InternVL"}
    assert TINY.sources == dict.fromkeys(("factor", "min_pixels", "max_pixels"), "test")


def test_size_sent_frame_and_resize():
    assert GTA1.size_sent(1920, 1080) == (1932, 1092)  # 1920/28 = 68.6 -> 69*28, 1080/28 = 38.6 -> 39*28
    assert TINY.size_sent(1280, 720) == (588, 336)  # over 200,704: scaled by sqrt(921600/200704) then floored
    assert TINY.size_sent(10, 10) == (56, 56)  # under 3,136: scaled up to 56x56
    # 1920x1080 rounds to 1932x1092 = 2,109,744 > 200,704: beta = sqrt(2,073,600 / 200,704) = 45/14, then
    # floor(1920 * 14/45 / 28) * 28 = 21 * 28 and floor(1080 * 14/45 / 28) * 28 = 12 * 28
    assert TINY.size_sent(1920, 1080) == (588, 336)
    internvl = get_adapter("internvl").default_budget  # 448-px tiles, no smart_resize: the original is sent
    assert (internvl.factor, internvl.max_tiles, internvl.size_sent(1920, 1080)) == (None, 12, (1920, 1080))
    assert internvl.frame(1920, 1080) == Frame(1920, 1080, 1920, 1080)
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
    assert resize_for_model(image, internvl) is image  # a tiling family: sent as it is


def test_resize_for_model_is_one_bicubic_resize():
    """The resize is PIL's bicubic (the Qwen image processor's and GTA1's resample), done once from the original."""
    noise = np.random.default_rng(0).integers(0, 256, size=(720, 1280, 3), dtype=np.uint8)
    image = Image.fromarray(noise)  # 1280x720 random pixels: every resampling filter gives other bytes
    sent = resize_for_model(image, TINY)
    assert sent.size == (588, 336)
    assert sent.tobytes() == image.resize((588, 336), Image.Resampling.BICUBIC).tobytes()
    assert sent.tobytes() != image.resize((588, 336), Image.Resampling.BILINEAR).tobytes()
    assert image.size == (1280, 720) and np.array_equal(np.asarray(image), noise)  # the original is not changed


SMART_RESIZE_BUDGETS = [TINY] + [cls.default_budget for cls in ADAPTERS.values() if cls.default_budget.resizes]


@settings(max_examples=300, deadline=None)
@given(
    short=st.integers(1, 4000),
    ratio=st.floats(1, 100),
    wide=st.booleans(),
    budget=st.sampled_from(SMART_RESIZE_BUDGETS),
)
def test_size_sent_is_a_fixed_point(short, ratio, wide, budget):
    """The processor's own smart_resize of an image we resized is the identity: size_sent(size_sent(x)) == size_sent(x),
    for every published budget and TINY, and images of aspect ratio up to 100:1 (every screen).

    Not for thinner images: smart_resize rounds a thin side down (41 px -> 28), so 5615x41 (137:1) is sent as 5628x28
    (201:1), which the processor's own smart_resize refuses (aspect ratio over 200); and under a budget whose
    max_pixels / factor^2 is under the aspect ratio (factor 32, 100,352: 98), the clamped thin side exceeds max_pixels
    and the processor resizes again (9701x97 -> 3168x32 -> 3136x32)."""
    long = max(short, min(int(short * ratio), 20_000))
    w, h = (long, short) if wide else (short, long)
    sent = budget.size_sent(w, h)
    assert budget.size_sent(*sent) == sent
    assert sent[0] % budget.factor == 0 and sent[1] % budget.factor == 0


def test_resolve_priority_sources_and_describe():
    budget = resolve(
        [
            ("flag --max_pixels", {"max_pixels": 200_704}),
            ("--config recipes/gta1/7b.yaml", {"max_pixels": 8_847_360, "min_pixels": 3136}),
            ("checkpoint x image processor", {"factor": 28, "min_pixels": 1, "max_pixels": 12_845_056}),
        ]
    )
    assert budget.values() == {"factor": 28, "min_pixels": 3136, "max_pixels": 200_704, "max_tiles": None}
    assert budget.sources == {
        "max_pixels": "flag --max_pixels",
        "min_pixels": "--config recipes/gta1/7b.yaml",
        "factor": "checkpoint x image processor",
    }
    lines = budget.describe().splitlines()
    assert lines[0] == "pixel budget:"
    assert lines[3] == "  max_pixels      200,704   <- flag --max_pixels"
    assert lines[4] == "  max_tiles             -   <- not used by this family"
    tiles = resolve(
        [("flag --max_anyres_num", {"max_tiles": 3}), ("default", {"min_pixels": 3136, "max_pixels": 12_845_056})]
    )
    assert tiles.sources["max_pixels"] == "default (no effect: this family has no smart_resize frame)"
    assert tiles.values() == {"factor": None, "min_pixels": 3136, "max_pixels": 12_845_056, "max_tiles": 3}
    assert tiles.size_sent(1920, 1080) == (1920, 1080)  # the bounds have no effect without a factor


def test_describe_every_line():
    limits = ImageLimits(200.0, 14, family="qwen2_5_vl", source="smart_resize ratio limit 200; vision patch 14 px")
    budget = resolve(
        [("flag --max_pixels", {"max_pixels": 200_704}), ("ckpt", {"factor": 28, "min_pixels": 3136})], limits=limits
    )
    assert budget.limits == limits
    assert budget.describe().splitlines() == [
        "pixel budget:",
        "  factor               28   <- ckpt",
        "  min_pixels        3,136   <- ckpt",
        "  max_pixels      200,704   <- flag --max_pixels",
        "  max_tiles             -   <- not used by this family",
        "  image limits: aspect ratio <= 200.0, side >= 14 px (smart_resize ratio limit 200; vision patch 14 px)",
    ]
    # no limits line without limits; a value without a recorded source says so
    assert PixelBudget(28, 3136, 200_704).describe().splitlines()[1:] == [
        "  factor               28   <- unknown",
        "  min_pixels        3,136   <- unknown",
        "  max_pixels      200,704   <- unknown",
        "  max_tiles             -   <- not used by this family",
    ]


def test_to_dict_from_dict_round_trip_and_malformed_records():
    assert TINY.to_dict() == {
        "factor": 28,
        "min_pixels": 3136,
        "max_pixels": 200_704,
        "max_tiles": None,
        "sources": {"factor": "test", "min_pixels": "test", "max_pixels": "test"},
        "limits": {"max_aspect_ratio": None, "min_side": 1},
    }
    for budget in (TINY, GTA1, PixelBudget.published("InternVL", max_tiles=12)):
        back = PixelBudget.from_dict(json.loads(json.dumps(budget.to_dict())), "run.json")
        assert back == budget and back.values() == budget.values()
        assert back.sources == {k: "run.json" for k, v in budget.values().items() if v is not None}
    for data, message in (
        ([28, 3136], "run.json: pixel budget record must be an object, got list"),
        ("x", "run.json: pixel budget record must be an object, got str"),
        ({"max_pixels": True}, "run.json: pixel budget max_pixels must be an integer or null, got True"),
        ({"factor": 28.0}, r"run.json: pixel budget factor must be an integer or null, got 28\.0"),
        ({"factor": 28}, "run.json: pixel budget: a smart_resize factor needs min_pixels and max_pixels"),
        (
            {"factor": 28, "min_pixels": 10, "max_pixels": 5},
            "run.json: pixel budget: min_pixels 10 exceeds max_pixels 5",
        ),
        ({"max_tiles": 0}, "run.json: pixel budget: max_tiles must be a positive integer or None, got 0"),
    ):
        with pytest.raises(ValueError, match=f"^{message}$"):
            PixelBudget.from_dict(data, "run.json")


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
    (run / "vlm_r1_run.json").write_text('{"pixel_budget": ')  # half written
    with pytest.raises(ValueError, match="vlm_r1_run.json: cannot read the recorded pixel budget"):
        recorded_budget(str(run))
    (run / "vlm_r1_run.json").write_text(json.dumps({"world_size": 1}))  # a run before issue 19: no record
    assert recorded_budget(str(run)) is None and recorded_budget(str(ckpt)) is None
    (run / "vlm_r1_run.json").write_text("[1, 2]")
    assert recorded_budget(str(run)) is None
    record(str(run), GTA1)  # a file that is not an object is replaced by one holding the budget
    assert json.loads((run / "vlm_r1_run.json").read_text()) == {"pixel_budget": GTA1.to_dict()}
    record(str(ckpt), TINY)  # a checkpoint's own record wins over its run's
    assert recorded_budget(str(ckpt)) == TINY and recorded_budget(str(run)) == GTA1
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    assert record(str(fresh), TINY) == str(fresh / "vlm_r1_run.json")  # created when absent
    assert json.loads((fresh / "vlm_r1_run.json").read_text()) == {"pixel_budget": TINY.to_dict()}


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
    assert warnings == [
        f"pixel budget: max_pixels 401,408 (profile p) differs from the 200,704 the checkpoint was "
        f"trained at (checkpoint {tmp_path / 'vlm_r1_run.json'}); the model sees other image sizes "
        "than in training"
    ]
    assert [r.getMessage() for r in caplog.records if r.name == "gui_grounding.eval.budget"] == warnings  # logged
    budget, _ = resolve_eval_budget(gta1, model=str(tmp_path), profile=profile, flags={"max_pixels": 100_352})
    assert (budget.max_pixels, budget.sources["max_pixels"], budget.min_pixels) == (100_352, "flag --max-pixels", 3136)
    assert budget.sources["min_pixels"] == "profile p" and budget.sources["factor"] == "profile p"
    # a flag equal to the recorded value: no warning; None flags are "not given"
    budget, warnings = resolve_eval_budget(gta1, model=str(tmp_path), flags={"max_pixels": 200_704, "min_pixels": None})
    assert (budget.max_pixels, budget.sources["max_pixels"], warnings) == (200_704, "flag --max-pixels", [])
    assert budget.sources["min_pixels"] == f"checkpoint {tmp_path / 'vlm_r1_run.json'}"
    # no record: the adapter's published budget, each value citing the adapter's source
    budget, warnings = resolve_eval_budget(gta1, model=str(tmp_path / "elsewhere"), flags={"max_pixels": 401_408})
    assert budget.values() == {"factor": 28, "min_pixels": 3136, "max_pixels": 401_408, "max_tiles": None}
    assert budget.sources["min_pixels"] == gta1.default_budget.sources["min_pixels"] and warnings == []
    internvl, _ = resolve_eval_budget(get_adapter("internvl"), flags={"max_tiles": 2})
    assert (internvl.values(), internvl.sources) == (
        {"factor": None, "min_pixels": None, "max_pixels": None, "max_tiles": 2},
        {"max_tiles": "flag --max-tiles"},
    )
    with pytest.raises(ValueError, match="min_pixels 9,000,000 exceeds max_pixels 200,704"):
        resolve_eval_budget(gta1, model=str(tmp_path), flags={"min_pixels": 9_000_000})


def test_training_budget_sources_from_the_command_line(tmp_path):
    from vlm_r1.grpo_jsonl import parse_args

    yaml = tmp_path / "r.yaml"
    yaml.write_text("max_pixels: 401408\n")
    script, _, _ = parse_args(
        ["--model_name_or_path", "m", "--data_file_paths", "d.jsonl", "--config", str(yaml), "--min_pixels", "6272"]
    )
    assert script.budget_sources["max_pixels"] == f"--config {yaml}"
    assert script.budget_sources["min_pixels"] == "flag --min_pixels"
    assert script.budget_sources["max_anyres_num"].startswith("default of vlm_r1.grpo_jsonl (upstream VLM-R1")
    from gui_grounding.training.gta1 import parse_args as gta1_parse
    from vlm_r1.upstream import GTA1

    script, _, _ = gta1_parse(["--model_name_or_path", "m", "--data_file_paths", "d.jsonl"], dialect=GTA1)
    assert (script.max_pixels, script.budget_sources["max_pixels"]) == (
        12_845_056,
        "default of gui_grounding.train (GTA1 src/grpo_grounding.py:61-68 GRPOScriptArguments, 81f0c4c)",
    )


def test_too_thin_for_the_budget_is_refused_not_resized_twice():
    """A very thin image has no faithful size under some budgets: smart_resize forces its short side to one factor, so
    the sent image is either over the 200:1 ratio the processor accepts (GTA1: 5615x41 -> 5628x28, 201:1) or over the
    budget, which the processor would shrink again (factor 32 at 100,352: 9701x97 -> 3168x32 -> 3136x32)."""
    with pytest.raises(
        ValueError,
        match=r"^a 5615x41 image cannot be sent under this pixel budget: smart_resize gives "
        r"5628x28, which the processor would not keep \(absolute aspect ratio",
    ):
        GTA1.size_sent(5615, 41)
    small32 = PixelBudget.published("test", factor=32, min_pixels=3136, max_pixels=100_352)
    with pytest.raises(ValueError, match=r"smart_resize gives 3168x32, which the processor would not keep \(3136x32\)"):
        small32.size_sent(9701, 97)


@settings(max_examples=300, deadline=None)
@given(w=st.integers(1, 20_000), h=st.integers(1, 200), budget=st.sampled_from([GTA1, TINY]), swap=st.booleans())
def test_any_size_is_sent_faithfully_or_refused(w, h, budget, swap):
    """Thin images included: size_sent either refuses (ValueError) or returns a size the processor keeps."""
    w, h = (h, w) if swap else (w, h)
    try:
        sent = budget.size_sent(w, h)
    except ValueError:
        return
    assert budget.size_sent(*sent) == sent


def test_a_flag_the_family_cannot_use_is_warned_about():
    _, warnings = resolve_eval_budget(get_adapter("gta1"), flags={"max_tiles": 4})
    assert warnings == [
        "pixel budget: --max-tiles has NO effect: the gta1 adapter's family is resized with smart_resize (no tiles)"
    ]
    budget, warnings = resolve_eval_budget(get_adapter("internvl"), flags={"max_pixels": 100_352})
    assert budget.max_tiles == 12 and warnings == [
        "pixel budget: --max-pixels has NO effect: the internvl adapter's family is tiled (no smart_resize)"
    ]
