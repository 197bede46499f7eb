"""The frozen vision tower: no autograd, and each image encoded once per generation batch (issue 29, item 1).

Why. With ``--freeze_vision_modules true`` no vision parameter trains, yet transformers 5.23 still differentiates the
tower: with gradient checkpointing on, ``_activation_checkpointing_enable`` calls ``enable_input_require_grads``
(``modeling_utils.py:3181-3189``), which puts a forward hook that sets ``requires_grad`` on the output of the input
embeddings of *every* ``PreTrainedModel`` submodule (``modeling_utils.py:2137-2173``). Qwen2-VL's and Qwen2.5-VL's
vision towers name ``patch_embed`` their input embeddings (``_input_embed_layer``, ``models/qwen2_vl/
modeling_qwen2_vl.py:646``, ``models/qwen2_5_vl/modeling_qwen2_5_vl.py:385``), so their patch embedding output
requires grad and the whole frozen tower is recorded, checkpointed, recomputed and back-propagated (for its input
only). Qwen3-VL's tower names none (``Qwen3VLVisionModel``, ``models/qwen3_vl/modeling_qwen3_vl.py:616``: no
``_input_embed_layer``, so ``get_input_embeddings`` raises and the hook is skipped), but it is still run again in
every pass. And TRL 1.16 runs the tower in every pass: generation, the old-policy and reference log-prob passes
(``trl/trainer/grpo_trainer.py`` ``_generate_and_score_completions``) and the policy pass of every step that uses the
generation batch (``_prepare_inputs``, ``grpo_trainer.py:1536-1546``: one generation every ``steps_per_generation *
num_iterations`` steps), on every row, so G times per screenshot on the naive path.

What. :class:`FrozenVisionTower` replaces the tower module's ``forward`` (an instance attribute; the module, its
parameters and hooks stay as they are). While no tower parameter requires grad, the forward runs under
``torch.no_grad()`` (so no hook can make its outputs require grad) and per image through :class:`VisionFeatureCache`:

* key: the image's ``image_grid_thw`` row, the pixel dtype and device, the autocast state, and a fingerprint of its
  pixel rows (:func:`image_fingerprints`, on the device); a hit is confirmed by ``torch.equal`` against the stored
  pixel rows, so two different images can never share features. The training flag is not in it: a tower that samples
  in training mode (dropout, :func:`samples_in_training`) runs uncached there, and Qwen-VL's towers do not, so the
  reference model (eval mode) can share the policy's entries;
* value: the image's rows of every output field (``last_hidden_state``, ``pooler_output``; Qwen3-VL's
  ``deepstack_features`` per layer), split with the family's merge factor (:class:`GridTower`);
* a call encodes only the images it does not find, each distinct image once (the naive path's G copies of a screenshot
  in one call are one encoding), in one tower call, and returns the outputs of all its images in its order, as new
  tensors (``torch.cat``) without grad.

Per image, the tower's outputs do not depend on the other images of the call (Qwen-VL attends within an image:
``cu_seqlens``, windows per image), so a cached image's features are the ones the call would have computed: logits and
gradients of the trainable parameters are bit-identical in fp32 on CPU (``tests/test_vision_cache.py``, tiny
Qwen2.5-VL, Qwen2-VL and Qwen3-VL, gradient checkpointing on and off).

When. :class:`FrozenVisionMixin` (the trainer side) opens the cache when a training generation batch starts
(``_prepare_inputs`` on a generation step, the same test as TRL's) and drops it after the forward of the last step
that uses the batch (``_step + 1`` a multiple of ``steps_per_generation * num_iterations``). So generation, the
old-policy and reference passes, and the policy pass of every step of the batch encode each screenshot once; the
shared-prompt path (:mod:`vlm_r1.shared_prompt`: one pixel copy per group) hits the same entries. Evaluation
(``prediction_step``) runs in its own scope, dropped when it returns, and leaves the training entries alone. Outside
an open batch (e.g. a held-out evaluation callback generating with the policy) nothing is stored; the call still runs
without autograd and encodes each distinct image once.

* vLLM (``--use_vllm``): generation encodes inside vLLM; the training passes share one encoding (the first of them
  encodes, the others hit).
* Reference model (``--beta > 0`` without PEFT, TRL's separate model): its tower shares the policy's cache when its
  weights are bit-identical and ``--sync_ref_model`` is off; otherwise it gets its own cache. With PEFT the
  reference pass is the policy with adapters disabled: the same tower, the same cache.
* ZeRO-3 / FSDP (parameters gathered collectively inside the tower's forward): every tower call all-reduces whether
  any process misses; if one does, every process runs the tower once in that call, so the gathers stay matched.
* A later multi-turn rollout that adds a zoomed crop: the crop is a new image with its own pixels, so it gets its own
  entry like any image, cached per rollout for the life of its generation batch (the turn's prefill in generation
  and that rollout's training passes share one encoding); two rollouts share it only if their crops are
  pixel-identical.

A tower that trains (``--freeze_vision_modules false``, or LoRA adapters on it) is never wrapped or, if a parameter
requires grad at call time, runs transformers' own forward unchanged: nothing changes, and the log says so.
"""

from __future__ import annotations

import contextlib
import logging
import warnings
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

logger = logging.getLogger(__name__)

#: forward kwargs that add outputs the cache does not hold: such a call runs uncached (still without autograd)
_UNCACHED_KWARGS = ("output_attentions", "output_hidden_states")
#: integer dtype viewing the bytes of a floating dtype, by element size (for the fingerprint)
_BITS = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
_ROWS_PER_CHUNK = 4096  # fingerprint temporaries at most 4096 rows x patch dim int64


@dataclass(frozen=True)
class GridTower:
    """A vision tower that :class:`FrozenVisionTower` can cache: ``module(pixel_rows (N, D), grid_thw=(k, 3))``
    returns a ``ModelOutput`` whose tensors hold, per image in order, either its ``t*h*w`` patch rows or its
    ``t*h*w / merge`` merged-token rows (lists of such tensors too). What a family's ``vision_tower`` hook returns
    (:meth:`vlm_r1.modules.VLMBaseModule.vision_tower`)."""

    module: torch.nn.Module
    merge: int  # patches per output token (Qwen-VL: spatial_merge_size ** 2)


def _index_weights(n: int, device: torch.device, salt: int) -> torch.Tensor:
    """``n`` int64 pseudo-random weights, a fixed function of the index (so a longer vector extends a shorter one)."""
    w = torch.arange(n, device=device, dtype=torch.int64) * -7046029254386353131 + salt  # 0x9E3779B97F4A7C15 as int64
    w = w ^ (w >> 31)
    return w * -4658895280553007687 + 1  # 0xBF58476D1CE4E5B9 as int64


def image_fingerprints(pixels: torch.Tensor, counts: list[int]) -> list[int]:
    """One int per image of ``pixels`` (``(N, ...)`` rows, ``counts`` rows per image): a weighted sum (wrapping int64)
    of the bits of its values, position-dependent in both row and column. Computed on the device with one sync. Only a
    bucket key: a hit is confirmed by ``torch.equal``."""
    flat = pixels.reshape(pixels.size(0), -1)
    if not flat.is_contiguous():
        flat = flat.contiguous()
    bits = flat.view(_BITS[flat.element_size()])
    cols = _index_weights(bits.size(1), bits.device, 1)
    rows = torch.cat([(chunk.long() * cols).sum(dim=1) for chunk in bits.split(_ROWS_PER_CHUNK)])
    longest = max(counts, default=0)
    row_w = _index_weights(longest, bits.device, 2)
    sums = [(part * row_w[: part.numel()]).sum() for part in rows.split(counts)]
    return torch.stack(sums).tolist() if sums else []


@dataclass
class _Entry:
    """One image's cached tower outputs: its pixel rows (to confirm a hit), the output class, and per field its rows
    (a tensor) or its rows of each tensor of a list field."""

    pixels: torch.Tensor
    cls: type
    fields: dict[str, Any]


@dataclass
class VisionFeatureCache:
    """Per-image tower outputs of the current generation batch (see the module docstring). ``storing`` is true between
    :meth:`open` and :meth:`close` and inside :meth:`scope`; otherwise lookups find nothing new and nothing is kept.
    ``encoded`` / ``reused`` count images since the last :meth:`take_counts`."""

    storing: bool = False
    encoded: int = 0
    reused: int = 0
    _entries: dict[tuple, list[_Entry]] = field(default_factory=dict)

    def __len__(self) -> int:
        return sum(len(v) for v in self._entries.values())

    def open(self) -> None:
        """A new generation batch: drop what the last one stored, store from now on."""
        self._entries = {}
        self.storing = True

    def close(self) -> None:
        """The batch is used up: drop its entries, store nothing until the next :meth:`open`."""
        self._entries = {}
        self.storing = False

    @contextlib.contextmanager
    def scope(self) -> Iterator[None]:
        """A temporary cache (evaluation): entries stored inside are dropped at exit, the outer ones kept."""
        saved = self._entries, self.storing, self.encoded, self.reused
        self._entries, self.storing = {}, True
        try:
            yield
        finally:
            self._entries, self.storing, self.encoded, self.reused = saved

    def find(self, key: tuple, pixels: torch.Tensor) -> _Entry | None:
        for entry in self._entries.get(key, ()):
            if torch.equal(entry.pixels, pixels):
                return entry
        return None

    def add(self, key: tuple, entry: _Entry) -> None:
        """Keep ``entry`` (with its own copy of the pixel rows) while storing; otherwise drop it."""
        if self.storing:
            entry.pixels = entry.pixels.clone()
            self._entries.setdefault(key, []).append(entry)

    def take_counts(self) -> tuple[int, int]:
        """``(encoded, reused)`` since the last call, and reset them."""
        counts = self.encoded, self.reused
        self.encoded = self.reused = 0
        return counts


def _split_output(out: Any, patches: list[int], merge: int) -> list[dict[str, Any]] | None:
    """Per image, its rows of every field of tower output ``out``; None when ``out`` is not a mapping or a field's rows
    are neither the patches nor the merged tokens of the images."""
    if not isinstance(out, Mapping):
        return None
    tokens = [p // merge for p in patches]

    def sizes(t: Any) -> list[int] | None:
        if not isinstance(t, torch.Tensor) or t.dim() == 0:
            return None
        return patches if t.size(0) == sum(patches) else tokens if t.size(0) == sum(tokens) else None

    per_image: list[dict[str, Any]] = [{} for _ in patches]
    for name, value in out.items():
        if isinstance(value, (list, tuple)) and value:
            if any(sizes(v) is None for v in value):
                return None
            split = [torch.split(v, sizes(v)) for v in value]
            for i, image in enumerate(per_image):
                image[name] = [s[i] for s in split]
        elif sizes(value) is not None:
            for image, part in zip(per_image, torch.split(value, sizes(value)), strict=True):
                image[name] = part
        else:
            return None
    return per_image


def _join(entries: list[_Entry]) -> Any:
    """The tower output of ``entries``' images in order: every field concatenated into new tensors."""
    fields = {}
    for name, first in entries[0].fields.items():
        if isinstance(first, list):
            fields[name] = [torch.cat([e.fields[name][k] for e in entries]) for k in range(len(first))]
        else:
            fields[name] = torch.cat([e.fields[name] for e in entries])
    return entries[0].cls(**fields)


def samples_in_training(module: torch.nn.Module) -> bool:
    """Whether ``module`` draws random numbers in training mode: a dropout with ``p > 0`` or an ``attention_dropout >
    0`` (Qwen-VL's towers hard-code 0.0: ``modeling_qwen2_5_vl.py:265``, ``modeling_qwen2_vl.py:355``,
    ``modeling_qwen3_vl.py:251``)."""
    for m in module.modules():
        if isinstance(m, torch.nn.modules.dropout._DropoutNd) and m.p > 0:
            return True
        if isinstance(getattr(m, "attention_dropout", None), (int, float)) and m.attention_dropout > 0:
            return True
    return False


def any_rank(flag: bool) -> bool:
    """``flag`` or'ed over the processes of the default group (itself when there is none)."""
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() < 2:
        return flag
    nccl = "nccl" in str(dist.get_backend()).lower()
    value = torch.tensor([int(flag)], device=torch.device("cuda", torch.cuda.current_device()) if nccl else "cpu")
    dist.all_reduce(value, op=dist.ReduceOp.MAX)
    return bool(value.item())


class FrozenVisionTower:
    """The wrapper around one tower's ``forward`` (see the module docstring). ``lockstep``: all-reduce the miss
    decision of every call (ZeRO-3 / FSDP, where the tower's forward gathers parameters collectively)."""

    def __init__(self, tower: GridTower, cache: VisionFeatureCache, *, lockstep: bool = False):
        self.module = tower.module
        self.merge = int(tower.merge)
        self.cache = cache
        self.lockstep = lockstep
        self.enabled = True  # False after an output the cache cannot split (then: no_grad only)
        self.stochastic = samples_in_training(self.module)
        self._original = None

    def install(self) -> FrozenVisionTower:
        if "forward" in vars(self.module) and isinstance(getattr(self.module.forward, "__self__", None), type(self)):
            raise RuntimeError(f"{type(self.module).__name__} already has a frozen-vision wrapper")
        self._original = self.module.forward
        self.module.forward = self._forward
        return self

    def remove(self) -> None:
        if self._original is not None:
            del self.module.forward
            self._original = None

    def trainable(self) -> bool:
        return any(p.requires_grad for p in self.module.parameters())

    def _forward(self, hidden_states: torch.Tensor, grid_thw: torch.Tensor | None = None, **kwargs: Any) -> Any:
        if self.trainable():  # a trained tower (LoRA on it, or unfrozen since): transformers' forward, unchanged
            return self._original(hidden_states, grid_thw=grid_thw, **kwargs)
        with torch.no_grad(), warnings.catch_warnings():
            # reentrant checkpointing of the tower's blocks (PEFT + ZeRO-3 forces it) warns that no input requires
            # grad: true, and the point here
            warnings.filterwarnings("ignore", message="None of the inputs have requires_grad=True")
            sampling = self.stochastic and self.module.training  # dropout: every call draws anew, as before
            cacheable = (
                self.enabled and not sampling and grid_thw is not None and kwargs.get("return_dict", True) is not False
            )
            if not cacheable or any(kwargs.get(k) for k in _UNCACHED_KWARGS):
                return self._original(hidden_states, grid_thw=grid_thw, **kwargs)
            return self._cached(hidden_states, grid_thw, kwargs)

    def _key_context(self, pixels: torch.Tensor) -> tuple:
        device = pixels.device.type
        autocast = torch.is_autocast_enabled(device)
        return (
            str(pixels.dtype),
            str(pixels.device),
            autocast,
            str(torch.get_autocast_dtype(device)) if autocast else None,
        )

    def _cached(self, pixels: torch.Tensor, grid_thw: torch.Tensor, kwargs: dict) -> Any:
        patches = [int(n) for n in grid_thw.prod(-1).tolist()]
        if sum(patches) != pixels.size(0):
            return self._original(pixels, grid_thw=grid_thw, **kwargs)
        segments = list(torch.split(pixels, patches))
        context = self._key_context(pixels)
        keys = [
            (tuple(int(v) for v in row), *context, fp)
            for row, fp in zip(grid_thw.tolist(), image_fingerprints(pixels, patches), strict=True)
        ]
        found: list[_Entry | None] = [self.cache.find(k, s) for k, s in zip(keys, segments, strict=True)]
        todo, alias = self._distinct_misses(keys, segments, found)
        if self.lockstep and any_rank(bool(todo)) and not todo:
            todo = [0]  # another process encodes: run the tower once too, so its collective gathers stay matched
        new = self._encode(pixels, grid_thw, segments, patches, todo, kwargs) if todo else []
        if new is None:  # an output the cache cannot split: this call and all later ones run uncached
            return self._original(pixels, grid_thw=grid_thw, **kwargs)
        for i, entry in zip(todo, new, strict=True):
            if found[i] is None:
                self.cache.add(keys[i], entry)
        self.cache.encoded += len(todo)
        self.cache.reused += len(patches) - len(todo)
        return _join([found[i] or new[alias[i]] for i in range(len(patches))])

    @staticmethod
    def _distinct_misses(keys: list[tuple], segments: list[torch.Tensor], found: list) -> tuple[list[int], dict]:
        """The images to encode (the first of each distinct missing image) and, per missing image, its index in them."""
        todo: list[int] = []
        alias: dict[int, int] = {}
        for i, key in enumerate(keys):
            if found[i] is not None:
                continue
            same = next(
                (j for j, t in enumerate(todo) if keys[t] == key and torch.equal(segments[t], segments[i])), None
            )
            if same is None:
                todo.append(i)
                same = len(todo) - 1
            alias[i] = same
        return todo, alias

    def _encode(self, pixels, grid_thw, segments, patches, todo: list[int], kwargs: dict) -> list[_Entry] | None:
        """Run the tower once on the ``todo`` images; their entries, or None (cache disabled, with a warning) when the
        output does not split per image."""
        rows = torch.cat([segments[i] for i in todo]) if len(todo) < len(segments) else pixels
        out = self._original(rows, grid_thw=grid_thw[todo], **kwargs)
        parts = _split_output(out, [patches[i] for i in todo], self.merge)
        if parts is None:
            self.enabled = False
            logger.warning(
                "frozen vision tower %s: its output (%s) does not split per image; running it uncached (no_grad "
                "only) from now on",
                type(self.module).__name__,
                type(out).__name__,
            )
            return None
        return [_Entry(segments[i], type(out), part) for i, part in zip(todo, parts, strict=True)]


def same_weights(a: torch.nn.Module, b: torch.nn.Module) -> bool:
    """Whether two towers hold bit-identical parameters and buffers. ZeRO-3 partitioned parameters (``ds_tensor``,
    the same partitioning for the same shapes) are compared per process, and the processes agree (a collective: call
    it on every process)."""
    pa, pb = dict(a.named_parameters()), dict(b.named_parameters())
    ba, bb = dict(a.named_buffers()), dict(b.named_buffers())
    if pa.keys() != pb.keys() or ba.keys() != bb.keys():
        return False
    partitioned = {hasattr(p, "ds_tensor") for p in (*pa.values(), *pb.values())}
    if partitioned == {True, False}:
        return False
    local = [(getattr(pa[k], "ds_tensor", pa[k]), getattr(pb[k], "ds_tensor", pb[k])) for k in pa]
    local += [(ba[k], bb[k]) for k in ba]
    equal = all(x.dtype == y.dtype and x.shape == y.shape and torch.equal(x, y.to(x.device)) for x, y in local)
    return not any_rank(not equal) if partitioned == {True} else equal


class FrozenVisionMixin:
    """Trainer mixin (before ``SharedPromptMixin`` and ``trl.GRPOTrainer`` in the bases): installs
    :class:`FrozenVisionTower` on the policy's (and the reference model's) tower when it is frozen, and opens and drops
    the cache per generation batch. Call :meth:`_frozen_vision_setup` at the end of ``__init__`` (needs
    ``vlm_module``, ``model``, ``ref_model``, ``args``, ``accelerator``)."""

    _vision_cache: VisionFeatureCache | None = None  # the policy's
    _vision_caches: tuple[VisionFeatureCache, ...] = ()  # every cache (the reference model may have its own)

    def _frozen_vision_setup(self, freeze_vision: bool) -> None:
        self._vision_towers: list[FrozenVisionTower] = []
        self._vision_status = {
            "frozen": False,
            "no_grad": False,
            "cache": False,
            "reference": None,
            "reason": None,
            "lockstep": False,
        }
        hook = getattr(self.vlm_module, "vision_tower", None)
        tower = hook(self.model) if callable(hook) else None
        trained = tower is not None and any(p.requires_grad for p in tower.module.parameters())
        if tower is None or trained:
            why = "a parameter in it trains, e.g. LoRA on it" if freeze_vision else "--freeze_vision_modules false"
            self._vision_status["reason"] = (
                f"trained ({why}): transformers' forward with autograd in every pass, no feature cache"
                if trained
                else f"as transformers runs it: model family {type(self.vlm_module).__name__} has no vision_tower hook"
            )
            self._vision_say("vision tower %s", self._vision_status["reason"])
            return
        lockstep = self._vision_lockstep()
        self._vision_cache = VisionFeatureCache()
        self._vision_towers.append(FrozenVisionTower(tower, self._vision_cache, lockstep=lockstep).install())
        self._vision_status.update(frozen=True, no_grad=True, cache=True, lockstep=lockstep)
        self._vision_status["reference"] = self._frozen_reference_tower(hook, tower, lockstep)
        self._vision_caches = tuple({id(w.cache): w.cache for w in self._vision_towers}.values())
        how = "--freeze_vision_modules" if freeze_vision else "no trainable parameter (e.g. LoRA elsewhere)"
        self._vision_say(
            "vision tower frozen (%s): runs under no_grad, each image encoded once per generation batch and reused "
            "by generation, the old-policy, reference and policy passes (reference model: %s%s)",
            how,
            self._vision_status["reference"] or "none",
            "; all processes decide hits together (ZeRO-3/FSDP)" if lockstep else "",
        )

    def _vision_say(self, message: str, *args: Any) -> None:
        if self.accelerator.is_main_process:
            logger.info(message, *args)

    def _vision_lockstep(self) -> bool:
        """Whether the tower's forward gathers parameters collectively (ZeRO-3 or FSDP over several processes)."""
        if self.accelerator.num_processes < 2:
            return False
        plugin = getattr(self.accelerator.state, "deepspeed_plugin", None)
        zero3 = plugin is not None and getattr(plugin, "zero_stage", None) == 3
        return bool(zero3 or getattr(self, "is_fsdp_enabled", False))

    def _frozen_reference_tower(self, hook: Any, tower: GridTower, lockstep: bool) -> str | None:
        """Wrap TRL's separate reference model's tower (it never trains): the policy's cache when the weights are the
        same bits and ``--sync_ref_model`` is off, else its own. Returns how, or None without a reference model."""
        if self.ref_model is None:
            return None
        ref = hook(self.ref_model)
        if ref is None:
            return "no vision_tower hook for it"
        for p in ref.module.parameters():
            p.requires_grad_(False)
        shared = not getattr(self.args, "sync_ref_model", False) and same_weights(tower.module, ref.module)
        cache = self._vision_cache if shared else VisionFeatureCache()
        self._vision_towers.append(FrozenVisionTower(ref, cache, lockstep=lockstep).install())
        return "shares the policy's cache" if shared else "own cache (weights differ or --sync_ref_model)"

    def vision_tower_status(self) -> dict:
        """What ``vlm_r1_run.json`` records under ``vision_tower``: ``frozen``, ``no_grad``, ``cache``,
        ``reference`` (how the reference model's tower is cached), ``lockstep`` and ``reason`` (why not frozen)."""
        return dict(self._vision_status)

    def _vision_generate_every(self) -> int:
        return int(self.args.steps_per_generation) * int(self.num_iterations)

    def _prepare_inputs(self, generation_batch):
        if self._vision_caches and self.model.training:
            if self._step % self._vision_generate_every() == 0 or self._buffered_inputs is None:
                for cache in self._vision_caches:  # TRL's test for a generation step (grpo_trainer.py:1538-1539)
                    cache.open()
        return super()._prepare_inputs(generation_batch)

    def _compute_loss(self, model, inputs):
        try:
            return super()._compute_loss(model, inputs)
        finally:
            if self._vision_caches and self.model.training and (self._step + 1) % self._vision_generate_every() == 0:
                encoded = reused = 0
                for cache in self._vision_caches:  # the batch's last step: its features are not needed again
                    cache.close()
                    e, r = cache.take_counts()
                    encoded, reused = encoded + e, reused + r
                self._metrics["train"]["vision/images_encoded"].append(float(encoded))
                self._metrics["train"]["vision/images_reused"].append(float(reused))

    def prediction_step(self, model, inputs, prediction_loss_only, ignore_keys=None):
        with contextlib.ExitStack() as stack:
            for cache in self._vision_caches:
                stack.enter_context(cache.scope())
            return super().prediction_step(model, inputs, prediction_loss_only, ignore_keys=ignore_keys)
