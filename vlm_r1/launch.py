"""What the training entry points (``vlm_r1.grpo_jsonl``, ``vlm_r1.sft``) share: logging, policy loading, the final
save, and keeping a dataset's lazy image transform across ``map``/``concatenate``; and what the launchers
(``run_scripts/*.sh``) share: the one check of their environment variables (:data:`LAUNCHER_VARIABLES`)."""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import re
import traceback
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import yaml

from groundwork.argtypes import SEED, BadValue, distributed_env, from_env, integer, number
from groundwork.outputs import console_line
from groundwork.pixel_budget import record
from vlm_r1.devices import bf16_supported
from vlm_r1.plots import plot_training_curves
from vlm_r1.recompute import RecomputePolicy, install

logger = logging.getLogger("vlm_r1")

#: what a user's input can raise before training starts: a value a rule refuses (``ValueError`` and the project's
#: subclasses: ``groundwork.argtypes.BadValue``, ``groundwork.validate.Invalid``, ``groundwork.records.RecordError``, ...), a file
#: that cannot be read or written (``OSError``: ``FileNotFoundError``, ``groundwork.outputs.OutputError``), a YAML file
#: that does not parse. Anything else (``TypeError``, ``KeyError``, ...) is a bug and keeps its traceback.
INPUT_ERRORS: tuple[type[BaseException], ...] = (ValueError, OSError, yaml.YAMLError)
#: set (to anything) to see the traceback of an input error too
TRACEBACK_ENV = "VLM_R1_TRACEBACK"


def _in_training_loop(err: BaseException) -> bool:
    """True when ``err`` was raised inside transformers' ``Trainer.train`` (the training loop, not the setup)."""
    return any(
        frame.f_code.co_name in ("train", "_inner_training_loop") and "transformers" in frame.f_code.co_filename
        for frame, _ in traceback.walk_tb(err.__traceback__)
    )


@contextlib.contextmanager
def input_errors(prog: str) -> Iterator[None]:
    """The training entry points' error path (``vlm_r1.grpo_jsonl``, ``vlm_r1.sft``, ``gui_grounding.train``), as
    ``gui-grounding``'s subcommands have it (``gui_grounding/cli.py:main``): an :data:`INPUT_ERRORS` error raised while
    the run is set up (arguments, ``--config``, the data config, data files, the distributed environment, the model
    path) ends the process with ``PROG: error: TYPE: message`` on one line of stderr and exit status 2, as argparse's
    usage errors. Errors of the training loop itself, other exception types (bugs) and everything with
    ``VLM_R1_TRACEBACK`` set keep their traceback.

    Every rank of a launch runs this path at once, on one shared stderr: the line is written whole, with one
    ``write`` call (:func:`groundwork.outputs.console_line`). A ``SystemExit("message")`` raised inside (which Python
    itself would report with two writes, the message and its newline, so that two ranks' lines could mix) is written
    the same way and ends the process with status 1, as Python's own report would."""
    try:
        yield
    except SystemExit as err:
        if err.code is None or isinstance(err.code, int):
            raise
        console_line(err.code)
        raise SystemExit(1) from None
    except INPUT_ERRORS as err:
        if os.environ.get(TRACEBACK_ENV) or _in_training_loop(err):
            raise
        text = str(err)
        if isinstance(err, OSError) and err.strerror:  # no "[Errno N]"
            text = f"{err.strerror}: {err.filename}" if err.filename else err.strerror
        message = " ".join(text.split()) or type(err).__name__
        console_line(f"{prog}: error: {type(err).__name__}: {message}")
        raise SystemExit(2) from None


# ---- the launchers' environment (run_scripts/*.sh) --------------------------------------------------------------------
#: a count of the launch shape (nodes, processes per node): at least 1
_LAUNCH_COUNT = integer(min=1, max=1_000_000)

#: Every numeric or 0/1 variable the launchers read (``run_scripts/train_grpo.sh``, ``gta1_recipe.sh``, ``demo.sh``,
#: ``slurm/gta1.sbatch``), with its type: checked in one place (:func:`check_launcher_env`) before anything runs, so a
#: bad value is one line naming the variable, not a torchrun failure, a bash arithmetic error, a flag error naming a
#: flag the user never wrote, or a dry run that says all is well. The training flags' minimums are TRL's and
#: transformers' rules (NUM_GENERATIONS >= 2: ``GRPOConfig.__post_init__``; ``vlm_r1.configs.GRPO_BATCH_MINIMUMS``).
#: The launch plan adds its own (``gui_grounding.ops.plan.LAUNCHER_VARIABLES``).
LAUNCHER_VARIABLES: dict[str, Callable[[str], Any]] = {
    "NNODES": _LAUNCH_COUNT,
    "NPROC_PER_NODE": _LAUNCH_COUNT,
    "MAX_RESTARTS": integer(min=0, max=1_000_000),  # torchrun --max-restarts
    "MASTER_PORT": integer(min=0, max=65535),  # 0: one node, the store binds a free port (train_grpo.sh)
    "DRY_RUN": integer(min=0, max=1),  # a switch: "yes" or "true" is refused, never read as "off" (a real run)
    "NUM_GENERATIONS": integer(min=2),
    "MAX_STEPS": integer(min=-1),  # -1: transformers' "train num_train_epochs"
    "LR": number(min=0),
    "BETA": number(min=0),
    "TEMPERATURE": number(min=0, min_open=True),
    "MAX_COMPLETION_LENGTH": integer(min=1),
    "MAX_PIXELS": integer(min=1),
    "MIN_PIXELS": integer(min=1),
    "SAVE_STEPS": number(min=0, min_open=True),
    "SAVE_TOTAL_LIMIT": integer(min=1),
    "SEED": SEED,
}


def check_launcher_env(
    variables: Mapping[str, Callable[[str], Any]] | None = None, environ: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """The ``variables`` (name -> type; default :data:`LAUNCHER_VARIABLES`) that are set in ``environ`` (default
    ``os.environ``), converted by their types (:func:`groundwork.argtypes.from_env`: blank is unset, as the
    launchers' ``${NAME:-default}``); ``MASTER_PORT`` 0 (a free port) only on one node (several nodes must meet at a
    port they all know).

    Raises:
        BadValue: one line naming the variable and its value.
    """
    env = os.environ if environ is None else environ
    table = LAUNCHER_VARIABLES if variables is None else variables
    values = {name: from_env(name, parse, None, env) for name, parse in table.items()}
    nodes = values.get("NNODES") or 1
    if nodes > 1 and values.get("MASTER_PORT") == 0:
        raise BadValue(f"MASTER_PORT: must be 1..65535 with NNODES={nodes} (0 binds a free port: one node only)")
    return {name: v for name, v in values.items() if v is not None}


def _canonical(value: Any) -> str:
    """A checked value as the launcher writes it back: an integer in plain digits, a float by its ``repr``."""
    return str(value) if isinstance(value, int) else repr(value)


_VARIABLE_NAME = re.compile(r"[A-Z_][A-Z0-9_]*")


def launcher_env_main(argv: list[str] | None = None) -> int:
    """``python -m vlm_r1.launcher_env [--prog NAME] VARIABLE[=AS] ...``: check the launcher's variables by
    :func:`check_launcher_env` (``VARIABLE=AS``: ``VARIABLE`` by the type of ``AS``, e.g. ``DEMO_STEPS=MAX_STEPS``)
    and print ``VARIABLE=VALUE`` for each, the value canonical (``" 02"`` -> ``2``; blank or unset: empty), so the
    launcher's shell tests and torchrun read the number Python read. Returns 0, or 2 after one
    ``[NAME] ERROR: VARIABLE: must be ..., got '...'`` line on stderr (nothing on stdout)."""
    p = argparse.ArgumentParser(
        prog="python -m vlm_r1.launcher_env",
        description="Check the launchers' environment variables (one line naming a bad one, exit 2) and print each "
        "as VARIABLE=VALUE, canonical. Known: " + ", ".join(LAUNCHER_VARIABLES) + ".",
    )
    p.add_argument("--prog", default="launcher", help="the launcher's name, for the error line [launcher]")
    p.add_argument("variables", nargs="+", metavar="VARIABLE[=AS]")
    args = p.parse_args(argv)
    table = {}
    for item in args.variables:
        name, _, kind = item.partition("=")
        kind = kind or name
        if not _VARIABLE_NAME.fullmatch(name) or kind not in LAUNCHER_VARIABLES:
            p.error(f"{item!r}: not VARIABLE or VARIABLE=AS with AS one of {', '.join(LAUNCHER_VARIABLES)}")
        table[name] = LAUNCHER_VARIABLES[kind]
    try:
        values = check_launcher_env(table)
    except BadValue as err:
        console_line(f"[{args.prog}] ERROR: {err}")  # each node's launcher, into one job log
        return 2
    for name in table:
        print(f"{name}={_canonical(values[name]) if name in values else ''}")
    return 0


def setup_logging() -> None:
    """INFO on rank 0, WARNING elsewhere; every line names its rank (``RANK`` from torchrun, read and checked with
    the rest of the distributed environment by :func:`groundwork.argtypes.distributed_env`). Also hides the
    deprecation warnings TRL's own calls raise (:func:`silence_library_deprecations`).

    Raises:
        groundwork.argtypes.BadValue: a malformed distributed environment (one line naming the variable).
    """
    silence_library_deprecations()
    rank = distributed_env().rank
    logging.basicConfig(
        level=logging.INFO if rank == 0 else logging.WARNING,
        format=f"%(asctime)s [rank{rank}] %(levelname)s %(name)s: %(message)s",
        datefmt="%H:%M:%S",
    )


def with_transform_of(source: Any, dataset: Any) -> Any:
    """``dataset`` with ``source``'s custom ``with_transform`` function put back (``datasets`` drops it on ``map`` of
    an unformatted copy and on ``concatenate_datasets`` of differing formats); ``dataset`` itself when there is none."""
    fmt = source.format
    if fmt["type"] == "custom":
        return dataset.with_transform(fmt["format_kwargs"]["transform"])
    return dataset


def load_policy_model(model_args: Any, training_args: Any, vlm_module: Any):
    """The policy model from ``--model_name_or_path`` with every ``ModelConfig`` loading flag applied.

    ``--model_revision``, ``--trust_remote_code``, ``--dtype`` (``auto``/None: the checkpoint's; bfloat16 without a bf16-capable GPU: float32 with a warning), quantisation
    (``--load_in_4bit/8bit``), ``--attn_implementation`` (``flash_attention_2`` falls back to sdpa with a warning when
    flash-attn is missing). With ``--deepspeed`` on a GPU-less machine the gloo process group is created first (with
    ``use_cpu`` accelerate skips DeepSpeed's own setup, and ZeRO-3 loading would otherwise see world size 1). The
    recompute policy of ``--gradient_checkpointing_every`` / ``--vision_gradient_checkpointing`` is installed on the
    model (:func:`install_recompute_policy`).
    """
    from trl import get_quantization_config

    init_kwargs = dict(
        revision=model_args.model_revision,
        attn_implementation=model_args.attn_implementation,
        trust_remote_code=training_args.trust_remote_code,
    )
    if model_args.dtype not in (None, "auto"):
        import torch

        dtype = model_args.dtype
        if dtype == "bfloat16" and not bf16_supported():
            logger.warning("dtype bfloat16 but this machine has no bf16-capable GPU: loading the model in float32")
            dtype = "float32"
        init_kwargs["dtype"] = getattr(torch, dtype)
    quantization_config = get_quantization_config(model_args)
    if quantization_config is not None:
        init_kwargs["quantization_config"] = quantization_config
    if model_args.attn_implementation == "flash_attention_2":
        try:
            import flash_attn  # noqa: F401
        except ImportError:
            logger.warning("flash-attn is not installed: using sdpa instead (pip install -e .[gpu] on GPU nodes)")
            init_kwargs["attn_implementation"] = "sdpa"
    if training_args.deepspeed:
        import torch

        if not torch.cuda.is_available():
            import deepspeed

            deepspeed.init_distributed(dist_backend="gloo")
    path = model_args.model_name_or_path
    model_cls = vlm_module.get_model_class(path, init_kwargs)
    model = model_cls.from_pretrained(path, **{k: v for k, v in init_kwargs.items() if v is not None})
    install_recompute_policy(model, training_args, vlm_module)
    return model


def install_recompute_policy(model: Any, training_args: Any, vlm_module: Any) -> bool:
    """With gradient checkpointing on, install the recompute policy of ``--gradient_checkpointing_every`` and
    ``--vision_gradient_checkpointing`` (:mod:`vlm_r1.recompute`) before the trainer enables checkpointing (transformers
    5.23 ``trainer.py:1503-1515``). Arguments without these fields (SFT's) keep transformers' every-layer default.
    Returns whether a non-default policy was installed."""
    if not (
        getattr(training_args, "activation_checkpointing", None)
        or getattr(training_args, "gradient_checkpointing", None)
    ):
        return False
    policy = RecomputePolicy(
        every=int(getattr(training_args, "gradient_checkpointing_every", 1)),
        vision=bool(getattr(training_args, "vision_gradient_checkpointing", True)),
        vision_keywords=tuple(vlm_module.get_vision_modules_keywords()),
    )
    return install(model, policy)


def save_final(trainer: Any, processor: Any, vlm_module: Any, output_dir: str, title: str, budget: Any = None) -> None:
    """Save model, processor (tidied by the module; it holds the run's pixel budget), ``trainer_state.json``,
    ``training_curves.png`` and, with ``budget`` (the run's :class:`groundwork.pixel_budget.PixelBudget`), the budget in
    ``vlm_r1_run.json`` (what ``gui-grounding eval`` of this checkpoint uses by default)."""

    trainer.save_model(output_dir)
    if not trainer.accelerator.is_main_process:
        return
    trainer.save_state()  # trainer_state.json with the per-step log history
    try:
        png = plot_training_curves(
            os.path.join(output_dir, "trainer_state.json"), os.path.join(output_dir, "training_curves.png"), title=title
        )
        logger.info("training curves: %s", png)
    except ValueError as err:  # e.g. fewer steps than --logging_steps: nothing to draw, the run itself is fine
        logger.warning("no training curves: %s (log more often with --logging_steps)", err)
    processor.save_pretrained(output_dir)
    if budget is not None:
        record(output_dir, budget)
    if hasattr(vlm_module, "tidy_saved_processor"):
        vlm_module.tidy_saved_processor(output_dir)
    logger.info("saved model and processor to %s", output_dir)


# ---- transformers 5 names (issue 13: a quiet console) ----------------------------------------------------------------
def prefer_activation_checkpointing(args: Any) -> None:
    """Resolve ``gradient_checkpointing*`` into transformers 5's ``activation_checkpointing*`` on ``args`` (in place;
    call before ``TrainingArguments.__post_init__``).

    transformers 5 renamed the fields and keeps the old names as deprecated aliases: ``__post_init__`` copies an old
    value into an unset new field and warns (transformers 5.23 ``training_args.py:1533-1545``). TRL 1.16's configs
    still declare the old field with a default of True (``trl/trainer/base_config.py:62``) and ours re-declares it
    with upstream VLM-R1's False (``vlm_r1.configs``), so every run warned although nobody wrote the old name. This does
    the same copy first, so the effective values are unchanged (an explicit ``--activation_checkpointing`` still wins;
    an upstream ``--gradient_checkpointing true`` still turns it on) and no FutureWarning is raised.
    """
    for old, new in (
        ("gradient_checkpointing", "activation_checkpointing"),
        ("gradient_checkpointing_kwargs", "activation_checkpointing_kwargs"),
    ):
        if getattr(args, new, None) is None and getattr(args, old, None) is not None:
            setattr(args, new, getattr(args, old))


# The deprecated checkpointing aliases TRL 1.16 itself calls on the model (we never do: tests/test_quiet_console.py
# checks our sources). Each only forwards to its activation_* successor (transformers 5.23 modeling_utils.py:3191-3210,
# 3276-3307), so the warning tells a user of this project nothing they can act on.
_TRL_DEPRECATED_MODEL_CALLS = (
    # trl/models/utils.py:136-154 (_unwrap_model_for_generation, around every generation: TRL's own and the one our
    # shared-prompt generation and gui_grounding.training.train_eval reuse) and :397-413 (disable_gradient_checkpointing,
    # grpo_trainer.py:2634)
    r"`is_gradient_checkpointing` is deprecated",
    r"`gradient_checkpointing_disable` is deprecated",
    r"`gradient_checkpointing_enable` is deprecated",
)


def silence_library_deprecations() -> None:
    """Ignore the FutureWarnings that TRL's own calls into transformers raise (:data:`_TRL_DEPRECATED_MODEL_CALLS`),
    matched by message and by the module that raises them, nothing broader. Called by :func:`setup_logging`."""
    import warnings

    for message in _TRL_DEPRECATED_MODEL_CALLS:
        warnings.filterwarnings(
            "ignore", message=message, category=FutureWarning, module=r"transformers\.modeling_utils"
        )


# ---- DDP find_unused_parameters from the model (issue 13) -------------------------------------------------------------
def rows_all_have_images(dataset: Any) -> bool:
    """True when every row of ``dataset`` has at least one image (``image_path`` column, as every task here builds);
    False when some row has none or it cannot be told cheaply (no such column, an iterable dataset, None)."""
    if dataset is None or not hasattr(dataset, "column_names") or not hasattr(dataset, "with_format"):
        return False
    if "image_path" not in (dataset.column_names or []):
        return False
    return all(bool(p) for p in dataset.with_format(None)["image_path"])


def decide_find_unused_parameters(
    model: Any, vision_keywords: list[str], all_rows_have_images: bool
) -> tuple[bool, str]:
    """``(find_unused_parameters, reason)`` for DDP from what the model and data really are.

    A parameter is "unused" in a step when it takes part in no forward of the step. In these vision-language models
    every language-model parameter takes part in every forward; only the vision tower is skipped, by a batch without
    images. So DDP must search for unused parameters only when the vision tower has trainable parameters AND a batch
    may be text-only. Otherwise the search is wasted work each step and torch warns about it every step
    (``reducer.cpp``: "find_unused_parameters=True was specified in DDP constructor, but did not find any unused
    parameters"); the reverse mistake (False with unused trainable parameters) is DDP's "Expected to have finished
    reduction" error, which this rule avoids by construction.
    """
    trainable_vision = sum(
        p.numel() for n, p in model.named_parameters() if p.requires_grad and any(k in n for k in vision_keywords)
    )
    if not trainable_vision:
        return False, "the vision tower has no trainable parameter (frozen, or adapters on the language model only)"
    if all_rows_have_images:
        return False, f"{trainable_vision} trainable vision parameters, but every training row has an image"
    return True, f"{trainable_vision} trainable vision parameters and rows without an image are possible"


class FindUnusedParametersFromModel:
    """Trainer mixin (before the HF/TRL trainer in the bases): sets ``ddp_find_unused_parameters`` from
    :func:`decide_find_unused_parameters` unless the user gave ``--ddp_find_unused_parameters``.

    TRL 1.16 sets it to True for every vision-language model the user left it unset for (``grpo_trainer.py:388-398``,
    ``sft_trainer.py:767-777``), before the model is wrapped with PEFT; transformers reads it when it builds the
    accelerator (``Trainer._build_accelerator_args``, transformers 5.23 ``trainer.py:741-758``), after PEFT wrapping and
    vision freezing, on the final model: so the decision is made there. Call :meth:`_remember_find_unused` with the
    args and train dataset before ``super().__init__``.
    """

    def _remember_find_unused(self, args: Any, vision_keywords: list[str], train_dataset: Any) -> None:
        self._user_find_unused = args.ddp_find_unused_parameters
        self._find_unused_inputs = (list(vision_keywords), train_dataset)

    def _build_accelerator_args(self, **kwargs):
        inputs = getattr(self, "_find_unused_inputs", None)
        reentrant = (getattr(self.args, "gradient_checkpointing_kwargs", None) or {}).get("use_reentrant")
        if inputs is not None and self._user_find_unused is None and not reentrant:
            keywords, dataset = inputs
            value, why = decide_find_unused_parameters(self.model, keywords, rows_all_have_images(dataset))
            self.args.ddp_find_unused_parameters = value
            if distributed_env().world_size > 1 and not self.args.deepspeed:
                logger.info(
                    "DDP find_unused_parameters=%s: %s (set --ddp_find_unused_parameters to override)", value, why
                )
        return super()._build_accelerator_args(**kwargs)
