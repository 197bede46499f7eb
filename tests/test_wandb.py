"""``--report_to wandb`` offline (``WANDB_MODE=offline``): a 1-step tiny run writes a W&B offline run whose history
holds the step's metrics, the same values as ``trainer_state.json``.

wandb 0.31 writes an offline run as ``$WANDB_DIR/wandb/offline-run-<time>-<id>/run-<id>.wandb`` (no
``files/wandb-summary.json`` until synced): a LevelDB-style record log (file header ``:W&B`` + 2-byte magic + 1-byte
version, then 32 KiB blocks of records ``crc32 (4) | length (2, LE) | type (1) | data``, type 1 = full, 2/3/4 =
first/middle/last fragment) whose payloads are ``wandb.proto.wandb_internal_pb2.Record`` messages. The test reads it
with that layout and wandb's own protobuf classes.
"""

from __future__ import annotations

import glob
import json
import os
import struct
import sys

import pytest

from tests.helpers.proc import child_env, run
from tests.helpers.train import colour_question_argv, step_logs

BLOCK = 32768
HEADER = 7  # ":W&B" + magic (2) + version (1); each record header is 7 bytes too


def read_wandb_records(path: str) -> list:
    """The ``Record`` protobufs of an offline ``.wandb`` file, in order."""
    from wandb.proto import wandb_internal_pb2

    with open(path, "rb") as f:
        raw = f.read()
    assert raw[:4] == b":W&B", raw[:8]
    pos, pending, records = HEADER, b"", []
    while pos + HEADER <= len(raw):
        left = BLOCK - pos % BLOCK
        if left < HEADER:  # block trailer padding
            pos += left
            continue
        _crc, length, kind = struct.unpack("<IHB", raw[pos : pos + HEADER])
        pos += HEADER
        if kind == 0 and length == 0:  # zero padding
            continue
        pending += raw[pos : pos + length]
        pos += length
        if kind in (1, 4):  # full record, or last fragment
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pending)
            records.append(record)
            pending = b""
    return records


def _items(items) -> dict:
    return {(it.key or "/".join(it.nested_key)): json.loads(it.value_json) for it in items}


@pytest.mark.slow  # a full GRPO run with wandb offline (~12 s; issue 19 time budget)
def test_report_to_wandb_offline(tmp_path, make_image, tiny_qwen25_dir):
    out = tmp_path / "run"
    argv = colour_question_argv(tiny_qwen25_dir, tmp_path, make_image, out, 1, reward_funcs=None, report_to="wandb")
    cmd = [sys.executable, "-m", "vlm_r1.grpo_jsonl", *argv]
    home = tmp_path / "home"
    env = child_env(
        threads=1,
        WANDB_MODE="offline",
        WANDB_DIR=tmp_path,
        WANDB_PROJECT="test",
        HOME=home,
        XDG_CACHE_HOME=home / ".cache",
        XDG_CONFIG_HOME=home / ".config",
        WANDB_CACHE_DIR=home / "wandb_cache",
        WANDB_CONFIG_DIR=home / "wandb_config",
        WANDB_DATA_DIR=home / "wandb_data",
        WANDB_API_KEY=None,
    )
    run(cmd, env=env)

    runs = glob.glob(str(tmp_path / "wandb" / "offline-run-*"))
    assert len(runs) == 1, os.listdir(tmp_path)
    files = glob.glob(os.path.join(runs[0], "run-*.wandb"))
    assert len(files) == 1, os.listdir(runs[0])
    records = read_wandb_records(files[0])
    by_kind: dict[str, list] = {}
    for r in records:
        by_kind.setdefault(r.WhichOneof("record_type"), []).append(r)
    assert by_kind["run"][0].run.project == "test"
    assert by_kind["exit"][0].exit.exit_code == 0  # the run was finished cleanly

    step = step_logs(out)
    assert len(step) == 1
    history = [_items(r.history.item) for r in by_kind["history"]]
    logged = [h for h in history if "train/reward" in h]
    assert len(logged) == 1 and logged[0]["train/global_step"] == 1
    # TRL's metrics and ours (StepStatsCallback), as HF's WandbCallback names them ("train/" + key)
    for key in (
        "reward",
        "loss",
        "rewards/accuracy_reward/mean",
        "rewards/format_reward/mean",
        "completions/mean_length",
        "timing/step_s",
        "throughput/tokens_per_s",
    ):
        assert logged[0][f"train/{key}"] == step[0][key], key
