"""``gui-grounding estimate``: predicted peak GPU memory per rank of a GTA1 GRPO recipe, before launch (issue 22).

The GTA1 wiring of :mod:`gui_grounding.ops.memory` (the model-agnostic formulas, documented there):

* the recipe is resolved as the launcher resolves it (:func:`gui_grounding.ops.plan.resolve`: the recipe YAML, the flags
  given, the per-device batch and gradient accumulation for the cluster);
* the model's shape from its name (:data:`MODEL_SHAPES`: GTA1's bases, published Qwen2.5-VL configs) or from a local
  checkpoint's ``config.json``;
* the prompt length P = image tokens + text tokens: the image tokens of a ``--screenshot`` (default 1920x1080) under the
  run's pixel budget (``max_pixels``/``min_pixels`` as resolved: GTA1's 4096x2160 in the recipes), through the
  project's one resize rule (:meth:`groundwork.pixel_budget.PixelBudget.size_sent`, smart_resize with the model's factor
  ``ModelShape.resize_factor``: 28 for Qwen2.5-VL, 32 for Qwen3-VL), one token per factor x factor pixels; text tokens ``--text-tokens`` (110: GTA1's system prompt, instruction and chat
  template, as ``benchmarks/cost_model_shared_prompt.py`` assumes);
* completion width C = ``max_completion_length`` (completions are padded to the longest of the batch; the worst case
  is the limit) unless ``--completion-tokens``;
* ZeRO stage, offload and bucket sizes from the run's DeepSpeed JSON (``configs/deepspeed/zero*.json``);
* weights' bytes from ``--dtype`` (bfloat16: 2; the launching machine's bf16 support is not consulted);
* the calibration file ``benchmarks/results/memory_calibration.json`` (``--calibration``), whose label is printed.

The command (``gui-grounding estimate``, registered from ``gui_grounding/ops/plan.py``, which resolves the recipe) and the
launcher's ``--dry-run`` (``python -m gui_grounding.plan --dry-run``) print it:

    gui-grounding estimate --recipe recipes/gta1/7b.yaml --nnodes 1 --nproc-per-node 8 --gpu-memory-gib 80
    gui-grounding estimate --recipe recipes/gta1/72b.yaml --nnodes 4 --nproc-per-node 8 --json
    gui-grounding estimate --recipe recipes/gta1/7b.yaml -- --num_generations 16 --max_pixels 1003520
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from groundwork.argtypes import add_number_flag, integer, number
from groundwork.pixel_budget import PixelBudget
from groundwork.records import load_json_file
from gui_grounding.ops.memory import MemoryEstimate, RunShape, ZeroConfig, estimate
from gui_grounding.ops.memory_calibration import DEFAULT_CALIBRATION_PATH, load_calibration
from gui_grounding.ops.memory_shapes import SHAPES, ModelShape, shape_from_config

_REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
#: GTA1's base checkpoints (recipes/gta1/*.yaml), the Qwen2.5-VL releases and Qwen3-VL-8B (recipes/qwen3vl/8b.yaml)
#: -> published shapes (gui_grounding/ops/memory_shapes.py). UI-TARS-1.5-7B is a Qwen2.5-VL-7B fine-tune with the same
#: architecture (its config.json: model_type qwen2_5_vl, the 7B numbers).
MODEL_SHAPES: dict[str, str] = {
    "ByteDance-Seed/UI-TARS-1.5-7B": "Qwen2.5-VL-7B",
    "Qwen/Qwen2.5-VL-3B-Instruct": "Qwen2.5-VL-3B",
    "Qwen/Qwen2.5-VL-7B-Instruct": "Qwen2.5-VL-7B",
    "Qwen/Qwen2.5-VL-32B-Instruct": "Qwen2.5-VL-32B",
    "Qwen/Qwen2.5-VL-72B-Instruct": "Qwen2.5-VL-72B",
    "HelloKKMe/GTA1-7B-2507": "Qwen2.5-VL-7B",
    "Salesforce/GTA1-7B-2507": "Qwen2.5-VL-7B",
    "HelloKKMe/GTA1-32B": "Qwen2.5-VL-32B",
    "HelloKKMe/GTA1-72B": "Qwen2.5-VL-72B",
    "Qwen/Qwen3-VL-8B-Instruct": "Qwen3-VL-8B",
}
#: defaults of the estimate's own flags
DEFAULT_SCREENSHOT = (1920, 1080)
DEFAULT_TEXT_TOKENS = 110
DEFAULT_GPU_MEMORY_GIB = 80.0  # H100 80GB


def shape_for_model(name_or_path: str) -> ModelShape:
    """The :class:`ModelShape` of a checkpoint: a local folder's ``config.json``, else :data:`MODEL_SHAPES`.

    Raises:
        ValueError: neither (names the known models).
    """
    config = os.path.join(name_or_path, "config.json")
    if os.path.lexists(config):  # a regular file of strict JSON (groundwork.records.load_json_file), else one line
        loaded = load_json_file(config, "model config")
        return shape_from_config(loaded, os.path.basename(os.path.normpath(name_or_path)), config)
    key = MODEL_SHAPES.get(name_or_path)
    if key is None:
        raise ValueError(
            f"no shape known for {name_or_path!r}: give a local checkpoint folder (its config.json is read) or one "
            f"of {', '.join(MODEL_SHAPES)}"
        )
    shape = SHAPES[key]
    if key != name_or_path.split("/")[-1].removesuffix("-Instruct"):
        from dataclasses import replace

        shape = replace(shape, name=f"{name_or_path} ({key} shape)")
    return shape


def image_tokens(width: int, height: int, factor: int, min_pixels: int, max_pixels: int) -> tuple[int, int, int]:
    """``(tokens, W', H')``: LM tokens of a ``width x height`` screenshot sent under the pixel budget
    (:meth:`groundwork.pixel_budget.PixelBudget.size_sent`), one per ``factor x factor`` pixels of the resized image."""

    budget = PixelBudget(factor=factor, min_pixels=min_pixels, max_pixels=max_pixels)
    w, h = budget.size_sent(width, height)
    return (w // factor) * (h // factor), w, h


def zero_config(deepspeed: str | None) -> ZeroConfig:
    """The :class:`ZeroConfig` of a DeepSpeed JSON path (``None``/empty: no DeepSpeed).

    Raises:
        ValueError: the file cannot be read.
    """
    if not deepspeed:
        return ZeroConfig()
    config = load_json_file(deepspeed, "DeepSpeed config")  # a regular file (no /dev/zero, FIFO), strict JSON
    shown = os.path.relpath(deepspeed, _REPO) if os.path.isabs(deepspeed) else deepspeed
    return ZeroConfig.from_json(config, shown if not shown.startswith("..") else deepspeed)


#: the estimate's numeric flags (:mod:`groundwork.argtypes`: finite, in range, the range in ``--help``)
GPU_MEMORY_GIB = number(min=0, min_open=True, max=1_000_000)
TOKENS = integer(min=0, max=2**31 - 1)


def add_estimate_flags(p: argparse.ArgumentParser) -> None:
    """The estimate's own flags (shared by ``gui-grounding estimate`` and ``python -m gui_grounding.plan``)."""
    add_number_flag(
        p,
        "--gpu-memory-gib",
        GPU_MEMORY_GIB,
        DEFAULT_GPU_MEMORY_GIB,
        "memory of one GPU in GiB; a warning is printed when the predicted peak exceeds it [80: H100]",
    )
    p.add_argument(
        "--screenshot",
        default=f"{DEFAULT_SCREENSHOT[0]}x{DEFAULT_SCREENSHOT[1]}",
        help="screenshot size WxH in pixels, resized under the run's pixel budget into image tokens [1920x1080]",
    )
    add_number_flag(
        p,
        "--text-tokens",
        TOKENS,
        DEFAULT_TEXT_TOKENS,
        f"system prompt + instruction + chat template tokens per prompt (an estimate) [{DEFAULT_TEXT_TOKENS}]",
    )
    add_number_flag(
        p,
        "--completion-tokens",
        TOKENS,
        None,
        "completion width C in tokens (completions are padded to the longest) [the run's max_completion_length]",
    )
    p.add_argument(
        "--calibration",
        default=DEFAULT_CALIBRATION_PATH,
        help="calibration JSON (activation factor, fixed overhead, their source), or 'none' for the bare formulas "
        "[benchmarks/results/memory_calibration.json]",
    )
    p.add_argument(
        "--logits",
        choices=["fused", "full"],
        default="fused",
        help="log-prob head: fused = TRL 1.16's fused LM head (what this project runs, no full logits); full = "
        "B*C x vocab logits + an fp32 copy (a trainer without the fused head) [fused]",
    )


def options_from_args(args: argparse.Namespace) -> dict:
    """The keyword arguments of :func:`estimate_for_plan` from :func:`add_estimate_flags`' flags.

    Raises:
        ValueError: a malformed ``--screenshot`` or a negative token count.
    """
    try:
        w, h = (int(x) for x in str(args.screenshot).lower().split("x"))
    except ValueError:
        raise ValueError(f"--screenshot {args.screenshot!r}: expected WxH, e.g. 1920x1080") from None
    if w < 1 or h < 1 or args.text_tokens < 0 or (args.completion_tokens is not None and args.completion_tokens < 0):
        raise ValueError("--screenshot sides must be >= 1 and token counts >= 0")
    calibration = None if str(args.calibration).lower() == "none" else args.calibration
    return dict(
        screenshot=(w, h),
        text_tokens=args.text_tokens,
        completion_tokens=args.completion_tokens,
        calibration=calibration,
        logits=args.logits,
    )


def estimate_for_plan(
    plan: Any,
    *,
    screenshot: tuple[int, int] = DEFAULT_SCREENSHOT,
    text_tokens: int = DEFAULT_TEXT_TOKENS,
    completion_tokens: int | None = None,
    calibration: str | None = DEFAULT_CALIBRATION_PATH,
    logits: str = "fused",
) -> MemoryEstimate:
    """The memory estimate of a resolved :class:`gui_grounding.ops.plan.Plan` (``resolve(..., final=True)``).

    Raises:
        ValueError: unknown model shape, unreadable DeepSpeed or calibration file, an image the budget refuses.
    """
    if plan.args is None:
        raise ValueError("the plan was not resolved with final=True")
    script_args, training_args, model_args = plan.args
    shape = shape_for_model(model_args.model_name_or_path)
    tokens, w, h = image_tokens(
        *screenshot, shape.resize_factor, int(script_args.min_pixels), int(script_args.max_pixels)
    )
    b = plan.batch
    dtype = str(model_args.dtype or "auto")
    param_bytes = 4 if dtype in ("float32", "fp32") else 2
    run = RunShape(
        world_size=b.world,
        zero=zero_config(plan.deepspeed),
        per_device_batch=b.per_device,
        num_generations=b.num_generations,
        prompt_tokens=tokens + text_tokens,
        image_tokens=tokens,
        completion_tokens=int(training_args.max_completion_length if completion_tokens is None else completion_tokens),
        steps_per_generation=int(b.steps_per_generation or b.grad_accum),
        param_bytes=param_bytes,
        train_vision=not bool(model_args.freeze_vision_modules),
        lora_rank=int(model_args.lora_r) if getattr(model_args, "use_peft", False) else 0,
        shared_prompt=bool(getattr(training_args, "shared_prompt", False)),
        gradient_checkpointing=bool(
            getattr(training_args, "activation_checkpointing", None) or training_args.gradient_checkpointing
        ),
        logits=logits,
        gather_for_generation=bool(getattr(training_args, "ds3_gather_for_generation", True)),
        checkpoint_every=int(getattr(training_args, "gradient_checkpointing_every", 1)),
        checkpoint_vision=bool(getattr(training_args, "vision_gradient_checkpointing", True)),
    )
    est = estimate(shape, run, load_calibration(calibration))
    est.inputs.insert(
        2,
        f"screenshot {screenshot[0]}x{screenshot[1]} -> {w}x{h} (smart_resize, factor {shape.resize_factor}, "
        f"pixels {int(script_args.min_pixels):,}..{int(script_args.max_pixels):,}) = {tokens:,} image tokens + "
        f"{text_tokens} text tokens = P; C = {run.completion_tokens}"
        + (" (max_completion_length)" if completion_tokens is None else "")
        + f"; dtype {dtype}",
    )
    if dtype in ("auto", "None"):
        est.notes.append("--dtype auto: the checkpoint's dtype, assumed bfloat16 (the published Qwen-VL weights)")
    if shape.family != "qwen2_5_vl":
        est.notes.append(
            f"{shape.family} shape: parameter, optimizer and KV-cache bytes follow its config exactly; the activation "
            "terms and the calibration were measured on Qwen2.5-VL-7B only (not measured for this family)"
        )
    return est
