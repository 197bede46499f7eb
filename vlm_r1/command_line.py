"""One parse per command line: a training command line (and its ``--config`` recipe) parsed once per process into
the parsed values plus the source of each (flag, recipe, default), shared by training, the preflight, ``--dry_run``,
the launch plan and ``gui-grounding estimate``.

A :class:`CommandLine` holds the parsed argparse namespace, not yet the dataclasses: building
``transformers.TrainingArguments`` creates the process group, which the preflight must precede, and the launch plan
learns ``num_generations`` before it picks the batch flags. So the flow of every training entry point is::

    cl = command_line.parse(types, argv, defaults=...)   # one TrlParser, the recipe read once (cached per process)
    preflight_from_argv(argv, command_line=cl)          # settings from cl, no second parse
    objects, options = cl.objects()                      # the dataclasses (optionally with overrides)

:func:`parse` caches its result per process for an equal ``(types, argv, defaults)``, and :func:`read_recipe` caches
the recipe per file (path, size, mtime), so a second consumer of the same command line (the plan, then the dry run; a
test that parses twice) reads and parses nothing again.

A foreign command line (upstream VLM-R1's, GTA1's) is a :class:`vlm_r1.dialect.Dialect` its entry point hands to
:func:`parse`: the dialect's dataclasses are parsed with the core's, its defaults replace the dataclasses' (below an
entry point's own, the recipe and the flags), and its ``translate`` hook rewrites its flags into core values
(``vlm_r1.upstream``: every transformers 4.49 ``TrainingArguments`` flag 5.x removed is mapped to its successor with a
notice, or announced as having no effect). On top of ``trl.TrlParser``, bare boolean flags mean true
(:func:`allow_bare_bools`), numeric flags and their recipe values get the project's number types
(:func:`strict_numbers`), and ``str | list[str]`` flags take several words (:func:`allow_word_lists`). The recipe and a
``--deepspeed`` JSON are read by the side-file rule (:func:`check_side_files`).
"""

from __future__ import annotations

import argparse
import copy
import os
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from groundwork.argtypes import integer, number
from groundwork.argtypes import value as checked_value
from groundwork.records import load_json_file, load_yaml_file
from vlm_r1.dialect import CORE, Dialect
from vlm_r1.tasks import DEFAULT_TASK, all_task_options, task_options_class

#: a usage line argparse prints above every usage error (the full one is ~240 lines; ``--help`` has it)
SHORT_USAGE = "%(prog)s [--config FILE.yaml] [--FLAG VALUE ...]"


# ---- the recipe, read once per process -------------------------------------------------------------------------------
_RECIPES: dict[tuple, Any] = {}
#: how many times a recipe file was read from disk in this process (tests: the one-parse rule)
RECIPE_READS = {"count": 0}


def read_recipe(path: str) -> Any:
    """The ``--config`` YAML at ``path`` (:func:`groundwork.records.load_yaml_file`: a regular file, at most 64 MiB, no
    key twice), read from disk once per process and file version (path, inode, size, mtime); a deep copy each call.

    Raises:
        ValueError: one line naming ``--config``, the file and the problem.
    """
    try:
        st = os.stat(path)
        key = (os.path.realpath(path), st.st_ino, st.st_size, st.st_mtime_ns)
    except OSError:
        key = None  # missing or unreadable: load_yaml_file says why
    if key is None or key not in _RECIPES:
        loaded = load_yaml_file(path, "--config")
        RECIPE_READS["count"] += 1
        if key is None:
            return loaded
        _RECIPES[key] = loaded
    return copy.deepcopy(_RECIPES[key])


def config_path(argv: Sequence[str]) -> str | None:
    """The recipe of ``argv``: the value after its first ``--config`` (TRL's rule: ``--config PATH`` only)."""
    args = list(argv)
    if "--config" in args and args.index("--config") + 1 < len(args):
        return args[args.index("--config") + 1]
    return None


def check_side_files(argv: Sequence[str]) -> None:
    """Read the side files a command line names before TRL / transformers could, by the one side-file rule
    (:func:`read_recipe`, :func:`groundwork.records.load_json_file`: a regular file, at most 64 MiB, no key given
    twice): the ``--config`` recipe YAML and the DeepSpeed JSON of ``--deepspeed`` or the recipe's ``deepspeed:``
    (transformers' ``TrainingArguments`` reads it whole while it is built: ``/dev/zero`` would fill memory, a FIFO
    hang). A DeepSpeed value that is not an existing path (inline JSON, a missing file) is left to transformers.

    Raises:
        SystemExit: one line naming the flag, the file and the problem.
    """
    try:
        config = _flag_value(argv, "config")
        loaded = read_recipe(config) if config is not None else None
        deepspeed = _flag_value(argv, "deepspeed")
        if deepspeed is None and isinstance(loaded, dict):
            deepspeed = loaded.get("deepspeed")
        if isinstance(deepspeed, str) and deepspeed and os.path.lexists(deepspeed):
            load_json_file(deepspeed, "--deepspeed")
    except ValueError as err:
        raise SystemExit(" ".join(str(err).split())) from None


def task_type_of(argv: Sequence[str], defaults: dict[str, Any] | None = None) -> str | None:
    """The ``--task_type`` a command line asks for (phase 1 of a task parse): the last ``--task_type X`` /
    ``--task_type=X`` (or ``--task-type``) in ``argv``, else the ``task_type`` key of its recipe, else
    ``defaults["task_type"]`` (an entry point's default), else None (the ``default`` task)."""
    args = list(argv)
    found = None
    for i, arg in enumerate(args):
        if arg in ("--task_type", "--task-type") and i + 1 < len(args):
            found = args[i + 1]
        elif arg.startswith(("--task_type=", "--task-type=")):
            found = arg.split("=", 1)[1]
    if found is not None:
        return found
    path = config_path(args)
    if path is not None:
        try:
            config = read_recipe(path)
        except ValueError:
            config = None  # the parse reports an unreadable recipe
        if isinstance(config, dict) and config.get("task_type") is not None:
            return str(config["task_type"])
    return (defaults or {}).get("task_type")


# ---- the one parse ---------------------------------------------------------------------------------------------------
@dataclass
class CommandLine:
    """One parsed command line (see the module docstring).

    Attributes:
        argv: the arguments as given.
        types: the dataclasses the values belong to, in order (the task's options class last, when it has one).
        namespace: every parsed value (flag > recipe > entry-point default > dataclass default).
        sources: ``{field: "flag --NAME" | "--config PATH"}`` for the fields set on the command line or in the recipe
            (values equal to the defaults count too); :meth:`source` gives ``"default"`` for the rest.
        notices: one line per foreign flag given (the dialect's ``translate``), saying what it became.
        options_class: the task's options dataclass (``Task.options_class``), or None.
        task_type: the task the command line asks for (phase 1).
        recipe: the recipe's values (``{}`` without ``--config``).
        dialect: the command-line dialect it was parsed in (:data:`vlm_r1.dialect.CORE` for the core's own).
    """

    argv: tuple[str, ...]
    types: tuple[type, ...]
    namespace: argparse.Namespace
    sources: dict[str, str]
    notices: list[str] = field(default_factory=list)
    options_class: type | None = None
    task_type: str | None = None
    recipe: dict = field(default_factory=dict)
    dialect: Dialect = CORE

    def value(self, name: str, default: Any = None) -> Any:
        """The parsed value of ``name`` (``default`` when no dataclass has such a field)."""
        return getattr(self.namespace, name, default)

    def source(self, name: str) -> str:
        return self.sources.get(name, "default")

    def given(self) -> set[str]:
        """The fields set on the command line or in the recipe."""
        return set(self.sources)

    def objects(self, **overrides: Any) -> tuple[list, Any]:
        """``([one instance per dataclass type], task options instance or None)`` from the parsed values, with
        ``overrides`` (field -> value) applied (HfArgumentParser's construction: each type takes its init fields)."""
        values = {**copy.deepcopy(vars(self.namespace)), **overrides}  # a consumer's edits never reach the parse
        out = []
        for dtype in self.types:
            keys = {f.name for f in fields(dtype) if f.init}
            out.append(dtype(**{k: v for k, v in values.items() if k in keys}))
        options = out.pop() if self.options_class is not None else None
        return out, options

    def dialect_objects(self) -> list:
        """One instance per dataclass of the dialect (``Dialect.argument_classes``), from the parsed values."""
        values = copy.deepcopy(vars(self.namespace))
        return [
            cls(**{f.name: values[f.name] for f in fields(cls) if f.init and f.name in values})
            for cls in self.dialect.argument_classes
        ]


_PARSED: dict[tuple, CommandLine] = {}
#: how many TrlParsers this module built in this process (tests: the one-parse rule)
PARSERS_BUILT = {"count": 0}


def clear_cache() -> None:
    """Forget the parsed command lines and recipes of this process (a test that changes files between parses)."""
    _PARSED.clear()
    _RECIPES.clear()


def _build_parser(types: tuple, parser_kwargs: dict | None, config_name: str):
    from trl import TrlParser

    PARSERS_BUILT["count"] += 1
    parser = TrlParser(types, **{"usage": SHORT_USAGE, **(parser_kwargs or {})})
    allow_bare_bools(parser)
    strict_numbers(parser, config_name)
    allow_word_lists(parser, types)
    return parser


def _recipe_values(path: str | None) -> dict:
    """The recipe's values for the parser, its ``env`` applied to ``os.environ`` (TRL's ``parse_args_and_config``)."""
    if path is None:
        return {}
    config = read_recipe(path)
    if not isinstance(config, dict):
        raise ValueError(f"Config file {path} must contain a YAML mapping.")
    env = config.pop("env", {})
    if not isinstance(env, dict):
        raise ValueError("`env` field should be a dict in the YAML file.")
    for key, value in env.items():
        os.environ[key] = str(value)
    return config


def _given_flags(parser, args: list[str]) -> set[str]:
    """The dests the command line sets (any spelling argparse accepts), by a pass of the same parser with every
    default suppressed."""
    saved = [(a, a.default, a.required) for a in parser._actions if a.dest != "help"]
    parser_defaults = dict(parser._defaults)  # set_defaults(): argparse adds these to every namespace
    try:
        for action, _, _ in saved:
            action.default, action.required = argparse.SUPPRESS, False
        parser._defaults.clear()
        namespace, _ = parser.parse_known_args(args)
    finally:
        for action, default, required in saved:
            action.default, action.required = default, required
        parser._defaults.update(parser_defaults)
    return set(vars(namespace))


def parse(
    dataclass_types: Sequence[type],
    argv: Sequence[str],
    *,
    defaults: dict[str, Any] | None = None,
    parser_kwargs: dict[str, Any] | None = None,
    unknown_hint: Any = None,
    options_class: type | None = None,
    task_type: str | None = None,
    dialect: Dialect = CORE,
) -> CommandLine:
    """Parse ``argv`` and its recipe once (see the module docstring); an equal call returns the cached result.

    ``dialect`` (:class:`vlm_r1.dialect.Dialect`, default the core's own): its dataclasses are parsed too, its defaults
    replace the dataclasses' own, its ``translate`` hook runs on the parsed values (notices: :attr:`CommandLine.notices`).
    ``defaults`` replaces field defaults above the dialect's (an entry point's own, e.g. GTA1's; the recipe and the
    flags win over them).
    Unknown flags, and recipe keys no dataclass has, are an argparse error; ``unknown_hint(unknown) -> str`` may add a
    hint to its message. ``parser_kwargs`` go to the ``ArgumentParser`` (e.g. ``epilog``). ``options_class`` is parsed
    with the others and returned apart by :meth:`CommandLine.objects`.

    Raises:
        SystemExit: usage errors, as argparse (status 2); an unreadable recipe or DeepSpeed file (one line).
        ValueError: a recipe that is not a mapping.
    """
    argv = list(argv)
    types = tuple(dataclass_types) + ((options_class,) if options_class is not None else ())
    key = (types, tuple(argv), repr(sorted((defaults or {}).items())), repr(parser_kwargs), task_type, id(dialect))
    if key in _PARSED:
        return _PARSED[key]
    check_side_files(argv)
    path = config_path(argv)
    recipe = _recipe_values(path)
    args = list(argv)
    if path is not None:
        i = args.index("--config")
        del args[i : i + 2]
    config_name = f"--config {path}" if path is not None else "--config"
    parser = _build_parser((*types, *dialect.argument_classes), parser_kwargs, config_name)
    _dialect_defaults(parser, dialect)
    if defaults:
        parser.set_defaults(**defaults)
    config_unknown = parser.set_defaults_with_config(**recipe)
    namespace, unknown = parser.parse_known_args(args)
    unknown = list(config_unknown) + list(unknown)
    if unknown:
        hint = unknown_hint(unknown) if unknown_hint else ""
        parser.error(f"unrecognized arguments: {' '.join(unknown)} ({hint or 'see --help'})")
    sources = {str(k): f"--config {path}" for k in recipe}
    sources.update({name: f"flag --{name}" for name in _given_flags(parser, args)})
    notices = dialect.translate(parser, namespace, set(sources))
    result = CommandLine(tuple(argv), types, namespace, sources, notices, options_class, task_type, recipe, dialect)
    _PARSED[key] = result
    return result


def parse_task(
    dataclass_types: Sequence[type],
    argv: Sequence[str],
    *,
    defaults: dict[str, Any] | None = None,
    dialect: Dialect = CORE,
) -> CommandLine:
    """:func:`parse` in two phases: the task first (:func:`task_type_of`), then ``dataclass_types`` together with the
    options dataclass that task declares (``Task.options_class``, ``vlm_r1.tasks``).

    So ``--help`` lists the task's flags when ``--task_type`` names it (and names every installed task's flags
    otherwise), recipe keys fill them, and a flag of another task is an error that names its task. ``defaults`` keys
    that no parsed dataclass has (an entry point's defaults for a task not chosen) are left out.

    Raises:
        SystemExit: usage errors, as argparse (status 2), including an unknown ``--task_type``.
    """

    task_type = task_type_of(argv, defaults)
    try:
        options_class = task_options_class(task_type)
    except ValueError as err:
        argparse.ArgumentParser(add_help=False).error(str(err))
    types = (*dataclass_types, *((options_class,) if options_class is not None else ()))
    known = {f.name for t in types for f in fields(t)} | dialect.extra_fields()
    kwargs = None
    if "-h" in argv or "--help" in argv:
        kwargs = {"epilog": _task_options_epilog(), "formatter_class": _HelpFormatter}
    return parse(
        dataclass_types,
        argv,
        defaults={k: v for k, v in (defaults or {}).items() if k in known},
        parser_kwargs=kwargs,
        unknown_hint=_other_tasks_hint(task_type),
        options_class=options_class,
        task_type=task_type,
        dialect=dialect,
    )


def _dialect_defaults(parser: argparse.ArgumentParser, dialect: Dialect) -> None:
    """The dialect's defaults on the parser's flags (a field the parsed dataclasses lack is left out), each flag's
    help saying why: ``Default here: NOTE.`` (TRL's ``(default)`` marks, which name TRL's value, removed)."""
    actions = {a.dest: a for a in parser._actions}
    present = {k: v for k, v in dialect.defaults.items() if k in actions}
    if present:
        parser.set_defaults(**present)
    for name, note in dialect.default_notes.items():
        action = actions.get(name)
        if action is not None and action.help:
            action.help = action.help.replace(" (default)", "") + f" Default here: {note}."


# ---- parser adjustments ----------------------------------------------------------------------------------------------
def strict_numbers(parser: argparse.ArgumentParser, config_name: str = "--config") -> None:
    """Give every integer and float flag of a dataclass parser the project's number types (:mod:`groundwork.argtypes`:
    finite, no booleans; NaN, ``inf`` and ``1e999`` are refused by argparse, naming the flag), and check the same
    flags' values in the ``--config`` YAML (``config_name``) with the same rule.

    Why: transformers' parser gives ``int`` / ``float`` fields plain ``type=int`` / ``type=float`` (``--learning_rate
    nan`` passed), and TRL's ``--config`` sets YAML values as argparse *defaults*, which argparse never converts
    unless they are text: ``max_pixels: [1, 2]`` or ``max_steps: .nan`` reached the run unchecked and failed far from
    their cause. A refused YAML value is a :class:`groundwork.argtypes.BadValue` naming the file and key.
    """
    for action in parser._actions:
        name = getattr(action.type, "__name__", "")
        if action.type in (int, float) or (name in ("int", "float") and callable(action.type)):
            accepts_none = action.type not in (int, float)  # TRL's _accept_none wrapper: 'none' / 'null' -> None
            parse = integer() if name == "int" else number()
            action.type = _none_or(parse) if accepts_none else parse
    apply = parser.set_defaults_with_config

    def set_defaults_with_config(**config):
        for action in parser._actions:
            if action.dest in config and getattr(action.type, "range_text", None):
                config[action.dest] = _config_number(action, config[action.dest], f"{config_name}: {action.dest}")
        return apply(**config)

    parser.set_defaults_with_config = set_defaults_with_config


def _none_or(parse):
    """``parse`` that also reads ``none`` / ``null`` as None (TRL's rule for ``X | None`` fields)."""

    def parse_or_none(text: str):
        return None if str(text).strip().lower() in ("none", "null") else parse(text)

    parse_or_none.__name__ = parse.__name__
    parse_or_none.range_text = parse.range_text  # type: ignore[attr-defined]
    parse_or_none.accepts_none = True  # type: ignore[attr-defined]
    return parse_or_none


def _config_number(action: argparse.Action, raw: Any, name: str) -> Any:
    """A ``--config`` YAML value of a numeric flag, converted by the flag's type (:func:`strict_numbers`)."""
    if action.nargs in ("+", "*") and isinstance(raw, list):
        return [checked_value(action.type, v, f"{name}[{i}]") for i, v in enumerate(raw)]
    if raw is None or (isinstance(raw, str) and raw.strip().lower() in ("none", "null")):
        if getattr(action.type, "accepts_none", False) or action.default is None:
            return None
    return checked_value(action.type, raw, name)


def allow_word_lists(parser: argparse.ArgumentParser, dataclass_types: Sequence[type]) -> None:
    """Let a flag whose field is ``str | list[str]`` (``--report_to``, ``--optim_target_modules``) take several words:
    ``--report_to tensorboard wandb`` is the list transformers' ``TrainingArguments.report_to`` accepts (a single word
    stays the string it was). transformers' parser keeps only the ``str`` of such a union, so a second word was an
    "unrecognized arguments" error, and the launchers' documented ``REPORT_TO="tensorboard wandb"`` failed."""
    import typing

    names = set()
    for dtype in dataclass_types:
        hints = typing.get_type_hints(dtype)
        for f in fields(dtype):
            parts = typing.get_args(hints.get(f.name))
            if str in parts and list[str] in parts:
                names.add(f.name)
    for action in parser._actions:
        if action.dest in names and action.nargs is None and action.option_strings:
            action.nargs = "+"
            action.__class__ = _WordOrWords


class _WordOrWords(argparse._StoreAction):
    """One word: the word; several: the list (see :func:`allow_word_lists`)."""

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, values[0] if isinstance(values, list) and len(values) == 1 else values)


def allow_bare_bools(parser: argparse.ArgumentParser) -> None:
    """Make every boolean flag accept a bare ``--flag`` (= true), as transformers 4.x did.

    transformers 5's parser gives ``bool | None`` fields with a None default (``--bf16``, ``--tf32``, ...) no
    ``nargs='?'``, so upstream VLM-R1's and GTA1's bare ``--bf16`` fails with "expected one argument".
    """
    for action in parser._actions:
        # transformers' string_to_bool (compared by name: the parser module may hold its own reference)
        if getattr(action.type, "__name__", "") == "string_to_bool" and action.nargs is None:
            action.nargs = "?"
            action.const = True


def _flag_value(argv: Sequence[str], name: str) -> str | None:
    """The value of the last ``--NAME X`` / ``--NAME=X`` in ``argv`` (also with ``-`` for ``_``), or None."""
    found, names = None, {f"--{name}", f"--{name.replace('_', '-')}"}
    for i, arg in enumerate(argv):
        if arg in names and i + 1 < len(argv):
            found = argv[i + 1]
        elif arg.split("=", 1)[0] in names and "=" in arg:
            found = arg.split("=", 1)[1]
    return found


class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """HfArgumentParser's formatter (defaults shown) that keeps the epilog's line breaks."""


def _task_options_epilog() -> str:

    lines = [
        "Task options: --task_type NAME adds the flags the task declares (give --task_type NAME --help to see "
        "their help). Installed tasks with options:"
    ]
    for name, cls in all_task_options().items():
        lines.append(f"  {name}: " + ", ".join(f"--{f.name}" for f in fields(cls)))
    return "\n".join(lines)


def _other_tasks_hint(task_type: str | None):
    """An ``unknown_hint`` for :func:`parse`: which installed task declares an unknown flag."""

    def hint(unknown: list[str]) -> str:

        flags = {u.split("=", 1)[0].lstrip("-") for u in unknown if u.startswith("--")}
        owners = [
            f"--{f.name} is an option of --task_type {name}"
            for name, cls in all_task_options().items()
            for f in fields(cls)
            if f.name in flags and name != (task_type or DEFAULT_TASK)
        ]
        return "; ".join(owners) + f"; this run's task_type is {task_type or DEFAULT_TASK}" if owners else ""

    return hint
