"""The vision tower's packed attention in one call per layer (``vlm_r1.vision_attention``, issue 29 item 2).

The reference is transformers' own per-segment loop: the ``sdpa`` vision attention, which splits q/k/v by
``cu_seqlens`` and calls ``sdpa_attention_forward`` once per window or image (transformers 5.23
``modeling_qwen2_5_vl.py:310-329``). Checked in fp32 on CPU:

* the ``runs`` backend (the CPU default) is bitwise equal to the loop; ``padded`` (one SDPA call with a key-padding
  mask) within fp32 rounding;
* on one block of the Qwen2.5-VL-7B vision shape (https://huggingface.co/Qwen/Qwen2.5-VL-7B-Instruct/blob/main/config.json,
  ``vision_config``: hidden 1280, MLP 3420, 16 heads, patch 14, spatial merge 2, window 112) with the windows of a
  1092 x 616 image (78 x 44 patches: 60 windows of at most 64 patches), and on the tiny Qwen2.5-VL, Qwen2-VL and
  Qwen3-VL (logits and every gradient, two images of different sizes, gradient checkpointing on and off);
* the flash-attn and torch ``varlen_attn`` glue with stand-in kernels (no GPU here: their numbers are the GPU check's).
"""

from __future__ import annotations

import copy
import logging
import os
import sys

import pytest
import torch
from PIL import Image
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.vision_utils import get_vision_window_index

from tests.helpers.paths import REPO
from vlm_r1 import vision_attention as va
from vlm_r1.modules import get_vlm_module, load_model, load_processor

sys.path.insert(0, os.path.join(REPO, "benchmarks"))
import gpu_check  # noqa: E402  (the 7B shape's one home)

# the Qwen2.5-VL-7B vision tower (config.json above), one windowed block: benchmarks/gpu_check.py SHAPES["7b"]
VISION_7B = {**gpu_check.SHAPES["7b"]["vision"], "depth": 1, "fullatt_block_indexes": []}  # one windowed block
GRID_1092x616 = [[1, 44, 78]]  # smart_resize keeps 1092 x 616 (multiples of 28): 44 x 78 patches of 14 px


class _Attn(torch.nn.Module):
    """What transformers' interface functions read from the attention module."""

    num_key_value_groups = 1
    is_causal = False


def loop_reference(q, k, v, cu_seqlens, scale):
    """transformers' per-segment loop (``modeling_qwen2_5_vl.py:310-329``): (1, H, N, D) -> (N, H, D)."""
    lengths = (cu_seqlens[1:] - cu_seqlens[:-1]).tolist()
    splits = [torch.split(t, lengths, dim=2) for t in (q, k, v)]
    outs = [
        sdpa_attention_forward(_Attn(), a, b, c, None, scaling=scale, is_causal=False)[0]
        for a, b, c in zip(*splits, strict=True)
    ]
    return torch.cat(outs, dim=1)[0]


def packed_qkv(total, heads, head_dim, seed=0):
    """q/k/v in the layout the vision attention hands its interface: q, k fresh (N, H, D) transposed, v a view of the
    fused qkv projection (``modeling_qwen2_5_vl.py:276-285``)."""
    g = torch.Generator().manual_seed(seed)
    qkv = torch.randn(total, 3, heads, head_dim, generator=g).permute(1, 0, 2, 3)
    q, k, v = qkv.unbind(0)
    return tuple(t.transpose(0, 1).unsqueeze(0) for t in (q.contiguous(), k.contiguous(), v))


def window_cu_seqlens(grid):
    return get_vision_window_index(torch.tensor(grid), spatial_merge_size=2, window_size=112, patch_size=14)[1]


# ---- the kernel ---------------------------------------------------------------------------------------------------
def test_runs_group_consecutive_equal_segments():
    cu = torch.tensor([0, 4, 8, 12, 14, 18, 22, 23], dtype=torch.int32)
    assert va._runs(cu) == [(0, 3, 4), (12, 1, 2), (14, 2, 4), (22, 1, 1)]
    assert va._runs(torch.tensor([0, 0, 5, 5], dtype=torch.int32)) == [(0, 1, 5)]  # empty segments are skipped


@pytest.mark.parametrize(
    "cu_name",
    ["windows_1092x616", "windows_two_images", "images_unequal", "one_image"],
)
def test_packed_backends_equal_the_loop_at_the_7b_head_shape(cu_name):
    cu = {
        "windows_1092x616": lambda: window_cu_seqlens(GRID_1092x616),
        "windows_two_images": lambda: window_cu_seqlens([[1, 44, 78], [1, 20, 36]]),
        "images_unequal": lambda: torch.tensor([0, 880, 1240, 1256], dtype=torch.int32),
        "one_image": lambda: torch.tensor([0, 880], dtype=torch.int32),
    }[cu_name]()
    total = int(cu[-1])
    q, k, v = packed_qkv(total, 16, 80)
    scale = 80**-0.5
    ref = loop_reference(q, k, v, cu, scale)
    runs = va.packed_attention(q, k, v, cu, scale=scale, backend="runs")
    assert torch.equal(runs, ref)
    padded = va.packed_attention(q, k, v, cu, int((cu[1:] - cu[:-1]).max()), scale=scale, backend="padded")
    torch.testing.assert_close(padded, ref, rtol=1e-5, atol=2e-6)
    assert va.choose_backend("cpu", torch.float32) == "runs"


def test_the_windows_of_a_1080p_image_are_20_runs_not_180_calls():
    cu = window_cu_seqlens([[1, 78, 138]])  # 1932 x 1092, what smart_resize makes of 1920 x 1080
    assert cu.numel() - 1 == 180 and int(cu[-1]) == 10764
    assert len(va._runs(cu)) == 20


def test_gradients_of_the_packed_backends_equal_the_loop():
    cu = window_cu_seqlens([[1, 12, 20], [1, 8, 6]])
    total = int(cu[-1])
    leaves = [t.detach().clone().requires_grad_(True) for t in packed_qkv(total, 2, 8, seed=1)]
    weight = torch.randn(total, 2, 8, generator=torch.Generator().manual_seed(2))

    def grads(fn):
        for t in leaves:
            t.grad = None
        (fn(*leaves) * weight).sum().backward()
        return [t.grad.clone() for t in leaves]

    ref = grads(lambda q, k, v: loop_reference(q, k, v, cu, 0.3))
    assert all(
        torch.equal(a, b)
        for a, b in zip(
            grads(lambda q, k, v: va.packed_attention(q, k, v, cu, scale=0.3, backend="runs")), ref, strict=True
        )
    )
    for a, b in zip(
        grads(lambda q, k, v: va.packed_attention(q, k, v, cu, scale=0.3, backend="padded")), ref, strict=True
    ):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


# ---- one block of the 7B vision shape -----------------------------------------------------------------------------
def _block_7b():
    """One Qwen2.5-VL vision block of the 7B shape (random weights) and its inputs for a 1092 x 616 image, in the
    tower's window order (``permute_input_for_window_attn``, ``modeling_qwen2_5_vl.py:418-422``)."""
    from transformers.models.qwen2_5_vl.configuration_qwen2_5_vl import Qwen2_5_VLVisionConfig
    from transformers.models.qwen2_5_vl.modeling_qwen2_5_vl import (
        Qwen2_5_VLVisionBlock,
        Qwen2_5_VLVisionRotaryEmbedding,
    )
    from transformers.vision_utils import get_vision_position_ids

    torch.manual_seed(0)
    config = Qwen2_5_VLVisionConfig(**VISION_7B)
    config._attn_implementation = "sdpa"
    block = Qwen2_5_VLVisionBlock(config).eval()
    for p in block.parameters():  # weights at the initialiser's scale, so attention is not uniform
        torch.nn.init.normal_(p, std=0.02)
    grid = torch.tensor(GRID_1092x616)
    window_index, cu = get_vision_window_index(grid, spatial_merge_size=2, window_size=112, patch_size=14)
    total = int(grid.prod())
    hidden = torch.randn(total, 1280)
    cos, sin = Qwen2_5_VLVisionRotaryEmbedding(config)(hidden, get_vision_position_ids(grid, 2))

    def window_order(t):
        return t.reshape(total // 4, 4, -1)[window_index].reshape(total, -1)

    return config, block, window_order(hidden), cu, (window_order(cos), window_order(sin))


def test_the_attention_of_a_7b_vision_block_equals_the_window_loop(monkeypatch):
    """The block's attention layer (the part that changes), forward; the whole block with gradients is the slow
    test below."""
    config, block, hidden, cu, rope = _block_7b()
    assert cu.numel() - 1 == 60
    va.register_vision_varlen()
    calls = []
    original = va.packed_attention

    def counted(*args, **kwargs):
        calls.append(kwargs["backend"])
        return original(*args, **kwargs)

    monkeypatch.setattr(va, "packed_attention", counted)
    with torch.no_grad():
        x = block.norm1(hidden)
        ref = block.attn(x, cu_seqlens=cu, position_embeddings=rope)
        config._attn_implementation = va.VISION_VARLEN
        setattr(config, va._BACKEND_ATTR, "auto")
        ours = block.attn(x, cu_seqlens=cu, position_embeddings=rope)
    assert calls == ["auto"]  # transformers handed us the packed sequence, once
    assert torch.equal(ours, ref)


@pytest.mark.slow
def test_one_block_of_the_7b_vision_shape_gradients():
    config, block, hidden, cu, rope = _block_7b()
    block.train()
    va.register_vision_varlen()
    weight = torch.randn(hidden.shape, generator=torch.Generator().manual_seed(3))

    def run(implementation, backend="auto"):
        config._attn_implementation = implementation
        setattr(config, va._BACKEND_ATTR, backend)
        block.zero_grad()
        x = hidden.clone().requires_grad_(True)
        out = block(x, cu_seqlens=cu, position_embeddings=rope)
        (out * weight).sum().backward()
        return [out.detach(), x.grad] + [p.grad.clone() for p in block.parameters()]

    ref = run("sdpa")
    assert ref[0].abs().max() > 0
    assert all(torch.equal(a, b) for a, b in zip(run(va.VISION_VARLEN, "runs"), ref, strict=True))
    for a, b in zip(run(va.VISION_VARLEN, "padded"), ref, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


# ---- the tiny models, through the family modules --------------------------------------------------------------------
@pytest.fixture(scope="module")
def tiny_qwen3_dir(tmp_path_factory) -> str:
    from vlm_r1.tiny import build_tiny_model

    return build_tiny_model("qwen3_vl", str(tmp_path_factory.mktemp("tiny_qwen3_vl_va")))


def _batch(path):
    """Two prompts with screenshots of different sizes (so several windows and two unequal images)."""
    module = get_vlm_module(path)
    processor = load_processor(path)
    images = [Image.new("RGB", (300, 200), (200, 120, 40)), Image.new("RGB", (120, 90), (10, 200, 90))]
    for i, im in enumerate(images):
        im.paste((255 - 40 * i, 30, 200), (10, 10, 60, 50))
    prompts = [
        processor.apply_chat_template(
            [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": f"click {i}"}]}],
            tokenize=False,
            add_generation_prompt=True,
        )
        for i in range(2)
    ]
    batch, _ = module.prepare_model_inputs(processor, prompts, images)
    return module, dict(batch)


def _logits_and_grads(model, batch):
    model.zero_grad()
    out = model(**batch).logits
    (out.float().square().mean()).backward()
    return out.detach(), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize(
    "arch, checkpointing", [("qwen2_5_vl", False), ("qwen2_5_vl", True), ("qwen2_vl", False), ("qwen3_vl", False)]
)
def test_tiny_models_equal_transformers_loop(arch, checkpointing, request, caplog):
    fixture = {"qwen2_5_vl": "tiny_qwen25_dir", "qwen2_vl": "tiny_qwen2_dir", "qwen3_vl": "tiny_qwen3_dir"}[arch]
    tiny_dir = request.getfixturevalue(fixture)
    module, batch = _batch(tiny_dir)
    reference = load_model(tiny_dir, dtype=torch.float32).train()
    ours = copy.deepcopy(reference)
    with caplog.at_level(logging.INFO, logger="vlm_r1.vision_attention"):
        module.post_model_init(ours, None)
    assert f"vision attention ({module.model_type})" in caplog.text and "on cpu float32: runs" in caplog.text
    assert ours.config.vision_config._attn_implementation == va.VISION_VARLEN
    assert ours.config.text_config._attn_implementation == reference.config.text_config._attn_implementation
    for m in (reference, ours):
        if checkpointing:
            m.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    ref_logits, ref_grads = _logits_and_grads(reference, batch)
    logits, grads = _logits_and_grads(ours, batch)
    assert torch.equal(logits, ref_logits)
    assert grads.keys() == ref_grads.keys() and any("visual" in n for n in grads)
    assert all(torch.equal(grads[n], ref_grads[n]) for n in grads)
    if checkpointing:  # the padded backend once per family is enough
        return
    va.enable_vision_varlen(ours, backend="padded")
    logits, grads = _logits_and_grads(ours, batch)
    torch.testing.assert_close(logits, ref_logits, rtol=1e-5, atol=1e-5)
    for n in grads:
        torch.testing.assert_close(grads[n], ref_grads[n], rtol=1e-4, atol=1e-6)


# ---- installation ---------------------------------------------------------------------------------------------------
def test_install_is_idempotent_kept_by_copies_and_not_saved(tiny_qwen25_dir, tmp_path):
    model = load_model(tiny_qwen25_dir)
    assert va.enable_vision_varlen(model) == "runs"
    assert va.enable_vision_varlen(model, backend="padded") == "padded"
    clone = copy.deepcopy(model)  # TRL's reference model may be a deep copy
    assert clone.config.vision_config._attn_implementation == va.VISION_VARLEN
    assert getattr(clone.config.vision_config, va._BACKEND_ATTR) == "padded"
    model.save_pretrained(str(tmp_path / "saved"))
    assert va.VISION_VARLEN not in open(os.path.join(tmp_path / "saved", "config.json")).read()
    va.disable_vision_varlen(model)
    assert model.config.vision_config._attn_implementation == "sdpa"
    with pytest.raises(ValueError, match="unknown vision attention backend"):
        va.enable_vision_varlen(model, backend="fast")


def test_eager_and_flash_vision_implementations_are_kept(tiny_qwen25_dir, caplog):
    model = load_model(tiny_qwen25_dir, attn_implementation="eager")
    with caplog.at_level(logging.INFO, logger="vlm_r1.vision_attention"):
        assert va.enable_vision_varlen(model) is None
    assert model.config.vision_config._attn_implementation == "eager"
    assert "kept eager" in caplog.text
    assert get_vlm_module(tiny_qwen25_dir).post_model_init(None, None) is None


def test_split_attention_leaves_the_vision_tower_alone(tiny_qwen25_dir):
    from vlm_r1.shared_prompt_attention import SPLIT_ATTENTION, enable_split_attention

    model = load_model(tiny_qwen25_dir)
    va.enable_vision_varlen(model)
    enable_split_attention(model)
    assert model.config.text_config._attn_implementation == SPLIT_ATTENTION
    assert model.config.vision_config._attn_implementation == va.VISION_VARLEN


# ---- the GPU kernels' glue, with stand-ins ----------------------------------------------------------------------------
def test_flash_attn_and_torch_varlen_glue(monkeypatch):
    cu = window_cu_seqlens([[1, 12, 20], [1, 8, 6]])
    total = int(cu[-1])
    q, k, v = packed_qkv(total, 2, 8, seed=4)
    ref = loop_reference(q, k, v, cu, 0.25)
    seen = []

    def fake_flash(q3, k3, v3, cu_q, cu_k, max_q, max_k, dropout_p=0.0, softmax_scale=None, causal=True):
        seen.append(("flash", q3.shape, cu_q.dtype, max_q, max_k, softmax_scale, causal, dropout_p))
        return loop_reference(*(t.transpose(0, 1).unsqueeze(0) for t in (q3, k3, v3)), cu_q, softmax_scale)

    def fake_varlen(q3, k3, v3, cu_q, cu_k, max_q, max_k, *, scale=None):
        seen.append(("torch", q3.shape, cu_q.dtype, max_q, max_k, scale))
        return loop_reference(*(t.transpose(0, 1).unsqueeze(0) for t in (q3, k3, v3)), cu_q, scale)

    monkeypatch.setitem(va._kernels, "flash_attn", fake_flash)
    monkeypatch.setitem(va._kernels, "torch_varlen", fake_varlen)
    longest = int((cu[1:] - cu[:-1]).max())
    assert torch.equal(va.packed_attention(q, k, v, cu.long(), scale=0.25, backend="flash_attn"), ref)
    assert torch.equal(va.packed_attention(q, k, v, cu, scale=0.25, backend="torch_varlen"), ref)
    assert seen == [
        ("flash", (total, 2, 8), torch.int32, longest, longest, 0.25, False, 0.0),
        ("torch", (total, 2, 8), torch.int32, longest, longest, 0.25),
    ]
    # auto: flash-attn first, then torch varlen (sm80+), on CUDA in half precision only
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (9, 0))
    assert va.choose_backend("cuda", torch.bfloat16) == "flash_attn"
    assert va.choose_backend("cuda", torch.float32) == "padded"
    monkeypatch.setitem(va._kernels, "flash_attn", None)
    assert va.choose_backend("cuda", torch.float16, head_dim=80) == "torch_varlen"
    assert va.choose_backend("cuda", torch.float16, head_dim=300) == "padded"
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (7, 5))
    assert va.choose_backend("cuda", torch.bfloat16) == "padded"
    assert va.choose_backend("cpu", torch.bfloat16) == "runs"


def test_calls_that_are_not_the_vision_towers_are_refused():
    q, k, v = packed_qkv(8, 2, 4)
    cu = torch.tensor([0, 8], dtype=torch.int32)
    with pytest.raises(ValueError, match="bidirectional packed attention only"):
        va.vision_attention_forward(_Attn(), q, k, v, None, is_causal=True, cu_seq_lens_q=cu)
    with pytest.raises(ValueError, match="bidirectional packed attention only"):
        va.vision_attention_forward(_Attn(), q, k, v, None)
    out, weights = va.vision_attention_forward(_Attn(), q, k, v, None, scaling=0.5, cu_seq_lens_q=cu, max_length_q=8)
    assert out.shape == (1, 8, 2, 4) and weights is None
