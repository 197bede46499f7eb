"""``python -m vlm_r1.sft``: supervised fine-tuning of a VLM on the same data and prompts as GRPO, on TRL's SFTTrainer.

VLM-R1 ships an SFT entry point next to its GRPO one; this is ours. A task plugin (``--task_type``, same registry and
same two-phase parse as ``vlm_r1.grpo_jsonl``, so the task's own flags are accepted here too) builds the prompt rows
exactly as GRPO sees them (same prompt, same resized image), and the task's ``sft_completion(row)`` gives the target
answer (``default``: the record's gpt answer inside ``<answer> </answer>``; a plugin task: its own format). The loss is
on the completion tokens only (TRL prompt-completion data, ``completion_only_loss``). The data flags are GRPO's
(``vlm_r1.configs.DataArguments``: ``--data_file_paths`` or ``--data_config``, ``--image_folders``/``--image_root``,
``--eval_data_file_paths`` or ``--val_split_ratio``, pixel budget, ``--max_anyres_num``).

Example (upstream grpo_jsonl records, a tiny model)::

    python -m vlm_r1.sft --model_name_or_path runs/tiny --task_type default \\
        --data_file_paths data.jsonl --output_dir runs/sft --num_train_epochs 3 \\
        --per_device_train_batch_size 16 --learning_rate 1e-3

Accepts every TRL ``SFTConfig`` / HF ``TrainingArguments`` / ``ModelConfig`` flag plus the data flags and
``--config file.yaml``. With held-out data and ``--eval_strategy steps`` the task's own held-out metric (if it has
one) is logged during training, as in GRPO.
"""

from __future__ import annotations

import logging
import sys
from dataclasses import dataclass, field

from trl import SFTConfig

from vlm_r1.command_line import parse_task
from vlm_r1.configs import SFT_BATCH_MINIMUMS, DataArguments, GRPOModelConfig, check_batch
from vlm_r1.devices import apply_device_defaults
from vlm_r1.grpo import BUDGET_FLAGS, build_datasets, load_processor_and_budget, replace_data
from vlm_r1.launch import (
    FindUnusedParametersFromModel,
    input_errors,
    load_policy_model,
    prefer_activation_checkpointing,
    save_final,
    setup_logging,
    with_transform_of,
)
from vlm_r1.modules import get_vlm_module
from vlm_r1.tasks import get_task
from vlm_r1.upstream import TRANSFORMERS_4

logger = logging.getLogger("vlm_r1")


#: The data arguments are GRPO's (:class:`vlm_r1.configs.DataArguments`); SFT keeps the checkpoint's pixel budget
#: unless --max_pixels / --min_pixels are given (GRPO's defaults are upstream VLM-R1's 12845056 / 3136).
SFTScriptArguments = DataArguments
SFT_DEFAULTS = {"max_pixels": None, "min_pixels": None}


@dataclass
class VLMSFTConfig(SFTConfig):
    """``trl.SFTConfig`` with this project's device defaults (CPU: ``use_cpu``; bf16 only on capable GPUs),
    ``remove_unused_columns=False`` (the task's lazy image loader needs its ``image_path`` column) and
    ``max_length=None`` (no truncation: it would cut image tokens)."""

    remove_unused_columns: bool = field(
        default=False, metadata={"help": "Keep dataset columns (images are loaded lazily from image_path)."}
    )
    max_length: int | None = field(
        default=None,
        metadata={
            "help": "Maximum tokenized length; longer sequences are truncated. Default None (no truncation), "
            "not TRL's 1024: truncating a VLM sequence cuts its image tokens, and the model then fails "
            "('Image features and image tokens do not match'); one 1080p screenshot alone is ~2,700 Qwen2.5-VL "
            "tokens, one InternVL image up to 13 x 256."
        },
    )

    def __post_init__(self):

        apply_device_defaults(self)
        prefer_activation_checkpointing(self)  # transformers 5 names, without the FutureWarning
        check_batch(self, SFT_BATCH_MINIMUMS)  # HF Trainer divides by them
        super().__post_init__()


def _sft_trainer_class():
    """``trl.SFTTrainer`` with DDP's ``find_unused_parameters`` decided from the model and data
    (:class:`vlm_r1.launch.FindUnusedParametersFromModel`)."""
    from trl import SFTTrainer

    class VLMSFTTrainer(FindUnusedParametersFromModel, SFTTrainer):
        def __init__(self, *, vision_keywords: list[str], **kwargs):
            self._remember_find_unused(kwargs["args"], vision_keywords, kwargs.get("train_dataset"))
            super().__init__(**kwargs)

    return VLMSFTTrainer


def parse_args(argv: list[str] | None = None):
    """Parse the command line (and ``--config``) into ``(DataArguments, VLMSFTConfig, GRPOModelConfig)``.

    Same parser as ``vlm_r1.grpo_jsonl`` (:func:`vlm_r1.command_line.parse_task`, one parse): the task first, then its own
    flags with the core's (``script_args.task_options``), bare boolean flags, transformers 4.x ``TrainingArguments``
    flags mapped to their successors or announced (``vlm_r1.upstream.TRANSFORMERS_4``). Defaults: :data:`SFT_DEFAULTS`.
    """
    import argparse

    argv = list(argv) if argv is not None else sys.argv[1:]
    cl = parse_task((DataArguments, VLMSFTConfig, GRPOModelConfig), argv, defaults=SFT_DEFAULTS, dialect=TRANSFORMERS_4)
    (script_args, training_args, model_args), options = cl.objects()
    script_args.task_options = options
    for line in cl.notices:
        logger.warning("UPSTREAM FLAG: %s", line)
    where = cl.sources
    script_args.budget_sources = {flag: where.get(flag, "default of vlm_r1.sft") for flag in BUDGET_FLAGS}
    script_args.apply_image_root()
    error = argparse.ArgumentParser(prog="vlm_r1.sft", add_help=False).error
    if not script_args.data_file_list and not script_args.data_config:
        error("--data_file_paths (':'-separated JSONL/JSON files) or --data_config (mixture YAML) is required")
    if not model_args.model_name_or_path:
        error("--model_name_or_path is required")
    return script_args, training_args, model_args


def add_completions(task, dataset):
    """``dataset`` (the task's rows) plus a ``completion`` column (``[{"role": "assistant", "content": target}]``,
    ``task.sft_completion(row)``), keeping its lazy image transform.

    Raises:
        NotImplementedError: the task defines no SFT target (``Task.sft_completion``).
    """

    dataset = task.sft_rows(dataset) if callable(getattr(task, "sft_rows", None)) else dataset
    plain = dataset.with_format(None)
    task.sft_completion(plain[0])  # fail before the map when the task has no SFT target
    return with_transform_of(
        dataset, plain.map(lambda row: {"completion": [{"role": "assistant", "content": task.sft_completion(row)}]})
    )


def sft_dataset(task, script_args, processor, vlm_module, data_files: str | None = None):
    """The task's rows of ``script_args``' data files (or ``data_files``) with their ``completion`` column
    (:func:`add_completions`).

    Raises:
        NotImplementedError: the task defines no SFT target (``Task.sft_completion``).
    """
    if data_files is not None:
        script_args = replace_data(script_args, data_file_paths=data_files, image_folders=None)
    return add_completions(task, task.build_dataset(script_args, processor, vlm_module))


def main(argv: list[str] | None = None) -> None:
    """Build everything from the command line, train, and save model + processor to ``--output_dir``. An input error
    ends it with one ``vlm_r1.sft: error: ...`` line, status 2 (:func:`vlm_r1.launch.input_errors`)."""
    with input_errors("vlm_r1.sft"):
        _main(argv)


def _main(argv: list[str] | None) -> None:

    setup_logging()
    script_args, training_args, model_args = parse_args(argv)

    from trl import get_peft_config

    from vlm_r1.trainer import freeze_vision_modules

    VLMSFTTrainer = _sft_trainer_class()

    model_path = model_args.model_name_or_path
    vlm_module = get_vlm_module(model_path)
    processor, budget = load_processor_and_budget(vlm_module, model_path, script_args)
    task = get_task(script_args.task_type, getattr(script_args, "task_options", None))
    task.pixel_budget = budget
    dataset, eval_dataset, _ = build_datasets(script_args, training_args, task, processor, vlm_module)
    dataset = add_completions(task, dataset)
    eval_rows = eval_dataset  # the task's own rows, for its held-out metric (not the SFT rows made from them)
    if eval_dataset is not None:
        eval_dataset = add_completions(task, eval_dataset)
    logger.info(
        "task=%s SFT rows=%d, e.g. completion %r",
        task.name,
        len(dataset),
        dataset.with_format(None)[0]["completion"][0]["content"],
    )

    model = load_policy_model(model_args, training_args, vlm_module)
    if model_args.freeze_vision_modules:
        logger.info(
            "froze %d vision parameters", freeze_vision_modules(model, vlm_module.get_vision_modules_keywords())
        )

    trainer = VLMSFTTrainer(
        model=model,
        args=training_args,
        train_dataset=dataset,
        eval_dataset=eval_dataset,
        processing_class=processor,
        peft_config=get_peft_config(model_args),
        vision_keywords=vlm_module.get_vision_modules_keywords(),
    )
    from vlm_r1.callbacks import use_compact_console

    use_compact_console(
        trainer, getattr(task, "console_metrics", ())
    )  # one line per step on the console; full dicts in logs.jsonl
    for callback in task.eval_callbacks(script_args, training_args, processor, vlm_module, eval_rows):
        callback.trainer = trainer
        trainer.add_callback(callback)
    trainer.train(resume_from_checkpoint=training_args.resume_from_checkpoint)
    save_final(
        trainer,
        processor,
        vlm_module,
        training_args.output_dir,
        f"SFT {model_path} on {script_args.data_config or script_args.data_file_paths}",
        budget=budget,
    )


if __name__ == "__main__":
    sys.exit(main())
