"""``VLMGRPOTrainer``: ``trl.GRPOTrainer`` plus the VLM module hooks VLM-R1 users rely on.

Added on top of TRL (through narrow hooks, nothing copied):

* image-token ban (``--ban_vision_tokens true``): ``bad_words_ids`` for the image token is merged into
  ``generation_kwargs``, as GTA1 bans it (Yan98/GTA1 ``src/trainer/grpo_trainer.py:520`` at 81f0c4c; its blog says
  why: https://huggingface.co/blog/HelloKKMe/grounding-r1); TRL itself only suppresses it in HF generation
  (docs/REFERENCES.md#trl-grpo-on-cpu). For vLLM the same token goes in as a ``bad_words`` string;
* vision freezing by the module's parameter-name keywords (``--freeze_vision_modules``); a frozen tower runs under
  ``no_grad`` and encodes each image once per generation batch (:mod:`vlm_r1.vision_cache`);
* the module itself is kept on the trainer (``trainer.vlm_module``) for rewards and evaluation hooks;
* DAPO-style dynamic sampling (``--dynamic_sampling``, see :meth:`VLMGRPOTrainer._dynamic_sampling` and the flag's
  help in :class:`vlm_r1.configs.VLMGRPOConfig`);
* LoRA default targets: ``--use_peft true`` without ``--lora_target_modules`` targets every ``nn.Linear`` of the
  language model except ``lm_head``, never the vision tower (upstream's finder, :func:`default_lora_target_modules`);
  an explicit ``--lora_target_modules`` is honoured (upstream overwrote it);
* a dialect's rollout log (``rollout_log``, :class:`vlm_r1.dialect.Dialect`; upstream's ``DEBUG_MODE=true`` /
  ``LOG_PATH`` file), called after scoring.
* per-sample loss weights (``--sample_weight_column NAME``, default off): each training row's weight (a dataset
  column, checked and filtered at start-up by :func:`vlm_r1.data.keep_weighted_rows`) travels with the generation
  output as ``sample_weight`` (one value per rollout, shuffled and sliced with the rows, merged by dynamic sampling)
  and multiplies the advantages in :meth:`VLMGRPOTrainer._compute_loss` before TRL's loss. Every TRL loss type's
  per-token policy term is positively homogeneous in the advantage (``min(c1*w*A, c2*w*A) = w*min(c1*A, c2*A)`` for
  ``w >= 0``; cispo, sapo and vespo multiply ``A`` by a factor that depends on ``A``'s sign only, which ``w > 0``
  keeps, and ``w = 0`` gives 0 either way), so each sample's policy loss is scaled exactly by ``w``; the KL term
  (``--beta``) is added unweighted. Weights are used as given, not renormalised (a mean weight of 0.5 halves the
  step); ``sample_weight/mean`` is logged per step.

KL (``--beta > 0``) is TRL's own, unchanged: TRL loads the reference model from the policy's checkpoint with the class
named in ``config.architectures`` (``Qwen2_5_VLForConditionalGeneration``; upstream VLM-R1 used
``AutoModelForCausalLM`` under ZeRO-3, which fails for VLMs, #242/#338), shards it with ZeRO-3 through
``trl.models.utils.prepare_deepspeed``, computes reference log-probs with the same image inputs, adds ``beta`` times
the k3 estimator to the per-token loss and logs ``kl``. Verified on CPU with 2 gloo processes: the logged ``kl`` under
ZeRO-3 equals the DDP run's (``tests/test_ablation_switches.py``), so no fix is needed here. The reference model is a
separate full model, so ``--freeze_vision_modules`` (policy only) and the vision-token ban (generation only) do not
touch it; it gets the module's ``post_model_init`` hook like the policy.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Sequence
from typing import Any

import torch
from trl import GRPOTrainer

from groundwork.outputs import LineAppender
from vlm_r1 import shared_prompt as sp
from vlm_r1.data import SAMPLE_WEIGHT_KEY, json_text_columns, keep_weighted_rows, row_weights
from vlm_r1.launch import FindUnusedParametersFromModel
from vlm_r1.shared_prompt_trainer import SharedPromptMixin
from vlm_r1.tool_rollout import ToolRolloutMixin
from vlm_r1.vision_cache import FrozenVisionMixin
from vlm_r1.vllm_rollouts import vllm_bad_words

logger = logging.getLogger(__name__)

DYNAMIC_SAMPLING_KEYS = (
    "dynamic_sampling/frac_groups_dropped",
    "dynamic_sampling/tries",
    "dynamic_sampling/groups_generated",
    "dynamic_sampling/frac_trained_groups_zero_std",
)

# How dynamic sampling merges the rows of several TRL generation outputs (``_generate_and_score_completions``), by key:
# (padding side, padding value; "pad" = the tokenizer's pad id). Rows of different tries are padded to a common width.
_PADDED_KEYS = {
    "prompt_ids": ("left", "pad"),
    "prompt_mask": ("left", 0),
    "completion_ids": ("right", "pad"),
    "completion_mask": ("right", 0),
    "old_per_token_logps": ("right", 0),
    "ref_per_token_logps": ("right", 0),
    "sampling_per_token_logps": ("right", 0),
    "importance_sampling_ratio": ("right", 0),
    "tool_mask": ("right", 1),
}
_PROMPT_COMPLETION_KEYS = ("mm_token_type_ids", "token_type_ids")  # prompt part left-padded, completion part right
_STACKED_KEYS = ("advantages", SAMPLE_WEIGHT_KEY)
_LIST_KEYS = ("pixel_values", "image_grid_thw", "num_images")  # per sample after trl's split_pixel_values_by_grid
_RECOMPUTED_KEYS = ("num_items_in_batch",)


def freeze_vision_modules(model: Any, keywords: list[str]) -> int:
    """Set ``requires_grad=False`` on every parameter whose name contains one of ``keywords``; returns the count."""
    frozen = 0
    for name, param in model.named_parameters():
        if any(k in name for k in keywords):
            param.requires_grad_(False)
            frozen += getattr(param, "ds_numel", param.numel())  # ZeRO-3 partitioned params report numel() == 0
    if frozen == 0:
        raise ValueError(f"--freeze_vision_modules: no parameter name contains any of {keywords}")
    return frozen


def default_lora_target_modules(model: Any, vision_keywords: Sequence[str]) -> list[str]:
    """Default LoRA targets: the full name of every ``torch.nn.Linear`` whose name contains none of
    ``vision_keywords`` and not ``embed_tokens``, except the output embeddings (``lm_head``), sorted.

    Upstream ``find_all_linear_names`` (``src/open-r1-multimodal/src/open_r1/trainer/grpo_trainer.py:261-273``, applied
    at :274-276 to every ``--use_peft`` run) is the same rule but keeps ``lm_head``. TRL 1.16 refuses an adapter on the
    output embeddings (``trl/trainer/grpo_trainer.py:836-843``: log-probs are computed from ``lm_head.weight``
    directly, so the adapter would never train) and upstream's own log-prob path used the model's logits, so the one
    difference is forced: ``model.get_output_embeddings()`` (found by identity, whatever its name) is left out.
    Full names match exactly one module each in PEFT (``key == target``), so the vision tower (``model.visual.*`` for
    Qwen-VL) never gets an adapter. ``nn.Linear`` subclasses (bitsandbytes ``Linear8bitLt``/``Linear4bit``) count, as
    upstream's ``isinstance`` did.
    """
    get_output = getattr(model, "get_output_embeddings", None)
    output = get_output() if callable(get_output) else None
    names = [
        name
        for name, module in model.named_modules()
        if isinstance(module, torch.nn.Linear)
        and module is not output
        and not any(k in name for k in vision_keywords)
        and "embed_tokens" not in name
    ]
    return sorted(names)


def _skeleton_model(path: str, vlm_module: Any, args: Any) -> Any:
    """The model class of checkpoint ``path`` built on the meta device (module names only, no weights, no memory)."""
    from transformers import AutoConfig

    init_kwargs = dict(getattr(args, "model_init_kwargs", None) or {})
    config = AutoConfig.from_pretrained(
        path, trust_remote_code=bool(init_kwargs.get("trust_remote_code", False)), revision=init_kwargs.get("revision")
    )
    cls = vlm_module.get_model_class(path, init_kwargs)
    with torch.device("meta"):
        return cls._from_config(config)


def resolve_lora_targets(peft_config: Any, model: Any, vlm_module: Any, args: Any = None) -> Any:
    """``peft_config`` with ``target_modules`` filled by :func:`default_lora_target_modules` when it has none.

    Returns ``peft_config`` itself when there is nothing to fill: not a config with ``target_modules`` (prefix tuning,
    ...), ``target_modules`` given (``--lora_target_modules``, ``all-linear`` included: PEFT resolves it), or
    ``target_parameters`` given. Otherwise a copy (the caller's object is not changed). ``model`` may be a loaded
    model or a checkpoint path (then the module names come from a weight-less meta-device build).
    """
    if peft_config is None or not hasattr(peft_config, "target_modules"):
        return peft_config
    if peft_config.target_modules is not None:
        logger.info("LoRA target modules (--lora_target_modules): %s", peft_config.target_modules)
        return peft_config
    if getattr(peft_config, "target_parameters", None):
        return peft_config
    source = _skeleton_model(model, vlm_module, args) if isinstance(model, str) else model
    keywords = list(vlm_module.get_vision_modules_keywords())
    names = default_lora_target_modules(source, keywords)
    if not names:
        raise ValueError(
            f"LoRA: no torch.nn.Linear module outside the vision tower (keywords {keywords}); give "
            "--lora_target_modules"
        )
    peft_config = copy.deepcopy(peft_config)
    peft_config.target_modules = names
    logger.info(
        "LoRA target modules (default: every nn.Linear outside the vision tower %s and the output "
        "embeddings, as upstream VLM-R1 minus lm_head, which TRL cannot train through an adapter): %d modules, "
        "e.g. %s",
        keywords,
        len(names),
        names[:3] + names[-2:],
    )
    return peft_config


def banned_generation_kwargs(args: Any, vlm_module: Any, processing_class: Any, ids: list[int] | None = None) -> dict:
    """``args.generation_kwargs`` with ``ids`` banned (HF ``bad_words_ids`` or vLLM ``bad_words``). ``ids``: default
    what GTA1 bans, the image token (``vlm_module.get_image_token_ids``; Yan98/GTA1 ``src/trainer/grpo_trainer.py:520``
    at 81f0c4c)."""
    gen = dict(args.generation_kwargs or {})
    ids = vlm_module.get_image_token_ids(processing_class) if ids is None else list(ids)
    if not ids:
        return gen
    if getattr(args, "use_vllm", False):  # vLLM bans strings it tokenizes itself: checked (vlm_r1.vllm_rollouts)
        words = list(gen.get("bad_words") or [])
        tokens = vllm_bad_words(getattr(processing_class, "tokenizer", processing_class), ids)
        gen["bad_words"] = words + [t for t in tokens if t not in words]
        return gen
    existing = [list(w) for w in gen.get("bad_words_ids") or []]
    gen["bad_words_ids"] = existing + [[i] for i in ids if [i] not in existing]
    if "suppress_tokens" in gen:  # a user list replaces TRL's image-token suppression: keep the image token in it
        gen["suppress_tokens"] = sorted(set(gen["suppress_tokens"]) | {ids[0]})
    return gen


# ---- dynamic sampling: pure helpers ------------------------------------------------------------------------------
def group_layout(rows_per_process: int, num_processes: int, num_generations: int) -> list[tuple[tuple[int, int], ...]]:
    """Where each group of a TRL generation batch lives: per group, ``((process, number of its rows there), ...)``.

    TRL's ``RepeatSampler`` puts each prompt's ``num_generations`` rows next to each other in the global batch, and the
    dataloader gives process ``p`` the global rows ``[p * rows_per_process, (p + 1) * rows_per_process)``; a group can
    therefore span processes (e.g. GTA1's 1 row per GPU and 8 generations: 8 processes with 1 row each).
    """
    total = rows_per_process * num_processes
    if total % num_generations:
        raise ValueError(f"{total} rows do not split into groups of {num_generations}")
    layout = []
    for k in range(total // num_generations):
        counts: dict[int, int] = {}
        for row in range(k * num_generations, (k + 1) * num_generations):
            counts[row // rows_per_process] = counts.get(row // rows_per_process, 0) + 1
        layout.append(tuple(sorted(counts.items())))
    return layout


def group_local_rows(group: int, rank: int, rows_per_process: int, num_generations: int) -> list[int]:
    """Local row indices (on process ``rank``) of global group ``group``, in order."""
    lo, hi = rank * rows_per_process, (rank + 1) * rows_per_process
    rows = range(group * num_generations, (group + 1) * num_generations)
    return [r - lo for r in rows if lo <= r < hi]


class RefillPlan:
    """Which generated group trains in each slot of a generation batch (a slot = a group position of the first try).

    Slots whose first-try group has zero reward std are *open*. A non-zero-std group of a later try fills the first
    open slot with the same layout (:func:`group_layout`: same processes, same row counts), so every process keeps its
    row count and every group stays whole. Open slots left at the end keep their zero-std group.
    """

    def __init__(self, layout: Sequence[tuple], zero_std: Sequence[bool]):
        if len(zero_std) != len(layout):
            raise ValueError(f"{len(zero_std)} groups scored, {len(layout)} expected")
        self.layout = list(layout)
        self.assignment = [(0, k) for k in range(len(layout))]  # slot -> (try, group of that try)
        self.open: dict[tuple, list[int]] = {}
        for k, zero in enumerate(zero_std):
            if zero:
                self.open.setdefault(self.layout[k], []).append(k)
        self.tries = 1
        self.generated = len(layout)
        self.zero_std = sum(map(bool, zero_std))

    def add_try(self, zero_std: Sequence[bool]) -> None:
        """Record the next try's groups (zero-std flags in global group order)."""
        if len(zero_std) != len(self.layout):
            raise ValueError(f"{len(zero_std)} groups scored, {len(self.layout)} expected")
        t = self.tries
        self.tries += 1
        self.generated += len(zero_std)
        self.zero_std += sum(map(bool, zero_std))
        for k, zero in enumerate(zero_std):
            slots = self.open.get(self.layout[k])
            if not zero and slots:
                self.assignment[slots.pop(0)] = (t, k)

    @property
    def unfilled(self) -> int:
        """Slots still holding a zero-std group."""
        return sum(len(v) for v in self.open.values())

    @property
    def done(self) -> bool:
        return self.unfilled == 0

    def metrics(self) -> dict[str, float]:
        """The ``dynamic_sampling/*`` values for this generation batch (see the ``--dynamic_sampling`` help)."""
        return {
            "dynamic_sampling/frac_groups_dropped": (self.zero_std - self.unfilled) / self.generated,
            "dynamic_sampling/tries": float(self.tries),
            "dynamic_sampling/groups_generated": float(self.generated),
            "dynamic_sampling/frac_trained_groups_zero_std": self.unfilled / len(self.layout),
        }

    def local_sources(self, rank: int, rows_per_process: int, num_generations: int) -> list[tuple[int, int]]:
        """For each local row of the trained batch: ``(try, local row of that try)`` it comes from."""
        sources: list[tuple[int, int] | None] = [None] * rows_per_process
        for slot, (t, group) in enumerate(self.assignment):
            dst = group_local_rows(slot, rank, rows_per_process, num_generations)
            src = group_local_rows(group, rank, rows_per_process, num_generations)
            for d, s in zip(dst, src, strict=True):
                sources[d] = (t, s)
        assert all(s is not None for s in sources)
        return sources  # type: ignore[return-value]


def merge_generation_rows(
    outputs: list[dict], sources: list[tuple[int, int]], pad_token_id: int, pad_to_multiple_of: int | None = None
) -> dict:
    """One TRL generation output built from rows of several (``sources``: ``(output index, row)`` per new row).

    Sequences are re-padded to a common width (prompt keys on the left, completion keys on the right, as TRL pads);
    per-sample image tensors are split and re-joined with TRL's own helpers. ``num_items_in_batch`` is left out: it is
    a count over all processes, recomputed by the caller. Keys this merge does not know raise ``NotImplementedError``
    rather than being merged wrongly (image-model outputs other than Qwen-VL style are not supported).
    """
    from trl.trainer.utils import pad, unsplit_pixel_values_by_grid

    if "pixel_values" in outputs[0] and not {"image_grid_thw", "num_images"} <= set(outputs[0]):
        raise NotImplementedError(
            "--dynamic_sampling merges image inputs of Qwen-VL-style models only (pixel_values "
            "with image_grid_thw and num_images)"
        )
    # Shared-prompt outputs (one pixel_values copy per group, vlm_r1.shared_prompt) stay shared when every try is
    # shared: groups move whole and in order, so each group's first row still carries its pixels. A mix of shared and
    # naive tries is merged naive (the shared ones expanded).
    group_sizes = {int(o.get(sp.SHARED_KEY) or 0) for o in outputs}
    shared = group_sizes.pop() if len(group_sizes) == 1 else 0
    if shared:
        for dst in range(0, len(sources), shared):
            t, first = sources[dst]
            if first % shared or sources[dst : dst + shared] != [(t, first + j) for j in range(shared)]:
                raise RuntimeError(
                    f"dynamic sampling moved a shared-prompt group apart (rows {dst}.. from {sources[dst]})"
                )
    split = [_split_rows(o, shared) for o in outputs]
    keys = set(split[0])
    known = set(_PADDED_KEYS) | set(_PROMPT_COMPLETION_KEYS) | set(_STACKED_KEYS) | set(_LIST_KEYS)
    unknown = sorted(keys - known - set(_RECOMPUTED_KEYS))
    if unknown:
        raise NotImplementedError(f"--dynamic_sampling cannot merge generation outputs with keys {unknown}")
    for i, s in enumerate(split[1:], 1):
        if set(s) != keys:
            raise RuntimeError(f"generation outputs differ in keys: {sorted(keys ^ set(s))} (try {i})")
    merged: dict[str, Any] = {}
    for key in sorted(keys - set(_RECOMPUTED_KEYS)):
        values = [s[key] for s in split]
        if any(v is None for v in values):
            merged[key] = None
            continue
        rows = [values[t][r] for t, r in sources]
        if key in _PADDED_KEYS:
            side, value = _PADDED_KEYS[key]
            merged[key] = pad(rows, pad_token_id if value == "pad" else value, side, pad_to_multiple_of)
        elif key in _PROMPT_COMPLETION_KEYS:
            widths = [s["prompt_ids"].shape[1] for s in split]
            prompt = pad([values[t][r][: widths[t]] for t, r in sources], 0, "left", pad_to_multiple_of)
            completion = pad([values[t][r][widths[t] :] for t, r in sources], 0, "right", pad_to_multiple_of)
            merged[key] = torch.cat([prompt, completion], dim=1)
        elif key in _STACKED_KEYS:
            merged[key] = torch.stack(rows)
        else:
            merged[key] = rows
    merged = unsplit_pixel_values_by_grid(merged)
    if shared:
        merged[sp.SHARED_KEY] = shared
    return merged


def _split_rows(output: dict, shared: int) -> dict:
    """One generation output with per-row image tensors (TRL's ``split_pixel_values_by_grid``), from the naive or the
    shared-prompt layout; ``shared`` = G keeps the shared layout (pixels on each group's first row), 0 expands it."""
    from trl.trainer.utils import split_pixel_values_by_grid

    G = int(output.get(sp.SHARED_KEY) or 0)
    batch = {k: v for k, v in output.items() if k != sp.SHARED_KEY}
    if G and batch.get("pixel_values") is not None:
        grid, num_images = batch["image_grid_thw"], batch["num_images"]
        if shared:
            batch["pixel_values"] = sp.split_rows(batch["pixel_values"], grid, num_images, G)
            batch["image_grid_thw"] = list(torch.split(grid, list(num_images), dim=0))
            return batch
        batch["pixel_values"] = sp.expand_pixel_values(batch["pixel_values"], grid, num_images, G)
    return split_pixel_values_by_grid(batch)


class VLMGRPOTrainer(
    FindUnusedParametersFromModel, FrozenVisionMixin, SharedPromptMixin, ToolRolloutMixin, GRPOTrainer
):
    """GRPO trainer for VLMs driven by a :class:`vlm_r1.modules.VLMBaseModule`.

    Args:
        model: a loaded ``PreTrainedModel`` (or a path, loaded by TRL).
        reward_funcs: TRL reward functions.
        args: :class:`vlm_r1.configs.VLMGRPOConfig`.
        vlm_module: the model family's module.
        processing_class: the processor (from ``vlm_module.load_processor``).
        freeze_vision: freeze the vision tower before training.
        **kwargs: passed to ``trl.GRPOTrainer`` (train_dataset, eval_dataset, peft_config, callbacks, ...).

    LoRA (``peft_config``, ``--use_peft true``): without ``target_modules`` (no ``--lora_target_modules``) the adapters
    go on every ``torch.nn.Linear`` whose name has no vision keyword (``vlm_module.get_vision_modules_keywords()``,
    ``visual`` for Qwen-VL) and no ``embed_tokens``: the language model's attention/MLP projections, as upstream
    VLM-R1 (``src/open-r1-multimodal/src/open_r1/trainer/grpo_trainer.py:257-276``) except ``lm_head``, which upstream
    included and TRL 1.16 rejects (:func:`default_lora_target_modules`); the names are taken from the loaded model
    here (a weight-less meta-device build when ``model`` is a path), before ``trl.GRPOTrainer.__init__`` wraps it with
    PEFT. An explicit
    ``--lora_target_modules`` is used as given (upstream silently overwrote it); the vision tower gets adapters only
    when its modules are named there.

    Rollout log: ``rollout_log`` (set by the caller; None: none) is the command-line dialect's writer
    (:class:`vlm_r1.dialect.Dialect`); while its ``active()`` is true, rank 0 hands it the rollouts it scored (upstream
    VLM-R1's dialect: its ``DEBUG_MODE=true`` / ``LOG_PATH`` text file).
    """

    def __init__(self, model, reward_funcs, args, *, vlm_module, processing_class, freeze_vision=False, **kwargs):
        self.vlm_module = vlm_module
        if kwargs.get("peft_config") is not None:
            kwargs["peft_config"] = resolve_lora_targets(kwargs["peft_config"], model, vlm_module, args)
        if getattr(args, "ban_vision_tokens", False):
            args.generation_kwargs = banned_generation_kwargs(args, vlm_module, processing_class)
            logger.info("image token banned from generation (GTA1's bad_words_ids): %s", args.generation_kwargs)
        if freeze_vision and not isinstance(model, str):
            n = freeze_vision_modules(model, vlm_module.get_vision_modules_keywords())
            logger.info("froze %d vision parameters", n)
        self._weights_as_json = False  # the weight column is stored as JSON text (vlm_r1.data.json_text_columns)
        if getattr(args, "sample_weight_column", None) and kwargs.get("train_dataset") is not None:
            kwargs["train_dataset"] = keep_weighted_rows(kwargs["train_dataset"], args.sample_weight_column, logger)
            self._weights_as_json = args.sample_weight_column in json_text_columns(kwargs["train_dataset"])
        # DDP find_unused_parameters from the final model and the data (vlm_r1.launch.FindUnusedParametersFromModel)
        self._remember_find_unused(args, vlm_module.get_vision_modules_keywords(), kwargs.get("train_dataset"))
        super().__init__(model=model, reward_funcs=reward_funcs, args=args, processing_class=processing_class, **kwargs)
        vlm_module.post_model_init(self.model, processing_class)
        if self.ref_model is not None:  # upstream calls the hook for the reference model too
            vlm_module.post_model_init(getattr(self.ref_model, "module", self.ref_model), processing_class)
        if hasattr(args, "loss_settings"):
            logger.info(
                "loss: %s; reference model: %s",
                args.loss_settings(),
                "loaded" if self.ref_model is not None else "none",
            )
        self._last_rewards_per_func = None
        self._refill_dataset = None

        self.rollout_log = None  # the dialect's writer (vlm_r1.grpo.train sets it)
        self._shared_prompt_setup()  # --shared_prompt (vlm_r1.shared_prompt_trainer)
        self._frozen_vision_setup(freeze_vision)  # no_grad + one encoding per image per batch (vlm_r1.vision_cache)
        if getattr(args, "dynamic_sampling", False):
            ds = self.train_dataset
            if ds is None or not (hasattr(ds, "__getitem__") and hasattr(ds, "__len__")):
                raise ValueError("--dynamic_sampling needs a map-style (indexable) training dataset to draw refills")

    # ---- checkpoint retention (issue 11; logic in vlm_r1.preemption) -------------------------------------------------
    def _save_checkpoint(self, model, trial):
        """TRL's/HF's save, with old checkpoints (``save_total_limit``) deleted only after the new one is marked
        complete (HF deletes them first): :func:`vlm_r1.preemption.save_checkpoint_then_rotate`."""
        from vlm_r1.preemption import save_checkpoint_then_rotate

        save_checkpoint_then_rotate(self, super()._save_checkpoint, model, trial)

    # ---- batch record --------------------------------------------------------------------------------------------
    def _record_batch(self, sample_ids: list, extra: dict | None = None) -> None:
        """Append ``{"step", "sample_ids"[, "dynamic_sampling"]}`` to OUTPUT_DIR/batches.rank<R>.jsonl (one line per
        generation batch: the samples this rank trains on), so a resumed run can be checked for repeated or skipped
        batches."""
        import json
        import os

        path = os.path.join(self.args.output_dir, f"batches.rank{self.accelerator.process_index}.jsonl")
        os.makedirs(self.args.output_dir, exist_ok=True)
        line = {"step": self.state.global_step + 1, "sample_ids": sample_ids}
        if extra:
            line.update(extra)
        with LineAppender(path) as log:  # whole lines, flushed, under a lock (groundwork.outputs)
            log.write(json.dumps(line, allow_nan=False))

    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        # Keep the gathered (all processes) rewards of the last scoring: dynamic sampling decides on them.
        rewards_per_func = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        self._last_rewards_per_func = rewards_per_func
        if self.accelerator.is_main_process and self.rollout_log is not None and self.rollout_log.active():
            self._log_rollouts(inputs, completions, rewards_per_func)
        return rewards_per_func

    def _log_rollouts(self, inputs: list[dict], completions: list, rewards_per_func: torch.Tensor) -> None:
        """Hand this process's scored rollouts to :attr:`rollout_log`.

        ``rewards_per_func`` is gathered over processes (rows in rank order, ``len(inputs)`` per process); the local
        rows are TRL's process slice (``trl/trainer/grpo_trainer.py`` ``_generate_and_score_completions``:
        ``process_index * len(prompts)`` to ``(process_index + 1) * len(prompts)``).
        """
        n = len(inputs)
        start = self.accelerator.process_index * n
        local = rewards_per_func[start : start + n].detach().float().cpu().tolist()
        self.rollout_log(inputs, completions, local, self.reward_func_names, self.reward_funcs)

    def _generate_and_score_completions(self, inputs):
        recorded = self.model.training and bool(inputs) and "sample_id" in inputs[0]
        if self.model.training and getattr(self.args, "dynamic_sampling", False):
            return self._dynamic_sampling(inputs, record=recorded)
        if recorded:
            self._record_batch([x["sample_id"] for x in inputs])
        return self._weighed(inputs, super()._generate_and_score_completions(inputs))

    # ---- per-sample loss weights (--sample_weight_column) ------------------------------------------------------------
    def _weighed(self, inputs: list[dict], output: dict) -> dict:
        """``output`` (TRL's generation output for the rows ``inputs``, one output row per input row, in order) with
        ``sample_weight``: the rows' ``--sample_weight_column`` values (:func:`vlm_r1.data.row_weights`), training
        only; unchanged without the flag."""
        column = getattr(self.args, "sample_weight_column", None)
        if column and self.model.training:
            output[SAMPLE_WEIGHT_KEY] = torch.tensor(
                row_weights(inputs, column, json_text=getattr(self, "_weights_as_json", False)),
                dtype=torch.float32,
                device=output["advantages"].device,
            )
        return output

    def _compute_loss(self, model, inputs):
        """TRL's loss, with the advantages scaled by the rows' ``sample_weight`` when the batch has one (module
        docstring: exact for every loss type's policy term; the KL term unweighted). Logs ``sample_weight/mean``."""
        weights = inputs.get(SAMPLE_WEIGHT_KEY)
        if weights is None:
            return super()._compute_loss(model, inputs)
        mode = "train" if self.model.training else "eval"
        mean = self.accelerator.gather(weights.detach().float().mean().reshape(1)).mean()
        self._metrics[mode]["sample_weight/mean"].append(mean.item())
        advantages = inputs["advantages"]
        scale = weights.to(advantages.device, advantages.dtype).reshape(-1, *([1] * (advantages.dim() - 1)))
        inputs = {k: v for k, v in inputs.items() if k != SAMPLE_WEIGHT_KEY}
        inputs["advantages"] = advantages * scale
        return super()._compute_loss(model, inputs)

    # ---- dynamic sampling ----------------------------------------------------------------------------------------
    def _zero_std_groups(self) -> list[bool]:
        """Per global group of the last scoring: True when its reward has zero std (TRL's ``frac_reward_zero_std``
        test on the weighted reward sum; also True when fewer than 2 completions were scorable)."""
        from accelerate.utils import broadcast
        from trl.trainer.utils import nanstd

        per_func = self._last_rewards_per_func
        rewards = (per_func * self.reward_weights.to(per_func.device).unsqueeze(0)).nansum(dim=1)
        rewards[torch.isnan(per_func).all(dim=1)] = torch.nan
        std = nanstd(rewards.view(-1, self.num_generations), dim=1)
        zero = (torch.isclose(std, torch.zeros_like(std)) | torch.isnan(std)).to(torch.int32)
        # The rewards are gathered, so every process computes the same flags; take rank 0's anyway so the processes
        # can never disagree on how many generation rounds to run (a mismatch would hang the collectives).
        if self.accelerator.num_processes > 1:
            zero = broadcast(zero, from_process=0)
        return [bool(z) for z in zero.tolist()]

    def _refill_inputs(self, rows_per_process: int, try_index: int) -> list[dict]:
        """This process's rows of a fresh generation batch, laid out as TRL's sampler does (each prompt repeated
        ``num_generations`` times in a row, process ``p`` taking the ``p``-th slice). Prompts are drawn uniformly
        without replacement (with replacement if the dataset is smaller than the batch) by a generator seeded from
        ``--seed``, the global step, the micro-step within it and the try, identically on every process and again
        identically after a resume (no state to save)."""
        if self._refill_dataset is None:
            self._refill_dataset = self._remove_unused_columns(self.train_dataset, description="dynamic sampling")
        ds = self._refill_dataset
        num_generations, rank = self.num_generations, self.accelerator.process_index
        num_prompts = rows_per_process * self.accelerator.num_processes // num_generations
        seed = self.args.seed
        for part in (self.state.global_step, self._step % self.args.gradient_accumulation_steps, try_index):
            seed = (seed * 1_000_003 + part) % (2**61 - 1)
        gen = torch.Generator().manual_seed(seed)
        if len(ds) >= num_prompts:
            prompts = torch.randperm(len(ds), generator=gen)[:num_prompts]
        else:
            prompts = torch.randint(len(ds), (num_prompts,), generator=gen)
        rows = prompts.repeat_interleave(num_generations)[rank * rows_per_process : (rank + 1) * rows_per_process]
        cache = {i: ds[i] for i in sorted(set(rows.tolist()))}
        return [{**cache[i], sp.INDEX_KEY: i} for i in rows.tolist()]  # the sampler index, as the dataloader's rows

    def _dynamic_sampling(self, inputs: list[dict], record: bool = False) -> dict:
        """TRL's generation + scoring, repeated to replace zero-reward-std groups (``--dynamic_sampling``).

        Try 0 is the batch TRL's sampler drew. While some of its groups have zero reward std and fewer than
        ``--dynamic_sampling_max_tries`` batches were generated, a fresh batch (:meth:`_refill_inputs`) is generated and
        scored by TRL, and its non-zero-std groups replace zero-std ones of the same layout (:class:`RefillPlan`). The
        returned output has exactly TRL's shape for this process (same rows, whole groups); each row keeps the advantage
        TRL computed in its own try.
        """
        rows_per_process = len(inputs)
        rank, world = self.accelerator.process_index, self.accelerator.num_processes
        layout = group_layout(rows_per_process, world, self.num_generations)
        batches = [inputs]
        outputs = [self._weighed(inputs, super()._generate_and_score_completions(inputs))]
        plan = RefillPlan(layout, self._zero_std_groups())
        while not plan.done and plan.tries < self.args.dynamic_sampling_max_tries:
            batch = self._refill_inputs(rows_per_process, plan.tries)
            outputs.append(self._weighed(batch, super()._generate_and_score_completions(batch)))
            batches.append(batch)
            plan.add_try(self._zero_std_groups())

        sources = plan.local_sources(rank, rows_per_process, self.num_generations)
        # Decide on the global assignment, not this process's rows: num_items_in_batch is a count over all processes,
        # so either every process recomputes it (a collective) or none does.
        if all(t == 0 for t, _ in plan.assignment):
            output = outputs[0]  # nothing replaced anywhere: TRL's own output as is
        else:
            output = merge_generation_rows(outputs, sources, self._tokenizer.pad_token_id, self.pad_to_multiple_of)
            mask = output["completion_mask"]
            if output.get("tool_mask") is not None:
                mask = mask * output["tool_mask"]
            output["num_items_in_batch"] = self.accelerator.gather(mask.sum()).sum()

        stats = plan.metrics()
        for key, value in stats.items():
            self._metrics["train"][key].append(value)
        if plan.unfilled and self.accelerator.is_main_process:
            logger.warning(
                "dynamic sampling: %d of %d groups still have zero reward std after %d tries; training on "
                "them as they are (zero advantage)",
                plan.unfilled,
                len(layout),
                plan.tries,
            )
        if record:
            self._record_batch(
                [batches[t][r].get("sample_id") for t, r in sources],
                {
                    "dynamic_sampling": {
                        "tries": plan.tries,
                        "generated_sample_ids": [[x.get("sample_id") for x in b] for b in batches],
                    }
                },
            )
        return output
