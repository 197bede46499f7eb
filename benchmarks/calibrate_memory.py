"""Calibrate the memory estimator (``gui_grounding.ops.memory``) against a GPU check (``benchmarks/gpu_check.py``).

    python benchmarks/calibrate_memory.py benchmarks/results/gpu_check_h200_run3.json   # writes memory_calibration.json

The GPU check measures ``torch.cuda.max_memory_allocated`` over one forward+backward of one group of the 7B shape, on
one GPU, without an optimizer or DeepSpeed, and with no gradients at the start (the weights alone). So the
estimator's prediction for the same shape is its training phase minus the parts the check does not have: parameters +
gradients + activations (the checkpointed hidden states and the largest transient). The optimizer states, the
ZeRO/DDP buffers and the fixed overhead are left out. The allocator's peak excludes the CUDA context and the cached
but unallocated blocks.

The activation factor is ``(measured - parameters - gradients) / predicted activations`` of the calibration case,
part b's naive group (the GTA1 shape: G=8, 1080p, vision frozen). Every other case of the file is compared too, with
the factor applied, and written next to it, so the file shows how far the one factor carries. The fixed overhead
(CUDA context, NCCL, fragmentation; not measured by the check) is kept from the existing file, labelled as assumed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO not in sys.path:
    sys.path.insert(0, REPO)

from gui_grounding.ops import memory as me  # noqa: E402
from gui_grounding.ops.memory_calibration import Calibration  # noqa: E402
from gui_grounding.ops.memory_shapes import QWEN2_5_VL_SHAPES  # noqa: E402

OUT = os.path.join(REPO, "benchmarks", "results", "memory_calibration.json")
CALIBRATION_CASE = ("b", "G8", "naive")
VARIANTS = {"naive": False, "shared_dense": True, "shared_split": True}


def predicted_parts(inputs: dict, shared: bool, train_vision: bool) -> dict:
    """GiB of the estimator's uncalibrated training-phase parts that the GPU check also holds, for its shape."""
    run = me.RunShape(
        world_size=1,
        zero=me.ZeroConfig(),
        per_device_batch=inputs["G"],
        num_generations=inputs["G"],
        prompt_tokens=inputs["prompt_tokens"],
        image_tokens=inputs["image_tokens"],
        completion_tokens=inputs["C"],
        shared_prompt=shared,
        train_vision=train_vision,
    )
    est = me.estimate(QWEN2_5_VL_SHAPES["Qwen2.5-VL-7B"], run, Calibration())
    parts = {p["name"]: p["gib"] for p in est.to_dict()["phases"]["training"]["parts"]}
    return {
        "resident_gib": parts["parameters"] + parts["gradients"],
        "activations_gib": sum(v for k, v in parts.items() if k.startswith("activations")),
    }


def cases(check: dict) -> list[dict]:
    """Every (part, configuration, variant) of the check with a measured peak, and the uncalibrated prediction."""
    train_vision = not check.get("model", {}).get("vision_frozen", False)
    out = []
    for part in ("b", "c"):
        for name, cfg in (check.get(part) or {}).items():
            for variant, shared in VARIANTS.items():
                r = cfg.get(variant) if isinstance(cfg, dict) else None
                if not isinstance(r, dict) or r.get("peak_gib") is None:
                    continue
                p = predicted_parts(cfg["inputs"], shared, train_vision)
                out.append({"case": (part, name, variant), "measured_peak_gib": r["peak_gib"], **p})
    return out


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("gpu_check", help="a benchmarks/gpu_check.py JSON with part b (and c)")
    ap.add_argument("--out", default=OUT, help=f"calibration JSON to write [{OUT}]")
    args = ap.parse_args(argv)
    with open(args.gpu_check, encoding="utf-8") as f:
        check = json.load(f)
    rows = cases(check)
    calib = next((r for r in rows if r["case"] == CALIBRATION_CASE), None)
    if calib is None:
        raise SystemExit(f"{args.gpu_check}: no measured {'/'.join(CALIBRATION_CASE)} case to calibrate on")
    factor = (calib["measured_peak_gib"] - calib["resident_gib"]) / calib["activations_gib"]
    previous = {}
    if os.path.exists(args.out):
        with open(args.out, encoding="utf-8") as f:
            previous = json.load(f)
    env = check["environment"]
    device = f"{env.get('gpu', env.get('device'))} (torch {env['torch']}, transformers {env['transformers']})"
    table = []
    for r in rows:
        predicted = r["resident_gib"] + factor * r["activations_gib"]
        table.append(
            {
                "case": "/".join(r["case"]),
                "measured_peak_gib": round(r["measured_peak_gib"], 3),
                "predicted_peak_gib": round(predicted, 3),
                "uncalibrated_predicted_peak_gib": round(r["resident_gib"] + r["activations_gib"], 3),
                "measured_over_predicted": round(r["measured_peak_gib"] / predicted, 3),
            }
        )
    result = {
        "label": f"GPU measurement: {env.get('gpu')} (benchmarks/gpu_check.py, {os.path.basename(args.gpu_check)})",
        "activation_factor": round(factor, 4),
        "overhead_gib": previous.get("overhead_gib", 3.25),
        "overhead_parts": previous.get("overhead_parts"),
        "overhead_source": previous.get(
            "overhead_source", "assumed: CUDA context, NCCL buffers and allocator fragmentation (not measured)"
        ),
        "measured_peak_gib": round(calib["measured_peak_gib"], 3),
        "predicted_peak_gib": round(calib["resident_gib"] + calib["activations_gib"], 3),
        "measurement": (
            "torch.cuda.max_memory_allocated over one forward+backward of one GRPO group, Qwen2.5-VL-7B shape, bf16, "
            "gradient checkpointing, TRL's fused LM head, one GPU, no optimizer or DeepSpeed, starting from the "
            f"weights alone; case {'/'.join(CALIBRATION_CASE)}: G={check['b']['G8']['inputs']['G']}, "
            f"{check['b']['G8']['inputs']['prompt_tokens']} prompt tokens, completions <= "
            f"{check['b']['G8']['inputs']['C']}; vision tower "
            f"{'frozen' if check.get('model', {}).get('vision_frozen') else 'trained'}. predicted_peak_gib is the "
            "estimator's uncalibrated parameters + gradients + activations for the same shape"
        ),
        "source": f"{os.path.relpath(os.path.abspath(args.gpu_check), REPO)} via benchmarks/calibrate_memory.py",
        "device": device,
        "is_gpu_measurement": True,
        "cases": table,
        "cpu_calibration": {
            k: previous[k] for k in ("measurement", "per_token_bytes", "source", "device") if k in previous
        },
        "how_to_replace": "run benchmarks/gpu_check.py on a GPU (run_scripts/gpu_check.sh), then "
        "python benchmarks/calibrate_memory.py <its gpu_check.json>",
    }
    tmp = f"{args.out}.tmp.{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(result, f, indent=1)
        f.write("\n")
    os.replace(tmp, args.out)
    print(f"activation factor {factor:.4f} from {'/'.join(CALIBRATION_CASE)} ({device})")
    print(
        "| case | measured GiB | predicted GiB | uncalibrated GiB | measured / predicted |\n|---|---:|---:|---:|---:|"
    )
    for row in table:
        print(
            f"| {row['case']} | {row['measured_peak_gib']} | {row['predicted_peak_gib']} | "
            f"{row['uncalibrated_predicted_peak_gib']} | {row['measured_over_predicted']} |"
        )
    return result


if __name__ == "__main__":
    main()
