"""Test-time grounding (``eval --tts``) through the backends, exact values, CPU only, no model:

1. ``vllm``: a fake ``vllm`` module with vLLM's interface (``SamplingParams``, ``LLM.chat`` returning
   ``RequestOutput``-shaped objects) answering deterministically from the instruction, the image size and the seed;
2. ``openai``: a local OpenAI-compatible server that honours ``n`` or ignores it, sends ``usage`` or not, and fails
   chosen requests (resume redoes them);
3. rescoring a predictions file with ``"samples"`` through the CLI (``--tts consensus``): both tables, the
   malformed-for-mode lines, the tie rule, ``results.md``, ``calibration.png``, ``scores.jsonl``;
4. the ``--tts*`` flags: ``--help`` ranges and argparse errors.

The scripted answers use the ``qwen2-vl`` adapter (``(x,y)`` on the 0-1000 grid of the image it is asked about), and
screenshots of 1120x560 (multiples of 28 under the Qwen2-VL processor budget, so every image, crops of half the sides
included, is sent at its own size).
"""

from __future__ import annotations

import base64
import io
import json
import re
import sys
import threading
import types
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from PIL import Image

from gui_grounding.cli import main as cli_main
from gui_grounding.data.schema import Sample
from gui_grounding.eval.tts import TTSConfig, seed_for, tts_predictions
from gui_grounding.models.adapters.qwen2_vl import QWEN2_VL_BUDGET
from gui_grounding.models.consensus import consensus

W, H = 1120, 560  # 40 x 20 patches of 28: sent as is; a 0.5 zoom window (560x280) too
CROP = (560, 280)
PROMPT = 'user: <image>In this UI screenshot, what is the position of the element corresponding to the command "{}" (with point)?'  # noqa: E501
MAX_NEW = 16

# scripted answers (0-1000 grid of the image asked about): greedy on the screenshot, the cluster the samples agree on
GREEDY = {1: "(900,100)", 2: "(100,900)", 3: "no idea", 4: "(500,500)"}
CLUSTER = {1: "(700,300)", 2: "(300,200)", 3: "(500,500)", 4: "(500,500)"}
CLUSTER_PX = {1: [784.0, 168.0], 2: [336.0, 112.0], 3: [560.0, 280.0]}  # x/1000*1120, y/1000*560
CROP_GREEDY = "(250,750)"  # -> (140, 210) in a 560x280 crop
CROP_CLUSTER = "(400,600)"  # -> (224, 168) in a 560x280 crop


def _answers(text: str, size: tuple[int, int], n: int, seed: int | None) -> list[str]:
    """The fake model: ``n`` answers for the request with user ``text`` and an image of ``size``; ``seed`` None is
    greedy. Sample 2 of every sampled set is an outlier placed by the seed (bottom-left, never near a cluster);
    target 2's last sample on the screenshot does not parse."""
    k = int(re.search(r"target (\d+)", text).group(1))
    crop = tuple(size) != (W, H)
    if seed is None:
        assert n == 1
        return ["nothing to click here" if crop and k == 4 else CROP_GREEDY if crop else GREEDY[k]]
    cluster = CROP_CLUSTER if crop else CLUSTER[k]
    out = []
    for i in range(n):
        if i == 2:
            out.append(f"({(seed + i) % 300},{700 + (seed // 300 + i) % 300})")
        elif k == 2 and not crop and n > 3 and i == n - 1:
            out.append("I don't know")
        else:
            out.append(cluster)
    return out


def _px(text: str, w: int, h: int) -> list[float] | None:
    """The oracle of the scripted syntax: ``(x,y)`` on the 0-1000 grid -> pixels of a ``w x h`` image."""
    m = re.fullmatch(r"\((\d+),(\d+)\)", text)
    return [int(m.group(1)) / 1000 * w, int(m.group(2)) / 1000 * h] if m else None


def _prompt_len(text: str, size) -> int:
    """The fake's prompt length: text characters + one token per 28x28 patch."""
    return len(text) + (size[0] // 28) * (size[1] // 28)


def _request_of(messages: list[dict]) -> tuple[str, tuple[int, int]]:
    """(user text, image size) of OpenAI-format messages (what both backends send)."""
    user = messages[-1]
    assert user["role"] == "user"
    text = next(p["text"] for p in user["content"] if p["type"] == "text")
    url = next(p["image_url"]["url"] for p in user["content"] if p["type"] == "image_url")
    assert url.startswith("data:image/png;base64,")
    with Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1]))) as im:
        return text, im.size


def _samples(tmp_path, n: int = 3, fail: tuple[int, ...] = ()) -> list[Sample]:
    path = tmp_path / "shot.png"
    if not path.exists():
        im = Image.new("RGB", (W, H), (200, 120, 40))
        for x in range(0, W, 70):
            im.paste((x % 256, 90, 255 - x % 256), (x, 0, x + 3, H))
        im.save(path)
    return [
        Sample(f"s{k}", f"Click {'FAIL ' if k in fail else ''}target {k}", str(path), [(0.0, 0.0, 10.0, 10.0)], W, H)
        for k in range(1, n + 1)
    ]


def _lines(path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()]


def _user_text(sample: Sample) -> str:
    return PROMPT.format(sample.instruction).removeprefix("user: <image>")


def _phase_cost(text: str, size, answers: list[str]) -> dict:
    """Expected cost of one phase of one sample (wall_s checked apart)."""
    return {
        "calls": 1,
        "sequences": len(answers),
        "prompt_tokens": _prompt_len(text, size),
        "generated_tokens": sum(len(a) for a in answers),
    }


def _check_cost(cost: dict, expected: dict) -> None:
    assert set(cost) == set(expected)
    for phase, exp in expected.items():
        got = dict(cost[phase])
        wall = got.pop("wall_s")
        assert isinstance(wall, float) and wall >= 0
        assert got == exp, phase


# ---------------------------------------------------------------------------------------------------------------------
# 1. vllm: a fake engine with vLLM's interface


class _SamplingParams:
    def __init__(self, **kw):
        self.kw = kw


class _Completion:
    def __init__(self, text: str):
        self.text, self.token_ids = text, list(range(len(text)))


class _RequestOutput:
    def __init__(self, prompt_len: int, texts: list[str]):
        self.prompt_token_ids = list(range(prompt_len))
        self.outputs = [_Completion(t) for t in texts]


def _fake_vllm():
    mod = types.ModuleType("vllm")
    mod.llms, mod.calls = [], []

    class LLM:
        def __init__(self, model, **kw):
            self.model, self.kwargs = model, kw
            mod.llms.append(self)

        def chat(
            self,
            messages_list,
            sampling_params=None,
            use_tqdm=True,
            continue_final_message=False,
            add_generation_prompt=True,
        ):
            params = sampling_params if isinstance(sampling_params, list) else [sampling_params] * len(messages_list)
            assert len(params) == len(messages_list)
            reqs = [_request_of(m) for m in messages_list]
            call = {
                "params": sampling_params,
                "sizes": [r[1] for r in reqs],
                "texts": [r[0] for r in reqs],
                "use_tqdm": use_tqdm,
                "continue_final_message": continue_final_message,
                "add_generation_prompt": add_generation_prompt,
            }
            mod.calls.append(call)
            outs = []
            for (text, size), p in zip(reqs, params, strict=True):
                answers = _answers(text, size, p.kw.get("n", 1), p.kw.get("seed"))
                outs.append(_RequestOutput(_prompt_len(text, size), answers))
            return outs

    mod.SamplingParams, mod.LLM = _SamplingParams, LLM
    return mod


# (phase, requests) of each llm.chat call, chunk by chunk (chunk_size 2: s1+s2, then s3)
EXPECTED_CALLS = {
    "consensus": [("greedy", 2), ("sampling", 2), ("greedy", 1), ("sampling", 1)],
    "zoom": [("greedy", 2), ("zoom", 2), ("greedy", 1)],  # s3's greedy answer has no point: no window, no crop
    "zoom+consensus": [("greedy", 2), ("sampling", 2), ("zoom", 2), ("greedy", 1), ("sampling", 1), ("zoom", 1)],
}


@pytest.mark.parametrize("mode", ["consensus", "zoom", "zoom+consensus"])
def test_vllm_tts_modes_with_a_fake_engine(mode, tmp_path, monkeypatch):
    from gui_grounding.eval.backends.vllm_engine import predict_vllm

    fake = _fake_vllm()
    monkeypatch.setitem(sys.modules, "vllm", fake)
    samples = _samples(tmp_path)
    cfg = TTSConfig(mode=mode, samples=5, temperature=0.9, top_p=0.8, seed=1234, region=50.0, zoom=0.5)
    out = tmp_path / "p.jsonl"
    # adapter and budget given: no checkpoint config is read (the path does not exist)
    assert predict_vllm(
        str(tmp_path / "no-ckpt"),
        samples,
        str(out),
        adapter="qwen2-vl",
        budget=QWEN2_VL_BUDGET,
        max_new_tokens=MAX_NEW,
        chunk_size=2,
        tts=cfg,
    ) == str(out)

    (llm,) = fake.llms
    assert llm.model == str(tmp_path / "no-ckpt")
    assert llm.kwargs == {
        "limit_mm_per_prompt": {"image": 1},
        "mm_processor_kwargs": {"min_pixels": 3136, "max_pixels": 12845056},
        "tensor_parallel_size": 1,
        "gpu_memory_utilization": 0.9,
        "max_model_len": None,
        "dtype": "auto",
    }

    sids = {s.instruction: s.sample_id for s in samples}
    phases = []
    for call in fake.calls:
        assert (call["use_tqdm"], call["continue_final_message"], call["add_generation_prompt"]) == (False, False, True)
        params = call["params"]
        crop = call["sizes"][0] != (W, H)
        assert {s != (W, H) for s in call["sizes"]} == {crop}
        if isinstance(params, _SamplingParams):  # greedy: one shared SamplingParams, temperature 0, no n
            assert params.kw == {"temperature": 0.0, "max_tokens": MAX_NEW}
            phases.append(("zoom" if crop else "greedy", len(call["sizes"])))
            continue
        stage = "zoom" if crop else "sampling"
        assert len(params) == len(call["texts"])  # one per request, each with its sample's seed
        for p, text in zip(params, call["texts"], strict=True):
            sid = sids[re.search(r'"(.*)"', text).group(1)]
            assert p.kw == {
                "n": 5,
                "temperature": 0.9,
                "top_p": 0.8,
                "seed": seed_for(1234, sid, stage),
                "max_tokens": MAX_NEW,
            }
        phases.append((stage, len(params)))
    assert phases == EXPECTED_CALLS[mode]
    zoom_sizes = [size for c in fake.calls for size in c["sizes"] if size != (W, H)]

    lines = _lines(out)
    assert [r["sample_id"] for r in lines] == ["s1", "s2", "s3"]
    windows = []
    for k, (s, line) in enumerate(zip(samples, lines, strict=True), start=1):
        text = _user_text(s)
        # the greedy answer, exactly as a greedy run writes it
        assert line["point"] == _px(GREEDY[k], W, H)
        assert (line["raw_response"], line["prompt"], line["adapter"]) == (
            GREEDY[k],
            PROMPT.format(s.instruction),
            "qwen2-vl",
        )
        assert "error" not in line
        info = line["tts"]
        assert info["mode"] == mode
        cost = {"greedy": _phase_cost(text, (W, H), [GREEDY[k]])}
        if cfg.uses_consensus:
            texts = _answers(text, (W, H), 5, seed_for(1234, s.sample_id, "sampling"))
            assert line["sample_responses"] == texts
            assert line["samples"] == [_px(t, W, H) for t in texts]
            assert line["samples"][2] != CLUSTER_PX[k] and (line["samples"][4] is None) == (k == 2)
            vote = consensus(line["samples"], W, H, region=cfg.region)
            assert list(vote.point) == CLUSTER_PX[k]  # the cluster's centre, whatever the seeded outlier
            cost["sampling"] = _phase_cost(text, (W, H), texts)
        else:
            assert "samples" not in line and "sample_responses" not in line
        if mode == "consensus":
            assert info == {
                "mode": mode,
                "point": CLUSTER_PX[k],
                "agreement": 0.6 if k == 2 else 0.8,
                "votes": 3 if k == 2 else 4,
                "region": list(vote.region),
                "window": None,
                "zoom_point": None,
                "fallback": None,
            }
            x, y = CLUSTER_PX[k]
            assert info["region"] == [x - 25, y - 25, x + 25, y + 25]
        elif mode == "zoom" and k == 3:
            assert info == {
                "mode": mode,
                "point": None,
                "agreement": None,
                "votes": None,
                "region": None,
                "window": None,
                "zoom_point": None,
                "fallback": "no first-pass point: no window",
            }
        elif mode == "zoom":
            window = {1: [560, 0, 1120, 280], 2: [0, 280, 560, 560]}[k]  # centred on the greedy point, shifted in
            windows.append(window)
            crop_point = _px(CROP_GREEDY, *CROP)
            assert crop_point == [140.0, 210.0]
            assert info == {
                "mode": mode,
                "point": [window[0] + 140.0, window[1] + 210.0],
                "agreement": None,
                "votes": None,
                "region": None,
                "window": window,
                "zoom_point": crop_point,
                "zoom_responses": [CROP_GREEDY],
                "fallback": None,
            }
            cost["zoom"] = _phase_cost(text, CROP, [CROP_GREEDY])
        else:  # zoom+consensus: the consensus point picks the window, K crop samples are voted again
            # centred on the consensus point (s2's shifted down to the top edge)
            window = {1: [504, 28, 1064, 308], 2: [56, 0, 616, 280], 3: [280, 140, 840, 420]}[k]
            windows.append(window)
            crop_texts = _answers(text, CROP, 5, seed_for(1234, s.sample_id, "zoom"))
            assert info["zoom_responses"] == crop_texts
            crop_points = [_px(t, *CROP) for t in crop_texts]
            crop_vote = consensus(crop_points, *CROP, region=cfg.region)
            assert list(crop_vote.point) == [224.0, 168.0]
            cx0, cy0, cx1, cy1 = crop_vote.region
            assert info == {
                "mode": mode,
                "point": [window[0] + 224.0, window[1] + 168.0],
                "agreement": 0.8,
                "votes": 4,
                "region": [window[0] + cx0, window[1] + cy0, window[0] + cx1, window[1] + cy1],
                "window": window,
                "zoom_point": [224.0, 168.0],
                "zoom_responses": crop_texts,
                "fallback": None,
            }
            cost["zoom"] = _phase_cost(text, CROP, crop_texts)
        _check_cost(line["cost"], cost)
    # every crop request is sent at its window's size (no resize under the budget)
    assert zoom_sizes == [(w[2] - w[0], w[3] - w[1]) for w in windows]


def _run_fake_vllm(tmp_path, monkeypatch, samples, cfg):
    from gui_grounding.eval.backends.vllm_engine import predict_vllm

    fake = _fake_vllm()
    monkeypatch.setitem(sys.modules, "vllm", fake)
    out = tmp_path / "p.jsonl"
    predict_vllm(
        "no-ckpt",
        samples,
        str(out),
        adapter="qwen2-vl",
        budget=QWEN2_VL_BUDGET,
        max_new_tokens=MAX_NEW,
        chunk_size=4,
        tts=cfg,
    )
    return fake, _lines(out)


def test_vllm_zoom_keeps_the_first_pass_point_when_the_crop_answer_does_not_parse(tmp_path, monkeypatch):
    s4 = Sample("s4", "Click target 4", _samples(tmp_path, 1)[0].image_path, [(0.0, 0.0, 10.0, 10.0)], W, H)
    fake, (line,) = _run_fake_vllm(tmp_path, monkeypatch, [s4], TTSConfig(mode="zoom", zoom=0.5))
    assert [c["sizes"] for c in fake.calls] == [[(W, H)], [CROP]]
    assert line["point"] == [560.0, 280.0]
    assert line["tts"] == {
        "mode": "zoom",
        "point": [560.0, 280.0],
        "agreement": None,
        "votes": None,
        "region": None,
        "window": [280, 140, 840, 420],
        "zoom_point": None,
        "zoom_responses": ["nothing to click here"],
        "fallback": "no point in the crop: first-pass point kept",
    }


def test_vllm_zoom_consensus_with_one_sample_samples_the_crop_too(tmp_path, monkeypatch):
    samples = _samples(tmp_path, 1)
    cfg = TTSConfig(mode="zoom+consensus", samples=1, temperature=0.9, top_p=0.8, seed=5)
    fake, _ = _run_fake_vllm(tmp_path, monkeypatch, samples, cfg)
    sampling, zoom = fake.calls[1]["params"], fake.calls[2]["params"]
    assert [p.kw for p in sampling] == [
        {"n": 1, "temperature": 0.9, "top_p": 0.8, "seed": seed_for(5, "s1", "sampling"), "max_tokens": MAX_NEW}
    ]
    assert isinstance(zoom, list) and [p.kw for p in zoom] == [
        {"n": 1, "temperature": 0.9, "top_p": 0.8, "seed": seed_for(5, "s1", "zoom"), "max_tokens": MAX_NEW}
    ]


# ---------------------------------------------------------------------------------------------------------------------
# 2. openai: a local OpenAI-compatible server


class _Server(ThreadingHTTPServer):
    """Chat completions answered by :func:`_answers`: ``n`` choices (or always one when ``honour_n`` is False),
    ``usage`` when ``usage``; a sampling request (temperature > 0) whose text contains ``fail`` gets HTTP 400."""

    daemon_threads = True

    def __init__(self, honour_n: bool, usage: bool):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.honour_n, self.usage, self.fail = honour_n, usage, None
        self.lock, self.bodies = threading.Lock(), []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
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
        text, size = _request_of(body["messages"])
        with srv.lock:
            srv.bodies.append({**body, "text": text, "size": size})
        if srv.fail and srv.fail in text and body.get("temperature"):
            return self._reply(400, {"error": {"message": "sampling refused", "type": "invalid_request_error"}})
        n = (body.get("n") or 1) if srv.honour_n else 1
        texts = _answers(text, size, n, body.get("seed"))
        choices = [
            {"index": i, "finish_reason": "stop", "message": {"role": "assistant", "content": t}}
            for i, t in enumerate(texts)
        ]
        payload = {"id": "c", "object": "chat.completion", "created": 0, "model": body["model"], "choices": choices}
        if srv.usage:
            p, c = _prompt_len(text, size), sum(len(t) for t in texts)
            payload["usage"] = {"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c}
        self._reply(200, payload)


@pytest.fixture
def server():
    servers = []

    def start(honour_n: bool = True, usage: bool = True) -> _Server:
        srv = _Server(honour_n, usage)
        threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()
        servers.append(srv)
        return srv

    yield start
    for srv in servers:
        srv.shutdown()
        srv.server_close()


def _predict_openai(srv, samples, out, cfg):
    from gui_grounding.eval.backends import predict

    return predict(
        "openai",
        "served",
        samples,
        str(out),
        adapter="qwen2-vl",
        base_url=srv.url,
        concurrency=3,
        max_retries=0,
        retry_backoff=0.01,
        max_new_tokens=MAX_NEW,
        tts=cfg,
    )


def _bodies_of(srv, sample) -> tuple[list[dict], list[dict]]:
    """(greedy bodies, sampling bodies) the server got for ``sample``, sampling ones in seed order."""
    mine = [b for b in srv.bodies if b["text"] == _user_text(sample)]
    greedy = [b for b in mine if not b["temperature"]]
    return greedy, sorted((b for b in mine if b["temperature"]), key=lambda b: b["seed"])


def test_openai_consensus_asks_n_k_once_per_sample_and_sums_usage(server, tmp_path):
    srv = server(honour_n=True, usage=True)
    samples = _samples(tmp_path)
    cfg = TTSConfig(mode="consensus", samples=5, temperature=0.9, top_p=0.8, seed=7)
    out = tmp_path / "api.jsonl"
    _predict_openai(srv, samples, out, cfg)
    assert len(srv.bodies) == 6
    lines = _lines(out)
    assert [r["sample_id"] for r in lines] == ["s1", "s2", "s3"]
    for k, (s, line) in enumerate(zip(samples, lines, strict=True), start=1):
        greedy, sampling = _bodies_of(srv, s)
        assert len(greedy) == 1 and len(sampling) == 1
        assert greedy[0]["temperature"] == 0.0 and not {"n", "seed", "top_p"} & set(greedy[0])
        assert greedy[0]["max_tokens"] == MAX_NEW and greedy[0]["model"] == "served"
        seed = seed_for(7, s.sample_id, "sampling")
        body = sampling[0]
        assert (body["n"], body["seed"], body["temperature"], body["top_p"]) == (5, seed, 0.9, 0.8)
        texts = _answers(_user_text(s), (W, H), 5, seed)
        assert line["point"] == _px(GREEDY[k], W, H) and line["raw_response"] == GREEDY[k]
        assert line["sample_responses"] == texts and line["samples"] == [_px(t, W, H) for t in texts]
        assert line["tts"]["point"] == list(consensus(line["samples"], W, H, region=50.0).point) == CLUSTER_PX[k]
        assert line["tts"]["agreement"] == (0.6 if k == 2 else 0.8)
        _check_cost(
            line["cost"],
            {
                "greedy": _phase_cost(_user_text(s), (W, H), [GREEDY[k]]),
                "sampling": _phase_cost(_user_text(s), (W, H), texts),
            },
        )


def test_openai_server_ignoring_n_gets_k_calls_with_successive_seeds(server, tmp_path):
    srv = server(honour_n=False, usage=False)
    samples = _samples(tmp_path, 2)
    cfg = TTSConfig(mode="consensus", samples=4, temperature=0.5, top_p=1.0, seed=3)
    out = tmp_path / "api.jsonl"
    _predict_openai(srv, samples, out, cfg)
    assert len(srv.bodies) == 2 * (1 + 4)
    for k, (s, line) in enumerate(zip(samples, _lines(out), strict=True), start=1):
        greedy, sampling = _bodies_of(srv, s)
        seed = seed_for(3, s.sample_id, "sampling")
        assert len(greedy) == 1
        # one choice per reply: asked again for the shortfall, seed + calls each time
        assert [(b["n"], b["seed"], b["top_p"]) for b in sampling] == [
            (4 - i, (seed + i) & 0x7FFFFFFF, 1.0) for i in range(4)
        ]
        assert line["sample_responses"] == [CLUSTER[k]] * 4
        assert line["samples"] == [CLUSTER_PX[k]] * 4
        assert (line["tts"]["point"], line["tts"]["agreement"], line["tts"]["votes"]) == (CLUSTER_PX[k], 1.0, 4)
        # no usage in the replies: 0 tokens
        _check_cost(
            line["cost"],
            {
                "greedy": {"calls": 1, "sequences": 1, "prompt_tokens": 0, "generated_tokens": 0},
                "sampling": {"calls": 4, "sequences": 4, "prompt_tokens": 0, "generated_tokens": 0},
            },
        )


def test_openai_failed_sampling_request_is_written_with_error_and_redone_on_resume(server, tmp_path):
    srv = server(honour_n=True, usage=True)
    srv.fail = "FAIL"
    samples = _samples(tmp_path, 3, fail=(2,))
    cfg = TTSConfig(mode="consensus", samples=3, temperature=0.7, seed=11)
    out = tmp_path / "api.jsonl"
    _predict_openai(srv, samples, out, cfg)
    first = out.read_text().splitlines()
    lines = [json.loads(x) for x in first]
    assert [r["sample_id"] for r in lines] == ["s1", "s2", "s3"]
    bad = lines[1]
    assert bad["point"] == _px(GREEDY[2], W, H)  # the greedy request succeeded
    assert bad["error"].startswith("BadRequestError") and "400" in bad["error"] and "sampling refused" in bad["error"]
    assert bad["samples"] == [] and bad["tts"]["point"] is None and bad["cost"]["sampling"]["sequences"] == 0
    assert "error" not in lines[0] and "error" not in lines[2]
    assert len(_bodies_of(srv, samples[1])[1]) == 1  # 400 is not retried

    srv.fail = None
    before = len(srv.bodies)
    _predict_openai(srv, samples, out, cfg)
    assert {b["text"] for b in srv.bodies[before:]} == {_user_text(samples[1])}  # only the failed sample is redone
    assert len(srv.bodies) - before == 2
    again = out.read_text().splitlines()
    assert again[:2] == [first[0], first[2]]  # the good lines are kept as they were; the redone one is appended
    redone = json.loads(again[2])
    texts = _answers(_user_text(samples[1]), (W, H), 3, seed_for(11, "s2", "sampling"))
    assert redone["sample_id"] == "s2" and "error" not in redone
    assert redone["samples"] == [_px(t, W, H) for t in texts] and redone["tts"]["point"] == CLUSTER_PX[2]
    _check_cost(
        redone["cost"],
        {
            "greedy": _phase_cost(_user_text(samples[1]), (W, H), [GREEDY[2]]),
            "sampling": _phase_cost(_user_text(samples[1]), (W, H), texts),
        },
    )


# ---------------------------------------------------------------------------------------------------------------------
# 3. rescoring a predictions file with "samples"

# 400x300 screenshot, region 50. (sample_id, target box, greedy point, samples or a raw line)
_A, _B = [350, 50], [50, 250]  # tie across rows: A's square starts higher up (row 25) though further right
_L, _R = [100, 150], [300, 150]  # tie in one row: the left one comes first
RESCORE = [
    ("a", (90, 90, 110, 110), [100, 100], [[100, 100], [101, 99], [100, 101], [300, 250]]),  # both right
    ("b", (190, 40, 230, 60), [20, 280], [[210, 50]] * 3 + [[20, 280]]),  # consensus right only
    ("c", (290, 190, 330, 230), [310, 210], [[50, 50]] * 3 + [[310, 210]]),  # greedy right only
    ("d", (10, 10, 50, 50), [30, 30], None),  # no "samples"
    ("e", (10, 10, 50, 50), [30, 30], [[30, 30], ["x", 5]]),  # a string
    ("f", (10, 10, 50, 50), [30, 30], [[30, 30], [1, 2, 3]]),  # three numbers
    ("g", (10, 10, 50, 50), [30, 30], [[30, 30], [1e8, 5]]),  # beyond +-1e7
    ("h", (330, 30, 370, 70), _B, [_B, _A, _A, _B]),  # tie: the higher square wins (first/last sample: B)
    ("i", (80, 130, 120, 170), _R, [_R, _L, _L, _R]),  # tie: the left square wins
    ("j", (10, 10, 50, 50), None, '{"sample_id": "j", "point": [30, 30], "samples": [[NaN, 1]]}'),  # not JSON
]


def _rescore_files(tmp_path):
    Image.new("RGB", (400, 300), (255, 255, 255)).save(tmp_path / "shot.png")
    data = tmp_path / "test.jsonl"
    data.write_text(
        "".join(
            json.dumps(
                {
                    "sample_id": sid,
                    "instruction": f"Click item {sid}",
                    "image_path": "shot.png",
                    "target_bbox": dict(zip(("x_min", "y_min", "x_max", "y_max"), box, strict=True)),
                    "image_width": 400,
                    "image_height": 300,
                }
            )
            + "\n"
            for sid, box, _, _ in RESCORE
        )
    )
    preds = tmp_path / "preds.jsonl"
    lines = []
    for sid, _, point, samples in RESCORE:
        if isinstance(samples, str):
            lines.append(samples)
            continue
        rec = {"sample_id": sid, "point": point, "raw_response": "x", "adapter": "qwen2-vl"}
        if samples is not None:
            rec["samples"] = samples
        lines.append(json.dumps(rec))
    preds.write_text("\n".join(lines) + "\n")
    return data, preds


def _cell(correct, total, wrong_format):
    from gui_grounding.eval.stats import wilson_interval

    return {
        "num_correct": correct,
        "num_total": total,
        "wrong_format": wrong_format,
        "accuracy": round(100 * correct / total, 2),
        "ci95": wilson_interval(correct, total),
    }


def test_rescoring_samples_with_tts_consensus_through_the_cli(tmp_path):
    data, preds = _rescore_files(tmp_path)
    out = tmp_path / "eval"
    cli_main(
        [
            "eval",
            "--benchmark",
            "canonical",
            "--data",
            str(data),
            "--predictions",
            str(preds),
            "--out",
            str(out),
            "--tts",
            "consensus",
            "--tts-samples",
            "4",
        ]
    )
    doc = json.loads((out / "metrics.json").read_text())
    # the top-level tables score the consensus answers: a, b, h, i right; c wrong; d, e, f, g, j wrong_format
    assert doc["overall"] == _cell(4, 10, 5)
    # the greedy answers of the same file: a, c, d, e, f, g right; b, h, i wrong; j (not JSON) wrong_format
    assert doc["greedy"]["overall"] == _cell(6, 10, 1)
    tts = doc["tts"]
    assert tts["mode"] == "consensus" and tts["malformed_for_mode"] == 5
    assert tts["config"] == {
        "mode": "consensus",
        "samples": 4,
        "temperature": 0.7,
        "top_p": 1.0,
        "seed": 0,
        "region": 50.0,
        "zoom": 0.5,
    }
    assert tts["disagreements"] == {
        "greedy_only_correct": 5,
        "tts_only_correct": 3,
        "greedy_only_correct_ids": ["c", "d", "e", "f", "g"],
        "tts_only_correct_ids": ["b", "h", "i"],
    }
    assert tts["agreement"]["mean"] == 0.65  # (3 * 0.75 + 2 * 0.5) / 5
    assert [(b["low"], b["samples"], b["correct"], b["accuracy"]) for b in tts["agreement"]["calibration"]] == [
        (0.0, 0, 0, None),
        (0.2, 0, 0, None),
        (0.4, 2, 2, 100.0),
        (0.6, 3, 2, 66.67),
        (0.8, 0, 0, None),
    ]
    assert tts["cost"]["lines_with_cost"] == 0 and doc["meta"]["tts"]["mode"] == "consensus"

    scores = {r["sample_id"]: r for r in map(json.loads, (out / "scores.jsonl").read_text().splitlines())}
    assert list(scores) == [r[0] for r in RESCORE]
    assert {sid: (r["correctness"], r["greedy_correctness"], r["agreement"]) for sid, r in scores.items()} == {
        "a": ("correct", "correct", 0.75),
        "b": ("correct", "wrong", 0.75),
        "c": ("wrong", "correct", 0.75),
        "d": ("wrong_format", "correct", None),
        "e": ("wrong_format", "correct", None),
        "f": ("wrong_format", "correct", None),
        "g": ("wrong_format", "correct", None),
        "h": ("correct", "wrong", 0.5),
        "i": ("correct", "wrong", 0.5),
        "j": ("wrong_format", "wrong_format", None),
    }
    assert scores["a"]["point"] == [100.5, 100.0]  # centre of the 3-vote intersection [76, 125] x [76, 124]
    assert scores["h"]["point"] == _A and scores["i"]["point"] == _L  # raster order breaks the ties
    assert scores["b"]["point"] == [210.0, 50.0] and scores["c"]["point"] == [50.0, 50.0]

    md = (out / "results.md").read_text()
    assert "## Test-time mode: consensus (K=4, T=0.7)" in md
    assert "| 40.00" in md or "40.00" in md.split("## Test-time mode")[0]  # the consensus table, first
    assert "60.00" in md.split("## Test-time mode")[1]  # the greedy table of the same run, after
    assert "![accuracy against agreement](calibration.png)" in md
    assert (out / "calibration.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_rescoring_greedy_of_the_same_file_gives_the_greedy_numbers(tmp_path):
    from gui_grounding.eval.run import run_eval

    data, preds = _rescore_files(tmp_path)
    doc = run_eval("canonical", str(data), str(tmp_path / "g"), predictions=str(preds), tts=TTSConfig())
    assert doc["overall"] == _cell(6, 10, 1) and "greedy" not in doc and "tts" not in doc
    assert not (tmp_path / "g" / "calibration.png").exists()
    # zoom modes score tts.point; a file without it is malformed for them on every usable line
    doc = run_eval("canonical", str(data), str(tmp_path / "z"), predictions=str(preds), tts=TTSConfig(mode="zoom"))
    assert doc["overall"] == _cell(0, 10, 10) and doc["tts"]["malformed_for_mode"] == 10
    assert doc["greedy"]["overall"] == _cell(6, 10, 1)


@pytest.mark.parametrize(
    ("samples", "problem"),
    [
        ([[1.0, 2.0], [float("nan"), 1.0]], "samples[1] must be null or [x, y]"),
        ([[1.0, 2.0], "12"], "samples[1] must be null or [x, y]"),
        ([[1.0, 2.0, 3.0]], "samples[0] must be null or [x, y]"),
        ([[1.0, 2.0], [True, 2.0]], "samples[1] must be null or [x, y]"),
        ([], "'samples' is empty"),
        ({"0": [1, 2]}, "'samples' must be a list"),
        (None, "'samples' must be a list"),
    ],
)
def test_consensus_answers_refuse_unusable_samples(samples, problem):
    s = Sample("a", "x", "unused.png", [(0.0, 0.0, 10.0, 10.0)], 400, 300)
    answers = tts_predictions({"a": {"point": [5.0, 5.0], "samples": samples}}, [s], TTSConfig(mode="consensus"))
    assert answers["a"]["point"] is None and problem in answers["a"]["malformed"]
    good = tts_predictions(
        {"a": {"point": [5.0, 5.0], "samples": [[100, 100], None]}}, [s], TTSConfig(mode="consensus")
    )
    assert good["a"]["point"] == [100.0, 100.0] and good["a"]["agreement"] == 0.5 and "malformed" not in good["a"]


# ---------------------------------------------------------------------------------------------------------------------
# 4. the --tts flags

TTS_RANGES = {
    "--tts-samples": "(an integer >= 1 and <= 1024)",
    "--tts-temperature": "(a number > 0 and <= 100)",
    "--tts-top-p": "(a number > 0 and <= 1)",
    "--tts-region": "(a number >= 2 and <= 1e+06)",
    "--tts-zoom": "(a number > 0 and <= 1)",
    "--max-zoom-calls": "(an integer >= 1 and <= 8)",
}


def _help(capsys) -> str:
    with pytest.raises(SystemExit) as err:
        cli_main(["eval", "--help"])
    assert err.value.code == 0
    return " ".join(capsys.readouterr().out.split())


def _flag_help(text: str, flag: str) -> str:
    metavar = flag.lstrip("-").replace("-", "_").upper()
    m = re.search(re.escape(f"{flag} {metavar} ") + r"(.*?)(?= --| Where each benchmark|$)", text)
    assert m, flag
    return m.group(1)


def test_eval_help_lists_the_tts_flags_with_their_ranges(capsys):
    text = _help(capsys)
    assert "--tts {greedy,consensus,zoom,zoom+consensus,zoom-tool}" in text
    for flag, rng in TTS_RANGES.items():
        assert _flag_help(text, flag).endswith(rng), flag
    assert "(an integer >= 0" in _flag_help(text, "--tts-seed")


def test_eval_help_states_the_exact_seed_bound(capsys):
    assert _flag_help(_help(capsys), "--tts-seed").endswith("(an integer >= 0 and <= 2147483647)")


INT_1_1024 = "an integer >= 1 and <= 1024"
NUM_0_100 = "a number > 0 and <= 100"
NUM_0_1 = "a number > 0 and <= 1"


@pytest.mark.parametrize(
    ("flag", "value", "expected"),
    [
        ("--tts-samples", "0", f"argument --tts-samples: must be {INT_1_1024}, got '0'"),
        ("--tts-samples", "1025", f"argument --tts-samples: must be {INT_1_1024}, got '1025'"),
        ("--tts-samples", "2.5", f"argument --tts-samples: must be {INT_1_1024}, got '2.5'"),
        ("--tts-temperature", "0", f"argument --tts-temperature: must be {NUM_0_100}, got '0'"),
        ("--tts-temperature", "inf", f"argument --tts-temperature: must be {NUM_0_100}, got 'inf'"),
        ("--tts-zoom", "1.5", f"argument --tts-zoom: must be {NUM_0_1}, got '1.5'"),
        ("--tts-zoom", "0", f"argument --tts-zoom: must be {NUM_0_1}, got '0'"),
        ("--tts-top-p", "nan", f"argument --tts-top-p: must be {NUM_0_1}, got 'nan'"),
        ("--tts-top-p", "1.01", f"argument --tts-top-p: must be {NUM_0_1}, got '1.01'"),
        ("--tts-seed", "-1", "argument --tts-seed: must be an integer >= 0 and <= "),
        ("--tts-seed", "2147483648", "argument --tts-seed: must be an integer >= 0 and <= "),
        ("--tts-region", "0", "argument --tts-region: must be a number >= 2 and <= 1e+06, got '0'"),
        ("--tts", "beam", "argument --tts: invalid choice: 'beam'"),
    ],
)
def test_tts_flags_out_of_range_are_argparse_errors(tmp_path, capsys, flag, value, expected):
    with pytest.raises(SystemExit) as err:
        cli_main(
            [
                "eval",
                "--benchmark",
                "canonical",
                "--data",
                str(tmp_path / "d.jsonl"),
                "--predictions",
                str(tmp_path / "p.jsonl"),
                "--out",
                str(tmp_path / "o"),
                flag,
                value,
            ]
        )
    assert err.value.code == 2
    assert expected in capsys.readouterr().err
    assert not (tmp_path / "o").exists()  # refused before anything is read or written


def test_tts_config_refuses_what_the_flags_refuse():
    for kw in (
        {"samples": 0},
        {"samples": True},
        {"temperature": 0.0},
        {"top_p": float("nan")},
        {"zoom": 1.5},
        {"seed": -1},
        {"seed": 2**31},
        {"region": 0},
        {"mode": "beam"},
    ):
        with pytest.raises(ValueError):
            TTSConfig(**kw)
    assert TTSConfig(seed=2**31 - 1, zoom=1.0, top_p=1.0, samples=1024).seed == 2**31 - 1


@pytest.mark.parametrize("mode", ["zoom", "zoom+consensus"])
def test_openai_zoom_modes_map_the_crop_answer_back(server, tmp_path, mode):
    from gui_grounding.models.frames import zoom_window

    srv = server(honour_n=True, usage=True)
    samples = _samples(tmp_path)
    cfg = TTSConfig(mode=mode, samples=5, temperature=0.9, seed=11)
    out = tmp_path / "api.jsonl"
    _predict_openai(srv, samples, out, cfg)
    for k, line in enumerate(_lines(out), start=1):
        first = _px(GREEDY[k], W, H) if mode == "zoom" else CLUSTER_PX.get(k)
        if first is None:  # target 3's greedy answer does not parse: no window, no crop request
            assert line["tts"]["window"] is None and line["tts"]["fallback"] == "no first-pass point: no window"
            continue
        window = zoom_window(first, W, H, cfg.zoom)
        assert line["tts"]["window"] == window.as_list() and (window.width, window.height) == CROP
        if mode == "zoom":
            crop_point = _px(CROP_GREEDY, *CROP)
        else:
            texts = _answers(_user_text(samples[k - 1]), CROP, 5, seed_for(11, samples[k - 1].sample_id, "zoom"))
            crop_point = list(consensus([_px(t, *CROP) for t in texts], *CROP, region=50.0).point)
        assert line["tts"]["zoom_point"] == crop_point
        assert line["tts"]["point"] == list(window.to_image(crop_point))
        assert set(line["cost"]) == ({"greedy", "zoom"} if mode == "zoom" else {"greedy", "sampling", "zoom"})
