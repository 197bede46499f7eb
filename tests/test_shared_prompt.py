"""Shared-prompt GRPO (:mod:`vlm_r1.shared_prompt`) is exact: same log-probs, entropies and gradients as TRL.

The reference is TRL 1.16's own ``GRPOTrainer._get_per_token_logps_and_entropies`` (called unbound, on a stand-in
``self``) on TRL's batch layout: every prompt repeated G times, left padded, completions right padded. The shared path
computes one packed row per group. Everything runs in fp32 on the tiny random Qwen2.5-VL (vision tower trainable),
with the real processor, two image sizes (two prompt lengths, so left padding), completions of varied lengths and one
fully masked rollout (a truncated completion under ``mask_truncated_completions``: tokens present, mask all 0).

Tolerances: log-probs / entropies 1e-5 absolute, every parameter gradient 1e-5 relative (norm of difference / norm).
Measured here: log-probs and entropies 4.8e-7, gradients <= 1.3e-6 (ZeRO-3: 9.7e-7), generate logits 1.5e-7.

* ``test_matches_trl`` / ``test_chunking_matches_trl``: SDPA and eager, gradient checkpointing off / on, G = 4 and
  8; TRL-style ``batch_size`` chunking (whole groups per forward);
* ``test_*`` on the layout helpers: exact small tensors (pixel layouts, packing, mask, token accounting, groups);
* ``test_generate_*``: HF ``generate`` with each prompt prefilled once (``Qwen2VLModule.shared_prompt_prefill``)
  gives the naive completions token for token under sampling, and the greedy logits within 1e-5;
* ``test_zero3_two_processes``: the logps/gradient comparison through a DeepSpeed ZeRO-3 engine, 2 gloo ranks
  (``tests/helpers/shared_prompt_zero3.py`` under torchrun).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from contextlib import nullcontext
from types import SimpleNamespace

import pytest
import torch

from tests.helpers.paths import REPO
from vlm_r1 import shared_prompt as sp

LOGP_ATOL = 1e-5
GRAD_RTOL = 1e-5
#: completion token ids: ordinary tokens of the tiny vocabulary (512; specials are 0..13: pad, eos, vision tokens)
TOKEN_LOW, TOKEN_HIGH = 20, 500
#: (width, height) of the two prompts' images: 77 and 128 prompt tokens with the tiny processor (so left padding)
SIZES = ((200, 120), (160, 300))
INSTRUCTIONS = ("Click the search box.", "Open the settings menu, then the account page.")


# ---- batch builders (also used by tests/helpers/shared_prompt_zero3.py) ---------------------------------------------
def random_image(width: int, height: int, generator: torch.Generator):
    """An RGB PIL image of random pixels (every pixel matters to the vision tower and to fingerprints)."""
    from PIL import Image

    data = torch.randint(0, 256, (width * height * 3,), generator=generator, dtype=torch.uint8)
    return Image.frombytes("RGB", (width, height), data.numpy().tobytes())


def build_prompts(processor, seed: int = 0, sizes=SIZES, instructions=INSTRUCTIONS):
    """Chat-templated prompt texts and their images (one image per prompt), one prompt per entry of ``sizes``."""
    g = torch.Generator().manual_seed(seed)
    texts, images = [], []
    for (w, h), instruction in zip(sizes, instructions, strict=True):
        messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": instruction}]}]
        texts.append(processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False))
        images.append([random_image(w, h, g)])
    return texts, images


def naive_batch(processor, texts, images, G: int, seed: int = 0, max_completion: int = 10) -> dict:
    """TRL's layout (``_generate_and_score_completions`` -> ``_compute_loss``) for ``len(texts)`` groups of G rollouts.

    Completion lengths vary over 1..C (one rollout has length C); rollout G-1 of group 0 is fully masked (its C tokens
    stay in ``completion_ids``, as TRL's ``mask_truncated_completions`` leaves them). Returns the kwargs of
    ``_get_per_token_logps_and_entropies`` plus ``completion_mask`` and ``advantages`` (B,).
    """
    g = torch.Generator().manual_seed(1000 + seed)
    B, C = len(texts) * G, max_completion
    lengths = torch.randint(1, C + 1, (B,), generator=g)
    lengths[1] = C
    lengths[G - 1] = C  # the truncated one
    completion_ids = torch.full((B, C), processor.tokenizer.pad_token_id, dtype=torch.long)
    completion_mask = torch.zeros((B, C), dtype=torch.long)
    for r, n in enumerate(lengths.tolist()):
        completion_ids[r, :n] = torch.randint(TOKEN_LOW, TOKEN_HIGH, (n,), generator=g)
        completion_mask[r, :n] = 1
    completion_mask[G - 1] = 0
    rep = processor(
        text=[t for t in texts for _ in range(G)],
        images=[im for im in images for _ in range(G)],
        padding=True,
        padding_side="left",
        return_tensors="pt",
    )
    return {
        "input_ids": torch.cat([rep["input_ids"], completion_ids], dim=1),
        "attention_mask": torch.cat([rep["attention_mask"], completion_mask], dim=1),
        "logits_to_keep": C,
        "pixel_values": rep["pixel_values"],
        "image_grid_thw": rep["image_grid_thw"],
        "num_images": [len(im) for im in images for _ in range(G)],
        "mm_token_type_ids": torch.cat([rep["mm_token_type_ids"], torch.zeros_like(completion_ids)], dim=1),
        "completion_mask": completion_mask,
        "advantages": torch.randn(B, generator=g),
        "G": G,
    }


def load_policy(path: str, attn: str):
    """The tiny policy in fp32, training mode, with TRL's fused LM head (what GRPOTrainer installs)."""
    from transformers import Qwen2_5_VLForConditionalGeneration
    from trl.trainer.utils import add_fused_lm_head

    model = Qwen2_5_VLForConditionalGeneration.from_pretrained(path, attn_implementation=attn, dtype=torch.float32)
    add_fused_lm_head(model, outputs=("log_probs", "entropy"))
    model.train()
    return model


def trl_logps(model, batch: dict, batch_size: int | None = None):
    """TRL 1.16's own ``_get_per_token_logps_and_entropies`` on the naive batch: (logps, entropies)."""
    from trl import GRPOTrainer

    fake_self = SimpleNamespace(accelerator=SimpleNamespace(autocast=nullcontext, is_main_process=True))
    logps, entropies, _ = GRPOTrainer._get_per_token_logps_and_entropies(
        fake_self,
        model,
        batch["input_ids"],
        batch["attention_mask"],
        batch["logits_to_keep"],
        batch_size=batch_size,
        compute_entropy=True,
        pixel_values=batch["pixel_values"],
        image_grid_thw=batch["image_grid_thw"],
        num_images=batch["num_images"],
        mm_token_type_ids=batch["mm_token_type_ids"],
    )
    return logps, entropies


def shared_logps(
    model, batch: dict, positions_fn, *, attn: str = "sdpa", batch_size: int | None = None, stats: dict | None = None
):
    """The shared path on the same batch (pixels deduplicated to one copy per group first): (logps, entropies)."""
    G = batch["G"]
    pixel_values = sp.dedup_pixel_values(batch["pixel_values"], batch["image_grid_thw"], batch["num_images"], G)
    return sp.per_token_logps_and_entropies(
        model,
        batch["input_ids"],
        batch["attention_mask"],
        batch["logits_to_keep"],
        num_generations=G,
        positions_fn=positions_fn,
        batch_size=batch_size,
        compute_entropy=True,
        pixel_values=pixel_values,
        image_grid_thw=batch["image_grid_thw"],
        num_images=batch["num_images"],
        mm_token_type_ids=batch["mm_token_type_ids"],
        additive_mask_dtype=torch.float32 if attn == "eager" else None,
        stats=stats,
    )


def grpo_loss(logps: torch.Tensor, batch: dict) -> torch.Tensor:
    """TRL's loss shape (beta 0, one update per generation: the ratio is exp(lp - lp.detach()) == 1)."""
    mask = batch["completion_mask"].to(logps.dtype)
    ratio = torch.exp(logps - logps.detach())
    return -(batch["advantages"][:, None] * ratio * mask).sum() / mask.sum()


def max_rel_grad_error(ref: dict, got: dict) -> tuple[float, str]:
    """Worst ``||got - ref|| / ||ref||`` over parameters (0 where both are exactly zero) and the parameter's name."""
    worst, name = 0.0, ""
    for key, a in ref.items():
        b = got[key]
        denom = max(a.norm().item(), b.norm().item())
        rel = 0.0 if denom == 0 else (a - b).norm().item() / denom
        if rel >= worst:
            worst, name = rel, key
    return worst, name


def run_backward(model, fn):
    """``fn()`` -> (logps, entropies); backprop TRL's loss; return detached outputs and every parameter's grad."""
    model.zero_grad(set_to_none=True)
    logps, entropies, batch = fn()
    grpo_loss(logps, batch).backward()
    grads = {n: p.grad.detach().clone() for n, p in model.named_parameters() if p.grad is not None}
    model.zero_grad(set_to_none=True)
    return logps.detach(), entropies.detach(), grads


# ---- fixtures ---------------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def qwen_module(tiny_qwen25_dir):
    from vlm_r1.modules import get_vlm_module

    return get_vlm_module(tiny_qwen25_dir)


@pytest.fixture(scope="module")
def processor(tiny_qwen25_dir, qwen_module):
    return qwen_module.load_processor(tiny_qwen25_dir)


@pytest.fixture(scope="module")
def batches(processor):
    """G -> naive batch (2 groups: two image sizes, two instructions)."""
    texts, images = build_prompts(processor)
    return {G: naive_batch(processor, texts, images, G) for G in (4, 8)}


@pytest.fixture(scope="module")
def policies(tiny_qwen25_dir):
    """attn -> the policy model, built once per attention implementation for the module."""
    cache: dict = {}

    def get(attn: str):
        if attn not in cache:
            torch.manual_seed(0)
            cache[attn] = load_policy(tiny_qwen25_dir, attn)
        return cache[attn]

    return get


def _set_checkpointing(model, on: bool) -> None:
    if on:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        model.config.use_cache = False
    else:
        model.gradient_checkpointing_disable()
    assert model.is_gradient_checkpointing == on


# ---- 1. log-probs, entropies, gradients vs TRL -----------------------------------------------------------------------
@pytest.mark.parametrize("G", [4, 8])
@pytest.mark.parametrize("checkpointing", [False, True], ids=["nockpt", "ckpt"])
@pytest.mark.parametrize("attn", ["sdpa", "eager"])
def test_matches_trl(attn, checkpointing, G, policies, batches, qwen_module):
    model = policies(attn)
    batch = batches[G]
    positions_fn = qwen_module.shared_prompt_positions_fn(model)
    _set_checkpointing(model, checkpointing)
    try:
        ref_lp, ref_en, ref_grads = run_backward(model, lambda: (*trl_logps(model, batch), batch))
        got_lp, got_en, got_grads = run_backward(
            model, lambda: (*shared_logps(model, batch, positions_fn, attn=attn), batch)
        )
    finally:
        _set_checkpointing(model, False)

    mask = batch["completion_mask"].bool()
    B, C = mask.shape
    for name, ref, got in (("logps", ref_lp, got_lp), ("entropies", ref_en, got_en)):
        assert got.shape == ref.shape == (B, C) and got.dtype == ref.dtype == torch.float32, name
        assert (ref[~mask] == 0).all() and (got[~mask] == 0).all(), f"{name}: masked positions are not exactly 0"
        assert torch.isfinite(got).all(), name
        err = (got - ref).abs().max().item()
        assert err <= LOGP_ATOL, f"{name}: max |shared - TRL| = {err:.3e}"
    assert (ref_lp[mask] < 0).all()  # really scored (a 0 would hide a missing position)

    assert got_grads.keys() == ref_grads.keys(), sorted(set(got_grads) ^ set(ref_grads))
    assert len(ref_grads) == sum(1 for _ in model.parameters()), "some trainable parameter got no gradient"
    assert any(k.startswith("model.visual.") for k in ref_grads), "the vision tower got no gradient"
    worst, name = max_rel_grad_error(ref_grads, got_grads)
    assert worst <= GRAD_RTOL, f"grad of {name}: relative error {worst:.3e}"


def test_qwen2_vl_matches_trl(tiny_qwen2_dir):
    """Qwen2-VL (the other family with the hook; UI-TARS-1.0 style): same log-probs and gradients as TRL, G=4, sdpa."""
    from transformers import Qwen2VLForConditionalGeneration
    from trl.trainer.utils import add_fused_lm_head

    from vlm_r1.modules import get_vlm_module

    module = get_vlm_module(tiny_qwen2_dir)
    processor = module.load_processor(tiny_qwen2_dir)
    model = Qwen2VLForConditionalGeneration.from_pretrained(
        tiny_qwen2_dir, attn_implementation="sdpa", dtype=torch.float32
    )
    add_fused_lm_head(model, outputs=("log_probs", "entropy"))
    model.train()
    texts, images = build_prompts(processor, seed=11)
    batch = naive_batch(processor, texts, images, 4, seed=11)
    positions_fn = module.shared_prompt_positions_fn(model)
    ref_lp, ref_en, ref_grads = run_backward(model, lambda: (*trl_logps(model, batch), batch))
    got_lp, got_en, got_grads = run_backward(model, lambda: (*shared_logps(model, batch, positions_fn), batch))
    assert (got_lp - ref_lp).abs().max().item() <= LOGP_ATOL
    assert (got_en - ref_en).abs().max().item() <= LOGP_ATOL
    assert got_grads.keys() == ref_grads.keys() and any(k.startswith("model.visual.") for k in ref_grads)
    worst, name = max_rel_grad_error(ref_grads, got_grads)
    assert worst <= GRAD_RTOL, f"grad of {name}: relative error {worst:.3e}"


@pytest.mark.parametrize("batch_size", [1, 4, 7, None], ids=["bs1", "bsG", "bs2G-1", "bsNone"])
def test_chunking_matches_trl(batch_size, policies, batches, qwen_module):
    """``batch_size`` rounds down to whole groups (at least one): G -> one group per forward; same outputs and grads;
    the ``stats`` token/patch counts equal :func:`token_counts` whatever the chunking."""
    G = 4
    model = policies("sdpa")
    batch = batches[G]
    positions_fn = qwen_module.shared_prompt_positions_fn(model)
    calls = []
    handle = model.register_forward_pre_hook(lambda module, args: calls.append(1))
    stats: dict = {}
    try:
        ref_lp, ref_en, ref_grads = run_backward(model, lambda: (*trl_logps(model, batch, batch_size=G), batch))
        calls.clear()
        got_lp, got_en, got_grads = run_backward(
            model, lambda: (*shared_logps(model, batch, positions_fn, batch_size=batch_size, stats=stats), batch)
        )
    finally:
        handle.remove()
    groups = batch["input_ids"].size(0) // G
    assert len(calls) == (1 if batch_size is None else groups), f"{len(calls)} forwards for batch_size={batch_size}"
    assert (got_lp - ref_lp).abs().max().item() <= LOGP_ATOL
    assert (got_en - ref_en).abs().max().item() <= LOGP_ATOL
    assert got_grads.keys() == ref_grads.keys()
    worst, name = max_rel_grad_error(ref_grads, got_grads)
    assert worst <= GRAD_RTOL, f"grad of {name}: relative error {worst:.3e}"
    counts = sp.token_counts(
        batch["attention_mask"], batch["logits_to_keep"], G, batch["image_grid_thw"], batch["num_images"]
    )
    assert stats == {"llm_tokens": counts["llm_tokens"], "vision_patches": counts["vision_patches"]}
    assert counts["vision_patches"] * G == counts["naive_vision_patches"]


# ---- 2. layout helpers on exact small tensors --------------------------------------------------------------------------
def _arange_rows(n: int, d: int = 3, start: int = 0) -> torch.Tensor:
    return torch.arange(start * d, (start + n) * d, dtype=torch.float32).view(n, d)


@pytest.mark.parametrize(
    ("grids", "num_images", "G"),
    [
        # G=2: group 0 rows carry two images each (4 + 8 patches), group 1 rows are text-only
        ([[1, 2, 2], [1, 2, 4], [1, 2, 2], [1, 2, 4]], [2, 2, 0, 0], 2),
        # G=2: group 0 text-only, group 1 one image per row
        ([[1, 2, 2], [1, 2, 2]], [0, 0, 1, 1], 2),
        # G=3: one image per row, then three per row (4, 8, 2x... patches)
        ([[1, 2, 2]] * 3 + [[1, 2, 2], [1, 4, 2], [2, 2, 2]] * 3, [1, 1, 1, 3, 3, 3], 3),
    ],
    ids=["multi-then-none", "none-then-one", "G3-one-then-three"],
)
def test_pixel_layout_round_trips(grids, num_images, G):
    grid = torch.tensor(grids)
    per_image = grid.prod(-1).tolist()
    # naive layout: every row of a group carries the same patches (its own copy)
    per_row, k = [], 0
    for n in num_images:
        per_row.append(sum(per_image[k : k + n]))
        k += n
    carriers = []
    naive_parts, start = [], 0
    for g0 in range(0, len(num_images), G):
        carrier = _arange_rows(per_row[g0], start=start)
        start += per_row[g0]
        carriers.append(carrier)
        naive_parts += [carrier.clone() for _ in range(G)]
    naive = torch.cat(naive_parts)
    shared = torch.cat(carriers)

    assert torch.equal(sp.dedup_pixel_values(naive, grid, num_images, G), shared)
    assert torch.equal(sp.expand_pixel_values(shared, grid, num_images, G), naive)
    other = torch.randn_like(shared)  # dedup(expand(x)) == x for any shared-layout tensor
    assert torch.equal(
        sp.dedup_pixel_values(sp.expand_pixel_values(other, grid, num_images, G), grid, num_images, G), other
    )

    slices = sp.carrier_slices(grid, num_images, G, len(num_images))
    ends = torch.tensor([c.size(0) for c in carriers]).cumsum(0).tolist()
    assert slices == [(e - c.size(0), e) for e, c in zip(ends, carriers, strict=True)]

    rows = sp.split_rows(shared, grid, num_images, G)
    assert len(rows) == len(num_images)
    for r, t in enumerate(rows):
        expected = carriers[r // G] if r % G == 0 else shared[:0]
        assert t.shape == expected.shape and torch.equal(t, expected), r
    assert torch.equal(torch.cat(rows), shared)


def test_pixel_layout_exact_values():
    grid = torch.tensor([[1, 1, 2], [1, 1, 2], [1, 1, 1], [1, 1, 1]])  # rows 0,1: 2 patches; rows 2,3: 1 patch
    naive = torch.tensor([[0.0], [1.0], [0.0], [1.0], [7.0], [7.0]])
    assert sp.dedup_pixel_values(naive, grid, [1, 1, 1, 1], 2).flatten().tolist() == [0.0, 1.0, 7.0]
    assert sp.expand_pixel_values(torch.tensor([[5.0], [6.0], [9.0]]), grid, [1, 1, 1, 1], 2).flatten().tolist() == [
        5.0,
        6.0,
        5.0,
        6.0,
        9.0,
        9.0,
    ]
    assert sp.carrier_slices(grid, [1, 1, 1, 1], 2, 4) == [(0, 2), (2, 3)]
    assert sp.carrier_slices(None, None, 2, 4) == [(0, 0), (0, 0)]
    with pytest.raises(ValueError, match="num_images sums to"):
        sp.carrier_slices(grid, [1, 1, 1, 0], 2, 4)
    with pytest.raises(ValueError, match="num_images has"):
        sp.carrier_slices(grid, [2, 2], 2, 4)


def _toy_batch():
    """2 groups of G=2, prompt width 4, C=2 (ids: pad 0; completions right padded; row 3 fully masked)."""
    input_ids = torch.tensor(
        [
            [0, 5, 6, 7, 8, 9],
            [0, 5, 6, 7, 10, 0],
            [5, 6, 7, 11, 8, 0],
            [5, 6, 7, 11, 3, 4],
        ]
    )
    attention_mask = torch.tensor(
        [
            [0, 1, 1, 1, 1, 1],
            [0, 1, 1, 1, 1, 0],
            [1, 1, 1, 1, 1, 0],
            [1, 1, 1, 1, 0, 0],
        ]
    )
    return input_ids, attention_mask


def _text_positions(prompt_ids, mm_token_type_ids, image_grid_thw):
    return torch.arange(prompt_ids.numel())[None].expand(3, -1)


def test_pack_groups_exact():
    input_ids, attention_mask = _toy_batch()
    packed = sp.pack_groups(input_ids, attention_mask, 2, 2, _text_positions, pad_token_id=0)
    # group 0: [5 6 | 7 8 9 | 7 10]; group 1: [5 6 7 | 11 8 | 11] + 1 pad
    assert packed.input_ids.tolist() == [[5, 6, 7, 8, 9, 7, 10], [5, 6, 7, 11, 8, 11, 0]]
    assert packed.position_ids.shape == (3, 2, 7)
    assert all(packed.position_ids[a].tolist() == [[0, 1, 2, 3, 4, 2, 3], [0, 1, 2, 3, 4, 3, 0]] for a in range(3))
    assert packed.labels.tolist() == [[-100, -100, -100, 8, 9, -100, 10], [-100, -100, -100, -100, 8, -100, -100]]
    assert packed.segments == [(2, [3, 2]), (3, [2, 1])]
    # (packed row, index into the fused head's L-1 outputs, n): output t scores token t+1
    assert packed.rollout_index == [(0, 2, 2), (0, 5, 1), (1, 3, 1), (1, 5, 0)]
    assert packed.llm_tokens == 13 and packed.length == 7
    assert packed.mm_token_type_ids is None


def test_pack_groups_mm_token_types_and_image_positions():
    """mm_token_type_ids ride along (completion/suffix tokens are text: 0); the hook gets each carrier's grids."""
    input_ids, attention_mask = _toy_batch()
    mm = torch.zeros_like(input_ids)
    mm[:, 2] = 1  # pretend token 6 is an image token
    seen = []

    def positions(prompt_ids, mm_types, grid):
        seen.append((prompt_ids.tolist(), mm_types.tolist(), None if grid is None else grid.tolist()))
        return torch.arange(prompt_ids.numel())[None].expand(3, -1) + 10

    grid = torch.tensor([[1, 2, 2], [1, 2, 2], [1, 2, 4], [1, 2, 4]])
    packed = sp.pack_groups(
        input_ids, attention_mask, 2, 2, positions, image_grid_thw=grid, num_images=[1, 1, 1, 1], mm_token_type_ids=mm
    )
    assert seen == [([5, 6, 7], [0, 1, 0], [[1, 2, 2]]), ([5, 6, 7, 11], [0, 0, 1, 0], [[1, 2, 4]])]
    assert packed.mm_token_type_ids.tolist() == [[0, 1, 0, 0, 0, 0, 0], [0, 0, 1, 0, 0, 0, 0]]
    assert packed.position_ids[0].tolist() == [[10, 11, 12, 13, 14, 12, 13], [10, 11, 12, 13, 14, 13, 0]]


def test_pack_groups_rejects_non_groups():
    input_ids, attention_mask = _toy_batch()
    bad = input_ids.clone()
    bad[1, 2] = 42  # row 1's prompt differs from row 0's
    with pytest.raises(ValueError, match="prompt tokens differ"):
        sp.pack_groups(bad, attention_mask, 2, 2, _text_positions)
    shorter = attention_mask.clone()
    shorter[1, 1] = 0  # same tokens, one fewer unpadded: a different prompt
    with pytest.raises(ValueError, match="prompt tokens differ"):
        sp.pack_groups(input_ids, shorter, 2, 2, _text_positions)
    with pytest.raises(ValueError, match="not whole groups"):
        sp.pack_groups(input_ids[:3], attention_mask[:3], 2, 2, _text_positions)
    holes = attention_mask.clone()
    holes[0, 4] = 0  # completion mask [0, 1]: not a prefix
    with pytest.raises(ValueError, match="not a prefix"):
        sp.pack_groups(input_ids, holes, 2, 2, _text_positions)


def test_dense_mask_exact():
    input_ids, attention_mask = _toy_batch()
    packed = sp.pack_groups(input_ids, attention_mask, 2, 2, _text_positions)
    expected = torch.tensor(
        [
            [  # [5 6 | 7 8 9 | 7 10]
                [1, 0, 0, 0, 0, 0, 0],
                [1, 1, 0, 0, 0, 0, 0],
                [1, 1, 1, 0, 0, 0, 0],
                [1, 1, 1, 1, 0, 0, 0],
                [1, 1, 1, 1, 1, 0, 0],
                [1, 1, 0, 0, 0, 1, 0],
                [1, 1, 0, 0, 0, 1, 1],
            ],
            [  # [5 6 7 | 11 8 | 11 | pad]
                [1, 0, 0, 0, 0, 0, 0],
                [1, 1, 0, 0, 0, 0, 0],
                [1, 1, 1, 0, 0, 0, 0],
                [1, 1, 1, 1, 0, 0, 0],
                [1, 1, 1, 1, 1, 0, 0],
                [1, 1, 1, 0, 0, 1, 0],
                [1, 1, 1, 0, 0, 0, 1],  # padding query: itself (and, harmlessly, the prefix; its output is never read)
            ],
        ],
        dtype=torch.bool,
    )[:, None]
    got = sp.dense_mask(packed)
    assert got.shape == (2, 1, 7, 7) and got.dtype == torch.bool
    assert torch.equal(got, expected)
    # what exactness needs: no real query sees a padding key or another suffix; every query sees itself (no NaN rows)
    assert not got[1, 0, :6, 6].any()
    assert got.diagonal(dim1=-2, dim2=-1).all()
    additive = sp.dense_mask(packed, additive_dtype=torch.float32)
    assert additive.dtype == torch.float32
    assert torch.equal(additive, torch.where(expected, 0.0, torch.finfo(torch.float32).min))


def test_token_counts_exact():
    input_ids, attention_mask = _toy_batch()
    grid = torch.tensor([[1, 2, 2], [1, 2, 2], [1, 4, 2], [1, 4, 2]])  # 4, 4, 8, 8 patches per row
    # group 0: prompt 3, completions 2 and 1 -> (3 - 1) + (1 + 2) + (1 + 1) = 7
    # group 1: prompt 4, completions 1 and 0 -> (4 - 1) + (1 + 1) + (1 + 0) = 6
    counts = sp.token_counts(attention_mask, 2, 2, grid, [1, 1, 1, 1])
    assert counts == {
        "llm_tokens": 13,
        "naive_llm_tokens": 5 + 4 + 5 + 4,
        "vision_patches": 4 + 8,
        "naive_vision_patches": 24,
    }
    assert counts["llm_tokens"] == sp.pack_groups(input_ids, attention_mask, 2, 2, _text_positions).llm_tokens
    naive = sp.token_counts(attention_mask, 2, None, grid, [1, 1, 1, 1])
    assert naive == {"llm_tokens": 18, "naive_llm_tokens": 18, "vision_patches": 24, "naive_vision_patches": 24}
    assert sp.token_counts(attention_mask, 2, 2)["vision_patches"] == 0
    # a bigger hand-built case: G=4, prompt 6 (width 8), completions 3, 0, 5, 1 (C=5)
    mask = torch.zeros(4, 13, dtype=torch.long)
    mask[:, 2:8] = 1
    for r, n in enumerate([3, 0, 5, 1]):
        mask[r, 8 : 8 + n] = 1
    assert sp.token_counts(mask, 5, 4)["llm_tokens"] == 5 + (4 + 1 + 6 + 2)
    assert sp.token_counts(mask, 5, 4)["naive_llm_tokens"] == 4 * 6 + 9


def test_group_mismatch_reasons():
    assert sp.group_mismatch([3, 3, 7, 7], ["a", "a", "b", "b"], 2) is None
    assert sp.group_mismatch([3, 3, 3, 3], ["a"] * 4, 2) is None  # the same index twice: two groups, both whole
    reason = sp.group_mismatch([3, 3, 7, 8], ["a", "a", "b", "b"], 2)
    assert reason is not None and "not one dataset index" in reason and "[7, 8]" in reason
    reason = sp.group_mismatch([3, 3, 7, 7], ["a", "a", "b", "c"], 2)
    assert reason is not None and "dataset index 7" in reason and "different prompts" in reason
    reason = sp.group_mismatch([3, 3, None, None], ["a"] * 4, 2)
    assert reason is not None and "not one dataset index" in reason
    reason = sp.group_mismatch([3, 3, 7], ["a", "a", "b"], 2)
    assert reason is not None and "not whole groups" in reason
    with pytest.raises(ValueError):
        sp.group_mismatch([3, 3], ["a"], 2)


def test_prompt_fingerprint():
    g = torch.Generator().manual_seed(5)
    prompt = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "Click OK."}]}]
    a, b = random_image(64, 48, g), random_image(64, 48, g)  # same size: same tokens and image_grid_thw
    fp_a = sp.prompt_fingerprint({"prompt": prompt, "image": a})
    assert fp_a != sp.prompt_fingerprint({"prompt": prompt, "image": b})
    assert fp_a == sp.prompt_fingerprint({"prompt": prompt, "image": a.copy()})  # equal content, another object
    assert fp_a == sp.prompt_fingerprint({"prompt": [dict(m) for m in prompt], "images": [a.copy()]})
    changed = a.copy()
    changed.putpixel((31, 23), (0, 0, 0) if a.getpixel((31, 23)) != (0, 0, 0) else (1, 1, 1))
    assert fp_a != sp.prompt_fingerprint({"prompt": prompt, "image": changed})  # one pixel
    other_text = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "Click Cancel."}]}]
    assert fp_a != sp.prompt_fingerprint({"prompt": other_text, "image": a})
    assert fp_a != sp.prompt_fingerprint({"prompt": prompt, "images": [a, a]})
    assert sp.prompt_fingerprint({"prompt": prompt, "image": None}) == sp.prompt_fingerprint({"prompt": prompt})
    # images inside the messages are hashed by content too
    inline = [{"role": "user", "content": [{"type": "image", "image": a}, {"type": "text", "text": "Click OK."}]}]
    inline2 = [
        {"role": "user", "content": [{"type": "image", "image": a.copy()}, {"type": "text", "text": "Click OK."}]}
    ]
    inline3 = [{"role": "user", "content": [{"type": "image", "image": b}, {"type": "text", "text": "Click OK."}]}]
    assert sp.prompt_fingerprint({"prompt": inline}) == sp.prompt_fingerprint({"prompt": inline2})
    assert sp.prompt_fingerprint({"prompt": inline}) != sp.prompt_fingerprint({"prompt": inline3})


def test_prompt_fingerprint_numpy_images_differ():
    """numpy/torch images are hashed by content (repr() abbreviates large arrays)."""
    np = pytest.importorskip("numpy")
    a = np.zeros((64, 64, 3), dtype=np.uint8)
    b = a.copy()
    b[32, 32] = 255
    assert sp.prompt_fingerprint({"prompt": "x", "image": a}) != sp.prompt_fingerprint({"prompt": "x", "image": b})


# ---- 3. generation: prefill once per prompt ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def generation_setup(tiny_qwen25_dir, processor):
    from transformers import Qwen2_5_VLForConditionalGeneration

    model = Qwen2_5_VLForConditionalGeneration.from_pretrained(tiny_qwen25_dir, dtype=torch.float32).eval()
    texts, images = build_prompts(processor, seed=3)
    G = 4
    naive = processor(
        text=[t for t in texts for _ in range(G)],
        images=[im for im in images for _ in range(G)],
        padding=True,
        padding_side="left",
        return_tensors="pt",
    )
    unique = processor(text=texts, images=images, padding=True, padding_side="left", return_tensors="pt")
    lengths = unique["attention_mask"].sum(1).tolist()
    assert lengths[0] != lengths[1], "the two prompts must differ in length (left padding)"
    assert torch.equal(naive["input_ids"], unique["input_ids"].repeat_interleave(G, 0))
    return model, naive, unique, G


def _generate(model, inputs, seed, **gen):
    model.model.rope_deltas = None
    torch.manual_seed(seed)
    with torch.no_grad():
        return model.generate(**inputs, **gen)


def _generate_shared(qwen_module, model, unique, G, seed, **gen):
    with torch.no_grad():
        kwargs = qwen_module.shared_prompt_prefill(model, dict(unique), G)
    assert "pixel_values" not in kwargs and "image_grid_thw" not in kwargs
    assert torch.equal(kwargs["input_ids"], unique["input_ids"].repeat_interleave(G, 0))
    assert kwargs["past_key_values"].get_seq_length() == unique["input_ids"].size(1) - 1
    torch.manual_seed(seed)
    with torch.no_grad():
        return model.generate(**kwargs, **gen)


def _gen_kwargs(processor, max_new_tokens: int = 12, **extra):
    return dict(
        max_new_tokens=max_new_tokens,
        pad_token_id=processor.tokenizer.pad_token_id,
        output_logits=True,
        return_dict_in_generate=True,
        **extra,
    )


def test_generate_greedy_logits_match(generation_setup, qwen_module, processor):
    model, naive, unique, G = generation_setup
    gen = _gen_kwargs(processor, do_sample=False, min_new_tokens=12)
    ref = _generate(model, naive, 0, **gen)
    got = _generate_shared(qwen_module, model, unique, G, 0, **gen)
    assert torch.equal(got.sequences, ref.sequences)
    assert len(got.logits) == len(ref.logits) == 12
    err = max((a - b).abs().max().item() for a, b in zip(ref.logits, got.logits, strict=True))
    assert err <= LOGP_ATOL, f"max |logit diff| {err:.3e}"


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_generate_sampling_token_identical(seed, generation_setup, qwen_module, processor):
    model, naive, unique, G = generation_setup
    gen = _gen_kwargs(processor, do_sample=True, temperature=1.0, top_k=50, top_p=1.0)
    ref = _generate(model, naive, seed, **gen)
    got = _generate_shared(qwen_module, model, unique, G, seed, **gen)
    P = naive["input_ids"].size(1)
    assert torch.equal(got.sequences, ref.sequences), (ref.sequences[:, P:], got.sequences[:, P:])
    # sampling really diversifies the G rollouts of a prompt (so identical outputs are not trivially identical)
    assert len({tuple(r) for r in ref.sequences[:G, P:].tolist()}) > 1
    err = max((a - b).abs().max().item() for a, b in zip(ref.logits, got.logits, strict=True))
    assert err <= LOGP_ATOL, f"max |logit diff| {err:.3e}"


def test_generate_prefill_under_checkpointing_is_exact_or_refused(tiny_qwen25_dir, qwen_module, processor):
    from transformers import Qwen2_5_VLForConditionalGeneration

    model = Qwen2_5_VLForConditionalGeneration.from_pretrained(tiny_qwen25_dir, dtype=torch.float32)
    texts, images = build_prompts(processor, seed=3)
    G = 2
    unique = processor(text=texts, images=images, padding=True, padding_side="left", return_tensors="pt")
    gen = _gen_kwargs(processor, do_sample=False, min_new_tokens=4, max_new_tokens=4)
    naive = processor(
        text=[t for t in texts for _ in range(G)],
        images=[im for im in images for _ in range(G)],
        padding=True,
        padding_side="left",
        return_tensors="pt",
    )
    model.eval()
    ref = _generate(model, naive, 0, **gen)
    model.train()
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    try:
        with torch.no_grad():
            kwargs = qwen_module.shared_prompt_prefill(model, dict(unique), G)
            got = model.generate(**kwargs, **gen)
    except (RuntimeError, ValueError):
        return  # refused: fine
    err = max((a - b).abs().max().item() for a, b in zip(ref.logits, got.logits, strict=True))
    assert err <= LOGP_ATOL, f"max |logit diff| {err:.3e}"


def test_generate_prefill_skips_full_lm_head(generation_setup, qwen_module):
    """The prefill needs no logits: the LM head runs on at most the last position per row (HF's own generate prefill
    keeps one; all P-1 would be ~0.9 GB per unique prompt for Qwen2.5-VL-7B at P=3000 in bf16)."""
    model, naive, unique, G = generation_setup
    shapes = []
    handle = model.lm_head.register_forward_hook(lambda module, args, out: shapes.append(tuple(out.shape)))
    try:
        with torch.no_grad():
            qwen_module.shared_prompt_prefill(model, dict(unique), G)
    finally:
        handle.remove()
    assert all(s[1] <= 1 for s in shapes), f"LM head output shapes during the prefill: {shapes}"


# ---- 4. ZeRO-3, 2 processes ------------------------------------------------------------------------------------------------
def _ds_env() -> dict:
    """Conventions of tests/test_deepspeed.py and run_scripts/train_grpo.sh (one thread per rank, cached DeepSpeed
    JIT ops, a fresh rendezvous store)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([REPO, env.get("PYTHONPATH", "")])
    env["OMP_NUM_THREADS"] = "1"
    env["TOKENIZERS_PARALLELISM"] = "false"
    env["TORCH_DISABLE_SHARE_RDZV_TCP_STORE"] = "1"
    env.setdefault("TORCH_EXTENSIONS_DIR", os.path.join(os.path.expanduser("~"), ".cache", "torch_extensions"))
    return env


@pytest.mark.slow  # ~20 s: two ZeRO-3 processes
def test_zero3_two_processes(tiny_qwen25_dir, tmp_path):
    """TRL naive vs shared through a DeepSpeed ZeRO-3 engine on 2 gloo ranks with different prompts per rank: logps
    and entropies within 1e-5, every full (gathered) gradient within 1e-5 relative, on both ranks."""
    pytest.importorskip("deepspeed", reason="DeepSpeed not installed: pip install -e .[deepspeed] (or .[dev])")
    out = tmp_path / "zero3"
    out.mkdir()
    # one node: the store binds a free port itself (no probe-then-bind race) and hosts it (train_grpo.sh, issue 11)
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nnodes",
        "1",
        "--nproc_per_node",
        "2",
        "--rdzv_backend",
        "c10d",
        "--rdzv_endpoint",
        "127.0.0.1:0",
        "--rdzv_id",
        f"sp-zero3-{uuid.uuid4().hex}",
        "--rdzv_conf",
        "is_host=1",
        "--max_restarts",
        "0",
        os.path.join(REPO, "tests", "helpers", "shared_prompt_zero3.py"),
        "--model",
        tiny_qwen25_dir,
        "--out",
        str(out),
    ]
    proc = subprocess.run(cmd, cwd=REPO, env=_ds_env(), capture_output=True, text=True, timeout=420)
    assert proc.returncode == 0, f"torchrun failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}"
    results = [json.loads((out / f"rank{r}.json").read_text()) for r in range(2)]
    assert results[0]["prompt_lengths"] != results[1]["prompt_lengths"], "ranks must see different prompts"
    for res in results:
        rank = res["rank"]
        assert res["world_size"] == 2 and res["zero_stage"] == 3, res
        assert res["same_grad_names"] and res["n_grads"] == res["n_params"], res
        assert res["vision_grads"] > 0, res
        assert res["max_dlogp"] <= LOGP_ATOL, (rank, res)
        assert res["max_dent"] <= LOGP_ATOL, (rank, res)
        assert res["max_grad_rel"] <= GRAD_RTOL, (rank, res)
        assert res["masked_zero"], res
