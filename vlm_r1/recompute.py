"""Recompute policy: which layers gradient checkpointing recomputes (``--gradient_checkpointing_every``,
``--vision_gradient_checkpointing``; issue 29).

transformers checkpoints every ``GradientCheckpointingLayer`` of the model when ``--gradient_checkpointing`` is on
(transformers 5.23 ``modeling_utils.py:3212-3246``, ``_set_gradient_checkpointing``: each layer's
``gradient_checkpointing`` flag, read in ``modeling_layers.py:93``), the vision tower's blocks and the decoder's layers
alike. The policy here keeps that default and adds two knobs:

* decoder layers: only every ``every``-th decoder layer is checkpointed, layers ``0, every, 2*every, ...`` counted
  within the language model (``ceil(L / every)`` of its ``L`` layers). The others keep their activations for the
  backward, as without checkpointing: less recompute (each checkpointed layer's forward runs twice), more memory;
* vision tower: all its blocks checkpointed (``vision=True``, transformers' default) or none. The tower is found by the
  family's vision keywords (``get_vision_modules_keywords``: ``visual`` for Qwen, ``vision_tower`` for InternVL). A
  tower that runs without autograd (frozen, nothing requiring grad) records nothing either way.

transformers 5.23 has a similar knob, ``activation_checkpointing_kwargs={"every_n_layers": n}``
(``modeling_utils.py:3110-3131``, ``trainer.py:1503-1515``), but it counts the vision blocks and the decoder layers as
one sequence, and TRL 1.16 turns checkpointing off and on again around every generation with its kwargs dict alone
(``trl/models/utils.py:136-154`` and ``:407-414``): the second enable gets ``every_n_layers=1`` and checkpoints every
layer again. So the policy is applied inside the model's own ``_set_gradient_checkpointing`` (an instance attribute
bound to the model, hence carried by a deep copy): every enable, the trainer's first one and TRL's later ones, ends
with the policy's flags.
"""

from __future__ import annotations

import logging
import math
import types
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

logger = logging.getLogger(__name__)

_POLICY_ATTR = "_vlm_r1_recompute_policy"


@dataclass(frozen=True)
class RecomputePolicy:
    """``every``: checkpoint decoder layers ``i`` with ``i % every == 0`` (1 = all); ``vision``: checkpoint the vision
    tower's blocks; ``vision_keywords``: substrings of the vision tower's module names."""

    every: int = 1
    vision: bool = True
    vision_keywords: tuple[str, ...] = ("visual",)

    def __post_init__(self) -> None:
        if int(self.every) < 1:
            raise ValueError(f"--gradient_checkpointing_every must be an integer >= 1, got {self.every!r}")

    @property
    def is_default(self) -> bool:
        """Every layer of both stacks checkpointed: transformers' own behaviour, nothing to install."""
        return self.every == 1 and self.vision

    def decoder_checkpointed(self, index: int) -> bool:
        return index % self.every == 0


def checkpointed_layers(num_layers: int, every: int) -> int:
    """How many of ``num_layers`` decoder layers the policy checkpoints: ``ceil(num_layers / every)``."""
    return math.ceil(num_layers / every) if num_layers > 0 else 0


def _layers(model: Any, keywords: Sequence[str]) -> tuple[list[tuple[str, Any]], list[tuple[str, Any]]]:
    """``(decoder layers, vision blocks)``: the model's ``GradientCheckpointingLayer`` modules, in module order,
    split by whether the module name contains a vision keyword."""
    from transformers.modeling_layers import GradientCheckpointingLayer

    decoder, vision = [], []
    for name, module in model.named_modules():
        if isinstance(module, GradientCheckpointingLayer):
            (vision if any(k in name for k in keywords) else decoder).append((name, module))
    return decoder, vision


def apply_flags(model: Any, policy: RecomputePolicy) -> None:
    """Set every checkpointing layer's flag as ``policy`` says (after transformers switched them all on)."""
    decoder, vision = _layers(model, policy.vision_keywords)
    for index, (_, module) in enumerate(decoder):
        module.gradient_checkpointing = policy.decoder_checkpointed(index)
    for _, module in vision:
        module.gradient_checkpointing = policy.vision


def _set_gradient_checkpointing(self, enable=True, gradient_checkpointing_func=None, every_n_layers=1):
    """transformers' ``_set_gradient_checkpointing`` (the same parameters, without the old format's ``value``,
    ``modeling_utils.py:3166``), then the policy's flags on enable. ``every_n_layers`` is ignored: the policy
    decides."""
    from torch.utils.checkpoint import checkpoint

    type(self)._set_gradient_checkpointing(
        self, enable=enable, gradient_checkpointing_func=gradient_checkpointing_func or checkpoint, every_n_layers=1
    )
    if enable:
        apply_flags(self, getattr(self, _POLICY_ATTR))


def install(model: Any, policy: RecomputePolicy) -> bool:
    """Make every later gradient-checkpointing enable of ``model`` (a transformers ``PreTrainedModel``) follow
    ``policy``; a model that has checkpointing on already gets the flags now. Returns False (nothing installed) for the
    default policy. Logs which layers are checkpointed."""
    if policy.is_default:
        return False
    setattr(model, _POLICY_ATTR, policy)
    model._set_gradient_checkpointing = types.MethodType(_set_gradient_checkpointing, model)
    decoder, vision = _layers(model, policy.vision_keywords)
    if any(getattr(m, "gradient_checkpointing", False) for _, m in decoder + vision):
        apply_flags(model, policy)
    chosen = [i for i in range(len(decoder)) if policy.decoder_checkpointed(i)]
    shown = ", ".join(map(str, chosen[:8])) + (", ..." if len(chosen) > 8 else "")
    logger.info(
        "gradient checkpointing policy: decoder layers %s (%d of %d, every %d), vision tower blocks: %s",
        shown,
        len(chosen),
        len(decoder),
        policy.every,
        f"all {len(vision)}" if policy.vision else f"none of {len(vision)}",
    )
    return True


def checkpointed_modules(model: Any, keywords: Sequence[str] = ("visual",)) -> dict[str, list[str]]:
    """The names of the layers whose checkpointing is on, ``{"decoder": [...], "vision": [...]}`` (tests, logs)."""
    decoder, vision = _layers(model, keywords)
    return {
        "decoder": [n for n, m in decoder if m.gradient_checkpointing],
        "vision": [n for n, m in vision if m.gradient_checkpointing],
    }
