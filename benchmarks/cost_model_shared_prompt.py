"""Cost model: GTA1's 7B GRPO recipe (250 steps x 128 prompts x 8 rollouts) in H100-hours, naive vs shared-prompt.

Token counts are what the trainer's ``shared_prompt/*`` metrics count (``vlm_r1.shared_prompt.token_counts``), taken
for the recipe's screenshots: image tokens from the processor's smart_resize at GTA1's pixel budget
(``groundwork.geometry.smart_resize``, factor 28, 3136..8847360 pixels), plus ``--text-tokens`` of system prompt,
instruction and chat template. FLOPs per step count the language model (2N per token forward, 6N forward+backward,
plus the attention score/value products, 2*layers*d*L^2 forward per sequence), the frozen vision tower (2*Nv per
patch, forward only: GTA1 freezes it) and decoding (2N per generated token). Every assumption is a flag and is printed.

**Decoding is memory-bound** (issue 29), so its time is not FLOPs at an MFU: each decoding step of a ``generate`` call
reads every weight of the language model once (the decoder layers, final norm and LM head: ``--llm-params`` x 2 bytes
in bf16; the input embedding is a row lookup) and every row's KV cache (``layers x 2 x kv_dim x 2`` bytes per cached
token), at the card's HBM bandwidth (``--hbm-tb-s``: 3.35 TB/s for an H100 SXM,
https://www.nvidia.com/en-us/data-center/h100/ ; 4.8 TB/s for an H200, https://www.nvidia.com/en-us/data-center/h200/).
A call of R rows, prompt P, completion C (the prefill gives the first token, then C - 1 steps; step t reads P + t
cached tokens per row) takes :func:`decode_seconds` = ``((C-1) W + R kv ((C-1) P + C (C-1) / 2)) / B``. A step of U
prompts x G rollouts makes ``U G / R`` such calls on one GPU (``--decode-rows``: 128 = GTA1-7B's per-device batch 8 x
steps_per_generation 16). Shared-prompt prefill repeats the cache for every row (HF ``generate`` reads each row's
cache), so decoding costs the same naive and shared.

    python benchmarks/cost_model_shared_prompt.py                 # table + JSON (benchmarks/results/cost_model.json)
    python benchmarks/cost_model_shared_prompt.py --width 3840 --height 2160
    python benchmarks/cost_model_shared_prompt.py --measured benchmarks/results/gpu_check_h200_run2.json
    python benchmarks/cost_model_shared_prompt.py --naive-step-s 18.2 --shared-step-s 2.39 --naive-prefill-s 3.25 \
        --shared-prefill-s 0.34 --measured-on "H200, gpu_check run 2"

**Measured inputs** (``--measured`` reads a ``benchmarks/gpu_check.py`` JSON: part b's G=8 group at the 7B shape; or
give the seconds as flags): seconds of one group's policy forward+backward and of its generation prefill, naive and
shared, at the measured shape. The measured hours are ``steps x prompts x seconds`` per part, in GPU-hours (one
group per GPU at a time, as the check ran it); decoding was not measured and is taken from the memory-bound model
above (labelled). A GPU check on an H200 counts as H100 time: the two have the same dense bf16 peak (NVIDIA datasheets);
the H200's faster memory favours memory-bound phases, so H100 hours may be somewhat higher. ``--measured-tokens-per-s``
(LLM tokens per second of the policy pass) converts the recipe's tokens to hours when only a throughput is known.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from groundwork.geometry import smart_resize  # noqa: E402

H100_BF16_DENSE = 989e12  # FLOP/s, NVIDIA H100 SXM datasheet (dense bf16)
#: HBM bandwidth, bytes/s: NVIDIA H100 SXM datasheet (https://www.nvidia.com/en-us/data-center/h100/: 3.35 TB/s) and
#: H200 (https://www.nvidia.com/en-us/data-center/h200/: 4.8 TB/s)
HBM_BYTES_PER_S = {"H100 SXM": 3.35e12, "H200": 4.8e12}


def decode_seconds(
    weight_bytes: float, kv_bytes_per_token: float, rows: int, prompt: int, completion: int, hbm_bytes_per_s: float
) -> float:
    """Seconds of one memory-bound ``generate`` call (module docstring): ``C - 1`` decoding steps after the prefill,
    step ``t`` reading the weights once and ``P + t`` cached tokens of each of ``rows`` rows."""
    steps = max(0, completion - 1)
    cached = steps * prompt + completion * steps / 2  # sum over t = 1 .. C-1 of (P + t)
    return (steps * weight_bytes + rows * kv_bytes_per_token * cached) / hbm_bytes_per_s


def decode_hours(a, P: int, C: int, groups: int) -> dict:
    """GPU-hours of the recipe's decoding, memory-bound (the same naive and shared), with the formula's inputs."""
    weight_bytes = a.llm_params * 2
    kv_token = a.layers * 2 * a.kv_dim * 2
    call_s = decode_seconds(weight_bytes, kv_token, a.decode_rows, P, C, a.hbm_tb_s * 1e12)
    calls = groups * a.G / a.decode_rows
    return {
        "hours": calls * call_s / 3600,
        "seconds_per_call": call_s,
        "calls": calls,
        "weight_bytes": weight_bytes,
        "kv_bytes_per_token": kv_token,
        "rows_per_call": a.decode_rows,
        "hbm_bytes_per_s": a.hbm_tb_s * 1e12,
        "formula": "calls x ((C-1) x W + R x kv x ((C-1) x P + C x (C-1) / 2)) / HBM; W = llm_params x 2 B, kv = "
        "layers x 2 x kv_dim x 2 B per token, R rows per generate call, calls = steps x prompts x G / R",
    }


def step_flops(P: int, C: int, G: int, U: int, patches: int, a) -> dict:
    """FLOPs of one GRPO step (U prompts x G rollouts, prompt P tokens, completion C tokens), naive and shared."""
    N, layers, d, Nv = a.llm_params, a.layers, a.hidden, a.vision_params
    attn_fwd = lambda L: 2 * layers * d * L * L  # noqa: E731  (QK^T and AV, causal, per sequence)
    decode = U * G * (2 * N * C + 4 * layers * d * P * C)  # each generated token reads the P-token cache
    naive = {
        "prefill": U * G * (2 * N * P + attn_fwd(P)),
        "decode": decode,
        "vision": 2 * U * G * 2 * Nv * patches,  # generation + policy pass, one per rollout
        "policy": U * G * (6 * N * (P + C) + 3 * attn_fwd(P + C)),
    }
    suffix = G * (C + 1)  # shared row: prompt once, then G suffixes of (last prompt token + completion)
    shared = {
        "prefill": U * (2 * N * P + attn_fwd(P)),
        "decode": decode,
        "vision": 2 * U * 2 * Nv * patches,
        "policy": U * (6 * N * (P + suffix) + 3 * (attn_fwd(P) + 4 * layers * d * P * suffix)),
    }
    return {"naive": naive, "shared": shared}


def _from_gpu_check(path: str) -> dict:
    """Seconds per group from a gpu_check JSON (part b, the G=8 group): policy fwd+bwd and prefill, naive and
    shared (dense mask), with the shape they were measured at."""
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    b = (data.get("b") or {}).get("G8") or {}
    out = {"inputs": b.get("inputs"), "device": (data.get("environment") or {}).get("gpu"), "source": path}
    for variant, key in (("naive", "naive"), ("shared", "shared_dense")):
        out[f"{variant}_step_s"] = (b.get(key) or {}).get("fwd_bwd_s")
        out[f"{variant}_prefill_s"] = ((b.get("prefill") or {}).get(variant) or {}).get("prefill_s")
    return out


def measured_hours(a, decode: float, naive_tokens: int, shared_tokens: int) -> dict | None:
    """H100-hours of the recipe from measured seconds per group (see the module docstring), or None without any."""
    seconds = {k: getattr(a, k) for k in ("naive_step_s", "shared_step_s", "naive_prefill_s", "shared_prefill_s")}
    source = {"measured_on": a.measured_on, "source": "flags"}
    if a.measured:
        found = _from_gpu_check(a.measured)
        for k in seconds:
            if seconds[k] is None:
                seconds[k] = found.get(k)
        source = {
            "measured_on": a.measured_on or f"{found['device']} ({a.measured})",
            "source": a.measured,
            "inputs": found["inputs"],
        }
    groups = a.steps * a.prompts
    if a.measured_tokens_per_s:
        per_group = {"naive": naive_tokens / a.prompts, "shared": shared_tokens / a.prompts}
        for v in ("naive", "shared"):
            if seconds[f"{v}_step_s"] is None:
                seconds[f"{v}_step_s"] = per_group[v] / a.measured_tokens_per_s
    if all(v is None for v in seconds.values()):
        return None
    hours = {}
    for v in ("naive", "shared"):
        policy = (seconds[f"{v}_step_s"] or 0.0) * groups / 3600
        prefill = (seconds[f"{v}_prefill_s"] or 0.0) * groups / 3600
        hours[v] = {"policy": policy, "prefill": prefill, "decode (memory-bound)": decode}
        hours[v]["total"] = policy + prefill + decode
    return {**source, "seconds_per_group": seconds, "groups": groups, "hours": hours}


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--width", type=int, default=1920, help="screenshot width in pixels [1920]")
    ap.add_argument("--height", type=int, default=1080, help="screenshot height in pixels [1080]")
    ap.add_argument("--max-pixels", type=int, default=8847360, help="GTA1 README --max_pixels (4096*2160)")
    ap.add_argument(
        "--text-tokens",
        type=int,
        default=110,
        help="system prompt + instruction + chat template tokens per prompt (GTA1's ~60-word system "
        "prompt; an estimate: the real Qwen tokenizer cannot be downloaded here) [110]",
    )
    ap.add_argument("--completion-tokens", type=int, default=20, help="tokens per completion, '(x,y)' + EOS [20]")
    ap.add_argument("--steps", type=int, default=250)
    ap.add_argument("--prompts", type=int, default=128, help="prompts per step [128]")
    ap.add_argument("--G", type=int, default=8, help="rollouts per prompt [8]")
    ap.add_argument(
        "--llm-params",
        type=float,
        default=7.07e9,
        help="Qwen2.5-VL-7B language model parameters without the input embedding table [7.07e9]",
    )
    ap.add_argument("--layers", type=int, default=28)
    ap.add_argument("--hidden", type=int, default=3584)
    ap.add_argument("--kv-dim", type=int, default=512, help="key/value width: kv_heads x head_dim [512: 4 x 128]")
    ap.add_argument(
        "--hbm-tb-s",
        type=float,
        default=HBM_BYTES_PER_S["H100 SXM"] / 1e12,
        help="HBM bandwidth in TB/s for decoding [3.35: H100 SXM; H200: 4.8]",
    )
    ap.add_argument(
        "--decode-rows",
        type=int,
        default=128,
        help="rows of one generate call on one GPU [128: GTA1-7B per-device batch 8 x steps_per_generation 16]",
    )
    ap.add_argument("--vision-params", type=float, default=0.67e9, help="Qwen2.5-VL vision tower [0.67e9]")
    ap.add_argument("--mfu", type=float, default=0.30, help="model FLOP utilisation assumed for the compute [0.30]")
    ap.add_argument("--gta1-hours", type=float, default=800.0, help="GTA1-7B's reported cost [800]")
    ap.add_argument("--measured", default=None, help="a benchmarks/gpu_check.py JSON: take the seconds below from it")
    ap.add_argument("--naive-step-s", type=float, default=None, help="measured naive policy fwd+bwd s per group")
    ap.add_argument("--shared-step-s", type=float, default=None, help="measured shared policy fwd+bwd s per group")
    ap.add_argument("--naive-prefill-s", type=float, default=None, help="measured naive generation prefill s per group")
    ap.add_argument("--shared-prefill-s", type=float, default=None, help="measured shared prefill s per group")
    ap.add_argument(
        "--measured-tokens-per-s",
        type=float,
        default=None,
        help="measured LLM tokens/s of the policy pass (used for a part whose seconds are not given)",
    )
    ap.add_argument("--measured-on", default=None, help="where the measurement ran (printed and recorded)")
    ap.add_argument(
        "--json-out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", "cost_model.json")
    )
    a = ap.parse_args(argv)

    h, w = smart_resize(a.height, a.width, factor=28, min_pixels=3136, max_pixels=a.max_pixels)
    image_tokens = (h // 28) * (w // 28)
    patches = 4 * image_tokens  # 14x14 patches, 2x2 merged into one LLM token
    P, C, G, U = image_tokens + a.text_tokens, a.completion_tokens, a.G, a.prompts
    naive_tokens = U * G * (P + C)
    shared_tokens = U * (P - 1 + G * (C + 1))
    flops = step_flops(P, C, G, U, patches, a)
    total = {k: sum(v.values()) * a.steps for k, v in flops.items()}
    decoding = decode_hours(a, P, C, a.steps * a.prompts)
    # compute-bound parts at the MFU; decoding memory-bound (module docstring)
    hours = {
        k: (total[k] - v["decode"] * a.steps) / (H100_BF16_DENSE * a.mfu) / 3600 + decoding["hours"]
        for k, v in flops.items()
    }
    ratio = total["naive"] / total["shared"]
    implied_mfu = total["naive"] / (a.gta1_hours * 3600 * H100_BF16_DENSE)
    decode_share = flops["naive"]["decode"] / sum(flops["naive"].values())
    result = {
        "assumptions": {
            k: getattr(a, k)
            for k in (
                "width",
                "height",
                "max_pixels",
                "text_tokens",
                "completion_tokens",
                "steps",
                "prompts",
                "G",
                "llm_params",
                "layers",
                "hidden",
                "vision_params",
                "mfu",
                "gta1_hours",
            )
        },
        "resized": [w, h],
        "image_tokens": image_tokens,
        "prompt_tokens": P,
        "vision_patches_per_screenshot": patches,
        "llm_tokens_per_step": {"naive": naive_tokens, "shared": shared_tokens, "ratio": naive_tokens / shared_tokens},
        "flops_per_step": flops,
        "flops_total": total,
        "flop_ratio": ratio,
        "h100_hours_at_mfu": hours,
        "gta1_implied_utilisation": implied_mfu,
        "shared_hours_at_gta1_utilisation": a.gta1_hours / ratio,
        "shared_hours_if_decode_share_unchanged": {f: a.gta1_hours * (f + (1 - f) / ratio) for f in (0.25, 0.5)},
        "decode_flop_share_naive": decode_share,
        "decode_memory_bound": decoding,
    }
    print(
        f"screenshot {a.width}x{a.height} -> {w}x{h}: {image_tokens} image tokens, prompt {P} tokens, {patches} "
        f"vision patches; {U} prompts x {G} rollouts x {a.steps} steps, completions {C} tokens"
    )
    print("| | naive | shared | ratio |\n|---|---:|---:|---:|")
    print(f"| LLM tokens / step | {naive_tokens:,} | {shared_tokens:,} | {naive_tokens / shared_tokens:.2f}x |")
    for part in ("prefill", "vision", "policy", "decode"):
        n, s = flops["naive"][part], flops["shared"][part]
        print(f"| {part} PFLOP / step | {n / 1e15:,.1f} | {s / 1e15:,.1f} | {n / s:.2f}x |")
    print(f"| total EFLOP (250 steps) | {total['naive'] / 1e18:,.1f} | {total['shared'] / 1e18:,.1f} | {ratio:.2f}x |")
    print(
        f"| H100-hours (compute at MFU {a.mfu:.0%}, decoding memory-bound) | {hours['naive']:,.0f} | "
        f"{hours['shared']:,.0f} | |"
    )
    print(
        f"decoding, memory-bound: {decoding['calls']:,.0f} generate calls of {a.decode_rows} rows x "
        f"{decoding['seconds_per_call']:.3f} s at {a.hbm_tb_s:g} TB/s = {decoding['hours']:.2f} GPU-hours"
    )
    print(
        f"GTA1's {a.gta1_hours:.0f} H100-hours on these FLOPs = {implied_mfu:.1%} of bf16 peak; at that utilisation "
        f"shared needs {a.gta1_hours / ratio:,.0f} H100-hours; if a fraction f of GTA1's time was memory-bound "
        f"decoding (not reduced by sharing): f=0.25 -> {result['shared_hours_if_decode_share_unchanged'][0.25]:,.0f}"
        f" h, f=0.5 -> {result['shared_hours_if_decode_share_unchanged'][0.5]:,.0f} h"
    )
    measured = measured_hours(a, decoding["hours"], naive_tokens, shared_tokens)
    if measured:
        result["measured"] = measured
        print(f"\nMeasured ({measured['measured_on']}; per group of {G} at the measured shape):")
        print("| H100-hours (measured) | naive | shared | ratio |\n|---|---:|---:|---:|")
        for part in ("policy", "prefill", "decode (memory-bound)", "total"):
            n, sh = measured["hours"]["naive"][part], measured["hours"]["shared"][part]
            print(f"| {part} | {n:,.1f} | {sh:,.1f} | {n / sh if sh else float('nan'):.2f}x |")
    os.makedirs(os.path.dirname(a.json_out), exist_ok=True)
    with open(a.json_out, "w", encoding="utf-8") as f:
        json.dump(result, f, indent=2, allow_nan=False)
    print(f"-> {a.json_out}")
    return result


if __name__ == "__main__":
    main()
