"""Profiles of the 2026 checkpoints (issue 31 item 4): UI-Venus-1.5-8B, MAI-UI-8B, GUI-Owl-1.5-8B (two requests:
OSWorld-G's adds an infeasible clause) and the OpenCUA-based GTA1-7B.

The prompt strings below are typed from the cited scripts (not read back from the adapters), the image sizes are computed
by hand with transformers' smart_resize rule, and every answer is in the format the authors' code reads, with the
original-pixel point it means on a 1920x1080 screenshot. No model is loaded.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

from gui_grounding.cli import main
from gui_grounding.data.schema import Sample
from gui_grounding.eval.backends import record
from gui_grounding.models.adapters import get_adapter
from gui_grounding.models.profiles import LISTING_ORDER, PROFILES, describe_profile, get_profile

FHD = (1920, 1080)
INSTRUCTION = "Click the search box."  # the trailing "." is dropped by UI-Venus-1.5 only (ui_venus1_5_gd.py:69-70)
NEW = ("ui-venus-1.5-8b", "mai-ui-8b", "gui-owl-1.5-8b", "gui-owl-1.5-8b-osworld-g", "gta1-7b")

# inclusionAI/UI-Venus models/grounding/ui_venus1_5_gd.py:75 (c3a1442), the refusal variant
VENUS = (
    "Output the center point of the position corresponding to the following instruction: \n{}. \n\nThe output should "
    "just be the coordinates of a point, in the format [x,y]. Additionally, if the task is infeasible (e.g., the task "
    "is not related to the image), the output should be [-1,-1]."
)
# Tongyi-MAI/MAI-UI evaluation/grounding/eval_server.py:20-31 (4dd07b9)
MAI_SYSTEM = (
    "You are a GUI grounding agent. \n## Task\nGiven a screenshot and the user's grounding instruction. Your task is "
    "to accurately locate a UI element based on the user's instructions.\nFirst, you should carefully examine the "
    "screenshot and analyze the user's instructions,  translate the user's instruction into a effective reasoning "
    "process, and then provide the final coordinate.\n## Output Format\nReturn a json object with a reasoning "
    "process in <grounding_think></grounding_think> tags, a [x,y] format coordinate within <answer></answer> XML "
    'tags:\n<grounding_think>...</grounding_think>\n<answer>\n{"coordinate": [x,y]}\n</answer>\n## Input instruction\n'
)
# X-PLUG/MobileAgent Mobile-Agent-v3.5/grounding_and_kb/eval_grounding_benchmarks.py:41 (11cea57)
OWL_INFEASIBLE = (
    "Additionally, if you think the task is infeasible (e.g., the task is not related to the image), return "
    '<tool_call>\n{"name": "computer_use", "arguments": {"action": "terminate", "status": "failure"}}\n</tool_call>'
)
# xlang-ai/OpenCUA model/README.md:171-174 (1d70f20)
OPENCUA_SYSTEM = (
    "You are a GUI agent. You are given a task and a screenshot of the screen. You need to perform a series of "
    "pyautogui actions to complete the task."
)

# (profile, image size sent for a 1920x1080 screenshot), by hand: factor 32 (Qwen3-VL family): 1920/32 = 60 -> 1920,
# 1080/32 = 33.75 -> 34*32 = 1088; 2,088,960 pixels is inside every budget. Factor 28 (OpenCUA): 1920/28 = 68.6 -> 69*28
# = 1932, 1080/28 = 38.6 -> 39*28 = 1092; 2,109,744 <= 12,845,056.
SENT = {
    "ui-venus-1.5-8b": (1920, 1088),
    "mai-ui-8b": (1920, 1088),
    "gui-owl-1.5-8b": (1920, 1088),
    "gui-owl-1.5-8b-osworld-g": (1920, 1088),
    "gta1-7b": (1932, 1092),
}


def _request(name: str, size=FHD, instruction=INSTRUCTION):
    profile = get_profile(name)
    adapter = get_adapter(profile.adapter)
    sample = Sample("s", instruction, "", [], *size)
    return sample, adapter, adapter.build_request(sample, Image.new("RGB", size), budget=profile.budget)


def _image_then(text):
    return [{"type": "image"}, {"type": "text", "text": text}]


def test_listing_order_and_families():
    assert LISTING_ORDER[-5:] == NEW and list(PROFILES)[-5:] == list(NEW)
    assert {n: (PROFILES[n].model, PROFILES[n].model_type, PROFILES[n].adapter) for n in NEW} == {
        "ui-venus-1.5-8b": ("inclusionAI/UI-Venus-1.5-8B", "qwen3_vl", "ui-venus-1.5"),
        "mai-ui-8b": ("Tongyi-MAI/MAI-UI-8B", "qwen3_vl", "mai-ui"),
        "gui-owl-1.5-8b": ("mPLUG/GUI-Owl-1.5-8B-Instruct", "qwen3_vl", "gui-owl-1.5"),
        "gui-owl-1.5-8b-osworld-g": ("mPLUG/GUI-Owl-1.5-8B-Instruct", "qwen3_vl", "gui-owl-1.5-infeasible"),
        "gta1-7b": ("Salesforce/GTA1-7B", "opencua", "opencua"),
    }
    # the hf backend has no OpenCUA module: GTA1-7B is served by vLLM or an OpenAI-compatible server only
    assert PROFILES["gta1-7b"].backends == ("vllm", "openai")
    assert all(PROFILES[n].backends == ("hf", "vllm", "openai") for n in NEW[:4])
    assert {n: PROFILES[n].max_new_tokens for n in NEW} == {
        "ui-venus-1.5-8b": 128,  # ui_venus1_5_gd.py:104
        "mai-ui-8b": 256,  # eval_server.py:91
        "gui-owl-1.5-8b": 2048,  # eval_grounding_benchmarks.py:642
        "gui-owl-1.5-8b-osworld-g": 2048,
        "gta1-7b": 512,  # OpenCUA's example, README.md:210 (unverified for GTA1-7B)
    }
    budgets = {
        n: (PROFILES[n].budget.factor, PROFILES[n].budget.min_pixels, PROFILES[n].budget.max_pixels) for n in NEW
    }
    assert budgets == {
        "ui-venus-1.5-8b": (32, 65_536, 12_845_056),
        "mai-ui-8b": (32, 1_024, 6_553_600),
        "gui-owl-1.5-8b": (32, 200_704, 10_035_200),
        "gui-owl-1.5-8b-osworld-g": (32, 200_704, 10_035_200),
        "gta1-7b": (28, 3_136, 12_845_056),
    }


def test_profiles_command_lists_each_new_profile_with_its_sources(capsys):
    main(["profiles"])
    out = capsys.readouterr().out
    for name in NEW:
        assert describe_profile(PROFILES[name]) in out
    assert "inclusionAI/UI-Venus (branch UI-Venus-1.5, c3a1442) models/grounding/ui_venus1_5_gd.py:68-75" in out
    assert "Tongyi-MAI/MAI-UI (4dd07b9) evaluation/grounding/eval_server.py:20-31 (system prompt)" in out
    assert "X-PLUG/MobileAgent (11cea57) Mobile-Agent-v3.5/grounding_and_kb/eval_grounding_benchmarks.py:39" in out
    assert "unverified: the GTA1-7B card's inference snippet could not be read" in out
    main(["profiles", "gta1-7b", "--json"])
    doc = json.loads(capsys.readouterr().out)["gta1-7b"]
    assert doc["backends"] == ["vllm", "openai"]
    assert set(doc["sources"]) == {"adapter", "max_new_tokens", "backends", "model", "refusal", "decoding"}
    assert all(s for s in doc["sources"].values())


@pytest.mark.parametrize("name", NEW)
def test_golden_request_1920x1080(name):
    _, _, request = _request(name)
    assert request.image.size == SENT[name]
    messages = request.messages
    if name == "ui-venus-1.5-8b":  # no system turn; image, then the prompt (instruction without its final ".")
        assert messages == [{"role": "user", "content": _image_then(VENUS.format("Click the search box"))}]
    elif name == "mai-ui-8b":  # text BEFORE the image (eval_server.py:83-88)
        assert messages == [
            {"role": "system", "content": [{"type": "text", "text": MAI_SYSTEM}]},
            {"role": "user", "content": [{"type": "text", "text": INSTRUCTION + "\n"}, {"type": "image"}]},
        ]
    elif name.startswith("gui-owl"):
        system = messages[0]["content"][0]["text"]
        assert messages[1:] == [{"role": "user", "content": _image_then(INSTRUCTION)}]
        # eval_grounding_benchmarks.py:39: 1,559 characters, a 1000x1000 computer_use screen, a trailing newline
        tool = system[:1559]
        assert tool.startswith("# Tools\n\nYou may call one or more functions to assist with the user query.\n")
        assert "* The screen's resolution is 1000x1000.\n" in tool
        assert tool.endswith('<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>\n')
        assert system == (tool if name == "gui-owl-1.5-8b" else tool + "\n" + OWL_INFEASIBLE)
    else:
        assert messages == [
            {"role": "system", "content": [{"type": "text", "text": OPENCUA_SYSTEM}]},
            {"role": "user", "content": _image_then(INSTRUCTION)},
        ]


def test_venus_keeps_an_instruction_without_a_final_period():
    _, _, request = _request("ui-venus-1.5-8b", instruction="Open the menu")
    assert request.messages[0]["content"][1]["text"] == VENUS.format("Open the menu")


# (profile, an answer as the authors' code reads it, the point in original pixels of a 1920x1080 screenshot; None: no
# point)
ANSWERS = [
    ("ui-venus-1.5-8b", "[500,500]", (960.0, 540.0)),  # 0-1000 grid (ui_venus1_5_gd.py:167-170)
    ("ui-venus-1.5-8b", " [250, 750]\n", (480.0, 810.0)),
    ("ui-venus-1.5-8b", "[100,200,300,400]", (384.0, 324.0)),  # a box: its centre (200, 300)
    ("ui-venus-1.5-8b", "[100,200], [300,400]", (384.0, 324.0)),  # two points: their midpoint
    ("ui-venus-1.5-8b", "The element is at [500,500].", (960.0, 540.0)),  # between the first [ and the first ]
    ("ui-venus-1.5-8b", "see [-1,-1,5]", (-1.92, -1.08)),  # three numbers: not the infeasible answer, a point
    ("ui-venus-1.5-8b", "[05,10]", None),  # eval() refuses the leading zero
    ("ui-venus-1.5-8b", "[500.5,500]", None),  # no branch reads decimals
    (
        "mai-ui-8b",
        '<grounding_think>The search box is at the top.</grounding_think>\n<answer>\n{"coordinate":[500,500]}\n'
        "</answer>",
        (960.0, 540.0),
    ),
    ("mai-ui-8b", '<answer>\n{"coordinate":[384,593]}\n</answer>', (737.28, 640.44)),  # output_local/OS_G.json's form
    ("mai-ui-8b", '<answer>\n{"coordinate": [500, 500]}\n</answer>', None),  # "[x,y]" with no space only
    (
        "gui-owl-1.5-8b",
        '<tool_call>\n{"name": "computer_use", "arguments": {"action": "left_click", "coordinate": [500, 500]}}\n'
        "</tool_call>",
        (960.0, 540.0),
    ),
    ("gui-owl-1.5-8b", "first (100, 100), then (250,750)", (480.0, 810.0)),  # the LAST (x,y)
    ("gui-owl-1.5-8b", '{"coordinate": [500,500]}', None),  # "[x, y]" needs exactly one space
    ("gui-owl-1.5-8b-osworld-g", '{"action": "left_click", "coordinate": [250, 750]}', (480.0, 810.0)),
    ("gta1-7b", "pyautogui.click(x=966, y=546)", (960.0, 540.0)),  # resized pixels x 1920/1932, x 1080/1092
    ("gta1-7b", "```python\npyautogui.click(x=483, y=273)\n```", (480.0, 270.0)),
    ("gta1-7b", "click(x=966, y=546)", None),
]


@pytest.mark.parametrize("name, answer, point", ANSWERS)
def test_published_answer_formats(name, answer, point):
    sample, adapter, request = _request(name)
    rec = record(sample, request, answer, adapter)  # what every backend writes
    assert rec.get("refusal") is None
    if point is None:
        assert rec["point"] is None
    else:
        assert tuple(rec["point"]) == pytest.approx(point, abs=1e-9)


REFUSALS = [
    ("ui-venus-1.5-8b", "[-1,-1]"),  # ui_venus1_5_gd.py:119-120,164-165: "infeasible"
    ("ui-venus-1.5-8b", " [-1, -1]\n"),
    ("ui-venus-1.5-8b", "[-1,-1,-1,-1]"),  # a box whose centre is [-1,-1] is read the same way
    ("ui-venus-1.5-8b", "[-1,-1] or [10,10,20,20]"),  # the official reads the first brackets: infeasible
    (
        "gui-owl-1.5-8b",
        '<tool_call>\n{"name": "computer_use", "arguments": {"action": "terminate", "status": "failure"}}',
    ),
    (
        "gui-owl-1.5-8b-osworld-g",
        '<tool_call>\n{"name": "computer_use", "arguments": {"action": "terminate", "status": "failure"}}\n</tool_call>',
    ),
]


@pytest.mark.parametrize("name, answer", REFUSALS)
def test_refusal_answers(name, answer):
    sample, adapter, request = _request(name)
    rec = record(sample, request, answer, adapter)
    assert (rec["point"], rec.get("refusal")) == (None, True)


def test_families_without_a_no_target_answer_never_refuse():
    for name, answer in [("mai-ui-8b", "[-1,-1]"), ("gta1-7b", "pyautogui.click(x=-1, y=-1)")]:
        sample, adapter, request = _request(name)
        rec = record(sample, request, answer, adapter)
        assert (rec["point"], rec.get("refusal")) == (None, None)
    # a terminate call with success, or next to a coordinate, is not GUI-Owl's "no target" answer
    adapter = get_adapter("gui-owl-1.5")
    assert not adapter.is_refusal('{"action": "terminate", "status": "success"}')
    assert not adapter.is_refusal('{"action": "terminate", "status": "failure", "coordinate": [10, 20]}')
    assert {n: PROFILES[n].refusal for n in NEW} == {
        "ui-venus-1.5-8b": "refusal",  # its code reads [-1,-1] as "infeasible"
        "mai-ui-8b": "",
        "gui-owl-1.5-8b": "origin",  # no coordinate -> [0,0], credited on refusal items (:409-410,450-454)
        "gui-owl-1.5-8b-osworld-g": "origin",
        "gta1-7b": "",
    }
    # GUI-Owl's script passes top_p 0.01, top_k 1, temperature 0.01, repetition_penalty 1.0 (:633-640): top_k 1 and
    # a penalty of 1.0 are greedy decoding, so no profile sends extra settings; the source says why
    assert {n: PROFILES[n].decoding for n in NEW} == {n: {} for n in NEW}
    assert "greedy" in PROFILES["gui-owl-1.5-8b"].sources["decoding"]


@pytest.mark.parametrize("adapter_name", ["ui-venus-1.5", "mai-ui", "gui-owl-1.5", "gui-owl-1.5-infeasible", "opencua"])
def test_sft_target_is_read_back_by_the_training_parser(adapter_name):
    adapter = get_adapter(adapter_name)
    box = [100.0, 200.0, 300.0, 401.0]  # in the answer frame; centre (200, 300.5) -> rounded (200, 300)
    target = adapter.sft_target(box, "x")
    assert adapter.parse_answer(target, strict=True) == (200, 300)
    assert not adapter.is_refusal(target)


VENUS_README = "inclusionAI/UI-Venus (branch UI-Venus-1.5, c3a1442) README.md"
CLAW = "ZJU-REAL/ClawGUI clawgui-eval/README.md (d990d3e)"
MAI_ROW = "Tongyi-MAI/MAI-UI (4dd07b9) evaluation/grounding/README.md:86, 'MAI-UI-8B (Tech Report)' row"
GTA1_CARD = "https://huggingface.co/Salesforce/GTA1-7B (model card), row 'GTA1 (Ours) 7B'"
ZOOM = "authors' ZoomIn"

# (benchmark, options, value, denominator, variant, source prefix) of every published number
PUBLISHED = {
    "ui-venus-1.5-8b": [
        ("venusbench-gd", {}, 72.3, "unstated", "", f"{VENUS_README}:210"),
        ("venusbench-gd", {}, 72.6, "unstated", ZOOM, f"{VENUS_README}:211"),
        ("screenspot-pro", {}, 68.4, "", "", f"{VENUS_README}:210"),
        ("screenspot-pro", {}, 73.9, "", ZOOM, f"{VENUS_README}:211"),
        ("osworld-g", {"subset": "plain"}, 69.7, "unstated", "", f"{VENUS_README}:210"),
        ("osworld-g", {"subset": "plain"}, 70.6, "unstated", ZOOM, f"{VENUS_README}:211"),
        ("ui-vision", {}, 46.5, "unstated", "", f"{VENUS_README}:210"),
        ("ui-vision", {}, 51.7, "unstated", ZOOM, f"{VENUS_README}:211"),
        ("screenspot-v2", {}, 95.9, "", "", f"{CLAW}:468 (UI-Venus 1.5-8B), 'official' column"),
        ("mmbench-gui-l2", {}, 88.1, "unstated", "", f"{CLAW}:468 (UI-Venus 1.5-8B), 'official' column"),
    ],
    "mai-ui-8b": [
        ("ui-vision", {}, 40.7, "unstated", "", MAI_ROW),
        ("mmbench-gui-l2", {}, 88.8, "unstated", "", MAI_ROW),
        ("screenspot-pro", {}, 65.8, "", "", MAI_ROW),
        ("screenspot-v2", {}, 95.2, "", "", MAI_ROW),
        ("osworld-g", {"subset": "plain"}, 60.1, "refusal-as-miss", "", MAI_ROW),
        ("osworld-g", {"subset": "refined"}, 68.6, "refusal-as-miss", "", MAI_ROW),
    ],
    "gui-owl-1.5-8b": [
        ("screenspot-pro", {}, 71.1, "", "", f"{CLAW}:459 (GUI-Owl 1.5-8B), 'official' column"),
        ("screenspot-v2", {}, 93.7, "", "", f"{CLAW}:459 (GUI-Owl 1.5-8B), 'official' column"),
        ("mmbench-gui-l2", {}, 82.52, "unstated", "", f"{CLAW}:459 (GUI-Owl 1.5-8B), 'official' column"),
    ],
    "gui-owl-1.5-8b-osworld-g": [
        ("osworld-g", {}, 65.8, "unstated", "", f"{CLAW}:459 (GUI-Owl 1.5-8B), 'official' column"),
    ],
    "gta1-7b": [
        ("screenspot-v2", {}, 93.4, "", "", GTA1_CARD),
        ("screenspot-pro", {}, 55.5, "", "", GTA1_CARD),
        ("osworld-g", {"subset": "plain"}, 60.1, "unstated", "", GTA1_CARD),
        ("osworld-g", {"subset": "refined"}, 68.8, "unstated", "", GTA1_CARD),
    ],
}


@pytest.mark.parametrize("name", NEW)
def test_published_scores(name):
    got = PROFILES[name].published
    assert [(s.benchmark, s.options, s.value, s.denominator, s.variant) for s in got] == [
        row[:5] for row in PUBLISHED[name]
    ]
    assert all(s.source.startswith(row[5]) for s, row in zip(got, PUBLISHED[name], strict=True))
    # the ZoomIn numbers say why they are not compared
    assert all("procedure is unpublished" in s.note for s in got if s.variant)


def test_zoom_numbers_are_listed_never_compared():
    """A plain run on ScreenSpot-Pro is compared with 68.4 only; on VenusBench-GD the authors' rule is used because
    the README does not state its denominator (``headline(None)``)."""
    seen = []

    def headline(denominator):
        seen.append(denominator)
        return {"accuracy": 70.0, "denominator": "all"}

    prof = get_profile("ui-venus-1.5-8b")
    rows = prof.comparison("screenspot-pro", {}, headline)
    assert [(r["published"], r["difference"]) for r in rows] == [(68.4, 1.6)]
    rows = prof.comparison("venusbench-gd", {}, headline)
    assert [(r["published"], r["denominator"]) for r in rows] == [(72.3, "unstated")]
    assert prof.comparison("osworld-g", {"subset": "refined"}, headline) == []
    assert seen == [None, None]


_ANSWER_ALPHABET = st.sampled_from(
    [
        "[",
        "]",
        "(",
        ")",
        ",",
        ", ",
        " ",
        "-",
        "0",
        "5",
        "05",
        "999",
        "-1",
        "1e3",
        ".",
        "\n",
        "x=",
        ", y=",
        "pyautogui.click(",
        '"coordinate":',
        '"action": "terminate"',
        '"status": "failure"',
        "9" * 14,
        "٣",
    ]
)


@settings(max_examples=150, deadline=None)
@given(st.lists(_ANSWER_ALPHABET, max_size=12).map("".join))
def test_any_answer_is_a_bounded_point_a_refusal_or_nothing(text):
    """For every new adapter and any answer: parsing never raises; a point is two finite numbers within the
    predictions reader's bound (1e7), never together with a refusal."""
    for name in ("ui-venus-1.5", "mai-ui", "gui-owl-1.5", "gui-owl-1.5-infeasible", "opencua"):
        adapter = get_adapter(name)
        for strict in (True, False):
            point = adapter.parse_answer(text, strict=strict)
            assert point is None or (len(point) == 2 and all(abs(v) <= 1e7 for v in point)), (name, text)
        assert not (adapter.is_refusal(text) and adapter.parse_answer(text, strict=False) is not None), (name, text)


def test_each_profile_reads_its_no_target_answer_as_its_own_code_does():
    """The profile's reading reaches the run's adapter (``Profile.configure``): UI-Venus-1.5's ``[-1,-1]`` is a refusal
    (its parser's "infeasible"); GUI-Owl-1.5's terminate/failure call is the point (0, 0) its script makes of an
    answer without a coordinate (:409-410), not a refusal; a coordinate answer is read as usual."""
    _, venus, venus_request = _request("ui-venus-1.5-8b")
    venus = get_profile("ui-venus-1.5-8b").configure(venus)
    assert venus.is_refusal("[-1,-1]") and venus.parse("[-1,-1]", venus_request) is None
    assert not venus.is_refusal("[500,500]") and venus.parse("[500,500]", venus_request) == (960.0, 540.0)
    failure = (
        '<tool_call>\n{"name": "computer_use", "arguments": {"action": "terminate", "status": "failure"}}\n</tool_call>'
    )
    for name in ("gui-owl-1.5-8b", "gui-owl-1.5-8b-osworld-g"):
        _, owl, request = _request(name)
        assert owl.is_refusal(failure)  # the adapter alone: the family's no-target answer, a refusal by default
        owl = get_profile(name).configure(owl)
        assert not owl.is_refusal(failure)
        assert owl.parse(failure, request) == (0.0, 0.0)
        assert owl.parse("(250,750)", request) == (480.0, 810.0)
