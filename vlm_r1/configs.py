"""Argument dataclasses of ``python -m vlm_r1.grpo_jsonl``; every field's help text is its ``--help``.

Parsed together, once per command line, by :mod:`vlm_r1.command_line` (``trl.TrlParser`` underneath; it also reads
``--config file.yaml``):

* :class:`GRPOScriptArguments`: what TRL lacks (data files, image folders, pixel budget, task, prompt mode);
* :class:`VLMGRPOConfig`: ``trl.GRPOConfig`` (all TRL GRPO and HF TrainingArguments flags) + vision-token banning,
  loss presets (``--loss_preset``), DAPO-style dynamic sampling (``--dynamic_sampling``) and the multi-node
  preflight (``--preflight``, ``--preflight_timeout``, ``--preflight_min_free_gib``; ``vlm_r1.preflight``);
* :class:`GRPOModelConfig`: ``trl.ModelConfig`` + ``--freeze_vision_modules``;
* a dialect's own dataclasses (:class:`vlm_r1.dialect.Dialect`): upstream VLM-R1's command line adds the flags TRL 1.16
  renamed or dropped and transformers 4.x's removed ones (``vlm_r1.upstream.flags``), each mapped or announced.

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

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field, fields
from typing import Any

from trl import GRPOConfig, ModelConfig

from groundwork.argtypes import BadValue
from vlm_r1.devices import apply_device_defaults
from vlm_r1.launch import prefer_activation_checkpointing
from vlm_r1.preflight import DEFAULT_TIMEOUT_S as DEFAULT_PREFLIGHT_TIMEOUT_S
from vlm_r1.preflight import preflight_mode

logger = logging.getLogger(__name__)


def _split(value: str | None) -> list[str] | None:
    return [v for v in value.split(":")] if value else None


@dataclass
class DataArguments:
    """Data arguments shared by ``python -m vlm_r1.grpo_jsonl`` and ``python -m vlm_r1.sft`` (upstream VLM-R1's
    ``GRPOScriptArguments`` data fields, minus the dead ones). A task's own flags come from its ``options_class``
    (``vlm_r1.tasks``), parsed next to these once ``--task_type`` is known (:func:`vlm_r1.command_line.parse_task`)."""

    data_file_paths: str | None = field(
        default=None,
        metadata={
            "help": "Data files (JSONL or JSON), ':'-separated, e.g. 'a.jsonl:b.jsonl'. Required unless "
            "--data_config is given."
        },
    )
    data_config: str | None = field(
        default=None,
        metadata={
            "help": "A data mixture YAML (VLM-R1 data_config): 'datasets:' entries with json_path, optional "
            "image_folder and sampling_strategy (all, first:N, end:N, random:N; N a count or an integer P%% rounded up, end:0 = all, as upstream), optional top-level "
            "seed (default --seed); paths relative to the YAML file. Replaces --data_file_paths. Ours: an entry "
            "may also select by a difficulty column (difficulty_column, difficulty_range, difficulty_bins with a "
            "sampling_strategy per bin; docs/TRAINING.md, 'Difficulty-aware data')."
        },
    )
    image_folders: str | None = field(
        default=None,
        metadata={
            "help": "One image folder per data file, ':'-separated; image paths in the records are relative to "
            "it. Default: each data file's own folder."
        },
    )
    image_root: str | None = field(
        default=None,
        metadata={
            "help": "Image folder for every data file that gets none from --image_folders or its data config "
            "entry (upstream grpo_rec.py / GTA1 grpo_grounding.py flag)."
        },
    )
    task_type: str | None = field(
        default=None,
        metadata={
            "help": "Task plugin that turns records into prompts, reward columns and SFT targets: 'default' "
            "(upstream VLM-R1 grpo_jsonl records), 'rec' (upstream REC: one image, bbox answer in original "
            "pixels; accuracy/format resolve to rec_iou/rec_format), upstream's ic/odLength/gui/gui_defect "
            "(default task with their question template), a task an installed package registers under the "
            "'vlm_r1.tasks' entry point, or 'package.module:TaskClass'. A task may add its own flags: give "
            "--task_type NAME --help to list them. Default: 'default'."
        },
    )
    max_pixels: int | None = field(
        default=12845056,
        metadata={
            "help": "Upper pixel budget of the image processor's smart_resize (resized H*W), set on the "
            "processor. GRPO default: upstream VLM-R1's 12845056 (grpo_jsonl.py GRPOScriptArguments); SFT "
            "default: the checkpoint's processor. GTA1's README run uses 4096*2160 = 8847360 "
            "(recipes/gta1/*.yaml)."
        },
    )
    min_pixels: int | None = field(
        default=3136,
        metadata={
            "help": "Lower pixel budget of smart_resize, set on the processor. GRPO default: upstream's 3136; "
            "SFT default: the checkpoint's processor."
        },
    )
    max_anyres_num: int | None = field(
        default=12,
        metadata={
            "help": "InternVL: at most this many 448x448 tiles per image, plus a thumbnail when there are "
            "several (the image processor's max_patches; upstream VLM-R1's default 12). Other families ignore "
            "it."
        },
    )
    eval_data_file_paths: str | None = field(
        default=None,
        metadata={
            "help": "Held-out data files (':'-separated) evaluated every --eval_steps when --eval_strategy is "
            "'steps' (GRPO: TRL's sampled eval reward; both: the task's own held-out metric, if it has one). "
            "Image paths are relative to each file's folder. Default: the --val_split_ratio split."
        },
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
        metadata={
            "help": "Stop at the first bad record (missing/corrupt image, bad box, empty instruction) instead "
            "of skipping and counting it."
        },
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
        return _split(getattr(self, "reward_method", None))

    def apply_image_root(self) -> None:
        """``--image_root``: the image folder of every data file that ``--image_folders`` gives none (in place).

        With ``--data_config`` the mixture's entries without ``image_folder`` get it when the mixture is built
        (``vlm_r1.grpo.build_datasets``).
        """
        if self.image_root and self.data_file_paths and not self.image_folders:
            self.image_folders = ":".join([self.image_root] * len(self.data_file_list))

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
class GRPOScriptArguments(DataArguments):
    """``python -m vlm_r1.grpo_jsonl``'s script arguments: :class:`DataArguments` + the reward flags (upstream VLM-R1's
    ``GRPOScriptArguments``, minus the dead ones)."""

    reward_funcs: list[str] | None = field(
        default=None,
        metadata={
            "help": "Reward functions: built-in names (accuracy, format, rec_iou, rec_format), the rewards the "
            "task declares (see --task_type NAME --help), names registered under the 'vlm_r1.rewards' entry "
            "point, or 'package.module:function'. Default: the task's own (accuracy format for default; "
            "rec_iou rec_format for rec)."
        },
    )
    reward_method: str | None = field(
        default=None,
        metadata={
            "help": "Default task only: accuracy method per data file, ':'-separated (default, all_match, "
            "yes_no). A record's own 'accu_reward_method' wins."
        },
    )
    is_reward_customized_from_vlm_module: bool = field(
        default=False,
        metadata={
            "help": "Take rewards from the VLM module's select_reward_func (upstream REC path) instead of "
            "the registry (Qwen: task_type rec -> iou_reward/format_reward_rec; --task_type rec alone gives the "
            "same)."
        },
    )


# ---- loss presets -------------------------------------------------------------------------------------------------
# The GRPOConfig fields a preset may set. Each preset pins every field it lists; a field it does not list keeps the
# user's value (or TRL's default). ``epsilon_high=None`` is TRL's "same as epsilon" (symmetric clipping).
PRESET_FIELDS = ("loss_type", "scale_rewards", "beta", "epsilon", "epsilon_high", "mask_truncated_completions")
LOSS_PRESETS: dict[str, dict[str, Any]] = {
    # GTA1 (Yan98/GTA1 src/trainer/grpo_trainer.py:609-615 advantage, 687-688 clip, 704 loss at 81f0c4c; README.md:93
    # --beta 0): advantage (r - group mean) / (unbiased group std + 1e-4), per-sequence token mean
    # then batch mean, no KL, symmetric clip epsilon 0.2 (GTA1's trainer never reads epsilon_high).
    "gta1": {
        "loss_type": "grpo",
        "scale_rewards": "group",
        "beta": 0.0,
        "epsilon": 0.2,
        "epsilon_high": None,
        "mask_truncated_completions": False,
    },
    # upstream VLM-R1 (om-ai-lab/VLM-R1 src/open-r1-multimodal/src/open_r1/trainer/grpo_trainer.py:679-684 advantage,
    # 755 clip, 761-764 k3 KL, 771 loss at 90052f4; beta/epsilon defaults in trainer/grpo_config.py:291-304): same advantage and loss normalisation, k3 KL with beta 0.04, epsilon
    # 0.2; epsilon_high is not listed: it stays as given (upstream default None = epsilon; 0.28 in
    # run_grpo_rec_more_params.sh).
    "vlm_r1": {
        "loss_type": "grpo",
        "scale_rewards": "group",
        "beta": 0.04,
        "epsilon": 0.2,
        "mask_truncated_completions": False,
    },
    # DAPO as TRL's paper index reproduces it: token-level loss over the global batch, clip-higher 0.2/0.28, overlong
    # filtering, no KL. (Dynamic sampling is the separate --dynamic_sampling switch; soft overlong punishment is a
    # reward.)
    "dapo": {
        "loss_type": "dapo",
        "scale_rewards": "group",
        "beta": 0.0,
        "epsilon": 0.2,
        "epsilon_high": 0.28,
        "mask_truncated_completions": True,
    },
    # Dr. GRPO as TRL documents it: loss normalised by the constant max_completion_length, rewards not divided by the
    # std (TRL's scale_rewards help: "the Dr. GRPO paper recommends not scaling rewards"), no KL.
    "dr_grpo": {
        "loss_type": "dr_grpo",
        "scale_rewards": "none",
        "beta": 0.0,
        "epsilon": 0.2,
        "epsilon_high": None,
        "mask_truncated_completions": False,
    },
}


def _preset_help() -> str:
    lines = []
    for name, values in LOSS_PRESETS.items():
        pinned = ", ".join(f"{k}={v!r}" for k, v in values.items())
        lines.append(f"{name}: {pinned}")
    return "; ".join(lines)


@dataclass
class VLMGRPOConfig(GRPOConfig):
    """``trl.GRPOConfig`` + vision-token banning, loss presets, dynamic sampling, shared prompts and the preflight.

    Defaults: TRL 1.16's and transformers 5.23's (``report_to`` ``none``, as transformers 5). A command-line dialect
    replaces some at parse time (:class:`vlm_r1.dialect.Dialect` ``defaults``): ``python -m vlm_r1.grpo_jsonl`` gets
    upstream VLM-R1's effective values (``vlm_r1.upstream.defaults``: beta 0.04, loss_type ``grpo``,
    max_completion_length 256, top_k 50, logging_steps 500, ...). GTA1's settings (beta 0, completion 128, ...) live in
    its recipes (``recipes/gta1/*.yaml``) and its entry point (``python -m gui_grounding.train``), never here.
    ``--bf16`` / ``--tf32`` where the hardware lacks them (CPU) warn and fall back to fp32
    (:func:`vlm_r1.devices.apply_device_defaults`).

    ``loss_preset`` is resolved in ``__post_init__``: a preset field counts as set by the user when its value differs
    from this class's default. The command line (``vlm_r1.grpo.parse_args``) re-resolves it with the
    exact rule: a field counts as set when its flag was given on the command line or its key is in the ``--config``
    YAML, even if the value equals TRL's default. User values always win; each conflict with the preset is listed in
    ``loss_preset_overrides`` (``{field: user value}``) and in the lines :meth:`resolve_loss_preset` returns.
    """

    report_to: None | str | list[str] = field(
        default="none",
        metadata={
            "help": "The list of integrations to report results and logs to (tensorboard, wandb, ...; 'none' "
            "for none). Default 'none', as transformers 5, also under upstream VLM-R1's command line: the one "
            "documented exception to its effective defaults (transformers 4.49's 'all' would start every installed "
            "integration, wandb included; upstream's scripts pass --report_to explicitly)."
        },
    )

    ban_vision_tokens: bool = field(
        default=False,
        metadata={
            "help": "Ban the image token from generation with bad_words_ids (HF) / bad_words (vLLM), as GTA1 does "
            "(Yan98/GTA1 src/trainer/grpo_trainer.py:520 at 81f0c4c: a sampled image token corrupts training). "
            "Default false, as upstream VLM-R1, which bans nothing (TRL 1.16 still suppresses the image token in HF "
            "generation on its own, grpo_trainer.py:1168-1170); the GTA1 recipes and entry point set it true."
        },
    )
    loss_preset: str = field(
        default="none",
        metadata={
            "help": "Named recipe for the loss fields (" + ", ".join(PRESET_FIELDS) + "). 'none' (default) "
            "leaves the flags' own values. Each preset pins exactly these values: " + _preset_help() + ". epsilon_high "
            "None means 'same as epsilon' (symmetric clip); vlm_r1 does not pin epsilon_high (it stays as "
            "given). A field given explicitly on the command line or in the --config YAML always wins over the "
            "preset, and each such conflict is logged. Resolved values go to OUTPUT_DIR/vlm_r1_run.json.",
            "choices": ["none", *LOSS_PRESETS],
        },
    )
    dynamic_sampling: bool = field(
        default=False,
        metadata={
            "help": "DAPO-style dynamic sampling (training only). After a generation batch is generated and "
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
            "(reward, frac_reward_zero_std, completions/*) average over every try, dropped groups included."
        },
    )
    dynamic_sampling_max_tries: int = field(
        default=4,
        metadata={
            "help": "With --dynamic_sampling: at most this many generation batches per training batch, the "
            "first included (so up to N-1 refills). 1 drops nothing and only logs."
        },
    )

    sample_weight_column: str | None = field(
        default=None,
        metadata={
            "help": "Per-sample loss weights (training only; default off): the name of a training-data column "
            "(a record key that reaches the dataset, e.g. one written by `gui-grounding difficulty`) whose value "
            "scales each sample's policy loss. Each rollout's advantage is multiplied by its row's weight before "
            "TRL's loss (vlm_r1.trainer.VLMGRPOTrainer._compute_loss), so every loss type's per-token policy term "
            "is scaled exactly by the weight; the KL term (--beta) is not weighted. A weight must be a finite "
            "number in [0, 1000]; rows with a missing or other value are dropped at start-up, counted by reason. "
            "Logged per step: sample_weight/mean. Needs remove_unused_columns false (TRL's default)."
        },
    )
    shared_prompt: bool = field(
        default=False,
        metadata={
            "help": "Shared-prompt GRPO (training only): each group's prompt (screenshot + instruction) goes "
            "through the model once instead of num_generations times. The policy, old and reference log-prob "
            "passes run one packed row per group ([prompt | completion 1 | ... | completion G], a 4D attention "
            "mask, explicit M-RoPE positions, the vision tower once per group), HF generation prefills each "
            "unique prompt once, and pixel_values are processed and stored once per group. Log-probs and "
            "gradients equal the naive computation up to float rounding (tests/test_shared_prompt.py). Needs "
            "per_device_train_batch_size to be a multiple of num_generations and a model family with the hook "
            "(Qwen2-VL, Qwen2.5-VL); otherwise the run says why at start-up and runs naive (recorded in "
            "OUTPUT_DIR/vlm_r1_run.json under shared_prompt). Logged per step: shared_prompt/llm_tokens, "
            "shared_prompt/naive_llm_tokens, shared_prompt/vision_patches, shared_prompt/naive_vision_patches, "
            "shared_prompt/active (1 when the batch ran shared). Off by default (upstream VLM-R1 has no such "
            "pass); on in the GTA1 recipes."
        },
    )
    shared_prompt_attention: str = field(
        default="auto",
        metadata={
            "help": "With --shared_prompt: how the packed rows attend. 'dense': a 4D mask through the model's "
            "sdpa/eager attention (memory grows as L^2 per packed row); 'split': prefix attention once, then "
            "each completion over the prefix and itself, no L x L mask (Prefix Grouper style; flash-attention "
            "on GPU, an SDPA reference path elsewhere; vlm_r1/shared_prompt_attention.py); 'auto': split when "
            "the model uses flash_attention_*, else dense.",
            "choices": ["auto", "dense", "split"],
        },
    )

    gradient_checkpointing_every: int = field(
        default=1,
        metadata={
            "help": "Recompute policy, with --gradient_checkpointing: checkpoint only every K-th decoder layer, layers "
            "0, K, 2K, ... of the language model (ceil(L/K) of its L layers; K counts layers, an integer >= 1). "
            "Default 1: every layer, as transformers 5.23 does (modeling_utils.py _set_gradient_checkpointing). A "
            "layer left out keeps its activations for the backward instead of its input alone: per token about "
            "12h + a*(4h + 3kv + 4I) bytes instead of a*h (a = bytes per value; gui_grounding/ops/memory.py), and it "
            "is not recomputed, which saves one forward of the layer, about 1/3 of its forward+backward FLOPs "
            "(docs/GPU_CHECK.md, 'Recompute policy'). Replaces transformers' gradient_checkpointing_kwargs "
            "every_n_layers (translated), which counts vision blocks and decoder layers together and is lost when "
            "TRL re-enables checkpointing after each generation (vlm_r1/recompute.py)."
        },
    )
    vision_gradient_checkpointing: bool = field(
        default=True,
        metadata={
            "help": "Recompute policy, with --gradient_checkpointing: checkpoint the vision tower's blocks too. Default "
            "true, as transformers (every GradientCheckpointingLayer). false: the blocks keep their activations, "
            "per 14x14 patch about depth x (12h_v + a*(7h_v + 4I_v)) bytes instead of a*h_v*(depth + 1), and the "
            "tower is not run again in the backward. It matters only where the tower's forward records autograd "
            "(a trained tower, --freeze_vision_modules false); a tower run without gradients saves nothing either way."
        },
    )

    preflight: str = field(
        default="auto",
        metadata={
            "help": "Multi-node preflight before the model loads (vlm_r1/preflight/__init__.py): every rank checks the "
            "rendezvous (MASTER_ADDR resolves, the store at MASTER_ADDR:MASTER_PORT answers, all WORLD_SIZE ranks "
            "register with the same settings), an all_reduce on the run's backend (nccl on GPU, gloo on CPU; gloo "
            "also a monitored_barrier) whose sum must be the world size, and the free disk at --output_dir, each "
            "within --preflight_timeout seconds. A failure stops the run on every rank that can still talk to the "
            "others with 'PREFLIGHT FAILED: ...' naming the failing rank(s), host(s) and node(s), instead of a "
            "hang until --ddp_timeout. 'auto' (default): on when WORLD_SIZE > 1; 'on': also in one process (disk "
            "only); 'off': never. Read from the command line or --config before anything else (the process group "
            "is created while the arguments are parsed).",
            "choices": ["auto", "on", "off"],
        },
    )
    preflight_timeout: float = field(
        default=DEFAULT_PREFLIGHT_TIMEOUT_S,
        metadata={
            "help": "Seconds each preflight step may take (rendezvous, process-group init, barrier, all_reduce). "
            f"Default {DEFAULT_PREFLIGHT_TIMEOUT_S:g}: room for nodes that start or import slowly, far below "
            "--ddp_timeout's 1800."
        },
    )
    preflight_min_free_gib: float | None = field(
        default=None,
        metadata={
            "help": "Free GiB the preflight requires at --output_dir on every rank (0: no disk requirement). "
            "Default: an estimate of one checkpoint from the safetensors headers of a local "
            "--model_name_or_path (weights as stored + 8 bytes/parameter of AdamW moments, + 4 with --deepspeed; "
            "weights only with --use_peft); none for a hub name."
        },
    )

    def __post_init__(self):

        apply_device_defaults(
            self
        )  # use_cpu without CUDA (so torchrun forms one gloo group); bf16 only where supported
        prefer_activation_checkpointing(self)  # transformers 5 names, without the FutureWarning (vlm_r1.launch)
        self._resolve_recompute_policy()
        if self.loss_preset not in ("none", *LOSS_PRESETS):
            raise ValueError(f"--loss_preset {self.loss_preset!r}: choose one of none, {', '.join(LOSS_PRESETS)}")
        if self.shared_prompt_attention not in ("auto", "dense", "split"):
            raise ValueError(f"--shared_prompt_attention {self.shared_prompt_attention!r}: choose auto, dense or split")

        self.preflight = preflight_mode(self.preflight)  # YAML reads an unquoted on/off as a boolean
        if self.preflight not in ("auto", "on", "off"):
            raise ValueError(f"--preflight {self.preflight!r}: choose auto, on or off")
        if not self.preflight_timeout > 0:
            raise ValueError(f"--preflight_timeout must be > 0 seconds, got {self.preflight_timeout}")
        if self.dynamic_sampling_max_tries < 1:
            raise ValueError(f"--dynamic_sampling_max_tries must be >= 1, got {self.dynamic_sampling_max_tries}")
        if self.sample_weight_column is not None:
            if not str(self.sample_weight_column).strip():
                raise ValueError("--sample_weight_column: give a column name (or leave it unset)")
            if self.remove_unused_columns:
                raise ValueError(
                    "--sample_weight_column needs --remove_unused_columns false (TRL's default): with true, TRL "
                    "drops every dataset column but prompt/image before the rows reach the trainer"
                )
        check_batch(self, GRPO_BATCH_MINIMUMS)  # before TRL's __post_init__, which divides by them
        # The user's own values of the preset fields, kept so the preset can be re-resolved (command line) without
        # losing them. Fields that differ from TRL's defaults count as explicitly set here.
        self._loss_preset_given = {name: getattr(self, name) for name in PRESET_FIELDS}
        self.resolve_loss_preset()
        super().__post_init__()

    def _resolve_recompute_policy(self) -> None:
        """Check ``--gradient_checkpointing_every`` and move transformers' ``every_n_layers`` (in the checkpointing
        kwargs) into it (:mod:`vlm_r1.recompute` applies it in ``load_policy_model``)."""
        if int(self.gradient_checkpointing_every) < 1:
            raise ValueError(
                f"--gradient_checkpointing_every must be an integer >= 1, got {self.gradient_checkpointing_every!r}"
            )
        kwargs = [getattr(self, n, None) for n in ("activation_checkpointing_kwargs", "gradient_checkpointing_kwargs")]
        for kw in (k for k in kwargs if isinstance(k, dict) and "every_n_layers" in k):
            n = int(kw.pop("every_n_layers"))
            if self.gradient_checkpointing_every not in (1, n):
                raise ValueError(
                    f"gradient_checkpointing_kwargs every_n_layers={n} and --gradient_checkpointing_every "
                    f"{self.gradient_checkpointing_every} disagree; give --gradient_checkpointing_every alone"
                )
            self.gradient_checkpointing_every = n
            logger.info("gradient_checkpointing_kwargs every_n_layers=%d -> --gradient_checkpointing_every %d", n, n)
        if not self.activation_checkpointing and (
            self.gradient_checkpointing_every != 1 or not self.vision_gradient_checkpointing
        ):
            logger.warning(
                "--gradient_checkpointing_every / --vision_gradient_checkpointing have no effect: gradient "
                "checkpointing is off (--gradient_checkpointing true turns it on)"
            )

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
            defaults = {f.name: f.default for f in fields(type(self)) if f.name in PRESET_FIELDS}
            explicit = {name for name in PRESET_FIELDS if given[name] != defaults[name]}
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
                lines.append(
                    f"--{name}={given[name]!r} (given explicitly) overrides --loss_preset "
                    f"{self.loss_preset}'s {name}={value!r}"
                )
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


#: the batch fields a GRPO run needs, with their least values: TRL 1.16 (``trl/trainer/grpo_config.py``
#: ``GRPOConfig.__post_init__``) computes ``generation_batch_size % num_generations`` before it checks
#: ``num_generations < 2`` ("GRPO requires at least 2 generations per prompt"), so 0 was a ZeroDivisionError; a zero
#: per-device batch or accumulation divides by zero later, in the trainer
GRPO_BATCH_MINIMUMS = {
    "per_device_train_batch_size": 1,
    "gradient_accumulation_steps": 1,
    "num_generations": 2,
    "num_generations_eval": 1,
    "steps_per_generation": 1,
}
#: the same for SFT (HF Trainer divides by both)
SFT_BATCH_MINIMUMS = {"per_device_train_batch_size": 1, "gradient_accumulation_steps": 1}
#: of these, the fields whose None means "derived" (TRL: num_generations_eval -> num_generations,
#: steps_per_generation -> gradient_accumulation_steps)
_NONE_MEANS_DERIVED = {"num_generations_eval", "steps_per_generation"}


def check_batch(args: Any, minimums: dict[str, int]) -> None:
    """Refuse batch sizes the trainer would divide by (or TRL refuses only after dividing): each field of
    ``minimums`` an integer of at least its value (:data:`GRPO_BATCH_MINIMUMS`, :data:`SFT_BATCH_MINIMUMS`).

    Raises:
        BadValue: ``--NAME: must be an integer >= N, got V`` (one line).
    """
    for name, least in minimums.items():
        if not hasattr(args, name):
            continue
        got = getattr(args, name)
        if got is None and name in _NONE_MEANS_DERIVED:
            continue
        if isinstance(got, bool) or not isinstance(got, int) or got < least:
            raise BadValue(f"--{name}: must be an integer >= {least}, got {got!r}")


@dataclass
class GRPOModelConfig(ModelConfig):
    """``trl.ModelConfig`` (dtype, attention, LoRA, quantisation) + vision freezing.

    ``dtype`` defaults to ``bfloat16``: upstream VLM-R1's trainer always loaded the policy in bfloat16
    (``VLMGRPOTrainer(torch_dtype="bfloat16")``, grpo_trainer.py:218 and 235-236; grpo_jsonl.py never forwarded
    ``--torch_dtype``). Where no GPU supports bfloat16 (CPU) the model loads in float32 with a warning
    (``vlm_r1.launch.load_policy_model``).
    """

    dtype: str | None = field(
        default="bfloat16",
        metadata={
            "help": "Load the model under this dtype ('auto' = the checkpoint's). Default bfloat16, as upstream "
            "VLM-R1's trainer always loaded it; float32 (with a warning) where no GPU supports bfloat16.",
            "choices": ["auto", "bfloat16", "float16", "float32"],
        },
    )

    freeze_vision_modules: bool = field(
        default=False,
        metadata={"help": "Freeze the vision tower (parameters whose names contain the module's vision keywords)."},
    )
