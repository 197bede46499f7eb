"""Split attention for packed shared-prompt rows (vlm_r1.shared_prompt_attention).

Checked against the dense 4D mask of ``vlm_r1.shared_prompt.dense_mask`` (unit level, random tensors, GQA) and, on
the tiny Qwen2.5-VL in fp32, against the dense-mask packed path and TRL's own naive
``GRPOTrainer._get_per_token_logps_and_entropies``: log-probs, entropies and every parameter gradient (vision tower
included), gradient checkpointing on and off, G in {4, 8}, two groups of different packed lengths in one forward (so
one row is padded), one fully masked rollout. The flash backend's plumbing runs on CPU against a pure-torch stand-in
for ``flash_attn.flash_attn_varlen_func`` (bottom-right causal, as flash-attn >= 2.1).
"""

from __future__ import annotations

import sys
import types
from contextlib import nullcontext
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F

from vlm_r1 import shared_prompt as sp
from vlm_r1 import shared_prompt_attention as spa

TOL = 1e-5


# ---- a pure-torch flash_attn stand-in ------------------------------------------------------------------------------
def _fake_varlen(
    q,
    k,
    v,
    cu_seqlens_q,
    cu_seqlens_k,
    max_seqlen_q,
    max_seqlen_k,
    dropout_p=0.0,
    softmax_scale=None,
    causal=False,
    **unused,
):
    """flash_attn_varlen_func semantics: q (total_q, H, d), k/v (total_k, Hkv, d); per sequence, causal aligned to
    the bottom right (query i of n sees keys < k_len - n + i + 1)."""
    assert q.dim() == 3 and k.dim() == 3 and cu_seqlens_q.dtype == torch.int32 and cu_seqlens_k.dtype == torch.int32
    assert dropout_p == 0.0
    rep = q.size(1) // k.size(1)
    outs = []
    for i in range(cu_seqlens_q.numel() - 1):
        q0, q1 = int(cu_seqlens_q[i]), int(cu_seqlens_q[i + 1])
        k0, k1 = int(cu_seqlens_k[i]), int(cu_seqlens_k[i + 1])
        assert q1 - q0 <= max_seqlen_q and k1 - k0 <= max_seqlen_k
        qs = q[q0:q1].transpose(0, 1)
        ks = k[k0:k1].transpose(0, 1).repeat_interleave(rep, 0)
        vs = v[k0:k1].transpose(0, 1).repeat_interleave(rep, 0)
        mask = None
        if causal:
            n, m = q1 - q0, k1 - k0
            mask = torch.arange(m)[None, :] <= torch.arange(n)[:, None] + (m - n)
        outs.append(F.scaled_dot_product_attention(qs, ks, vs, attn_mask=mask, scale=softmax_scale).transpose(0, 1))
    return torch.cat(outs)


@pytest.fixture
def fake_flash(monkeypatch):
    """A ``flash_attn`` module in sys.modules whose varlen function is :func:`_fake_varlen` (counts its calls)."""
    module = types.ModuleType("flash_attn")
    module.__version__ = "2.7.4"
    module.calls = 0

    def varlen(*args, **kwargs):
        module.calls += 1
        return _fake_varlen(*args, **kwargs)

    module.flash_attn_varlen_func = varlen
    monkeypatch.setitem(sys.modules, "flash_attn", module)
    return module


# ---- unit level: the attention function on random tensors ------------------------------------------------------------
SEGMENTS = [(7, [3, 1, 4]), (0, [2, 5]), (12, [1, 1, 6, 2]), (5, [9])]  # row 1: a 1-token prompt (empty prefix)


def _layout(segments):
    L = max(P + sum(s) for P, s in segments)
    packed = SimpleNamespace(input_ids=torch.zeros(len(segments), L, dtype=torch.long), segments=segments)
    return L, packed


def _random_qkv(b, H, Hkv, L, d, seed):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(b, h, L, d, generator=g, requires_grad=True) for h in (H, Hkv, Hkv)]


def _dense_reference(q, k, v, packed, scale):
    """SDPA over the dense (n, 1, L, L) mask of shared_prompt.dense_mask; output (b, L, H, d)."""
    rep = q.size(1) // k.size(1)
    mask = sp.dense_mask(packed)
    out = F.scaled_dot_product_attention(
        q, k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1), attn_mask=mask, scale=scale
    )
    return out.transpose(1, 2)


def _token_mask(segments, L):
    keep = torch.zeros(len(segments), L, dtype=torch.bool)
    for i, (P, s) in enumerate(segments):
        keep[i, : P + sum(s)] = True
    return keep


@pytest.mark.parametrize("backend", ["reference", "flash", "flex"])
@pytest.mark.parametrize("heads", [(4, 4), (4, 2), (6, 1)])
def test_split_matches_dense_mask_sdpa(backend, heads, fake_flash):
    H, Hkv = heads
    L, packed = _layout(SEGMENTS)
    module = torch.nn.Module()
    module.config = SimpleNamespace(_shared_prompt_split_backend=backend)
    keep = _token_mask(SEGMENTS, L)
    w = torch.randn(len(SEGMENTS), L, H, 8, generator=torch.Generator().manual_seed(1))
    results = []
    for split in (True, False):
        q, k, v = _random_qkv(len(SEGMENTS), H, Hkv, L, 8, seed=0)
        if split:
            out, weights = spa.split_attention_forward(
                module, q, k, v, None, scaling=0.3, shared_prompt_segments=sp.SegmentInfo(SEGMENTS, L)
            )
            assert weights is None
            assert out.shape == (len(SEGMENTS), L, H, 8)
            assert torch.equal(out[~keep], torch.zeros_like(out[~keep]))  # padding outputs are zero
        else:
            out = _dense_reference(q, k, v, packed, 0.3)
        (out * w)[keep].sum().backward()
        results.append((out[keep].detach(), q.grad, k.grad, v.grad))
    for a, b in zip(*results, strict=True):
        torch.testing.assert_close(a, b, atol=TOL, rtol=TOL)
    assert fake_flash.calls == (1 if backend == "flash" else 0)  # the flash path is one varlen call per layer


def test_flash_and_reference_backends_agree_on_padding_and_order(fake_flash):
    # rows in a different order, a trailing padding-only tail, default scaling (None = 1/sqrt(d))
    segments = [(3, [2, 2]), (20, [1, 3])]
    L = 30
    out = {}
    for backend in ("reference", "flash", "flex"):
        module = torch.nn.Module()
        module.config = SimpleNamespace(_shared_prompt_split_backend=backend)
        q, k, v = _random_qkv(2, 4, 2, L, 16, seed=3)
        out[backend] = spa.split_attention_forward(
            module, q, k, v, None, shared_prompt_segments=sp.SegmentInfo(segments, L)
        )[0]
    torch.testing.assert_close(out["flash"], out["reference"], atol=TOL, rtol=TOL)
    torch.testing.assert_close(out["flex"], out["reference"], atol=TOL, rtol=TOL)
    assert torch.equal(out["flex"][:, 24:], torch.zeros_like(out["flex"][:, 24:]))  # padding tail: zeros


def test_flex_kernel_forward_matches_reference():
    # no gradient: the FlexAttention function itself runs (eager on CPU); with one, CPU uses the same mask via SDPA
    segments = [(5, [3, 1, 4]), (0, [2, 5]), (9, [6])]
    L = 20
    out = {}
    for backend in ("reference", "flex"):
        module = torch.nn.Module()
        module.config = SimpleNamespace(_shared_prompt_split_backend=backend)
        q, k, v = (t.detach() for t in _random_qkv(3, 4, 2, L, 16, seed=5))
        out[backend] = spa.split_attention_forward(
            module, q, k, v, None, scaling=0.25, shared_prompt_segments=sp.SegmentInfo(segments, L)
        )[0]
    torch.testing.assert_close(out["flex"], out["reference"], atol=TOL, rtol=TOL)


def test_flex_refuses_dropout():
    module = torch.nn.Module()
    module.config = SimpleNamespace(_shared_prompt_split_backend="flex")
    q, k, v = _random_qkv(1, 2, 2, 6, 4, seed=0)
    with pytest.raises(NotImplementedError, match="dropout"):
        spa.split_attention_forward(
            module, q, k, v, None, dropout=0.1, shared_prompt_segments=sp.SegmentInfo([(2, [4])], 6)
        )


def test_backend_selection(fake_flash, monkeypatch):
    assert spa.split_backend("cpu", torch.float32) == "reference"
    assert spa.split_backend("cuda", torch.float32) == "flex"  # flash-attn has no fp32 kernels; FlexAttention has
    assert spa.split_backend("cuda", torch.bfloat16) == "flash"
    assert spa.split_backend("cpu", torch.float32, "flash") == "flash"
    assert spa.split_backend("cuda", torch.bfloat16, "reference") == "reference"
    assert spa.split_backend("cpu", torch.float32, "flex") == "flex"
    with pytest.raises(ValueError, match="unknown split attention backend"):
        spa.split_backend("cpu", torch.float32, "triton")
    fake_flash.__version__ = "2.0.9"  # top-left causal alignment: refused
    with pytest.raises(ImportError, match=">= 2.1"):
        spa.split_backend("cpu", torch.float32, "flash")
    assert spa.split_backend("cuda", torch.float16) == "flex"  # no usable flash-attn: torch's FlexAttention on CUDA
    monkeypatch.setitem(sys.modules, "flash_attn", None)  # not installed
    with pytest.raises(ImportError, match="pip install flash-attn"):
        spa.split_backend("cpu", torch.float32, "flash")
    assert spa.split_backend("cuda", torch.bfloat16) == "flex"
    assert spa.split_backend("cpu", torch.bfloat16) == "reference"
    monkeypatch.setitem(sys.modules, "torch.nn.attention.flex_attention", None)  # a torch without FlexAttention
    assert spa.split_backend("cuda", torch.bfloat16) == "reference"
    with pytest.raises(ImportError, match="torch >= 2.5"):
        spa.split_backend("cpu", torch.float32, "flex")


def test_bad_layout_is_refused():
    module = torch.nn.Module()
    module.config = SimpleNamespace()
    q, k, v = _random_qkv(1, 2, 2, 6, 4, seed=0)
    with pytest.raises(ValueError, match="does not fit"):
        spa.split_attention_forward(module, q, k, v, None, shared_prompt_segments=sp.SegmentInfo([(4, [3])], 6))
    with pytest.raises(ValueError, match="do not match"):
        spa.split_attention_forward(module, q, k, v, None, shared_prompt_segments=sp.SegmentInfo([(1, [1])] * 2, 6))


# ---- the compiled FlexAttention: one compile for every packed length ------------------------------------------------
# six packed layouts of two rows; the packed length L (27 ... 100, with a padding tail) changes every time
COMPILE_LAYOUTS = [
    [(17, [3, 5, 2]), (9, [4, 1])],
    [(30, [2, 2, 6, 1]), (12, [7])],
    [(41, [5, 3]), (40, [1, 1, 1])],
    [(8, [20, 11]), (55, [2, 9])],
    [(70, [1, 4, 4, 4]), (3, [6])],
    [(66, [12, 9, 8]), (90, [3])],
]


def _compiled_frames() -> int:
    """Dynamo's own count of the frames it compiled, recompilations included (torch._dynamo.utils.counters)."""
    from torch._dynamo.utils import counters

    return int(counters["frames"]["total"])


def _fresh_dynamo():
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()


@pytest.mark.parametrize(
    "device, backend",
    [
        ("cpu", "aot_eager"),  # dynamo's guards (what decides a recompile) without inductor's code generation: ~1 s
        pytest.param("cpu", "inductor", marks=pytest.mark.slow),  # the CPU flex kernel, inference only: ~4-10 s
        pytest.param(  # the GPU check: forward and backward through the fused kernel
            "cuda",
            "inductor",
            marks=[
                pytest.mark.slow,
                pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA"),
            ],
        ),
    ],
)
def test_flex_compiles_once_for_six_packed_lengths(device, backend, monkeypatch):
    monkeypatch.setattr(spa, "COMPILE_DEVICES", ("cuda", "cpu"))
    monkeypatch.setattr(spa, "COMPILE_BACKEND", backend)
    monkeypatch.setattr(spa, "_COMPILED_FLEX", {})
    _fresh_dynamo()
    train = device == "cuda"  # torch 2.13 compiles FlexAttention on CPU for inference only
    lengths = []
    for i, segments in enumerate(COMPILE_LAYOUTS):
        L = max(P + sum(s) for P, s in segments) + i % 3  # a padding tail in some
        lengths.append(L)
        g = torch.Generator().manual_seed(i)
        qkv = [torch.randn(2, h, L, 16, generator=g).to(device).requires_grad_(train) for h in (4, 2, 2)]
        out = {}
        for name in ("flex", "reference"):
            module = torch.nn.Module()
            module.config = SimpleNamespace(_shared_prompt_split_backend=name)
            with torch.set_grad_enabled(train):
                out[name] = spa.split_attention_forward(
                    module, *qkv, None, scaling=0.25, shared_prompt_segments=sp.SegmentInfo(segments, L)
                )[0]
            if train:
                grads = torch.autograd.grad(out[name].square().sum(), qkv)
                out[name] = torch.cat([out[name].flatten()] + [gr.flatten() for gr in grads])
        torch.testing.assert_close(out["flex"], out["reference"], atol=1e-4, rtol=1e-4)
    assert len(set(lengths)) == 6
    assert list(spa._COMPILED_FLEX) == [(device, backend)]
    assert 1 <= _compiled_frames() <= 3  # one compile, at most 2 recompilations (measured: 1 compile, 0 recompiles)


def test_the_compile_counter_sees_recompilations():
    """The counter above would see them: ``dynamic=False`` (the compile before issue 29) compiles once per length."""
    from torch.nn.attention.flex_attention import flex_attention

    _fresh_dynamo()
    static = torch.compile(flex_attention, dynamic=False, backend="aot_eager")
    for segments in COMPILE_LAYOUTS[:3]:
        L = max(P + sum(s) for P, s in segments)
        block_mask, _ = spa._flex_block_mask(sp.SegmentInfo(segments, L), L, torch.device("cpu"))
        with torch.no_grad():
            static(*(torch.randn(2, 2, L, 8) for _ in range(3)), block_mask=block_mask)
    assert _compiled_frames() == 3


# ---- the tiny Qwen2.5-VL: split vs dense vs TRL naive ----------------------------------------------------------------
def _load(path, attn):
    from transformers import Qwen2_5_VLForConditionalGeneration
    from trl.trainer.utils import add_fused_lm_head

    torch.manual_seed(0)
    model = Qwen2_5_VLForConditionalGeneration.from_pretrained(path, attn_implementation=attn, dtype=torch.float32)
    add_fused_lm_head(model, outputs=("log_probs", "entropy"))
    return model


@pytest.fixture(scope="module")
def tiny(tiny_qwen25_dir):
    from vlm_r1.modules import get_vlm_module

    module = get_vlm_module(tiny_qwen25_dir)
    return SimpleNamespace(path=tiny_qwen25_dir, module=module, processor=module.load_processor(tiny_qwen25_dir))


def _batch(tiny, G, C=10, seed=0):
    """Two groups of G rollouts (two image sizes and instructions: different packed lengths, so one row is padded),
    completions of random length 1..C, rollout G-1 fully masked."""
    from PIL import Image

    proc = tiny.processor
    g = torch.Generator().manual_seed(seed)
    texts, images = [], []
    for i, (w, h) in enumerate([(200, 120), (160, 300)]):
        pixels = torch.randint(0, 256, (w * h * 3,), generator=g).to(torch.uint8).numpy().tobytes()
        images.append(Image.frombytes("RGB", (w, h), pixels))
        msgs = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "Click the box." * (i + 1)}]}]
        texts.append(proc.apply_chat_template(msgs, add_generation_prompt=True, tokenize=False))
    B = 2 * G
    comp = torch.full((B, C), proc.tokenizer.pad_token_id)
    cmask = torch.zeros(B, C, dtype=torch.long)
    for r in range(B):
        n = int(torch.randint(1, C + 1, (1,), generator=g))
        comp[r, :n] = torch.randint(20, 300, (n,), generator=g)
        cmask[r, :n] = 1
    cmask[G - 1] = 0
    rep = proc(
        images=[im for im in images for _ in range(G)],
        text=[t for t in texts for _ in range(G)],
        padding=True,
        return_tensors="pt",
    )
    return SimpleNamespace(
        G=G,
        C=C,
        B=B,
        ids=torch.cat([rep["input_ids"], comp], 1),
        mask=torch.cat([rep["attention_mask"], cmask], 1),
        mm=torch.cat([rep["mm_token_type_ids"], torch.zeros_like(comp)], 1),
        pixel_values=rep["pixel_values"],
        grid=rep["image_grid_thw"],
        cmask=cmask,
        adv=torch.randn(B, generator=g),
    )


def _run(model, tiny, batch, how, additive_dtype=None):
    """(logps, entropies, {param name: grad}) of a GRPO-like loss; ``how``: "naive", "dense" or "split"."""
    from trl import GRPOTrainer

    model.zero_grad(set_to_none=True)
    nums = [1] * batch.B
    if how == "naive":
        trainer = SimpleNamespace(accelerator=SimpleNamespace(autocast=nullcontext, is_main_process=True))
        lp, en, _ = GRPOTrainer._get_per_token_logps_and_entropies(
            trainer,
            model,
            batch.ids,
            batch.mask,
            batch.C,
            compute_entropy=True,
            pixel_values=batch.pixel_values,
            image_grid_thw=batch.grid,
            num_images=nums,
            mm_token_type_ids=batch.mm,
        )
    else:
        pv = sp.dedup_pixel_values(batch.pixel_values, batch.grid, nums, batch.G)
        lp, en = sp.per_token_logps_and_entropies(
            model,
            batch.ids,
            batch.mask,
            batch.C,
            num_generations=batch.G,
            positions_fn=tiny.module.shared_prompt_positions_fn(model),
            compute_entropy=True,
            pixel_values=pv,
            image_grid_thw=batch.grid,
            num_images=nums,
            mm_token_type_ids=batch.mm,
            attention=how,
            additive_mask_dtype=additive_dtype,
        )
    m = batch.cmask.float()
    loss = -(batch.adv[:, None] * torch.exp(lp - lp.detach()) * m).sum() / m.sum()
    loss.backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    return lp.detach(), en.detach(), grads


def _assert_same(a, b):
    torch.testing.assert_close(a[0], b[0], atol=TOL, rtol=0)
    torch.testing.assert_close(a[1], b[1], atol=TOL, rtol=0)
    assert a[2].keys() == b[2].keys()
    assert any(".visual." in n or n.startswith("model.visual") for n in a[2])  # the vision tower is trained too
    for name in a[2]:
        ref = a[2][name]
        rel = float((ref - b[2][name]).norm() / ref.norm().clamp_min(1e-30))
        assert rel <= TOL, f"{name}: gradient relative error {rel:.2e}"


@pytest.fixture(scope="module")
def sdpa_model(tiny):
    model = _load(tiny.path, "sdpa")
    model.train()
    return model


@pytest.fixture(scope="module")
def batches(tiny):
    return {G: _batch(tiny, G) for G in (4, 8)}


@pytest.mark.parametrize("G", [4, 8])
@pytest.mark.parametrize("checkpointing", [False, True])
def test_split_equals_dense_and_naive_on_tiny_qwen25(sdpa_model, tiny, batches, G, checkpointing):
    model = sdpa_model
    assert spa.enable_split_attention(model, backend="reference") == "sdpa"
    if checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    else:
        model.gradient_checkpointing_disable()
    try:
        batch = batches[G]
        naive = _run(model, tiny, batch, "naive")
        dense = _run(model, tiny, batch, "dense")
        split = _run(model, tiny, batch, "split")
    finally:
        model.gradient_checkpointing_disable()
    assert (naive[0][G - 1] == 0).all()  # the fully masked rollout
    _assert_same(naive, split)
    _assert_same(dense, split)


def test_flash_plumbing_on_tiny_qwen25(sdpa_model, tiny, batches, fake_flash):
    model = sdpa_model
    batch = batches[4]
    spa.enable_split_attention(model, backend="reference")
    reference = _run(model, tiny, batch, "split")
    assert fake_flash.calls == 0
    spa.enable_split_attention(model, backend="flash")
    try:
        flash = _run(model, tiny, batch, "split")
    finally:
        spa.enable_split_attention(model, backend="reference")
    assert fake_flash.calls == model.config.text_config.num_hidden_layers  # one varlen call per layer
    _assert_same(reference, flash)


def test_flex_backend_on_tiny_qwen25(sdpa_model, tiny, batches):
    model = sdpa_model
    batch = batches[4]
    spa.enable_split_attention(model, backend="reference")
    reference = _run(model, tiny, batch, "split")
    spa.enable_split_attention(model, backend="flex")
    try:
        flex = _run(model, tiny, batch, "split")
    finally:
        spa.enable_split_attention(model, backend="reference")
    _assert_same(reference, flex)


def test_split_with_eager_base(tiny, batches):
    model = _load(tiny.path, "eager")
    model.train()
    assert spa.enable_split_attention(model, backend="reference") == "eager"
    batch = batches[4]
    naive = _run(model, tiny, batch, "naive")
    dense = _run(model, tiny, batch, "dense", additive_dtype=torch.float32)
    split = _run(model, tiny, batch, "split")
    _assert_same(naive, split)
    _assert_same(dense, split)


def test_enable_switches_text_only_and_is_idempotent(tiny):
    model = _load(tiny.path, "sdpa")
    wrapper = torch.nn.Module()  # DeepSpeed-/DDP-like wrapper: the model under .module
    wrapper.module = model
    assert spa.enable_split_attention(wrapper) == "sdpa"
    assert spa.enable_split_attention(model) == "sdpa"  # idempotent: the base is remembered, not the split name
    assert model.config.text_config._attn_implementation == spa.SPLIT_ATTENTION
    assert model.config.vision_config._attn_implementation == "sdpa"
    assert all(
        layer.self_attn.config._attn_implementation == spa.SPLIT_ATTENTION
        for layer in model.model.language_model.layers
    )
    assert model.model.visual.blocks[0].attn.config._attn_implementation == "sdpa"
    with pytest.raises(ValueError, match="unknown split attention backend"):
        spa.enable_split_attention(model, backend="triton")


def test_deepcopy_keeps_split_attention(sdpa_model, tiny, batches):
    import copy

    spa.enable_split_attention(sdpa_model, backend="reference")
    clone = copy.deepcopy(sdpa_model)  # how TRL may build its reference model
    assert spa.enable_split_attention(clone) == "sdpa"
    assert len(clone._forward_pre_hooks) == len(sdpa_model._forward_pre_hooks)  # no second set of hooks
    _assert_same(_run(sdpa_model, tiny, batches[4], "split"), _run(clone, tiny, batches[4], "split"))


def test_enable_through_peft(tiny):
    peft = pytest.importorskip("peft")
    model = _load(tiny.path, "sdpa")
    lora = peft.get_peft_model(model, peft.LoraConfig(r=2, target_modules=["q_proj", "v_proj"]))
    assert spa.enable_split_attention(lora) == "sdpa"
    assert model.config.text_config._attn_implementation == spa.SPLIT_ATTENTION


def test_mask_is_skipped_only_inside_split_forwards(sdpa_model, tiny, batches):
    model = sdpa_model
    spa.enable_split_attention(model, backend="reference")
    seen = []
    layer = model.model.language_model.layers[0]
    handle = layer.register_forward_pre_hook(
        lambda mod, args, kwargs: seen.append((spa._segments_active(), kwargs.get("attention_mask"))), with_kwargs=True
    )
    try:
        with torch.no_grad():
            batch = batches[4]
            nums = [1] * batch.B
            pv = sp.dedup_pixel_values(batch.pixel_values, batch.grid, nums, batch.G)
            kwargs = dict(
                num_generations=batch.G,
                positions_fn=tiny.module.shared_prompt_positions_fn(model),
                pixel_values=pv,
                image_grid_thw=batch.grid,
                num_images=nums,
                mm_token_type_ids=batch.mm,
            )
            sp.per_token_logps_and_entropies(model, batch.ids, batch.mask, batch.C, attention="split", **kwargs)
            sp.per_token_logps_and_entropies(model, batch.ids, batch.mask, batch.C, attention="dense", **kwargs)
    finally:
        handle.remove()
    (active_split, mask_split), (active_dense, mask_dense) = seen
    assert active_split and mask_split is None  # no mask built for the split forward
    assert not active_dense and mask_dense is not None and mask_dense.dim() == 4
    assert not spa._segments_active()  # the flag is cleared after the forward
    with pytest.raises(ValueError, match="do not match"), torch.no_grad():
        model(input_ids=batch.ids[:1, :5], shared_prompt_segments=sp.SegmentInfo([(2, [2])], 4))
    assert not spa._segments_active()  # ... and after a forward that raised


def test_without_segments_the_base_implementation_runs(tiny):
    """Delegation: naive log-probs bitwise equal, and greedy generation (left-padded batch) gives the same tokens."""
    proc = tiny.processor
    model = _load(tiny.path, "sdpa")
    model.eval()
    texts = [
        proc.apply_chat_template(
            [{"role": "user", "content": [{"type": "text", "text": t}]}], add_generation_prompt=True, tokenize=False
        )
        for t in ("Where is the search box?", "Click OK.")
    ]
    proc.tokenizer.padding_side = "left"
    enc = proc(text=texts, padding=True, return_tensors="pt")
    assert not bool(enc["attention_mask"].all())  # a padded row: the 2D mask goes through the base mask function

    def outputs():
        with torch.no_grad():
            gen = model.generate(**enc, max_new_tokens=6, do_sample=False)
            logits = model(**enc).logits
        return gen, logits

    before = outputs()
    assert spa.enable_split_attention(model) == "sdpa"
    after = outputs()
    assert torch.equal(before[0], after[0])
    assert torch.equal(before[1], after[1])
