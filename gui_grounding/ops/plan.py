"""``python -m gui_grounding.plan``: the batch maths of a GTA1 launch, from the recipe as training resolves it.

The launcher (``run_scripts/gta1_recipe.sh``, used by ``run_scripts/gta1_7b.sh``, ``gta1_32b.sh``, ``gta1_72b.sh``)
passes the recipe's command line here: ``--config recipes/gta1/<size>.yaml``, the data, the output folder, only the
flags whose environment variable the user set (``NUM_GENERATIONS=16`` -> ``--num_generations 16``; unset: no flag, the
YAML's value wins) and the user's extra arguments. This module parses that command line exactly as
``python -m gui_grounding.train`` does (:func:`gui_grounding.training.gta1.parse_args`: GTA1 defaults < recipe YAML < flags),
reads the resolved ``num_generations`` (G), and derives what depends on the cluster:

    completions per optimisation step = GLOBAL_PROMPTS x G
                                      = nodes x GPUs per node x per-device batch x gradient accumulation
    per-device batch = ROLLOUTS_PER_DEVICE (completions per GPU per micro-step)
    prompts (groups) per step = completions per step / G

It prints the launcher's two flags (``--per_device_train_batch_size``, ``--gradient_accumulation_steps``; plus an
absolute ``--deepspeed`` when the recipe's relative path does not resolve from the working directory) on stdout, one
word a line, and the batch maths on stderr. With ``--dry-run`` it parses the final command line again and prints the
resolved objective (``[dry-run] key value`` lines, :func:`gui_grounding.training.gta1.objective`), the batch maths from those
resolved values, and the predicted peak GPU memory per rank (``gui_grounding/ops/estimate.py``).

    python -m gui_grounding.plan --nnodes 1 --nproc-per-node 8 --dry-run -- --config recipes/gta1/7b.yaml \\
        --data_config data_config/gta1_mix.yaml --output_dir runs/x

Exit status 2 with one ``[plan] ERROR:`` line when the batch cannot be spread over the GPUs or the flags do not parse.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import logging
import os
import sys
from dataclasses import asdict, dataclass, field
from typing import Any

from groundwork.argtypes import BadValue, add_number_flag, flag_values, integer
from gui_grounding.ops.estimate import GPU_MEMORY_GIB, add_estimate_flags, estimate_for_plan, options_from_args
from vlm_r1 import launch
from vlm_r1.dialect import CORE, Dialect
from vlm_r1.launch import INPUT_ERRORS, setup_logging

#: prompts (groups) per optimisation step when GLOBAL_PROMPTS is not set (GTA1: batches under 128 are unstable)
DEFAULT_GLOBAL_PROMPTS = 128
#: completions per GPU per micro-step (per_device_train_batch_size) when ROLLOUTS_PER_DEVICE is not set
DEFAULT_ROLLOUTS_PER_DEVICE = 8


class PlanError(ValueError):
    """The batch cannot be spread over the GPUs (the message says what to set instead)."""


@dataclass(frozen=True)
class BatchPlan:
    """The batch of one optimisation step, from resolved values: ``nnodes x nproc_per_node x per_device x grad_accum``
    completions = ``prompts_per_step x num_generations``; ``max_steps`` optimisation steps;
    ``steps_per_generation`` micro-steps per ``generate`` call (TRL; default = gradient accumulation)."""

    nnodes: int
    nproc_per_node: int
    per_device: int
    grad_accum: int
    num_generations: int
    max_steps: int
    steps_per_generation: int | None = None

    @property
    def world(self) -> int:
        return self.nnodes * self.nproc_per_node

    @property
    def completions_per_step(self) -> int:
        return self.world * self.per_device * self.grad_accum

    @property
    def prompts_per_step(self) -> float:
        """Groups per step (an integer whenever G divides the completions, as the launcher ensures)."""
        n, g = self.completions_per_step, self.num_generations
        return n // g if n % g == 0 else n / g

    def lines(self) -> list[str]:
        """The batch maths, one statement a line."""
        n, g = self.completions_per_step, self.num_generations
        out = [
            f"world size {self.world} = {self.nnodes} node(s) x {self.nproc_per_node} process(es) per node",
            f"completions per optimisation step: {self.nnodes} node(s) x {self.nproc_per_node} GPU(s) per node x "
            f"{self.per_device} per-device batch x {self.grad_accum} gradient accumulation = {n:,}",
            f"prompts (groups) per step: {n:,} completions / {g} num_generations = {self.prompts_per_step:,}",
        ]
        if self.max_steps and self.max_steps > 0:
            out.append(
                f"steps: {self.max_steps:,} (max_steps) -> {self.max_steps * self.prompts_per_step:,} prompts, "
                f"{self.max_steps * n:,} completions"
            )
        if self.steps_per_generation:
            rows = self.per_device * self.steps_per_generation
            out.append(
                f"generation: {rows:,} completions ({rows / g:g} prompts) per process per generate call "
                f"(per-device batch x steps_per_generation {self.steps_per_generation})"
            )
        return out

    def to_dict(self) -> dict:
        return {
            **asdict(self),
            "world": self.world,
            "completions_per_step": self.completions_per_step,
            "prompts_per_step": self.prompts_per_step,
        }


def derive_batch(world: int, global_prompts: int, num_generations: int, rollouts_per_device: int) -> tuple[int, int]:
    """``(per_device_train_batch_size, gradient_accumulation_steps)`` that make ``global_prompts x num_generations``
    completions per optimisation step on ``world`` GPUs with ``rollouts_per_device`` completions per GPU per micro-step.

    Raises:
        PlanError: ``world < 1``; the completions cannot be spread evenly over ``world`` processes (names the next
            GLOBAL_PROMPTS that can); ``rollouts_per_device`` does not divide each process's share.
    """
    if world < 1:
        raise PlanError(f"world size is {world}: nodes x processes per node must be at least 1")
    if global_prompts < 1 or rollouts_per_device < 1 or num_generations < 1:
        raise PlanError("GLOBAL_PROMPTS, ROLLOUTS_PER_DEVICE and num_generations must be at least 1")
    completions = global_prompts * num_generations
    if completions % world:
        nxt = global_prompts
        while nxt * num_generations % world:
            nxt += 1
        raise PlanError(
            f"{global_prompts} prompts x {num_generations} rollouts = {completions} completions per step cannot be "
            f"spread evenly over {world} processes. Use GLOBAL_PROMPTS={nxt} (the next count that divides), or a node "
            f"count whose GPU count divides {completions}."
        )
    per_process = completions // world
    if per_process % rollouts_per_device:
        raise PlanError(
            f"each of the {world} processes handles {per_process} completions per step, which ROLLOUTS_PER_DEVICE="
            f"{rollouts_per_device} does not divide. Choose a divisor of {per_process} (it sets "
            f"per_device_train_batch_size; gradient accumulation = {per_process} / ROLLOUTS_PER_DEVICE)."
        )
    return rollouts_per_device, per_process // rollouts_per_device


def locate(path: str, recipe: str | None) -> str:
    """``path`` as a file to open: as given when it exists from the working directory (or is absolute), else found
    relative to the nearest folder above the recipe YAML that has it (the recipes name repository files such as
    ``configs/deepspeed/zero2.json``), else as given."""
    if not path or os.path.isabs(path) or os.path.exists(path) or not recipe:
        return path
    folder = os.path.dirname(os.path.abspath(recipe))
    while True:
        candidate = os.path.join(folder, path)
        if os.path.exists(candidate):
            return candidate
        parent = os.path.dirname(folder)
        if parent == folder:
            return path
        folder = parent


@contextlib.contextmanager
def quiet_logging(level: int = logging.ERROR):
    """Log records below ``level`` are dropped inside the block (the root logger's level; ``logging.disable`` would
    be undone by the parser, which uses it itself)."""
    root = logging.getLogger()
    before = root.level
    root.setLevel(level)
    try:
        yield
    finally:
        root.setLevel(before)


#: what accelerate reads to decide that a process is one rank of several (``accelerate/state.py``,
#: ``accelerate/utils/environment.py``): ``srun`` sets PMI_*, torchrun RANK/WORLD_SIZE/LOCAL_RANK
_RANK_VARIABLES = (
    "RANK",
    "WORLD_SIZE",
    "LOCAL_RANK",
    "LOCAL_WORLD_SIZE",
    "PMI_RANK",
    "PMI_SIZE",
    "MPI_LOCALRANKID",
    "MPI_LOCALNRANKS",
    *(f"{mpi}_COMM_WORLD_{x}" for mpi in ("OMPI", "MV2") for x in ("RANK", "SIZE", "LOCAL_RANK", "LOCAL_SIZE")),
)


@contextlib.contextmanager
def single_process_env():
    """The rank variables of :data:`_RANK_VARIABLES` removed from ``os.environ`` inside the block (restored after).

    The plan parses the training flags in the launcher's own process, on each node; under ``srun`` (PMI_SIZE = the
    node count) accelerate would otherwise take that process for one rank of a CPU group and try to form it, which
    fails without MASTER_ADDR or waits for ranks that never come."""
    saved = {k: os.environ.pop(k) for k in _RANK_VARIABLES if k in os.environ}
    try:
        yield
    finally:
        os.environ.update(saved)


@dataclass
class Plan:
    """A resolved launch: ``batch``; ``launcher_args`` (what the launcher adds before the recipe's command line);
    ``argv`` (the final command line); ``args`` (``(script_args, training_args, model_args)`` of the final parse,
    ``None`` unless resolved with ``final=True``); ``sources``: where G, the batch and the DeepSpeed config came from."""

    batch: BatchPlan
    launcher_args: list[str]
    argv: list[str]
    recipe: str | None
    global_prompts: int
    rollouts_per_device: int
    deepspeed: str | None
    sources: dict[str, str] = field(default_factory=dict)
    args: Any = None


def resolve(
    recipe_argv: list[str],
    *,
    nnodes: int = 1,
    nproc_per_node: int = 1,
    global_prompts: int | None = None,
    rollouts_per_device: int | None = None,
    final: bool = False,
    dialect: Dialect = CORE,
) -> Plan:
    """Resolve ``recipe_argv`` as ``gui_grounding.train`` does and derive the batch for the cluster.

    One parse (:func:`gui_grounding.training.gta1.command_line`: the recipe read once): G and ``max_steps`` come from
    the parsed values before any dataclass is built, the batch flags are derived from them, and ``final`` builds the
    training arguments of the final command line from the same parse (``Plan.args``) with the launcher's flags
    applied where the user's command line does not set them itself (a flag of the user's, after the launcher's, wins
    as argparse's last value does), so the batch then reports what training will resolve.

    ``global_prompts`` / ``rollouts_per_device``: GLOBAL_PROMPTS / ROLLOUTS_PER_DEVICE, ``None`` for the defaults
    (:data:`DEFAULT_GLOBAL_PROMPTS`, :data:`DEFAULT_ROLLOUTS_PER_DEVICE`). ``dialect``: the training command line's
    (:class:`vlm_r1.dialect.Dialect`; the entry points pass GTA1's, ``vlm_r1.upstream.GTA1``).

    Raises:
        PlanError: see :func:`derive_batch`; a G, max_steps or batch value the trainer would refuse.
        SystemExit: the flags do not parse (argparse's message on stderr), or the recipe cannot be read.
    """
    # the training side (trl, transformers) loads only when a plan is resolved, not for `gui-grounding --help`
    from gui_grounding.training.gta1 import command_line, parse_args
    from vlm_r1.command_line import config_path
    from vlm_r1.configs import check_batch

    recipe_argv = list(recipe_argv)
    with single_process_env():
        cl = command_line(recipe_argv, dialect=dialect)
    where = cl.sources
    recipe = config_path(recipe_argv)
    launcher: list[str] = []
    fixed: dict[str, Any] = {}
    if recipe and where.get("deepspeed", "").startswith("--config"):  # the YAML's path, not a flag's
        value = cl.recipe.get("deepspeed")
        found = locate(value, recipe) if isinstance(value, str) else value
        if found != value:  # relative to the repository, not to the working directory: pass it absolute
            launcher += ["--deepspeed", os.path.abspath(found)]
            fixed["deepspeed"] = os.path.abspath(found)
    try:
        check_batch(cl.namespace, {"num_generations": 2, "max_steps": -1})
    except ValueError as err:
        raise PlanError(str(err)) from None
    G = int(cl.value("num_generations"))
    prompts = DEFAULT_GLOBAL_PROMPTS if global_prompts is None else int(global_prompts)
    per_device_in = DEFAULT_ROLLOUTS_PER_DEVICE if rollouts_per_device is None else int(rollouts_per_device)
    per_device, accum = derive_batch(nnodes * nproc_per_node, prompts, G, per_device_in)
    launcher = [
        "--per_device_train_batch_size",
        str(per_device),
        "--gradient_accumulation_steps",
        str(accum),
    ] + launcher
    deepspeed = fixed.get("deepspeed") or cl.value("deepspeed")
    deepspeed = deepspeed if isinstance(deepspeed, str) and deepspeed else None
    sources = {
        "num_generations": where.get("num_generations", "default of gui_grounding.train"),
        "deepspeed": where.get("deepspeed", "default (none)"),
        "global_prompts": "GLOBAL_PROMPTS" if global_prompts is not None else f"default {DEFAULT_GLOBAL_PROMPTS}",
        "rollouts_per_device": "ROLLOUTS_PER_DEVICE"
        if rollouts_per_device is not None
        else f"default {DEFAULT_ROLLOUTS_PER_DEVICE}",
    }
    argv = launcher + recipe_argv
    batch = BatchPlan(nnodes, nproc_per_node, per_device, accum, G, int(cl.value("max_steps")), accum)
    plan = Plan(batch, launcher, argv, recipe, prompts, per_device_in, deepspeed, sources)
    if final:
        launched = {"per_device_train_batch_size": per_device, "gradient_accumulation_steps": accum, **fixed}
        overrides = {k: v for k, v in launched.items() if not cl.source(k).startswith("flag")}
        with single_process_env():
            plan.args = parse_args(parsed=cl, overrides=overrides)
        tr = plan.args[1]
        plan.batch = BatchPlan(
            nnodes,
            nproc_per_node,
            int(tr.per_device_train_batch_size),
            int(tr.gradient_accumulation_steps),
            int(tr.num_generations),
            int(tr.max_steps),
            int(tr.steps_per_generation or tr.gradient_accumulation_steps),
        )
        plan.deepspeed = tr.deepspeed if isinstance(tr.deepspeed, str) and tr.deepspeed else None
    return plan


def describe(plan: Plan) -> list[str]:
    """Readable lines: the recipe, G and its source, the batch maths, the DeepSpeed config."""
    model = plan.args[2].model_name_or_path if plan.args else None
    b = plan.batch
    out = [f"recipe={plan.recipe or '-'}" + (f" model={model}" if model else "")]
    out.append(f"num_generations {b.num_generations} <- {plan.sources.get('num_generations')}")
    out.append(
        f"GLOBAL_PROMPTS {plan.global_prompts} ({plan.sources['global_prompts']}), ROLLOUTS_PER_DEVICE "
        f"{plan.rollouts_per_device} ({plan.sources['rollouts_per_device']})"
    )
    out.extend(b.lines())
    if b.completions_per_step != plan.global_prompts * b.num_generations:
        out.append(
            f"NOTE: the resolved batch ({b.completions_per_step} completions) is not GLOBAL_PROMPTS x G = "
            f"{plan.global_prompts * b.num_generations}: an extra argument overrides the launcher's batch flags"
        )
    if b.prompts_per_step < 128:
        out.append(f"NOTE: {b.prompts_per_step} prompts per step; GTA1 warns that batches under 128 are unstable.")
    if plan.args is not None and getattr(plan.args[1], "shared_prompt", False) and b.per_device % b.num_generations:
        out.append(
            f"NOTE: shared-prompt GRPO needs the per-device batch ({b.per_device}) to be a multiple of "
            f"num_generations ({b.num_generations}); this run trains naive (set ROLLOUTS_PER_DEVICE="
            f"{b.num_generations * max(1, round(b.per_device / b.num_generations))})"
        )
    out.append(f"deepspeed={plan.deepspeed or 'none'} <- {plan.sources.get('deepspeed')}")
    return out


#: the plan's cluster flags: counts of at least 1 (:mod:`groundwork.argtypes`, the range shown in ``--help``)
_COUNT = integer(min=1, max=1_000_000)

#: The launch plan's variables: the core's (:data:`vlm_r1.launch.LAUNCHER_VARIABLES`: NNODES, NPROC_PER_NODE,
#: MAX_RESTARTS, MASTER_PORT, the training flags' variables, ...) and the plan's own, checked by the one rule
#: (:func:`vlm_r1.launch.check_launcher_env`) when the launcher passes ``--launcher-env`` (before its dry run or
#: torchrun), so a bad value is one ``[plan] ERROR: NAME: ...`` line naming the variable.
LAUNCHER_VARIABLES = {
    **launch.LAUNCHER_VARIABLES,
    "GLOBAL_PROMPTS": _COUNT,
    "ROLLOUTS_PER_DEVICE": _COUNT,
    "GPU_MEMORY_GIB": GPU_MEMORY_GIB,
}


def check_launcher_env(environ: dict[str, str] | None = None) -> dict[str, Any]:
    """The :data:`LAUNCHER_VARIABLES` that are set (non-empty), converted (:func:`vlm_r1.launch.check_launcher_env`).

    Raises:
        BadValue: one line naming the variable and its value.
    """
    return launch.check_launcher_env(LAUNCHER_VARIABLES, environ)


#: the dests of the launch shape flags (:func:`_add_shape_flags`), :func:`resolve`'s keywords of the same names
_SHAPE_DESTS = ("nnodes", "nproc_per_node", "global_prompts", "rollouts_per_device")


def _add_shape_flags(p: argparse.ArgumentParser, nproc_default: int, machine: tuple, batch: tuple) -> None:
    """The launch shape flags of ``python -m gui_grounding.plan`` and ``gui-grounding estimate`` (one list, each
    command its help texts): ``--nnodes``, ``--nproc-per-node`` (default ``nproc_default``), ``--global-prompts``,
    ``--rollouts-per-device``, all counts of the launcher variables' range (:data:`_COUNT`)."""
    add_number_flag(p, "--nnodes", _COUNT, 1, machine[0])
    add_number_flag(p, "--nproc-per-node", _COUNT, nproc_default, machine[1])
    add_number_flag(p, "--global-prompts", _COUNT, None, batch[0])
    add_number_flag(p, "--rollouts-per-device", _COUNT, None, batch[1])


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m gui_grounding.plan",
        description=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_shape_flags(
        p,
        1,
        ("nodes (NNODES) [1]", "processes (GPUs) per node [1]"),
        (
            f"prompts (groups) per optimisation step, GLOBAL_PROMPTS [{DEFAULT_GLOBAL_PROMPTS}]",
            f"completions per GPU per micro-step (per_device_train_batch_size), ROLLOUTS_PER_DEVICE "
            f"[{DEFAULT_ROLLOUTS_PER_DEVICE}]",
        ),
    )
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="also print the resolved objective ([dry-run] lines) and the memory estimate (stderr)",
    )
    p.add_argument("--json", action="store_true", help="print the plan (and estimate) as JSON on stdout instead")
    p.add_argument(
        "--launcher-env",
        action="store_true",
        help="first check the launchers' numeric environment variables (" + ", ".join(LAUNCHER_VARIABLES) + "; "
        "run_scripts/gta1_recipe.sh passes it): one line naming a bad one",
    )

    add_estimate_flags(p)
    p.add_argument("recipe_argv", nargs=argparse.REMAINDER, help="-- then the training command line")
    return p


def _default_recipe() -> str:
    return os.path.join(
        os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "recipes", "gta1", "7b.yaml"
    )


def _estimate(args: argparse.Namespace, dialect: Dialect = CORE) -> None:

    extra = args.training_flags[1:] if args.training_flags[:1] == ["--"] else args.training_flags
    argv = ["--config", args.recipe]
    if not any(a.split("=")[0] in ("--data_file_paths", "--data_config", "--dataset_name") for a in extra):
        argv += ["--data_file_paths", "unused.jsonl"]  # the parser needs data; the estimate reads none
    argv += extra
    try:
        with quiet_logging():  # the parse's notes about this machine (no GPU, bf16) do not concern the estimate
            plan = resolve(argv, **flag_values(args, *_SHAPE_DESTS), final=True, dialect=dialect)
    except PlanError as err:
        raise ValueError(str(err)) from None
    est = estimate_for_plan(plan, **options_from_args(args))
    if args.json:
        out = est.to_dict(args.gpu_memory_gib)
        out["batch"] = plan.batch.to_dict()
        out["recipe"] = args.recipe
        print(json.dumps(out, indent=1, allow_nan=False))
        return
    print("\n".join(describe(plan)))
    print(est.table(args.gpu_memory_gib))


def register_estimate_cli(sub: Any, dialect: Dialect = CORE) -> None:
    """Add ``gui-grounding estimate`` (the memory estimate of a recipe, ``gui_grounding/ops/estimate.py``) to the CLI;
    ``dialect``: the training command line's (:func:`resolve`)."""
    import gui_grounding.ops.estimate as estimate_module

    doc = estimate_module.__doc__
    p = sub.add_parser(
        "estimate",
        help="predicted peak GPU memory per rank of a GTA1 recipe (parameters, gradients, optimizer, activations)",
        description=doc,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--recipe", default=_default_recipe(), help="recipe YAML [recipes/gta1/7b.yaml]")
    _add_shape_flags(
        p,
        8,
        ("nodes [1]", "GPUs per node [8]"),
        (
            f"prompts per optimisation step, as the launcher's GLOBAL_PROMPTS [{DEFAULT_GLOBAL_PROMPTS}]",
            f"completions per GPU per micro-step, as ROLLOUTS_PER_DEVICE [{DEFAULT_ROLLOUTS_PER_DEVICE}]",
        ),
    )
    add_estimate_flags(p)
    p.add_argument("--json", action="store_true", help="print JSON (every part in GiB with its formula) instead")
    p.add_argument(
        "training_flags",
        nargs=argparse.REMAINDER,
        help="-- then python -m gui_grounding.train flags that override the recipe (e.g. -- --num_generations 16 "
        "--deepspeed configs/deepspeed/zero3.json)",
    )
    p.set_defaults(func=functools.partial(_estimate, dialect=dialect))


def main(argv: list[str] | None = None, *, dialect: Dialect = CORE) -> int:
    """Console entry (see the module docstring). Returns the exit status: 2 with one ``[plan] ERROR:`` line for a bad
    launcher variable (``--launcher-env``: :func:`check_launcher_env`, checked before the flags it became), an input
    error of the recipe (:data:`vlm_r1.launch.INPUT_ERRORS`) or a batch that cannot be spread."""

    def say(line: str) -> None:
        print(f"[plan] {line}", file=sys.stderr)

    argv = list(sys.argv[1:] if argv is None else argv)
    if "--launcher-env" in (argv[: argv.index("--")] if "--" in argv else argv):
        try:
            check_launcher_env()
        except BadValue as err:
            say(f"ERROR: {err}")
            return 2
    args = build_parser().parse_args(argv)
    recipe_argv = args.recipe_argv[1:] if args.recipe_argv[:1] == ["--"] else args.recipe_argv
    try:
        setup_logging()
        plan = resolve(
            recipe_argv, **flag_values(args, *_SHAPE_DESTS), final=args.dry_run or args.json, dialect=dialect
        )
    except PlanError as err:
        say(f"ERROR: {err}")
        return 2
    except INPUT_ERRORS as err:
        say(f"ERROR: {' '.join(str(err).split()) or type(err).__name__}")
        return 2
    except SystemExit as err:  # argparse already printed why
        say("ERROR: the training flags do not parse (see above)")
        return 2 if err.code else 0
    for line in describe(plan):
        say(line)
    result: dict = {"plan": {"batch": plan.batch.to_dict(), "launcher_args": plan.launcher_args}}
    if plan.args is not None:
        from gui_grounding.training.gta1 import objective  # trl: loaded only for a dry run

        resolved = objective(*plan.args)
        result["objective"] = resolved
        if args.dry_run:
            width = max(map(len, resolved))
            for key, value in resolved.items():
                print(f"[dry-run] {key:<{width}} {value}", file=sys.stderr)
        try:
            est = estimate_for_plan(plan, **options_from_args(args))
        except ValueError as err:
            say(f"memory estimate: not available ({err})")
        else:
            result["memory"] = est.to_dict(args.gpu_memory_gib)
            if args.dry_run:
                print("[memory] " + est.table(args.gpu_memory_gib).replace("\n", "\n[memory] "), file=sys.stderr)
    if args.json:
        print(json.dumps(result, indent=1, default=str, allow_nan=False))
    else:
        print("\n".join(plan.launcher_args))
    return 0
