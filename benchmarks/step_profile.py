"""Where the seconds of one GRPO training step go, and its model FLOP utilisation (issue 29 item 5).

Used by ``benchmarks/gpu_check.py``; imports torch only when profiling.

**Breakdown** (:func:`profile_step`): one step runs under ``torch.profiler`` with every module of interest wrapped in a
``record_function`` label by forward hooks (:func:`label_modules`): the vision tower (``visual``), each decoder layer's
attention (``self_attn``) and MLP (``mlp``), the language backbone (``other``: embeddings, norms, rotary, residuals,
masks) and the whole model (``lm_head_loss``: TRL's fused LM head runs in the top-level forward, outside the backbone;
the GRPO loss is labelled by the caller); the optimizer step and its ``zero_grad`` are labelled ``optimizer``. The
backward inherits its forward's label: an autograd node carries the sequence number and thread of the forward op that
made it (``sequence_nr``, ``fwd_thread_id``), so its kernels count where that op was labelled; recomputation under
gradient checkpointing runs the modules again, so it is labelled directly. The busy intervals are the GPU's kernels and
memory copies (each belongs to the CPU op that launched it: the profiler's correlation id) or, on a CPU, the innermost
CPU ops; each instant of the step is counted once (overlaps go to the kernel that started first), and the time no
kernel runs is **idle**: the CPU gaps between kernels (launch overhead, Python, synchronisation). The categories sum to
the step's wall time in the profiler's window (the ``gc::step`` label, synchronised) and never exceed it.

**MFU** (:func:`model_flops`): model FLOPs of one training step = ``6 N T + 3 A + V`` (issue 29's definition): ``N``
the language model's parameters that multiply every token (decoder layers, final norm and LM head, not the input
embedding table), ``T`` the LLM tokens of the step (no padding), ``A`` the attention forward FLOPs (``4 d`` per
attended query-key pair per layer: ``2 d`` for QK^T and ``2 d`` for AV, ``d`` = heads x head_dim; causal pairs of each
row, or of the shared layout: the prompt once and every suffix against the prompt and itself), ``V`` one forward of the
frozen vision tower per screenshot (``2`` FLOPs per parameter per patch, the merger per merged token, and its attention
within windows and in its full-attention blocks). No credit for recomputation or for the G copies of the naive path's
image. MFU = model FLOPs / (seconds x peak), peak :data:`PEAK_BF16_FLOPS` (989 TFLOP/s: dense bf16 of the H100 SXM
and H200, NVIDIA datasheets https://www.nvidia.com/en-us/data-center/h100/ and .../h200/).
"""

from __future__ import annotations

import contextlib
import threading
import time
from dataclasses import dataclass

#: dense bf16 tensor-core peak of the H100 SXM and the H200 (the same chip's compute), FLOP/s
PEAK_BF16_FLOPS = 989e12
LABEL = "gc::"
STEP_LABEL = LABEL + "step"
CATEGORIES = ("vision", "attention", "mlp", "lm_head_loss", "optimizer", "other", "idle")
DESCRIPTIONS = {
    "vision": "vision tower (patch embedding, blocks, merger), forward and any backward",
    "attention": "decoder self-attention (q/k/v/o projections, rotary, the attention kernel), fwd + recompute + bwd",
    "mlp": "decoder MLP (gate/up/down projections, SiLU), fwd + recompute + bwd",
    "lm_head_loss": "LM head (TRL's fused log-probs and entropy) and the GRPO loss",
    "optimizer": "optimizer step and zero_grad",
    "other": "the rest: embeddings, norms, residuals, masks, position ids, gradient accumulation, unlabelled ops",
    "idle": "no kernel running (GPU): the CPU gaps between kernels; on a CPU, time outside any op",
}
FORMULA = (
    "model_flops = 6*N*T + 3*A + V; N = language-model parameters multiplying every token (decoder layers + final "
    "norm + LM head, not the input embeddings); T = LLM tokens of the step (no padding); A = attention forward = "
    "4 * d_attn * layers * (attended query-key pairs: causal per row; shared layout: prompt causal + each suffix "
    "against the prompt and itself); V = one forward of the frozen vision tower per screenshot = 2 * (patch "
    "embedding + blocks params) * patches + 2 * merger params * merged tokens + 4 * h_v * (pairs within windows in "
    "windowed blocks, all patch pairs in full-attention blocks); no credit for recomputation; "
    "MFU = model_flops / (fwd_bwd_s * peak_flops)"
)


# ---- MFU ------------------------------------------------------------------------------------------------------------
def causal_pairs(lengths) -> int:
    """Query-key pairs a causal attention computes over rows of these lengths: ``sum n (n + 1) / 2``."""
    return sum(n * (n + 1) // 2 for n in lengths)


def shared_pairs(prompt: int, suffixes) -> int:
    """Pairs of the shared layout: the prompt causally, then each suffix against the prompt and causally itself."""
    return causal_pairs([prompt]) + sum(s * prompt + s * (s + 1) // 2 for s in suffixes)


def window_pairs(grid_h: int, grid_w: int, merge: int, window_cells: int) -> int:
    """Patch pairs of one windowed vision block: windows of ``window_cells`` x ``window_cells`` merged cells (smaller
    at the right and bottom edges), ``merge**2`` patches a cell, full attention inside each window."""

    def sides(cells: int) -> list[int]:
        return [min(window_cells, cells - i) for i in range(0, cells, window_cells)]

    rows, cols = sides(grid_h // merge), sides(grid_w // merge)
    return sum((a * b * merge * merge) ** 2 for a in rows for b in cols)


def vision_flops(
    grid_h: int,
    grid_w: int,
    hidden: int,
    depth: int,
    full_blocks: int,
    window_cells: int,
    merge: int,
    patch_params: int,
    merger_params: int,
) -> int:
    """FLOPs of one vision-tower forward over a ``grid_h`` x ``grid_w`` patch grid (module docstring):
    ``patch_params`` = patch embedding + blocks parameters, ``merger_params`` the merger's."""
    patches = grid_h * grid_w
    windowed = (depth - full_blocks) * window_pairs(grid_h, grid_w, merge, window_cells)
    full = full_blocks * patches * patches
    return (
        2 * patch_params * patches + 2 * merger_params * (patches // (merge * merge)) + 4 * hidden * (windowed + full)
    )


def model_flops(params: int, tokens: int, attn_width: int, layers: int, pairs: int, vision: int) -> dict:
    """Model FLOPs of one training step, ``6 N T + 3 A + V`` (module docstring), and its three terms."""
    llm = 6 * params * tokens
    attention = 3 * 4 * attn_width * layers * pairs
    return {"total": llm + attention + vision, "llm_6NT": llm, "attention_3A": attention, "vision_V": vision}


def mfu(flops: float, seconds: float, peak: float = PEAK_BF16_FLOPS) -> float:
    """Model FLOP utilisation: ``flops / (seconds x peak)``."""
    return flops / (seconds * peak)


# ---- labels ---------------------------------------------------------------------------------------------------------
def module_labels(model) -> list[tuple[str, object, str]]:
    """``(name, module, category)`` of the modules to label (module docstring): the whole model, its backbone
    (``base_model_prefix``: the vision-language model under the LM head), the vision tower, and each decoder layer's
    ``self_attn`` and ``mlp``."""
    found = [("", model, "lm_head_loss")]
    backbone = getattr(model, getattr(model, "base_model_prefix", "") or "model", None)
    for name, module in model.named_modules():
        parts = name.split(".")
        if not name or "visual" in parts[:-1]:
            continue  # inside the vision tower: its own label covers it
        if module is backbone:
            found.append((name, module, "other"))
        elif parts[-1] == "visual":
            found.append((name, module, "vision"))
        elif parts[-1] == "self_attn":
            found.append((name, module, "attention"))
        elif parts[-1] == "mlp" and ".layers." in f".{name}.":
            found.append((name, module, "mlp"))
    return found


@contextlib.contextmanager
def label_modules(model):
    """Forward hooks that open a ``record_function(gc::<category>)`` range around each labelled module's forward (a
    stack per thread: the backward's recomputation runs on the autograd thread on a GPU)."""
    from torch.autograd.profiler import record_function

    local = threading.local()
    handles = []

    def enter(category):
        def hook(module, args):
            rf = record_function(LABEL + category)
            rf.__enter__()
            local.__dict__.setdefault("stack", []).append(rf)

        return hook

    def leave(module, args, output):
        stack = local.__dict__.get("stack")
        if stack:
            stack.pop().__exit__(None, None, None)

    try:
        for _, module, category in module_labels(model):
            handles.append(module.register_forward_pre_hook(enter(category)))
            handles.append(module.register_forward_hook(leave))
        yield
    finally:
        for h in handles:
            h.remove()


# ---- events ---------------------------------------------------------------------------------------------------------
@dataclass
class Event:
    """One profiler event: ``kind`` is ``label`` (a ``gc::`` range), ``op`` (a CPU op or other range), ``kernel``
    (GPU kernel, copy or set) or ``runtime`` (CUDA runtime/driver calls; not used); times in ns; ``thread`` is the
    profiler's thread id (the numbering ``fwd_thread`` uses); ``corr`` the op's correlation id, ``linked`` the
    launching op's for a kernel; ``seq``/``fwd_thread``: the autograd sequence number and, for a backward node, the
    thread of the forward op that made it (0 for forward ops)."""

    name: str
    kind: str
    start: int
    end: int
    thread: int = 0
    corr: int = 0
    linked: int = 0
    seq: int = -1
    fwd_thread: int = 0


def events_from_profiler(prof) -> list[Event]:
    """The :class:`Event` list of a finished ``torch.profiler.profile`` (its Kineto results)."""
    out = []
    for e in prof.profiler.kineto_results.events():
        activity = str(e.activity_type())
        start, duration = e.start_ns(), e.duration_ns()
        if "CPU" not in str(e.device_type()):
            if activity in ("kernel", "gpu_memcpy", "gpu_memset"):
                out.append(Event(e.name(), "kernel", start, start + duration, linked=e.linked_correlation_id()))
            continue
        if activity in ("cuda_runtime", "cuda_driver") or e.name() == "[memory]":
            continue
        kind = "label" if e.is_user_annotation() and e.name().startswith(LABEL) else "op"
        out.append(
            Event(
                e.name(),
                kind,
                start,
                start + duration,
                thread=e.start_thread_id(),
                corr=e.correlation_id(),
                seq=e.sequence_nr(),
                fwd_thread=e.fwd_thread_id(),
            )
        )
    return out


def _parents(cpu: list[Event]) -> list[int]:
    """The innermost enclosing event of each CPU event on its thread (-1: none), by time nesting."""
    parent = [-1] * len(cpu)
    order = sorted(range(len(cpu)), key=lambda i: (cpu[i].thread, cpu[i].start, -cpu[i].end))
    stack: list[int] = []
    thread = None
    for i in order:
        e = cpu[i]
        if e.thread != thread:
            stack, thread = [], e.thread
        while stack and cpu[stack[-1]].end <= e.start:
            stack.pop()
        parent[i] = stack[-1] if stack else -1
        stack.append(i)
    return parent


def breakdown(events: list[Event], window: str = STEP_LABEL) -> dict:
    """Seconds of the ``window`` label's span per :data:`CATEGORIES` (module docstring), and what was counted."""
    cpu = [e for e in events if e.kind in ("label", "op")]
    spans = [e for e in cpu if e.name == window]
    if not spans:
        raise ValueError(f"no {window!r} range in the profile")
    w0, w1 = min(e.start for e in spans), max(e.end for e in spans)
    parent = _parents(cpu)
    children = [0] * len(cpu)
    for p in parent:
        if p >= 0:
            children[p] += 1
    memo: dict[int, str | None] = {}

    def own_label(i: int) -> str | None:
        """The category of the nearest labelled range around event ``i``, or via the forward op of a backward node."""
        chain, found = [], None
        j = i
        while j >= 0:
            if j in memo:
                found = memo[j]
                break
            chain.append(j)
            e = cpu[j]
            if e.kind == "label" and e.name != window:
                found = e.name[len(LABEL) :]
                break
            if e.fwd_thread > 0 and e.seq >= 0 and (e.fwd_thread, e.seq) in forward:
                found = forward[(e.fwd_thread, e.seq)]
                break
            j = parent[j]
        for k in chain:
            memo[k] = found
        return found

    forward: dict[tuple[int, int], str | None] = {}
    for i, e in enumerate(cpu):  # forward ops, outermost first (nested ops share a sequence number)
        if e.seq >= 0 and e.fwd_thread == 0 and (e.thread, e.seq) not in forward:
            forward[(e.thread, e.seq)] = own_label(i)
    memo.clear()
    by_corr = {e.corr: i for i, e in enumerate(cpu) if e.corr}
    kernels = [e for e in events if e.kind == "kernel"]
    if kernels:
        busy = [(k.start, k.end, by_corr.get(k.linked, -1), k.name) for k in kernels]
    else:
        busy = [(e.start, e.end, i, e.name) for i, e in enumerate(cpu) if children[i] == 0 and e.kind == "op"]
    seconds = dict.fromkeys(CATEGORIES, 0.0)
    top: dict[tuple[str, str], list] = {}
    covered = w0
    for start, end, owner, name in sorted(busy):
        start, end = max(start, w0, covered), min(end, w1)
        if end <= start:
            continue
        covered = end
        category = (own_label(owner) if owner >= 0 else None) or "other"
        category = category if category in seconds else "other"
        seconds[category] += (end - start) / 1e9
        t = top.setdefault((category, name), [0.0, 0])
        t[0] += (end - start) / 1e9
        t[1] += 1
    window_s = (w1 - w0) / 1e9
    seconds["idle"] = max(0.0, window_s - sum(seconds.values()))
    ranked = sorted(top.items(), key=lambda kv: -kv[1][0])[:12]
    return {
        "window_s": window_s,
        "seconds": seconds,
        "fractions": {k: v / window_s if window_s else 0.0 for k, v in seconds.items()},
        "busy": "gpu kernels" if kernels else "cpu ops (innermost)",
        "busy_intervals": len(busy),
        "top": [{"category": c, "name": n[:120], "s": round(v[0], 6), "count": v[1]} for (c, n), v in ranked],
    }


def profile_step(step, model, synchronize=None) -> dict:
    """Run ``step()`` once under the profiler with the module labels (module docstring) and return its
    :func:`breakdown`, plus ``wall_s`` (perf_counter around the profiled step: it includes the profiler's own cost).
    ``synchronize`` (e.g. ``torch.cuda.synchronize``) runs inside the window, so the kernels finish in it."""
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function

    activities = [ProfilerActivity.CPU]
    if torch.cuda.is_available() and next(model.parameters()).is_cuda:
        activities.append(ProfilerActivity.CUDA)
    with label_modules(model), profile(activities=activities) as prof:
        t = time.perf_counter()
        with record_function(STEP_LABEL):
            step()
            if synchronize is not None:
                synchronize()
        wall = time.perf_counter() - t
    out = breakdown(events_from_profiler(prof))
    out["wall_s"] = wall
    return out
