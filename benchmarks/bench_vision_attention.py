"""The vision tower's window attention: transformers' per-window loop vs :mod:`vlm_r1.vision_attention`, on CPU.

    .venv/bin/python benchmarks/bench_vision_attention.py            # 1080p, 7 repeats, ~1-2 min on 2 cores
    .venv/bin/python benchmarks/bench_vision_attention.py --quick    # smoke: a 616x448 image, 2 repeats
    python benchmarks/bench_vision_attention.py --device cuda --dtype bfloat16 --out vision_attention_gpu.json

Shape: one windowed block of the Qwen2.5-VL-7B vision tower (https://huggingface.co/Qwen/Qwen2.5-VL-7B-Instruct/blob/main/
config.json ``vision_config``: hidden 1280, MLP 3420, 16 heads of 80, patch 14, spatial merge 2, window 112), random
weights, fp32. Input: the windows of a 1920 x 1080 screenshot as smart_resize sends it (1932 x 1092: 78 x 138 patches,
10,764 tokens, 180 windows; ``get_vision_window_index``), hidden states and rotary embeddings in the tower's window
order. Two levels, each variant alternated with the others ``--repeats`` times (machine load drifts alike), median:

* **op**: the attention alone on q/k/v in the layout the vision attention hands its interface. ``loop`` is
  transformers' branch for non-flash implementations (``modeling_qwen2_5_vl.py:310-329``: split by window, one
  ``sdpa_attention_forward`` per window, concatenated); the others are backends of
  :func:`vlm_r1.vision_attention.packed_attention`: ``runs`` and ``padded`` on CPU; ``padded``, ``torch_varlen`` (if
  this torch has it) and ``flash_attn`` (if installed) on CUDA. Forward, and forward+backward (a trained vision tower).
* **layer**: the block's attention layer (``Qwen2_5_VLVisionAttention``: qkv projection, rotary, attention, output
  projection), forward, with ``sdpa`` (the loop) against :data:`vlm_r1.vision_attention.VISION_VARLEN`.

Each variant's max abs difference from the loop in the same dtype is recorded (in bf16 also the loop's own
difference from the fp32 loop: the rounding floor). On CUDA every timing is synchronised. Reported per case: median and
minimum wall seconds, median CPU seconds of the process (on a CPU shared with other jobs, wall time is CPU time plus
waiting, so CPU seconds compare better), and the CPU share (CPU time / (wall x threads), ~1 on an idle machine). The
machine and its load go into the JSON (``--out``). Nothing asserts the numbers.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO not in sys.path:
    sys.path.insert(0, REPO)
DEFAULT_OUT = os.path.join(REPO, "benchmarks", "results", "vision_attention_cpu.json")
sys.path.insert(0, os.path.join(REPO, "benchmarks"))
import gpu_check  # noqa: E402  (the 7B shape: one home, gpu_check.SHAPES)

VISION_7B = {**gpu_check.SHAPES["7b"]["vision"], "depth": 1, "fullatt_block_indexes": []}  # one windowed block


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def timed(fn, sync) -> tuple[float, float]:
    """(wall seconds, CPU seconds of this process) of one call."""
    sync()
    c0, t0 = time.process_time(), time.perf_counter()
    fn()
    sync()
    return time.perf_counter() - t0, time.process_time() - c0


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--width", type=int, default=1932, help="resized width in pixels (multiple of 28)")
    parser.add_argument("--height", type=int, default=1092, help="resized height in pixels (multiple of 28)")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    parser.add_argument("--quick", action="store_true", help="616x448, 2 repeats")
    parser.add_argument("--out", default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    if args.quick:
        args.width, args.height, args.repeats = 616, 448, 2

    import torch
    import transformers
    from transformers.integrations.sdpa_attention import sdpa_attention_forward
    from transformers.models.qwen2_5_vl.configuration_qwen2_5_vl import Qwen2_5_VLVisionConfig
    from transformers.models.qwen2_5_vl.modeling_qwen2_5_vl import (
        Qwen2_5_VLVisionAttention,
        Qwen2_5_VLVisionRotaryEmbedding,
    )
    from transformers.vision_utils import get_vision_position_ids, get_vision_window_index

    from vlm_r1 import vision_attention as va

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    device, dtype = torch.device(args.device), getattr(torch, args.dtype)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    grid = torch.tensor([[1, args.height // 14, args.width // 14]])
    window_index, cu = get_vision_window_index(grid, spatial_merge_size=2, window_size=112, patch_size=14)
    total, windows = int(grid.prod()), cu.numel() - 1
    config = Qwen2_5_VLVisionConfig(**VISION_7B)
    config._attn_implementation = "sdpa"
    attn = Qwen2_5_VLVisionAttention(config).eval()
    for p in attn.parameters():
        torch.nn.init.normal_(p, std=0.02)
    attn.to(device=device, dtype=dtype)
    heads, head_dim = attn.num_heads, attn.head_dim

    def window_order(t):
        return t.reshape(total // 4, 4, -1)[window_index].reshape(total, -1)

    hidden = torch.randn(total, 1280)
    cos, sin = Qwen2_5_VLVisionRotaryEmbedding(config)(hidden, get_vision_position_ids(grid, 2))
    hidden, rope = window_order(hidden).to(device, dtype), (window_order(cos).to(device), window_order(sin).to(device))
    cu = cu.to(device)

    # q/k/v as the vision attention hands them to its interface (modeling_qwen2_5_vl.py:276-285)
    qkv = torch.randn(total, 3, heads, head_dim).permute(1, 0, 2, 3)
    q32 = [t.transpose(0, 1).unsqueeze(0).to(device) for t in (qkv[0].contiguous(), qkv[1].contiguous(), qkv[2])]
    qkv = qkv.to(device, dtype)
    q, k, v = (t.transpose(0, 1).unsqueeze(0) for t in (qkv[0].contiguous(), qkv[1].contiguous(), qkv[2]))
    scale = head_dim**-0.5
    lengths = (cu[1:] - cu[:-1]).tolist()

    class _Module(torch.nn.Module):
        num_key_value_groups = 1
        is_causal = False

    module = _Module()

    def loop(q, k, v):
        splits = [torch.split(t, lengths, dim=2) for t in (q, k, v)]
        outs = [
            sdpa_attention_forward(module, a, b, c, None, scaling=scale, is_causal=False)[0]
            for a, b, c in zip(*splits, strict=True)
        ]
        return torch.cat(outs, dim=1)[0]

    backends = ["runs", "padded"] if device.type == "cpu" else ["padded"]
    if device.type == "cuda" and dtype != torch.float32:
        backends += ["torch_varlen"] if va._torch_varlen_fits(device, head_dim) else []
        backends += ["flash_attn"] if va.flash_attn_varlen() is not None else []
    op = {"loop": loop}
    for name in backends:
        op[name] = lambda q, k, v, name=name: va.packed_attention(q, k, v, cu, max(lengths), scale=scale, backend=name)
    leaves = [t.detach().clone().requires_grad_(True) for t in (q, k, v)]
    weight = torch.randn(total, heads, head_dim, device=device, dtype=dtype)

    def fwd_bwd(fn):
        def run():
            for t in leaves:
                t.grad = None
            (fn(*leaves) * weight).sum().backward()

        return run

    va.register_vision_varlen()

    def layer(implementation, backend="auto"):
        def run():
            config._attn_implementation = implementation
            setattr(config, va._BACKEND_ATTR, backend)
            with torch.no_grad():
                return attn(hidden, cu_seqlens=cu, position_embeddings=rope)

        return run

    cases = {}
    with torch.no_grad():
        ref = loop(q, k, v)
        floor = float((ref.float() - loop(*q32)).abs().max()) if dtype != torch.float32 else 0.0
        for name, fn in op.items():
            cases[f"op_fwd_{name}"] = {
                "fn": lambda fn=fn: fn(q, k, v),
                "diff": (fn(q, k, v).float() - ref.float()).abs().max(),
            }
    for name, fn in op.items():
        cases[f"op_fwd_bwd_{name}"] = {"fn": fwd_bwd(fn)}
    layer_ref = layer("sdpa")()
    for name in ["loop", *backends]:
        fn = layer("sdpa") if name == "loop" else layer(va.VISION_VARLEN, name)
        cases[f"layer_fwd_{name}"] = {"fn": fn, "diff": (fn().float() - layer_ref.float()).abs().max()}

    for case in cases.values():  # warm-up
        case["fn"]()
    load_start = os.getloadavg()[0]
    samples = {name: [] for name in cases}
    for _ in range(args.repeats):
        for name, case in cases.items():
            samples[name].append(timed(case["fn"], sync))
    load_end = os.getloadavg()[0]

    results = {}
    for name, case in cases.items():
        walls, cpus = [w for w, _ in samples[name]], [c for _, c in samples[name]]
        results[name] = {
            "median_s": round(statistics.median(walls), 4),
            "min_s": round(min(walls), 4),
            "all_s": [round(w, 4) for w in walls],
            "median_cpu_s": round(statistics.median(cpus), 4),
            "cpu_share": round(statistics.median(c / (w * args.threads) for w, c in samples[name]), 3),
        }
        if "diff" in case:
            results[name]["max_abs_diff_vs_loop"] = float(case["diff"])
    runs = len(va._runs(cu))
    report = {
        "benchmark": "Qwen2.5-VL vision window attention: transformers' per-window loop vs vlm_r1.vision_attention",
        "settings": {
            "shape": "one windowed block of Qwen2.5-VL-7B's vision tower (hidden 1280, 16 heads x 80, window 112)",
            "image_wh": [args.width, args.height],
            "tokens": total,
            "windows": windows,
            "calls_per_layer": {"loop": windows, "runs": runs, "padded": 1, "torch_varlen": 1, "flash_attn": 1},
            "device": str(device),
            "auto_backend": va.choose_backend(device, dtype, "auto", head_dim),
            "dtype": args.dtype,
            "loop_vs_fp32_loop_max_abs_diff": floor,
            "repeats": args.repeats,
            "weights": "random, normal(0, 0.02)",
        },
        "machine": {
            "cpu": cpu_model(),
            "gpu": torch.cuda.get_device_name(device) if device.type == "cuda" else None,
            "cpu_count": os.cpu_count(),
            "torch_threads": args.threads,
            "loadavg_1min_start_end": [round(load_start, 2), round(load_end, 2)],
            "python": platform.python_version(),
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            "platform": platform.platform(),
        },
        "results": results,
    }
    print(
        f"{args.width}x{args.height}: {total} tokens, {windows} windows; runs: {runs} calls; "
        f"{report['machine']['gpu'] or report['machine']['cpu']}, {args.dtype}, {args.threads} threads, "
        f"load {load_start:.1f}->{load_end:.1f}"
    )
    print(f"{'case':<22}{'median s':>10}{'min s':>10}{'CPU s':>10}{'cpu share':>11}{'max |diff|':>12}")
    for name, r in results.items():
        diff = r.get("max_abs_diff_vs_loop")
        print(
            f"{name:<22}{r['median_s']:>10.4f}{r['min_s']:>10.4f}{r['median_cpu_s']:>10.4f}{r['cpu_share']:>11.2f}"
            f"{'' if diff is None else f'{diff:.2e}':>12}"
        )
    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w", encoding="utf-8") as f:
            json.dump(report, f, indent=2)
            f.write("\n")
    return report


if __name__ == "__main__":
    main()
