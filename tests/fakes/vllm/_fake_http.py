"""A fake ``vllm serve`` behind a fake ``requests`` (NOT vLLM's server): the endpoints TRL 1.16.0's ``VLLMClient`` calls
(``trl/generation/vllm_client.py``: ``/health`` :283, ``/v1/models`` :253, ``/server_info`` :310, ``/get_world_size``
:324, ``/v1/chat/completions/render`` :354-366, ``/inference/v1/generate`` :480-490, ``/init_weight_transfer_engine``
:768, weight updates :803-847, ``/reset_prefix_cache`` :880), answering in the shapes that client parses. The real server's bodies were not read
(unverified): the ``features`` of ``/render`` are ours (``mm_placeholders`` as TRL reads it, plus ``fake_image_keys``
naming the images the fake keeps).

Every request body goes through ``json.dumps``/``json.loads``, as over HTTP, and is recorded in
``vllm._fake.RECORD["http"]`` as ``(method, path, body)``.

Use: ``server = FakeServer(model_path, mm_processor_kwargs=...)``; ``monkeypatch.setattr(trl.generation.vllm_client,
"requests", server.requests_module())``.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
from types import SimpleNamespace
from urllib.parse import urlparse

from vllm import _fake
from vllm.entrypoints.llm import LLM
from vllm.sampling_params import RequestOutputKind, SamplingParams


class FakeResponse:
    def __init__(self, status_code: int, body=None):
        self.status_code = status_code
        self._body = json.dumps(body if body is not None else {})
        self.text = self._body
        self.headers: dict = {}

    def json(self):
        return json.loads(self._body)


class FakeServer:
    """``vllm serve MODEL [--mm-processor-kwargs ...]`` with one fake engine."""

    def __init__(self, model: str, *, mm_processor_kwargs: dict | None = None, served_name: str | None = None):
        self.llm = LLM(model, mm_processor_kwargs=mm_processor_kwargs, logprobs_mode="processed_logprobs")
        self.name = served_name or model
        self.images: dict[str, object] = {}

    # ---- transport ------------------------------------------------------------------------------------------------
    def handle(self, method: str, url: str, body=None) -> FakeResponse:
        body = json.loads(json.dumps(body)) if body is not None else None
        path = urlparse(url).path
        _fake.RECORD["http"].append((method, path, body))
        route = {
            ("GET", "/health"): lambda b: {},
            ("GET", "/v1/models"): lambda b: {"data": [{"id": self.name}]},
            ("GET", "/server_info"): lambda b: {
                "vllm_config": {
                    "model_config": {"logprobs_mode": "processed_logprobs"},
                    "weight_transfer_config": {"backend": "nccl"},
                }
            },
            ("GET", "/get_world_size"): lambda b: {"world_size": 1},
            ("POST", "/init_weight_transfer_engine"): lambda b: {},
            ("POST", "/start_weight_update"): lambda b: {},
            ("POST", "/update_weights"): lambda b: {},
            ("POST", "/finish_weight_update"): lambda b: {},
            ("POST", "/reset_prefix_cache"): lambda b: {"success": True},
            ("POST", "/v1/chat/completions/render"): self.render,
            ("POST", "/inference/v1/generate"): self.generate,
        }.get((method, path))
        if route is None:
            return FakeResponse(404, {"error": f"fake vLLM server: no route {method} {path}"})
        try:
            return FakeResponse(200, route(body))
        except ValueError as err:
            return FakeResponse(400, {"error": str(err)})

    def requests_module(self):
        """A stand-in for the ``requests`` module as ``trl.generation.vllm_client`` uses it."""
        import requests

        server = self

        class Session:
            def mount(self, prefix, adapter):
                pass

            def get(self, url, params=None, **kwargs):
                return server.handle("GET", url)

            def post(self, url, json=None, **kwargs):
                return server.handle("POST", url, json)

        return SimpleNamespace(
            Session=Session,
            get=lambda url, **kw: server.handle("GET", url),
            exceptions=requests.exceptions,
            ConnectionError=requests.ConnectionError,
        )

    # ---- endpoints -----------------------------------------------------------------------------------------------
    def render(self, body: dict) -> dict:
        from PIL import Image

        keys, placeholders = [], []
        for message in body["messages"]:
            for part in message["content"]:
                if part.get("type") != "image_url":
                    continue
                data = part["image_url"]["url"].split(",", 1)[1]
                raw = base64.b64decode(data)
                key = hashlib.sha256(raw).hexdigest()
                image = Image.open(io.BytesIO(raw))
                image.load()
                self.images[key] = image
                keys.append(key)
                placeholders.append({"offset": 0, "length": self.llm.engine.image_tokens(*image.size)})
        return {"features": {"mm_placeholders": {"image": placeholders}, "fake_image_keys": keys}}

    def generate(self, body: dict) -> dict:
        params = dict(body["sampling_params"])
        if "output_kind" in params:
            params["output_kind"] = RequestOutputKind(params["output_kind"])
        sampling = SamplingParams(**params)
        features = body.get("features")
        ids = list(body["token_ids"])
        prompt = {"prompt_token_ids": ids}
        if features is not None:
            runs = [(r["offset"], r["length"]) for r in features["mm_placeholders"]["image"]]
            if runs != _fake.image_token_runs(ids, self.llm.engine.image_token_id):
                raise ValueError(f"fake vLLM server: placeholders {runs} are not the prompt's image-token runs")
            prompt["multi_modal_data"] = {"image": [self.images[k] for k in features["fake_image_keys"]]}
        (out,) = self.llm.generate([prompt], sampling, use_tqdm=False)
        choices = []
        for c in out.outputs:
            logprobs = None
            if c.logprobs is not None:
                content = [
                    {"token": f"token_id:{t}", "logprob": lp[t].logprob, "top_logprobs": []}
                    for t, lp in zip(c.token_ids, c.logprobs, strict=True)
                ]
                logprobs = {"content": content}
            choices.append({"index": c.index, "token_ids": c.token_ids, "logprobs": logprobs})
        return {"choices": choices}
