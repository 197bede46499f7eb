"""One prepared GPU check of shared-prompt GRPO at the Qwen2.5-VL-7B shape (naive vs shared), in bf16.

    python benchmarks/gpu_check.py --shape 7b --out runs/gpu_check [--baseline PREV_TREE]  # one H100/H200, < 5 min
    python benchmarks/gpu_check.py --shape tiny --out runs/gpu_check_tiny  # CPU, the same code path, seconds

``run_scripts/gpu_check.sh`` installs the wheels brought along (transformers, trl, datasets at our pins) and runs the
7B shape. Nothing is downloaded: models are built from the published configuration with random weights, on the device
(``Qwen/Qwen2.5-VL-7B-Instruct`` config.json, https://huggingface.co/Qwen/Qwen2.5-VL-7B-Instruct/blob/main/config.json:
hidden 3584, 28 layers, 28 heads, 4 key/value heads, MLP 18944, vocabulary 152064, M-RoPE sections 16/24/24; vision
tower 32 blocks of width 1280, MLP 3420, 16 heads, patch 14, spatial merge 2, window 112, full attention in blocks
7/15/23/31). Inputs are synthetic but shaped as the real ones: a screenshot of ``--width`` x ``--height`` pixels resized
by smart_resize at the pixel budget (``groundwork.geometry.smart_resize``, factor 28), one image token per 28 x 28
pixels, GTA1-sized text around it, and G completions of ``C/2..C`` random tokens (one exactly C), right-padded as TRL
lays them out.

Parts (each in its own ``try``; an error is recorded in the JSON and the next part runs; default ``b,c``):

* **a: split attention in bf16** (only when asked, ``--parts a,b,c``: measured once, docs/GPU_CHECK.md; its 30
  seconds are the budget's). A Qwen2.5-VL-7B-shaped stack of ``--stack-layers`` decoder layers
  (``Qwen2_5_VLTextModel``, random weights, inputs as embeddings). The shared layout (one packed row
  ``[prompt | suffix_1 .. suffix_G]``, :mod:`vlm_r1.shared_prompt_attention` with the backend ``auto`` picks: flash-attn
  when installed, else torch's FlexAttention on CUDA) against the naive dense layout (G rows ``[prompt | suffix_g]``,
  SDPA with a padding mask), on the suffix tokens: largest absolute and relative (max |diff| / max |reference|) errors
  of the outputs and of every parameter's gradient (loss = sum of the outputs times fixed random weights), in bf16, and
  both against the naive path in fp32 (same weights), so the bf16 rounding floor is on the same line.
* **b: the 7B model, one group.** ``Qwen2_5_VLForConditionalGeneration`` in bf16, SDPA, gradient checkpointing on,
  TRL's fused LM head. One group of G (8) rollouts of one screenshot (1920 x 1080 at GTA1's budget, 8,847,360 pixels:
  about 2.7k image tokens) with C (64) token completions. Naive = ``trl.GRPOTrainer._get_per_token_logps_and_entropies``
  on the G rows (trl 1.16, G copies of the pixels); shared = :func:`vlm_r1.shared_prompt.per_token_logps_and_entropies`
  with the dense mask (what ``--shared_prompt_attention auto`` runs over SDPA) and with split attention (``--variants``;
  default naive and shared_dense). Both then
  backward GRPO's clipped loss. Measured: forward+backward seconds (median, min and max of ``--repeats``, 3 for the
  7B, after one warm-up), the model FLOP utilisation of that median (``benchmarks/step_profile.py``: ``6 N T + 3 A +
  V`` over seconds x 989 TFLOP/s, the formula written in the JSON's ``mfu_formula``), peak GPU memory
  (``torch.cuda.max_memory_allocated`` over one step, and the part of it above the weights), LLM tokens and tokens/s,
  whether the vision tower's output carried autograd (``vision_output_requires_grad``: frozen, but under transformers'
  checkpointing hook), the log-prob agreement of the variants; the HF generation prefill (eval mode, no grad): naive =
  the G prompts with an empty ``DynamicCache`` (what ``generate`` starts with), shared = the Qwen module's
  ``shared_prompt_prefill`` (one prompt, cache repeated G times), each repeat with the previous one's cache released;
  and (``--profile``) where the seconds of one more warm step go, by ``torch.profiler``: vision tower, decoder
  attention, MLP, LM head and loss, optimizer (an AdamW step over the trainable parameters, ``--optimizer``), other,
  and the idle time between kernels (``step_profile.profile_step``).
* **before/after** (``--baseline PREV_TREE``, after part b): part b's naive and shared_dense steps on the previous
  commit's tree, the same way (this script in a child process that imports ``vlm_r1``/``groundwork`` from
  ``PREV_TREE``: ``GPU_CHECK_LIBRARY``), on the same card; the parent frees its model first and builds it again for
  part c. ``compare`` holds both medians with their spread, MFU and peaks. The measurement code must run on both
  trees, so a new library API it calls is looked up, not assumed.
* **c: larger (if time is left):** G = 16 at 1920 x 1080, and a 3840 x 2160 screenshot at the 12,845,056-pixel budget
  (not downscaled: about 10.5k image tokens), forward+backward once each on this tree, with its MFU; an
  out-of-memory is recorded as such.

``--budget-s`` bounds the whole run: a part that would not fit is skipped and says so. Writes ``gpu_check.json`` and
``gpu_check.md`` (a table) to ``--out``; prints the table. Timings are wall clock around CUDA-synchronised steps.
flash-attn is not installed on the check machine (no binary wheel for its torch), so the flash-attn path stays
unmeasured unless ``flash_attn`` imports there; the JSON names the backend that ran.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import json
import os
import platform
import statistics
import subprocess
import sys
import time
import traceback

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: the tree whose packages (vlm_r1, groundwork) are measured: this one, or the previous commit's copy that the
#: before/after comparison runs this same script on (``--baseline``: the child gets GPU_CHECK_LIBRARY)
LIBRARY = os.path.abspath(os.environ.get("GPU_CHECK_LIBRARY") or REPO)
for _path in (LIBRARY, os.path.join(REPO, "benchmarks")):
    if _path in sys.path:
        sys.path.remove(_path)
    sys.path.insert(0, _path)

import step_profile  # noqa: E402  (the profiler breakdown and the MFU formula; imports torch only when profiling)
from bench_shared_prompt import grpo_loss  # noqa: E402  (one GRPO loss for both benchmarks; imports nothing heavy)

#: GTA1's training budget (recipes/gta1/7b.yaml max_pixels: 4096 * 2160) and the larger one of part c
GTA1_MAX_PIXELS = 8_847_360
LARGE_MAX_PIXELS = 12_845_056
MIN_PIXELS = 3136
FACTOR = 28  # patch 14 x spatial merge 2
PATCH_DIM = 3 * 2 * 14 * 14  # channels x temporal patch x patch x patch: one pixel_values row

# Model shapes. "7b": the published Qwen2.5-VL-7B-Instruct config (see the module docstring); "tiny": vlm_r1.tiny's.
SHAPES = {
    "7b": {
        "text": dict(
            hidden_size=3584,
            intermediate_size=18944,
            num_hidden_layers=28,
            num_attention_heads=28,
            num_key_value_heads=4,
            vocab_size=152064,
            max_position_embeddings=128000,
            rms_norm_eps=1e-6,
            hidden_act="silu",
            rope_parameters={"rope_type": "default", "rope_theta": 1e6, "mrope_section": [16, 24, 24]},
        ),
        "vision": dict(
            depth=32,
            hidden_size=1280,
            intermediate_size=3420,
            num_heads=16,
            out_hidden_size=3584,
            patch_size=14,
            spatial_merge_size=2,
            temporal_patch_size=2,
            window_size=112,
            fullatt_block_indexes=[7, 15, 23, 31],
        ),
        "ids": dict(image=151655, video=151656, vision_start=151652, vision_end=151653, pad=151643, eos=151645),
        "defaults": dict(width=1920, height=1080, stack_layers=4, dtype="bfloat16", repeats=3, text_before=60),
    },
    "tiny": {
        "text": dict(
            hidden_size=64,
            intermediate_size=128,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            vocab_size=512,
            max_position_embeddings=32768,
            rms_norm_eps=1e-6,
            hidden_act="silu",
            rope_parameters={"rope_type": "default", "rope_theta": 1e6, "mrope_section": [2, 3, 3]},
        ),
        "vision": dict(
            depth=2,
            hidden_size=32,
            intermediate_size=64,
            num_heads=2,
            out_hidden_size=64,
            patch_size=14,
            spatial_merge_size=2,
            temporal_patch_size=2,
            window_size=112,
            fullatt_block_indexes=[1],
        ),
        "ids": dict(image=500, video=501, vision_start=502, vision_end=503, pad=504, eos=505),
        "defaults": dict(width=224, height=168, stack_layers=2, dtype="float32", repeats=1, text_before=20),
    },
}
TEXT_AFTER = 20  # instruction and chat tokens after the image
#: a part-c configuration starts only with this many seconds of --budget-s left (the naive 4K step alone took 89 s on
#: an H200: benchmarks/results/gpu_check_h200_run3.json), so the default run ends within about 5 minutes
C_MIN_LEFT_S = 100

#: when this run started (reset by :func:`main`); the log's clock and --budget-s count from it
T0 = time.perf_counter()


def log(msg: str) -> None:
    print(f"[gpu_check {time.perf_counter() - T0:7.1f}s] {msg}", flush=True)


# ---- environment ---------------------------------------------------------------------------------------------------
def environment(device) -> dict:
    import torch

    env = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "device": str(device),
        "flash_attn": None,
        "library": LIBRARY,
        "library_commit": tree_commit(LIBRARY),
        "vlm_r1": __import__("vlm_r1").__file__,
    }
    for name in ("transformers", "trl", "datasets", "accelerate"):
        try:
            env[name] = __import__(name).__version__
        except Exception as err:  # noqa: BLE001 - recorded, not fatal
            env[name] = f"missing ({type(err).__name__})"
    with contextlib.suppress(Exception):
        env["flash_attn"] = __import__("flash_attn").__version__
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        env.update(
            gpu=props.name, gpu_memory_gib=round(props.total_memory / 2**30, 1), sm_count=props.multi_processor_count
        )
    return env


def sync(device) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


def gib(n: float) -> float:
    return round(n / 2**30, 3)


class PeakMemory:
    """Peak GPU memory over a block (``torch.cuda.max_memory_allocated`` after a reset), and what was allocated at its
    start; on CPU, nothing (RSS is not comparable: see benchmarks/bench_shared_prompt.py for CPU memory)."""

    def __init__(self, device):
        self.device = device
        self.start = self.peak = None

    def __enter__(self):
        import torch

        if self.device.type == "cuda":
            sync(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
            self.start = torch.cuda.memory_allocated(self.device)
        return self

    def __exit__(self, *exc):
        import torch

        if self.device.type == "cuda":
            sync(self.device)
            self.peak = torch.cuda.max_memory_allocated(self.device)
        return False

    def as_dict(self) -> dict:
        if self.peak is None:
            return {"peak_gib": None, "start_gib": None, "peak_above_start_gib": None}
        return {
            "peak_gib": gib(self.peak),
            "start_gib": gib(self.start),
            "peak_above_start_gib": gib(self.peak - self.start),
        }


def timed(fn, device, repeats: int) -> tuple[list[float], object]:
    """Wall seconds of ``repeats`` synchronised calls (after none: the caller warms up), and the last result. Each
    call starts with the previous result released (before issue 29 the previous prefill's KV cache stayed alive
    during the next repeat, and its peak memory counted it)."""
    times, out = [], None
    for _ in range(repeats):
        out = None
        sync(device)
        t = time.perf_counter()
        out = fn()
        sync(device)
        times.append(time.perf_counter() - t)
    return times, out


def is_oom(err: BaseException) -> bool:
    import torch

    return isinstance(err, torch.OutOfMemoryError) or "out of memory" in str(err).lower()


# ---- configs and inputs --------------------------------------------------------------------------------------------
def text_config(shape: str, **overrides):
    from transformers import Qwen2_5_VLTextConfig

    spec = {**SHAPES[shape]["text"], **overrides}
    return Qwen2_5_VLTextConfig(**spec)


def model_config(shape: str):
    from transformers import Qwen2_5_VLConfig

    s = SHAPES[shape]
    ids = s["ids"]
    return Qwen2_5_VLConfig(
        text_config={**s["text"], "bos_token_id": ids["pad"], "eos_token_id": ids["eos"], "pad_token_id": ids["pad"]},
        vision_config=s["vision"],
        image_token_id=ids["image"],
        video_token_id=ids["video"],
        vision_start_token_id=ids["vision_start"],
        vision_end_token_id=ids["vision_end"],
        tie_word_embeddings=False,
    )


def image_grid(width: int, height: int, max_pixels: int) -> tuple[int, int, int]:
    """(1, grid_h, grid_w) of a ``width`` x ``height`` screenshot after smart_resize (patches of 14 pixels)."""
    from groundwork.geometry import smart_resize

    h, w = smart_resize(height, width, factor=FACTOR, min_pixels=MIN_PIXELS, max_pixels=max_pixels)
    return 1, h // 14, w // 14


def build_group(shape: str, width: int, height: int, max_pixels: int, G: int, C: int, seed: int, device, dtype):
    """One group in TRL's layout (see the module docstring). Returns a dict of tensors on ``device`` and counts."""
    import torch

    s = SHAPES[shape]
    ids, vocab = s["ids"], s["text"]["vocab_size"]
    special = set(ids.values())
    g = torch.Generator().manual_seed(seed)

    def text(n: int) -> torch.Tensor:
        t = torch.randint(0, min(vocab, ids["pad"]), (n,), generator=g)
        return torch.where(torch.isin(t, torch.tensor(sorted(special))), t + 7, t)

    grid = image_grid(width, height, max_pixels)
    patches = grid[1] * grid[2]
    image_tokens = patches // 4
    prompt = torch.cat(
        [
            text(s["defaults"]["text_before"]),
            torch.tensor([ids["vision_start"]]),
            torch.full((image_tokens,), ids["image"]),
            torch.tensor([ids["vision_end"]]),
            text(TEXT_AFTER),
        ]
    )
    P = prompt.numel()
    mm = (prompt == ids["image"]).long()
    lens = torch.randint(max(1, C // 2), C + 1, (G,), generator=g)
    lens[0] = C
    comp = torch.full((G, C), ids["pad"], dtype=torch.long)
    cmask = torch.zeros(G, C, dtype=torch.long)
    for r, n in enumerate(lens.tolist()):
        comp[r, :n] = text(n)
        cmask[r, :n] = 1
    adv = torch.randn(G, generator=g)
    adv = (adv - adv.mean()) / adv.std().clamp(min=1e-4)
    pixel_values = torch.randn(patches, PATCH_DIM, generator=g)
    to = dict(device=device)
    return {
        "prompt_ids": prompt[None].to(**to),
        "prompt_mask": torch.ones(1, P, dtype=torch.long, device=device),
        "prompt_mm": mm[None].to(**to),
        "input_ids": torch.cat([prompt.repeat(G, 1), comp], 1).to(**to),
        "attention_mask": torch.cat([torch.ones(G, P, dtype=torch.long), cmask], 1).to(**to),
        "mm_token_type_ids": torch.cat([mm.repeat(G, 1), torch.zeros_like(comp)], 1).to(**to),
        "pixel_values": pixel_values.to(device=device, dtype=dtype),
        "image_grid_thw": torch.tensor([grid], device=device),
        "completion_mask": cmask.float().to(**to),
        "advantages": adv.to(**to),
        "counts": {
            "prompt_tokens": P,
            "image_tokens": image_tokens,
            "vision_patches": patches,
            "completion_tokens": lens.tolist(),
            "resized_wh": [grid[2] * 14, grid[1] * 14],
            "screenshot_wh": [width, height],
            "max_pixels": max_pixels,
            "G": G,
            "C": C,
            "pad_id": ids["pad"],
        },
    }


# ---- part a --------------------------------------------------------------------------------------------------------
def _errors(got, ref) -> dict:
    """Largest absolute difference and the relative one (max |got - ref| / max |ref|), compared in fp32."""
    diff = float((got.float() - ref.float()).abs().max())
    scale = float(ref.float().abs().max())
    return {"max_abs": diff, "max_rel": diff / scale if scale else float("inf")}


def _grad_errors(got: dict, ref: dict) -> dict:
    """Over every parameter: the largest absolute difference, the largest per-tensor relative one (max |diff| /
    max |ref| of that tensor) with its name, and the relative norm of all gradients together."""
    worst_abs, worst_rel, worst_name, num, den = 0.0, 0.0, None, 0.0, 0.0
    for name, r in ref.items():
        e = _errors(got[name], r)
        worst_abs = max(worst_abs, e["max_abs"])
        if e["max_rel"] > worst_rel:
            worst_rel, worst_name = e["max_rel"], name
        num += float((got[name].float() - r.float()).pow(2).sum())
        den += float(r.float().pow(2).sum())
    return {
        "max_abs": worst_abs,
        "max_rel": worst_rel,
        "max_rel_param": worst_name,
        "rel_norm": (num / den) ** 0.5 if den else float("inf"),
    }


def _grads(model) -> dict:
    """Every parameter gradient (the stack's unused ``embed_tokens`` has none)."""
    return {k: p.grad.detach().clone() for k, p in model.named_parameters() if p.grad is not None}


def part_a(args, device, dtype) -> dict:
    """Split attention vs the naive dense path on a decoder-layer stack of the shape (see the module docstring)."""
    import torch
    from transformers import Qwen2_5_VLTextModel

    from vlm_r1 import shared_prompt as sp
    from vlm_r1 import shared_prompt_attention as spa

    s = SHAPES[args.shape]
    grid = image_grid(args.width, args.height, GTA1_MAX_PIXELS)
    P = s["defaults"]["text_before"] + 2 + grid[1] * grid[2] // 4 + TEXT_AFTER
    G, C = args.group, args.completion_tokens
    gen = torch.Generator().manual_seed(args.seed)
    lens = torch.randint(max(1, C // 2), C + 1, (G,), generator=gen).tolist()
    lens[0] = C
    cfg = text_config(
        args.shape, num_hidden_layers=args.stack_layers, vocab_size=1024, bos_token_id=None, eos_token_id=None
    )
    cfg._attn_implementation = "sdpa"
    torch.manual_seed(args.seed)
    with torch.device(device):
        model = Qwen2_5_VLTextModel(cfg).to(dtype)
    model.train()
    reference = copy.deepcopy(model).float()
    reference.config._attn_implementation = "sdpa"
    backend_base = spa.enable_split_attention(model, backend="auto")
    H = cfg.hidden_size
    prompt = torch.randn(P, H, generator=gen) * 0.5
    suffixes = [torch.randn(n, H, generator=gen) * 0.5 for n in lens]
    weights = [torch.randn(n, H, generator=gen) for n in lens]

    # naive: G rows [prompt | suffix g], right-padded to P + C, 2D padding mask
    naive_in = torch.zeros(G, P + C, H)
    mask = torch.zeros(G, P + C, dtype=torch.long)
    for r, (suf, n) in enumerate(zip(suffixes, lens, strict=True)):
        naive_in[r, :P], naive_in[r, P : P + n], mask[r, : P + n] = prompt, suf, 1
    naive_pos = torch.arange(P + C)[None, None].expand(3, G, -1)
    # shared: one row [prompt | suffix 1 .. suffix G]; suffix g's positions continue the prompt's
    shared_in = torch.cat([prompt, *suffixes])[None]
    shared_pos = torch.cat([torch.arange(P)] + [torch.arange(P, P + n) for n in lens])[None, None].expand(3, 1, -1)
    L = shared_in.size(1)
    info = sp.SegmentInfo([(P, list(lens))], L)
    backend = spa.split_backend(device, dtype, "auto")

    def naive(m, dt):
        m.zero_grad(set_to_none=True)
        out = m(
            inputs_embeds=naive_in.to(device, dt),
            attention_mask=mask.to(device),
            position_ids=naive_pos.to(device),
            use_cache=False,
        ).last_hidden_state
        outs = [out[r, P : P + n] for r, n in enumerate(lens)]
        loss = sum((o.float() * w.to(device)).sum() for o, w in zip(outs, weights, strict=True))
        loss.backward()
        return torch.cat(outs).detach(), _grads(m)

    def shared():
        model.zero_grad(set_to_none=True)
        out = model(
            inputs_embeds=shared_in.to(device, dtype),
            attention_mask=None,
            position_ids=shared_pos.to(device),
            use_cache=False,
            shared_prompt_segments=info,
        ).last_hidden_state[0]
        starts = [P + sum(lens[:g]) for g in range(G)]
        outs = [out[a : a + n] for a, n in zip(starts, lens, strict=True)]
        loss = sum((o.float() * w.to(device)).sum() for o, w in zip(outs, weights, strict=True))
        loss.backward()
        return torch.cat(outs).detach(), _grads(model)

    log(f"part a: {args.stack_layers} layers, prompt {P} tokens, G={G} suffixes {lens}, split backend {backend}")
    sync(device)
    t = time.perf_counter()
    out_s, grad_s = shared()  # the first call compiles FlexAttention on CUDA
    sync(device)
    first_s = time.perf_counter() - t
    out_n, grad_n = naive(model, dtype)
    out_ref, grad_ref = naive(reference, torch.float32)
    result = {
        "layers": args.stack_layers,
        "prompt_tokens": P,
        "suffix_tokens": lens,
        "dtype": str(dtype).replace("torch.", ""),
        "split_backend": backend,
        "base_attention": backend_base,
        "first_shared_call_s": round(first_s, 2),
        "outputs": {
            "shared_vs_naive": _errors(out_s, out_n),
            "shared_vs_naive_fp32": _errors(out_s, out_ref),
            "naive_vs_naive_fp32": _errors(out_n, out_ref),
        },
        "gradients": {
            "shared_vs_naive": _grad_errors(grad_s, grad_n),
            "shared_vs_naive_fp32": _grad_errors(grad_s, grad_ref),
            "naive_vs_naive_fp32": _grad_errors(grad_n, grad_ref),
        },
    }
    times, _ = timed(shared, device, args.repeats)
    result["shared_fwd_bwd_s"] = round(statistics.median(times), 4)
    times, _ = timed(lambda: naive(model, dtype), device, args.repeats)
    result["naive_fwd_bwd_s"] = round(statistics.median(times), 4)
    return result


# ---- part b / c ----------------------------------------------------------------------------------------------------
def build_model(args, device, dtype):
    import torch
    from transformers import Qwen2_5_VLForConditionalGeneration

    config = model_config(args.shape)
    config._attn_implementation = "sdpa"
    config.get_text_config()._attn_implementation = "sdpa"
    config.vision_config._attn_implementation = "sdpa"
    torch.manual_seed(args.seed)
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.device(device):
            model = Qwen2_5_VLForConditionalGeneration(config)
    finally:
        torch.set_default_dtype(previous)
    model.config.use_cache = False
    if args.freeze_vision:
        # GTA1's recipe freezes the vision tower (recipes/gta1/7b.yaml freeze_vision_modules: true): no gradients or
        # saved activations for it; the language model and the merger's output stay trainable as in training
        for name, p in model.named_parameters():
            if ".visual." in f".{name}" or name.startswith("visual."):
                p.requires_grad_(False)
    try:  # the vision tower's attention as training installs it (issue 29 item 2); a baseline tree without it loops
        from vlm_r1.vision_attention import enable_vision_varlen
    except ImportError:
        enable_vision_varlen = None
    if enable_vision_varlen is not None:
        enable_vision_varlen(model, family="qwen2_5_vl")
    if args.freeze_vision:  # the frozen tower without autograd (issue 29 item 1) where the tree has it
        try:
            from vlm_r1.modules.qwen import Qwen2VLModule
            from vlm_r1.vision_cache import FrozenVisionTower, VisionFeatureCache
        except ImportError:
            FrozenVisionTower = None
        if FrozenVisionTower is not None:
            tower = Qwen2VLModule("qwen2_5_vl").vision_tower(model)
            FrozenVisionTower(tower, VisionFeatureCache()).install()  # no batch scope open: no_grad, nothing stored
    return model


def prefill_measure(model, module, batch, G: int, device, repeats: int) -> dict:
    """HF generation prefill, naive (G prompts, empty cache) vs shared (``shared_prompt_prefill``), eval mode."""
    import torch
    from transformers import DynamicCache

    owner = module._rope_owner(model)
    one = {
        "input_ids": batch["prompt_ids"],
        "attention_mask": batch["prompt_mask"],
        "pixel_values": batch["pixel_values"],
        "image_grid_thw": batch["image_grid_thw"],
        "mm_token_type_ids": batch["prompt_mm"],
    }
    naive_in = {
        "input_ids": one["input_ids"].repeat(G, 1),
        "attention_mask": one["attention_mask"].repeat(G, 1),
        "pixel_values": one["pixel_values"].repeat(G, 1),
        "image_grid_thw": one["image_grid_thw"].repeat(G, 1),
        "mm_token_type_ids": one["mm_token_type_ids"].repeat(G, 1),
    }

    def naive():
        owner.rope_deltas = None
        cache = DynamicCache(config=model.config)
        model(**naive_in, past_key_values=cache, use_cache=True, logits_to_keep=1)
        return cache

    def shared():
        return module.shared_prompt_prefill(model, one, G)["past_key_values"]

    out = {}
    with torch.no_grad():
        for name, fn in (("naive", naive), ("shared", shared)):
            fn()  # warm-up
            with PeakMemory(device) as mem:
                times, cache = timed(fn, device, repeats)
            out[name] = {
                "prefill_s": round(statistics.median(times), 4),
                "prefill_s_all": [round(t, 4) for t in times],
                "cache_tokens": int(cache.get_seq_length()),
                **mem.as_dict(),
            }
            del cache
    out["speedup"] = round(out["naive"]["prefill_s"] / out["shared"]["prefill_s"], 2)
    out["previous_result_released"] = True  # benchmarks/calibrate_memory.py: no stale cache in these peaks
    return out


def _first_tensor(output):
    import torch

    if isinstance(output, torch.Tensor):
        return output
    items = output.values() if isinstance(output, dict) else output if isinstance(output, (tuple, list)) else ()
    return next((t for t in items if isinstance(t, torch.Tensor)), None)


def make_step(model, module, batch, variant: str, probe: dict | None = None):
    """``(step, backend)``: one GRPO forward+backward of the group, naive (TRL) or shared (dense mask / split
    attention), the GRPO loss labelled for the profiler; ``probe`` gets ``vision_output_requires_grad`` (whether the
    vision tower's output carried autograd in the step: frozen but under the checkpointing hook, or trained)."""
    from contextlib import nullcontext
    from types import SimpleNamespace

    from torch.autograd.profiler import record_function
    from trl import GRPOTrainer

    from vlm_r1 import shared_prompt as sp

    c = batch["counts"]
    G, C = c["G"], c["C"]
    ids, am, mm = batch["input_ids"], batch["attention_mask"], batch["mm_token_type_ids"]
    grid = batch["image_grid_thw"].repeat(G, 1)
    nimg = [1] * G
    if variant == "naive":
        pixel_values = batch["pixel_values"].repeat(G, 1)
        trainer = SimpleNamespace(accelerator=SimpleNamespace(autocast=nullcontext, is_main_process=True))
    else:
        pixel_values = batch["pixel_values"]
        positions_fn = module.shared_prompt_positions_fn(model)
        attention = "split" if variant == "shared_split" else "dense"
    backend = None
    if variant == "shared_split":
        # as the trainer does with --shared_prompt_attention split: the text model's attention becomes the split one
        # (calls without the layout still go to SDPA)
        from vlm_r1 import shared_prompt_attention as spa

        spa.enable_split_attention(model, backend="auto")
        backend = spa.split_backend(ids.device, batch["pixel_values"].dtype, "auto")
    visual = next((m for n, m in model.named_modules() if n.split(".")[-1] == "visual"), None)

    def step():
        model.zero_grad(set_to_none=True)
        handle = None
        if probe is not None and visual is not None and "vision_output_requires_grad" not in probe:

            def hook(mod, args, output):
                t = _first_tensor(output)
                probe["vision_output_requires_grad"] = bool(t is not None and t.requires_grad)

            handle = visual.register_forward_hook(hook)
        try:
            if variant == "naive":
                lp, _, _ = GRPOTrainer._get_per_token_logps_and_entropies(
                    trainer,
                    model,
                    ids,
                    am,
                    C,
                    compute_entropy=True,
                    pixel_values=pixel_values,
                    image_grid_thw=grid,
                    num_images=nimg,
                    mm_token_type_ids=mm,
                )
            else:
                lp, _ = sp.per_token_logps_and_entropies(
                    model,
                    ids,
                    am,
                    C,
                    num_generations=G,
                    positions_fn=positions_fn,
                    compute_entropy=True,
                    pixel_values=pixel_values,
                    image_grid_thw=grid,
                    num_images=nimg,
                    mm_token_type_ids=mm,
                    attention=attention,
                    pad_token_id=c["pad_id"],
                )
        finally:
            if handle is not None:
                handle.remove()
        with record_function(step_profile.LABEL + "lm_head_loss"):
            loss = grpo_loss(lp.float(), batch["advantages"], batch["completion_mask"])
        loss.backward()
        return lp.detach()

    return step, backend


def train_measure(model, module, batch, variant: str, device, repeats: int, warmup: bool = True) -> dict:
    """One GRPO forward+backward of the group (:func:`make_step`): seconds (median of ``repeats``), peak memory."""
    from vlm_r1 import shared_prompt as sp

    c = batch["counts"]
    grid = batch["image_grid_thw"].repeat(c["G"], 1)
    counts = sp.token_counts(
        batch["attention_mask"], c["C"], None if variant == "naive" else c["G"], grid, [1] * c["G"]
    )
    probe: dict = {}
    step, backend = make_step(model, module, batch, variant, probe)

    first_s = None
    if warmup:
        sync(device)
        t = time.perf_counter()
        step()  # warm-up (compiles FlexAttention for split)
        sync(device)
        first_s = round(time.perf_counter() - t, 2)
    model.zero_grad(
        set_to_none=True
    )  # the measured step starts from the weights alone: peak - start = grads + activations
    _free(device)
    with PeakMemory(device) as mem:
        times, lp = timed(step, device, 1)
    more, _ = timed(step, device, max(0, repeats - 1))
    times += more
    model.zero_grad(set_to_none=True)
    median = statistics.median(times)
    return {
        "split_backend": backend,
        "fwd_bwd_s": round(median, 4),
        "fwd_bwd_s_all": [round(t, 4) for t in times],
        "fwd_bwd_s_spread": round(max(times) - min(times), 4),
        "first_step_s": first_s,
        "timed_steps_include_first": not warmup,
        "llm_tokens": counts["llm_tokens"],
        "naive_llm_tokens": counts["naive_llm_tokens"],
        "vision_patches": counts["vision_patches"],
        "llm_tokens_per_s": round(counts["llm_tokens"] / median, 1),
        "vision_output_requires_grad": probe.get("vision_output_requires_grad"),
        **mem.as_dict(),
        "_logps": lp,
    }


def profile_variant(model, module, batch, variant: str, device, optimizer: bool = True) -> dict:
    """The :func:`step_profile.profile_step` breakdown of one warm training step of ``variant``: forward+backward
    and, with ``optimizer``, a ``torch.optim.AdamW`` step over the trainable parameters (fused on a GPU; its states
    are made beforehand, on zero gradients, so the profiled step is warm) and its ``zero_grad``. An out-of-memory
    with the optimizer is recorded and the step is profiled without it."""
    import torch
    from torch.autograd.profiler import record_function

    step, _ = make_step(model, module, batch, variant)
    opt, note = None, "none"
    if optimizer:
        params = [p for p in model.parameters() if p.requires_grad]
        try:
            opt = torch.optim.AdamW(params, lr=1e-12, fused=device.type == "cuda")
            for p in params:
                p.grad = torch.zeros_like(p)
            opt.step()  # makes the states (m, v in the weights' dtype, as the trainer's AdamW without DeepSpeed)
            note = f"torch.optim.AdamW(fused={device.type == 'cuda'}) over {sum(p.numel() for p in params):,} params"
        except Exception as err:  # noqa: BLE001 - recorded; profiled without the optimizer
            opt, note = None, f"left out: {type(err).__name__}: {str(err)[:200]}"
        model.zero_grad(set_to_none=True)
        _free(device)

    holder = {"opt": opt}

    def full_step():
        step()
        if holder["opt"] is not None:
            with record_function(step_profile.LABEL + "optimizer"):
                holder["opt"].step()
                holder["opt"].zero_grad(set_to_none=True)

    try:
        out = step_profile.profile_step(full_step, model, synchronize=lambda: sync(device))
    except Exception as err:  # noqa: BLE001 - an OOM with the optimizer's states: once more without them
        if holder["opt"] is None or not is_oom(err):
            raise
        holder["opt"] = opt = None
        note = f"left out: out of memory with its states ({str(err)[:200]})"
        model.zero_grad(set_to_none=True)
        _free(device)
        out = step_profile.profile_step(full_step, model, synchronize=lambda: sync(device))
    holder["opt"] = opt = None
    model.zero_grad(set_to_none=True)
    _free(device)
    out["optimizer"] = note
    return out


def step_flops(model, batch, variant: str) -> dict:
    """:func:`step_profile.model_flops` of one training step of ``variant`` on ``batch`` (the formula in
    :data:`step_profile.FORMULA`), with its inputs."""
    c = batch["counts"]
    P, lens = c["prompt_tokens"], c["completion_tokens"]
    text = model.config.get_text_config()
    lm = model.model.language_model
    n_params = sum(p.numel() for n, p in lm.named_parameters() if not n.startswith("embed_tokens"))
    n_params += sum(p.numel() for p in model.lm_head.parameters())
    if variant == "naive":
        tokens, pairs = c["G"] * P + sum(lens), step_profile.causal_pairs([P + n for n in lens])
    else:
        tokens, pairs = P - 1 + sum(n + 1 for n in lens), step_profile.shared_pairs(P - 1, [n + 1 for n in lens])
    vis = model.model.visual
    vc = model.config.vision_config
    _, gh, gw = (int(x) for x in batch["image_grid_thw"][0].tolist())
    merge = vc.spatial_merge_size
    vision = step_profile.vision_flops(
        gh,
        gw,
        vc.hidden_size,
        vc.depth,
        len(vc.fullatt_block_indexes),
        vc.window_size // (vc.patch_size * merge),
        merge,
        sum(p.numel() for p in vis.patch_embed.parameters()) + sum(p.numel() for p in vis.blocks.parameters()),
        sum(p.numel() for p in vis.merger.parameters()),
    )
    heads = text.num_attention_heads
    head_dim = getattr(text, "head_dim", None) or text.hidden_size // heads
    flops = step_profile.model_flops(n_params, tokens, heads * head_dim, text.num_hidden_layers, pairs, vision)
    return {**flops, "N": n_params, "T": tokens, "attention_pairs": pairs, "screenshots": 1}


def measure_config(
    args,
    model,
    module,
    device,
    dtype,
    *,
    G: int,
    width: int,
    height: int,
    max_pixels: int,
    variants,
    prefill: bool,
    warmup: bool = True,
    repeats: int | None = None,
    profile: bool = False,
) -> dict:
    """Part b/c for one configuration: train variants (and the prefill), each guarded against OOM, with each
    variant's model FLOPs and MFU (:func:`step_flops`) and, with ``profile``, the profiler breakdown of one more warm
    step with the optimizer (:func:`profile_variant`)."""
    import torch

    repeats = repeats or args.repeats
    batch = build_group(args.shape, width, height, max_pixels, G, args.completion_tokens, args.seed, device, dtype)
    result = {"inputs": batch["counts"], "warmup": warmup, "repeats": repeats}
    log(f"config G={G} {width}x{height} max_pixels={max_pixels}: {batch['counts']['prompt_tokens']} prompt tokens")
    if prefill:
        model.eval()
        model.gradient_checkpointing_disable()
        try:
            result["prefill"] = prefill_measure(model, module, batch, G, device, args.repeats)
            log(f"  prefill: {result['prefill']}")
        except Exception as err:  # noqa: BLE001 - recorded
            result["prefill"] = _failure(err)
            log(f"  prefill failed: {result['prefill']['error']}")
        _free(device)
    model.train()
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    logps = {}
    for variant in variants:
        try:
            r = train_measure(model, module, batch, variant, device, repeats, warmup)
            logps[variant] = r.pop("_logps")
            flops = step_flops(model, batch, variant)
            r["model_flops"] = flops
            r["mfu"] = round(step_profile.mfu(flops["total"], r["fwd_bwd_s"], args.peak_tflops * 1e12), 4)
            result[variant] = r
            log(f"  {variant}: {r}")
            print(f"[gpu_check] {variant}: {r['fwd_bwd_s']} s, MFU {r['mfu']:.1%}", flush=True)
        except Exception as err:  # noqa: BLE001 - recorded (OOM included)
            result[variant] = _failure(err)
            log(f"  {variant} failed: {result[variant]['error']}")
        model.zero_grad(set_to_none=True)
        _free(device)
        if profile and "error" not in result[variant]:
            try:
                result[variant]["profile"] = profile_variant(model, module, batch, variant, device, args.optimizer)
                log(f"  {variant} profile: {json.dumps(result[variant]['profile']['seconds'])}")
            except Exception as err:  # noqa: BLE001 - recorded
                result[variant]["profile"] = _failure(err)
                log(f"  {variant} profile failed: {result[variant]['profile']['error']}")
            model.zero_grad(set_to_none=True)
            _free(device)
    mask = batch["completion_mask"].bool()
    if "naive" in logps:
        for v in logps:
            if v != "naive":
                d = (logps[v].float() - logps["naive"].float())[mask].abs()
                result[f"{v}_logp_max_abs_diff_vs_naive"] = float(d.max())
                result[f"{v}_logp_mean_abs_diff_vs_naive"] = float(d.mean())
    n, s = result.get("naive", {}), result.get("shared_dense", {})
    if "fwd_bwd_s" in n and "fwd_bwd_s" in s:
        result["fwd_bwd_speedup"] = round(n["fwd_bwd_s"] / s["fwd_bwd_s"], 2)
        if n.get("peak_above_start_gib") and s.get("peak_above_start_gib"):
            result["activation_memory_ratio"] = round(n["peak_above_start_gib"] / s["peak_above_start_gib"], 2)
    del batch
    torch.manual_seed(args.seed)
    return result


def _failure(err: BaseException) -> dict:
    return {
        "error": f"{type(err).__name__}: {str(err)[:500]}",
        "oom": is_oom(err),
        "traceback": traceback.format_exc()[-3000:],
    }


def _free(device) -> None:
    import gc

    import torch

    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()


# ---- report --------------------------------------------------------------------------------------------------------
def _fmt(v, unit="") -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.4g}{unit}"
    return f"{v}{unit}"


def markdown(result: dict) -> str:
    env = result["environment"]
    lines = [
        f"# GPU check ({result['shape']} shape)",
        "",
        f"{env.get('gpu', env['device'])}, torch {env['torch']} (CUDA {env['cuda']}), transformers "
        f"{env['transformers']}, trl {env['trl']}, flash-attn {env['flash_attn'] or 'not installed'}; "
        f"total {result['wall_s']:.0f} s.",
        "",
    ]
    a = result.get("a")
    if a and "error" not in a:
        lines += [
            f"## a. Split attention ({a['split_backend']}) vs naive dense, {a['dtype']}, {a['layers']} layers, "
            f"prompt {a['prompt_tokens']} tokens, G={len(a['suffix_tokens'])}",
            "",
            "| compared | outputs max abs | outputs max rel | grads max abs | grads max rel | grads rel norm |",
            "|---|---|---|---|---|---|",
        ]
        for key in ("shared_vs_naive", "shared_vs_naive_fp32", "naive_vs_naive_fp32"):
            o, g = a["outputs"][key], a["gradients"][key]
            lines.append(
                f"| {key.replace('_', ' ')} | {_fmt(o['max_abs'])} | {_fmt(o['max_rel'])} | {_fmt(g['max_abs'])} | "
                f"{_fmt(g['max_rel'])} | {_fmt(g['rel_norm'])} |"
            )
        lines += [
            "",
            f"Layer stack forward+backward: shared {a['shared_fwd_bwd_s']} s, naive {a['naive_fwd_bwd_s']} s.",
            "",
        ]
    elif a:
        lines += [f"## a. failed: {a['error']}", ""]
    for part in ("b", "c"):
        for name, cfg in (result.get(part) or {}).items():
            if "inputs" not in cfg:
                lines += [f"## {part}. {name}: {cfg.get('error') or cfg.get('skipped')}", ""]
                continue
            i = cfg["inputs"]
            lines += [
                f"## {part}. {name}: G={i['G']}, {i['screenshot_wh'][0]}x{i['screenshot_wh'][1]} screenshot -> "
                f"{i['resized_wh'][0]}x{i['resized_wh'][1]} ({i['image_tokens']} image tokens, prompt "
                f"{i['prompt_tokens']} tokens), completions <= {i['C']} tokens"
                + ("" if cfg.get("warmup", True) else " (one step, no warm-up: one-time costs included)"),
                "",
                "| variant | fwd+bwd s | MFU | LLM tokens | tokens/s | peak GiB | grads + activations GiB |",
                "|---|---|---|---|---|---|---|",
            ]
            for v in ("naive", "shared_dense", "shared_split"):
                r = cfg.get(v)
                if r is None:
                    continue
                if "error" in r:
                    lines.append(f"| {v} | {'OOM' if r['oom'] else 'error'} | | | | | |")
                    continue
                spread = (
                    f" ({min(r['fwd_bwd_s_all'])}-{max(r['fwd_bwd_s_all'])})" if len(r["fwd_bwd_s_all"]) > 1 else ""
                )
                mfu = f"{r['mfu']:.1%}" if r.get("mfu") is not None else "-"
                lines.append(
                    f"| {v} | {r['fwd_bwd_s']}{spread} | {mfu} | {r['llm_tokens']} | {r['llm_tokens_per_s']} | "
                    f"{_fmt(r['peak_gib'])} | {_fmt(r['peak_above_start_gib'])} |"
                )
            pre = cfg.get("prefill")
            if pre and "error" not in pre:
                lines += [
                    "",
                    f"Prefill: naive {pre['naive']['prefill_s']} s (peak {_fmt(pre['naive']['peak_gib'])} GiB), shared "
                    f"{pre['shared']['prefill_s']} s (peak {_fmt(pre['shared']['peak_gib'])} GiB): {pre['speedup']}x.",
                ]
            extras = [k for k in cfg if k.endswith("_vs_naive") or k in ("fwd_bwd_speedup", "activation_memory_ratio")]
            if extras:
                lines += ["", "; ".join(f"{k} = {_fmt(cfg[k])}" for k in extras) + "."]
            lines += _profile_lines(cfg)
            lines.append("")
    lines += _compare_lines(result)
    if "mfu_formula" in result:
        f = result["mfu_formula"]
        lines += ["", f"MFU at a peak of {f['peak_flops'] / 1e12:g} TFLOP/s; {f['formula']}.", ""]
    return "\n".join(lines)


def _profile_lines(cfg: dict) -> list[str]:
    """The profiler breakdown of the variants of one configuration: seconds (and share) per category."""
    profiled = {
        v: cfg[v]["profile"] for v in ("naive", "shared_dense", "shared_split") if "profile" in (cfg.get(v) or {})
    }
    profiled = {v: p for v, p in profiled.items() if "seconds" in p}
    if not profiled:
        return []
    lines = [
        "",
        "Where one warm step's seconds go (torch.profiler; the optimizer step included where it fit):",
        "",
        "| category | " + " | ".join(profiled) + " |",
        "|---|" + "---|" * len(profiled),
    ]
    for category in step_profile.CATEGORIES:
        cells = [f"{p['seconds'][category]:.3f} ({p['fractions'][category]:.0%})" for p in profiled.values()]
        lines.append(f"| {category} | " + " | ".join(cells) + " |")
    lines.append("| profiled window s | " + " | ".join(f"{p['window_s']:.3f}" for p in profiled.values()) + " |")
    lines.append("| optimizer | " + " | ".join(p.get("optimizer", "-") for p in profiled.values()) + " |")
    return lines


def _compare_lines(result: dict) -> list[str]:
    """The before/after table of part b's G=8 steps (the previous commit's tree vs this one)."""
    base = result.get("baseline")
    if not base:
        return []
    if "G8" not in base or not base.get("G8"):
        return [f"## Before/after: {base.get('skipped') or base.get('error') or 'no result'}", ""]
    w, h = result["args"]["width"], result["args"]["height"]
    lines = [
        f"## Before/after: G={result['args']['group']} {w}x{h}, the previous commit ({base.get('commit') or base['tree']})"
        f" vs this tree, {result['args']['repeats']} timed steps each after one warm-up, same card",
        "",
        "| variant | before s: median (min-max) | after s: median (min-max) | speed-up | MFU before | MFU after | "
        "peak GiB before | peak GiB after |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for variant, row in (result.get("compare") or {}).items():
        b, a = row.get("before") or {}, row.get("after") or {}

        def cell(r: dict) -> str:
            return f"{r['median_s']} ({r['min_s']}-{r['max_s']})" if r else "-"

        def pct(r: dict) -> str:
            return f"{r['mfu']:.1%}" if r.get("mfu") is not None else "-"

        lines.append(
            f"| {variant} | {cell(b)} | {cell(a)} | {row.get('speedup', '-')} | {pct(b)} | {pct(a)} | "
            f"{_fmt(b.get('peak_gib'))} | {_fmt(a.get('peak_gib'))} |"
        )
    return lines + [""]


def write_atomic(path: str, text: str) -> None:
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


# ---- main ----------------------------------------------------------------------------------------------------------
def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shape", choices=sorted(SHAPES), default="7b", help="model shape (default 7b)")
    ap.add_argument("--out", required=True, help="folder for gpu_check.json and gpu_check.md")
    ap.add_argument("--parts", default="b,c", help="comma-separated parts to run: a, b, c (default b,c)")
    ap.add_argument("--group", type=int, default=8, help="G, rollouts per group (default 8)")
    ap.add_argument("--completion-tokens", type=int, default=64, help="C, completion length in tokens (default 64)")
    ap.add_argument("--width", type=int, default=None, help="screenshot width in pixels (7b: 1920, tiny: 224)")
    ap.add_argument("--height", type=int, default=None, help="screenshot height in pixels (7b: 1080, tiny: 168)")
    ap.add_argument("--stack-layers", type=int, default=None, help="decoder layers in part a (7b: 4, tiny: 2)")
    ap.add_argument("--repeats", type=int, default=None, help="timed repeats per measurement (7b: 3, tiny: 1)")
    ap.add_argument("--dtype", choices=["bfloat16", "float32"], default=None, help="7b: bfloat16, tiny: float32")
    ap.add_argument("--device", default=None, help="torch device (default: cuda when available, else cpu)")
    ap.add_argument(
        "--budget-s", type=float, default=260.0, help="wall-clock budget in seconds; later parts are skipped [260]"
    )
    ap.add_argument("--seed", type=int, default=0, help="seed of weights and inputs")
    ap.add_argument(
        "--freeze-vision",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="freeze the vision tower as GTA1's recipe does (freeze_vision_modules: true) [on]",
    )
    ap.add_argument(
        "--variants",
        default="naive,shared_dense",
        help="part b's training variants, comma-separated (naive, shared_dense, shared_split) [naive,shared_dense]",
    )
    ap.add_argument("--no-prefill", action="store_true", help="skip part b's prefill measurement")
    ap.add_argument(
        "--profile",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="part b: the torch.profiler breakdown of one more warm step per variant [on]",
    )
    ap.add_argument(
        "--optimizer",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="the profiled step includes an AdamW step over the trainable parameters [on]",
    )
    ap.add_argument(
        "--peak-tflops",
        type=float,
        default=step_profile.PEAK_BF16_FLOPS / 1e12,
        help="the card's peak for the MFU, TFLOP/s [989: dense bf16 of the H100 SXM and H200]",
    )
    ap.add_argument(
        "--baseline",
        default=None,
        help="a copy of the previous commit's tree (its vlm_r1/ and groundwork/; run_scripts/gpu_check.sh prepares "
        "it): part b's naive and shared_dense steps are measured on it too, by this script in a child process, "
        "after the new code's part b and before part c",
    )
    args = ap.parse_args(argv)
    for key, value in SHAPES[args.shape]["defaults"].items():
        if getattr(args, key, None) is None:
            setattr(args, key, value)
    if args.group < 1 or args.completion_tokens < 1 or args.stack_layers < 1 or args.repeats < 1:
        ap.error("--group, --completion-tokens, --stack-layers and --repeats must be >= 1")
    return args


def load_model(args, device, dtype) -> tuple[object, dict]:
    """The measured model (:func:`build_model` + TRL's fused LM head) and its description."""
    from trl.trainer.utils import add_fused_lm_head

    t = time.perf_counter()
    model = build_model(args, device, dtype)
    add_fused_lm_head(model, outputs=("log_probs", "entropy"))
    info = {
        "parameters": sum(p.numel() for p in model.parameters()),
        "trainable_parameters": sum(p.numel() for p in model.parameters() if p.requires_grad),
        "vision_frozen": args.freeze_vision,
        "build_s": round(time.perf_counter() - t, 1),
        "weights_gib": gib(sum(p.numel() * p.element_size() for p in model.parameters())),
    }
    return model, info


def tree_commit(tree: str) -> str | None:
    """The commit a tree copy was made from: its ``COMMIT`` file (run_scripts/gpu_check.sh writes it), else git."""
    marker = os.path.join(tree, "COMMIT")
    if os.path.isfile(marker):
        with open(marker, encoding="utf-8") as f:
            return f.read().strip() or None
    with contextlib.suppress(Exception):
        out = subprocess.run(["git", "-C", tree, "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10)
        if out.returncode == 0:
            return out.stdout.strip()
    return None


def run_baseline(args, budget_s: float) -> dict:
    """Part b's G=8 naive and shared_dense steps on the previous commit's tree (``--baseline``): this script in a
    child process whose ``vlm_r1``/``groundwork`` come from that tree (``GPU_CHECK_LIBRARY``), the same measurement
    (warm-up, ``--repeats`` timed steps, peak memory, MFU), no prefill and no profile. The measurement code here must
    therefore run on both trees: a new library API it calls is looked up, not assumed."""
    tree = os.path.abspath(args.baseline)
    if not os.path.isfile(os.path.join(tree, "vlm_r1", "__init__.py")):
        return {"tree": tree, "skipped": "no vlm_r1 package in the --baseline tree"}
    out = os.path.join(args.out, "baseline")
    cmd = [sys.executable, os.path.abspath(__file__), "--shape", args.shape, "--out", out, "--parts", "b"]
    cmd += ["--variants", "naive,shared_dense", "--no-prefill", "--no-profile", "--repeats", str(args.repeats)]
    cmd += ["--group", str(args.group), "--completion-tokens", str(args.completion_tokens), "--dtype", args.dtype]
    cmd += ["--width", str(args.width), "--height", str(args.height), "--seed", str(args.seed)]
    cmd += ["--budget-s", str(budget_s), "--peak-tflops", str(args.peak_tflops)]
    cmd += ["--freeze-vision" if args.freeze_vision else "--no-freeze-vision"]
    cmd += ["--device", args.device] if args.device else []
    env = {**os.environ, "GPU_CHECK_LIBRARY": tree}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (tree, os.environ.get("PYTHONPATH")) if p)
    log(f"baseline: {tree} (commit {tree_commit(tree)}), {budget_s:.0f} s left")
    t = time.perf_counter()
    try:
        proc = subprocess.run(cmd, env=env, timeout=max(1.0, budget_s), check=False)
    except subprocess.TimeoutExpired:
        return {"tree": tree, "commit": tree_commit(tree), "error": f"timed out after {budget_s:.0f} s"}
    found: dict = {"tree": tree, "commit": tree_commit(tree), "returncode": proc.returncode}
    found["wall_s"] = round(time.perf_counter() - t, 1)
    path = os.path.join(out, "gpu_check.json")
    if not os.path.isfile(path):
        return {**found, "error": "the child wrote no gpu_check.json"}
    with open(path, encoding="utf-8") as f:
        child = json.load(f)
    return {**found, "environment": child.get("environment"), "G8": (child.get("b") or {}).get("G8")}


def compare_baseline(after: dict, before: dict | None) -> dict:
    """Before (the previous commit) and after (this tree), part b's G=8 naive and shared_dense: median, min, max,
    spread of the timed steps, MFU and peak memory, and the speed-up."""
    out = {}
    for variant in ("naive", "shared_dense"):
        row = {}
        for when, cfg in (("before", before), ("after", after)):
            r = (cfg or {}).get(variant) or {}
            times = r.get("fwd_bwd_s_all")
            if not times:
                continue
            row[when] = {
                "median_s": r["fwd_bwd_s"],
                "min_s": min(times),
                "max_s": max(times),
                "spread_s": round(max(times) - min(times), 4),
                "runs": len(times),
                "mfu": r.get("mfu"),
                "peak_gib": r.get("peak_gib"),
            }
        if "before" in row and "after" in row:
            row["speedup"] = round(row["before"]["median_s"] / row["after"]["median_s"], 2)
        out[variant] = row
    return out


def main(argv=None) -> dict:
    import torch

    global T0  # --budget-s counts from this call, not from the import (a test suite imports the module long before)
    T0 = time.perf_counter()
    args = parse_args(argv)
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    dtype = getattr(torch, args.dtype)
    parts = {p.strip() for p in args.parts.split(",") if p.strip()}
    os.makedirs(args.out, exist_ok=True)
    result: dict = {"shape": args.shape, "args": vars(args), "environment": environment(device)}
    result["mfu_formula"] = {"formula": step_profile.FORMULA, "peak_flops": args.peak_tflops * 1e12}
    result["profile_categories"] = step_profile.DESCRIPTIONS
    log(f"environment: {result['environment']}")

    def left() -> float:
        return args.budget_s - (time.perf_counter() - T0)

    def save() -> None:
        result["wall_s"] = round(time.perf_counter() - T0, 1)
        write_atomic(os.path.join(args.out, "gpu_check.json"), json.dumps(result, indent=1, default=str) + "\n")
        write_atomic(os.path.join(args.out, "gpu_check.md"), markdown(result))

    if "a" in parts:
        try:
            result["a"] = part_a(args, device, dtype)
        except Exception as err:  # noqa: BLE001 - recorded
            result["a"] = _failure(err)
        log(f"part a: {json.dumps(result['a'], default=str)[:2000]}")
        _free(device)
        save()
    if parts & {"b", "c"}:
        from vlm_r1.modules import get_vlm_module

        module = get_vlm_module("qwen2_5_vl")
        try:
            model, result["model"] = load_model(args, device, dtype)
            log(f"model: {result['model']}")
        except Exception as err:  # noqa: BLE001 - recorded
            result["model"] = _failure(err)
            model = None
        variants = tuple(v.strip() for v in args.variants.split(",") if v.strip())
        if model is not None and "b" in parts:
            result["b"] = {}
            try:
                result["b"]["G8"] = measure_config(
                    args,
                    model,
                    module,
                    device,
                    dtype,
                    G=args.group,
                    width=args.width,
                    height=args.height,
                    max_pixels=GTA1_MAX_PIXELS,
                    variants=variants,
                    prefill=not args.no_prefill,
                    profile=args.profile,
                )
                frozen = [
                    r.get("vision_output_requires_grad") for r in result["b"]["G8"].values() if isinstance(r, dict)
                ]
                if args.freeze_vision and any(f is not None for f in frozen):
                    result["model"]["frozen_vision_graph"] = any(bool(f) for f in frozen)
            except Exception as err:  # noqa: BLE001 - recorded
                result["b"]["G8"] = _failure(err)
            save()
        if model is not None and "b" in parts and args.baseline:
            del model
            model = None
            _free(device)
            result["baseline"] = run_baseline(args, left() - 5)
            result["compare"] = compare_baseline(result["b"].get("G8") or {}, result["baseline"].get("G8"))
            log(f"baseline: {json.dumps(result['compare'])}")
            save()
            if "c" in parts:
                try:
                    model, _ = load_model(args, device, dtype)
                except Exception as err:  # noqa: BLE001 - recorded
                    result["c"] = {"rebuild": _failure(err)}
        if model is not None and "c" in parts:
            result["c"] = {}
            large = [
                ("G16", dict(G=2 * args.group, width=args.width, height=args.height, max_pixels=GTA1_MAX_PIXELS)),
                ("4k", dict(G=args.group, width=2 * args.width, height=2 * args.height, max_pixels=LARGE_MAX_PIXELS)),
            ]
            for name, spec in large:
                if left() < C_MIN_LEFT_S:
                    result["c"][name] = {"skipped": f"budget: {left():.0f} s left"}
                    log(f"part c {name}: skipped ({result['c'][name]['skipped']})")
                    continue
                try:
                    # one measured step each, no warm-up (the naive step alone takes minutes at 4k)
                    result["c"][name] = measure_config(
                        args,
                        model,
                        module,
                        device,
                        dtype,
                        **spec,
                        variants=("shared_dense", "naive"),
                        prefill=False,
                        warmup=False,
                        repeats=1,
                    )
                except Exception as err:  # noqa: BLE001 - recorded
                    result["c"][name] = _failure(err)
                save()
        del model
    save()
    print(markdown(result))
    return result


if __name__ == "__main__":
    main()
