"""``VLMGRPOTrainer``: ``trl.GRPOTrainer`` plus the VLM module hooks VLM-R1 users rely on.

Added on top of TRL (through narrow hooks, nothing copied):

* vision-token ban: ``bad_words_ids`` for the module's vision special tokens is merged into ``generation_kwargs``
  (TRL itself only suppresses the image pad token; GTA1 bans image tokens, ``seed_summary.md``). For vLLM the same
  tokens go in as ``bad_words`` strings;
* vision freezing by the module's parameter-name keywords (``--freeze_vision_modules``);
* the module itself is kept on the trainer (``trainer.vlm_module``) for rewards and evaluation hooks.
"""

from __future__ import annotations

import logging
from typing import Any

from trl import GRPOTrainer

logger = logging.getLogger(__name__)


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


def banned_generation_kwargs(args: Any, vlm_module: Any, processing_class: Any) -> dict:
    """``args.generation_kwargs`` with the vision tokens banned (HF ``bad_words_ids`` or vLLM ``bad_words``)."""
    gen = dict(args.generation_kwargs or {})
    ids = vlm_module.get_banned_token_ids(processing_class)
    if getattr(args, "use_vllm", False):
        tokenizer = getattr(processing_class, "tokenizer", processing_class)
        words = list(gen.get("bad_words") or [])
        tokens = tokenizer.convert_ids_to_tokens(ids)
        gen["bad_words"] = words + [t for t in tokens if t not in words]
        return gen
    existing = [list(w) for w in gen.get("bad_words_ids") or []]
    gen["bad_words_ids"] = existing + [[i] for i in ids if [i] not in existing]
    if "suppress_tokens" in gen:  # a user list replaces TRL's image-token suppression: keep the image token in it
        gen["suppress_tokens"] = sorted(set(gen["suppress_tokens"]) | {ids[0]})
    return gen


class VLMGRPOTrainer(GRPOTrainer):
    """GRPO trainer for VLMs driven by a :class:`vlm_r1.modules.VLMBaseModule`.

    Args:
        model: a loaded ``PreTrainedModel`` (or a path, loaded by TRL).
        reward_funcs: TRL reward functions.
        args: :class:`vlm_r1.configs.VLMGRPOConfig`.
        vlm_module: the model family's module.
        processing_class: the processor (from ``vlm_module.load_processor``).
        freeze_vision: freeze the vision tower before training.
        **kwargs: passed to ``trl.GRPOTrainer`` (train_dataset, eval_dataset, peft_config, callbacks, ...).
    """

    def __init__(self, model, reward_funcs, args, *, vlm_module, processing_class, freeze_vision=False, **kwargs):
        self.vlm_module = vlm_module
        if getattr(args, "ban_vision_tokens", True):
            args.generation_kwargs = banned_generation_kwargs(args, vlm_module, processing_class)
            logger.info("vision tokens banned from generation: %s", args.generation_kwargs)
        if freeze_vision and not isinstance(model, str):
            n = freeze_vision_modules(model, vlm_module.get_vision_modules_keywords())
            logger.info("froze %d vision parameters", n)
        super().__init__(model=model, reward_funcs=reward_funcs, args=args, processing_class=processing_class, **kwargs)
        vlm_module.post_model_init(self.model, processing_class)

    def _generate_and_score_completions(self, inputs):
        # Record which samples each optimisation step trains on (OUTPUT_DIR/batches.rank<R>.jsonl, one line per
        # generation batch), so a resumed run can be checked for repeated or skipped batches.
        if self.model.training and inputs and "sample_id" in inputs[0]:
            import json
            import os

            path = os.path.join(self.args.output_dir, f"batches.rank{self.accelerator.process_index}.jsonl")
            os.makedirs(self.args.output_dir, exist_ok=True)
            with open(path, "a", encoding="utf-8") as f:
                f.write(json.dumps({"step": self.state.global_step + 1,
                                    "sample_ids": [x["sample_id"] for x in inputs]}) + "\n")  # fmt: skip
        return super()._generate_and_score_completions(inputs)
