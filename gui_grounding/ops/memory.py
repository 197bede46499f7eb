"""Predicted peak GPU memory per rank of a GRPO run of a Qwen2.5-VL-shaped model, before launch (issue 22).

Model-agnostic maths: a :class:`ModelShape` (the published config numbers, ``gui_grounding.ops.memory_shapes``), a
:class:`RunShape` (world size, ZeRO stage, precision, micro-batch, G, tokens) and a :class:`Calibration`
(``gui_grounding.ops.memory_calibration``, read from ``benchmarks/results/memory_calibration.json``) give a
:class:`MemoryEstimate`: every part in bytes per rank, for the two phases of a GRPO step that hold the most,

* **training** (the policy forward+backward of one micro-step): parameters, gradients, optimizer states, ZeRO buffers,
  activations (gradient checkpointing: per-layer hidden states saved + one layer's recompute working set), log-prob
  head, fixed overhead;
* **generation** (HF ``generate`` of the whole per-process generation batch, TRL 1.16 ``_generate_single_turn``: one
  ``generate`` call for ``per_device_train_batch_size x steps_per_generation`` completions): the same resident states,
  the parameters gathered for generation under ZeRO-3 (TRL ``ds3_gather_for_generation``, default true), the KV cache
  and the prefill working set (vision tower or one decoder layer, no grad);

and the peak is the larger phase. The GTA1 recipe wiring (recipe YAML, model names, screenshot size) is in
``gui_grounding/ops/estimate.py``; the launcher's ``--dry-run`` and ``gui-grounding estimate`` print it.

Units: bytes everywhere inside; GiB (2**30 bytes) in the printed table and the JSON ``*_gib`` fields. Token counts are
language-model tokens; "patches" are 14x14 vision patches (4 per image token: 2x2 spatial merge).

Formulas (``a`` = bytes of the training dtype, 2 for bfloat16; ``h`` hidden, ``L`` layers, ``kv`` = kv_heads x
head_dim, ``I`` intermediate, ``V`` vocab, ``Psi`` all parameters, ``Psi_t`` trainable ones, ``N`` world size):

* states (DeepSpeed ZeRO, Rajbhandari et al. 2020, arXiv 1910.02054 section 3: mixed-precision Adam keeps 2 bytes of
  parameters, 2 of gradients and 12 of optimizer states per parameter: fp32 master weights 4 + momentum 4 + variance
  4): ZeRO-1 shards the 12, ZeRO-2 the 12 and the gradients, ZeRO-3 also the parameters, each by ``N``. fp32 weights
  need no master copy (the optimizer keeps 8 bytes). Without DeepSpeed (plain DDP, HF ``Trainer``): nothing is
  sharded, torch ``AdamW`` keeps its two states in the parameters' dtype and DDP's gradient buckets hold a second copy
  of the gradients (``gradient_as_bucket_view`` false). A frozen vision tower (GTA1: ``freeze_vision_modules``) has
  parameters only. ZeRO buffers: ZeRO-1/2 ``reduce_bucket_size + allgather_bucket_size`` elements; ZeRO-3
  ``reduce_bucket_size`` plus the gathered working set, ``min(stage3_max_live_parameters, two decoder layers or the
  LM head + stage3_prefetch_bucket_size)`` elements; ``"auto"`` values as transformers fills them
  (``integrations/deepspeed.py``: ``h*h``, ``0.9*h*h``).
* activations per token of one decoder layer, what autograd saves in the HF Qwen2.5-VL layer (counted, and checked
  against a CPU measurement of transformers 5.23's layer: ``benchmarks/bench_memory_calibration.py``): two RMSNorms
  ``2 x (4h fp32 input + a*h output)``, attention ``a*(4h + 3kv)`` (q, k, v outputs, rotated q and k, the attention
  output and its contiguous copy for o_proj; flash/SDPA attention saves no ``T x T`` scores), MLP ``a*4I`` (gate, up,
  SiLU(gate), product): ``LAYER = 12h + a*(4h + 3kv + 4I)`` (20h + 6kv + 8I bytes in bf16). With gradient
  checkpointing (HF: one checkpoint per decoder layer) what stays is each layer's input, ``a*h x (L + 1)``, plus the
  final norm's fp32 input ``4h``; the backward of one layer recomputes ``LAYER`` and, at the MLP product's backward,
  holds three more ``I``-wide gradients (of the product, of SiLU(gate) and of up: ``3a*I``; counted, not measured).
  Without checkpointing every layer keeps ``LAYER``.
* recompute policy (``--gradient_checkpointing_every K``, ``--vision_gradient_checkpointing``; ``vlm_r1/recompute.py``):
  ``n_c = ceil(L / K)`` decoder layers are checkpointed, the other ``L - n_c`` keep ``LAYER``, so the saved
  activations per token are ``a*h*n_c + (L - n_c)*LAYER + a*h + 4h`` (``n_c = L``: the line above; ``n_c = 0``:
  checkpointing off). Each checkpointed layer's forward runs again in the backward: ``n_c / (3L)`` more decoder FLOPs
  (a forward is 2 of the 6 FLOPs per parameter and token). A trained vision tower keeps ``a*h_v*(depth + 1)`` per
  patch checkpointed, ``depth x (12h_v + a*(7h_v + 4I_v))`` when its blocks are not (a frozen tower: nothing).
* tokens of one micro-step of ``B`` completions, prompt ``P``, completion ``C``: naive GRPO (every completion row
  repeats its prompt) ``B x (P + C)``; shared-prompt GRPO (``vlm_r1/shared_prompt.py``: one packed row per group,
  ``[prompt[:-1] | prompt[-1], c_1 | ... | prompt[-1], c_G]``) ``B/G x (P - 1 + G x (C + 1))``, exactly what
  :func:`vlm_r1.shared_prompt.token_counts` counts for full-length completions. The vision tower sees ``B`` images
  naive, ``B/G`` shared. Without an autograd graph (frozen, and no checkpointing hook: see ``RunShape``) it holds a
  transient no-grad working set per patch, the larger of its attention step ``5a*h_v + 24h_v + 8hd_v`` (qkv, the
  block input and its norm, q and k rotated in fp32 with their temporaries, the fp32 cos/sin) and its MLP step
  ``a*(2h_v + 3I_v) + 8hd_v`` (44,160 bytes for the 7B tower: a CPU measurement of transformers 5.23's tower, bf16,
  gives 44,178; ``benchmarks/bench_nograd_memory.py``, ``benchmarks/results/memory_nograd_cpu.json``). With a graph (trained, or frozen under the hook) its blocks keep their checkpoints ``a*h_v x
  (depth + 1)`` per patch and its backward recomputes one block.
* log-probs of the ``B x C`` completion tokens: TRL 1.16's fused LM head (``trl.trainer.utils.add_fused_lm_head``,
  ``trl/kernels/chunked_logprob.py``: tiles of 4096 tokens x 32768 vocabulary entries, fp32 accumulators; its backward
  holds the LM head's weight gradient in fp32 and casts it, ``V*h*(4 + a)``) -- ``logits="fused"``, what this project
  runs; or full logits ``B*C x V`` in the compute dtype plus an fp32 copy for the log-softmax (``a + 4`` bytes per
  entry) -- ``logits="full"``, what a trainer without the fused head (GTA1's own) materialises.
* generation: KV cache ``rows x (P + C) x L x 2 x kv x a``; prefill working set: one decoder layer without grad
  ``a*(3h + 3I) + 2a*hd`` per prefill token (the residual, the norm output and the model's input embeddings; gate, up
  and SiLU(gate) at the MLP; cos and sin: 135,680 bytes for the 7B layer, equal to a CPU measurement of transformers
  5.23's layer, ``benchmarks/bench_nograd_memory.py``; naive: every row's prompt; shared-prompt prefill: each unique prompt once, then the cache repeated G
  times, ``vlm_r1/modules/qwen.py`` ``shared_prompt_prefill``), or the vision tower's no-grad working set, the larger
  of the two, times the calibration's prefill factor.
* timing (:mod:`gui_grounding.ops.memory_peak`): a backward frees activations as it makes gradients, so the training
  phase is the resident states at the micro-step's largest moment: the LM head's backward (every checkpoint, no
  gradient yet), the first or last decoder layer's backward, the vision tower's backward (when it keeps a graph), its
  no-grad forward, or the optimizer step (every gradient). The ``gradients`` part is whole; the gradients not yet made
  at the peak are a negative part.

Calibration (:class:`Calibration`): ``activation_factor`` multiplies the training phase's activation-like parts
(checkpoints, transients, log-prob head), ``prefill_factor`` the prefill working set, ``overhead_gib`` is added once
(CUDA context, NCCL buffers, allocator fragmentation). The JSON file says where its numbers come from and the error
band its measured cases left (``error_band``); the table prints both on every estimate, and warns when the predicted
peak exceeds :data:`WARN_FRACTION` (90%) of the GPU's memory.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from gui_grounding.ops.memory_calibration import Calibration
from gui_grounding.ops.memory_peak import Moment, StepBytes, moments, peak
from gui_grounding.ops.memory_shapes import ModelShape

GIB = 1024**3
#: TRL 1.16 fused LM head tiles (``trl/kernels/chunked_logprob.py`` TOKEN_CHUNK_SIZE; ``trl/trainer/utils.py``
#: ``_CHUNKED_LOGPROB_CHUNK_SIZE``)
FUSED_TOKEN_TILE, FUSED_VOCAB_TILE = 4096, 32768
ZERO_STAGES = (0, 1, 2, 3)
#: the estimate warns when its predicted peak exceeds this fraction of the GPU's memory (issue 29: the calibration's
#: errors reach several percent, and the allocator needs room)
WARN_FRACTION = 0.9


# ---- the run --------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ZeroConfig:
    """The DeepSpeed settings that decide memory. ``stage`` 0 = no DeepSpeed (plain DDP). Bucket sizes in elements
    (``None``: the config's ``"auto"``, filled as transformers does from the model width)."""

    stage: int = 0
    offload_optimizer: bool = False
    offload_params: bool = False
    reduce_bucket_size: int | None = None
    allgather_bucket_size: int | None = None
    prefetch_bucket_size: int | None = None
    max_live_parameters: int | None = None
    source: str = "no DeepSpeed"

    @classmethod
    def from_json(cls, config: Mapping[str, Any], source: str) -> ZeroConfig:
        """From a DeepSpeed JSON config (``zero_optimization``; DeepSpeed's defaults where a key is absent:
        ``reduce_bucket_size`` / ``allgather_bucket_size`` 5e8, ``stage3_max_live_parameters`` 1e9,
        ``stage3_prefetch_bucket_size`` 5e7)."""
        z = dict(config.get("zero_optimization") or {})

        def size(key: str, default: int) -> int | None:
            value = z.get(key, default)
            return None if value == "auto" else int(float(value))

        def offloaded(key: str) -> bool:
            return str((z.get(key) or {}).get("device", "none")).lower() in ("cpu", "nvme")

        stage = int(z.get("stage", 0))
        if stage not in ZERO_STAGES:
            raise ValueError(f"{source}: zero_optimization.stage {stage} is not one of {ZERO_STAGES}")
        return cls(
            stage=stage,
            offload_optimizer=offloaded("offload_optimizer"),
            offload_params=offloaded("offload_param") and stage == 3,
            reduce_bucket_size=size("reduce_bucket_size", 500_000_000),
            allgather_bucket_size=size("allgather_bucket_size", 500_000_000),
            prefetch_bucket_size=size("stage3_prefetch_bucket_size", 50_000_000),
            max_live_parameters=size("stage3_max_live_parameters", 1_000_000_000),
            source=source,
        )


@dataclass(frozen=True)
class RunShape:
    """What one rank holds and computes.

    ``world_size``: ranks (GPUs); ``zero``: :class:`ZeroConfig`; ``param_bytes``: bytes per weight of the loaded
    model (2 for bfloat16/float16, 4 for float32; activations use the same dtype); ``train_vision``: the vision tower
    is trained (GTA1 freezes it); ``lora_rank``: LoRA adapters instead of full fine-tuning (0: none);
    ``per_device_batch``: completions per micro-step (``per_device_train_batch_size``); ``num_generations``: G;
    ``steps_per_generation``: micro-steps one ``generate`` call feeds (TRL default: gradient accumulation steps);
    ``prompt_tokens``: P (image + text tokens); ``image_tokens``: the image's LM tokens (4 vision patches each);
    ``completion_tokens``: C (the padded completion width; at most ``max_completion_length``);
    ``shared_prompt``: shared-prompt GRPO (needs ``per_device_batch`` a multiple of G, else the run is naive);
    ``gradient_checkpointing``; ``logits``: ``"fused"`` (TRL 1.16) or ``"full"``; ``gather_for_generation``: ZeRO-3
    gathers every parameter for ``generate`` (TRL ``ds3_gather_for_generation``); the recompute policy:
    ``checkpoint_every`` (K: every K-th decoder layer checkpointed, ``--gradient_checkpointing_every``) and
    ``checkpoint_vision`` (the vision blocks too, ``--vision_gradient_checkpointing``); ``frozen_vision_backward``: a frozen
    vision tower still keeps its autograd graph under gradient checkpointing, because transformers 5.x's
    ``enable_input_require_grads`` hook (``modeling_utils.py``, added by ``gradient_checkpointing_enable`` to every
    sub-model's input embeddings, the vision patch embedding included) makes its output require grad: the tower's
    block inputs are checkpointed and it is recomputed and differentiated for its input (issue 29, what the H200 check
    measured). False by default: since issue 29 item 1 the frozen tower runs without autograd
    (:mod:`vlm_r1.vision_cache`); the calibration sets it per measured case (``frozen_vision_graph``).
    """

    world_size: int
    zero: ZeroConfig
    per_device_batch: int
    num_generations: int
    prompt_tokens: int
    image_tokens: int
    completion_tokens: int
    steps_per_generation: int = 1
    param_bytes: int = 2
    train_vision: bool = False
    lora_rank: int = 0
    shared_prompt: bool = True
    gradient_checkpointing: bool = True
    logits: str = "fused"
    gather_for_generation: bool = True
    checkpoint_every: int = 1
    checkpoint_vision: bool = True
    frozen_vision_backward: bool = False

    def __post_init__(self) -> None:
        for name in ("world_size", "per_device_batch", "num_generations", "prompt_tokens", "steps_per_generation"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if int(self.checkpoint_every) < 1:
            raise ValueError(f"checkpoint_every must be >= 1, got {self.checkpoint_every}")
        if self.image_tokens < 0 or self.completion_tokens < 0 or self.lora_rank < 0:
            raise ValueError("image_tokens, completion_tokens and lora_rank must be >= 0")
        if self.param_bytes not in (2, 4):
            raise ValueError(f"param_bytes must be 2 or 4, got {self.param_bytes}")
        if self.logits not in ("fused", "full"):
            raise ValueError(f"logits must be 'fused' or 'full', got {self.logits!r}")

    @property
    def shares(self) -> bool:
        """Shared-prompt packing is in effect: asked for, G > 1 and whole groups per micro-step."""
        return self.shared_prompt and self.num_generations > 1 and self.per_device_batch % self.num_generations == 0

    @property
    def vision_graph(self) -> bool:
        """The vision tower keeps an autograd graph in training: trained, or frozen under the checkpointing hook."""
        return self.train_vision or (self.gradient_checkpointing and self.frozen_vision_backward)


def micro_step_tokens(run: RunShape, shared: bool) -> int:
    """LM tokens of one micro-step: naive ``B x (P + C)``; shared ``B/G x (P - 1 + G x (C + 1))`` (the packed rows of
    :func:`vlm_r1.shared_prompt.pack_groups` for completions of full width C)."""
    B, G, P, C = run.per_device_batch, run.num_generations, run.prompt_tokens, run.completion_tokens
    if not shared:
        return B * (P + C)
    return B * (P - 1 + G * (C + 1)) // G  # B/G whole groups when sharing runs; pro rata for a comparison otherwise


# ---- the estimate ---------------------------------------------------------------------------------------------------
@dataclass
class Part:
    """One line of the estimate: ``name``, ``bytes`` per rank, ``how`` (the formula with its numbers), ``calibrated``
    (the activation factor is in ``bytes``)."""

    name: str
    bytes: float
    how: str
    calibrated: bool = False

    @property
    def gib(self) -> float:
        return self.bytes / GIB


@dataclass
class MemoryEstimate:
    """Per-rank memory of the two phases (:data:`phases`: name -> parts), the peak, and the inputs."""

    model: ModelShape
    run: RunShape
    calibration: Calibration
    phases: dict[str, list[Part]]
    counts: dict[str, int]
    comparison: dict[str, dict[str, float]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    inputs: list[str] = field(default_factory=list)

    def total(self, phase: str) -> float:
        """Bytes of ``phase``: the sum of its parts."""
        return sum(p.bytes for p in self.phases[phase])

    @property
    def peak_phase(self) -> str:
        return max(self.phases, key=self.total)

    @property
    def peak_bytes(self) -> float:
        return self.total(self.peak_phase)

    @property
    def peak_gib(self) -> float:
        return self.peak_bytes / GIB

    def over(self, gpu_memory_gib: float) -> bool:
        """True when the predicted peak exceeds :data:`WARN_FRACTION` (90%) of ``gpu_memory_gib``."""
        return self.peak_gib > WARN_FRACTION * gpu_memory_gib

    def band_gib(self) -> tuple[float, float] | None:
        """``(low, high)`` GiB the measured peak would lie in if this estimate erred as the calibration's measured
        cases did (``Calibration.error_band``: (predicted - measured) / measured), or None without a band."""
        band = self.calibration.error_band
        if band is None:
            return None
        return self.peak_gib / (1 + band[1]), self.peak_gib / (1 + band[0])

    def warning(self, gpu_memory_gib: float) -> str | None:
        """The warning line when the peak exceeds 90% of ``gpu_memory_gib``, else None."""
        if not self.over(gpu_memory_gib):
            return None
        largest = max(self.phases[self.peak_phase], key=lambda p: p.bytes)
        advice = {
            "parameters gathered for generate": "--ds3_gather_for_generation false (generate then gathers layer by "
            "layer: slower); more GPUs do not shrink this part",
            "KV cache": "fewer completions per generate call (ROLLOUTS_PER_DEVICE, or --steps_per_generation 1), a "
            "smaller pixel budget (MAX_PIXELS) or shorter completions",
            "prefill working set": "shared-prompt GRPO (--shared_prompt true, per-device batch a multiple of G), fewer "
            "completions per generate call or a smaller pixel budget (MAX_PIXELS)",
        }.get(
            largest.name,
            "a smaller per-device batch (ROLLOUTS_PER_DEVICE), a smaller pixel budget (MAX_PIXELS), a higher ZeRO "
            "stage or more GPUs",
        )
        return (
            f"WARNING: predicted peak {self.peak_gib:.1f} GiB per GPU ({self.peak_phase} phase) exceeds "
            f"{WARN_FRACTION:.0%} of the {gpu_memory_gib:g} GiB of GPU memory (--gpu-memory-gib; "
            f"{WARN_FRACTION * gpu_memory_gib:.1f} GiB): expect out-of-memory. Largest part: {largest.name} "
            f"{largest.gib:.1f} GiB; try {advice}"
        )

    def to_dict(self, gpu_memory_gib: float | None = None) -> dict:
        """JSON form: every part in GiB with its formula, the totals, the peak, the inputs and the calibration."""
        out = {
            "peak_gib": self.peak_gib,
            "peak_phase": self.peak_phase,
            "phases": {
                name: {
                    "total_gib": self.total(name) / GIB,
                    "parts": [{"name": p.name, "gib": p.gib, "how": p.how, "calibrated": p.calibrated} for p in parts],
                }
                for name, parts in self.phases.items()
            },
            "comparison_gib": self.comparison,
            "counts": self.counts,
            "model": asdict(self.model),
            "run": {**asdict(self.run), "zero": asdict(self.run.zero), "shares": self.run.shares},
            "calibration": asdict(self.calibration),
            "notes": self.notes,
            "inputs": self.inputs,
        }
        band = self.band_gib()
        out["peak_band_gib"] = list(band) if band else None
        if gpu_memory_gib is not None:
            out["gpu_memory_gib"] = gpu_memory_gib
            out["warn_above_gib"] = WARN_FRACTION * gpu_memory_gib
            out["fits"] = not self.over(gpu_memory_gib)
            out["warning"] = self.warning(gpu_memory_gib)
        return out

    def table(self, gpu_memory_gib: float | None = None) -> str:
        """Readable lines: one table per phase (part, GiB, formula), the peak, the naive/shared comparison, the
        calibration label, and the warning when over ``gpu_memory_gib``."""
        lines = [f"input: {line}" for line in self.inputs]
        width = max(len(p.name) for parts in self.phases.values() for p in parts)
        for name, parts in self.phases.items():
            lines.append(f"{name} phase (per rank):")
            for p in parts:
                mark = " *" if p.calibrated else ""
                lines.append(f"  {p.name:<{width}} {p.gib:8.2f} GiB{mark:2}  {p.how}")
            lines.append(f"  {'total':<{width}} {self.total(name) / GIB:8.2f} GiB")
        lines.append(
            f"predicted peak per GPU: {self.peak_gib:.2f} GiB ({self.peak_phase} phase)"
            + (f" of {gpu_memory_gib:g} GiB" if gpu_memory_gib is not None else "")
        )
        band, cal = self.band_gib(), self.calibration
        if band is not None:
            lines.append(
                f"calibration error band: predictions were {cal.error_band[0]:+.1%} to {cal.error_band[1]:+.1%} of the "
                f"measured peak over {cal.band_cases} measured case(s), so the peak is likely {band[0]:.1f}-"
                f"{band[1]:.1f} GiB"
            )
        else:
            lines.append("calibration error band: none (this calibration lists no measured cases)")
        for phase, c in self.comparison.items():
            lines.append(
                f"{phase} activations, naive vs shared-prompt: {c['naive_gib']:.2f} vs {c['shared_gib']:.2f} GiB "
                f"({c['naive_tokens']:,} vs {c['shared_tokens']:,} tokens)"
            )
        lines.append("* activation factor applied. " + self.calibration.describe())
        lines.extend(f"note: {n}" for n in self.notes)
        warning = self.warning(gpu_memory_gib) if gpu_memory_gib is not None else None
        if warning:
            lines.append(warning)
        return "\n".join(lines)


def layer_activation_bytes(model: ModelShape, a: int) -> int:
    """Bytes per token autograd saves in one decoder layer: ``12h + a*(4h + 3kv + 4I)`` (module docstring)."""
    h, kv, inter = model.hidden, model.kv_dim, model.intermediate
    return 12 * h + a * (4 * h + 3 * kv + 4 * inter)


def checkpointed_decoder_layers(model: ModelShape, run: RunShape) -> int:
    """Decoder layers the recompute policy checkpoints: ``ceil(L / checkpoint_every)``, 0 without checkpointing."""
    return math.ceil(model.layers / run.checkpoint_every) if run.gradient_checkpointing else 0


def _vision_patch_bytes(model: ModelShape, a: int) -> int:
    """Bytes per patch of the vision tower's no-grad working set (one block, module docstring): the larger of its
    attention step ``5a*h_v + 24h_v + 8hd_v`` and its MLP step ``a*(2h_v + 3I_v) + 8hd_v``."""
    vh, hd = model.vision_hidden, model.vision_hidden // model.vision_heads
    return max(5 * a * vh + 24 * vh, a * (2 * vh + 3 * model.vision_intermediate)) + 8 * hd


def _prefill_token_bytes(model: ModelShape, a: int) -> int:
    """Bytes per prefill token of one decoder layer without grad: ``a*(3h + 3I) + 2a*hd`` (residual, norm output,
    input embeddings; gate, up, SiLU(gate); cos and sin)."""
    return a * (3 * model.hidden + 3 * model.intermediate) + 2 * a * model.head_dim


def _vision_parts(model: ModelShape, run: RunShape, patches: int) -> tuple[float, float]:
    """``(saved, working)`` bytes of the vision tower in a training micro-step: with a graph (``run.vision_graph``)
    its blocks' checkpoints (or saved sets) and one block's recompute + backward; without, nothing saved and its
    no-grad working set."""
    a = run.param_bytes
    if not run.vision_graph:
        return 0.0, patches * _vision_patch_bytes(model, a)
    vlayer = 12 * model.vision_hidden + a * (7 * model.vision_hidden + 4 * model.vision_intermediate)
    depth = model.vision_depth
    vck = run.gradient_checkpointing and run.checkpoint_vision  # the recompute policy's vision switch
    vsaved = patches * (a * model.vision_hidden * (depth + 1) if vck else depth * vlayer)
    return vsaved, patches * (vlayer + 3 * a * model.vision_intermediate)


def _activations(model: ModelShape, run: RunShape, shared: bool) -> tuple[float, float, float, int, int]:
    """``(saved, working, vision, tokens, patches)`` bytes of one micro-step's training activations (uncalibrated)."""
    a, h, L = run.param_bytes, model.hidden, model.layers
    T = micro_step_tokens(run, shared)
    images = run.per_device_batch / run.num_generations if shared else run.per_device_batch
    patches = math.ceil(images * run.image_tokens * model.spatial_merge**2)
    layer = layer_activation_bytes(model, a)
    backward = 3 * a * model.intermediate
    n_c = checkpointed_decoder_layers(model, run)  # the others keep LAYER (module docstring, recompute policy)
    saved = T * (a * h * n_c + (L - n_c) * layer + a * h + 4 * h)
    working = T * (layer + backward) if n_c else T * backward
    vsaved, vision = _vision_parts(model, run, patches)
    return saved + vsaved, working, vision, T, patches


def estimate(model: ModelShape, run: RunShape, calibration: Calibration | None = None) -> MemoryEstimate:
    """The per-rank memory of ``run`` on ``model`` (formulas in the module docstring), calibrated by ``calibration``
    (default: uncalibrated)."""
    return _Estimate(model, run, calibration or Calibration()).result()


class _Estimate:
    """The steps of :func:`estimate` for one model, run and calibration: the resident states (parameters, gradients,
    optimizer states, master weights, ZeRO/DDP buffers), the training phase (checkpointed activations and the largest
    transient), the generation phase (KV cache, prefill working set), the naive vs shared comparison, and the counts
    and input lines. The formulas are the module docstring's; each step reads the numbers the ones before it set."""

    def __init__(self, model: ModelShape, run: RunShape, cal: Calibration):
        self.model, self.run, self.cal = model, run, cal
        self.k = cal.activation_factor
        self.a = run.param_bytes
        self.lm, self.vision = model.lm_params(), model.vision_params()
        self.lora = model.lora_params(run.lora_rank) if run.lora_rank else 0
        self.total = self.lm + self.vision + self.lora
        self.trainable = self.lora if run.lora_rank else self.lm + (self.vision if run.train_vision else 0)
        self.notes: list[str] = []
        if run.shared_prompt and not run.shares and run.num_generations > 1:
            self.notes.append(
                f"shared-prompt GRPO asked for, but per-device batch {run.per_device_batch} is not a multiple of "
                f"G={run.num_generations}: the trainer runs naive (estimated so)"
            )

    def result(self) -> MemoryEstimate:
        """The estimate: both phases, the comparison, the notes, the counts and the input lines."""
        resident = self.resident()
        overhead = Part(
            "overhead (fixed)", self.cal.overhead_gib * GIB, "CUDA context, NCCL, allocator fragmentation (calibration)"
        )
        training = resident + self.training_activations() + [overhead]
        generation = resident + self.generation_parts() + [overhead]
        comparison = self.comparison()
        if self.run.gradient_checkpointing is False:
            self.notes.append("gradient checkpointing is off: every layer keeps its activations")
        phases = {"training": training, "generation": generation}
        return MemoryEstimate(
            self.model, self.run, self.cal, phases, self.counts(), comparison, self.notes, self.input_lines()
        )

    # ---- resident states -----------------------------------------------------------------------------------------
    def resident(self) -> list[Part]:
        """Parameters, gradients, optimizer states, master weights and ZeRO/DDP buffers, each sharded as the ZeRO
        stage shards it (offloaded parts are 0)."""
        z, a, N, trainable = self.run.zero, self.a, self.run.world_size, self.trainable
        p_shard = N if z.stage == 3 else 1
        g_shard = N if z.stage >= 2 else 1
        o_shard = N if z.stage >= 1 else 1
        params_b = 0.0 if z.offload_params else self.total * a / p_shard
        grads_b = trainable * a / g_shard
        adam_b, master_b, opt_how = self._optimizer(o_shard)
        buf_b, buf_how = self._buffers()
        where = {0: "not sharded (DDP)", 1: "ZeRO-1", 2: "ZeRO-2", 3: "ZeRO-3"}[z.stage]
        lora = self.lora
        return [
            Part(
                "parameters",
                params_b,
                f"{self.total:,} params x {a} B / {p_shard}"
                + (" (offloaded to CPU)" if z.offload_params else "")
                + f" ({self.lm:,} LM + {self.vision:,} vision{f' + {lora:,} LoRA' if lora else ''}; {where})",
            ),
            Part("gradients", grads_b, f"{trainable:,} trainable x {a} B / {g_shard}"),
            Part("optimizer states", adam_b, opt_how),
            Part(
                "master weights (fp32)",
                master_b,
                "none: the weights are fp32 or not sharded by DeepSpeed"
                if master_b == 0 and not z.offload_optimizer
                else f"{trainable:,} x 4 B / {o_shard}" + (" (offloaded to CPU)" if z.offload_optimizer else ""),
            ),
            Part("ZeRO/DDP buffers", buf_b, buf_how),
        ]

    def _optimizer(self, o_shard: int) -> tuple[float, float, str]:
        """``(Adam states, fp32 master weights, formula)``: torch AdamW in the weights' dtype without DeepSpeed, fp32
        states and masters sharded by ``o_shard`` under ZeRO (none on the GPU when offloaded; no masters for fp32)."""
        z, a, trainable = self.run.zero, self.a, self.trainable
        if z.stage == 0:
            return (
                trainable * 2 * a,
                0.0,
                f"AdamW m, v in the weights' dtype: {trainable:,} x 2 x {a} B (no DeepSpeed: not sharded)",
            )
        adam_b = 0.0 if z.offload_optimizer else trainable * 8 / o_shard
        master_b = 0.0 if (z.offload_optimizer or a == 4) else trainable * 4 / o_shard
        opt_how = f"AdamW m, v fp32: {trainable:,} x 8 B / {o_shard}" + (
            " (offloaded to CPU)" if z.offload_optimizer else ""
        )
        return adam_b, master_b, opt_how

    def _buffers(self) -> tuple[float, str]:
        """``(bytes, formula)`` of the DDP gradient buckets or the ZeRO buckets (ZeRO-3: plus the gathered layers)."""
        z, a, h, model = self.run.zero, self.a, self.model.hidden, self.model
        if z.stage == 0:
            return self.trainable * a, f"DDP gradient buckets (a copy of the gradients): {self.trainable:,} x {a} B"
        if z.stage in (1, 2):
            elems = (z.reduce_bucket_size or h * h) + (z.allgather_bucket_size or h * h)
            return elems * a, f"reduce + allgather buckets: {elems:,} elements x {a} B ({z.source})"
        largest = max(2 * model.decoder_layer_params(), model.embedding_params())
        live = min(z.max_live_parameters or largest, largest + (z.prefetch_bucket_size or int(0.9 * h * h)))
        elems = live + (z.reduce_bucket_size or h * h)
        return elems * a, f"gathered layers + prefetch + reduce bucket: {elems:,} elements x {a} B ({z.source})"

    # ---- training phase ------------------------------------------------------------------------------------------
    def training_activations(self) -> list[Part]:
        """The activations alive at the micro-step's largest moment (:mod:`gui_grounding.ops.memory_peak`), saved and
        transient (both calibrated), and the gradients not yet made then (a negative part). Sets ``T``,
        ``patches``, ``scored``, ``logits_b``, ``moments`` and ``peak_moment``."""
        run, k = self.run, self.k
        self.scored = run.per_device_batch * run.completion_tokens
        self.logits_b, logits_how = self._logits()
        step, self.T, self.patches = self._step_bytes(run.shares)
        self.moments = self._moments(step)
        top = peak(self.moments, k)
        self.peak_moment = top
        listed = "; ".join(f"{m.name} {m.above_resident(k) / GIB:.2f}" for m in self.moments)
        ck = "checkpointed inputs" if run.gradient_checkpointing else "saved activations"
        vision = "vision tower with its graph" if run.vision_graph else "vision tower without grad"
        return [
            Part(
                "activations: saved at the peak",
                top.saved * k,
                f"{top.name}: decoder {ck} ({self._saved_how(self.T)}) and {vision}, as alive then",
                True,
            ),
            Part(
                "activations: transient at the peak",
                top.transient * k,
                f"{top.name}; moments above the resident states (GiB): {listed}; head: {logits_how}",
                True,
            ),
            Part(
                "gradients not yet made at the peak",
                -top.grads_missing,
                f"{top.name}: the gradients the backward makes after it (of {self.trainable:,} trainable)",
            ),
        ]

    def _moments(self, step: StepBytes) -> list[Moment]:
        """The moments of ``step``; under DeepSpeed the gradients count whole at every moment (its partitioned
        gradient buffers need not be freed between steps; only the plain-PyTorch release, ``zero_grad(set_to_none)``,
        was measured)."""
        found = moments(step)
        if self.run.zero.stage:
            found = [replace(m, grads_missing=0.0) for m in found]
        return found

    def _step_bytes(self, shared: bool) -> tuple[StepBytes, int, int]:
        """The :class:`~gui_grounding.ops.memory_peak.StepBytes` of one micro-step (naive or ``shared``), its LM
        tokens and its vision patches."""
        model, run, a = self.model, self.run, self.a
        saved, working, vision, T, patches = _activations(model, run, shared)
        vsaved, _ = _vision_parts(model, run, patches)
        const = T * (a * model.hidden + 4 * model.hidden)  # the final norm's inputs
        g_shard = run.world_size if run.zero.stage >= 2 else 1
        lora = bool(run.lora_rank)
        head = 0 if lora else model.vocab * model.hidden * a / g_shard
        layer = (self.lora / model.layers if lora else model.decoder_layer_params()) * a / g_shard
        embed = 0 if lora or model.tie_embeddings else model.embedding_params() * a / g_shard
        step = StepBytes(
            head_grad=head,
            layer_grad=layer,
            layers=model.layers,
            embed_grad=embed,
            vision_grad=self.vision * a / g_shard if run.train_vision and not lora else 0.0,
            all_grads=self.trainable * a / g_shard,
            head_grad_in_transient=run.logits == "fused" and not lora,
            layer_saved=(saved - vsaved - const) / model.layers,
            saved_const=const,
            layer_working=working,
            head_transient=self.logits_b,
            vision_saved=vsaved,
            vision_depth=model.vision_depth,
            vision_working=vision,
            vision_graph=run.vision_graph,
        )
        return step, T, patches

    def _logits(self) -> tuple[float, str]:
        """``(bytes, formula)`` of the log-probs of the scored tokens: full logits, or TRL's fused head (one tile, the
        fp32 hidden-state gradient, and the LM head's weight gradient when the head trains)."""
        model, a, h, scored = self.model, self.a, self.model.hidden, self.scored
        if self.run.logits == "full":
            return (
                scored * model.vocab * (a + 4),
                f"LM head full logits {scored:,} x {model.vocab:,} x ({a} + 4 fp32) B",
            )
        head_trainable = not self.run.lora_rank
        tile = min(scored, FUSED_TOKEN_TILE) * FUSED_VOCAB_TILE * a
        logits_b = tile + scored * h * 4 + (model.vocab * h * (4 + a) if head_trainable else 0)
        logits_how = f"LM head fused log-probs (tile {min(scored, FUSED_TOKEN_TILE):,}x{FUSED_VOCAB_TILE:,}" + (
            f", weight grad {model.vocab:,}x{h:,} x (4 fp32 + {a}) B)" if head_trainable else ")"
        )
        return logits_b, logits_how

    def _saved_how(self, T: int) -> str:
        """The formula of the saved activations of ``T`` tokens, with the rows they come from (naive or shared)."""
        model, run, a, h = self.model, self.run, self.a, self.model.hidden
        n_c, L = checkpointed_decoder_layers(model, run), model.layers
        if n_c == L:
            ck_how = f"{T:,} tokens x (({L} + 1) x {h:,} x {a} B + 4 x {h:,})"
        elif n_c:  # the recompute policy: every K-th layer checkpointed
            ck_how = (
                f"{T:,} tokens x (({n_c} checkpointed + 1) x {h:,} x {a} B + {L - n_c} kept x "
                f"{layer_activation_bytes(model, a):,} B + 4 x {h:,}) [every {run.checkpoint_every} of {L} layers]"
            )
        else:
            ck_how = f"{T:,} tokens x {L} layers x {layer_activation_bytes(model, a):,} B"
        if run.train_vision and run.gradient_checkpointing and not run.checkpoint_vision:
            ck_how += " + vision blocks kept"
        if run.shares:
            return ck_how + f" [shared: {run.per_device_batch // run.num_generations} group(s) x (P-1 + G x (C+1))]"
        return ck_how + f" [naive: {run.per_device_batch} rows x (P + C)]"

    # ---- generation phase ----------------------------------------------------------------------------------------
    def generation_parts(self) -> list[Part]:
        """The parameters ZeRO-3 gathers for ``generate`` (when it does), the KV cache of the generation batch and the
        prefill working set (times the prefill factor; the trainer shares generation and training alike, or neither).
        Sets ``rows`` and ``prompts``."""
        model, run, a, k = self.model, self.run, self.a, self.cal.prefill
        rows = run.per_device_batch * run.steps_per_generation
        prompts = -(-rows // run.num_generations)
        self.rows, self.prompts = rows, prompts
        P, C = run.prompt_tokens, run.completion_tokens
        kv = rows * (P + C) * model.layers * 2 * model.kv_dim * a
        gen_shared = run.shares
        prefill_tokens = prompts * P if gen_shared else rows * P
        images = prompts if gen_shared else rows
        gen_work_lm = prefill_tokens * _prefill_token_bytes(model, a)
        gen_work_vis = images * run.image_tokens * model.spatial_merge**2 * _vision_patch_bytes(model, a)
        parts = []
        if run.zero.stage == 3 and run.gather_for_generation:
            parts.append(
                Part(
                    "parameters gathered for generate",
                    self.total * a,
                    f"ZeRO-3 ds3_gather_for_generation: {self.total:,} x {a} B",
                )
            )
        return parts + [
            Part(
                "KV cache",
                kv,
                f"{rows:,} rows x ({P:,} + {C:,}) tokens x {model.layers} layers x 2 x {model.kv_dim} x {a} B",
            ),
            Part(
                "prefill working set",
                max(gen_work_lm, gen_work_vis) * k,
                f"max({'shared' if gen_shared else 'naive'} prefill {prefill_tokens:,} tokens x "
                f"{_prefill_token_bytes(model, a):,} B, vision {images:,} images x {run.image_tokens * 4:,} patches x "
                f"{_vision_patch_bytes(model, a):,} B)",
                True,
            ),
        ]

    # ---- naive vs shared -----------------------------------------------------------------------------------------
    def comparison(self) -> dict[str, dict[str, float]]:
        """Training activations and generation prefill, naive vs shared-prompt, in GiB (calibrated) and tokens. The
        training figure is the activations above the resident states at each mode's largest moment."""
        model, run, a, k = self.model, self.run, self.a, self.k
        acts = {}
        for mode, flag in (("naive", False), ("shared", True)):
            step, t, _ = self._step_bytes(flag and run.num_generations > 1)
            acts[mode] = (max(0.0, peak(self._moments(step), k).above_resident(k)) / k, t)
        P, rows, prompts = run.prompt_tokens, self.rows, self.prompts
        patches_per_image = run.image_tokens * model.spatial_merge**2
        prefill = {
            mode: max(
                n_rows * P * _prefill_token_bytes(model, a), n_rows * patches_per_image * _vision_patch_bytes(model, a)
            )
            for mode, n_rows in (("naive", rows), ("shared", prompts))
        }
        return {
            "training": {
                "naive_gib": acts["naive"][0] * k / GIB,
                "shared_gib": acts["shared"][0] * k / GIB,
                "naive_tokens": acts["naive"][1],
                "shared_tokens": acts["shared"][1],
            },
            "generation prefill": {
                "naive_gib": prefill["naive"] * self.cal.prefill / GIB,
                "shared_gib": prefill["shared"] * self.cal.prefill / GIB,
                "naive_tokens": rows * P,
                "shared_tokens": prompts * P,
            },
        }

    # ---- what the estimate reports -------------------------------------------------------------------------------
    def counts(self) -> dict[str, Any]:
        """Parameter, token and patch counts, and the training moments (bytes above the resident states,
        calibrated; the peak's name)."""
        return {
            "params_total": self.total,
            "params_lm": self.lm,
            "params_vision": self.vision,
            "params_lora": self.lora,
            "params_trainable": self.trainable,
            "tokens_per_micro_step": self.T,
            "scored_tokens_per_micro_step": self.scored,
            "moment_bytes": {m.name: int(m.above_resident(self.k)) for m in self.moments},
            "peak_moment": self.peak_moment.name,
            "vision_patches_per_micro_step": self.patches,
            "generation_rows": self.rows,
            "generation_prompts": self.prompts,
            # the recompute policy's time side: extra decoder FLOPs of the checkpointed layers' second forward
            "decoder_layers_checkpointed": checkpointed_decoder_layers(self.model, self.run),
            "recompute_decoder_flops_fraction": checkpointed_decoder_layers(self.model, self.run)
            / (3 * self.model.layers),
            "recompute_vision": bool(
                self.run.train_vision and self.run.gradient_checkpointing and self.run.checkpoint_vision
            ),
        }

    def _recompute_label(self) -> str:
        """``on``/``off``, with the recompute policy when it is not every layer of both stacks."""
        run = self.run
        if not run.gradient_checkpointing:
            return "off"
        every = f" (1 in {run.checkpoint_every} decoder layers)" if run.checkpoint_every > 1 else ""
        return "on" + every + (" (vision blocks kept)" if run.train_vision and not run.checkpoint_vision else "")

    def input_lines(self) -> list[str]:
        """The three ``input:`` lines: the model, the parallel set-up, the batch shape."""
        model, run, z, a = self.model, self.run, self.run.zero, self.a
        zero_name = "no DeepSpeed (DDP)" if z.stage == 0 else f"ZeRO-{z.stage}"
        return [
            f"model {model.name}: {self.total:,} parameters, {self.trainable:,} trainable; h={model.hidden}, "
            f"L={model.layers}, kv={model.kv_dim}, I={model.intermediate}, V={model.vocab} "
            f"({model.source or 'shape given'})",
            f"{run.world_size} GPU(s), {zero_name} ({z.source}), weights {'bf16/fp16' if a == 2 else 'fp32'}, "
            f"gradient checkpointing {self._recompute_label()}, "
            f"{'shared-prompt' if run.shares else 'naive'} GRPO",
            f"per-device batch B={run.per_device_batch} completions, G={run.num_generations}, prompt "
            f"P={run.prompt_tokens:,} tokens ({run.image_tokens:,} image), completion C={run.completion_tokens}, "
            f"steps_per_generation {run.steps_per_generation}",
        ]


def with_world_size(run: RunShape, world_size: int) -> RunShape:
    """``run`` on ``world_size`` ranks (everything else the same)."""
    return replace(run, world_size=world_size)
