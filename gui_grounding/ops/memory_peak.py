"""When a training micro-step peaks (issue 29): the moments of its backward, for :mod:`gui_grounding.ops.memory`.

A backward frees activations as it makes gradients, so the parameters' gradients, the checkpoints and the transients
are never all alive at once. Counting them all together (the estimator before issue 29) over-predicted the shared-prompt
group measured on an H200 by 12% and under-predicted the naive 4K group by 11%. The moments, in the order they come
(HF Qwen2.5-VL with gradient checkpointing; TRL's fused LM head; gradients start empty, ``zero_grad(set_to_none)``):

* **LM-head backward**, first: every checkpoint alive (decoder and vision), the head's transient (fused head: one tile,
  the fp32 hidden-state gradient, the head's weight gradient in fp32 and its cast), no parameter gradient yet;
* **decoder backward**: the backward of decoder layer ``j`` holds the checkpoints of layers ``0..j``, the gradients of
  the head and of layers ``j+1..L-1``, the vision tower's checkpoints and one layer's recompute + backward working
  set. The sum is linear in ``j``, so it is largest at ``j = L-1`` (the first layer differentiated: every checkpoint,
  few gradients; long rows) or at ``j = 0`` (the last: every layer's gradient; short rows);
* **vision backward**, when the tower keeps its autograd graph (trained, or frozen while transformers 5.x's
  checkpointing hook makes its patch-embedding output require grad): every language-model gradient (the input
  embedding's arrives after the decoder's), the vision checkpoints of blocks ``0..j`` and the vision gradients of the
  blocks after ``j`` (trained tower), one block's working set; largest at its first or last block as above;
* **vision forward**, when the frozen tower runs without a graph: its no-grad working set, before anything else;
* **optimizer step**: every gradient, no activation.

The peak is the largest moment. Activation-like bytes (saved and transient) carry the calibration's activation factor;
gradients do not. Pure arithmetic on the numbers :mod:`gui_grounding.ops.memory` computes (bytes per rank).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class StepBytes:
    """The bytes per rank that decide a micro-step's moments (uncalibrated).

    Gradients (each already divided as the ZeRO stage shards them): ``head_grad`` (LM head), ``layer_grad`` (one of
    ``layers`` decoder layers), ``embed_grad`` (input embeddings), ``vision_grad`` (the whole tower, 0 when frozen),
    ``all_grads`` (every gradient the rank holds after the backward). ``head_grad_in_transient``: the head's weight
    gradient is part of ``head_transient`` (TRL's fused head), else it appears with the head's backward.

    Activations: ``layer_saved`` (what one decoder layer keeps for backward: its checkpointed input, or its whole saved
    set without checkpointing), ``saved_const`` (the final norm's inputs, freed before the layers' backward),
    ``layer_working`` (one layer recomputed + its backward, or the backward buffers alone), ``head_transient``,
    ``vision_saved`` (every vision block's saved tensors; 0 without a graph), ``vision_depth``, ``vision_working``
    (one block's recompute + backward with a graph; the no-grad working set without one), ``vision_graph``.
    """

    head_grad: float
    layer_grad: float
    layers: int
    embed_grad: float
    vision_grad: float
    all_grads: float
    head_grad_in_transient: bool
    layer_saved: float
    saved_const: float
    layer_working: float
    head_transient: float
    vision_saved: float
    vision_depth: int
    vision_working: float
    vision_graph: bool


@dataclass(frozen=True)
class Moment:
    """One moment of the micro-step: activation bytes ``saved`` and ``transient`` (uncalibrated), and the gradients
    not yet made then (``grads_missing``, bytes per rank, subtracted from the whole ``gradients`` part)."""

    name: str
    saved: float
    transient: float
    grads_missing: float

    def above_resident(self, factor: float) -> float:
        """Bytes above the resident states at this moment: calibrated activations minus the missing gradients."""
        return factor * (self.saved + self.transient) - self.grads_missing


def moments(b: StepBytes) -> list[Moment]:
    """The moments of the module docstring, in the order they come."""
    L, G = b.layers, b.all_grads
    head_present = 0.0 if b.head_grad_in_transient else b.head_grad
    out = []
    if not b.vision_graph:
        out.append(Moment("vision forward (no grad)", 0.0, b.vision_working, G))
    every = b.saved_const + L * b.layer_saved + b.vision_saved
    out.append(Moment("LM-head backward", every, b.head_transient, G - head_present))
    for j, name in ((L - 1, "decoder backward, first layer"), (0, "decoder backward, last layer")):
        present = b.head_grad + (L - 1 - j) * b.layer_grad
        saved = (j + 1) * b.layer_saved + b.vision_saved
        out.append(Moment(name, saved, b.layer_working, max(0.0, G - present)))
    if b.vision_graph:
        lm_grads = b.head_grad + L * b.layer_grad + b.embed_grad
        block_grad = b.vision_grad / b.vision_depth
        block_saved = b.vision_saved / b.vision_depth
        for j, name in ((b.vision_depth - 1, "vision backward, first block"), (0, "vision backward, last block")):
            present = lm_grads + (b.vision_depth - 1 - j) * block_grad
            out.append(Moment(name, (j + 1) * block_saved, b.vision_working, max(0.0, G - present)))
    out.append(Moment("optimizer step", 0.0, 0.0, 0.0))
    return out


def peak(all_moments: list[Moment], factor: float) -> Moment:
    """The moment with the most bytes above the resident states (the first of equals)."""
    return max(all_moments, key=lambda m: m.above_resident(factor))
