"""Upstream command lines that must keep parsing: upstream VLM-R1 flags that TRL 1.16 renamed or dropped
(:class:`UpstreamCompatArguments`: renamed ones mapped with a warning, dead ones warned loudly) and every transformers
4.49 ``TrainingArguments`` flag that 5.x removed (:class:`LegacyTrainingArguments`, :data:`LEGACY_TRAINING_FLAGS`:
mapped to its successor with a notice, or announced as having no effect). Both are the upstream dialect's
``argument_classes``, parsed with the core's dataclasses by :mod:`vlm_r1.command_line`; :func:`translate` rewrites the
transformers 4.x flags into core values before any dataclass is built, :func:`finish` maps upstream's renamed flags and
its ``--dataset_name`` forms once they are. ``tests/test_upstream_defaults.py`` checks the lists are complete.
"""

from __future__ import annotations

import argparse
import logging
import os
from dataclasses import dataclass, field, fields
from typing import Any

logger = logging.getLogger("vlm_r1")

# flag -> (what happens, TRL field it maps to or None)
_RENAMED = {
    "torch_dtype": "dtype",
    "vllm_max_model_len": "vllm_max_model_length",
    "vllm_guided_decoding_regex": "vllm_structured_outputs_regex",
}
_IGNORED = {
    "dataset_name": "data comes from --data_file_paths",
    "dataset_config": "data comes from --data_file_paths",
    "dataset_train_split": "data comes from --data_file_paths",
    "dataset_test_split": "use --val_split_ratio",
    "arrow_cache_dir": "datasets are built in memory",
    "max_prompt_length": "TRL 1.16 never truncates prompts (image tokens stay intact)",
    "vllm_device": "TRL places vLLM itself (--vllm_mode colocate|server)",
    "vllm_dtype": "vLLM follows the model dtype",
    "vllm_enable_prefix_caching": "not configurable in TRL 1.16",
    "ignore_bias_buffers": "not needed by TRL 1.16",
}


def _ignored(name: str):
    """A field for a dropped upstream flag: accepted, announced with :data:`_IGNORED`'s reason, no effect."""
    return field(default=None, metadata={"help": f"Ignored with a warning: {_IGNORED[name]}."})


@dataclass
class UpstreamCompatArguments:
    """Upstream VLM-R1 flags that TRL 1.16 renamed or dropped (accepted so old scripts run; each one warns)."""

    torch_dtype: str | None = field(default=None, metadata={"help": "Upstream name of --dtype (mapped, warns)."})
    vllm_max_model_len: int | None = field(
        default=None, metadata={"help": "Upstream name of --vllm_max_model_length (mapped, warns)."}
    )
    vllm_guided_decoding_regex: str | None = field(
        default=None, metadata={"help": "Upstream name of --vllm_structured_outputs_regex (mapped, warns)."}
    )
    gradient_checkpointing_use_reentrant: bool | None = field(
        default=None, metadata={"help": "Sets gradient_checkpointing_kwargs={'use_reentrant': ...} (warns)."}
    )
    dataset_name: str | None = _ignored("dataset_name")
    dataset_config: str | None = _ignored("dataset_config")
    dataset_train_split: str | None = _ignored("dataset_train_split")
    dataset_test_split: str | None = _ignored("dataset_test_split")
    arrow_cache_dir: str | None = _ignored("arrow_cache_dir")
    max_prompt_length: int | None = _ignored("max_prompt_length")
    vllm_device: str | None = _ignored("vllm_device")
    vllm_dtype: str | None = _ignored("vllm_dtype")
    vllm_enable_prefix_caching: bool | None = _ignored("vllm_enable_prefix_caching")
    ignore_bias_buffers: bool | None = _ignored("ignore_bias_buffers")

    def apply(self, training_args: Any, model_args: Any) -> list[str]:
        """Map renamed flags onto TRL's, and return one warning line per upstream flag that was given."""
        warnings = []
        for name, target in _RENAMED.items():
            value = getattr(self, name)
            if value is None:
                continue
            owner = model_args if hasattr(model_args, target) else training_args
            setattr(owner, target, value)
            warnings.append(f"--{name} is upstream's name; mapped to --{target}={value}")
        if self.gradient_checkpointing_use_reentrant is not None:
            kwargs = dict(training_args.gradient_checkpointing_kwargs or {})
            kwargs["use_reentrant"] = self.gradient_checkpointing_use_reentrant
            # both names: __post_init__ already ran, and transformers 5 reads activation_checkpointing_kwargs
            training_args.gradient_checkpointing_kwargs = training_args.activation_checkpointing_kwargs = kwargs
            warnings.append(f"--gradient_checkpointing_use_reentrant mapped to gradient_checkpointing_kwargs={kwargs}")
        for name, why in _IGNORED.items():
            if getattr(self, name) is not None:
                warnings.append(f"--{name}={getattr(self, name)!r} has NO effect here: {why}")
        return warnings


# ---- transformers 4.x TrainingArguments flags removed in 5.x -------------------------------------------------------
# Every transformers 4.49 TrainingArguments flag (upstream VLM-R1's and GTA1's pin) that 5.23 no longer has, with what
# it becomes: a 5.x field (``"field"``), a key of a 5.x dict field (``"field:key"``), an environment variable
# (``"env:NAME"``), a fixed value of a 5.x field (``"field=value"``), or None (no effect; the note says why).
# ``_n_gpu`` is not a flag (init=False in 4.49). tests/test_upstream_defaults.py checks this list is complete.
LEGACY_TRAINING_FLAGS: dict[str, tuple[type, str | None, str]] = {
    "overwrite_output_dir": (
        bool,
        None,
        "transformers 5 removed it; nothing refuses an existing --output_dir (resume is --resume_from_checkpoint)",
    ),
    "per_gpu_train_batch_size": (int, "per_device_train_batch_size", "4.x's deprecated alias"),
    "per_gpu_eval_batch_size": (int, "per_device_eval_batch_size", "4.x's deprecated alias"),
    "warmup_ratio": (float, "warmup_steps", "transformers 5 reads a float in [0, 1) as a ratio of the total steps"),
    "logging_dir": (str, "env:TENSORBOARD_LOGGING_DIR", "transformers 5's TensorBoard callback reads this variable"),
    "save_safetensors": (bool, None, "transformers 5 always saves safetensors"),
    "no_cuda": (bool, "use_cpu", "4.x's deprecated alias"),
    "use_mps_device": (bool, None, "the MPS device is picked automatically"),
    "jit_mode_eval": (bool, None, "TorchScript evaluation was removed in transformers 5"),
    "use_ipex": (bool, None, "Intel extension support was removed in transformers 5"),
    "fp16_opt_level": (str, None, "apex AMP was removed in transformers 5"),
    "half_precision_backend": (str, None, "torch AMP is the only backend in transformers 5"),
    "tpu_num_cores": (int, None, "set by the TPU launcher in transformers 5"),
    "tpu_metrics_debug": (bool, None, "removed in transformers 5"),
    "past_index": (int, None, "removed in transformers 5 (no model here uses mems)"),
    "fsdp_min_num_params": (int, "fsdp_config:min_num_params", "the fsdp_config key"),
    "fsdp_transformer_layer_cls_to_wrap": (str, "fsdp_config:transformer_layer_cls_to_wrap", "the fsdp_config key"),
    "adafactor": (bool, "optim=adafactor", "4.x's deprecated alias"),
    "group_by_length": (
        bool,
        None,
        "GRPO orders batches with its repeat sampler (upstream VLM-R1 too: grpo_trainer.py _get_train_sampler)",
    ),
    "use_legacy_prediction_loop": (bool, None, "removed in transformers 5"),
    "include_inputs_for_metrics": (bool, "include_for_metrics=inputs", "4.x's deprecated alias"),
    "fp16_backend": (str, None, "torch AMP is the only backend in transformers 5"),
    "evaluation_strategy": (str, "eval_strategy", "renamed in transformers 4.46"),
    "push_to_hub_model_id": (str, "hub_model_id", "4.x's deprecated alias"),
    "push_to_hub_organization": (str, None, "give --hub_model_id ORG/NAME instead"),
    "push_to_hub_token": (str, "hub_token", "4.x's deprecated alias"),
    "mp_parameters": (str, None, "SageMaker model-parallel support was removed in transformers 5"),
    "torchdynamo": (str, "torch_compile_backend", "4.x's deprecated alias"),
    "ray_scope": (str, None, "Ray Tune hyper-parameter search scope; no hyper-parameter search here"),
    "dispatch_batches": (bool, "accelerator_config:dispatch_batches", "the accelerator_config key"),
    "split_batches": (bool, "accelerator_config:split_batches", "the accelerator_config key"),
    "include_tokens_per_second": (bool, None, "the step stats already log throughput/tokens_per_s every step"),
}


def _legacy_field(name: str):
    typ, successor, note = LEGACY_TRAINING_FLAGS[name]
    where = "no effect" if successor is None else f"mapped to {successor}"
    return field(default=None, metadata={"help": f"transformers 4.x flag ({where}: {note}); accepted with a notice."})


@dataclass
class LegacyTrainingArguments:
    """transformers 4.49 ``TrainingArguments`` flags that 5.x removed (upstream VLM-R1 / GTA1 scripts pass some)."""

    overwrite_output_dir: bool | None = _legacy_field("overwrite_output_dir")
    per_gpu_train_batch_size: int | None = _legacy_field("per_gpu_train_batch_size")
    per_gpu_eval_batch_size: int | None = _legacy_field("per_gpu_eval_batch_size")
    warmup_ratio: float | None = _legacy_field("warmup_ratio")
    logging_dir: str | None = _legacy_field("logging_dir")
    save_safetensors: bool | None = _legacy_field("save_safetensors")
    no_cuda: bool | None = _legacy_field("no_cuda")
    use_mps_device: bool | None = _legacy_field("use_mps_device")
    jit_mode_eval: bool | None = _legacy_field("jit_mode_eval")
    use_ipex: bool | None = _legacy_field("use_ipex")
    fp16_opt_level: str | None = _legacy_field("fp16_opt_level")
    half_precision_backend: str | None = _legacy_field("half_precision_backend")
    tpu_num_cores: int | None = _legacy_field("tpu_num_cores")
    tpu_metrics_debug: bool | None = _legacy_field("tpu_metrics_debug")
    past_index: int | None = _legacy_field("past_index")
    fsdp_min_num_params: int | None = _legacy_field("fsdp_min_num_params")
    fsdp_transformer_layer_cls_to_wrap: str | None = _legacy_field("fsdp_transformer_layer_cls_to_wrap")
    adafactor: bool | None = _legacy_field("adafactor")
    group_by_length: bool | None = _legacy_field("group_by_length")
    use_legacy_prediction_loop: bool | None = _legacy_field("use_legacy_prediction_loop")
    include_inputs_for_metrics: bool | None = _legacy_field("include_inputs_for_metrics")
    fp16_backend: str | None = _legacy_field("fp16_backend")
    evaluation_strategy: str | None = _legacy_field("evaluation_strategy")
    push_to_hub_model_id: str | None = _legacy_field("push_to_hub_model_id")
    push_to_hub_organization: str | None = _legacy_field("push_to_hub_organization")
    push_to_hub_token: str | None = _legacy_field("push_to_hub_token")
    mp_parameters: str | None = _legacy_field("mp_parameters")
    torchdynamo: str | None = _legacy_field("torchdynamo")
    ray_scope: str | None = _legacy_field("ray_scope")
    dispatch_batches: bool | None = _legacy_field("dispatch_batches")
    split_batches: bool | None = _legacy_field("split_batches")
    include_tokens_per_second: bool | None = _legacy_field("include_tokens_per_second")

    def successors(self, explicit: set[str]) -> tuple[dict[str, Any], list[str]]:
        """``(parser defaults for the 5.x successors, one notice per legacy flag given)``.

        A successor the user also set explicitly (``explicit``: flags on the command line or keys in ``--config``)
        keeps the user's value; the notice says so. Environment successors are set here (``os.environ.setdefault``).
        """

        overrides: dict[str, Any] = {}
        notices = []
        for name, (_, successor, note) in LEGACY_TRAINING_FLAGS.items():
            value = getattr(self, name)
            if value is None:
                continue
            if successor is None:
                notices.append(f"--{name}={value!r} is a transformers 4.x flag with NO effect here: {note}")
                continue
            if successor.startswith("env:"):
                var = successor[4:]
                os.environ.setdefault(var, str(value))
                notices.append(f"--{name}={value!r} (transformers 4.x) -> environment {var}={os.environ[var]} ({note})")
                continue
            if "=" in successor:
                target, fixed = successor.split("=", 1)
                if not value:
                    notices.append(f"--{name}={value!r} (transformers 4.x) has no effect when false")
                    continue
                new = [fixed] if target == "include_for_metrics" else fixed
            elif ":" in successor:
                target, key = successor.split(":", 1)
                current = overrides.get(target, {})
                value = [value] if key == "transformer_layer_cls_to_wrap" else value
                new = {**current, key: value}
            else:
                target, new = successor, value
            if target in explicit:
                notices.append(f"--{name}={value!r} (transformers 4.x) ignored: --{target} is given explicitly")
                continue
            overrides[target] = new
            notices.append(f"--{name}={value!r} (transformers 4.x) mapped to --{target}={new!r} ({note})")
        return overrides, notices


def translate(parser: argparse.ArgumentParser, namespace: argparse.Namespace, given: set[str]) -> list[str]:
    """The dialect's ``translate`` hook: map the transformers 4.x flags in ``namespace`` onto their successors (never
    over a value in ``given``: set by a flag or the recipe) and return one notice per flag given
    (:meth:`LegacyTrainingArguments.successors`)."""
    legacy = LegacyTrainingArguments(
        **{f.name: getattr(namespace, f.name, None) for f in fields(LegacyTrainingArguments)}
    )
    overrides, notices = legacy.successors(given)
    actions = {a.dest: a for a in parser._actions}
    for target, value in overrides.items():
        action = actions.get(target)
        if isinstance(value, str) and action is not None and callable(action.type):
            value = action.type(value)  # what argparse does with a string default
        setattr(namespace, target, value)
    return notices


def finish(
    extras: list, script_args: Any, training_args: Any, model_args: Any, given: set[str], *, dataset_name_as_data: bool
) -> None:
    """The dialect's ``finish`` hook: ``--dataset_name`` in upstream's and GTA1's forms, then the renamed and dropped
    flags (:meth:`UpstreamCompatArguments.apply`), each change logged as an ``UPSTREAM FLAG:`` warning.

    * ``--dataset_name FILE.yaml`` (upstream ``grpo_rec.py``) is read as a ``--data_config`` mixture, and the task
      becomes ``rec`` unless ``--task_type`` says otherwise;
    * with ``dataset_name_as_data`` (GTA1's ``src/grpo_grounding.py``: ``--dataset_name FILE.json --image_root DIR``),
      any other ``--dataset_name`` is the data file; otherwise it has no effect here (announced).
    """
    compat = next(e for e in extras if isinstance(e, UpstreamCompatArguments))
    dataset_name = compat.dataset_name
    no_data = not (script_args.data_file_paths or script_args.data_config)
    if dataset_name and dataset_name.lower().endswith((".yaml", ".yml")) and no_data:
        script_args.data_config = dataset_name
        compat.dataset_name = None
        logger.warning(
            "UPSTREAM FLAG: --dataset_name %s is upstream grpo_rec.py's data config: read as --data_config",
            dataset_name,
        )
        if "task_type" not in given:
            script_args.task_type = "rec"
            logger.warning(
                "UPSTREAM FLAG: --dataset_name YAML without --task_type: task_type rec (grpo_rec.py trains REC)"
            )
    elif dataset_name and dataset_name_as_data and no_data:
        script_args.data_file_paths = dataset_name
        compat.dataset_name = None
        logger.info("--dataset_name %s: the data file (GTA1 form)", dataset_name)
    for line in compat.apply(training_args, model_args):
        logger.warning("UPSTREAM FLAG: %s", line)
