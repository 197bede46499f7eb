"""Adapters (prompt + frame + parse, exact values) and prediction backends (hf on the tiny model, openai against a
local HTTP server, vllm's missing-extra message)."""

from __future__ import annotations

import base64
import io
import json
import logging
import re
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from PIL import Image

from groundwork.pixel_budget import PixelBudget
from gui_grounding.data.schema import Sample, load_samples
from gui_grounding.eval.backends import BACKENDS, predict, prepare_resume
from gui_grounding.models.adapters import (
    ADAPTERS,
    GTA1_MAX_PIXELS,
    UI_TARS_MAX_PIXELS,
    UI_TARS_MIN_PIXELS,
    Request,
    default_adapter_for,
    get_adapter,
    messages_to_text,
)

TEST_DATA = "data/web_sample/test.jsonl"
# the tiny checkpoints' processor budget: 1280x720 -> 588x336
BUDGET = PixelBudget.published("test", factor=28, min_pixels=3136, max_pixels=200_704)
GTA1_PROMPT_588x336 = (
    "You are an expert UI element locator. Given a GUI image and a user's element description, provide the "
    "coordinates of the specified element as a single (x,y) point. The image resolution is height 336 and width 588. "
    "For elements with area, return the center point.\n\nOutput the coordinate pair exactly:\n(x,y)"
)


def _sample(instruction="Click the search box", width=1280, height=720, sample_id="s0", image_path="unused.png"):
    return Sample(sample_id, instruction, image_path, [(0.0, 0.0, 10.0, 10.0)], width, height)


def _request(name, width=1280, height=720, budget=BUDGET) -> tuple:
    adapter = get_adapter(name)
    return adapter, adapter.build_request(
        _sample(width=width, height=height), Image.new("RGB", (width, height)), budget=budget
    )


# ---------------------------------------------------------------------------------------------------------------------
# (a) adapters


def test_gta1_prompt_frame_and_parse():
    adapter, req = _request("gta1")
    assert req.image.size == (588, 336)  # resized once to the smart_resize frame the processor keeps
    assert req.messages == [
        {"role": "system", "content": [{"type": "text", "text": GTA1_PROMPT_588x336}]},
        {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "Click the search box"}]},
    ]
    assert req.prompt_text == f"system: {GTA1_PROMPT_588x336}\nuser: <image>Click the search box"
    assert adapter.parse("(294,168)", req) == (640.0, 360.0)
    assert adapter.parse("(147, 84) then (1,1)", req) == (320.0, 180.0)  # first pair (GTA1 inference rule)
    assert adapter.parse("(147.0,84.0)", req) == (320.0, 180.0)  # decimals allowed at inference
    assert adapter.parse("I cannot find it", req) is None
    # no budget given (API backends without flags): GTA1's published inference budget, factor 28, 3136 .. 8847360
    assert _request("gta1", budget=None)[1].image.size == (1288, 728)
    assert _request("gta1", width=200, height=100, budget=None)[1].image.size == (196, 112)


def test_gta1_thinking_parses_only_the_answer_block():
    adapter, req = _request("gta1-thinking")
    assert "inside <answer> </answer> tags" in req.messages[0]["content"][0]["text"]
    assert adapter.parse("<think>top right</think><answer>(294,168)</answer>", req) == (640.0, 360.0)
    assert adapter.parse("(294,168)", req) is None


def test_ui_tars_prompt_frame_and_answer_syntaxes():
    adapter, req = _request("ui-tars-1.5")
    assert req.image.size == (588, 336)
    assert req.messages == [
        {
            "role": "user",
            "content": [
                {"type": "image"},
                {
                    "type": "text",
                    "text": (
                        "Output only the coordinate of one point in your response. What element matches the following task: "
                        "Click the search box"
                    ),
                },
            ],
        }
    ]
    for answer in (
        "(294,168)",
        "<|box_start|>(294,168)<|box_end|>",
        "click(start_box='(294,168)')",
        "click(start_box='<|box_start|>(294,168)<|box_end|>')",
        "<point>294 168</point>",
        "click(start_box='<|box_start|>(147,84),(441,252)<|box_end|>')",
    ):
        assert adapter.parse(answer, req) == (640.0, 360.0), answer
    assert adapter.parse("finished()", req) is None
    # no budget given: UI-TARS's published bounds (min 100*28*28 upscales a small image, unlike GTA1's 3136)
    assert _request("ui-tars-1.5", budget=None)[1].image.size == (1288, 728)
    assert _request("ui-tars-1.5", width=200, height=100, budget=None)[1].image.size == (420, 224)


def test_qwen2_vl_relative_points_and_boxes():
    adapter, req = _request("qwen2-vl")
    assert req.image.size == (588, 336)  # the run's budget resizes every family; 0-1000 answers do not depend on it
    assert req.messages[0]["content"][1]["text"] == (
        "In this UI screenshot, what is the position of the element corresponding to the command "
        '"Click the search box" (with point)?'
    )
    assert adapter.parse("(500,500)", req) == (640.0, 360.0)
    assert adapter.parse("(250, 500)", req) == (320.0, 360.0)
    assert adapter.parse("<|box_start|>(250,250),(750,750)<|box_end|>", req) == (640.0, 360.0)  # box -> centre
    assert adapter.parse("(250,250),(750,750)", req) == (640.0, 360.0)  # special tokens stripped by decoding
    assert adapter.parse("no idea", req) is None


def test_qwen3_vl_json_points():
    adapter, req = _request("qwen3-vl")
    assert req.image.size == (588, 336)
    assert req.messages[0]["content"][1]["text"] == (
        'Locate the UI element that matches the instruction "Click the search box" in this screenshot. '
        'Output the point coordinates in JSON format like {"point_2d": [x, y], "label": "element"}.'
    )
    assert adapter.parse('```json\n[{"point_2d": [500, 500], "label": "search box"}]\n```', req) == (640.0, 360.0)
    assert adapter.parse('{"point_2d": [125, 250]}', req) == (160.0, 180.0)
    assert adapter.parse('{"bbox_2d": [250, 250, 750, 750], "label": "x"}', req) == (640.0, 360.0)
    assert adapter.parse("(500,500)", req) == (640.0, 360.0)  # plain pair as a fallback
    assert adapter.parse('{"label": "search box"}', req) is None


def test_gta1_box_adapter_prompt_and_centre():
    """--prompt_mode box checkpoints: box prompt in the resized frame, the box centre mapped back to original pixels."""
    adapter, req = _request("gta1-box")
    assert req.image.size == (588, 336)
    assert "[x1,y1,x2,y2]" in req.messages[0]["content"][0]["text"]
    assert "height 336 and width 588" in req.messages[0]["content"][0]["text"]
    # centre (294, 168) of the resized frame -> (640, 360) of the 1280x720 original
    assert adapter.parse("[284,158,304,178]", req) == (640.0, 360.0)
    assert adapter.parse("(294,168)", req) is None  # a point is not a box answer


def test_registry_and_defaults():
    registered = "gta1 gta1-thinking gta1-box ui-tars-1.5 ui-venus-ground gui-g2 qwen2.5-vl internvl internvl-gui"
    assert " ".join(ADAPTERS) == registered + (
        " opencua qwen2-vl qwen3-vl ui-venus-1.5 mai-ui gui-owl-1.5 gui-owl-1.5-infeasible"
    )  # family files alphabetically after qwen2_5_vl's; each file's ADAPTERS in order
    assert BACKENDS == ("hf", "openai", "vllm")
    with pytest.raises(ValueError, match=r"unknown adapter 'nope'; registered adapters: gta1, gta1-thinking"):
        get_adapter("nope")
    assert [
        default_adapter_for(t).name for t in ("qwen2_5_vl", "qwen2_vl", "qwen3_vl", "qwen3_vl_moe", "internvl")
    ] == ["gta1", "qwen2-vl", "qwen3-vl", "qwen3-vl", "internvl"]
    with pytest.raises(ValueError, match=r"llava.*qwen2_5_vl -> gta1"):
        default_adapter_for("llava")
    with pytest.raises(ValueError, match=r"unknown backend 'tgi'; registered: hf, openai, vllm"):
        predict("tgi", "m", [], "x.jsonl", adapter="gta1")
    # each family's published inference budget (the last layer of gui_grounding.eval.budget.resolve_eval_budget)
    budgets = {n: tuple(get_adapter(n).default_budget.values().values()) for n in ("ui-tars-1.5", "gta1", "qwen2-vl")}
    assert budgets == {
        "ui-tars-1.5": (28, UI_TARS_MIN_PIXELS, UI_TARS_MAX_PIXELS, None),
        "gta1": (28, 3136, GTA1_MAX_PIXELS, None),
        "qwen2-vl": (28, 3136, 12_845_056, None),
    }
    assert (UI_TARS_MIN_PIXELS, UI_TARS_MAX_PIXELS, GTA1_MAX_PIXELS) == (78_400, 12_845_056, 8_847_360)
    msgs = [
        {"role": "system", "content": "S"},
        {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "T"}]},
    ]
    assert messages_to_text(msgs) == "system: S\nuser: <image>T"


def test_prepare_resume_drops_half_written_and_failed_lines(tmp_path):
    path = tmp_path / "p.jsonl"
    good = {"sample_id": "a", "point": [1.0, 2.0], "raw_response": "(1,2)", "prompt": "p", "adapter": "gta1"}
    failed = {
        "sample_id": "b",
        "point": None,
        "raw_response": "ERROR: x",
        "prompt": "p",
        "adapter": "gta1",
        "error": "x",
    }
    path.write_text(json.dumps(good) + "\n" + json.dumps(failed) + "\n" + '{"sample_id": "c", "po')
    assert prepare_resume(str(path)) == {"a"}
    assert path.read_text() == json.dumps(good) + "\n"
    assert prepare_resume(str(tmp_path / "missing.jsonl")) == set()


# ---------------------------------------------------------------------------------------------------------------------
# (b) hf backend on the tiny Qwen2.5-VL


def _five_screenshots() -> list[Sample]:
    """One sample from each of 5 different real screenshots (three 1280x720, two 1024x768)."""
    samples, _ = load_samples([TEST_DATA])
    firsts = {}
    for s in samples:
        firsts.setdefault(s.image_path, s)
    picked = list(firsts.values())
    return [picked[i] for i in (0, 1, 2, 5, 6)]


@pytest.fixture(scope="module")
def tiny_model(tiny_qwen25_dir):
    import torch

    from vlm_r1.modules import get_vlm_module

    module = get_vlm_module(tiny_qwen25_dir)
    processor = module.load_processor(tiny_qwen25_dir)
    model = module.get_model_class(tiny_qwen25_dir, {}).from_pretrained(tiny_qwen25_dir, dtype=torch.float32)
    return model, processor, module


def test_hf_backend_writes_resumes_and_redoes_a_half_written_line(tiny_qwen25_dir, tmp_path):
    samples = _five_screenshots()
    assert sorted({(s.width, s.height) for s in samples}) == [(1024, 768), (1280, 720)]
    out = tmp_path / "preds.jsonl"
    # the tiny checkpoint's budget (without one the gta1 adapter's published 8,847,360 would apply)
    assert predict("hf", tiny_qwen25_dir, samples, str(out), batch_size=4, budget=BUDGET) == str(out)
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert [r["sample_id"] for r in lines] == [s.sample_id for s in samples]
    assert all(set(r) == {"sample_id", "point", "raw_response", "prompt", "adapter"} for r in lines)
    assert {r["adapter"] for r in lines} == {"gta1"}  # default for model_type qwen2_5_vl
    # the prompt states the frame the processor uses: 1280x720 -> 588x336, 1024x768 -> 504x364 (max 200704)
    assert "height 336 and width 588" in lines[0]["prompt"] and "height 364 and width 504" in lines[3]["prompt"]
    assert lines[0]["prompt"].endswith(f"user: <image>{samples[0].instruction}")
    first = out.read_bytes()

    predict("hf", tiny_qwen25_dir, samples, str(out), batch_size=4, budget=BUDGET)  # resume: nothing to do
    assert out.read_bytes() == first

    out.write_bytes(first[: first.rstrip(b"\n").rfind(b"\n") + 1] + b'{"sample_id": "cut mid-wr')  # interrupted run
    predict("hf", tiny_qwen25_dir, samples, str(out), batch_size=4, budget=BUDGET)
    assert out.read_bytes() == first  # the half-written line is dropped and the sample predicted again, identically


def test_hf_batched_equals_one_at_a_time_and_restores_training_mode(tiny_model):
    from gui_grounding.eval.backends.hf import predict_points

    model, processor, module = tiny_model
    samples = _five_screenshots()
    model.train()
    model.model.visual.eval()  # e.g. a frozen vision tower kept in eval mode by the trainer
    batched = predict_points(model, processor, module, samples, "gta1", batch_size=5)
    assert model.training is True and model.model.visual.training is False  # every module's flag restored
    serial = predict_points(model, processor, module, samples, "gta1", batch_size=1)
    # greedy + left padding at fp32: padding does not change the answers (logits agree to ~1e-7)
    assert [r["raw_response"] for r in batched] == [r["raw_response"] for r in serial]
    assert [r["sample_id"] for r in batched] == [s.sample_id for s in samples]
    assert len({r["raw_response"] for r in batched}) > 1  # the inputs do reach the answers
    model.eval()
    predict_points(model, processor, module, samples[:1], "gta1")
    assert model.training is False


# ---------------------------------------------------------------------------------------------------------------------
# (c) openai backend against a local OpenAI-compatible server


class _FakeServer(ThreadingHTTPServer):
    """Chat-completions server: answers ``(125k,125k)`` for an instruction ending in ``target k``; the first
    ``fail_first`` requests get HTTP 500, instructions containing ``FAIL`` always do; the first two successful
    requests wait for each other (so the run only passes when requests really overlap)."""

    daemon_threads = True

    def __init__(self, fail_first: int):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.fail_first, self.calls, self.bodies = fail_first, 0, []
        self.lock, self.overlap = threading.Lock(), threading.Barrier(2, timeout=20)
        self.successes = 0


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):  # keep pytest output clean
        pass

    def _reply(self, status: int, payload: dict) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self):  # noqa: N802  (http.server naming)
        srv = self.server
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        text = next(p["text"] for p in body["messages"][-1]["content"] if p["type"] == "text")
        with srv.lock:
            srv.calls += 1
            srv.bodies.append(body)
            fail = srv.calls <= srv.fail_first or "FAIL" in text
            wait = not fail and srv.successes < 2
            srv.successes += not fail
        if fail:
            return self._reply(500, {"error": {"message": "server exploded", "type": "internal"}})
        if wait:
            try:
                srv.overlap.wait()
            except threading.BrokenBarrierError:
                return self._reply(400, {"error": {"message": "requests did not overlap"}})
        k = int(re.search(r"target (\d+)", text).group(1))
        message = {"role": "assistant", "content": f"({125 * k},{125 * k})"}
        choice = {"index": 0, "finish_reason": "stop", "message": message}
        self._reply(
            200, {"id": "c", "object": "chat.completion", "created": 0, "model": body["model"], "choices": [choice]}
        )


@pytest.fixture
def fake_server():
    servers = []

    def start(fail_first: int = 0) -> _FakeServer:
        srv = _FakeServer(fail_first)
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        servers.append(srv)
        return srv

    yield start
    for srv in servers:
        srv.shutdown()
        srv.server_close()


def test_openai_backend_retries_concurrency_order_and_failures(fake_server, tmp_path, caplog):
    srv = fake_server(fail_first=2)
    base = _five_screenshots()
    samples = [
        Sample(
            f"s{k}",
            f"Click target {k}",
            base[0 if k < 4 else 3].image_path,
            [(0.0, 0.0, 1.0, 1.0)],
            *((1280, 720) if k < 4 else (1024, 768)),
        )
        for k in range(1, 7)
    ]
    samples.append(Sample("bad", "FAIL target 9", base[0].image_path, [(0.0, 0.0, 1.0, 1.0)], 1280, 720))
    out = tmp_path / "api.jsonl"
    url = f"http://127.0.0.1:{srv.server_address[1]}/v1"
    kwargs = dict(adapter="qwen2-vl", base_url=url, concurrency=4, max_retries=3, retry_backoff=0.01, max_new_tokens=16)
    with caplog.at_level(logging.INFO, logger="gui_grounding.eval.backends.openai_api"):
        predict("openai", "served-model", samples, str(out), **kwargs)
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert [r["sample_id"] for r in lines] == [s.sample_id for s in samples]  # sample order despite concurrency
    assert [r["point"] for r in lines[:6]] == [
        [160.0, 90.0],
        [320.0, 180.0],
        [480.0, 270.0],  # 1280x720, k/8
        [512.0, 384.0],
        [640.0, 480.0],
        [768.0, 576.0],
    ]  # 1024x768
    assert lines[0]["raw_response"] == "(125,125)" and lines[0]["adapter"] == "qwen2-vl"
    assert lines[-1]["point"] is None and lines[-1]["raw_response"].startswith("ERROR: InternalServerError")
    assert "500" in lines[-1]["error"] and "server exploded" in lines[-1]["error"]
    assert srv.calls == 6 + 2 + 4  # 6 answers, the 2 failed first requests retried, 4 attempts for the bad one
    assert "1 of 7 requests failed after retries" in caplog.text and "5 retries, 1 failed" in caplog.text

    body = srv.bodies[-1]
    assert body["model"] == "served-model" and body["temperature"] == 0.0 and body["max_tokens"] == 16
    user = body["messages"][-1]
    assert user["role"] == "user" and [p["type"] for p in user["content"]] == ["image_url", "text"]
    url = user["content"][0]["image_url"]["url"]
    assert url.startswith("data:image/png;base64,")
    with Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1]))) as im:
        assert (im.format, im.size) == ("PNG", (1288, 728))  # qwen2-vl: its published budget, 3136..12845056
    assert user["content"][1]["text"] == (
        "In this UI screenshot, what is the position of the element corresponding "
        'to the command "FAIL target 9" (with point)?'
    )

    # resume: only the failed request is tried again (and fails again), one line per sample stays
    calls = srv.calls
    predict("openai", "served-model", samples, str(out), **kwargs)
    assert srv.calls == calls + 4
    assert [json.loads(x)["sample_id"] for x in out.read_text().splitlines()] == [s.sample_id for s in samples]


def test_openai_backend_sends_the_gta1_frame(fake_server, tmp_path):
    srv = fake_server()
    path = _five_screenshots()[0].image_path
    samples = [
        Sample("a", "Click target 4", path, [(0.0, 0.0, 1.0, 1.0)], 1280, 720),
        Sample("b", "Click target 2", path, [(0.0, 0.0, 1.0, 1.0)], 1280, 720),
    ]
    out = tmp_path / "gta1.jsonl"
    predict(
        "openai",
        "m",
        samples,
        str(out),
        adapter="gta1",
        base_url=f"http://127.0.0.1:{srv.server_address[1]}/v1",
        concurrency=2,
        budget=BUDGET,
    )
    body = srv.bodies[0]
    assert body["messages"][0] == {"role": "system", "content": GTA1_PROMPT_588x336}
    url = body["messages"][1]["content"][0]["image_url"]["url"]
    with Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1]))) as im:
        assert im.size == (588, 336)
    # "(500,500)" and "(250,250)" in the 588x336 frame, mapped back per axis (x * 1280/588, y * 720/336)
    assert [json.loads(x)["point"] for x in out.read_text().splitlines()] == [
        [1088.43537414966, 1071.4285714285713],
        [544.21768707483, 535.7142857142857],
    ]


def test_openai_backend_needs_an_adapter():
    with pytest.raises(ValueError, match="needs an explicit adapter"):
        predict("openai", "m", [], "unused.jsonl")


# ---------------------------------------------------------------------------------------------------------------------
# (d) vllm backend without vLLM


def test_vllm_backend_names_the_gpu_extra(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "vllm", None)  # import vllm -> ImportError, even where vLLM is installed
    with pytest.raises(ImportError, match=r"pip install -e \.\[gpu\]"):
        predict("vllm", "any-model", [_sample()], str(tmp_path / "v.jsonl"), adapter="gta1")


def test_request_dataclass_defaults():
    req = Request([{"role": "user", "content": "x"}], None)
    assert (req.context, req.prompt_text) == ({}, "")
