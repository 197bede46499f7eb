"""GRPO on JSONL data on TRL: the library behind ``python -m vlm_r1.grpo_jsonl`` (parse the command line, build model,
processor, data, rewards and trainer, train). That entry point speaks upstream VLM-R1's command line: it hands the
upstream dialect (``vlm_r1.upstream.UPSTREAM``, a :class:`vlm_r1.dialect.Dialect`: upstream's legacy flags, effective
defaults and rollout log) to :func:`main`; called without one, the functions here parse the core's own flags with TRL's
defaults.

Example (upstream REC records, a tiny model)::

    python -m vlm_r1.grpo_jsonl --model_name_or_path runs/tiny --task_type rec \\
        --data_file_paths rec.jsonl --output_dir runs/rec --max_steps 20 \\
        --per_device_train_batch_size 8 --num_generations 8 --max_completion_length 32

A task plugin (``--task_type NAME``, entry-point group ``vlm_r1.tasks``) adds its own flags, rewards and metrics.

Accepts every TRL ``GRPOConfig`` / HF ``TrainingArguments`` / ``ModelConfig`` flag, the VLM-R1 script flags
(``--data_file_paths a:b --image_folders x:y --reward_funcs ... --max_pixels ... --task_type ...``) and
``--config file.yaml``. Run with ``--help`` for every flag.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import sys

from groundwork import pixel_budget
from groundwork.argtypes import from_env, integer
from groundwork.outputs import write_text
from groundwork.pixel_budget import update_run_info
from vlm_r1.command_line import CommandLine, parse_task
from vlm_r1.configs import GRPOModelConfig, GRPOScriptArguments, VLMGRPOConfig
from vlm_r1.data import concatenate_record_datasets, load_data_config, requested_count, source_indices
from vlm_r1.dialect import CORE, Dialect
from vlm_r1.launch import input_errors, load_policy_model, save_final, setup_logging, with_transform_of
from vlm_r1.modules import get_vlm_module
from vlm_r1.preflight import preflight_from_argv
from vlm_r1.rewards import resolve_rewards
from vlm_r1.tasks import get_task
from vlm_r1.vllm_rollouts import check_vllm_start

logger = logging.getLogger("vlm_r1")


ARG_DATACLASSES = (GRPOScriptArguments, VLMGRPOConfig, GRPOModelConfig)
#: where an entry point's pixel-budget defaults come from (``PixelBudget.sources`` of values no flag or recipe set)
DEFAULT_BUDGET_SOURCE = (
    "default of vlm_r1.grpo_jsonl (upstream VLM-R1 src/open-r1-multimodal/src/open_r1/grpo_jsonl.py "
    "GRPOScriptArguments, commit 90052f4)"
)
#: script flag -> PixelBudget field
BUDGET_FLAGS = {"min_pixels": "min_pixels", "max_pixels": "max_pixels", "max_anyres_num": "max_tiles"}


def _usage_error(message: str) -> None:
    """Exit as argparse does on a usage error (status 2, ``error: message`` on stderr)."""
    import argparse

    argparse.ArgumentParser(prog=os.path.basename(sys.argv[0]) or "vlm_r1.grpo_jsonl", add_help=False).error(message)


def command_line(
    argv: list[str] | None = None, *, defaults: dict | None = None, dialect: Dialect = CORE
) -> CommandLine:
    """The one parse of a training command line (:func:`vlm_r1.command_line.parse_task`: the task first, then the
    core's, the task's and the ``dialect``'s flags, the recipe read once); the preflight, the launch plan and
    :func:`parse_args` share it."""
    argv = list(argv) if argv is not None else sys.argv[1:]
    return parse_task(ARG_DATACLASSES, argv, defaults=defaults, dialect=dialect)


def parse_args(
    argv: list[str] | None = None,
    *,
    defaults: dict | None = None,
    default_source: str = DEFAULT_BUDGET_SOURCE,
    parsed: CommandLine | None = None,
    overrides: dict | None = None,
    dialect: Dialect = CORE,
):
    """``(script_args, training_args, model_args)`` of a command line (and its ``--config``).

    Two phases (:func:`command_line`): the task is read first (``--task_type``, else the ``--config`` YAML's
    ``task_type``, else ``defaults``), then its own flags (``Task.options_class``) are parsed with the core's; the
    parsed options are ``script_args.task_options`` (None for a task without options). A dialect's flags are parsed
    too and its hooks run (:class:`vlm_r1.dialect.Dialect`: upstream VLM-R1's maps its legacy and renamed flags and
    reads ``--dataset_name`` in upstream's and GTA1's forms, ``vlm_r1.upstream.flags``). Then:

    * ``--image_root DIR`` is the image folder of every data file that gets none from ``--image_folders``;
    * ``--loss_preset`` is resolved with the command-line rule: a preset field counts as set by the user when its flag
      is on the command line or its key is in the ``--config`` YAML (even at the default value); the user's value then
      wins and a conflict with the preset is logged (``LOSS PRESET:`` warning lines).

    Args:
        argv: the arguments (default ``sys.argv[1:]``); not read when ``parsed`` is given.
        defaults: field defaults that replace the dataclasses' own (an entry point's defaults, e.g. GTA1's).
        default_source: where the entry point's pixel-budget defaults come from (``script_args.budget_sources``,
            ``{flag: "flag --NAME" | "--config PATH" | default_source}``, read by :func:`load_processor_and_budget`).
        parsed: the command line already parsed (:func:`command_line`), so nothing is parsed again.
        overrides: field values that replace the parsed ones (the launch plan's batch flags).
        dialect: the command-line dialect (:class:`vlm_r1.dialect.Dialect`); not read when ``parsed`` is given (its
            own dialect is).
    """
    cl = parsed if parsed is not None else command_line(argv, defaults=defaults, dialect=dialect)
    (script_args, training_args, model_args), options = cl.objects(**(overrides or {}))
    script_args.task_options = options
    for line in cl.notices:
        logger.warning("UPSTREAM FLAG: %s", line)
    where = cl.sources
    given = set(where)
    script_args.budget_sources = {flag: where.get(flag, default_source) for flag in BUDGET_FLAGS}
    cl.dialect.finish(cl.dialect_objects(), script_args, training_args, model_args, given)
    script_args.apply_image_root()
    if training_args.loss_preset != "none":
        for line in training_args.resolve_loss_preset(given):
            logger.warning("LOSS PRESET: %s", line)
        logger.info("loss preset %s -> %s", training_args.loss_preset, training_args.loss_settings())
    if not script_args.data_file_list and not script_args.data_config:
        _usage_error("--data_file_paths (':'-separated JSONL/JSON files) or --data_config (mixture YAML) is required")
    if not model_args.model_name_or_path:
        _usage_error("--model_name_or_path is required")
    return script_args, training_args, model_args


def _resolve_resume(training_args) -> str | None:
    """``--resume_from_checkpoint``: a path, or true/latest for the newest COMPLETE ``checkpoint-*`` in output_dir
    (``vlm_r1.preemption``: a checkpoint cut short by a kill has no completion marker and is never picked)."""
    from vlm_r1.preemption import latest_complete_checkpoint

    value = training_args.resume_from_checkpoint
    if value is None or str(value).lower() in ("false", "none", ""):
        return None
    if str(value).lower() in ("true", "latest"):
        last = latest_complete_checkpoint(training_args.output_dir)
        if last is None:
            logger.info(
                "--resume_from_checkpoint %s: no complete checkpoint in %s, starting fresh",
                value,
                training_args.output_dir,
            )
        else:
            logger.info("resuming from %s", last)
        return last
    return value


def build_train_dataset(script_args, training_args, task, processor, vlm_module):
    """The training dataset: ``--data_file_paths`` as one set, or the ``--data_config`` mixture.

    For a mixture, each source is built by the task on its own (its image folder, its bad records counted), its
    sampling strategy is applied with seed ``config seed (or --seed) + source index`` (after its difficulty keys, if
    any: :func:`vlm_r1.data.source_indices`), and the parts are concatenated.

    Returns:
        ``(dataset, mixture)`` where ``mixture`` lists per source ``{json_path, strategy, available, selected}``
        (empty without ``--data_config``).
    """
    if not script_args.data_config:
        return task.build_dataset(script_args, processor, vlm_module), []

    sources, seed = load_data_config(script_args.data_config)
    seed = training_args.seed if seed is None else seed
    parts, mixture = [], []
    for i, src in enumerate(sources):
        args_i = replace_data(
            script_args,
            data_config=None,
            data_file_paths=src.json_path,
            image_folders=src.image_folder or script_args.image_root,
        )
        ds = task.build_dataset(args_i, processor, vlm_module)
        where = f"{script_args.data_config}: datasets[{i}] ({src.json_path})"
        idx, difficulty = source_indices(ds, src, seed + i, where=where, logger=logger)
        asked = requested_count(src.sampling_strategy)
        if asked is not None and asked > len(ds):
            logger.warning(
                "%s: %s asks for more records than the %d available; taking all", where, src.sampling_strategy, len(ds)
            )
        parts.append(ds.select(idx))
        mixture.append(
            {
                "name": src.name or os.path.basename(src.json_path),
                "json_path": src.json_path,
                "strategy": src.sampling_strategy,
                "available": len(ds),
                "selected": len(idx),
                **({"difficulty": difficulty} if difficulty else {}),
            }
        )
    table = "\n".join(
        f"  {m['name']:<28} {m['strategy']:<14} {m['selected']:>8} / {m['available']:<8}" for m in mixture
    )
    logger.info("data mixture %s (seed %d):\n%s", script_args.data_config, seed, table)
    # Each part carries its own (equivalent) lazy-loading transform; the join drops formats, so put the task's
    # transform back once. Pass-through columns may differ across sources (vlm_r1.data.concatenate_record_datasets:
    # union of columns, a column whose types cannot merge becomes JSON text with a warning).

    return with_transform_of(parts[0], concatenate_record_datasets(parts, logger=logger)), mixture


def load_processor_and_budget(vlm_module, model_path: str, script_args):
    """``(processor, budget)``: the run's processor and its :class:`groundwork.pixel_budget.PixelBudget`, resolved once
    (GRPO and SFT) and written into the processor (:meth:`PixelBudget.apply`).

    Each value: the flag (``--min_pixels``/``--max_pixels``/``--max_anyres_num``), else the ``--config`` recipe, else
    the entry point's default (``script_args.budget_sources`` names which, set by :func:`parse_args`), else the
    checkpoint's processor; ``factor`` is always the checkpoint's (patch x merge). A family without a smart_resize
    frame (InternVL) ignores min/max pixels: when a flag or recipe set them, that is said as a warning. The budget is
    logged with every value's source.
    """

    processor = vlm_module.load_processor(model_path)
    checkpoint = vlm_module.processor_budget(processor)
    sources = getattr(script_args, "budget_sources", None) or {}
    layers = [(f"checkpoint {model_path} image processor", {"factor": checkpoint["factor"]})]
    for flag, name in BUDGET_FLAGS.items():
        layers.append((sources.get(flag, DEFAULT_BUDGET_SOURCE), {name: getattr(script_args, flag, None)}))
    layers.append((f"checkpoint {model_path} image processor", checkpoint))
    budget = pixel_budget.resolve(layers, limits=vlm_module.image_limits())
    budget.apply(processor, vlm_module)
    name = f"model_type={vlm_module.model_type} module={type(vlm_module).__name__}"
    logger.info("%s %s", name, budget.describe())
    if not budget.resizes and any(
        str(sources.get(f, "")).startswith(("flag", "--config")) for f in ("min_pixels", "max_pixels")
    ):
        logger.warning(
            "--min_pixels/--max_pixels have NO effect for model_type %s (no smart_resize frame; "
            "--max_anyres_num bounds its tiles)",
            vlm_module.model_type,
        )
    return processor, budget


def replace_data(script_args, **changes):
    """A copy of the data arguments for other data files (``dataclasses.replace``): ``--reward_method`` (per data file,
    GRPO only) is dropped, and the task options (``task_options``, not a field) are kept."""
    if any(f.name == "reward_method" for f in dataclasses.fields(script_args)):
        changes.setdefault("reward_method", None)
    out = dataclasses.replace(script_args, **changes)
    out.task_options = getattr(script_args, "task_options", None)
    return out


def build_datasets(script_args, training_args, task, processor, vlm_module):
    """``(train, eval or None, mixture)``: the training set (:func:`build_train_dataset`) and the held-out set, used
    by GRPO and SFT alike.

    The held-out set is ``--eval_data_file_paths`` (image paths relative to each file's folder), else a
    ``--val_split_ratio`` split of the training set (seeded by ``--seed``); it is dropped, with a warning, when
    ``--eval_strategy`` is ``no``.
    """
    dataset, mixture = build_train_dataset(script_args, training_args, task, processor, vlm_module)
    eval_dataset = None
    if script_args.eval_data_file_list:
        eval_args = replace_data(
            script_args,
            data_file_paths=script_args.eval_data_file_paths,
            data_config=None,
            image_folders=None,
            image_root=None,
        )
        eval_dataset = task.build_dataset(eval_args, processor, vlm_module)
        if script_args.val_split_ratio > 0:
            logger.warning("--val_split_ratio ignored: --eval_data_file_paths gives the held-out data")
    elif script_args.val_split_ratio > 0:
        split = dataset.train_test_split(test_size=script_args.val_split_ratio, seed=training_args.seed)
        dataset, eval_dataset = split["train"], split["test"]
    if eval_dataset is not None and training_args.eval_strategy == "no":
        logger.warning(
            "held-out data given but --eval_strategy is 'no': it is not evaluated (use --eval_strategy "
            "steps --eval_steps N)"
        )
        eval_dataset = None
    return dataset, eval_dataset, mixture


def build_rewards(script_args, task, vlm_module) -> list:
    """Reward functions from ``--reward_funcs`` (or the task's defaults), via the registry or the VLM module.

    With ``--is_reward_customized_from_vlm_module`` each name goes to ``vlm_module.select_reward_func(name,
    task_type)`` (upstream's path). Otherwise the task's ``reward_aliases`` are applied first (``--task_type rec``:
    ``accuracy`` -> ``rec_iou``, ``format`` -> ``rec_format``; each mapping is logged), then the task's own rewards
    (``Task.rewards``) and the registry resolve (``vlm_r1.rewards.resolve_rewards``).
    """

    names = script_args.reward_funcs or list(task.default_reward_funcs)
    if script_args.is_reward_customized_from_vlm_module:
        return [vlm_module.select_reward_func(n, script_args.task_type) for n in names]
    aliases = getattr(task, "reward_aliases", {}) or {}
    for name in names:
        if name in aliases:
            logger.info("task_type %s: reward %r resolves to %r", task.name, name, aliases[name])
    return resolve_rewards([aliases.get(n, n) for n in names], task)


GENERATION_PARAMS = ("do_sample", "temperature", "top_k", "top_p", "min_p", "repetition_penalty", "max_new_tokens")


def resolved_generation_params(trainer) -> dict:
    """The sampling parameters rollouts are really drawn with: ``{do_sample, temperature, top_k, top_p, min_p,
    repetition_penalty, max_new_tokens}``.

    HF generate: the trainer's ``GenerationConfig`` passed through the model's own ``_prepare_generation_config``
    (transformers 5 fills every value left None from the checkpoint's ``generation_config.json``, so this is what
    ``generate`` uses). vLLM: TRL's sampling fields with ``--generation_kwargs`` on top.
    """
    import copy

    args = trainer.args
    if args.use_vllm:
        params = {
            "do_sample": True,
            "temperature": args.temperature,
            "top_k": args.top_k,
            "top_p": args.top_p,
            "min_p": args.min_p,
            "repetition_penalty": args.repetition_penalty,
            "max_new_tokens": args.max_completion_length,
        }
        params.update({k: v for k, v in (args.generation_kwargs or {}).items() if k in params})
        return params
    model = trainer.accelerator.unwrap_model(trainer.model)
    config, _ = model._prepare_generation_config(copy.deepcopy(trainer.generation_config))
    return {name: getattr(config, name, None) for name in GENERATION_PARAMS}


def write_run_info(output_dir, trainer, script_args, task, vlm_module, processor, num_rows, mixture=()) -> str:
    """Write ``output_dir/vlm_r1_run.json``: what this run resolved to (world size, frames, rewards, versions), through
    its one writer, :func:`groundwork.pixel_budget.update_run_info` (a new run's record: atomic, under the file's lock;
    the final save adds the budget through the same function). Main process only.

    ``generation``: the resolved sampling parameters (:func:`resolved_generation_params`: temperature, top_k, top_p,
    min_p, repetition_penalty, max_new_tokens). Loss fields (``VLMGRPOConfig.loss_settings``): ``loss_preset``, ``loss_preset_overrides`` (explicit user values
    that beat the preset), ``loss_type``, ``scale_rewards``, ``beta``, ``epsilon``, ``epsilon_high`` (effective: equal
    to epsilon when not set), ``mask_truncated_completions``; plus ``dynamic_sampling`` ``{enabled, max_tries}`` and
    ``has_ref_model`` (a reference model was loaded: beta != 0 without PEFT); ``vision_tower``: how the tower runs
    (``VLMGRPOTrainer.vision_tower_status``, :mod:`vlm_r1.vision_cache`).
    """
    import torch
    import transformers
    import trl

    budget = task.pixel_budget
    smart_resize = (
        {"factor": budget.factor, "min_pixels": budget.min_pixels, "max_pixels": budget.max_pixels}
        if budget.resizes
        else None
    )
    args = trainer.args
    info = {
        "world_size": trainer.accelerator.num_processes,
        "distributed_type": str(trainer.accelerator.distributed_type),
        "model_type": vlm_module.model_type,
        "task_type": task.name,
        "reward_funcs": trainer.reward_func_names,
        "num_train_rows": num_rows,
        "data_mixture": list(mixture),
        "smart_resize": smart_resize,
        "pixel_budget": budget.to_dict(),
        **task.run_info(script_args, vlm_module),
        "banned_token_ids": vlm_module.get_image_token_ids(processor) if args.ban_vision_tokens else [],
        "generation_kwargs": args.generation_kwargs,
        "generation": resolved_generation_params(trainer),
        "max_completion_length": args.max_completion_length,
        "num_generations": args.num_generations,
        "learning_rate": args.learning_rate,
        "temperature": args.temperature,
        **args.loss_settings(),
        "dynamic_sampling": {"enabled": args.dynamic_sampling, "max_tries": args.dynamic_sampling_max_tries},
        "has_ref_model": trainer.ref_model is not None,
        "shared_prompt": trainer.shared_prompt_status() if hasattr(trainer, "shared_prompt_status") else None,
        "vision_tower": trainer.vision_tower_status() if hasattr(trainer, "vision_tower_status") else None,
        "global_completions_per_step": args.per_device_train_batch_size
        * trainer.accelerator.num_processes
        * args.gradient_accumulation_steps,
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__, "trl": trl.__version__},
    }
    path = update_run_info(output_dir, info, new_run=True)  # the one writer of vlm_r1_run.json (atomic, locked)
    logger.info(
        "run: world_size=%d %s, %d rows, %d completions/step -> %s",
        info["world_size"],
        info["distributed_type"],
        num_rows,
        info["global_completions_per_step"],
        path,
    )
    return path


def main(argv: list[str] | None = None, *, dialect: Dialect = CORE) -> None:
    """Build everything from the command line and train; saves the final model + processor to ``--output_dir``.

    With ``--preflight`` on (auto: ``WORLD_SIZE > 1``) the multi-node preflight (``vlm_r1.preflight``) runs first and
    stops the run, naming the failing rank(s) and host(s), if the ranks cannot rendezvous, all_reduce or store
    checkpoints.

    An input error (a flag or ``--config`` value, the data config, a data file, the distributed environment) ends
    the run with one ``vlm_r1.grpo_jsonl: error: ...`` line and status 2 (:func:`vlm_r1.launch.input_errors`).
    ``dialect``: the command line's (:class:`vlm_r1.dialect.Dialect`; the entry point passes upstream VLM-R1's)."""

    with input_errors("vlm_r1.grpo_jsonl"):
        setup_logging()
        argv = list(sys.argv[1:] if argv is None else argv)
        cl = command_line(argv, dialect=dialect)  # the one parse: values and their sources, no dataclass built yet
        preflight_from_argv(argv, parsed=cl)  # before the dataclasses, whose TrainingArguments create the process group
        train(*parse_args(parsed=cl), dialect=dialect)


def train(script_args, training_args, model_args, *, dialect: Dialect = CORE) -> None:
    """Build model, processor, data, rewards and trainer from parsed arguments and train (the body of ``main``);
    ``dialect``'s rollout log (:class:`vlm_r1.dialect.Dialect`) goes to the trainer."""
    from trl import get_peft_config

    from vlm_r1.trainer import VLMGRPOTrainer

    model_path = model_args.model_name_or_path
    vlm_module = get_vlm_module(model_path)
    processor, budget = load_processor_and_budget(vlm_module, model_path, script_args)
    check_vllm_start(training_args, vlm_module, model_path, budget)  # --use_vllm: installed, same image sizes

    task = get_task(script_args.task_type, getattr(script_args, "task_options", None))
    task.pixel_budget = budget  # the one budget of the run: rows, image transform, training-time eval
    if script_args.reward_method is not None and not getattr(task, "uses_reward_method", False):
        logger.warning("--reward_method=%s has NO effect with task_type %s", script_args.reward_method, task.name)
    dataset, eval_dataset, mixture = build_datasets(script_args, training_args, task, processor, vlm_module)
    logger.info("task=%s train rows=%d", task.name, len(dataset))
    reward_funcs = build_rewards(script_args, task, vlm_module)
    for func in reward_funcs:  # a reward's own check of the data (vlm_r1.rewards: check_dataset)
        check = getattr(func, "check_dataset", None)
        if callable(check):
            check(dataset)

    if training_args.beta != 0.0 and model_args.model_revision not in (None, "main"):
        # TRL builds the reference model (beta != 0) from the policy's config path with args.model_init_kwargs (the
        # policy itself is loaded here, so TRL only warns that they are unused for it): pass the revision so the
        # reference is the same checkpoint as the policy.
        training_args.model_init_kwargs = {
            **(training_args.model_init_kwargs or {}),
            "revision": model_args.model_revision,
        }
    # a tool the rollouts may call (vlm_r1.tool_rollout); built before the model so a refused combination stops here
    make_environment = getattr(task, "rollout_environment", None)
    environment = (
        make_environment(script_args, training_args, processor, vlm_module) if callable(make_environment) else None
    )
    model = load_policy_model(model_args, training_args, vlm_module)

    trainer = VLMGRPOTrainer(
        model=model,
        reward_funcs=reward_funcs,
        args=training_args,
        vlm_module=vlm_module,
        processing_class=processor,
        freeze_vision=model_args.freeze_vision_modules,
        train_dataset=dataset,
        eval_dataset=eval_dataset,
        peft_config=get_peft_config(model_args),
    )
    trainer.rollout_environment = environment
    from vlm_r1.callbacks import RankPerfCallback, StepStatsCallback, use_compact_console
    from vlm_r1.preemption import PREEMPT_FILE, PreemptionCallback

    # what the task declares (vlm_r1.tasks.Task; getattr: plugins need not subclass Task)
    trainer.rollout_log = dialect.rollout_log(dict(getattr(task, "debug_columns", {})))  # e.g. upstream's DEBUG_MODE
    trainer.add_callback(StepStatsCallback(trainer, aliases=getattr(task, "metric_aliases", {})))  # timing, tokens/s
    trainer.add_callback(RankPerfCallback(trainer))  # perf/rank{r}/tokens_per_s, perf/rank{r}/peak_mem_gib per log
    use_compact_console(trainer, getattr(task, "console_metrics", ()))  # one line per step; full dicts in logs.jsonl

    preemption = PreemptionCallback(training_args.output_dir)
    trainer.add_callback(preemption)
    stale = os.path.join(training_args.output_dir, PREEMPT_FILE)
    restarted = from_env("TORCHELASTIC_RESTART_COUNT", integer(min=0), 0) > 0
    if trainer.accelerator.is_main_process and os.path.exists(stale) and not restarted:
        # left by the previous (preempted) job of a requeued run; a torchrun restart of THIS job keeps it, so the
        # preemption still ends the job and the batch script requeues it
        os.remove(stale)
    for callback in task.eval_callbacks(script_args, training_args, processor, vlm_module, eval_dataset):
        callback.trainer = trainer
        trainer.add_callback(callback)
    if trainer.accelerator.is_main_process:
        write_run_info(
            training_args.output_dir, trainer, script_args, task, vlm_module, processor, len(dataset), mixture
        )
    trainer.train(resume_from_checkpoint=_resolve_resume(training_args))
    if preemption.preempted:
        if trainer.accelerator.is_main_process:
            write_text(stale, "")  # tells the batch script to requeue (also when the signal came directly)
        logger.warning(
            "preempted at step %d: checkpoint saved; rerun with --resume_from_checkpoint latest (the "
            "SLURM wrapper requeues automatically)",
            trainer.state.global_step,
        )
        return
    save_final(
        trainer,
        processor,
        vlm_module,
        training_args.output_dir,
        f"{model_path} on {script_args.data_config or script_args.data_file_paths}",
        budget=budget,
    )
