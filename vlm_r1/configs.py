"""Argument dataclasses of ``python -m vlm_r1.grpo_jsonl``; every field's help text is its ``--help``.

Parsed together by ``trl.TrlParser`` (which also reads ``--config file.yaml``):

* :class:`GRPOScriptArguments`: what TRL lacks (data files, image folders, pixel budget, task, prompt mode);
* :class:`VLMGRPOConfig`: ``trl.GRPOConfig`` (all TRL GRPO and HF TrainingArguments flags) + vision-token banning,
  loss presets (``--loss_preset``) and DAPO-style dynamic sampling (``--dynamic_sampling``);
* :class:`GRPOModelConfig`: ``trl.ModelConfig`` + ``--freeze_vision_modules``;
* :class:`UpstreamCompatArguments`: flags upstream VLM-R1 accepted that TRL 1.16 renamed or dropped. Renamed ones are
  mapped with a warning; ones that cannot apply warn loudly. Nothing is silently ignored.

Loss presets (``--loss_preset``, table :data:`LOSS_PRESETS`) against their sources, as TRL 1.16 computes them:

* ``gta1`` / ``vlm_r1``: the advantage is the same formula as both trainers, ``(r - group mean) / (group std + 1e-4)``
  with the unbiased std (TRL's ``nanstd`` applies Bessel's correction, like ``torch.std``), over rewards gathered from
  all processes. TRL ``loss_type="grpo"`` is their normalisation: token mean per sequence, mean over the micro-batch,
  divided by the gradient accumulation steps (GTA1/VLM-R1 get the same division from HF ``Trainer`` since their
  ``model_accepts_loss_kwargs`` is False). PPO clip and the k3 KL (``beta > 0``) are the same expressions; with
  ``num_iterations=1`` and ``steps_per_generation == gradient_accumulation_steps`` (the defaults) the ratio is 1, as in
  GTA1. Differences that remain: TRL computes log-probs from logits divided by ``--temperature`` (default 1.0; GTA1
  and VLM-R1 always sample at 1.0 and never rescale, so keep ``--temperature 1.0`` for a faithful run, the presets do
  not pin it); TRL gives completions whose every reward is None a zero advantage (GTA1's rewards are never None); TRL
  can mask truncated completions (off in both presets, as in the sources); we ban four vision tokens in generation
  where GTA1 bans the image token only (no effect on the loss).
* ``dapo`` and ``dr_grpo`` follow TRL's paper index. DAPO's dynamic sampling is the separate ``--dynamic_sampling``
  switch (TRL does not implement it), its soft overlong punishment is a reward function.
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

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
                  "click task), 'default' (upstream VLM-R1 grpo_jsonl records), 'rec' (upstream REC: one image, bbox "
                  "answer in original pixels; accuracy/format resolve to rec_iou/rec_format), or upstream's ic/"
                  "odLength/gui/gui_defect (default task with their question template). Default: 'default'."},
    )
    reward_funcs: list[str] | None = field(
        default=None,
        metadata={"help": "Reward functions: built-in names (accuracy, format, rec_iou, rec_format), names "
                  "registered under the 'vlm_r1.rewards' entry point (click, click_format, distance, iou, "
                  "gaussian_point, gaussian_coverage, click_distance_bonus; see docs/REWARDS.md), or "
                  "'package.module:function'. Default: the task's own (click for gui_grounding; accuracy format for "
                  "default; rec_iou rec_format for rec)."},
    )
    reward_method: str | None = field(
        default=None,
        metadata={"help": "Default task only: accuracy method per data file, ':'-separated (default, all_match, "
                  "yes_no). A record's own 'accu_reward_method' wins."},
    )
    is_reward_customized_from_vlm_module: bool = field(
        default=False,
        metadata={"help": "Take rewards from the VLM module's select_reward_func (upstream REC path) instead of "
                  "the registry (Qwen: task_type rec -> iou_reward/format_reward_rec; --task_type rec alone gives the "
                  "same)."},
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
        metadata={"help": "gui_grounding prompt: 'non_thinking' (GTA1: answer '(x,y)'), 'thinking' "
                  "('<think>...</think><answer>(x,y)</answer>') or 'box' (answer '[x1,y1,x2,y2]', for the iou / "
                  "gaussian_coverage rewards; point rewards score the box centre).",
                  "choices": ["non_thinking", "thinking", "box"]},
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


# ---- loss presets -------------------------------------------------------------------------------------------------
# The GRPOConfig fields a preset may set. Each preset pins every field it lists; a field it does not list keeps the
# user's value (or TRL's default). ``epsilon_high=None`` is TRL's "same as epsilon" (symmetric clipping).
PRESET_FIELDS = ("loss_type", "scale_rewards", "beta", "epsilon", "epsilon_high", "mask_truncated_completions")
LOSS_PRESETS: dict[str, dict[str, Any]] = {
    # GTA1 (gta1_and_peers.md 1.1): advantage (r - group mean) / (unbiased group std + 1e-4), per-sequence token mean
    # then batch mean, no KL, symmetric clip epsilon 0.2 (GTA1's trainer never reads epsilon_high).
    "gta1": {"loss_type": "grpo", "scale_rewards": "group", "beta": 0.0, "epsilon": 0.2, "epsilon_high": None,
             "mask_truncated_completions": False},
    # upstream VLM-R1 (vlm_r1_upstream.md 1.2): same advantage and loss normalisation, k3 KL with beta 0.04, epsilon
    # 0.2; epsilon_high is not listed: it stays as given (upstream default None = epsilon; 0.28 in
    # run_grpo_rec_more_params.sh).
    "vlm_r1": {"loss_type": "grpo", "scale_rewards": "group", "beta": 0.04, "epsilon": 0.2,
               "mask_truncated_completions": False},
    # DAPO as TRL's paper index reproduces it: token-level loss over the global batch, clip-higher 0.2/0.28, overlong
    # filtering, no KL. (Dynamic sampling is the separate --dynamic_sampling switch; soft overlong punishment is a
    # reward.)
    "dapo": {"loss_type": "dapo", "scale_rewards": "group", "beta": 0.0, "epsilon": 0.2, "epsilon_high": 0.28,
             "mask_truncated_completions": True},
    # Dr. GRPO as TRL documents it: loss normalised by the constant max_completion_length, rewards not divided by the
    # std (TRL's scale_rewards help: "the Dr. GRPO paper recommends not scaling rewards"), no KL.
    "dr_grpo": {"loss_type": "dr_grpo", "scale_rewards": "none", "beta": 0.0, "epsilon": 0.2, "epsilon_high": None,
                "mask_truncated_completions": False},
}  # fmt: skip
_GRPO_DEFAULTS = {f.name: f.default for f in fields(GRPOConfig) if f.name in PRESET_FIELDS}


def _preset_help() -> str:
    lines = []
    for name, values in LOSS_PRESETS.items():
        pinned = ", ".join(f"{k}={v!r}" for k, v in values.items())
        lines.append(f"{name}: {pinned}")
    return "; ".join(lines)


@dataclass
class VLMGRPOConfig(GRPOConfig):
    """``trl.GRPOConfig`` with GTA1's defaults, vision-token banning, loss presets and dynamic sampling.

    GTA1 defaults (``gta1_and_peers.md`` 1.1): beta 0 (no reference model), num_generations 8, learning_rate 1e-6,
    temperature 1.0 (TRL 1.16's defaults already). ``bf16`` defaults to True only where a GPU supports it.

    ``loss_preset`` is resolved in ``__post_init__``: a preset field counts as set by the user when its value differs
    from ``trl.GRPOConfig``'s default. The command line (``vlm_r1.grpo_jsonl.parse_args``) re-resolves it with the
    exact rule: a field counts as set when its flag was given on the command line or its key is in the ``--config``
    YAML, even if the value equals TRL's default. User values always win; each conflict with the preset is listed in
    ``loss_preset_overrides`` (``{field: user value}``) and in the lines :meth:`resolve_loss_preset` returns.
    """

    ban_vision_tokens: bool = field(
        default=True,
        metadata={"help": "Forbid generating the vision special tokens (image pad, video pad, vision start/end) via "
                  "bad_words_ids (GTA1: a sampled image token corrupts training)."},
    )
    loss_preset: str = field(
        default="none",
        metadata={"help": "Named recipe for the loss fields (" + ", ".join(PRESET_FIELDS) + "). 'none' (default) "
                  "leaves TRL's values. Each preset pins exactly these values: " + _preset_help() + ". epsilon_high "
                  "None means 'same as epsilon' (symmetric clip); vlm_r1 does not pin epsilon_high (it stays as "
                  "given). A field given explicitly on the command line or in the --config YAML always wins over the "
                  "preset, and each such conflict is logged. Resolved values go to OUTPUT_DIR/vlm_r1_run.json.",
                  "choices": ["none", *LOSS_PRESETS]},
    )
    dynamic_sampling: bool = field(
        default=False,
        metadata={"help": "DAPO-style dynamic sampling (training only). After a generation batch is generated and "
                  "scored, each prompt group whose reward (the weighted sum of the reward functions that TRL "
                  "normalises) has zero std within the group (TRL's frac_reward_zero_std test, std close to 0, or no "
                  "scorable completion) carries no learning signal and is dropped. Another generation batch of the "
                  "same size is then generated and scored (generation_batch_size/num_generations prompts drawn "
                  "uniformly at random, without replacement within a try, from the training set, seeded by --seed, "
                  "the step and the try; these extra draws do not advance the epoch), and its non-zero-std groups "
                  "replace dropped ones. Repeated until no dropped group is left or --dynamic_sampling_max_tries "
                  "batches were generated. A new group replaces a dropped one only if its rows fall on the same "
                  "processes in the same numbers, so groups stay whole and every process keeps its row count. "
                  "Dropped groups that could not be replaced are trained as they are (zero advantage) with a warning. "
                  "Advantages are TRL's, computed within each try. Logged per generation batch: "
                  "dynamic_sampling/frac_groups_dropped (zero-std groups left out of training / groups generated in "
                  "all tries), dynamic_sampling/tries, dynamic_sampling/groups_generated, "
                  "dynamic_sampling/frac_trained_groups_zero_std (0 when the refill succeeded). TRL's own metrics "
                  "(reward, frac_reward_zero_std, completions/*) average over every try, dropped groups included."},
    )
    dynamic_sampling_max_tries: int = field(
        default=4,
        metadata={"help": "With --dynamic_sampling: at most this many generation batches per training batch, the "
                  "first included (so up to N-1 refills). 1 drops nothing and only logs."},
    )

    def __post_init__(self):
        from vlm_r1.devices import apply_device_defaults

        apply_device_defaults(self)  # use_cpu without CUDA (so torchrun forms one gloo group); bf16 only where supported
        if self.loss_preset not in ("none", *LOSS_PRESETS):
            raise ValueError(f"--loss_preset {self.loss_preset!r}: choose one of none, {', '.join(LOSS_PRESETS)}")
        if self.dynamic_sampling_max_tries < 1:
            raise ValueError(f"--dynamic_sampling_max_tries must be >= 1, got {self.dynamic_sampling_max_tries}")
        # The user's own values of the preset fields, kept so the preset can be re-resolved (command line) without
        # losing them. Fields that differ from TRL's defaults count as explicitly set here.
        self._loss_preset_given = {name: getattr(self, name) for name in PRESET_FIELDS}
        self.resolve_loss_preset()
        super().__post_init__()

    def resolve_loss_preset(self, explicit: Iterable[str] | None = None) -> list[str]:
        """Apply ``loss_preset`` to the fields the user did not set; returns one line per conflict.

        Args:
            explicit: names of the fields the user set. None: those whose (user) value differs from
                ``trl.GRPOConfig``'s default.

        Sets ``loss_preset_overrides`` to ``{field: user value}`` for every explicit field whose value differs from
        the preset's.
        """
        given = self._loss_preset_given
        if explicit is None:
            explicit = {name for name in PRESET_FIELDS if given[name] != _GRPO_DEFAULTS[name]}
        explicit = set(explicit)
        for name in PRESET_FIELDS:
            setattr(self, name, given[name])
        self.loss_preset_overrides = {}
        lines = []
        for name, value in LOSS_PRESETS.get(self.loss_preset, {}).items():
            if name not in explicit:
                setattr(self, name, value)
            elif given[name] != value:
                self.loss_preset_overrides[name] = given[name]
                lines.append(f"--{name}={given[name]!r} (given explicitly) overrides --loss_preset "
                             f"{self.loss_preset}'s {name}={value!r}")  # fmt: skip
        self.scale_rewards = {True: "group", False: "none"}.get(self.scale_rewards, self.scale_rewards)
        return lines

    def loss_settings(self) -> dict:
        """The resolved loss settings (what ``vlm_r1_run.json`` records); ``epsilon_high`` is the effective value."""
        return {
            "loss_preset": self.loss_preset,
            "loss_preset_overrides": dict(getattr(self, "loss_preset_overrides", {})),
            "loss_type": self.loss_type,
            "scale_rewards": self.scale_rewards,
            "beta": self.beta,
            "epsilon": self.epsilon,
            "epsilon_high": self.epsilon if self.epsilon_high is None else self.epsilon_high,
            "mask_truncated_completions": self.mask_truncated_completions,
        }


def explicitly_given(dataclass_types: Sequence[type], argv: Sequence[str]) -> set[str]:
    """Names of the fields set on the command line ``argv`` (any spelling argparse accepts, e.g. ``--x=1``,
    ``--no_x``, unique prefixes) or as keys of its ``--config`` YAML; values equal to the defaults count too."""
    import yaml
    from trl import TrlParser

    parser = TrlParser(dataclass_types)
    for action in parser._actions:
        if action.dest != "help":
            action.default = argparse.SUPPRESS
            action.required = False
    args = list(argv)
    from_config: set[str] = set()
    if "--config" in args:
        i = args.index("--config")
        with open(args[i + 1]) as f:
            from_config = {k for k in (yaml.safe_load(f) or {}) if k != "env"}
        del args[i : i + 2]
    namespace, _ = parser.parse_known_args(args)
    return set(vars(namespace)) | from_config


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
