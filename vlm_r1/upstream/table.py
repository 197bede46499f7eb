"""Every flag of upstream VLM-R1's ``grpo_jsonl.py`` with its declared default, the value upstream effectively ran
with, and ours. ``python -m vlm_r1.upstream_defaults`` prints the table (docs/UPSTREAM.md "Defaults" is its output);
the table's library.

The data (``upstream_defaults.json``, next to this file) was read from upstream VLM-R1 at 90052f4 and the versions it
pins (transformers 4.49.0 ``training_args.py``, trl 0.17.0 ``ScriptArguments`` / ``ModelConfig``, VLM-R1's own
``trainer/grpo_config.py`` and ``grpo_jsonl.py``). Per flag: ``declared`` (the dataclass default upstream),
``effective`` (what upstream's code really did with it), ``ours`` (our default, pinned; :func:`our_defaults` computes
it live), ``status``:

* ``same``: ours = upstream's effective value;
* ``equivalent``: a different spelling of the same behaviour (e.g. None for ``''``);
* ``differs``: a documented difference (``report_to``; vLLM memory; upstream's crash without ``--image_folders``);
* ``mapped`` / ``no_effect``: a transformers 4.x flag 5.x removed, mapped to its successor or accepted with a notice
  (:data:`vlm_r1.upstream.flags.LEGACY_TRAINING_FLAGS`); upstream flags with no meaning here are accepted with a notice.

Rows of group ``trl`` are TRL 1.16 flags upstream did not have: their value encodes what upstream hard-coded
(``loss_type grpo``, ``use_bias_correction_kl false``, ...).
"""

from __future__ import annotations

import enum
import json
import os
from typing import Any

from groundwork.records import load_json_file
from vlm_r1.grpo import command_line
from vlm_r1.upstream import UPSTREAM
from vlm_r1.upstream.flags import _IGNORED, _RENAMED, LEGACY_TRAINING_FLAGS

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "upstream_defaults.json")


def load_rows() -> list[dict]:
    """The rows of ``upstream_defaults.json`` (flag, group, declared, effective, ours, status, note, source)."""
    return load_json_file(DATA, "upstream defaults table")


def _plain(value: Any) -> Any:
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def our_defaults() -> dict[str, Any]:
    """Flag -> the default ``python -m vlm_r1.grpo_jsonl`` gives it (its one parse of an empty command line in the
    upstream dialect, before any device adjustment); ``"<mapped: successor>"`` / ``"<no effect>"`` for flags accepted
    with a notice."""
    namespace = vars(command_line([], dialect=UPSTREAM).namespace)
    out: dict[str, Any] = {}
    for row in load_rows():
        flag = row["flag"]
        if flag in LEGACY_TRAINING_FLAGS:
            successor = LEGACY_TRAINING_FLAGS[flag][1]
            out[flag] = f"<mapped: {successor}>" if successor else "<no effect>"
        elif flag in _IGNORED:
            out[flag] = "<no effect>"
        elif flag in _RENAMED:
            out[flag] = _plain(namespace[_RENAMED[flag]])
        elif flag == "gradient_checkpointing_use_reentrant":
            out[flag] = namespace["gradient_checkpointing_kwargs"]
        else:
            out[flag] = _plain(namespace.get(flag, "<missing>"))
    return out


def markdown_table() -> str:
    """The table docs/UPSTREAM.md shows: flag | upstream declared | upstream effective | ours | note."""

    def cell(value: Any) -> str:
        text = "`" + json.dumps(value) + "`" if not (isinstance(value, str) and value.startswith("<")) else value
        return text.replace("|", "\\|")

    ours = our_defaults()
    lines = [
        "| flag | group | upstream declared | upstream effective | ours | status | note |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in load_rows():
        declared = "—" if row["group"] == "trl" else cell(row["declared"])
        lines.append(
            f"| `--{row['flag']}` | {row['group']} | {declared} | {cell(row['effective'])} | "
            f"{cell(ours[row['flag']])} | {row['status']} | {row['note'].replace('|', '/')} |"
        )
    return "\n".join(lines)
