"""Upstream VLM-R1's effective defaults: where TRL 1.16 / transformers 5.23 default differently from what upstream VLM-R1
(90052f4, pinned to trl 0.17.0 and transformers 4.49.0) actually ran, its command line
(``python -m vlm_r1.grpo_jsonl``) takes upstream's effective value. Given to the core's parse as the dialect's
``defaults`` (:class:`vlm_r1.dialect.Dialect`), so flags, the ``--config`` recipe and an entry point's own defaults
(GTA1's) still win, and ``--help`` shows each value with its source. docs/UPSTREAM.md "Defaults" has the full table
with every upstream flag (:mod:`vlm_r1.upstream.table`); ``tests/test_upstream_defaults.py`` pins it.
"""

from __future__ import annotations

from typing import Any

#: where the sources below are: the repository, pinned
UPSTREAM_REPO = "om-ai-lab/VLM-R1@90052f4 src/open-r1-multimodal/"

#: field -> (value, where it comes from; ``omm/`` is :data:`UPSTREAM_REPO`)
UPSTREAM_EFFECTIVE_DEFAULTS: dict[str, tuple[Any, str]] = {
    "beta": (0.04, "omm/src/open_r1/trainer/grpo_config.py:291-292 (beta 0.04)"),
    "loss_type": ("grpo", "omm/src/open_r1/trainer/grpo_trainer.py:771: per-sequence token mean, then batch mean"),
    "max_completion_length": (256, "omm/src/open_r1/trainer/grpo_config.py:177-178"),
    "top_k": (
        50,
        "grpo_trainer.py:373-377 samples from GenerationConfig(do_sample=True, temperature=1), whose "
        "class default top_k is 50 under transformers 4.49 (generation/configuration_utils.py:423); "
        "4.49's _prepare_generation_config (generation/utils.py:1550-1559) only falls back the special "
        "tokens to the model's generation config",
    ),
    "logging_steps": (500, "transformers 4.49 TrainingArguments default (upstream's GRPOConfig does not override it)"),
    "gradient_checkpointing": (False, "transformers 4.49 TrainingArguments default"),
    "bf16": (False, "transformers 4.49 TrainingArguments default (upstream scripts pass --bf16)"),
    "optim": ("adamw_torch", "transformers 4.49 TrainingArguments default (5.x: adamw_torch_fused, same update)"),
    "average_tokens_across_devices": (False, "transformers 4.49 TrainingArguments default"),
    "use_bias_correction_kl": (False, "grpo_trainer.py:760-764: plain k3 KL per token, no importance-ratio factor"),
    "resume_from_checkpoint": (
        "latest",
        "grpo_jsonl.py:1058-1061 resumes from output_dir's checkpoint-* whenever "
        "one exists; ours takes the newest COMPLETE one; 'false' starts fresh",
    ),
}


#: field -> value
DEFAULTS: dict[str, Any] = {name: value for name, (value, _) in UPSTREAM_EFFECTIVE_DEFAULTS.items()}
#: field -> the reason ``--help`` gives
DEFAULT_NOTES: dict[str, str] = {
    name: f"upstream VLM-R1's effective value ({source.replace('omm/', UPSTREAM_REPO)})"
    for name, (_, source) in UPSTREAM_EFFECTIVE_DEFAULTS.items()
}
