"""Profiles of published checkpoints (issue 19): golden requests written by hand from each profile's cited source.

For every profile, two screenshots (a 1080x2400 phone portrait and a 3840x2160 4K desktop): the exact messages (system
and user text, image/text order), the image size sent, and the point an answer in the model's published format means
in original pixels. The expected values below are typed from the cited scripts (prompt strings) and computed by hand
with the smart_resize rule of transformers / qwen_vl_utils (round each side to the factor; scale both down by
sqrt(H*W / max_pixels) and floor when over the budget), never read back from our own output.
"""

from __future__ import annotations

import json

import pytest

from gui_grounding.cli import main
from gui_grounding.models.adapters import get_adapter
from gui_grounding.models.profiles import LISTING_ORDER, PROFILES, get_profile, profiles_table

PORTRAIT, UHD = (1080, 2400), (3840, 2160)
INSTRUCTION = "Click the search box"

# GTA1's SYSTEM_PROMPT (Yan98/GTA1 README.md:123-130, 81f0c4c), .strip()-ed, for a given resized size
GTA1_SYSTEM = (
    "You are an expert UI element locator. Given a GUI image and a user's element description, provide the coordinates "
    "of the specified element as a single (x,y) point. The image resolution is height {h} and width {w}. For elements "
    "with area, return the center point.\n\nOutput the coordinate pair exactly:\n(x,y)"
)
# bytedance/UI-TARS README_v1.md:320 (582f3a7), the instruction appended
UI_TARS_TEXT = "Output only the coordinate of one point in your response. What element matches the following task: "
# inclusionAI/UI-Venus ui_venus_ground_7b.py:39 (fc7670d) = ZJU-REAL/GUI-G2 README.md:174 (5c5c365)
OUTLINE = "Outline the position corresponding to the instruction: {}. The output should be only [x1,y1,x2,y2]."
# likaixin2000/ScreenSpot-Pro-GUI-Grounding models/internvl.py:124 (bd8bbbb), after "<image>\n"
INTERNVL_TEXT = (
    "Please provide the bounding box coordinate of the UI element this user instruction describes: "
    "<ref>{}</ref>. Answer in the format of [[x1, y1, x2, y2]]\u00df"
)
# QwenLM/Qwen3-VL cookbooks/spatial_understanding.ipynb pointing request (our qwen3-vl adapter)
QWEN3_TEXT = (
    'Locate the UI element that matches the instruction "{}" in this screenshot. Output the point coordinates '
    'in JSON format like {{"point_2d": [x, y], "label": "element"}}.'
)

# (profile, size sent for the portrait, size sent for the 4K screenshot), by hand:
# factor 28, 3,136 .. 8,847,360 (GTA1): 2400/28 = 85.7 -> 86*28 = 2408, 1080/28 = 38.6 -> 39*28 = 1092;
#   3840/28 = 137.1 -> 3836, 2160/28 = 77.1 -> 2156; 3836*2156 = 8,270,416 <= 8,847,360: no downscale
# UI-Venus 2,000,000 .. 4,800,000: 4K over budget, beta = sqrt(3840*2160 / 4.8e6) = 1.3145;
#   floor(3840/1.3145/28) = 104 -> 2912, floor(2160/1.3145/28) = 58 -> 1624
# Qwen3-VL factor 32: 1080/32 = 33.75 -> 34*32 = 1088, 2400/32 = 75 -> 2400; 2160/32 = 67.5 -> 68 (half to even) -> 2176
SIZES = {
    "gta1-7b-2507": ((1092, 2408), (3836, 2156)),
    "gta1-32b-2507": ((1092, 2408), (3836, 2156)),
    "gta1-72b-2507": ((1092, 2408), (3836, 2156)),
    "ui-tars-1.5-7b": ((1092, 2408), (3836, 2156)),
    "ui-tars-1.5-7b-api": ((1092, 2408), (3836, 2156)),  # the same request, the published snippet's decoding
    "qwen2.5-vl-7b": ((1092, 2408), (3836, 2156)),
    "qwen2.5-vl-32b": ((1092, 2408), (3836, 2156)),
    "qwen2.5-vl-72b": ((1092, 2408), (3836, 2156)),
    "qwen3-vl-8b": ((1088, 2400), (3840, 2176)),
    "ui-venus-ground-7b": ((1092, 2408), (2912, 1624)),
    "gui-g2-7b": ((1092, 2408), (3836, 2156)),
    "internvl3-8b": (PORTRAIT, UHD),  # tiles: the original is sent
    # the 2026 checkpoints (their requests: tests/test_profiles_2026.py). Factor 32: portrait as qwen3-vl-8b; 4K
    # 3840x2176 under 12,845,056 (UI-Venus-1.5) and 10,035,200 (GUI-Owl-1.5); MAI-UI's 6,553,600: beta =
    # sqrt(3840*2160 / 6553600) = 1.125, floor(3840/1.125/32) = 106 -> 3392, floor(2160/1.125/32) = 60 -> 1920.
    # OpenCUA (GTA1-7B): factor 28, 3,136 .. 12,845,056, as GTA1-2507's sizes
    "ui-venus-1.5-8b": ((1088, 2400), (3840, 2176)),
    "mai-ui-8b": ((1088, 2400), (3392, 1920)),
    "gui-owl-1.5-8b": ((1088, 2400), (3840, 2176)),
    "gui-owl-1.5-8b-osworld-g": ((1088, 2400), (3840, 2176)),
    "gta1-7b": ((1092, 2408), (3836, 2156)),
}
#: adapters of the 2026 checkpoints, whose exact messages tests/test_profiles_2026.py checks
ADAPTERS_2026 = {"ui-venus-1.5", "mai-ui", "gui-owl-1.5", "gui-owl-1.5-infeasible", "opencua"}


def _user(text):
    return {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": text}]}


def _expected_messages(profile: str, sent: tuple[int, int]) -> list[dict]:
    w, h = sent
    adapter = get_profile(profile).adapter
    if adapter == "gta1":
        return [
            {"role": "system", "content": [{"type": "text", "text": GTA1_SYSTEM.format(h=h, w=w)}]},
            _user(INSTRUCTION),
        ]
    if adapter == "ui-tars-1.5":
        return [_user(UI_TARS_TEXT + INSTRUCTION)]
    if adapter in ("ui-venus-ground", "gui-g2"):
        return [_user(OUTLINE.format(INSTRUCTION))]
    if adapter == "internvl-gui":
        return [_user(INTERNVL_TEXT.format(INSTRUCTION))]
    if adapter == "qwen3-vl":
        return [_user(QWEN3_TEXT.format(INSTRUCTION))]
    if adapter in ADAPTERS_2026:
        return None  # checked in tests/test_profiles_2026.py
    assert adapter == "qwen2.5-vl"
    return None  # checked on its own (the long computer_use text), see test_qwen25vl_request_is_the_harness_request


def test_the_required_checkpoints_have_profiles():
    assert set(PROFILES) == set(SIZES)
    assert {p.adapter for p in PROFILES.values()} == {
        "gta1",
        "ui-tars-1.5",
        "qwen2.5-vl",
        "qwen3-vl",
        "ui-venus-ground",
        "gui-g2",
        "internvl-gui",
        *ADAPTERS_2026,
    }
    assert PROFILES["gta1-72b-2507"].backends == ("vllm", "openai")  # a 72B needs tensor parallelism
    assert "hf" in PROFILES["gta1-7b-2507"].backends


def test_each_family_file_declares_its_own_profiles():
    """A family's published checkpoints are the ``PROFILES`` of its adapter file and use that file's adapters only, so
    removing the file takes exactly its profiles with it (``tests/test_thin_core.py`` removes two families); the
    registry lists those named in ``LISTING_ORDER`` first, in that order."""
    import importlib
    import pkgutil

    import gui_grounding.models.adapters as package

    declared = {}
    for info in pkgutil.iter_modules(package.__path__):
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        own = {cls.name for cls in getattr(module, "ADAPTERS", ())}
        for profile in getattr(module, "PROFILES", ()):
            assert profile.adapter in own, (info.name, profile.name, profile.adapter)
            declared[profile.name] = (info.name, profile)
    assert {name: p for name, (_, p) in declared.items()} == PROFILES
    assert {name: family for name, (family, _) in declared.items() if family != "qwen2_5_vl"} == {
        "qwen3-vl-8b": "qwen3_vl",
        "internvl3-8b": "internvl",
        "ui-venus-1.5-8b": "qwen3_vl",
        "mai-ui-8b": "qwen3_vl",
        "gui-owl-1.5-8b": "qwen3_vl",
        "gui-owl-1.5-8b-osworld-g": "qwen3_vl",
        "gta1-7b": "opencua",
    }
    listed = [name for name in LISTING_ORDER if name in PROFILES]  # first, in that order; a new family's follow
    assert listed == list(LISTING_ORDER) and list(PROFILES)[: len(listed)] == listed


def test_every_value_is_cited():
    for p in PROFILES.values():
        assert all(p.sources.get(k) for k in ("adapter", "max_new_tokens", "backends")), p.name
        assert all(p.budget.sources.get(k) for k, v in p.budget.values().items() if v is not None), p.name
        assert all(s.source for s in p.published), p.name
    gta1 = get_profile("gta1-7b-2507")
    assert [(s.benchmark, s.options, s.value) for s in gta1.published] == [
        ("screenspot-pro", {}, 50.1),
        ("screenspot-v2", {}, 92.4),
        ("osworld-g", {"subset": "plain"}, 55.1),
        ("osworld-g", {"subset": "refined"}, 67.7),
    ]
    assert gta1.options_for("osworld-g") == {"subset": "refined"} and gta1.max_new_tokens == 32


@pytest.mark.parametrize("name", sorted(SIZES))
@pytest.mark.parametrize("which", [0, 1])
def test_golden_request(name, which):
    from PIL import Image

    from gui_grounding.data.schema import Sample

    profile = get_profile(name)
    adapter = get_adapter(profile.adapter)
    original = (PORTRAIT, UHD)[which]
    sent = SIZES[name][which]
    request = adapter.build_request(
        Sample("s", INSTRUCTION, "", [], *original), Image.new("RGB", original), budget=profile.budget
    )
    assert request.image.size == sent
    expected = _expected_messages(name, sent)
    if expected is not None:
        assert request.messages == expected


# (profile, screenshot, an answer in the model's published format, the point it means in original pixels): the answer
# is the centre of the screenshot in the model's frame, so the right answer is (W/2, H/2) exactly
ANSWERS = [
    ("gta1-7b-2507", UHD, "(1918,1078)", (1920.0, 1080.0)),  # resized pixels x W/W' (README.md:132-138)
    ("gta1-7b-2507", PORTRAIT, "(546,1204)", (540.0, 1200.0)),
    ("ui-tars-1.5-7b", PORTRAIT, "click(start_box='<|box_start|>(546,1204)<|box_end|>')", (540.0, 1200.0)),
    ("ui-venus-ground-7b", UHD, "[1446,802,1466,822]", (1920.0, 1080.0)),  # box centre (1456, 812) in 2912x1624
    ("gui-g2-7b", PORTRAIT, "[500,1180,592,1228]", (540.0, 1200.0)),  # centre (546, 1204) in 1092x2408
    ("qwen2.5-vl-7b", UHD, "1918, 1078]}}\n</tool_call>", (1920.0, 1080.0)),  # continues the forced guide
    ("qwen3-vl-8b", PORTRAIT, '{"point_2d": [500, 500], "label": "search box"}', (540.0, 1200.0)),  # 0-1000 grid
    ("internvl3-8b", UHD, "<ref>x</ref>[[450, 480, 550, 520]]", (1920.0, 1080.0)),  # 0-1000 box centre
]


@pytest.mark.parametrize("name, original, answer, point", ANSWERS)
def test_official_answers_parse_to_the_same_point(name, original, answer, point):
    from PIL import Image

    from gui_grounding.data.schema import Sample
    from gui_grounding.eval.backends import record

    profile = get_profile(name)
    adapter = get_adapter(profile.adapter)
    sample = Sample("s", INSTRUCTION, "", [], *original)
    request = adapter.build_request(sample, Image.new("RGB", original), budget=profile.budget)
    rec = record(sample, request, answer, adapter)  # what every backend writes (assistant prefix put back first)
    assert tuple(rec["point"]) == pytest.approx(point, abs=1e-9)


def test_refusal_answers():
    from PIL import Image

    from gui_grounding.data.schema import Sample
    from gui_grounding.eval.backends import record

    adapter = get_adapter("ui-venus-ground")
    sample = Sample("s", INSTRUCTION, "", [], *PORTRAIT)
    request = adapter.build_request(sample, Image.new("RGB", PORTRAIT))
    for answer in ("[-1,-1]", " [-1, -1]\n", "[-1,-1,-1,-1]"):
        rec = record(sample, request, answer, adapter)
        assert (rec["point"], rec.get("refusal")) == (None, True), answer
    rec = record(sample, request, "[-1,-1] or [10,10,20,20]", adapter)  # not the refusal answer alone: no refusal,
    assert rec.get("refusal") is None and rec["point"] is None  # and its first list literal holds two numbers: no box
    rec = record(sample, request, "[-1,-1,-1,-1] [10,10,20,20]", adapter)  # a four-number literal first: its box
    assert rec.get("refusal") is None and rec["point"] is not None
    gta1 = get_adapter("gta1")  # a family without a refusal answer never refuses
    assert not gta1.is_refusal("[-1,-1]")


def test_qwen25vl_request_is_the_harness_request(tiny_qwen25_dir):
    """The rendered prompt equals the harness's own GUIDED_PROMPT (models/qwen2_5vl.py:71-109, bd8bbbb): the system
    turn with "You are a helpful assistant." then the computer_use tool text for the RESIZED resolution, the user turn
    with the image then the instruction, and the forced assistant guide."""
    from PIL import Image

    from gui_grounding.data.schema import Sample
    from gui_grounding.models.adapters.qwen2_5_vl import QWEN25VL_COMPUTER_USE_SYSTEM
    from vlm_r1.modules import load_processor

    profile = get_profile("qwen2.5-vl-7b")
    adapter = get_adapter(profile.adapter)
    request = adapter.build_request(
        Sample("s", INSTRUCTION, "", [], *UHD), Image.new("RGB", UHD), budget=profile.budget
    )
    tools = request.messages[0]["content"][1]["text"]
    assert tools.startswith("\n\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n")
    assert "* The screen's resolution is 3836x2156.\n" in tools  # the resized size (qwen2_5vl.py:154)
    assert tools.endswith('<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>')
    # 3,479 characters in the harness with its "{{screen_width}}x{{screen_height}}" (34 characters): 3,454 with "3836x2156"
    assert len(tools) == len(QWEN25VL_COMPUTER_USE_SYSTEM.format(width=3836, height=2156)) == 3479 - 34 + 9
    processor = load_processor(tiny_qwen25_dir)
    text = processor.apply_chat_template(request.messages, tokenize=False, add_generation_prompt=True)
    assert text + request.assistant_prefix == (
        "<|im_start|>system\nYou are a helpful assistant." + tools + "<|im_end|>\n<|im_start|>user\n"
        "<|vision_start|><|image_pad|><|vision_end|>" + INSTRUCTION + "<|im_end|>\n<|im_start|>assistant\n"
        '<tool_call>\n{"name": "computer_use", "arguments": {"action": "left_click", "coordinate": ['
    )


def test_prompt_cli_with_profile_and_parse(capsys):
    main(
        [
            "prompt",
            "--profile",
            "gta1-7b-2507",
            "--image-size",
            "3840x2160",
            "--instruction",
            INSTRUCTION,
            "--parse",
            "(1918,1078)",
        ]
    )
    out = json.loads(capsys.readouterr().out)
    assert (out["profile"], out["adapter"], out["resized_size"]) == ("gta1-7b-2507", "gta1", [3836, 2156])
    assert out["answer_frame"] == {"name": "resized", "size": [3836.0, 2156.0]}
    assert (out["answer_point"], out["parsed_point"]) == ([1918.0, 1078.0], [1920.0, 1080.0])
    assert out["messages"][0]["content"][0]["text"] == GTA1_SYSTEM.format(h=2156, w=3836)


def test_profiles_command_and_docs_table(capsys):
    main(["profiles"])
    out = capsys.readouterr().out
    assert out.startswith(profiles_table())
    assert "Yan98/GTA1 README.md (81f0c4c):21" in out
    main(["profiles", "ui-venus-ground-7b", "--json"])
    doc = json.loads(capsys.readouterr().out)["ui-venus-ground-7b"]
    assert (doc["pixel_budget"]["min_pixels"], doc["pixel_budget"]["max_pixels"], doc["decoding"]) == (
        2_000_000,
        4_800_000,
        {"greedy": True, "max_new_tokens": 128},
    )
    with open("docs/EVALUATION.md", encoding="utf-8") as f:
        assert profiles_table() in f.read()  # the documented table is the registry's


def test_eval_with_profile_shows_published_numbers(tmp_path):
    """Rescoring with --profile: metrics.json gets the published rows of that benchmark and subset, each flagged."""
    from gui_grounding.eval.benchmarks import get_benchmark
    from gui_grounding.eval.run import run_eval

    data = "data/mini_benchmarks/osworld_g"
    samples, _ = get_benchmark("osworld-g", subset="plain").load(data)
    preds = tmp_path / "p.jsonl"
    lines = []
    for s in samples:  # every bbox item hit at its centre, refusal items refused, polygons missed
        point = [(s.boxes[0][0] + s.boxes[0][2]) / 2, (s.boxes[0][1] + s.boxes[0][3]) / 2] if s.boxes else None
        lines.append({"sample_id": s.sample_id, "point": point, **({"refusal": True} if s.refusal else {})})
    preds.write_text("".join(json.dumps(r) + "\n" for r in lines))
    doc = run_eval(
        "osworld-g",
        data,
        str(tmp_path / "out"),
        predictions=str(preds),
        profile="gta1-7b-2507",
        benchmark_options={"subset": "plain"},
    )
    n_box, n_refusal = sum(bool(s.boxes) for s in samples), sum(s.refusal for s in samples)
    ours = round(100.0 * (n_box + n_refusal) / len(samples), 2)
    assert doc["overall"]["accuracy"] == ours
    assert doc["published"]["rows"] == [
        {
            "published": 55.1,
            "ours": ours,
            "difference": round(ours - 55.1, 2),
            "within_1_point": abs(ours - 55.1) <= 1,
            "denominator": "unstated",  # the README does not say how refusal items were counted
            "ours_over": "refusal-scored",
            "source": "Yan98/GTA1 README.md (81f0c4c):21",
            "options": {"subset": "plain"},
            "note": "",
        }
    ]
    assert doc["meta"]["profile"] == "gta1-7b-2507"
    assert "**Published vs ours**" in (tmp_path / "out" / "results.md").read_text()
