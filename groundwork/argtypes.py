"""argparse types for numeric flags: finite, in range, and the range shown in ``--help`` (the one home).

    p.add_argument("--clip-tolerance", type=number(min=0), ...)
    p.add_argument("--limit", type=integer(min=1), ...)

A value that is not a number, is NaN or infinite, or lies outside the range is refused by argparse itself
(``error: argument --limit: must be an integer >= 1, got '-3'``), before anything is read or written. The types'
``range_text`` (e.g. ``">= 0"``) is what :func:`with_range` appends to a flag's help.

The same types check numbers that do not come through argparse: a YAML value (:func:`value`), an environment variable
(:func:`from_env`) and the distributed environment torchrun sets (:func:`distributed_env`); a refused value is a
:class:`BadValue` whose one-line message names the key or variable and the value.
"""

from __future__ import annotations

import argparse
import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any


def _bound(value: float) -> str:
    """A bound as text: integers exactly (``2147483647``, not ``2.14748e+09``), other values with ``:g``."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) < 10**16:
        return str(value)
    return f"{value:g}"


def _describe(kind: str, lo: float | None, hi: float | None, lo_open: bool, hi_open: bool) -> str:
    parts = []
    if lo is not None:
        parts.append(f"{'>' if lo_open else '>='} {_bound(lo)}")
    if hi is not None:
        parts.append(f"{'<' if hi_open else '<='} {_bound(hi)}")
    if not parts:  # "a finite number", "an integer"
        return "a finite number" if kind == "a number" else kind
    return f"{kind} {' and '.join(parts)}"


def _flag_type(kind: str, text: str, bounds: tuple, convert: Callable[[str], Any], outside: Callable[[Any], bool]):
    """The argparse type of :func:`number` and :func:`integer`: ``convert`` the text, refuse it when that fails or
    ``outside(value)`` holds (``must be <text>, got '<value>'``), and carry ``range_text`` and ``bounds`` for
    ``--help`` (:func:`with_range`) and the flag-enumerating tests (the one shape of a number flag type)."""

    def parse(value: str):
        try:
            x = convert(value)
        except (TypeError, ValueError):
            raise argparse.ArgumentTypeError(f"must be {text}, got {value!r}") from None
        if outside(x):
            raise argparse.ArgumentTypeError(f"must be {text}, got {value!r}")
        return x

    parse.__name__ = kind
    parse.range_text = text  # type: ignore[attr-defined]
    parse.bounds = bounds  # type: ignore[attr-defined]
    return parse


def number(
    *, min: float | None = None, max: float | None = None, min_open: bool = False, max_open: bool = False
) -> Callable[[str], float]:
    """A finite float flag within ``[min, max]`` (``min_open`` / ``max_open``: exclusive bounds)."""

    def outside(x: float) -> bool:
        bad = not math.isfinite(x)
        bad |= min is not None and (x <= min if min_open else x < min)
        bad |= max is not None and (x >= max if max_open else x > max)
        return bad

    text = _describe("a number", min, max, min_open, max_open)
    return _flag_type("number", text, (min, max, min_open, max_open), float, outside)


def integer(*, min: int | None = None, max: int | None = None) -> Callable[[str], int]:
    """An integer flag within ``[min, max]`` (no floats, NaN or inf; ``1e3`` is refused, ``1000`` is fine)."""

    def outside(x: int) -> bool:
        return (min is not None and x < min) or (max is not None and x > max)

    text = _describe("an integer", min, max, False, False)
    return _flag_type(
        "integer", text, (min, max, False, False), lambda v: int(str(v).strip().replace("_", ""), 10), outside
    )


#: a random seed: what ``random.Random``, numpy (``< 2**32``) and transformers' ``set_seed`` all accept
SEED = integer(min=0, max=2**32 - 1)


def text(value: str) -> str:
    """A text flag (``--instruction``, ``--source``): valid Unicode. A byte of argv that is not UTF-8 arrives as a
    lone surrogate (PEP 383) and would be written into JSON outputs as invalid text; it is refused here, naming the
    bytes."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise argparse.ArgumentTypeError(
            f"{value.encode('utf-8', 'surrogateescape')[:60]!r} is not valid UTF-8 text"
        ) from None
    return value


def with_range(help_text: str, parse: Callable) -> str:
    """``help_text`` followed by the accepted range of ``parse`` (``number`` / ``integer``)."""
    return f"{help_text} ({getattr(parse, 'range_text', '')})" if getattr(parse, "range_text", "") else help_text


def add_number_flag(parser, flag: str, parse: Callable, default: Any, help_text: str, **kwargs) -> argparse.Action:
    """``parser.add_argument(flag, type=parse, default=default, help=with_range(help_text, parse), **kwargs)``: a
    number flag whose ``--help`` ends with the range its type accepts. The one place that pairs a flag's type with
    its help text, so the two cannot drift apart (``tests/test_hostile_round3_numbers.py`` checks every flag).

    ``parser`` is an ``argparse.ArgumentParser`` or an argument group; ``kwargs`` (``metavar``, ``dest``, ...) pass
    through.
    """
    return parser.add_argument(flag, type=parse, default=default, help=with_range(help_text, parse), **kwargs)


def flag_values(args: argparse.Namespace, *names: str, prefix: str = "") -> dict[str, Any]:
    """``{name: args.<prefix><name>}`` for each of ``names``: the keywords a command hands on to its library function,
    whose parameters carry the flags' dest names (the one rule of that plumbing, so a call does not spell every name
    twice: ``clean(..., **flag_values(args, "cache_dir", "shard"))``; a flag group such as ``--tts-samples`` passes
    ``prefix="tts_"``). A name the parser does not define is an ``AttributeError`` at once, never a silent default."""
    return {name: getattr(args, prefix + name) for name in names}


# ---- values that do not come through argparse: YAML keys, environment variables ------------------------------------
class BadValue(ValueError):
    """A value from a file or the environment that its type refuses; the message names the key (or variable) and
    the value, on one line."""


def _shown(raw: Any) -> str:
    text = repr(raw)
    return text if len(text) <= 80 else text[:77] + "..."


def value(parse: Callable[[str], Any], raw: Any, name: str) -> Any:
    """``raw`` (a YAML value, an environment variable's text) converted by the flag type ``parse`` (:func:`number`,
    :func:`integer`): the same rule as the flag, so NaN, infinities, out-of-range values, booleans, lists, mappings
    and text that is not a number are refused, as a :class:`BadValue` naming ``name``
    (``"seed: must be an integer, got 'abc'"``). A float is read by its ``repr`` (``3.0`` is no integer).
    """
    if isinstance(raw, bool) or not isinstance(raw, (str, int, float)):
        raise BadValue(f"{name}: must be {getattr(parse, 'range_text', 'a number')}, got {_shown(raw)}")
    try:
        return parse(raw if isinstance(raw, str) else repr(raw))
    except argparse.ArgumentTypeError as err:
        raise BadValue(f"{name}: {err}") from None


def from_env(name: str, parse: Callable[[str], Any], default: Any = None, environ: Mapping[str, str] | None = None):
    """The environment variable ``name`` converted by ``parse`` (:func:`value`); ``default`` when it is unset or
    empty (as the launchers' ``${NAME:-default}``)."""
    raw = (os.environ if environ is None else environ).get(name)
    if raw is None or not raw.strip():
        return default
    return value(parse, raw, name)


@dataclass(frozen=True)
class DistributedEnv:
    """The distributed environment torchrun (or a user) sets, validated by :func:`distributed_env`."""

    world_size: int = 1
    rank: int = 0
    local_rank: int = 0
    local_world_size: int | None = None
    node_rank: int | None = None
    master_port: int | None = None


_COUNT = integer(min=1)
_INDEX = integer(min=0)
_PORT = integer(min=1, max=65535)


def distributed_env(environ: Mapping[str, str] | None = None) -> DistributedEnv:
    """The one reader of torchrun's environment (``torch/distributed/run.py`` sets these for every worker): every
    variable an integer, ``WORLD_SIZE >= 1`` (unset: 1), ``0 <= RANK < WORLD_SIZE`` (unset: 0), ``0 <= LOCAL_RANK <
    LOCAL_WORLD_SIZE`` (or ``< WORLD_SIZE`` when that is unset), ``1 <= LOCAL_WORLD_SIZE <= WORLD_SIZE``,
    ``GROUP_RANK`` / ``NODE_RANK >= 0`` (the node; GROUP_RANK, torchrun's, wins) and ``1 <= MASTER_PORT <= 65535``.
    Unset or empty variables take the defaults. Without this a ``WORLD_SIZE=abc`` was a traceback, ``WORLD_SIZE=0``
    passed, and a ``RANK`` beyond the world or ``MASTER_PORT=99999`` ended in C++ errors that blamed the network.

    Raises:
        BadValue: one line naming the variable and its value.
    """
    env = os.environ if environ is None else environ
    world = from_env("WORLD_SIZE", _COUNT, 1, env)
    rank = from_env("RANK", _INDEX, 0, env)
    if rank >= world:
        raise BadValue(f"RANK: must be below WORLD_SIZE={world} (ranks 0..{world - 1}), got {env.get('RANK')!r}")
    local_world = from_env("LOCAL_WORLD_SIZE", _COUNT, None, env)
    if local_world is not None and local_world > world:
        raise BadValue(f"LOCAL_WORLD_SIZE: must be at most WORLD_SIZE={world}, got {env.get('LOCAL_WORLD_SIZE')!r}")
    local_rank = from_env("LOCAL_RANK", _INDEX, 0, env)
    bound, bound_name = (local_world, "LOCAL_WORLD_SIZE") if local_world is not None else (world, "WORLD_SIZE")
    if local_rank >= bound:
        raise BadValue(f"LOCAL_RANK: must be below {bound_name}={bound}, got {env.get('LOCAL_RANK')!r}")
    node_rank = from_env("NODE_RANK", _INDEX, None, env)
    node_rank = from_env("GROUP_RANK", _INDEX, node_rank, env)
    port = from_env("MASTER_PORT", _PORT, None, env)
    return DistributedEnv(world, rank, local_rank, local_world, node_rank, port)
