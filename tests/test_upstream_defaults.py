"""Every upstream VLM-R1 flag keeps upstream's effective default (vlm_r1/upstream/upstream_defaults.json, read from upstream
at 90052f4 and the transformers 4.49 / trl 0.17 it pins); docs/UPSTREAM.md shows exactly that table; transformers 4.x
flags removed in 5.x are accepted (mapped or announced)."""

from __future__ import annotations

import dataclasses
import logging
import os

import pytest

from tests.helpers.paths import REPO
from tests.helpers.train import flags
from vlm_r1.grpo_jsonl import parse_args
from vlm_r1.upstream.flags import LEGACY_TRAINING_FLAGS
from vlm_r1.upstream.table import load_rows, markdown_table, our_defaults

ROWS = load_rows()


@pytest.fixture(scope="module")
def ours():
    return our_defaults()


@pytest.mark.parametrize("row", ROWS, ids=[r["flag"] for r in ROWS])
def test_default_is_pinned_and_upstreams(row, ours):
    assert ours[row["flag"]] == row["ours"], f"--{row['flag']}: default changed; update upstream_defaults.json"
    if row["status"] == "same":
        assert row["ours"] == row["effective"], f"--{row['flag']}: not upstream's effective default"
    assert row["status"] in ("same", "equivalent", "differs", "mapped", "no_effect")
    assert row["status"] == "same" or row["note"], f"--{row['flag']}: a non-identical default needs its reason"


def test_table_covers_every_upstream_flag():
    flags = {r["flag"] for r in ROWS}
    # the key upstream flags the issue names, and a few TrainingArguments ones
    for flag in (
        "beta",
        "loss_type",
        "max_completion_length",
        "temperature",
        "top_k",
        "top_p",
        "num_generations",
        "learning_rate",
        "max_pixels",
        "min_pixels",
        "reward_funcs",
        "warmup_ratio",
        "bf16",
        "report_to",
        "logging_steps",
        "gradient_checkpointing",
        "torch_dtype",
        "lora_target_modules",
    ):
        assert flag in flags, flag
    # transformers 4.49 TrainingArguments has 131 flags; learning_rate and remove_unused_columns are listed under
    # upstream's GRPOConfig, which re-declares them
    assert len([r for r in ROWS if r["group"] == "training"]) == 131 - 2
    differs = sorted(r["flag"] for r in ROWS if r["status"] == "differs")
    assert differs == ["image_folders", "lora_target_modules", "report_to", "vllm_gpu_memory_utilization"]


def test_every_removed_training_flag_is_accepted():
    from transformers import TrainingArguments

    now = {f.name for f in dataclasses.fields(TrainingArguments)}
    removed = {r["flag"] for r in ROWS if r["group"] == "training"} - now
    assert removed == set(LEGACY_TRAINING_FLAGS)


def test_docs_show_the_table():
    with open(os.path.join(REPO, "docs", "UPSTREAM.md"), encoding="utf-8") as f:
        docs = f.read()
    assert markdown_table() in docs, "docs/UPSTREAM.md is stale: paste `python -m vlm_r1.upstream_defaults`"


def test_legacy_training_flags_map_to_their_successors(tmp_path, caplog, monkeypatch):
    monkeypatch.delenv("TENSORBOARD_LOGGING_DIR", raising=False)
    argv = [
        *flags(model_name_or_path="m", data_file_paths="a.jsonl", output_dir=tmp_path),
        "--warmup_ratio",
        "0.1",
        "--evaluation_strategy",
        "steps",
        "--eval_steps",
        "5",
        "--no_cuda",
        "--overwrite_output_dir",
        "--save_safetensors",
        "true",
        "--per_gpu_train_batch_size",
        "16",
        "--logging_dir",
        str(tmp_path / "tb"),
        "--adafactor",
        "--include_inputs_for_metrics",
        "--dispatch_batches",
        "false",
        "--group_by_length",
    ]
    with caplog.at_level(logging.WARNING, logger="vlm_r1"):
        _, training, _ = parse_args(argv)
    assert training.warmup_steps == 0.1
    assert training.eval_strategy.value == "steps"
    assert training.use_cpu is True
    assert training.per_device_train_batch_size == 16
    assert training.optim.value == "adafactor"
    assert training.include_for_metrics == ["inputs"]
    assert training.accelerator_config.dispatch_batches is False
    assert os.environ["TENSORBOARD_LOGGING_DIR"] == str(tmp_path / "tb")
    text = "\n".join(caplog.messages)
    assert "--warmup_ratio=0.1 (transformers 4.x) mapped to --warmup_steps=0.1" in text
    assert "--overwrite_output_dir=True is a transformers 4.x flag with NO effect here" in text
    assert "--group_by_length=True is a transformers 4.x flag with NO effect here: GRPO orders batches" in text


def test_explicit_successor_beats_the_legacy_flag(tmp_path, caplog):
    argv = [*flags(model_name_or_path="m", data_file_paths="a.jsonl", output_dir=tmp_path), "--warmup_ratio", "0.1"]
    argv += ["--warmup_steps", "7"]
    with caplog.at_level(logging.WARNING, logger="vlm_r1"):
        _, training, _ = parse_args(argv)
    assert training.warmup_steps == 7
    assert "--warmup_ratio=0.1 (transformers 4.x) ignored: --warmup_steps is given explicitly" in caplog.messages[0]
