"""Shared-prompt GRPO inside TRL's ``GRPOTrainer`` (``--shared_prompt true``): the hooks of :class:`SharedPromptMixin`.

The packing itself is :mod:`vlm_r1.shared_prompt`; this module decides when it applies and wires it into TRL 1.16's
private hook points (pinned TRL version; each hook is covered by ``tests/test_shared_prompt_trainer.py``):

* ``_get_dataloader``: every training row carries the dataset index the sampler drew (``INDEX_KEY``); TRL's
  ``RepeatSampler`` draws each index G times in a row (``trl/trainer/grpo_trainer.py:1280-1316``), which is what makes
  a group;
* ``_generate_and_score_completions``: per generation batch, the group identity is checked (same sampler index G
  times, same prompt fingerprint: messages and image pixel hash; :func:`vlm_r1.shared_prompt.group_mismatch`) and the
  decision is all-reduced, so every rank runs shared or every rank runs naive (a rank alone going naive would make a
  different number of forward calls and hang ZeRO-3). While it runs shared, the processor call that builds the
  forward inputs (``grpo_trainer.py:2533``) processes each unique prompt once (``pixel_values`` one copy per group),
  tokenization and HF generation prefill each unique prompt once (:meth:`_generate_single_turn`), and the old and
  reference log-prob passes run one packed row per group;
* ``_prepare_inputs``: the generation batch is shuffled by whole groups (TRL shuffles rows,
  ``grpo_trainer.py:1543``) and cut into ``steps_per_generation`` slices of whole groups;
* ``_compute_loss``: the policy pass of a shared slice runs packed; ``shared_prompt/*`` token counts are logged per
  optimisation step (summed over processes and accumulation steps).

Where sharing cannot apply the run says why once at start-up and runs naive (:meth:`shared_prompt_status`, also in
``vlm_r1_run.json``). vLLM: TRL's server mode already sends each unique prompt once with ``n=G``
(``trl/generation/vllm_generation.py:602-618``); colocate mode sends G copies with ``n=1`` (vLLM's prefix cache can
reuse their prefill); shared prompting then covers the log-prob passes and the vision tower only.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from vlm_r1 import shared_prompt as sp
from vlm_r1.shared_prompt_attention import enable_split_attention

logger = logging.getLogger(__name__)

#: what shared prompting does to vLLM generation, per --vllm_mode (said at start-up).
VLLM_NOTE = {
    "server": "generation sends each unique prompt once with n=G (TRL's server mode, trl/generation/"
    "vllm_generation.py:602-618); the log-prob passes and the vision tower run once per group",
    "colocate": "TRL's colocate mode sends the G copies of each prompt with n=1 (vllm_generation.py:660-730; vLLM's "
    "automatic prefix caching can reuse their prefill); sending each unique prompt once with n=G in "
    "colocate mode is not implemented (it needs a GPU to test); the log-prob passes and the vision tower "
    "run once per group",
}

_SPLIT_IMPLEMENTATIONS = ("flash_attention_2", "flash_attention_3", "flash_attention_4", "kernels-community/flash-attn")


def _resolve_attention(attention: str, implementation: str) -> tuple[str, str | None]:
    """``(attention, reason)``: ``--shared_prompt_attention`` (``auto``/``dense``/``split``) resolved against the
    model's text attention implementation (``auto`` is ``split`` under a flash-attention kernel, else ``dense``), and
    why it cannot run (a dense 4D mask needs ``sdpa`` or ``eager``), or None."""
    if attention == "auto":
        attention = "split" if implementation in _SPLIT_IMPLEMENTATIONS else "dense"
    if attention == "dense" and implementation not in ("sdpa", "eager"):
        return attention, (
            f"attention implementation {implementation!r} takes no dense 4D mask; use --shared_prompt_attention split"
        )
    return attention, None


class IndexedDataset(torch.utils.data.Dataset):
    """A map-style dataset whose rows also carry their index under :data:`vlm_r1.shared_prompt.INDEX_KEY`."""

    def __init__(self, dataset: Any):
        self.dataset = dataset

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, index: int) -> dict:
        row = dict(self.dataset[index])
        row[sp.INDEX_KEY] = int(index)
        return row

    def __getitems__(self, indices: Sequence[int]) -> list[dict]:
        getitems = getattr(self.dataset, "__getitems__", None)
        rows = getitems(list(indices)) if callable(getitems) else [self.dataset[i] for i in indices]
        out = []
        for index, row in zip(indices, rows, strict=True):
            row = dict(row)
            row[sp.INDEX_KEY] = int(index)
            out.append(row)
        return out


class GroupedProcessor:
    """The processor, seen through a group layout: called on ``B = U * G`` prompts whose blocks of G are equal, it
    processes the U unique ones and returns per-row tensors repeated G times, with ``pixel_values`` one copy per group
    (the *shared* layout of :mod:`vlm_r1.shared_prompt`). Every other attribute is the real processor's."""

    def __init__(self, processor: Any, num_generations: int):
        self._processor = processor
        self._G = int(num_generations)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._processor, name)

    def __call__(self, *args, images=None, text=None, **kwargs):
        G = self._G
        if images is None:  # text only: no pixels, no layout to keep
            return self._processor(*args, images=images, text=text, **kwargs)
        if args or text is None or len(text) % G or len(images) != len(text):
            raise RuntimeError(
                f"shared-prompt processor: expected G={G} copies of each prompt with one image list per "
                f"prompt, got {len(text or [])} texts and {len(images)} image lists"
            )
        unique = self._processor(images=images[::G], text=text[::G], **kwargs)
        num_images = [len(x) if x else 0 for x in images[::G]]
        data = {}
        for key, value in unique.items():
            if key == "pixel_values" or not isinstance(value, torch.Tensor):
                data[key] = value
            elif key == "image_grid_thw":
                parts, k = [], 0
                for n in num_images:
                    parts.extend([value[k : k + n]] * G)
                    k += n
                data[key] = torch.cat(parts) if parts else value
            elif value.dim() >= 1 and value.size(0) == len(num_images):
                data[key] = value.repeat_interleave(G, dim=0)
            else:
                data[key] = value
        return type(unique)(data=data)


class SharedPromptMixin:
    """Shared-prompt GRPO hooks for a ``trl.GRPOTrainer`` subclass (put it before ``GRPOTrainer`` in the bases and
    call :meth:`_shared_prompt_setup` at the end of ``__init__``; the subclass has ``vlm_module``)."""

    # ---- set-up ----------------------------------------------------------------------------------------------------
    def _shared_prompt_setup(self) -> None:
        """Decide once whether ``--shared_prompt`` can apply (identically on every rank) and say why not."""
        args = self.args
        self._sp_G = 0  # group size of the forward passes now running (0 = naive)
        self._sp_counts: dict[str, int] = {}
        self._sp_fallbacks = 0
        self._sp_unique_fields = None  # unique prompts' processor outputs between _tokenize_prompts and generation
        self._sp_warned: set[str] = set()
        requested = bool(getattr(args, "shared_prompt", False))
        G = int(self.num_generations)
        model = self.accelerator.unwrap_model(self.model)
        text_config = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
        implementation = getattr(text_config, "_attn_implementation", None) or "eager"
        attention = getattr(args, "shared_prompt_attention", "auto")
        reason = self._shared_prompt_unsupported(model, G) if requested else "off (--shared_prompt false)"
        if reason is None:
            attention, reason = _resolve_attention(attention, implementation)
        # every rank must decide alike (static inputs, but a hook could depend on the rank's model)
        ok = torch.tensor([0 if reason else 1], device=self.accelerator.device)
        ok = int(self.accelerator.gather(ok).min()) if self.accelerator.num_processes > 1 else int(ok)
        if reason is None and not ok:
            reason = "another process cannot share prompts"
        self._sp_enabled = reason is None
        self._sp_reason = reason
        self._sp_attention = attention if self._sp_enabled else None
        self._sp_base_attention = implementation
        if self._sp_enabled and attention == "split":
            self._sp_base_attention = enable_split_attention(model)
        if self.accelerator.is_main_process:
            self._shared_prompt_announce(requested, G)

    def _shared_prompt_unsupported(self, model: Any, G: int) -> str | None:
        """Why this run (requested shared) cannot share prompts, from its static set-up, or None: groups of one, a
        per-device batch that splits groups, no positions hook in the model family, a per-row MoE loss, anything that
        changes rows after generation, or a dataset without sampler indices. The first reason found is the one said."""
        args = self.args
        if G < 2:
            return f"num_generations {G}: nothing to share"
        if args.per_device_train_batch_size % G:
            return (
                f"per_device_train_batch_size {args.per_device_train_batch_size} is not a multiple of "
                f"num_generations {G}: a group's rollouts would sit on different micro-batches or processes "
                f"(set the per-device batch to a multiple of {G}, e.g. ROLLOUTS_PER_DEVICE={G})"
            )
        if getattr(self.vlm_module, "shared_prompt_positions_fn", lambda m: None)(model) is None:
            return f"model family {type(self.vlm_module).__name__} has no shared-prompt hook"
        if getattr(self, "aux_loss_enabled", False):
            return "MoE load-balancing loss is computed per row"
        if self.tools or getattr(self, "environment_factories", None) is not None or self.rollout_func is not None:
            return "tool calling / environments / rollout_func change rows after generation"
        if isinstance(self.train_dataset, torch.utils.data.IterableDataset) or not hasattr(
            self.train_dataset, "__getitem__"
        ):
            return "iterable training dataset: no sampler index to identify a group"
        return None

    def _shared_prompt_announce(self, requested: bool, G: int) -> None:
        """Say the set-up decision once (main process): on, with the attention used (and what it means for vLLM), or
        the reason it runs naive (a warning when it was requested)."""
        if not self._sp_enabled:
            if requested:
                logger.warning("shared-prompt GRPO requested but running naive: %s", self._sp_reason)
            else:
                logger.info("shared-prompt GRPO: %s", self._sp_reason)
            return
        logger.info(
            "shared-prompt GRPO: on (groups of %d; %s attention over %s): each group's prompt and "
            "image go through the model once",
            G,
            self._sp_attention,
            self._sp_base_attention,
        )
        if self.use_vllm:
            logger.info(
                "shared-prompt GRPO with vLLM: %s",
                VLLM_NOTE.get(getattr(self.args, "vllm_mode", None), VLLM_NOTE["colocate"]),
            )

    def shared_prompt_status(self) -> dict:
        """What ``vlm_r1_run.json`` records: ``requested``, ``active``, ``reason`` (None when active), ``attention``
        (``dense``/``split``) and ``group_size``."""
        return {
            "requested": bool(getattr(self.args, "shared_prompt", False)),
            "active": self._sp_enabled,
            "reason": self._sp_reason,
            "attention": self._sp_attention,
            "group_size": int(self.num_generations) if self._sp_enabled else None,
            "base_attention_implementation": self._sp_base_attention,
        }

    # ---- data: sampler index on every row --------------------------------------------------------------------------
    def _get_dataloader(self, dataset, description, batch_size, sampler_fn=None, is_training=False, **kwargs):
        if (
            is_training
            and getattr(self, "_sp_enabled", False)
            and not isinstance(dataset, torch.utils.data.IterableDataset)
        ):
            import datasets

            if isinstance(dataset, datasets.Dataset):
                dataset = self._remove_unused_columns(dataset, description=description)
            dataset = IndexedDataset(dataset)
        return super()._get_dataloader(
            dataset, description, batch_size, sampler_fn=sampler_fn, is_training=is_training, **kwargs
        )

    # ---- generation batch ------------------------------------------------------------------------------------------
    def _shared_prompt_decide(self, rows: list[dict], indices: list) -> int:
        """G when this generation batch runs shared on every rank, else 0 (logged, counted)."""
        G = int(self.num_generations)
        reason = sp.group_mismatch(indices, [sp.prompt_fingerprint(r) for r in rows], G)
        ok = torch.tensor([0 if reason else 1], device=self.accelerator.device)
        if self.accelerator.num_processes > 1:
            ok = self.accelerator.gather(ok).min()
        if int(ok):
            return G
        reason = reason or "another process's batch has no whole groups"
        self._sp_fallbacks += 1
        if reason not in self._sp_warned:
            self._sp_warned.add(reason)
            logger.warning("shared-prompt GRPO: this generation batch runs naive on every process: %s", reason)
        return 0

    def _generate_and_score_completions(self, inputs):
        rows = inputs
        indices = None
        if inputs and isinstance(inputs[0], dict) and sp.INDEX_KEY in inputs[0]:
            indices = [x.get(sp.INDEX_KEY) for x in inputs]
            rows = [{k: v for k, v in x.items() if k != sp.INDEX_KEY} for x in inputs]
        G = 0
        if getattr(self, "_sp_enabled", False) and self.model.training:
            G = self._shared_prompt_decide(rows, indices if indices is not None else [None] * len(rows))
            self._metrics["train"]["shared_prompt/active"].append(float(bool(G)))
        if not G:
            return super()._generate_and_score_completions(rows)
        processor = self.processing_class
        self.processing_class = GroupedProcessor(processor, G)
        self._sp_G = G
        try:
            output = super()._generate_and_score_completions(rows)
        finally:
            self.processing_class = processor
            self._sp_G = 0
        output[sp.SHARED_KEY] = G
        return output

    def _tokenize_prompts(self, prompts: list):
        G = self._sp_G
        if not G or len(prompts) % G or self.use_vllm or self.use_transformers_continuous_batching:
            # vLLM (server mode already sends each unique prompt once with n=G) and continuous batching take TRL's
            # per-row prompts
            return super()._tokenize_prompts(prompts)
        prompt_ids, images, fields = super()._tokenize_prompts(prompts[::G])
        prompt_ids = [list(ids) for ids in prompt_ids for _ in range(G)]
        if images is not None:
            images = [imgs for imgs in images for _ in range(G)]
        self._sp_unique_fields = fields  # the unique prompts' processor outputs, for _generate_single_turn
        return prompt_ids, images, {}

    def _generate_single_turn(self, prompt_ids, images, multimodal_fields, num_generations, has_tool_images=False):
        fields = getattr(self, "_sp_unique_fields", None)
        self._sp_unique_fields = None
        if not self._sp_G or fields is None:
            return super()._generate_single_turn(
                prompt_ids, images, multimodal_fields, num_generations, has_tool_images=has_tool_images
            )
        return self._shared_hf_generate(prompt_ids[:: self._sp_G], fields, self._sp_G)

    def _shared_hf_generate(self, unique_prompt_ids: list, fields: dict, G: int):
        """HF ``generate`` with each unique prompt prefilled once (the module's ``shared_prompt_prefill``); same
        context managers and EOS masking as TRL's HF branch (``grpo_trainer.py:1849-1891``)."""
        from transformers import Trainer
        from trl.models import unwrap_model_for_generation
        from trl.trainer.utils import pad

        device = self.accelerator.device
        tensors = [torch.tensor(ids) for ids in unique_prompt_ids]
        generate_inputs = {
            "input_ids": pad(
                tensors,
                padding_value=self._tokenizer.pad_token_id,
                padding_side="left",
                pad_to_multiple_of=self.pad_to_multiple_of,
            ),
            "attention_mask": pad(
                [torch.ones_like(t) for t in tensors],
                padding_value=0,
                padding_side="left",
                pad_to_multiple_of=self.pad_to_multiple_of,
            ),
        }
        for key, value in fields.items():
            if isinstance(value, torch.Tensor):
                generate_inputs[key] = value
            elif isinstance(value, list) and value and isinstance(value[0], list):
                generate_inputs[key] = pad(
                    [torch.tensor(x) for x in value],
                    padding_value=0,
                    padding_side="left",
                    pad_to_multiple_of=self.pad_to_multiple_of,
                )
            else:  # numpy arrays (pixel_values, image_grid_thw without return_tensors), as TRL converts them
                generate_inputs[key] = torch.tensor(np.array(value))
        generate_inputs = Trainer._prepare_inputs(self, generate_inputs)
        with (
            unwrap_model_for_generation(
                self.model_wrapped,
                self.accelerator,
                gather_deepspeed3_params=self.args.ds3_gather_for_generation,
                generation_kwargs=self.generation_kwargs,
                gradient_checkpointing_kwargs=self.args.gradient_checkpointing_kwargs,
            ) as unwrapped_model,
            torch.no_grad(),
            self._dist.summon_full_params(self.model_wrapped, recurse=False),
        ):
            kwargs = self.vlm_module.shared_prompt_prefill(unwrapped_model, generate_inputs, G)
            sequences = unwrapped_model.generate(**kwargs, generation_config=self.generation_config)
        prompt_length = generate_inputs["input_ids"].size(1)
        completion_ids = sequences[:, prompt_length:]
        is_eos = torch.isin(completion_ids, torch.tensor(self.eos_token_ids, device=device))
        eos_idx = torch.full((is_eos.size(0),), is_eos.size(1), dtype=torch.long, device=device)
        eos_idx[is_eos.any(dim=1)] = is_eos.int().argmax(dim=1)[is_eos.any(dim=1)]
        sequence_indices = torch.arange(is_eos.size(1), device=device).expand(is_eos.size(0), -1)
        completion_mask = (sequence_indices <= eos_idx.unsqueeze(1)).int()
        completion_ids = [
            c[m].tolist() for c, m in zip(completion_ids.cpu(), completion_mask.bool().cpu(), strict=True)
        ]
        return completion_ids, None

    # ---- log-prob passes -------------------------------------------------------------------------------------------
    def _get_per_token_logps_and_entropies(
        self,
        model,
        input_ids,
        attention_mask,
        logits_to_keep,
        batch_size=None,
        compute_entropy=False,
        compute_aux_loss=False,
        pixel_values=None,
        image_grid_thw=None,
        num_images=None,
        mm_token_type_ids=None,
        **kwargs,
    ):
        G = self._sp_G
        if not G:
            return super()._get_per_token_logps_and_entropies(
                model,
                input_ids,
                attention_mask,
                logits_to_keep,
                batch_size=batch_size,
                compute_entropy=compute_entropy,
                compute_aux_loss=compute_aux_loss,
                pixel_values=pixel_values,
                image_grid_thw=image_grid_thw,
                num_images=num_images,
                mm_token_type_ids=mm_token_type_ids,
                **kwargs,
            )
        unsupported = sorted(k for k, v in kwargs.items() if v is not None)
        if unsupported or compute_aux_loss:
            raise NotImplementedError(f"shared-prompt log-probs do not take {unsupported or ['compute_aux_loss']}")
        if pixel_values is not None and image_grid_thw is None:
            raise NotImplementedError("shared-prompt log-probs need image_grid_thw (Qwen-VL style image inputs)")
        additive = None
        if self._sp_attention == "dense" and self._sp_base_attention == "eager":
            additive = next(self.accelerator.unwrap_model(model).parameters()).dtype
            if not additive.is_floating_point:
                additive = torch.float32
        logps, entropies = sp.per_token_logps_and_entropies(
            model,
            input_ids,
            attention_mask,
            logits_to_keep,
            num_generations=G,
            positions_fn=self.vlm_module.shared_prompt_positions_fn(model),
            batch_size=batch_size,
            compute_entropy=compute_entropy,
            pixel_values=pixel_values,
            image_grid_thw=image_grid_thw,
            num_images=num_images,
            mm_token_type_ids=mm_token_type_ids,
            attention=self._sp_attention,
            additive_mask_dtype=additive,
            pad_token_id=self._tokenizer.pad_token_id,
            autocast=self.accelerator.autocast,
        )
        return logps, entropies, None

    def _compute_loss(self, model, inputs):
        G = int(inputs.get(sp.SHARED_KEY) or 0)
        if self.model.training and getattr(self, "_sp_enabled", None) is not None:
            completion = inputs["completion_mask"]
            mask = torch.cat([inputs["prompt_mask"], completion], dim=1)
            counts = sp.token_counts(
                mask, completion.size(1), G, inputs.get("image_grid_thw"), inputs.get("num_images")
            )
            for key, value in counts.items():
                self._sp_counts[key] = self._sp_counts.get(key, 0) + value
            if (self._step + 1) % self.current_gradient_accumulation_steps == 0:
                self._log_shared_prompt_counts()
        self._sp_G = G
        try:
            return super()._compute_loss(model, inputs)
        finally:
            self._sp_G = 0

    def _log_shared_prompt_counts(self) -> None:
        """Append this optimisation step's totals (all processes, all accumulation steps) to the train metrics."""
        keys = ("llm_tokens", "naive_llm_tokens", "vision_patches", "naive_vision_patches")
        local = torch.tensor([float(self._sp_counts.get(k, 0)) for k in keys], device=self.accelerator.device)
        total = self.accelerator.gather(local[None]).sum(dim=0) if self.accelerator.num_processes > 1 else local
        for key, value in zip(keys, total.tolist(), strict=True):
            self._metrics["train"][f"shared_prompt/{key}"].append(value)
        self._sp_counts = {}

    # ---- buffering: whole groups -----------------------------------------------------------------------------------
    def _prepare_inputs(self, generation_batch):
        if not (self.model.training and getattr(self, "_sp_enabled", False)):
            return super()._prepare_inputs(generation_batch)
        generate_every = self.args.steps_per_generation * self.num_iterations
        if self._step % generate_every == 0 or self._buffered_inputs is None:
            output = self._generate_and_score_completions(generation_batch)
            self._buffered_inputs = split_generation_batch(
                output, self.args.steps_per_generation, int(self.num_generations)
            )
        return self._buffered_inputs[self._step % self.args.steps_per_generation]


def split_generation_batch(output: dict, num_slices: int, num_generations: int) -> list[dict]:
    """TRL's shuffle-and-slice of a generation output (``grpo_trainer.py:1540-1545``), by whole groups.

    Rows are permuted group by group (groups in the order their first row takes in ``torch.randperm(rows)``: the
    same global-RNG draw as TRL's row shuffle) and cut into ``num_slices`` equal slices, each whole groups. A shared-layout output (``SHARED_KEY`` set) keeps one
    ``pixel_values`` copy per group in every slice; a naive one keeps TRL's layout.

    Raises:
        ValueError: the rows do not split into ``num_slices`` slices of whole groups.
    """
    G = int(num_generations)
    shared = int(output.get(sp.SHARED_KEY) or 0)
    batch = {k: v for k, v in output.items() if k != sp.SHARED_KEY}
    rows = batch["prompt_ids"].size(0)
    if rows % (num_slices * G):
        raise ValueError(f"{rows} rows do not split into {num_slices} slices of whole groups of {G}")
    batch = _pixels_per_row(batch, shared, G)
    order = _group_order(rows, G)
    batch = {k: _permute(v, order) for k, v in batch.items()}
    size = rows // num_slices
    return [_slice(batch, s * size, (s + 1) * size, shared) for s in range(num_slices)]


def _pixels_per_row(batch: dict, shared: int, G: int) -> dict:
    """``pixel_values`` and ``image_grid_thw`` as one tensor per row, so rows can be permuted and sliced: the shared
    layout through :func:`vlm_r1.shared_prompt.split_rows` (the carrier holds the group's copy), the naive one through
    TRL's ``split_pixel_values_by_grid``. A batch without pixels, grids or ``num_images`` is returned as it is.

    Raises:
        NotImplementedError: a shared layout with pixels but without ``image_grid_thw``/``num_images``.
    """
    num_images = batch.get("num_images")
    if batch.get("pixel_values") is not None and batch.get("image_grid_thw") is not None and num_images is not None:
        grid = batch["image_grid_thw"]
        if shared:
            batch["pixel_values"] = sp.split_rows(batch["pixel_values"], grid, num_images, G)
        else:
            from trl.trainer.utils import split_pixel_values_by_grid

            batch = split_pixel_values_by_grid(batch)
        if not isinstance(batch["image_grid_thw"], list):
            batch["image_grid_thw"] = list(torch.split(grid, list(num_images), dim=0))
    elif batch.get("pixel_values") is not None and shared:
        raise NotImplementedError("shared layout without image_grid_thw/num_images")
    return batch


def _group_order(rows: int, G: int) -> torch.Tensor:
    """The row order of a shuffle by whole groups: each group goes where the first of its rows appears in
    ``torch.randperm(rows)``, its rows kept in order.

    The same RNG draw as TRL's row shuffle (``torch.randperm(rows)``, ``trl/trainer/utils.py``
    ``shuffle_sequence_dict``), so a shared and a naive run with the same seed stay on the same random stream.
    """
    row_perm = torch.randperm(rows)
    group_order = list(dict.fromkeys(r // G for r in row_perm.tolist()))
    return (torch.tensor(group_order)[:, None] * G + torch.arange(G)[None]).reshape(-1)


def _is_rows(value: Any) -> bool:
    """A per-row value of a generation batch: a list or a tensor with a batch dimension (not a 0-d scalar)."""
    return isinstance(value, (list, torch.Tensor)) and not (isinstance(value, torch.Tensor) and value.dim() == 0)


def _permute(value: Any, order: torch.Tensor) -> Any:
    """A batch value in row ``order`` (tensors and lists); None, 0-d tensors and other values unchanged."""
    if value is None or (isinstance(value, torch.Tensor) and value.dim() == 0):
        return value
    if isinstance(value, torch.Tensor):
        return value[order]
    if isinstance(value, list):
        return [value[i] for i in order.tolist()]
    return value


def _slice(batch: dict, start: int, end: int, shared: int) -> dict:
    """Rows ``start:end`` of a permuted batch, per-row ``pixel_values``/``image_grid_thw`` joined back into tensors,
    marked shared (``SHARED_KEY``) when the generation output was."""
    part = {key: value[start:end] if _is_rows(value) else value for key, value in batch.items()}
    for key in ("pixel_values", "image_grid_thw"):
        if isinstance(part.get(key), list):
            part[key] = torch.cat(part[key], dim=0)
    if shared:
        part[sp.SHARED_KEY] = shared
    return part
