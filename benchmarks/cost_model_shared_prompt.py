"""Cost model: GTA1's 7B GRPO recipe (250 steps x 128 prompts x 8 rollouts) in H100-hours, naive vs shared-prompt.

Token counts are what the trainer's ``shared_prompt/*`` metrics count (``vlm_r1.shared_prompt.token_counts``), taken
for the recipe's screenshots: image tokens from the processor's smart_resize at GTA1's pixel budget
(``groundwork.geometry.smart_resize``, factor 28, 3136..8847360 pixels), plus ``--text-tokens`` of system prompt,
instruction and chat template. FLOPs per step count the language model (2N per token forward, 6N forward+backward,
plus the attention score/value products, 2*layers*d*L^2 forward per sequence), the frozen vision tower (2*Nv per
patch, forward only: GTA1 freezes it) and decoding (2N per generated token). Every assumption is a flag and is printed.

    python benchmarks/cost_model_shared_prompt.py                 # table + JSON (benchmarks/results/cost_model.json)
    python benchmarks/cost_model_shared_prompt.py --width 3840 --height 2160
    python benchmarks/cost_model_shared_prompt.py --measured benchmarks/results/gpu_check_h200_run2.json
    python benchmarks/cost_model_shared_prompt.py --naive-step-s 18.2 --shared-step-s 2.39 --naive-prefill-s 3.25 \
        --shared-prefill-s 0.34 --measured-on "H200, gpu_check run 2"

**Measured inputs** (``--measured`` reads a ``benchmarks/gpu_check.py`` JSON: part b's G=8 group at the 7B shape; or
give the seconds as flags): seconds of one group's policy forward+backward and of its generation prefill, naive and
shared, at the measured shape. The measured hours are ``steps x prompts x seconds`` per part, in GPU-hours (one
group per GPU at a time, as the check ran it); decoding was not measured and is taken from the FLOP model at ``--mfu``
(labelled). A GPU check on an H200 counts as H100 time: the two have the same dense bf16 peak (NVIDIA datasheets);
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


def measured_hours(a, flops: dict, naive_tokens: int, shared_tokens: int) -> dict | None:
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
        decode = flops[v]["decode"] * a.steps / (H100_BF16_DENSE * a.mfu) / 3600
        policy = (seconds[f"{v}_step_s"] or 0.0) * groups / 3600
        prefill = (seconds[f"{v}_prefill_s"] or 0.0) * groups / 3600
        hours[v] = {"policy": policy, "prefill": prefill, "decode (FLOP model)": decode}
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
    hours = {k: v / (H100_BF16_DENSE * a.mfu) / 3600 for k, v in total.items()}
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
    print(f"| H100-hours at MFU {a.mfu:.0%} | {hours['naive']:,.0f} | {hours['shared']:,.0f} | |")
    print(
        f"GTA1's {a.gta1_hours:.0f} H100-hours on these FLOPs = {implied_mfu:.1%} of bf16 peak; at that utilisation "
        f"shared needs {a.gta1_hours / ratio:,.0f} H100-hours; if a fraction f of GTA1's time was memory-bound "
        f"decoding (not reduced by sharing): f=0.25 -> {result['shared_hours_if_decode_share_unchanged'][0.25]:,.0f}"
        f" h, f=0.5 -> {result['shared_hours_if_decode_share_unchanged'][0.5]:,.0f} h"
    )
    measured = measured_hours(a, flops, naive_tokens, shared_tokens)
    if measured:
        result["measured"] = measured
        print(f"\nMeasured ({measured['measured_on']}; per group of {G} at the measured shape):")
        print("| H100-hours (measured) | naive | shared | ratio |\n|---|---:|---:|---:|")
        for part in ("policy", "prefill", "decode (FLOP model)", "total"):
            n, sh = measured["hours"]["naive"][part], measured["hours"]["shared"][part]
            print(f"| {part} | {n:,.1f} | {sh:,.1f} | {n / sh if sh else float('nan'):.2f}x |")
    os.makedirs(os.path.dirname(a.json_out), exist_ok=True)
    with open(a.json_out, "w", encoding="utf-8") as f:
        json.dump(result, f, indent=2, allow_nan=False)
    print(f"-> {a.json_out}")
    return result


if __name__ == "__main__":
    main()
