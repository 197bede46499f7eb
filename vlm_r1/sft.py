"""``python -m vlm_r1.sft``: supervised fine-tuning of a VLM on the same data and prompts as GRPO, on TRL's SFTTrainer.

VLM-R1 ships an SFT entry point next to its GRPO one; this is ours. A task plugin (``--task_type``, same registry as
``vlm_r1.grpo_jsonl``) builds the prompt rows exactly as GRPO sees them (same system prompt, same resized image), and
the task's ``sft_completion(row)`` gives the target answer (``gui_grounding``: the centre of the target box in the
resized frame, ``(x,y)``; ``default``: the record's gpt answer inside ``<answer> </answer>``). The loss is on the
completion tokens only (TRL prompt-completion data, ``completion_only_loss``).

Example (warm start on the synthetic toy set)::

    python -m vlm_r1.sft --model_name_or_path runs/tiny --task_type gui_grounding \\
        --data_file_paths runs/synthetic/train.jsonl --output_dir runs/sft --num_train_epochs 3 \\
        --per_device_train_batch_size 16 --learning_rate 1e-3

Accepts every TRL ``SFTConfig`` / HF ``TrainingArguments`` / ``ModelConfig`` flag plus the data flags below and
``--config file.yaml``. With ``--eval_data_file_paths`` and ``--eval_strategy steps`` the task's own held-out metric
(greedy click accuracy for ``gui_grounding``) is logged during training, as in GRPO.
"""

from __future__ import annotations

import logging
import sys
from dataclasses import dataclass, field

from trl import SFTConfig

from vlm_r1.configs import GRPOModelConfig
from vlm_r1.devices import apply_device_defaults

logger = logging.getLogger("vlm_r1")


def _split(value: str | None) -> list[str]:
    return value.split(":") if value else []


@dataclass
class SFTScriptArguments:
    """Data and task arguments of ``python -m vlm_r1.sft`` (the subset of the GRPO script arguments SFT uses)."""

    data_file_paths: str = field(
        default=None, metadata={"help": "Training data files (JSONL or JSON), ':'-separated. Required."}
    )
    image_folders: str | None = field(
        default=None,
        metadata={"help": "One image folder per data file, ':'-separated. Default: each data file's own folder."},
    )
    task_type: str | None = field(
        default=None,
        metadata={"help": "Task plugin (same registry as vlm_r1.grpo_jsonl): 'gui_grounding' or 'default'. The task "
                  "builds the prompts and gives the target answer. Default: 'default'."},
    )
    prompt_mode: str = field(
        default="non_thinking",
        metadata={"help": "gui_grounding prompt and target format: 'non_thinking' ('(x,y)'), 'thinking' "
                  "('<think>...</think><answer>(x,y)</answer>' with a fixed template thought) or 'box' "
                  "('[x1,y1,x2,y2]').", "choices": ["non_thinking", "thinking", "box"]},
    )
    adapter: str | None = field(
        default=None,
        metadata={"help": "gui_grounding: the model family's format by adapter name (see python -m vlm_r1.grpo_jsonl "
                  "--help). Default: from the checkpoint's config.model_type (and --prompt_mode for gta1)."},
    )
    max_pixels: int | None = field(
        default=None, metadata={"help": "smart_resize upper pixel budget. Default: the checkpoint's processor."}
    )
    min_pixels: int | None = field(
        default=None, metadata={"help": "smart_resize lower pixel budget. Default: the checkpoint's processor."}
    )
    eval_data_file_paths: str | None = field(
        default=None,
        metadata={"help": "Held-out data files (':'-separated) for the task's metric every --eval_steps (with "
                  "--eval_strategy steps)."},
    )
    eval_max_samples: int = field(default=200, metadata={"help": "At most this many held-out samples are scored."})
    strict_data: bool = field(default=False, metadata={"help": "Stop at the first bad record instead of skipping it."})

    @property
    def data_file_list(self) -> list[str]:
        return _split(self.data_file_paths)

    @property
    def image_folder_list(self) -> list[str] | None:
        return _split(self.image_folders) or None

    @property
    def eval_data_file_list(self) -> list[str]:
        return _split(self.eval_data_file_paths)

    @property
    def reward_method_list(self) -> list[str] | None:
        return None


@dataclass
class VLMSFTConfig(SFTConfig):
    """``trl.SFTConfig`` with this project's device defaults (CPU: ``use_cpu``; bf16 only on capable GPUs) and
    ``remove_unused_columns=False`` (the task's lazy image loader needs its ``image_path`` column)."""

    remove_unused_columns: bool = field(
        default=False, metadata={"help": "Keep dataset columns (images are loaded lazily from image_path)."}
    )

    def __post_init__(self):
        from vlm_r1.launch import prefer_activation_checkpointing

        apply_device_defaults(self)
        prefer_activation_checkpointing(self)  # transformers 5 names, without the FutureWarning
        super().__post_init__()


def _sft_trainer_class():
    """``trl.SFTTrainer`` with DDP's ``find_unused_parameters`` decided from the model and data
    (:class:`vlm_r1.launch.FindUnusedParametersFromModel`)."""
    from trl import SFTTrainer

    from vlm_r1.launch import FindUnusedParametersFromModel

    class VLMSFTTrainer(FindUnusedParametersFromModel, SFTTrainer):
        def __init__(self, *, vision_keywords: list[str], **kwargs):
            self._remember_find_unused(kwargs["args"], vision_keywords, kwargs.get("train_dataset"))
            super().__init__(**kwargs)

    return VLMSFTTrainer


def parse_args(argv: list[str] | None = None):
    """Parse the command line (and ``--config``) into ``(SFTScriptArguments, VLMSFTConfig, GRPOModelConfig)``.

    Same parser rules as ``vlm_r1.grpo_jsonl`` (``vlm_r1.configs.parse_command_line``): bare boolean flags, and
    transformers 4.x ``TrainingArguments`` flags mapped to their successors or announced.
    """
    import argparse

    from vlm_r1.configs import parse_command_line

    argv = list(argv) if argv is not None else sys.argv[1:]
    (script_args, training_args, model_args), notices = parse_command_line(
        (SFTScriptArguments, VLMSFTConfig, GRPOModelConfig), argv
    )
    for line in notices:
        logger.warning("UPSTREAM FLAG: %s", line)
    error = argparse.ArgumentParser(prog="vlm_r1.sft", add_help=False).error
    if not script_args.data_file_list:
        error("--data_file_paths is required")
    if not model_args.model_name_or_path:
        error("--model_name_or_path is required")
    return script_args, training_args, model_args


def sft_dataset(task, script_args, processor, vlm_module, data_files: str | None = None):
    """The task's rows plus a ``completion`` column (``[{"role": "assistant", "content": target}]``).

    Raises:
        NotImplementedError: the task defines no SFT target (``Task.sft_completion``).
    """
    import dataclasses
    if data_files is not None:
        script_args = dataclasses.replace(script_args, data_file_paths=data_files, image_folders=None)
    ds = task.build_dataset(script_args, processor, vlm_module)
    task.sft_completion(ds.with_format(None)[0])  # fail before the map when the task has no SFT target
    from vlm_r1.launch import with_transform_of

    plain = ds.with_format(None)
    return with_transform_of(ds, plain.map(lambda row: {"completion": [{"role": "assistant",
                                                                         "content": task.sft_completion(row)}]}))


def main(argv: list[str] | None = None) -> None:
    """Build everything from the command line, train, and save model + processor to ``--output_dir``."""
    from vlm_r1.launch import load_policy_model, save_final, setup_logging

    setup_logging()
    script_args, training_args, model_args = parse_args(argv)

    from trl import get_peft_config

    from vlm_r1.modules import get_vlm_module
    from vlm_r1.tasks import get_task
    from vlm_r1.trainer import freeze_vision_modules

    VLMSFTTrainer = _sft_trainer_class()

    model_path = model_args.model_name_or_path
    vlm_module = get_vlm_module(model_path)
    processor = vlm_module.load_processor(model_path, min_pixels=script_args.min_pixels,
                                          max_pixels=script_args.max_pixels)  # fmt: skip
    task = get_task(script_args.task_type)
    dataset = sft_dataset(task, script_args, processor, vlm_module)
    eval_dataset = None
    if script_args.eval_data_file_list and training_args.eval_strategy != "no":
        eval_dataset = sft_dataset(task, script_args, processor, vlm_module, script_args.eval_data_file_paths)
    logger.info("task=%s SFT rows=%d, e.g. completion %r", task.name, len(dataset),
                dataset.with_format(None)[0]["completion"][0]["content"])  # fmt: skip

    model = load_policy_model(model_args, training_args, vlm_module)
    if model_args.freeze_vision_modules:
        logger.info("froze %d vision parameters",
                    freeze_vision_modules(model, vlm_module.get_vision_modules_keywords()))  # fmt: skip

    trainer = VLMSFTTrainer(model=model, args=training_args, train_dataset=dataset, eval_dataset=eval_dataset,
                            processing_class=processor, peft_config=get_peft_config(model_args),
                            vision_keywords=vlm_module.get_vision_modules_keywords())  # fmt: skip
    from vlm_r1.callbacks import use_compact_console

    use_compact_console(trainer)  # one line per step on the console; full dicts in OUTPUT_DIR/logs.jsonl
    for callback in task.eval_callbacks(script_args, training_args, processor, vlm_module, eval_dataset):
        callback.trainer = trainer
        trainer.add_callback(callback)
    trainer.train(resume_from_checkpoint=training_args.resume_from_checkpoint)
    save_final(trainer, processor, vlm_module, training_args.output_dir,
               f"SFT {model_path} on {script_args.data_file_paths}")

if __name__ == "__main__":
    sys.exit(main())
