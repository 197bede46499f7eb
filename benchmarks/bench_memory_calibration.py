"""CPU calibration of the memory estimator (``gui_grounding/ops/memory.py``): what autograd really saves in a
Qwen2.5-VL-7B decoder layer, against the estimator's formula; writes ``benchmarks/results/memory_calibration_cpu.json`` (the CPU check of the per-token formula; the estimator reads
``memory_calibration.json``, calibrated on a GPU by ``benchmarks/calibrate_memory.py``).

Measured here (CPU, no GPU): the bytes of every tensor autograd saves for backward (``torch.autograd.graph.
saved_tensors_hooks``, each storage counted once, parameters excluded) in a forward of transformers' own
``Qwen2_5_VLForConditionalGeneration`` language model with the published 7B layer shape (hidden 3584, 28 heads, 4 KV
heads, intermediate 18944; random bfloat16 weights, SDPA attention, a small vocabulary: the LM head is costed
separately), with 1 and 2 decoder layers, with and without gradient checkpointing. The difference of the two depths is
the per-layer cost, the rest the per-token constant. Extrapolated to 28 layers and the GTA1-7B shared-prompt
micro-step (one group of G=8: P=2801 prompt tokens for a 1920x1080 screenshot, C=128), it is the measured value; the
estimator's uncalibrated saved-activation parts for the same shape (checkpointed hidden states + one layer's saved set,
without its backward-buffer and vision terms, which this measurement cannot see) are the predicted one; the
activation factor is their ratio.

Not measured here (a GPU run replaces this file): the backward's transient gradient buffers, flash-attention-2's own
saved set, the CUDA caching allocator. The fixed overhead is a published/assumed figure (see ``overhead_parts``).

    python benchmarks/bench_memory_calibration.py            # ~1 minute on 2 cores, ~3 GB of RAM
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from gui_grounding.ops.memory import GIB, RunShape, ZeroConfig, layer_activation_bytes  # noqa: E402
from gui_grounding.ops.memory_shapes import QWEN2_5_VL_SHAPES  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", "memory_calibration_cpu.json")
# The GTA1-7B shape the factor is stated for: 1920x1080 -> 1932x1092 under max_pixels 4096*2160 = 2,691 image tokens,
# + 110 text tokens (benchmarks/cost_model_shared_prompt.py), completions padded to 128, one group of 8 per micro-step.
GTA1_7B = dict(prompt_tokens=2801, image_tokens=2691, completion_tokens=128, per_device_batch=8, num_generations=8)
# Fixed overhead per GPU (not measured here): CUDA context of a PyTorch process (pytorch/pytorch#34323: 781 MB used
# after the first CUDA call), NCCL communicator buffers (allocated outside PyTorch's allocator, invisible to
# torch.cuda.memory_allocated: PyTorch "Understanding CUDA Memory Usage"; assumed 1 GiB for 8-rank groups), and the
# caching allocator's fragmentation (reserved but unallocated; assumed 1.5 GiB).
OVERHEAD_PARTS = {"cuda_context_gib": 0.75, "nccl_gib": 1.0, "allocator_fragmentation_gib": 1.5}


def saved_bytes(layers: int, tokens: int, checkpointing: bool) -> int:
    """Bytes autograd saves for backward in a forward of ``tokens`` tokens through ``layers`` 7B-shaped layers."""
    import torch
    from transformers import Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration

    torch.manual_seed(0)
    shape = QWEN2_5_VL_SHAPES["Qwen2.5-VL-7B"]
    text = dict(
        hidden_size=shape.hidden,
        intermediate_size=shape.intermediate,
        num_hidden_layers=layers,
        num_attention_heads=shape.heads,
        num_key_value_heads=shape.kv_heads,
        vocab_size=1024,
        tie_word_embeddings=False,
        bos_token_id=0,
        eos_token_id=1,
        rope_scaling={"type": "mrope", "mrope_section": [16, 24, 24]},
    )
    vision = dict(depth=1, hidden_size=64, intermediate_size=64, num_heads=2, out_hidden_size=shape.hidden)
    config = Qwen2_5_VLConfig(text_config=text, vision_config=vision)
    config._attn_implementation = "sdpa"
    default = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)
    try:
        model = Qwen2_5_VLForConditionalGeneration(config)
    finally:
        torch.set_default_dtype(default)
    model.train()
    lm = model.model.language_model
    if checkpointing:
        lm.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    seen: dict[int, int] = {}

    def pack(t):
        storage = t.untyped_storage()
        seen[storage.data_ptr()] = storage.nbytes()
        return t

    ids = torch.randint(2, 1000, (1, tokens))
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        lm(input_ids=ids)
    return sum(n for ptr, n in seen.items() if ptr not in params)


GPU_CHECK = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", "gpu_check_h200_run2.json")


def gpu_cross_check(path: str = GPU_CHECK) -> dict | None:
    """The estimator (uncalibrated) against ``benchmarks/gpu_check.py``'s measured peaks on a GPU, where that file
    exists: one forward+backward of the 7B model on one GPU (no optimizer, no DeepSpeed), measured as
    the peak allocated above the weights; predicted as the estimate's gradients + the activations at the largest
    moment - the gradients not yet made then, for the same inputs (world size 1, no ZeRO); and its generation prefill
    (G prompts, or one prompt whose cache is repeated G times) against the estimate's KV cache + prefill working set.
    Reported beside the calibration, not used for its factor (benchmarks/calibrate_memory.py fits the factors)."""
    from gui_grounding.ops.memory import estimate

    if not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8") as f:
        check = json.load(f)
    shape = QWEN2_5_VL_SHAPES["Qwen2.5-VL-7B"]
    # the check trained the vision tower until it recorded model.vision_frozen (its --freeze-vision flag came later)
    frozen = bool((check.get("model") or {}).get("vision_frozen", False))
    cases = []
    for part in ("b", "c"):
        for name, case in (check.get(part) or {}).items():
            inputs = case.get("inputs") or {}
            for variant in ("naive", "shared_dense"):
                measured = (case.get(variant) or {}).get("peak_above_start_gib")
                if measured is None or not inputs:
                    continue
                run = RunShape(
                    world_size=1,
                    zero=ZeroConfig(),
                    per_device_batch=inputs["G"],
                    num_generations=inputs["G"],
                    prompt_tokens=inputs["prompt_tokens"],
                    image_tokens=inputs["image_tokens"],
                    completion_tokens=inputs["C"],
                    shared_prompt=variant != "naive",
                    train_vision=not frozen,
                )
                parts = {p.name: p.bytes for p in estimate(shape, run).phases["training"]}
                predicted = sum(v for k, v in parts.items() if k.startswith(("gradients", "activations"))) / GIB
                cases.append(
                    {
                        "case": f"{name} {variant}",
                        "measured_gib": measured,
                        "predicted_gib": round(predicted, 3),
                        "measured_over_predicted": round(measured / predicted, 3),
                    }
                )
        prefill = case.get("prefill") or {}
        for variant in ("naive", "shared"):
            measured = (prefill.get(variant) or {}).get("peak_above_start_gib")
            if measured is None or not inputs:
                continue
            run = RunShape(
                world_size=1,
                zero=ZeroConfig(),
                per_device_batch=inputs["G"],
                num_generations=inputs["G"],
                prompt_tokens=inputs["prompt_tokens"],
                image_tokens=inputs["image_tokens"],
                completion_tokens=0,  # the prefill fills the prompt's cache only
                shared_prompt=variant == "shared",
            )
            parts = {p.name: p.bytes for p in estimate(shape, run).phases["generation"]}
            predicted = (parts["KV cache"] + parts["prefill working set"]) / GIB
            cases.append(
                {
                    "case": f"{name} prefill {variant}",
                    "measured_gib": measured,
                    "predicted_gib": round(predicted, 3),
                    "measured_over_predicted": round(measured / predicted, 3),
                }
            )
    env = check.get("environment") or {}
    return {
        "source": f"{os.path.relpath(path, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))} "
        f"(benchmarks/gpu_check.py on {env.get('gpu', 'a GPU')}, torch {env.get('torch', '?')}): peak allocated above "
        "the weights over one forward+backward, no optimizer, no DeepSpeed, vision tower "
        + ("frozen" if frozen else "trained (gradients and activations counted so)"),
        "used_for_the_factor": False,
        "cases": cases,
    }


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokens", type=int, default=512, help="tokens of the measured forward [512]")
    ap.add_argument("--out", default=OUT, help=f"calibration JSON to write [{OUT}]")
    a = ap.parse_args(argv)
    import torch
    import transformers

    shape = QWEN2_5_VL_SHAPES["Qwen2.5-VL-7B"]
    T = a.tokens
    per = {}
    for ck in (False, True):
        one, two = saved_bytes(1, T, ck), saved_bytes(2, T, ck)
        per[ck] = {"per_layer_per_token": (two - one) / T, "constant_per_token": (2 * one - two) / T}
        print(
            f"checkpointing={ck}: {per[ck]['per_layer_per_token']:,.0f} B per layer per token, "
            f"{per[ck]['constant_per_token']:,.0f} B per token outside the layers"
        )
    h, L = shape.hidden, shape.layers
    predicted_layer = layer_activation_bytes(shape, 2)
    run = RunShape(world_size=8, zero=ZeroConfig(), **GTA1_7B)
    from gui_grounding.ops.memory import micro_step_tokens

    tokens = micro_step_tokens(run, shared=True)
    measured = tokens * (L * per[True]["per_layer_per_token"] + per[True]["constant_per_token"])
    measured += tokens * per[False]["per_layer_per_token"]  # the one layer recomputed in backward
    predicted = tokens * (2 * h * (L + 1) + 4 * h + predicted_layer)
    factor = measured / predicted
    print(
        f"per-layer saved set: measured {per[False]['per_layer_per_token']:,.0f} B/token, formula {predicted_layer:,}"
    )
    print(
        f"GTA1-7B shared micro-step ({tokens:,} tokens, 28 layers, checkpointing): measured {measured / GIB:.3f} GiB,"
        f" predicted {predicted / GIB:.3f} GiB, factor {factor:.4f}"
    )
    result = {
        "label": "CPU/published figures, not a GPU measurement",
        "activation_factor": round(factor, 4),
        "overhead_gib": round(sum(OVERHEAD_PARTS.values()), 2),
        "overhead_parts": OVERHEAD_PARTS,
        "overhead_source": "published/assumed, not measured: CUDA context pytorch/pytorch#34323 (781 MB); NCCL buffers "
        "are outside PyTorch's allocator (https://docs.pytorch.org/docs/stable/torch_cuda_memory.html), 1 GiB assumed; "
        "allocator fragmentation 1.5 GiB assumed",
        "measured_peak_gib": round(measured / GIB, 4),
        "predicted_peak_gib": round(predicted / GIB, 4),
        "measurement": (
            f"saved-for-backward bytes of the GTA1-7B shared-prompt micro-step ({tokens} LM tokens: one group of G=8, "
            "P=2801, C=128), 28 Qwen2.5-VL-7B decoder layers with gradient checkpointing (checkpoints + one layer "
            f"recomputed), extrapolated from 1- and 2-layer forwards of {T} tokens; activations only (no weights, "
            "optimizer, transient gradients, LM head or vision tower)"
        ),
        "per_token_bytes": {
            "measured_layer_saved_set": per[False]["per_layer_per_token"],
            "formula_layer_saved_set": predicted_layer,
            "measured_checkpoint_per_layer": per[True]["per_layer_per_token"],
            "formula_checkpoint_per_layer": 2 * h,
            "measured_constant_checkpointed": per[True]["constant_per_token"],
            "formula_constant_checkpointed": 2 * h + 4 * h,
        },
        "source": "benchmarks/bench_memory_calibration.py: torch.autograd.graph.saved_tensors_hooks over "
        f"transformers {transformers.__version__} Qwen2_5_VLForConditionalGeneration (sdpa, bfloat16), torch "
        f"{torch.__version__}",
        "device": f"cpu ({platform.machine()}, {os.cpu_count()} cores)",
        "is_gpu_measurement": False,
        "gpu_cross_check": gpu_cross_check(),
        "how_to_replace": "measure torch.cuda.max_memory_allocated() of one training micro-step on a GPU, set "
        "measured_peak_gib to it, predicted_peak_gib to `gui-grounding estimate --json` (peak, uncalibrated: "
        "--calibration none) for the same shape, and activation_factor so that the two agree; device = the GPU; "
        "is_gpu_measurement = true; label accordingly",
    }
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    with open(a.out, "w", encoding="utf-8") as f:
        json.dump(result, f, indent=2)
        f.write("\n")
    print(f"-> {a.out}")
    return result


if __name__ == "__main__":
    main()
