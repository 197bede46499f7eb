"""Training to refuse (issue 32; docs/TRAINING.md "Training to refuse", docs/REWARDS.md ``click_refusal``): what counts
as abstaining, the refusal-aware score, and the refusal metrics logged during training. The reward itself,
``click_refusal`` (``gui_grounding.training.rewards.click_refusal_reward``), combines these with the click score.

Rows of refusal training (``--refusal_training true``, ``gui_grounding.training.task.sample_to_row``) carry
``no_target`` (the sample has no valid target), ``refusal_answer`` (the SFT target of such a sample) and
``refusal_penalty``. A completion abstains when the row's family reads it as its refusal answer
(``Adapter.is_trained_refusal``: UI-Venus-1.5's ``[-1,-1]``, GUI-Owl-1.5's terminate/failure call, elsewhere ours,
the point (-1,-1) of the answer frame in the family's answer syntax).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

from gui_grounding.models.adapters import PROMPT_MODE_ADAPTERS, get_adapter
from gui_grounding.models.prompts import check_mode

MAX_PENALTY = 1e6  # the largest --refusal_penalty (gui_grounding.training.task.GUIGroundingOptions)


@functools.lru_cache(maxsize=64)
def _adapter(name: str):
    return get_adapter(name)


def abstains(text: str, mode: str = "non_thinking", adapter: str | None = None) -> bool:
    """Whether a completion is the family's refusal answer as refusal training reads it (``Adapter.is_trained_refusal``
    of ``adapter``, else of the gta1 adapter of ``mode``). Never raises on the text.

    Raises:
        ValueError: unknown mode or adapter name (a configuration error).
    """
    name = adapter if adapter is not None else PROMPT_MODE_ADAPTERS[check_mode(mode)]
    return _adapter(name).is_trained_refusal(text)


def refusal_score(abstained: bool, no_target, click: float, penalty) -> float:
    """The refusal-aware reward of one completion (ours):

    * a sample with no valid target (``no_target is True``): 1.0 when it abstained, else 0.0;
    * a sample with a target: ``-penalty`` when it abstained (``--refusal_penalty``, default 0), else ``click`` (the
      click score: 1.0 inside a target box, 0.0 otherwise).

    Only ``True`` marks a no-target row; any other value is a row with a target. A ``penalty`` that is not a number
    in [0, :data:`MAX_PENALTY`] counts as 0 (the task checks the flag itself).

    Returns:
        1.0, 0.0, ``-penalty`` or ``click``.
    """
    if abstained:
        if no_target is True:
            return 1.0
        ok = isinstance(penalty, (int, float)) and not isinstance(penalty, bool) and 0 <= penalty <= MAX_PENALTY
        return -float(penalty) if ok else 0.0
    return 0.0 if no_target is True else click


def refusal_metrics(abstained: Sequence[bool], no_target: Sequence) -> dict:
    """The refusal metrics of one batch of answers (``click_refusal`` logs them through TRL's ``log_metric``, averaged
    over the logging step's batches; ``gui_grounding.training.train_eval`` logs the same of the greedy held-out answers
    as ``eval_click/refusal_...``):

    * ``refusal/share``: abstentions / answers;
    * ``refusal/precision``: abstentions on no-target samples / abstentions (absent when nothing abstained);
    * ``refusal/recall``: abstentions on no-target samples / no-target samples (absent when there is none).

    A ``no_target`` entry counts only when it is ``True``.

    Raises:
        ValueError: the two lists differ in length.
    """
    n = len(abstained)
    pairs = list(zip(abstained, no_target, strict=True))
    refused = sum(1 for a, _ in pairs if a)
    hits = sum(1 for a, t in pairs if a and t is True)
    empty = sum(1 for _, t in pairs if t is True)
    out = {"refusal/share": refused / n} if n else {}
    if refused:
        out["refusal/precision"] = hits / refused
    if empty:
        out["refusal/recall"] = hits / empty
    return out


def refusal_rewards(texts: list, clicks: list, modes: list, adapters: list, columns: dict) -> list:
    """:func:`refusal_score` per completion (``texts``; ``clicks``: their click scores) with the rows' ``no_target``
    and ``refusal_penalty`` columns from ``columns`` (absent: every row has a target, penalty 0); logs
    :func:`refusal_metrics` of the batch through ``columns["log_metric"]`` when it is callable (TRL's keyword).

    Raises:
        ValueError: columns of different lengths, unknown mode or adapter name.
    """
    n = len(texts)
    flags = columns.get("no_target") or [False] * n
    penalties = columns.get("refusal_penalty") or [0.0] * n
    rows = list(zip(texts, clicks, flags, modes, adapters, penalties, strict=True))
    refused = [abstains(text, mode, adapter) for text, _, _, mode, adapter, _ in rows]
    out = [refusal_score(a, flag, click, pen) for a, (_, click, flag, _, _, pen) in zip(refused, rows, strict=True)]
    log = columns.get("log_metric")
    if callable(log):
        for name, value in refusal_metrics(refused, flags).items():
            log(name, value)
    return out
