"""The fake engine behind ``vllm.LLM`` and the fake server (NOT vLLM's code or behaviour, except where stated).

* :data:`RECORD`: every call the tests inspect (``inits``, ``generate``, ``weights``, ``http``); :func:`reset` empties it.
* :class:`FakeEngine`: loads the checkpoint's tokenizer, config and image processor from the model path (as vLLM
  does, through transformers), checks each multimodal prompt as vLLM's multimodal processor would (one run of image
  tokens per image, of the length vLLM computes for that image: ``vllm/model_executor/models/qwen2_vl.py:881-929`` at
  v0.30.0: transformers' smart_resize with factor ``patch_size * spatial_merge_size`` of the config's vision
  config and bounds from the image processor's ``size`` overridden by ``mm_processor_kwargs``; tokens =
  ``(h/patch) * (w/patch) / merge**2``) and "generates" from a fixed script.
* The script (:meth:`FakeEngine.script`): the "model" most wants to emit the image token first (what GTA1 bans the
  image token for), then the text ``(x,y)`` with ``x, y`` from a CRC of the prompt ids, the sample index and the
  seed, then EOS. Each proposed token is dropped when the request's settings forbid it (a banned word completed,
  ``allowed_token_ids`` not containing it, ``logit_bias <= -100``), which is how the ban's effect is observed.
  Logprobs are ``-0.5`` for every sampled token (rank 1).
"""

from __future__ import annotations

import copy
import json
import os
import zlib
from typing import Any

RECORD: dict[str, list] = {"inits": [], "generate": [], "weights": [], "http": []}


def reset() -> None:
    for calls in RECORD.values():
        calls.clear()


def image_token_runs(ids: list[int], image_token_id: int) -> list[tuple[int, int]]:
    """``(offset, length)`` of each run of ``image_token_id`` in ``ids``."""
    runs, i = [], 0
    while i < len(ids):
        if ids[i] == image_token_id:
            j = i
            while j < len(ids) and ids[j] == image_token_id:
                j += 1
            runs.append((i, j - i))
            i = j
        else:
            i += 1
    return runs


class FakeEngine:
    """Tokenizer, vision geometry and the completion script of one fake model (see the module docstring)."""

    def __init__(self, model: str, tokenizer: str | None = None, mm_processor_kwargs: dict | None = None, seed=0):
        from transformers import AutoImageProcessor, AutoTokenizer

        self.model = model
        self.tokenizer = AutoTokenizer.from_pretrained(tokenizer or model)
        with open(os.path.join(model, "config.json"), encoding="utf-8") as f:
            self.config = json.load(f)
        vision = self.config.get("vision_config") or {}
        self.patch = int(vision["patch_size"])
        self.merge = int(vision["spatial_merge_size"])
        self.image_token_id = int(self.config["image_token_id"])
        size = dict(AutoImageProcessor.from_pretrained(model).size)
        kwargs = mm_processor_kwargs or {}
        size.update(kwargs.get("size") or {})
        if kwargs.get("min_pixels") is not None:
            size["shortest_edge"] = kwargs["min_pixels"]
        if kwargs.get("max_pixels") is not None:
            size["longest_edge"] = kwargs["max_pixels"]
        self.size = size
        self.seed = seed
        text = self.config.get("text_config") or self.config
        self.max_model_len = int(text.get("max_position_embeddings", 4096))
        self.eos_token_id = self.tokenizer.eos_token_id

    # ---- vLLM's image-token count (qwen2_vl.py:881-929 at v0.30.0) --------------------------------------------------
    def vision_size(self, width: int, height: int) -> tuple[int, int]:
        """``(width, height)`` vLLM resizes an image of this size to."""
        from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import smart_resize

        h, w = smart_resize(
            height,
            width,
            factor=self.patch * self.merge,
            min_pixels=self.size["shortest_edge"],
            max_pixels=self.size["longest_edge"],
        )
        return int(w), int(h)

    def image_tokens(self, width: int, height: int) -> int:
        w, h = self.vision_size(width, height)
        return (h // self.patch) * (w // self.patch) // (self.merge**2)

    def check_placeholders(self, ids: list[int], sizes: list[tuple[int, int]]) -> None:
        """Raise ValueError unless ``ids`` holds one run of image tokens per image, each as long as vLLM expects."""
        runs = [n for _, n in image_token_runs(ids, self.image_token_id)]
        expected = [self.image_tokens(w, h) for w, h in sizes]
        if runs != expected:
            raise ValueError(
                f"fake vLLM: the prompt's image-token runs {runs} do not match the {len(sizes)} image(s) of sizes "
                f"{sizes}, for which vLLM expects {expected} tokens (size bounds {self.size})"
            )

    # ---- the script -----------------------------------------------------------------------------------------------
    def script(self, prompt_ids: list[int], index: int, seed: int) -> list[int]:
        key = zlib.crc32(json.dumps([list(prompt_ids), index, seed]).encode())
        x, y = key % 97, (key // 97) % 89
        text = self.tokenizer.encode(f"({x},{y})", add_special_tokens=False)
        return [self.image_token_id, *text, self.eos_token_id]

    @staticmethod
    def allowed(token: int, made: list[int], params: Any) -> bool:
        for word in params.bad_words_token_ids or []:
            if word[-1] == token and (len(word) == 1 or made[-(len(word) - 1) :] == word[:-1]):
                return False
        if params.allowed_token_ids is not None and token not in params.allowed_token_ids:
            return False
        return not (params.logit_bias and params.logit_bias.get(token, 0.0) <= -100)

    def complete(self, prompt_ids: list[int], params: Any, request_seed: int) -> list[dict]:
        """``params.n`` completions: ``{"token_ids", "text", "logprobs" (or None), "finish_reason"}``."""
        params = copy.copy(params)
        params.update_from_tokenizer(self.tokenizer)
        outs = []
        for j in range(params.n):
            made: list[int] = []
            for token in self.script(prompt_ids, j, request_seed if params.seed is None else params.seed):
                if params.max_tokens is not None and len(made) >= params.max_tokens:
                    break
                if self.allowed(token, made, params):
                    made.append(token)
            finish = "stop" if made and made[-1] == self.eos_token_id else "length"
            logprobs = None if params.logprobs is None else [-0.5] * len(made)
            outs.append(
                {"token_ids": made, "text": self.tokenizer.decode(made), "logprobs": logprobs, "finish": finish}
            )
        return outs
