"""Rollout debug log: upstream VLM-R1's ``DEBUG_MODE=true`` / ``LOG_PATH=...txt`` text file, written by the trainer.

Every upstream run script exports ``DEBUG_MODE="true"`` and ``LOG_PATH="./debug_log_$RUN_NAME.txt"``
(``src/open-r1-multimodal/run_scripts/run_grpo_rec.sh:3,7`` and the other ``run_grpo_*.sh``); upstream's reward
functions then append the rollouts they scored to that file. Here the same text is written once, after scoring, by
:meth:`vlm_r1.trainer.VLMGRPOTrainer._calculate_rewards` through the upstream dialect's ``rollout_log`` hook
(:class:`RolloutLogWriter`; so any reward, built in or plugged in, is logged), in
upstream's layout:

* every reward except ``format``: one block per rollout, appended to ``LOG_PATH`` (upstream ``accuracy_reward``,
  ``src/open-r1-multimodal/src/open_r1/grpo_jsonl.py:864-876``; Qwen ``iou_reward``,
  ``src/open-r1-multimodal/src/open_r1/vlm_modules/qwen_module.py:164-175``; GTA1's accuracy reward,
  ``src/grpo_grounding.py:181-187``)::

      ------------- 23-14-05-09-123456 Accuracy reward: 1.0 -------------
      id: 17
      accu_reward_method: default
      image_path: ['/data/img.png']
      problem: What colour is the button?
      Content: <think>...</think> <answer>red</answer>
      Solution: <answer> red </answer>

  The time is ``datetime.now()`` as ``%d-%H-%M-%S-%f`` (day-hour-minute-second-microsecond). The label is
  ``Accuracy`` for the function ``--reward_funcs accuracy`` resolves to (``accuracy_reward``, or ``iou_reward`` with
  ``--task_type rec``), else the reward's name as TRL logs it (``rewards/<name>/mean``, the function's ``__name__``).
  The lines between header and ``Content`` are the row's columns that exist, in this order: ``id``,
  ``accu_reward_method``, ``image_path``, ``problem``; ``Solution`` is the first of ``solution`` and ``target``, and is
  left out when the row has none of them. A task adds its own column names per line (``Task.debug_columns``, e.g.
  ``{"problem": ("instruction",)}``), tried after the core's;
* the ``format`` reward (``format_reward``, or ``format_reward_rec`` with ``--task_type rec``): one block per scoring
  call, appended to ``LOG_PATH`` with ``.txt`` replaced by ``_format.txt`` (upstream ``format_reward``,
  ``grpo_jsonl.py:889-896``; ``format_reward_rec``, ``qwen_module.py:97-104``)::

      ------------- 23-14-05-09-123456 Format reward -------------
      Content: <think>...</think> <answer>red</answer>
      Has format: True
      Content: red
      Has format: False

Differences from upstream, on purpose:

* only rank 0 writes, and it writes its own (local) rollouts with their own rewards; upstream every rank appended to
  the same file, interleaving lines. Each scoring's text is appended as one block of whole lines while an exclusive
  lock on the file is held (:meth:`groundwork.outputs.LineAppender.write_block`), so any writers sharing a ``LOG_PATH``
  (two runs with one ``RUN_NAME``, a restarted job) never interleave inside a block; a file ending in a torn line
  gets a newline first; text UTF-8 cannot encode (a lone surrogate in a completion) is written backslash-escaped
  instead of stopping the run;
* ``id``/``image_path``/``problem`` are the rollout's own; upstream ``accuracy_reward`` wrote the batch's FIRST
  ``image_path`` and ``problem`` on every block (``kwargs.get("problem")[0]``, ``grpo_jsonl.py:867-868``);
* the reward value is the float32 value TRL stored, printed shortest (``0.33333334``; upstream printed the Python
  float its function returned, ``0.3333333333333333``; 0/1 rewards read the same); ``Has format`` is ``value > 0``;
* ``Solution`` is the column as stored (REC: ``<answer> [x1, y1, x2, y2] </answer>``; upstream ``iou_reward`` printed
  the parsed box list);
* upstream's accuracy block had no ``id`` line and printed every accuracy variant with ``Accuracy`` (repetition and
  cosine rewards into ``LOG_PATH + "_repetition.txt"`` / ``"_cosine.txt"``, ``grpo_jsonl.py:695-706, 730-741``);
  here other rewards go to ``LOG_PATH`` under their own label;
* ``LOG_PATH`` unset: the same text goes to the Python log (INFO, logger ``vlm_r1.debug_log``) instead of crashing
  (upstream: ``open(None)`` / ``None.replace`` raised); the log file's folder is created; an ``OSError`` writing the
  file logs one warning and training goes on (upstream crashed the run).

``DEBUG_MODE`` must be exactly ``true`` (upstream's ``os.getenv("DEBUG_MODE") == "true"``); it is read at every
scoring, as upstream did. Every scoring is logged: training batches, each ``--dynamic_sampling`` try, and evaluation
(upstream's reward functions wrote whenever they ran).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from groundwork.outputs import LineAppender
from vlm_r1.answers import completion_transcript
from vlm_r1.upstream.rewards import UPSTREAM_REWARDS

logger = logging.getLogger(__name__)

DEBUG_ENV = "DEBUG_MODE"
LOG_PATH_ENV = "LOG_PATH"
TIME_FORMAT = "%d-%H-%M-%S-%f"  # upstream: datetime.now().strftime("%d-%H-%M-%S-%f")
RULE = "-------------"

# (line label, candidate columns in order of preference): the lines between a block's header and its Content line.
INFO_COLUMNS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("id", ("id",)),
    ("accu_reward_method", ("accu_reward_method",)),
    ("image_path", ("image_path",)),
    ("problem", ("problem",)),
)
SOLUTION_COLUMNS = ("solution", "target")

ACCURACY = "accuracy"
FORMAT = "format"


def debug_enabled(environ: Any = None) -> bool:
    """True when ``DEBUG_MODE`` is exactly ``true`` (upstream's test)."""
    return (os.environ if environ is None else environ).get(DEBUG_ENV) == "true"


def format_log_path(log_path: str) -> str:
    """Upstream's format-log path: ``log_path.replace(".txt", "_format.txt")`` (every ``.txt``, as upstream; a path
    without ``.txt`` is unchanged, so the format blocks then share the main file)."""
    return log_path.replace(".txt", "_format.txt")


def reward_role(func: Any) -> str | None:
    """``"accuracy"`` / ``"format"`` when ``func`` (or the function it wraps) is what ``--reward_funcs accuracy`` /
    ``format`` resolves to (generic, or the REC task's alias targets ``rec_iou`` / ``rec_format``), else None."""
    import functools
    import inspect

    while True:  # see through wrappers (functools.wraps: the step-timing callback's; functools.partial)
        if isinstance(func, functools.partial):
            func = func.func
        elif hasattr(func, "__wrapped__"):
            func = inspect.unwrap(func)
        else:
            break
    if func is UPSTREAM_REWARDS["accuracy"] or func is UPSTREAM_REWARDS["rec_iou"]:
        return ACCURACY
    if func is UPSTREAM_REWARDS["format"] or func is UPSTREAM_REWARDS["rec_format"]:
        return FORMAT
    return None


def format_value(value: float) -> str:
    """A reward as text: shortest form of the float32 value (``1.0``, ``0.0``, ``0.33333334``, ``nan``)."""
    import numpy as np

    return str(np.float32(value))


def _column(row: dict, names: Sequence[str]) -> tuple[bool, Any]:
    for name in names:
        if name in row:
            return True, row[name]
    return False, None


def reward_block(
    label: str, value: float, row: dict, content: str, now: datetime, columns: dict[str, Sequence[str]] | None = None
) -> str:
    """One rollout's block for a non-format reward (module docstring layout), ending with a newline. ``columns``: the
    task's extra column names per line label (``id``, ``accu_reward_method``, ``image_path``, ``problem``,
    ``solution``; ``Task.debug_columns``), tried after the core's."""
    extra = columns or {}
    lines = [f"{RULE} {now.strftime(TIME_FORMAT)} {label} reward: {format_value(value)} {RULE}"]
    for line_label, names in INFO_COLUMNS:
        found, value_ = _column(row, (*names, *extra.get(line_label, ())))
        if found:
            lines.append(f"{line_label}: {value_}")
    lines.append(f"Content: {content}")
    found, solution = _column(row, (SOLUTION_COLUMNS[0], *extra.get("solution", ()), *SOLUTION_COLUMNS[1:]))
    if found:
        lines.append(f"Solution: {solution}")
    return "\n".join(lines) + "\n"


def format_block(contents: Sequence[str], values: Sequence[float], now: datetime) -> str:
    """The block of one scoring call of the ``format`` reward (module docstring layout), ending with a newline."""
    lines = [f"{RULE} {now.strftime(TIME_FORMAT)} Format reward {RULE}"]
    for content, value in zip(contents, values, strict=True):
        lines.append(f"Content: {content}")
        lines.append(f"Has format: {bool(value > 0)}")
    return "\n".join(lines) + "\n"


def render_rollouts(
    rows: Sequence[dict],
    contents: Sequence[str],
    rewards: Sequence[Sequence[float]],
    names: Sequence[str],
    roles: Sequence[str | None],
    now: Callable[[], datetime] = datetime.now,
    columns: dict[str, Sequence[str]] | None = None,
) -> tuple[str, str]:
    """The text of one scoring: ``(main_text, format_text)``.

    Args:
        rows: the rollouts' dataset rows (TRL ``inputs``), one per rollout.
        contents: the completion texts, one per rollout.
        rewards: ``rewards[i][j]``: reward ``j`` of rollout ``i``.
        names: the reward functions' names (TRL's ``reward_func_names``).
        roles: per reward, :func:`reward_role` (``"accuracy"``, ``"format"`` or None).
        now: the clock (a fixed one in tests); called once per block, as upstream.
        columns: the task's extra column names per line (``Task.debug_columns``; :func:`reward_block`).

    Rewards are taken in order; each non-format reward adds one block per rollout to ``main_text``, each format
    reward one block to ``format_text``.
    """
    if not (len(rows) == len(contents) == len(rewards)):
        raise ValueError(f"{len(rows)} rows, {len(contents)} completions, {len(rewards)} reward rows")
    main, fmt = [], []
    for j, (name, role) in enumerate(zip(names, roles, strict=True)):
        values = [float(r[j]) for r in rewards]
        if role == FORMAT:
            fmt.append(format_block(contents, values, now()))
            continue
        label = "Accuracy" if role == ACCURACY else name
        for row, content, value in zip(rows, contents, values, strict=True):
            main.append(reward_block(label, value, row, content, now(), columns))
    return "".join(main), "".join(fmt)


class RolloutDebugLog:
    """Writes rendered rollouts to ``LOG_PATH`` (and its ``_format.txt`` sibling), or to the Python log without one.

    Never raises on I/O: the first ``OSError`` is logged as one warning (later ones at DEBUG) and training goes on.
    """

    def __init__(self) -> None:
        self._warned_io = False
        self._warned_no_path = False

    def write(self, main_text: str, format_text: str, log_path: str | None = None) -> None:
        """Append the texts (``log_path`` default: ``$LOG_PATH``); empty texts write nothing."""
        log_path = os.environ.get(LOG_PATH_ENV) if log_path is None else log_path
        if not log_path:
            if not self._warned_no_path:
                self._warned_no_path = True
                logger.warning(
                    "%s=true but %s is not set: the rollout debug log goes to this log (INFO) instead of a file",
                    DEBUG_ENV,
                    LOG_PATH_ENV,
                )
            for text in (main_text, format_text):
                if text:
                    logger.info("rollouts:\n%s", text.rstrip("\n"))
            return
        for path, text in ((log_path, main_text), (format_log_path(log_path), format_text)):
            if text:
                self._append(path, text)

    def _append(self, path: str, text: str) -> None:
        try:
            folder = os.path.dirname(path)
            if folder:
                os.makedirs(folder, exist_ok=True)
            with LineAppender(path, errors="backslashreplace") as log:
                log.write_block(text)
        except OSError as err:
            if self._warned_io:
                logger.debug("rollout debug log: cannot write %s: %s", path, err)
                return
            self._warned_io = True
            logger.warning(
                "DEBUG_MODE rollout log: cannot write %s (%s); training goes on, further write errors are not reported",
                path,
                err,
            )


class RolloutLogWriter:
    """The upstream dialect's ``rollout_log`` writer (:class:`vlm_r1.dialect.Dialect`): renders the rollouts rank 0
    scored (:func:`render_rollouts`) and appends them (:class:`RolloutDebugLog`) while ``DEBUG_MODE=true``.

    ``columns``: the task's extra column names per line (``Task.debug_columns``). Never raises: a failure is logged
    once as a warning and training goes on.
    """

    def __init__(self, columns: dict[str, Sequence[str]] | None = None) -> None:
        self.columns = dict(columns or {})
        self._log, self._failed = RolloutDebugLog(), False

    def active(self) -> bool:
        """``DEBUG_MODE`` is ``true`` now (read at every scoring, as upstream)."""
        return debug_enabled()

    def __call__(
        self,
        rows: Sequence[dict],
        completions: Sequence[Any],
        rewards: Sequence[Sequence[float]],
        names: Sequence[str],
        funcs: Sequence[Any],
    ) -> None:
        """Log one scoring: ``rows`` (TRL ``inputs``), ``completions`` (one per row), ``rewards[i][j]`` (reward ``j``
        of rollout ``i``), the reward functions' ``names`` and the functions themselves (their roles:
        :func:`reward_role`)."""
        try:
            main_text, format_text = render_rollouts(
                rows,
                [completion_transcript(c) for c in completions],
                rewards,
                names,
                [reward_role(f) for f in funcs],
                columns=self.columns,
            )
            self._log.write(main_text, format_text)
        except Exception as err:  # the debug log must never stop training
            if not self._failed:
                self._failed = True
                logger.warning("DEBUG_MODE rollout log failed (%s: %s); training goes on", type(err).__name__, err)
