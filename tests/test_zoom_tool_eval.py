"""``gui-grounding eval --tts zoom-tool`` (the model decides whether to zoom) and the zoom tool's helpers
(gui_grounding.models.zoom_tool): the driver with a scripted engine (exact original-pixel points for a call, no call,
every reject, a second call, resume), its scoring beside greedy, the three backends' multi-image requests (hf's
processor inputs, the openai and vllm messages with fakes), ``gui-grounding prompt --zoom-tool``, and the parser and
window on hostile values (with hypothesis properties).

The numbers: a 1000x800 screenshot under the budget factor 28, 3,136 .. 200,704 pixels is sent at 476x392 (gta1:
answers in those pixels). A call on [119, 98, 238, 196] covers [250, 200, 500, 400] of the screenshot (x * 1000/476,
y * 800/392, all exact); that 250x200 crop is sent at 252x196, so "(126,98)" in it is (125, 100) of the crop,
(375, 300) of the screenshot.
"""

from __future__ import annotations

import copy
import json
import math
import sys
import types

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

from groundwork.pixel_budget import PixelBudget
from gui_grounding.data.schema import Sample
from gui_grounding.eval.engine import Draw, Engine
from gui_grounding.eval.run import run_eval
from gui_grounding.eval.tts import TTSConfig, predict_tts
from gui_grounding.models import zoom_tool
from gui_grounding.models.adapters import get_adapter
from gui_grounding.models.frames import CropWindow, Frame

BUDGET = PixelBudget(28, 3136, 200704)
W, H = 1000, 800
RED = (255, 0, 0)


def call(*box) -> str:
    return zoom_tool.call_text(box)


CALL_A = call(119, 98, 238, 196)  # -> window [250, 200, 500, 400]


@pytest.fixture(scope="module")
def shot(tmp_path_factory):
    path = tmp_path_factory.mktemp("zt") / "s.png"
    im = Image.new("RGB", (W, H), (200, 200, 200))
    im.paste(RED, (250, 200, 500, 400))  # exactly the window of CALL_A
    im.save(path)
    return str(path)


def sample(sid: str, path: str, box=(360.0, 290.0, 390.0, 310.0)) -> Sample:
    return Sample(sid, f"Click {sid}", path, [box], W, H)


class ToolEngine(Engine):
    """Scripted greedy answers keyed by (sample_id, turn): turn 0 is the plain greedy prompt, turn k the k-th
    zoom-tool turn (k images sent: the screenshot and k-1 crops). Records every request."""

    name = "tool-script"
    chunk_size = 3

    def __init__(self, script: dict, errors=()):
        self.script, self.errors, self.requests = script, set(errors), []

    def generate(self, requests, *, n, temperature, top_p=1.0, seeds=None):
        assert n == 1 and temperature == 0
        out = []
        for r in requests:
            tool = "<tools>" in json.dumps(r.messages)
            key = (r.context["sample_id"], len(r.images) if tool else 0)
            self.requests.append((key, r))
            image_parts = sum(
                p.get("type") == "image" for m in r.messages if isinstance(m["content"], list) for p in m["content"]
            )
            assert image_parts == len(r.images)  # one image per placeholder, in order
            if key in self.errors:
                out.append(Draw([], calls=1, error="boom"))
                continue
            out.append(Draw([self.script[key]], calls=1, prompt_tokens=100 * len(r.images), generated_tokens=7))
        return out


def run(tmp_path, samples, script, *, calls=1, name="p.jsonl", errors=()):
    engine = ToolEngine(script, errors)
    out = tmp_path / name
    predict_tts(
        engine,
        samples,
        str(out),
        adapter=get_adapter("gta1"),
        budget=BUDGET,
        tts=TTSConfig(mode="zoom-tool", max_zoom_calls=calls),
    )
    return engine, {x["sample_id"]: x for x in map(json.loads, out.read_text().splitlines())}


SCRIPT = {
    ("a", 0): "(10,10)",
    ("a", 1): CALL_A,
    ("a", 2): "(126,98)",
    ("b", 0): "(10,10)",
    ("b", 1): "(238,196)",  # no call: the answer, (500, 400)
    ("c", 0): "(10,10)",
    ("c", 1): '<tool_call>{"name": "zoom", "arguments": {"bbox_2d": [1, 2, 3]}}</tool_call>',
    ("d", 0): "(10,10)",
    ("d", 1): call(238, 196, 119, 98),
    ("e", 0): "(10,10)",
    ("e", 1): CALL_A,
    ("e", 2): call(0, 0, 100, 100),  # a second call, one allowed
    ("f", 0): "(10,10)",
    ("f", 1): call(500, 500, 600, 600),  # past the 476x392 frame
    ("g", 0): "(10,10)",
    ("g", 1): call(0, 0, 476, 1),  # 1000x3 of the screenshot: aspect ratio 333
    ("h", 0): "(10,10)",
    ("h", 1): call(10, 10, 10, 20),  # no width
}


def test_zoom_tool_driver_exact_points_and_every_reject(tmp_path, shot):
    ids = "abcdefgh"
    engine, lines = run(tmp_path, [sample(s, shot) for s in ids], SCRIPT)
    a = lines["a"]
    # the greedy answer stays the plain prompt's, exactly as a greedy run writes it
    assert a["point"] == [10 * 1000 / 476, 10 * 800 / 392] and a["raw_response"] == "(10,10)"
    assert "<tools>" not in a["prompt"] and "<tools>" in a["tts"]["prompt"]
    assert a["tts"] == {
        "mode": "zoom-tool",
        "point": [375.0, 300.0],
        "agreement": None,
        "refusal": False,
        "zoomed": True,
        "reject": None,
        "max_zoom_calls": 1,
        "prompt": a["tts"]["prompt"],
        "turns": [
            {"text": CALL_A, "call": [119.0, 98.0, 238.0, 196.0]},
            {
                "text": "(126,98)",
                "window": [250, 200, 500, 400],
                "crop_size": [252, 196],
                "crop_answer": [126.0, 98.0],
                "point": [375.0, 300.0],
            },
        ],
    }
    assert set(a["cost"]) == {"greedy", "tool"}
    assert {k: v for k, v in a["cost"]["tool"].items() if k != "wall_s"} == {
        "calls": 2,
        "sequences": 2,
        "prompt_tokens": 300,
        "generated_tokens": 14,
    }
    # turn 2: turn 1's messages, the call as the assistant's turn, the tool's answer; screenshot then crop
    (turn2,) = [r for key, r in engine.requests if key == ("a", 2)]
    (turn1,) = [r for key, r in engine.requests if key == ("a", 1)]
    assert turn2.messages[: len(turn1.messages)] == turn1.messages
    assert turn2.messages[len(turn1.messages)] == {"role": "assistant", "content": [{"type": "text", "text": CALL_A}]}
    assert turn2.messages[-1]["content"][-1]["text"].endswith(
        "The zoomed image resolution is height 196 and width 252.\n</tool_response>"
    )
    assert [im.size for im in turn2.images] == [(476, 392), (252, 196)]
    assert turn2.images[1].getextrema() == ((255, 255), (0, 0), (0, 0))  # the crop of the original: all red
    assert turn2.image is turn1.image

    b = lines["b"]["tts"]
    assert (b["point"], b["zoomed"], b["reject"]) == ([500.0, 400.0], False, None)
    assert b["turns"] == [{"text": "(238,196)"}] and lines["b"]["cost"]["tool"]["calls"] == 1
    for sid, reason in {
        "c": "malformed",
        "d": "inverted",
        "e": "over_limit",
        "f": "outside_image",
        "g": "unsendable",
        "h": "degenerate",
    }.items():
        info = lines[sid]["tts"]
        assert (info["point"], info["reject"]) == (None, reason), sid
        assert "error" not in lines[sid]
    assert lines["e"]["tts"]["zoomed"] is True and len(lines["e"]["tts"]["turns"]) == 2
    assert lines["g"]["tts"]["zoomed"] is False and lines["g"]["tts"]["turns"][0]["call"] == [0.0, 0.0, 476.0, 1.0]
    assert [key for key, _ in engine.requests if key[1] == 2] == [("a", 2), ("e", 2)]  # rejects ask no more


def test_zoom_tool_second_call_zooms_inside_the_crop(tmp_path, shot):
    # turn 2 calls [63, 49, 126, 98] of the 252x196 crop: crop pixels [62.5, 50, 125, 100] -> [62, 50, 125, 100],
    # moved by (250, 200): [312, 250, 375, 300] of the screenshot, a 63x50 crop sent at 56x56; "(28,28)" there is
    # (31.5, 25) of the crop, (343.5, 275) of the screenshot
    script = {
        ("a", 0): "(1,1)",
        ("a", 1): CALL_A,
        ("a", 2): call(63, 49, 126, 98),
        ("a", 3): "(28,28)",
        ("e", 0): "(1,1)",
        ("e", 1): CALL_A,
        ("e", 2): CALL_A,
        ("e", 3): CALL_A,  # a third call, two allowed
    }
    engine, lines = run(tmp_path, [sample("a", shot), sample("e", shot)], script, calls=2)
    info = lines["a"]["tts"]
    assert info["point"] == [343.5, 275.0] and info["reject"] is None
    assert [t.get("window") for t in info["turns"]] == [None, [250, 200, 500, 400], [312, 250, 375, 300]]
    assert info["turns"][2]["crop_size"] == [56, 56] and info["turns"][2]["crop_answer"] == [28.0, 28.0]
    (last,) = [r for key, r in engine.requests if key == ("a", 3)]
    assert [im.size for im in last.images] == [(476, 392), (252, 196), (56, 56)]
    assert "at most 2 times" in info["prompt"]
    assert lines["e"]["tts"]["reject"] == "over_limit" and len(lines["e"]["tts"]["turns"]) == 3
    assert lines["a"]["cost"]["tool"]["calls"] == 3


def test_zoom_tool_failed_request_is_redone_on_resume(tmp_path, shot):
    samples = [sample("a", shot), sample("b", shot)]
    _, lines = run(tmp_path, samples, SCRIPT, errors={("b", 1)})
    assert lines["b"]["error"] == "boom" and lines["b"]["tts"]["point"] is None
    assert lines["b"]["tts"]["turns"] == [{"text": "ERROR: boom"}]
    engine, lines = run(tmp_path, samples, SCRIPT)
    assert {key[0] for key, _ in engine.requests} == {"b"}  # a is kept, b asked again
    assert lines["b"]["tts"]["point"] == [500.0, 400.0] and "error" not in lines["b"]


def test_zoom_tool_needs_an_adapter_with_a_tool_format(tmp_path, shot):
    with pytest.raises(ValueError, match="supports_zoom_tool"):
        predict_tts(
            ToolEngine({}),
            [sample("a", shot)],
            str(tmp_path / "p.jsonl"),
            adapter=get_adapter("qwen2-vl"),
            budget=BUDGET,
            tts=TTSConfig(mode="zoom-tool"),
        )
    for bad in (0, 9, True, 1.0):
        with pytest.raises(ValueError, match="max zoom calls"):
            TTSConfig(mode="zoom-tool", max_zoom_calls=bad)
    assert "max_zoom_calls" not in TTSConfig(mode="zoom").to_dict()  # the other modes' records are unchanged
    assert TTSConfig(mode="zoom-tool", max_zoom_calls=3).images_per_prompt == 4
    assert TTSConfig(mode="zoom-tool").label() == "zoom-tool (at most 1 call)"


def test_zoom_tool_scored_beside_greedy(tmp_path, shot):
    samples = [sample(s, shot) for s in "abc"]
    run(tmp_path, samples, SCRIPT)
    data = tmp_path / "test.jsonl"
    keys = ("x_min", "y_min", "x_max", "y_max")
    data.write_text(
        "".join(
            json.dumps(
                {
                    "sample_id": s.sample_id,
                    "instruction": s.instruction,
                    "image_path": s.image_path,
                    "target_bbox": dict(zip(keys, s.boxes[0], strict=True)),
                    "image_width": W,
                    "image_height": H,
                }
            )
            + "\n"
            for s in samples
        )
    )
    doc = run_eval(
        "canonical",
        str(data),
        str(tmp_path / "ev"),
        predictions=str(tmp_path / "p.jsonl"),
        tts=TTSConfig(mode="zoom-tool"),
        max_failures=0,
    )
    assert doc["overall"]["num_correct"] == 1 and doc["greedy"]["overall"]["num_correct"] == 0  # a: (375, 300)
    tool = doc["tts"]["zoom_tool"]
    assert tool == {
        "max_zoom_calls": 1,
        "samples": 3,
        "zoomed": 1,
        "zoomed_share": 0.3333,
        "rejected": 1,
        "rejects": {"malformed": 1},
        "turns_per_sample": 1.3333,
    }
    cost = doc["tts"]["cost"]["zoom-tool"]
    assert (cost["calls"], cost["calls_per_sample"], cost["generated_tokens"]) == (4, 1.3333, 28)
    assert doc["tts"]["cost"]["greedy"]["calls_per_sample"] == 1.0 and "wall_s_per_sample" in cost
    md = (tmp_path / "ev" / "results.md").read_text()
    assert "## Test-time mode: zoom-tool (at most 1 call)" in md and "zoomed on 1 of 3 samples (33.3%)" in md
    # a hostile record: a reject code it does not know, a non-bool zoomed, a point beside the mode's
    lines = [json.loads(x) for x in (tmp_path / "p.jsonl").read_text().splitlines()]
    lines[0]["tts"].update(reject="<script>", zoomed="yes", turns="x")
    (tmp_path / "h.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    doc = run_eval(
        "canonical",
        str(data),
        str(tmp_path / "ev2"),
        predictions=str(tmp_path / "h.jsonl"),
        tts=TTSConfig(mode="zoom-tool"),
        max_failures=0,
    )
    assert doc["tts"]["zoom_tool"]["rejects"] == {"malformed": 1, "unknown": 1}
    assert doc["tts"]["zoom_tool"]["zoomed"] == 0
    from gui_grounding.eval.compare import rescore_command

    assert rescore_command("o", doc).endswith("--tts zoom-tool --tts-region 50 --max-zoom-calls 1 --out o")


# ---------------------------------------------------------------------------------------------------------------------
# the backends: several images per request


def _two_image_request(shot):
    adapter = get_adapter("gta1")
    request = adapter.build_request(
        sample("a", shot),
        Image.open(shot).convert("RGB"),
        budget=BUDGET,
        messages=lambda frame: adapter.zoom_messages("Click a", frame),
    )
    crop = Image.new("RGB", (252, 196), RED)
    messages = zoom_tool.next_turn_messages(request.messages, CALL_A, adapter, BUDGET.frame(250, 200))
    request.messages, request.extra_images = messages, [crop]
    return request


def test_openai_messages_send_every_image_in_message_order(shot):
    import base64
    import io

    from gui_grounding.eval.backends import openai_messages

    request = _two_image_request(shot)
    out = openai_messages(request)
    assert out[-2] == {"role": "assistant", "content": CALL_A}
    urls = [
        p["image_url"]["url"] for m in out if isinstance(m["content"], list) for p in m["content"] if "image_url" in p
    ]
    sizes = []
    for url in urls:
        with Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1]))) as im:
            sizes.append(im.size)
    assert sizes == [(476, 392), (252, 196)]
    request.extra_images = []
    with pytest.raises(ValueError, match="more image parts"):
        openai_messages(request)


def test_hf_inputs_take_every_image_flat_in_prompt_order(shot):
    from gui_grounding.eval.backends.hf import _model_inputs

    seen = {}

    class Processor:
        def apply_chat_template(self, messages, tokenize, add_generation_prompt):
            return f"{len(messages)} messages"

    class Inputs(dict):
        def to(self, device):
            return self

    class Module:
        def prepare_model_inputs(self, processor, texts, images):
            seen["texts"], seen["images"] = texts, [im.size for im in images]
            return Inputs(), []

    two = _two_image_request(shot)
    one = get_adapter("gta1").build_request(sample("b", shot), Image.open(shot).convert("RGB"), budget=BUDGET)
    _model_inputs(Processor(), Module(), [two, one], "cpu")
    assert seen["images"] == [(476, 392), (252, 196), (476, 392)]


def _chat_messages_sizes(messages):
    import base64
    import io

    sizes = []
    for m in messages:
        for p in m["content"] if isinstance(m["content"], list) else []:
            if p["type"] == "image_url":
                with Image.open(io.BytesIO(base64.b64decode(p["image_url"]["url"].split(",", 1)[1]))) as im:
                    sizes.append(im.size)
    return sizes


def _answer_by_images(messages) -> str:
    """The fake model of the backends' tests: plain prompt '(10,10)'; tool prompt: call on turn 1, answer on turn 2."""
    tool = "<tools>" in json.dumps(messages)
    n = len(_chat_messages_sizes(messages))
    return "(10,10)" if not tool else CALL_A if n == 1 else "(126,98)"


def test_vllm_zoom_tool_with_a_fake_engine(tmp_path, shot, monkeypatch):
    from gui_grounding.eval.backends.vllm_engine import predict_vllm

    mod = types.ModuleType("vllm")
    mod.llms, mod.sizes = [], []

    class SamplingParams:
        def __init__(self, **kw):
            self.kw = kw

    class LLM:
        def __init__(self, model, **kw):
            self.kwargs = kw
            mod.llms.append(self)

        def chat(self, messages_list, sampling_params=None, **kw):
            mod.sizes += [_chat_messages_sizes(m) for m in messages_list]
            out = []
            for m in messages_list:
                text = _answer_by_images(m)
                completion = types.SimpleNamespace(text=text, token_ids=[0] * len(text))
                out.append(types.SimpleNamespace(prompt_token_ids=[0] * 5, outputs=[completion]))
            return out

    mod.SamplingParams, mod.LLM = SamplingParams, LLM
    monkeypatch.setitem(sys.modules, "vllm", mod)
    out = tmp_path / "v.jsonl"
    tts = TTSConfig(mode="zoom-tool", max_zoom_calls=2)
    predict_vllm(str(tmp_path / "no-ckpt"), [sample("a", shot)], str(out), adapter="gta1", budget=BUDGET, tts=tts)
    assert mod.llms[0].kwargs["limit_mm_per_prompt"] == {"image": 3}
    assert mod.sizes == [[(476, 392)], [(476, 392)], [(476, 392), (252, 196)]]  # greedy, turn 1, turn 2
    line = json.loads(out.read_text())
    assert line["tts"]["point"] == [375.0, 300.0] and line["cost"]["tool"]["calls"] == 2


def test_openai_zoom_tool_with_a_fake_client(tmp_path, shot, monkeypatch):
    openai = pytest.importorskip("openai")
    from gui_grounding.eval.backends.openai_api import predict_openai

    sent = []

    class Completions:
        def create(self, *, model, messages, max_tokens, extra_body=None, **params):
            sent.append(_chat_messages_sizes(messages))
            message = types.SimpleNamespace(content=_answer_by_images(messages))
            usage = types.SimpleNamespace(prompt_tokens=11, completion_tokens=3)
            return types.SimpleNamespace(choices=[types.SimpleNamespace(message=message)], usage=usage)

    class Client:
        def __init__(self, **kw):
            self.chat = types.SimpleNamespace(completions=Completions())

    monkeypatch.setattr(openai, "OpenAI", Client)
    out = tmp_path / "o.jsonl"
    predict_openai("m", [sample("a", shot)], str(out), adapter="gta1", budget=BUDGET, tts=TTSConfig(mode="zoom-tool"))
    assert sorted(sent) == [[(476, 392)], [(476, 392)], [(476, 392), (252, 196)]]
    line = json.loads(out.read_text())
    assert line["tts"]["point"] == [375.0, 300.0]
    assert {k: v for k, v in line["cost"]["tool"].items() if k != "wall_s"} == {
        "calls": 2,
        "sequences": 2,
        "prompt_tokens": 22,
        "generated_tokens": 6,
    }


# ---------------------------------------------------------------------------------------------------------------------
# gui-grounding prompt --zoom-tool


def test_prompt_inspector_shows_both_turns(capsys):
    from gui_grounding.cli import main as cli_main
    from gui_grounding.ops.prompt import describe_prompt

    argv = ["prompt", "--adapter", "gta1", "--image-size", "1000x800", "--instruction", "Click ok", "--zoom-tool"]
    cli_main([*argv, "--max-pixels", str(BUDGET.max_pixels)])
    info = json.loads(capsys.readouterr().out)["zoom_tool"]
    assert "zoom_tool" not in describe_prompt("gta1", (W, H), "Click ok")
    adapter = get_adapter("gta1")
    assert info["turn_1"] == adapter.zoom_messages("Click ok", BUDGET.frame(W, H), max_calls=1)
    assert info["turn_2"][: len(info["turn_1"])] == info["turn_1"]
    assert info["turn_2"][-2] == {"role": "assistant", "content": [{"type": "text", "text": info["example_call"]}]}
    assert zoom_tool.parse_call(info["example_call"]).region is not None
    assert info["example_call"] == call(119, 98, 357, 294)  # the middle half of 476x392
    assert (info["window"], info["crop_resized_size"]) == ([250, 200, 750, 600], [504, 392])
    response = info["turn_2"][-1]["content"]
    assert response[1] == {"type": "image"}
    assert f"height {info['crop_resized_size'][1]} and width {info['crop_resized_size'][0]}" in response[2]["text"]
    with pytest.raises(SystemExit, match="no tool-call format"):
        cli_main(["prompt", "--adapter", "qwen2-vl", "--image-size", "100x80", "--instruction", "x", "--zoom-tool"])


def test_eval_max_zoom_calls_flag_range(tmp_path, capsys):
    from gui_grounding.cli import main as cli_main

    with pytest.raises(SystemExit) as err:
        cli_main(
            ["eval", "--benchmark", "canonical", "--data", "d", "--predictions", "p", "--out", str(tmp_path / "o")]
            + ["--tts", "zoom-tool", "--max-zoom-calls", "0"]
        )
    assert err.value.code == 2 and "argument --max-zoom-calls" in capsys.readouterr().err


# ---------------------------------------------------------------------------------------------------------------------
# zoom_tool: the parser and the window on hostile values

GTA1 = get_adapter("gta1")
FRAME = BUDGET.frame(W, H)  # 476x392


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ('<tool_call>{"name": "zoom", "arguments": {"bbox_2d": [NaN, 0, 1, 1]}}</tool_call>', "malformed"),
        ('<tool_call>{"name": "zoom", "arguments": {"bbox_2d": [1e99, 0, 1, 1]}}</tool_call>', "malformed"),
        ('<tool_call>{"name": "zoom", "arguments": {"bbox_2d": [0, 0, 1, 1, 2]}}</tool_call>', "malformed"),
        ('<tool_call>{"name": "zoom", "arguments": {"bbox_2d": [0, 0, 1e8, 1]}}</tool_call>', "malformed"),
        ('<tool_call>{"name": "zoom", "arguments": {"bbox_2d": [true, 0, 1, 1]}}</tool_call>', "malformed"),
        ('<tool_call>{"name": "zoom", "arguments": {"bbox_2d": ["1", 0, 1, 1]}}</tool_call>', "malformed"),
        ('<tool_call>{"name": "click", "arguments": {"bbox_2d": [0, 0, 1, 1]}}</tool_call>', "malformed"),
        ('<tool_call>{"name": "zoom", "arguments": {"bbox_2d": [0, 0, 1, 1], "x": 1}}</tool_call>', "malformed"),
        ('<tool_call>{"name": "zoom", "arguments": {"bbox_2d": [0, 0, 1, 1]}', "malformed"),  # unclosed
        ("<tool_call>" + "[" * 5000 + "</tool_call>", "malformed"),  # nested junk
        ("<tool_call>{{{]]]\x00</tool_call>", "malformed"),
        (call(0, 0, 1, 1) + call(0, 0, 2, 2), "several_calls"),
        (call(5, 0, 1, 1), "inverted"),
    ],
)
def test_parse_call_on_hostile_texts(text, reason):
    assert zoom_tool.parse_call(text) == zoom_tool.ZoomCall(reason=reason)


def test_parse_call_answers_and_valid_calls():
    assert zoom_tool.parse_call("(12,34)") is None and zoom_tool.parse_call("") is None
    assert zoom_tool.parse_call("thinking... " + call(1, 2, 3, 4) + " done").region == (1.0, 2.0, 3.0, 4.0)
    assert zoom_tool.parse_call(call(3, 3, 3, 3)).region == (3.0, 3.0, 3.0, 3.0)  # degenerate: the window says so


def test_region_window_clamps_and_rejects():
    # clamped to the image, rounded outwards
    assert zoom_tool.region_window((-50, -50, 119, 98), GTA1, FRAME) == CropWindow(0, 0, 250, 200)
    assert zoom_tool.region_window((238, 196, 1000, 1000), GTA1, FRAME) == CropWindow(500, 400, 1000, 800)
    assert zoom_tool.region_window((1, 1, 2, 2), GTA1, FRAME) == CropWindow(2, 2, 5, 5)  # 2.1..4.2 -> 2..5
    assert zoom_tool.region_window((476, 0, 500, 10), GTA1, FRAME) == "outside_image"  # touches the right edge only
    assert zoom_tool.region_window((-10, -10, 0, 5), GTA1, FRAME) == "outside_image"
    assert zoom_tool.region_window((10, 10, 10, 20), GTA1, FRAME) == "degenerate"
    assert zoom_tool.region_window((10, 10, 20, 10), GTA1, FRAME) == "degenerate"


def test_crop_point_to_original_is_exact():
    window = CropWindow(250, 200, 500, 400)
    crop_frame = BUDGET.frame(window.width, window.height)
    assert (crop_frame.resized_width, crop_frame.resized_height) == (252, 196)
    assert zoom_tool.crop_point_to_original((126, 98), GTA1, crop_frame, window) == (375.0, 300.0)
    assert zoom_tool.crop_point_to_original((0, 0), GTA1, crop_frame, window) == (250.0, 200.0)
    assert zoom_tool.crop_point_to_original((252, 196), GTA1, crop_frame, window) == (500.0, 400.0)
    qwen3 = get_adapter("qwen3-vl")  # 0-1000 of the crop
    assert zoom_tool.crop_point_to_original((500, 500), qwen3, crop_frame, window) == (375.0, 300.0)


_JUNK = st.one_of(
    st.text(max_size=200),
    st.builds(
        lambda box, pre, post: pre + zoom_tool.TOOL_CALL_OPEN + json.dumps({"name": "zoom", "arguments": box}) + post,
        st.dictionaries(
            st.sampled_from(["bbox_2d", "x"]),
            st.lists(st.one_of(st.floats(), st.integers(), st.booleans(), st.none(), st.text(max_size=3)), max_size=6),
            max_size=2,
        ),
        st.text(max_size=20),
        st.sampled_from(["</tool_call>", "", "</tool_call><tool_call></tool_call>", "}"]),
    ),
)


@settings(max_examples=150, deadline=None)
@given(_JUNK)
def test_parse_call_is_total(text):
    got = zoom_tool.parse_call(text)
    assert got is None or isinstance(got, zoom_tool.ZoomCall)
    if got is not None:
        assert (got.region is None) != (got.reason is None)
        assert got.reason is None or got.reason in zoom_tool.REJECTS
        assert got.region is None or all(math.isfinite(v) for v in got.region)


_COORD = st.floats(min_value=-1e7, max_value=1e7, allow_nan=False)


@settings(max_examples=200, deadline=None)
@given(
    st.tuples(_COORD, _COORD, _COORD, _COORD),
    st.integers(1, 5000),
    st.integers(1, 5000),
    st.sampled_from(["gta1", "qwen3-vl"]),
)
def test_region_window_is_inside_the_image_or_a_reason(region, w, h, name):
    adapter = get_adapter(name)
    try:
        frame = BUDGET.frame(w, h)
    except ValueError:
        frame = Frame(w, h, w, h)
    got = zoom_tool.region_window(region, adapter, frame)
    if isinstance(got, str):
        assert got in zoom_tool.REJECTS
    else:
        assert 0 <= got.x_min < got.x_max <= w and 0 <= got.y_min < got.y_max <= h
        assert all(isinstance(v, int) for v in got.as_list())


def test_hf_engine_answers_a_turn_with_the_screenshot_and_its_crop(tmp_path, tiny_qwen25_dir, monkeypatch):
    """A tiny Qwen2.5-VL through the hf backend: the zoom-tool run writes its records (a random model calls no
    tool), and its engine answers a turn-2 request (two images, the call as an assistant turn) with the crop's
    image tokens counted."""
    from gui_grounding.eval.backends import hf, predict

    engines = []
    generate = hf.HFEngine.generate

    def spy(self, requests, **kw):
        engines.append(self)
        return generate(self, requests, **kw)

    monkeypatch.setattr(hf.HFEngine, "generate", spy)
    path = tmp_path / "s.png"
    Image.new("RGB", (224, 224), (30, 90, 200)).save(path)
    shot = Sample("t", "Click it", str(path), [(10.0, 10.0, 60.0, 60.0)], 224, 224)
    out = tmp_path / "hf.jsonl"
    predict("hf", tiny_qwen25_dir, [shot], str(out), max_new_tokens=4, tts=TTSConfig(mode="zoom-tool"))
    line = json.loads(out.read_text())
    assert line["tts"]["mode"] == "zoom-tool" and line["cost"]["tool"]["calls"] >= 1 and "error" not in line
    adapter, budget = get_adapter("gta1"), PixelBudget(28, 3136, 200704)
    image = Image.open(path).convert("RGB")
    one = adapter.build_request(shot, image, budget=budget, messages=lambda f: adapter.zoom_messages("Click it", f))
    window = CropWindow(0, 0, 112, 112)
    crop_frame = budget.frame(112, 112)
    two = copy.copy(one)
    two.messages = zoom_tool.next_turn_messages(one.messages, call(0, 0, 112, 112), adapter, crop_frame)
    two.extra_images = [window.crop(image)]
    a, b = engines[0].generate([one, two], n=1, temperature=0.0)
    assert a.error is None and b.error is None and len(b.texts) == 1
    assert b.prompt_tokens - a.prompt_tokens >= (112 // 28) ** 2  # the crop's 16 image tokens (and the turns' text)
