"""Argument dataclasses of ``python -m vlm_r1.grpo_jsonl``; every field's help text is its ``--help``.

Parsed together by ``trl.TrlParser`` (which also reads ``--config file.yaml``):

* :class:`GRPOScriptArguments`: what TRL lacks (data files, image folders, pixel budget, task, prompt mode);
* :class:`VLMGRPOConfig`: ``trl.GRPOConfig`` (all TRL GRPO and HF TrainingArguments flags) + vision-token banning;
* :class:`GRPOModelConfig`: ``trl.ModelConfig`` + ``--freeze_vision_modules``;
* :class:`UpstreamCompatArguments`: flags upstream VLM-R1 accepted that TRL 1.16 renamed or dropped. Renamed ones are
  mapped with a warning; ones that cannot apply warn loudly. Nothing is silently ignored.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from trl import GRPOConfig, ModelConfig

logger = logging.getLogger(__name__)


def _split(value: str | None) -> list[str] | None:
    return [v for v in value.split(":")] if value else None


@dataclass
class GRPOScriptArguments:
    """Data and task arguments (upstream VLM-R1's ``GRPOScriptArguments``, minus the dead ones)."""

    data_file_paths: str | None = field(
        default=None,
        metadata={"help": "Data files (JSONL or JSON), ':'-separated, e.g. 'a.jsonl:b.jsonl'. Required unless "
                  "--data_config is given."},
    )
    data_config: str | None = field(
        default=None,
        metadata={"help": "A data mixture YAML (VLM-R1 data_config): 'datasets:' entries with json_path, optional "
                  "image_folder and sampling_strategy (all, first:N, end:N, random:N, random:P%%), optional top-level "
                  "seed (default --seed); paths relative to the YAML file. Replaces --data_file_paths."},
    )
    image_folders: str | None = field(
        default=None,
        metadata={"help": "One image folder per data file, ':'-separated; image paths in the records are relative to "
                  "it. Default: each data file's own folder."},
    )
    task_type: str | None = field(
        default=None,
        metadata={"help": "Task plugin that turns records into prompts and reward columns: 'gui_grounding' (GTA1 "
                  "click task), 'default' (upstream VLM-R1 grpo_jsonl records), or upstream's rec/ic/odLength/gui/"
                  "gui_defect (default task with their question template). Default: 'default'."},
    )
    reward_funcs: list[str] | None = field(
        default=None,
        metadata={"help": "Reward functions: built-in names (accuracy, format), names registered under the "
                  "'vlm_r1.rewards' entry point (e.g. click, click_format), or 'package.module:function'. Default: "
                  "the task's own (click for gui_grounding; accuracy format for default)."},
    )
    reward_method: str | None = field(
        default=None,
        metadata={"help": "Default task only: accuracy method per data file, ':'-separated (default, all_match, "
                  "yes_no). A record's own 'accu_reward_method' wins."},
    )
    is_reward_customized_from_vlm_module: bool = field(
        default=False,
        metadata={"help": "Take rewards from the VLM module's select_reward_func (upstream REC path) instead of "
                  "the registry."},
    )
    max_pixels: int | None = field(
        default=None,
        metadata={"help": "Upper pixel budget of the image processor's smart_resize (resized H*W). Default: the "
                  "checkpoint's processor setting (12845056 for Qwen2.5-VL; GTA1 used 4096*2160)."},
    )
    min_pixels: int | None = field(
        default=None,
        metadata={"help": "Lower pixel budget of smart_resize. Default: the checkpoint's processor setting (3136)."},
    )
    prompt_mode: str = field(
        default="non_thinking",
        metadata={"help": "gui_grounding prompt: 'non_thinking' (GTA1: answer '(x,y)') or 'thinking' "
                  "('<think>...</think><answer>(x,y)</answer>').", "choices": ["non_thinking", "thinking"]},
    )
    eval_data_file_paths: str | None = field(
        default=None,
        metadata={"help": "Held-out data files (':'-separated) evaluated every --eval_steps when --eval_strategy is "
                  "'steps' (TRL's sampled eval reward, plus the task's own metric, e.g. greedy click accuracy for "
                  "gui_grounding). Image paths are relative to each file's folder. Default: the --val_split_ratio "
                  "split."},
    )
    eval_max_samples: int = field(
        default=200,
        metadata={"help": "At most this many held-out samples (the first ones) for the task's own metric."},
    )
    val_split_ratio: float = field(
        default=0.0,
        metadata={"help": "Fraction of the data held out as an eval set (used when --eval_strategy is not 'no')."},
    )
    strict_data: bool = field(
        default=False,
        metadata={"help": "Stop at the first bad record (missing/corrupt image, bad box, empty instruction) instead "
                  "of skipping and counting it."},
    )

    @property
    def data_file_list(self) -> list[str]:
        return _split(self.data_file_paths) or []

    @property
    def image_folder_list(self) -> list[str] | None:
        return _split(self.image_folders)

    @property
    def eval_data_file_list(self) -> list[str]:
        return _split(self.eval_data_file_paths) or []

    @property
    def reward_method_list(self) -> list[str] | None:
        return _split(self.reward_method)

    def __post_init__(self):
        if self.data_config and (self.data_file_paths or self.image_folders):
            raise ValueError("--data_config replaces --data_file_paths/--image_folders; give one or the other")
        files, folders = self.data_file_list, self.image_folder_list
        if folders is not None and len(folders) != len(files):
            raise ValueError(f"--image_folders has {len(folders)} entries but --data_file_paths has {len(files)}")
        methods = self.reward_method_list
        if methods is not None and len(methods) != len(files):
            raise ValueError(f"--reward_method has {len(methods)} entries but --data_file_paths has {len(files)}")


@dataclass
class VLMGRPOConfig(GRPOConfig):
    """``trl.GRPOConfig`` with GTA1's defaults and vision-token banning.

    GTA1 defaults (``gta1_and_peers.md`` 1.1): beta 0 (no reference model), num_generations 8, learning_rate 1e-6,
    temperature 1.0 (TRL 1.16's defaults already). ``bf16`` defaults to True only where a GPU supports it.
    """

    ban_vision_tokens: bool = field(
        default=True,
        metadata={"help": "Forbid generating the vision special tokens (image pad, video pad, vision start/end) via "
                  "bad_words_ids (GTA1: a sampled image token corrupts training)."},
    )

    def __post_init__(self):
        import torch

        if not torch.cuda.is_available() and not self.use_cpu:
            # Without use_cpu, accelerate on a GPU-less machine ignores torchrun's WORLD_SIZE and every process trains
            # alone (world size 1); with it, the processes form one MULTI_CPU/gloo group.
            self.use_cpu = True
            logger.info("no CUDA device: use_cpu=True (distributed runs use gloo)")
        if self.bf16 is None and not self.fp16:
            self.bf16 = bool(torch.cuda.is_available() and torch.cuda.is_bf16_supported())
            if not self.bf16:
                logger.info("no bf16-capable GPU: training in fp32 (pass --bf16 true to force)")
        super().__post_init__()


@dataclass
class GRPOModelConfig(ModelConfig):
    """``trl.ModelConfig`` (dtype, attention, LoRA, quantisation) + vision freezing."""

    freeze_vision_modules: bool = field(
        default=False,
        metadata={"help": "Freeze the vision tower (parameters whose names contain the module's vision keywords)."},
    )


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
    "max_anyres_num": "InternVL tiling; no InternVL module yet",
    "vllm_device": "TRL places vLLM itself (--vllm_mode colocate|server)",
    "vllm_dtype": "vLLM follows the model dtype",
    "vllm_enable_prefix_caching": "not configurable in TRL 1.16",
    "ignore_bias_buffers": "not needed by TRL 1.16",
}


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
    dataset_name: str | None = field(default=None, metadata={"help": "Ignored with a warning: " + _IGNORED["dataset_name"]})
    dataset_config: str | None = field(default=None, metadata={"help": "Ignored with a warning."})
    dataset_train_split: str | None = field(default=None, metadata={"help": "Ignored with a warning."})
    dataset_test_split: str | None = field(default=None, metadata={"help": "Ignored with a warning."})
    arrow_cache_dir: str | None = field(default=None, metadata={"help": "Ignored with a warning (unused upstream too)."})
    max_prompt_length: int | None = field(default=None, metadata={"help": "Ignored with a warning: " + _IGNORED["max_prompt_length"]})
    max_anyres_num: int | None = field(default=None, metadata={"help": "Ignored with a warning: InternVL only."})
    vllm_device: str | None = field(default=None, metadata={"help": "Ignored with a warning."})
    vllm_dtype: str | None = field(default=None, metadata={"help": "Ignored with a warning."})
    vllm_enable_prefix_caching: bool | None = field(default=None, metadata={"help": "Ignored with a warning."})
    ignore_bias_buffers: bool | None = field(default=None, metadata={"help": "Ignored with a warning."})

    def apply(self, training_args: VLMGRPOConfig, model_args: GRPOModelConfig) -> list[str]:
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
            training_args.gradient_checkpointing_kwargs = kwargs
            warnings.append(f"--gradient_checkpointing_use_reentrant mapped to gradient_checkpointing_kwargs={kwargs}")
        for name, why in _IGNORED.items():
            if getattr(self, name) is not None:
                warnings.append(f"--{name}={getattr(self, name)!r} has NO effect here: {why}")
        return warnings
