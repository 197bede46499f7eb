"""The model side of the memory estimate (:mod:`gui_grounding.ops.memory`): a :class:`ModelShape` (the numbers of a
Qwen-VL-style checkpoint that decide its memory, and its parameter counts), the published shapes
(``QWEN2_5_VL_SHAPES``, ``QWEN3_VL_SHAPES``) and :func:`shape_from_config` for a local ``config.json``.

Rule: the numbers are each checkpoint's published ``config.json`` on the Hugging Face hub (``ModelShape.source``
names it); the parameter counts follow the HF Qwen2.5-VL / Qwen3-VL modules (decoder layer, vision tower, merger,
DeepStack mergers, LoRA on every decoder linear), as the formulas of :mod:`gui_grounding.ops.memory` state. A new
family's shape goes here (docs/ARCHITECTURE.md, "Where an addition goes").

The two families differ in (transformers 5.23 ``models/qwen2_5_vl`` vs ``models/qwen3_vl``, module by module):

* decoder: Qwen2.5-VL has biases on q, k, v; Qwen3-VL has none (``attention_bias: false``) but RMS norms on q and k of
  width ``head_dim`` each (``q_norm``, ``k_norm``), and an explicit ``head_dim`` (128 in every Qwen3-VL size);
* vision blocks: Qwen2.5-VL: RMSNorms and a SwiGLU MLP (gate, up, down, with biases); Qwen3-VL: LayerNorms (weight and
  bias) and a two-layer GELU MLP (``linear_fc1``, ``linear_fc2``, with biases);
* vision stem: Qwen3-VL's patch Conv3d has a bias and a learned position table (``num_position_embeddings`` x width);
* mergers: Qwen3-VL's merger normalises the block width before the 2x2 shuffle (LayerNorm of ``vision_hidden``) and
  it has one more merger per ``deepstack_visual_indexes`` entry, each normalising after the shuffle (LayerNorm of
  ``4 x vision_hidden``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

#: the families :class:`ModelShape` counts (``ModelShape.family``): Qwen2/2.5-VL and Qwen3-VL (dense)
FAMILIES = ("qwen2_5_vl", "qwen3_vl")


@dataclass(frozen=True)
class ModelShape:
    """The numbers of a Qwen-VL-style checkpoint that decide its memory (its ``config.json``).

    Language model: ``hidden`` (h), ``layers`` (L), ``heads``, ``kv_heads`` (grouped-query attention),
    ``intermediate`` (SwiGLU width I), ``vocab`` (V), ``tie_embeddings`` (one matrix for input embeddings and LM head),
    ``explicit_head_dim`` (``text_config.head_dim`` where the config states it; 0: ``hidden / heads``).
    Vision tower: ``vision_depth`` blocks of width ``vision_hidden`` with MLP width ``vision_intermediate``,
    ``patch_size`` x ``patch_size`` patches, ``temporal_patch_size`` frames per patch, ``spatial_merge`` x
    ``spatial_merge`` patches merged into one LM token by the merger MLP; Qwen3-VL also ``vision_positions`` (learned
    position table rows) and ``deepstack`` (extra mergers, one per ``deepstack_visual_indexes`` entry).
    ``family``: which modules the counts follow (:data:`FAMILIES`; the module docstring lists the differences).
    ``source``: where the numbers are published.
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
    family: str = "qwen2_5_vl"
    explicit_head_dim: int = 0
    vision_positions: int = 0
    deepstack: int = 0

    def __post_init__(self):
        if self.family not in FAMILIES:
            raise ValueError(f"{self.name}: unknown family {self.family!r} (one of {', '.join(FAMILIES)})")

    @property
    def head_dim(self) -> int:
        return self.explicit_head_dim or self.hidden // self.heads

    @property
    def q_dim(self) -> int:
        """``heads x head_dim``: the width of the q projection (``hidden`` unless the config states a ``head_dim``)."""
        return self.heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        """``kv_heads x head_dim``: the width of the k and v projections (and of one KV-cache entry per layer)."""
        return self.kv_heads * self.head_dim

    @property
    def resize_factor(self) -> int:
        """smart_resize factor in pixels: ``patch_size x spatial_merge`` (28 for Qwen2/2.5-VL, 32 for Qwen3-VL)."""
        return self.patch_size * self.spatial_merge

    def decoder_layer_params(self) -> int:
        """Parameters of one decoder layer: q, k, v (with biases in Qwen2.5-VL; none, plus q/k RMS norms of
        ``head_dim`` in Qwen3-VL), o (no bias), gate/up/down, two norms."""
        h, q, kv, inter = self.hidden, self.q_dim, self.kv_dim, self.intermediate
        common = h * q + 2 * h * kv + q * h + 3 * h * inter + 2 * h
        if self.family == "qwen3_vl":
            return common + 2 * self.head_dim
        return common + q + 2 * kv

    def embedding_params(self) -> int:
        return self.vocab * self.hidden

    def lm_params(self) -> int:
        """Language-model parameters: input embeddings, decoder layers, final norm, LM head (unless tied)."""
        head = 0 if self.tie_embeddings else self.vocab * self.hidden
        return self.embedding_params() + self.layers * self.decoder_layer_params() + self.hidden + head

    def vision_params(self) -> int:
        """Vision tower parameters. Qwen2.5-VL: patch embedding (Conv3d, no bias), blocks (qkv and proj with bias,
        SwiGLU MLP with bias, two RMSNorms), merger (RMSNorm, ``m*vh -> m*vh -> h`` MLP with biases;
        ``m = spatial_merge**2 * vh``). Qwen3-VL: patch embedding with bias, the position table, blocks (qkv and proj
        with bias, ``vh -> vi -> vh`` GELU MLP with biases, two LayerNorms), the merger (LayerNorm of ``vh``, the same
        MLP) and ``deepstack`` mergers (LayerNorm of ``m``, the same MLP)."""
        vh, vi = self.vision_hidden, self.vision_intermediate
        patch = 3 * self.temporal_patch_size * self.patch_size**2 * vh
        attention = (vh * 3 * vh + 3 * vh) + (vh * vh + vh)
        m = self.spatial_merge**2 * vh
        mlp = (m * m + m) + (m * self.hidden + self.hidden)
        if self.family == "qwen3_vl":
            block = attention + (vh * vi + vi) + (vi * vh + vh) + 2 * 2 * vh
            stem = patch + vh + self.vision_positions * vh
            return stem + self.vision_depth * block + (2 * vh + mlp) + self.deepstack * (2 * m + mlp)
        block = attention + 2 * (vh * vi + vi) + (vi * vh + vh) + 2 * vh
        return patch + self.vision_depth * block + vh + mlp

    def total_params(self) -> int:
        return self.lm_params() + self.vision_params()

    def lora_params(self, rank: int) -> int:
        """LoRA parameters of rank ``rank`` on every decoder linear (q, k, v, o, gate, up, down: upstream VLM-R1's
        default targets without the LM head): ``rank x (in + out)`` each."""
        h, q, kv, inter = self.hidden, self.q_dim, self.kv_dim, self.intermediate
        per_layer = (h + q) + 2 * (h + kv) + (q + h) + 2 * (h + inter) + (inter + h)
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


#: Qwen/Qwen3-VL-8B-Instruct's config.json (model_type qwen3_vl). The hub file could not be fetched here; its numbers
#: are read from the copy NVIDIA keeps in its tests,
#: NVIDIA/TensorRT-LLM:tests/unittest/_torch/modeling/test_modeling_qwen3vl.py:15-64 at 840c318750318b453c0b1a8dc20a3b9fbc4f92dc
#: (``QWEN3_VL_8B_CONFIG``, ``_name_or_path`` Qwen3-VL-8B-Instruct; there ``num_hidden_layers`` is cut to 4 "for
#: testing, 36 layers for full model"): text hidden 4096, 36 layers, 32 heads, 8 kv heads, head_dim 128, intermediate
#: 12288, vocab 151936, untied; vision depth 27, width 1152, MLP 4304, 16 heads, patch 16, temporal patch 2, merge 2,
#: 2304 position rows, out_hidden_size 4096, deepstack_visual_indexes [8, 16, 24]. Its count, 8,767,123,696
#: parameters, equals transformers 5.23's Qwen3VLForConditionalGeneration built from those numbers (on the meta
#: device), i.e. 8.77B, the checkpoint's size as the hub lists it (that page was not read here; the transformers
#: count is the check: tests/test_recipe_qwen3vl.py).
QWEN3_VL_8B_SOURCE = (
    f"{_hf('Qwen/Qwen3-VL-8B-Instruct')}, as copied in NVIDIA/TensorRT-LLM "
    "tests/unittest/_torch/modeling/test_modeling_qwen3vl.py:15-64 (840c318; 36 layers in the full model)"
)
QWEN3_VL_SHAPES: dict[str, ModelShape] = {
    s.name: s
    for s in (
        ModelShape(
            "Qwen3-VL-8B",
            4096,
            36,
            32,
            8,
            12288,
            151936,
            False,
            vision_depth=27,
            vision_hidden=1152,
            vision_intermediate=4304,
            vision_heads=16,
            patch_size=16,
            source=QWEN3_VL_8B_SOURCE,
            family="qwen3_vl",
            explicit_head_dim=128,
            vision_positions=2304,
            deepstack=3,
        ),
    )
}
#: every published shape by name
SHAPES: dict[str, ModelShape] = {**QWEN2_5_VL_SHAPES, **QWEN3_VL_SHAPES}


def shape_from_config(config: Mapping[str, Any], name: str, source: str) -> ModelShape:
    """A :class:`ModelShape` from a Qwen2/2.5-VL or Qwen3-VL ``config.json`` (text values at the top level or under
    ``text_config``, vision values under ``vision_config``; ``vision_config.embed_dim`` is Qwen2-VL's name for the
    width, ``mlp_ratio`` its MLP width). ``model_type`` ``qwen3_vl`` counts Qwen3-VL's modules (``head_dim``,
    ``num_position_embeddings``, ``deepstack_visual_indexes`` read); anything else Qwen2.5-VL's.

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
    family = "qwen3_vl" if config.get("model_type") == "qwen3_vl" else "qwen2_5_vl"
    qwen3 = family == "qwen3_vl"
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
        family=family,
        explicit_head_dim=int(text.get("head_dim") or 0) if qwen3 else 0,
        vision_positions=int(vision.get("num_position_embeddings") or 0) if qwen3 else 0,
        deepstack=len(vision.get("deepstack_visual_indexes") or ()) if qwen3 else 0,
    )
