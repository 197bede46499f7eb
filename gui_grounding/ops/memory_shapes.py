"""The model side of the memory estimate (:mod:`gui_grounding.ops.memory`): a :class:`ModelShape` (the numbers of a
Qwen2.5-VL-style checkpoint that decide its memory, and its parameter counts), the published shapes
(``QWEN2_5_VL_SHAPES``) and :func:`shape_from_config` for a local ``config.json``.

Rule: the numbers are each checkpoint's published ``config.json`` on the Hugging Face hub (``ModelShape.source``
names it); the parameter counts follow the HF Qwen2.5-VL modules (decoder layer, vision tower, merger, LoRA on every
decoder linear), as the formulas of :mod:`gui_grounding.ops.memory` state. A new family's shape goes here
(docs/ARCHITECTURE.md, "Where an addition goes").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ModelShape:
    """The numbers of a Qwen2.5-VL-style checkpoint that decide its memory (its ``config.json``).

    Language model: ``hidden`` (h), ``layers`` (L), ``heads``, ``kv_heads`` (grouped-query attention),
    ``intermediate`` (SwiGLU width I), ``vocab`` (V), ``tie_embeddings`` (one matrix for input embeddings and LM head).
    Vision tower (Qwen2.5-VL ViT): ``vision_depth`` blocks of width ``vision_hidden`` with SwiGLU ``vision_intermediate``,
    ``patch_size`` x ``patch_size`` patches, ``temporal_patch_size`` frames per patch, ``spatial_merge`` x
    ``spatial_merge`` patches merged into one LM token by the merger MLP. ``source``: where the numbers are published.
    """

    name: str
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    intermediate: int
    vocab: int
    tie_embeddings: bool
    vision_depth: int = 32
    vision_hidden: int = 1280
    vision_intermediate: int = 3420
    vision_heads: int = 16
    patch_size: int = 14
    temporal_patch_size: int = 2
    spatial_merge: int = 2
    source: str = ""

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    @property
    def kv_dim(self) -> int:
        """``kv_heads x head_dim``: the width of the k and v projections (and of one KV-cache entry per layer)."""
        return self.kv_heads * self.head_dim

    @property
    def resize_factor(self) -> int:
        """smart_resize factor in pixels: ``patch_size x spatial_merge`` (28 for Qwen2/2.5-VL)."""
        return self.patch_size * self.spatial_merge

    def decoder_layer_params(self) -> int:
        """Parameters of one decoder layer: q (with bias), k, v (with bias), o (no bias), gate/up/down, two norms."""
        h, kv, inter = self.hidden, self.kv_dim, self.intermediate
        return (h * h + h) + 2 * (h * kv + kv) + h * h + 3 * h * inter + 2 * h

    def embedding_params(self) -> int:
        return self.vocab * self.hidden

    def lm_params(self) -> int:
        """Language-model parameters: input embeddings, decoder layers, final norm, LM head (unless tied)."""
        head = 0 if self.tie_embeddings else self.vocab * self.hidden
        return self.embedding_params() + self.layers * self.decoder_layer_params() + self.hidden + head

    def vision_params(self) -> int:
        """Vision tower parameters: patch embedding (Conv3d, no bias), blocks (qkv and proj with bias, SwiGLU MLP
        with bias, two RMSNorms), merger (RMSNorm, ``m*vh -> m*vh -> h`` MLP with biases; ``m = spatial_merge**2``)."""
        vh, vi = self.vision_hidden, self.vision_intermediate
        patch = 3 * self.temporal_patch_size * self.patch_size**2 * vh
        block = (vh * 3 * vh + 3 * vh) + (vh * vh + vh) + 2 * (vh * vi + vi) + (vi * vh + vh) + 2 * vh
        m = self.spatial_merge**2 * vh
        merger = vh + (m * m + m) + (m * self.hidden + self.hidden)
        return patch + self.vision_depth * block + merger

    def total_params(self) -> int:
        return self.lm_params() + self.vision_params()

    def lora_params(self, rank: int) -> int:
        """LoRA parameters of rank ``rank`` on every decoder linear (q, k, v, o, gate, up, down: upstream VLM-R1's
        default targets without the LM head): ``rank x (in + out)`` each."""
        h, kv, inter = self.hidden, self.kv_dim, self.intermediate
        per_layer = (h + h) + 2 * (h + kv) + (h + h) + 2 * (h + inter) + (inter + h)
        return self.layers * rank * per_layer


def _hf(name: str) -> str:
    return f"https://huggingface.co/{name}/blob/main/config.json"


#: Published Qwen2.5-VL shapes (config.json of each checkpoint on the Hugging Face hub; the vision tower is the same
#: 32-block, 1280-wide ViT in every size, its merger projecting to the language model's width).
QWEN2_5_VL_SHAPES: dict[str, ModelShape] = {
    s.name: s
    for s in (
        ModelShape("Qwen2.5-VL-3B", 2048, 36, 16, 2, 11008, 151936, True, source=_hf("Qwen/Qwen2.5-VL-3B-Instruct")),
        ModelShape("Qwen2.5-VL-7B", 3584, 28, 28, 4, 18944, 152064, False, source=_hf("Qwen/Qwen2.5-VL-7B-Instruct")),
        ModelShape("Qwen2.5-VL-32B", 5120, 64, 40, 8, 27648, 152064, False, source=_hf("Qwen/Qwen2.5-VL-32B-Instruct")),
        ModelShape("Qwen2.5-VL-72B", 8192, 80, 64, 8, 29568, 152064, False, source=_hf("Qwen/Qwen2.5-VL-72B-Instruct")),
    )
}


def shape_from_config(config: Mapping[str, Any], name: str, source: str) -> ModelShape:
    """A :class:`ModelShape` from a Qwen2/2.5-VL ``config.json`` (text values at the top level or under
    ``text_config``, vision values under ``vision_config``; ``vision_config.embed_dim`` is Qwen2-VL's name for the
    width, ``mlp_ratio`` its MLP width).

    Raises:
        ValueError: a needed value is missing (one line naming it and ``source``).
    """
    text = dict(config)
    text.update(config.get("text_config") or {})
    vision = dict(config.get("vision_config") or {})

    def need(d: Mapping[str, Any], key: str, *alts: str) -> int:
        for k in (key, *alts):
            if d.get(k) is not None:
                return int(d[k])
        raise ValueError(f"{source}: config has no {key}")

    heads = need(text, "num_attention_heads")
    vh = int(vision.get("hidden_size") if "embed_dim" not in vision else vision["embed_dim"]) if vision else 1280
    vi = vision.get("intermediate_size") or int(vh * float(vision.get("mlp_ratio", 4)))
    return ModelShape(
        name=name,
        hidden=need(text, "hidden_size"),
        layers=need(text, "num_hidden_layers"),
        heads=heads,
        kv_heads=int(text.get("num_key_value_heads") or heads),
        intermediate=need(text, "intermediate_size"),
        vocab=need(text, "vocab_size"),
        tie_embeddings=bool(text.get("tie_word_embeddings", config.get("tie_word_embeddings", False))),
        vision_depth=int(vision.get("depth", 32)),
        vision_hidden=vh,
        vision_intermediate=int(vi),
        vision_heads=int(vision.get("num_heads", 16)),
        patch_size=int(vision.get("patch_size", vision.get("spatial_patch_size", 14))),
        temporal_patch_size=int(vision.get("temporal_patch_size", 2)),
        spatial_merge=int(vision.get("spatial_merge_size", 2)),
        source=source,
    )
