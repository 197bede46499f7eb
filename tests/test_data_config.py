"""Data mixtures: VLM-R1 data_config YAML, sampling strategies, and the mixed training dataset."""

from __future__ import annotations

import json
import os
import random

import pytest

from tests.helpers.paths import REPO, SAMPLE
from vlm_r1.data import load_data_config, requested_count, sampling_indices


def test_sampling_strategies_exact():
    assert sampling_indices(5, "all", 0) == [0, 1, 2, 3, 4]
    assert sampling_indices(5, "first:2", 0) == [0, 1]
    assert sampling_indices(5, "end:2", 0) == [3, 4]
    assert sampling_indices(5, "first:9", 0) == [0, 1, 2, 3, 4]  # more than available: all (caller warns)
    assert sampling_indices(10, "random:3", 7) == sorted(random.Random(7).sample(range(10), 3))
    assert sampling_indices(10, "random:3", 7) == sampling_indices(10, "random:3", 7)  # seeded
    assert sampling_indices(10, "random:3", 7) != sampling_indices(10, "random:3", 8)
    assert len(sampling_indices(10, "random:25%", 0)) == 3  # ceil(2.5), upstream's math.ceil
    assert len(sampling_indices(7, "random:50%", 0)) == 4
    assert len(sampling_indices(10, "random:21%", 0)) == 3  # ceil(2.1): upstream rounds up, never half up
    assert len(sampling_indices(1000, "random:1%", 0)) == 10  # exact in integers (no float error)
    assert sampling_indices(4, "random:100%", 1) == [0, 1, 2, 3]
    assert sampling_indices(10, "first:15%", 0) == [0, 1] and sampling_indices(10, "end:15%", 0) == [8, 9]
    assert sampling_indices(5, "end:0", 0) == [0, 1, 2, 3, 4]  # upstream's records[-0:]: all of them
    assert sampling_indices(5, "first:0", 0) == [] and sampling_indices(5, "random:0", 0) == []
    assert sampling_indices(4, "first:150%", 0) == [0, 1, 2, 3]  # over 100%: all, as upstream's slice
    assert requested_count("first:12") == 12 and requested_count("random:5%") is None and requested_count("all") is None


@pytest.mark.parametrize(
    "bad", ["sample:3", "first:x", "first:-1", "random:12.5%", "end:-5%", "first", "all:3", "first:٣"]
)
def test_sampling_strategy_errors_name_the_entry(bad):
    with pytest.raises(ValueError, match=r"mix.yaml: datasets\[0\]"):
        sampling_indices(10, bad, 0, where="mix.yaml: datasets[0]")


def _write(tmp_path, text):
    p = tmp_path / "mix.yaml"
    p.write_text(text)
    return str(p)


def test_load_data_config_resolves_paths_relative_to_the_yaml(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "a.jsonl").write_text("{}\n")
    sources, seed = load_data_config(
        _write(
            tmp_path,
            "seed: 3\ndatasets:\n  - json_path: sub/a.jsonl\n    image_folder: imgs\n    sampling_strategy: first:2\n",
        )
    )
    assert seed == 3 and len(sources) == 1
    assert sources[0].json_path == str(tmp_path / "sub" / "a.jsonl")
    assert sources[0].image_folder == str(tmp_path / "imgs") and sources[0].sampling_strategy == "first:2"


@pytest.mark.parametrize(
    "text, error, match",
    [
        ("datasets: []\n", ValueError, "non-empty 'datasets:'"),
        ("datasets:\n  - image_folder: x\n", ValueError, r"datasets\[0\]: each entry needs a json_path"),
        ("datasets:\n  - json_path: a.jsonl\n    weight: 2\n", ValueError, r"unknown keys \['weight'\]"),
        ("datasets:\n  - json_path: missing.jsonl\n", FileNotFoundError, "missing.jsonl not found"),
        ("datasets:\n  - json_path: a.jsonl\n    sampling_strategy: some\n", ValueError, "unknown sampling_strategy"),
        ("mixture: 1\ndatasets:\n  - json_path: a.jsonl\n", ValueError, "unknown top-level keys"),
    ],
)
def test_load_data_config_errors(tmp_path, text, error, match):
    (tmp_path / "a.jsonl").write_text("{}\n")
    with pytest.raises(error, match=match):
        load_data_config(_write(tmp_path, text))


def test_shipped_configs_parse():
    sources, seed = load_data_config(os.path.join(REPO, "data_config", "demo.yaml"))
    assert seed == 0 and [s.json_path for s in sources] == [os.path.join(REPO, "data", "web_sample", "train.jsonl")]
    import yaml

    gta1 = yaml.safe_load(open(os.path.join(REPO, "data_config", "gta1_mix.yaml")))
    names = [d["name"] for d in gta1["datasets"]]
    assert {n.split("_")[0] for n in names} == {"aria", "os"} and len(names) == 6


def test_mixture_dataset_and_cli_flags(tmp_path, tiny_qwen25_dir):
    from gui_grounding.training.task import GUIGroundingTask
    from vlm_r1.grpo import build_train_dataset
    from vlm_r1.grpo_jsonl import parse_args
    from vlm_r1.modules import get_vlm_module, load_processor

    yaml_text = (
        f"seed: 5\ndatasets:\n  - json_path: {SAMPLE}/train.jsonl\n    sampling_strategy: first:4\n"
        f"  - json_path: {SAMPLE}/test.jsonl\n    sampling_strategy: random:3\n"
    )
    cfg = _write(tmp_path, yaml_text)
    script_args, training_args, _ = parse_args(
        [
            "--model_name_or_path",
            tiny_qwen25_dir,
            "--data_config",
            cfg,
            "--task_type",
            "gui_grounding",
            "--output_dir",
            str(tmp_path),
        ]
    )
    ds, mixture = build_train_dataset(
        script_args, training_args, GUIGroundingTask(), load_processor(tiny_qwen25_dir), get_vlm_module(tiny_qwen25_dir)
    )
    train_ids = [json.loads(x)["sample_id"] for x in open(os.path.join(SAMPLE, "train.jsonl"))]
    test_ids = [json.loads(x)["sample_id"] for x in open(os.path.join(SAMPLE, "test.jsonl"))]
    expected = train_ids[:4] + [test_ids[i] for i in sorted(random.Random(5 + 1).sample(range(len(test_ids)), 3))]
    assert ds.with_format(None)["sample_id"] == expected
    assert ds[0]["image"].size == tuple(ds[0]["resized_size"])  # the lazy image transform survives the mixing
    assert [(m["strategy"], m["available"], m["selected"]) for m in mixture] == [
        ("first:4", len(train_ids), 4),
        ("random:3", len(test_ids), 3),
    ]
    with pytest.raises(ValueError, match="replaces --data_file_paths"):
        parse_args(["--model_name_or_path", tiny_qwen25_dir, "--data_config", cfg, "--data_file_paths", "a.jsonl"])


def test_concatenate_record_datasets_merges_pass_through_columns(caplog):
    """Sources of a mixture with different extra keys/types: union of columns, Arrow's merging, JSON text where the
    kinds conflict (a column already JSON text in one source is not encoded twice)."""
    import logging

    from vlm_r1.data import concatenate_record_datasets, json_text_columns, rows_to_dataset

    log = logging.getLogger("t_mix")
    with caplog.at_level(logging.WARNING, logger="t_mix"):
        a = rows_to_dataset(
            [{"id": "a0"}, {"id": "a1"}], [{"meta": {"k": 1}, "n": 1}, {"meta": "s", "n": 2}], what="a", logger=log
        )
        b = rows_to_dataset([{"id": "b0"}], [{"meta": 7, "n": 2.5, "o": {"z": 1}, "p": []}], what="b", logger=log)
        c = rows_to_dataset([{"id": "c0"}], [{"o": "str", "p": ["x"]}], what="c", logger=log)
        mixed = concatenate_record_datasets([a.select([1, 0]).with_transform(lambda x: x), b, c], logger=log)
    rows = mixed.to_list()
    assert [r["id"] for r in rows] == ["a1", "a0", "b0", "c0"]
    assert [r["meta"] for r in rows] == ['"s"', '{"k": 1}', "7", None]  # a: JSON text already; b's 7 encoded once
    assert [r["n"] for r in rows] == [2.0, 1.0, 2.5, None]  # int + float merge to float, as within one file
    assert [r["o"] for r in rows] == [None, None, '{"z": 1}', '"str"']  # object vs string across sources
    assert [r["p"] for r in rows] == [None, None, [], ["x"]]  # an empty list merges with a list of strings
    assert sorted(json_text_columns(mixed)) == ["meta", "o"]
    assert "data mixture: column 'o' has types ['string', 'struct<z: int64>'] across sources" in caplog.text
