"""GTA1's training entry (``src/grpo_grounding.py``) on our core: the library behind ``python -m gui_grounding.train``
and ``gui-grounding train``.

GTA1's README command runs here with ``src/grpo_grounding.py`` replaced by ``-m gui_grounding.train``::

    torchrun --nproc_per_node 8 -m gui_grounding.train --deepspeed configs/deepspeed/zero3.json \\
        --output_dir grounding/test --model_name_or_path Qwen/Qwen2.5-VL-3B-Instruct \\
        --dataset_name preprocessing/inp.json --image_root ./preprocessing --max_prompt_length 1024 \\
        --max_completion_length 128 --num_generations 8 --per_device_train_batch_size 1 \\
        --freeze_vision_modules true --reward_funcs accuracy --beta 0 --dataloader_num_workers 2 \\
        --max_pixels $((4096 * 2160)) --gradient_accumulation_steps 32 --logging_steps 1 --bf16 \\
        --torch_dtype bfloat16 --data_seed 42 --report_to tensorboard --gradient_checkpointing true \\
        --attn_implementation flash_attention_2 --num_train_epochs 2 --run_name output/test --save_steps 10 \\
        --save_total_limit 4 --save_only_model false

What differs from ``python -m vlm_r1.grpo_jsonl`` (which keeps upstream VLM-R1's semantics) is only this entry's
defaults, :data:`GTA1_DEFAULTS`, each GTA1's own script default (Yan98/GTA1 at 81f0c4c), and its reward names:

* ``--dataset_name FILE`` is the data file (GTA1 JSON list or JSONL: ``{image, bbox (0-1000), conversations}``) and
  ``--image_root DIR`` its image folder (grpo_grounding.py:69-72, 91-98, 121-122);
* ``--reward_funcs accuracy`` is GTA1's click reward (registry ``accuracy -> click_reward``, grpo_grounding.py:198-201)
  -> our ``click``; ``format`` (its think/answer format reward) -> our ``click_format``;
* the click reward decides hits with GTA1's rounding (``--box_rounding gta1``: ``int(edge * resized / 1000)``,
  grpo_grounding.py:160-164) on the published 0-1000 boxes.

Everything else (sampling at temperature 1 with top_k 50 / top_p 1.0 as its ``GenerationConfig`` gave them under
transformers 4.49, per-sequence loss = TRL's ``grpo``, beta 0.04, completion 256 tokens, 12,845,056 max pixels) is the
core's upstream default already, which GTA1 inherits from the VLM-R1 trainer it copied; the README's run values (beta
0, completion 128, max_pixels 4096*2160, ...) live in ``recipes/gta1/*.yaml``. ``--dry_run`` prints the resolved
values that decide the objective and exits. docs/GTA1.md has the migration table.
"""

from __future__ import annotations

import json
import logging
import sys

from vlm_r1.command_line import CommandLine
from vlm_r1.dialect import CORE, Dialect
from vlm_r1.grpo import command_line as core_command_line
from vlm_r1.grpo import parse_args as core_parse_args
from vlm_r1.grpo import train
from vlm_r1.launch import input_errors, setup_logging
from vlm_r1.preflight import preflight_from_argv

logger = logging.getLogger("gui_grounding")

# GTA1's script defaults, where they differ from the core's (upstream VLM-R1's effective) defaults. Sources: GTA1
# src/grpo_grounding.py (GRPOScriptArguments 47-72, registry 198-201, trainer call 221-233) and
# src/trainer/grpo_trainer.py (model loading); GRPOConfig defaults (src/trainer/grpo_config.py) equal upstream's.
GTA1_DEFAULTS: dict = {
    "task_type": "gui_grounding",  # the only task grpo_grounding.py trains
    "reward_funcs": ["accuracy", "format"],  # grpo_grounding.py:57-60 (the README passes --reward_funcs accuracy)
    "prompt_mode": "non_thinking",  # SYSTEM_PROMPT, grpo_grounding.py:78-84
    "box_rounding": "gta1",  # click_reward's int() edges, grpo_grounding.py:160-164
    # GTA1's trainer bans its image token from generation: bad_words_ids=[[image_token_id]] (src/trainer/grpo_trainer.py:520)
    "ban_vision_tokens": True,
    # grpo_grounding.py:232 passes --torch_dtype (default None) to the trainer, whose None means from_pretrained's
    # default under transformers 4.49: float32. The README passes --torch_dtype bfloat16 (recipes/gta1/*.yaml).
    "dtype": "float32",
    # GRPOScriptArguments: max_pixels 12845056 (grpo_grounding.py:61-64), min_pixels 3136 (:65-68); the README run's
    # 4096*2160 is in recipes/gta1/*.yaml
    "max_pixels": 12_845_056,
    "min_pixels": 3136,
}
#: where the pixel budget comes from when neither a flag nor the recipe sets it (PixelBudget.sources)
GTA1_BUDGET_SOURCE = "default of gui_grounding.train (GTA1 src/grpo_grounding.py:61-68 GRPOScriptArguments, 81f0c4c)"
# GTA1's reward names -> ours (grpo_grounding.py:198-201: accuracy = click_reward, format = format_reward)
GTA1_REWARD_NAMES = {"accuracy": "click", "format": "click_format"}

OBJECTIVE_FIELDS = (
    "loss_type",
    "scale_rewards",
    "beta",
    "epsilon",
    "epsilon_high",
    "num_generations",
    "learning_rate",
    "temperature",
    "top_k",
    "top_p",
    "min_p",
    "repetition_penalty",
    "max_completion_length",
)


def command_line(argv: list[str] | None = None, *, dialect: Dialect = CORE) -> CommandLine:
    """The one parse of a GTA1 command line (the dialect's defaults < GTA1's < recipe < flags), shared by training,
    the preflight, the dry run and the launch plan (:func:`vlm_r1.grpo.command_line`). ``dialect``: the command
    line's (:class:`vlm_r1.dialect.Dialect`); the entry points pass GTA1's (``vlm_r1.upstream.GTA1``: upstream
    VLM-R1's flags and effective defaults, ``--dataset_name FILE.json`` as the data file)."""
    return core_command_line(argv, defaults=GTA1_DEFAULTS, dialect=dialect)


def parse_args(
    argv: list[str] | None = None,
    *,
    parsed: CommandLine | None = None,
    overrides: dict | None = None,
    dialect: Dialect = CORE,
):
    """``(script_args, training_args, model_args)`` with GTA1's defaults and reward names applied; ``parsed``: the
    command line already parsed (:func:`command_line`), ``overrides``: field values replacing the parsed ones,
    ``dialect``: as :func:`command_line` (not read when ``parsed`` is given)."""
    script_args, training_args, model_args = core_parse_args(
        parsed=parsed if parsed is not None else command_line(argv, dialect=dialect),
        default_source=GTA1_BUDGET_SOURCE,
        overrides=overrides,
    )
    names = script_args.reward_funcs or list(GTA1_DEFAULTS["reward_funcs"])
    mapped = [GTA1_REWARD_NAMES.get(n, n) for n in names]
    for old, new in zip(names, mapped, strict=True):
        if old != new:
            logger.info("GTA1 reward %r -> %r", old, new)
    script_args.reward_funcs = mapped
    return script_args, training_args, model_args


def _options(script_args) -> dict:
    """The task's parsed flags (``script_args.task_options``: prompt_mode, adapter, box_rounding for gui_grounding)."""
    import dataclasses

    options = getattr(script_args, "task_options", None)
    return dataclasses.asdict(options) if dataclasses.is_dataclass(options) else {}


def objective(script_args, training_args, model_args) -> dict:
    """The resolved values that decide what is optimised: loss, sampling, KL, group size, lr, pixels, prompt, reward.

    Sampling values are the flags' (the run itself records the values ``generate`` resolves, with the checkpoint's
    generation config, in ``OUTPUT_DIR/vlm_r1_run.json``).
    """
    out = {name: getattr(training_args, name) for name in OBJECTIVE_FIELDS}
    out["epsilon_high"] = training_args.epsilon if training_args.epsilon_high is None else training_args.epsilon_high
    out.update(
        task_type=script_args.task_type,
        **_options(script_args),
        reward_funcs=script_args.reward_funcs,
        max_pixels=script_args.max_pixels,
        min_pixels=script_args.min_pixels,
        pixel_budget_sources={
            k: v
            for k, v in (getattr(script_args, "budget_sources", None) or {}).items()
            if k in ("max_pixels", "min_pixels")
        },
        freeze_vision_modules=model_args.freeze_vision_modules,
        ban_vision_tokens=training_args.ban_vision_tokens,
        dtype=model_args.dtype,
        bf16=training_args.bf16,
        max_steps=training_args.max_steps,
        per_device_train_batch_size=training_args.per_device_train_batch_size,
        gradient_accumulation_steps=training_args.gradient_accumulation_steps,
    )
    return out


def main(argv: list[str] | None = None, *, dialect: Dialect = CORE) -> None:
    """Console entry: parse with GTA1's defaults in ``dialect`` (:func:`command_line`), then train (or print the
    objective with ``--dry_run``). An input error ends it with one ``gui_grounding.train: error: ...`` line, status 2
    (:func:`vlm_r1.launch.input_errors`)."""
    with input_errors("gui_grounding.train"):
        _main(list(sys.argv[1:] if argv is None else argv), dialect)


def _main(argv: list[str], dialect: Dialect) -> None:
    if "-h" in argv or "--help" in argv:
        print(
            __doc__.split("What differs", 1)[0].strip() + "\n\n--dry_run: print the resolved objective (loss, "
            "sampling, KL, G, lr, pixels, prompt, reward) and exit. GTA1 defaults: "
            + json.dumps(GTA1_DEFAULTS)
            + " (docs/GTA1.md). Every flag:\n"
        )
    dry_run = "--dry_run" in argv or "--dry-run" in argv
    argv = [a for a in argv if a not in ("--dry_run", "--dry-run")]
    setup_logging()
    cl = command_line(argv, dialect=dialect)  # the one parse: values and their sources, no dataclass built yet
    if not dry_run:
        preflight_from_argv(argv, parsed=cl)  # before the dataclasses, whose TrainingArguments create the process group
    args = parse_args(parsed=cl)
    if dry_run:
        resolved = objective(*args)
        print(json.dumps(resolved, indent=1, default=str))
        width = max(map(len, resolved))
        for key, value in resolved.items():
            print(f"[dry-run] {key:<{width}} {value}", file=sys.stderr)
        return
    train(*args, dialect=dialect)
