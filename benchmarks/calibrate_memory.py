"""Calibrate the memory estimator (``gui_grounding.ops.memory``) against GPU checks (``benchmarks/gpu_check.py``).

    python benchmarks/calibrate_memory.py                       # every benchmarks/results/gpu_check_*.json
    python benchmarks/calibrate_memory.py A.json B.json --out /tmp/cal.json

Every measured peak of the checks is a case (``case_list``):

* **training**: ``torch.cuda.max_memory_allocated`` over one forward+backward of one group of the 7B shape on one GPU,
  without an optimizer or DeepSpeed and with no gradients at the start. The estimator's prediction for the same shape
  is its training phase without the parts the check does not have: parameters + gradients + the activations alive at
  the micro-step's largest moment - the gradients not yet made then (``gui_grounding.ops.memory_peak``). The
  optimizer states, the ZeRO/DDP buffers and the fixed overhead are left out. Checks made before issue 29 item 1 ran the
  frozen vision tower with its autograd graph (transformers' checkpointing hook), and are predicted so
  (``RunShape.frozen_vision_backward``); a check that records ``model.frozen_vision_graph`` is predicted as it says.
* **prefill**: the generation prefill's peak (eval mode, no gradients): parameters + KV cache + prefill working set.
  Checks made before this script's issue held the previous repeat's KV cache while the next repeat ran (their
  ``timed`` kept the last result); their measured peak includes that one extra cache, and its prediction adds it.

Two factors are fitted, each to the smallest largest relative error of its cases' total peaks (a minimax fit over a
grid of 0.0005): ``activation_factor`` on the training cases, ``prefill_factor`` on the prefill cases. Every case is
written with its measured and predicted peak, its relative error ``(predicted - measured) / measured`` and the same for
the part above the weights; ``error_band`` is the lowest and highest relative error, which ``gui-grounding estimate``
prints. The CPU measurement of the decoder's saved tensors (``memory_calibration_cpu.json``) is checked against the
formula and kept beside. The fixed overhead (CUDA context, NCCL, fragmentation; not measured by the check) is kept
from the existing file, labelled as assumed.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO not in sys.path:
    sys.path.insert(0, REPO)

from gui_grounding.ops import memory as me  # noqa: E402
from gui_grounding.ops.memory_calibration import Calibration  # noqa: E402
from gui_grounding.ops.memory_shapes import QWEN2_5_VL_SHAPES  # noqa: E402

RESULTS = os.path.join(REPO, "benchmarks", "results")
OUT = os.path.join(RESULTS, "memory_calibration.json")
CPU_FILE = os.path.join(RESULTS, "memory_calibration_cpu.json")
SHAPE = QWEN2_5_VL_SHAPES["Qwen2.5-VL-7B"]
VARIANTS = {"naive": False, "shared_dense": True, "shared_split": True}
TRAINING_PARTS = (
    "parameters",
    "gradients",
    "activations: saved at the peak",
    "activations: transient at the peak",
    "gradients not yet made at the peak",
)
PREFILL_PARTS = ("parameters", "KV cache", "prefill working set")
GIB = me.GIB


def default_checks() -> list[str]:
    """Every committed GPU check: ``benchmarks/results/gpu_check_*.json``."""
    return sorted(glob.glob(os.path.join(RESULTS, "gpu_check_*.json")))


def case_list(check: dict, source: str) -> list[dict]:
    """Every measured peak of one GPU check JSON (module docstring), with what its prediction needs."""
    model = check.get("model") or {}
    train_vision = not model.get("vision_frozen", False)  # the first checks trained the tower (no flag recorded)
    frozen_graph = bool(model.get("frozen_vision_graph", True))
    out = []
    for part in ("b", "c"):
        for name, cfg in (check.get(part) or {}).items():
            if not isinstance(cfg, dict) or "inputs" not in cfg:
                continue
            common = {"source": source, "inputs": cfg["inputs"], "train_vision": train_vision}
            for variant, shared in VARIANTS.items():
                r = cfg.get(variant)
                if isinstance(r, dict) and r.get("peak_gib") is not None:
                    out.append(
                        {
                            **common,
                            "case": f"{part}/{name}/{variant}",
                            "kind": "training",
                            "shared": shared,
                            "frozen_vision_graph": frozen_graph,
                            "measured_peak_gib": r["peak_gib"],
                            "measured_start_gib": r.get("start_gib"),
                        }
                    )
            prefill = cfg.get("prefill") or {}
            stale = not prefill.get("previous_result_released") and (cfg.get("repeats") or 2) >= 2
            for variant in ("naive", "shared"):
                r = prefill.get(variant)
                if isinstance(r, dict) and r.get("peak_gib") is not None:
                    out.append(
                        {
                            **common,
                            "case": f"{part}/{name}/prefill_{variant}",
                            "kind": "prefill",
                            "shared": variant == "shared",
                            "previous_cache_held": stale,
                            "measured_peak_gib": r["peak_gib"],
                            "measured_start_gib": r.get("start_gib"),
                        }
                    )
    return out


def predict(case: dict, cal: Calibration) -> dict:
    """``{"peak_gib", "weights_gib"}``: the estimator's prediction of ``case`` (module docstring) under ``cal``."""
    i = case["inputs"]
    prefill = case["kind"] == "prefill"
    run = me.RunShape(
        world_size=1,
        zero=me.ZeroConfig(),
        per_device_batch=i["G"],
        num_generations=i["G"],
        prompt_tokens=i["prompt_tokens"],
        image_tokens=i["image_tokens"],
        completion_tokens=0 if prefill else i["C"],
        shared_prompt=case["shared"],
        train_vision=case["train_vision"] and not prefill,
        frozen_vision_backward=case.get("frozen_vision_graph", True),
    )
    est = me.estimate(SHAPE, run, cal)
    phase = "generation" if prefill else "training"
    parts = {p.name: p.bytes for p in est.phases[phase]}
    total = sum(parts[name] for name in (PREFILL_PARTS if prefill else TRAINING_PARTS))
    if prefill and case.get("previous_cache_held"):
        total += parts["KV cache"]
    return {"peak_gib": total / GIB, "weights_gib": parts["parameters"] / GIB}


def _relative(predicted: float, measured: float) -> float:
    return (predicted - measured) / measured


def compare(cases: list[dict], cal: Calibration) -> list[dict]:
    """Each case's measured and predicted peak, and the relative errors of the peak and of the part above the
    weights (``(predicted - measured) / measured``)."""
    rows = []
    for c in cases:
        p = predict(c, cal)
        measured, predicted = c["measured_peak_gib"], p["peak_gib"]
        rows.append(
            {
                "case": c["case"],
                "source": c["source"],
                "kind": c["kind"],
                "measured_peak_gib": round(measured, 3),
                "predicted_peak_gib": round(predicted, 3),
                "error": round(_relative(predicted, measured), 4),
                "error_above_weights": round(_relative(predicted - p["weights_gib"], measured - p["weights_gib"]), 4),
            }
        )
    return rows


def fit(cases: list[dict], kind: str, base: Calibration) -> float:
    """The factor (activation for ``training``, prefill for ``prefill``) with the smallest largest relative error
    of ``kind``'s cases, rounded to 4 decimals. Every case's prediction grows with the factor, so the largest
    over-prediction grows and the largest under-prediction shrinks: the best factor is where they meet (bisection
    between 0.25 and 4)."""
    chosen = [c for c in cases if c["kind"] == kind]

    def errors(factor: float) -> list[float]:
        if kind == "training":
            cal = Calibration(activation_factor=factor)
        else:
            cal = Calibration(activation_factor=base.activation_factor, prefill_factor=factor)
        return [r["error"] for r in compare(chosen, cal)]

    low, high = 0.25, 4.0
    for _ in range(30):
        mid = (low + high) / 2
        e = errors(mid)
        if max(e) > -min(e):
            high = mid
        else:
            low = mid
    return round((low + high) / 2, 4)


def cpu_case(path: str = CPU_FILE) -> dict | None:
    """The CPU measurement of the decoder's saved tensors (``memory_calibration_cpu.json``) against the formula
    (checkpointed inputs of every layer + the final norm's + one layer's saved set) for its tokens."""
    if not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    per = data["per_token_bytes"]
    h, L = SHAPE.hidden, SHAPE.layers
    # the measurement's tokens: measured = tokens x (constant + L x per-layer checkpoint + layer saved set)
    per_token_measured = per["measured_constant_checkpointed"] + L * per["measured_checkpoint_per_layer"]
    per_token_measured += per["measured_layer_saved_set"]
    tokens = round(data["measured_peak_gib"] * GIB / per_token_measured)
    predicted = tokens * (2 * h * (L + 1) + 4 * h + me.layer_activation_bytes(SHAPE, 2)) / GIB
    return {
        "case": "cpu/decoder saved set",
        "source": os.path.relpath(path, REPO),
        "kind": "cpu saved tensors",
        "tokens": tokens,
        "measured_gib": data["measured_peak_gib"],
        "predicted_gib": round(predicted, 4),
        "error": round(_relative(predicted, data["measured_peak_gib"]), 4),
    }


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("gpu_checks", nargs="*", help="benchmarks/gpu_check.py JSONs [benchmarks/results/gpu_check_*.json]")
    ap.add_argument("--out", default=OUT, help=f"calibration JSON to write [{OUT}]")
    args = ap.parse_args(argv)
    paths = args.gpu_checks or default_checks()
    cases, devices = [], []
    for path in paths:
        with open(path, encoding="utf-8") as f:
            check = json.load(f)
        cases += case_list(check, os.path.relpath(os.path.abspath(path), REPO))
        env = check["environment"]
        devices.append(
            f"{env.get('gpu', env.get('device'))} (torch {env['torch']}, transformers {env['transformers']})"
        )
    if not any(c["kind"] == "training" for c in cases):
        raise SystemExit("no measured training peak in " + ", ".join(paths))
    activation = fit(cases, "training", Calibration())
    prefill = (
        fit(cases, "prefill", Calibration(activation_factor=activation))
        if any(c["kind"] == "prefill" for c in cases)
        else None
    )
    cal = Calibration(activation_factor=activation, prefill_factor=prefill)
    table = compare(cases, cal)
    uncalibrated = {r["case"] + r["source"]: r for r in compare(cases, Calibration(activation_factor=1.0))}
    for row in table:
        row["uncalibrated_error"] = uncalibrated[row["case"] + row["source"]]["error"]
    previous = {}
    if os.path.exists(args.out):
        with open(args.out, encoding="utf-8") as f:
            previous = json.load(f)
    errors = [r["error"] for r in table]
    result = {
        "label": f"GPU measurement: {devices[0].split(' (')[0]} (benchmarks/gpu_check.py, "
        + ", ".join(os.path.basename(p) for p in paths)
        + ")",
        "activation_factor": activation,
        "prefill_factor": prefill,
        "overhead_gib": previous.get("overhead_gib", 3.25),
        "overhead_parts": previous.get("overhead_parts"),
        "overhead_source": previous.get(
            "overhead_source", "assumed: CUDA context, NCCL buffers and allocator fragmentation (not measured)"
        ),
        "error_band": {
            "low": min(errors),
            "high": max(errors),
            "cases": len(errors),
            "measure": "(predicted - measured) / measured of each case's total peak (measured on the GPU)",
        },
        "measurement": (
            "torch.cuda.max_memory_allocated over one forward+backward of one GRPO group (training cases) or over "
            "the HF generation prefill (prefill cases), Qwen2.5-VL-7B shape, bf16, gradient checkpointing, TRL's "
            "fused LM head, one GPU, no optimizer or DeepSpeed, starting from the weights alone; predicted: the "
            "estimator's parameters + gradients + activations at the largest moment (training) or parameters + KV "
            "cache + prefill working set (prefill) for the same shape; factors fitted minimax over the cases"
        ),
        "source": ", ".join(os.path.relpath(os.path.abspath(p), REPO) for p in paths)
        + " via benchmarks/calibrate_memory.py",
        "device": "; ".join(sorted(set(devices))),
        "is_gpu_measurement": True,
        "cases": table,
        "cpu_case": cpu_case(),
        "how_to_replace": "run benchmarks/gpu_check.py on a GPU (run_scripts/gpu_check.sh), commit its JSON as "
        "benchmarks/results/gpu_check_<card>_run<N>.json, then python benchmarks/calibrate_memory.py",
    }
    tmp = f"{args.out}.tmp.{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(result, f, indent=1)
        f.write("\n")
    os.replace(tmp, args.out)
    print(f"activation factor {activation:.4f}, prefill factor {prefill} ({result['device']})")
    print("| case | source | measured GiB | predicted GiB | error | above the weights | uncalibrated |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for r in table:
        print(
            f"| {r['case']} | {os.path.basename(r['source'])} | {r['measured_peak_gib']} | {r['predicted_peak_gib']} | "
            f"{r['error']:+.1%} | {r['error_above_weights']:+.1%} | {r['uncalibrated_error']:+.1%} |"
        )
    return result


if __name__ == "__main__":
    main()
