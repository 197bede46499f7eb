"""Difficulty-aware data (issue 32 item 3): `gui-grounding difficulty` (pass@k and mean click reward as columns),
the data_config difficulty range and bins, and `--sample_weight_column` (per-sample loss weights, exact against a
hand-computed GRPO loss)."""

from __future__ import annotations

import json
import logging
import math
from collections import defaultdict
from types import SimpleNamespace

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

from gui_grounding.data.schema import load_samples
from gui_grounding.ops.difficulty import annotate, pass_at_k, run_difficulty
from vlm_r1.data import (
    BIN_SEED_STRIDE,
    SAMPLE_WEIGHT_KEY,
    keep_weighted_rows,
    load_data_config,
    row_weights,
    sample_weight,
    sampling_indices,
    source_indices,
)
from vlm_r1.trainer import VLMGRPOTrainer

log = logging.getLogger("test_difficulty")

# ---- pass@k ---------------------------------------------------------------------------------------------------------


def test_pass_at_k_exact_values():
    assert pass_at_k(8, 0, 1) == 0.0 and pass_at_k(8, 8, 1) == 1.0
    assert pass_at_k(8, 2, 1) == pytest.approx(0.25, abs=1e-15)
    assert pass_at_k(8, 2, 4) == pytest.approx(1 - 15 / 70, abs=1e-15)  # 1 - C(6,4)/C(8,4)
    assert pass_at_k(4, 1, 4) == 1.0 and pass_at_k(4, 0, 4) == 0.0  # n == k: any correct answer
    assert pass_at_k(5, 3, 3) == 1.0  # n - c < k: every k-subset holds a correct one
    for bad in ((4, 5, 1), (4, 1, 0), (4, 1, 5), (4.0, 1, 1), (4, -1, 1), (4, True, 1)):
        with pytest.raises(ValueError, match="pass@k needs"):
            pass_at_k(*bad)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 40).flatmap(lambda n: st.tuples(st.just(n), st.integers(0, n), st.integers(1, n))))
def test_pass_at_k_is_chens_estimator(nck):
    n, c, k = nck
    assert pass_at_k(n, c, k) == pytest.approx(1 - math.comb(n - c, k) / math.comb(n, k), abs=1e-12)


# ---- the command's output: columns, formats, rejects ------------------------------------------------------------


def _image(folder, name, size=(100, 80)):
    Image.new("RGB", size, "white").save(folder / name)
    return name


def _canonical(tmp_path):
    _image(tmp_path, "a.png")
    box = {"x_min": 10, "y_min": 10, "x_max": 30, "y_max": 30}
    lines = [
        json.dumps({"sample_id": "s0", "instruction": "ok", "image_path": "a.png", "target_bbox": box, "tag": 1}),
        json.dumps({"sample_id": "s1", "instruction": "err", "image_path": "a.png", "target_bbox": box}),
        json.dumps({"sample_id": "s2", "instruction": "gone", "image_path": "missing.png", "target_bbox": box}),
        '{"sample_id": "s3", "instruction": oops}',
        json.dumps({"sample_id": "s4", "instruction": "few", "image_path": "a.png", "target_bbox": box}),
        json.dumps({"instruction": "stale", "image_path": "a.png", "target_bbox": box, "pass_at_k": 0.9}),
        json.dumps({"sample_id": "s6", "instruction": "\ud800é", "image_path": "a.png", "target_bbox": box}),
    ]
    data = tmp_path / "train.jsonl"
    data.write_text("\n".join(lines) + "\n")
    return data


def _predictions(path, lines):
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))


def test_annotate_writes_exact_columns_and_keeps_every_record(tmp_path):
    data = _canonical(tmp_path)
    samples, report = load_samples([str(data)])
    preds = tmp_path / "out.jsonl.predictions.jsonl"
    _predictions(
        preds,
        [
            # s0: 4 answers, hits at the edge (30, 30) and inside; a miss, a null and a hostile NaN-like value
            {"sample_id": "s0", "point": [20, 20], "samples": [[30, 30], [20, 15], [31, 20], None]},
            {"sample_id": "s1", "point": None, "error": "HTTP 500", "samples": []},
            {"sample_id": "s4", "point": [1, 1], "samples": [[20, 20]]},
            {"sample_id": "train:5", "point": [1, 1], "samples": [[1, 1], ["x", 2], [20, 20], [10, 10]]},
        ],
    )
    out = tmp_path / "out.jsonl"
    summary = annotate(str(data), samples, report, str(preds), str(out), 2)
    recs = [json.loads(x) for x in out.read_text().splitlines()]
    assert [r.get("sample_id") for r in recs] == ["s0", "s1", "s2", "s4", None, "s6"]  # s3 does not parse: rejects file
    assert recs[0]["tag"] == 1 and recs[0]["difficulty_hits"] == 2 and recs[0]["difficulty_n"] == 4
    assert (
        recs[0]["pass_at_k"] == pytest.approx(1 - math.comb(2, 2) / math.comb(4, 2)) and recs[0]["mean_reward"] == 0.5
    )
    assert recs[1]["difficulty_reject"] == "prediction_error" and recs[1]["pass_at_k"] is None
    assert recs[2]["difficulty_reject"] == "missing_image" and recs[2]["pass_at_k"] is None
    assert recs[3]["difficulty_reject"] == "too_few_samples" and recs[3]["difficulty_n"] == 1
    assert recs[4]["pass_at_k"] == pytest.approx(1 - 1 / 6) and recs[4]["mean_reward"] == 0.5  # stale 0.9 replaced
    assert recs[5]["instruction"] == "\ud800é" and recs[5]["difficulty_reject"] == "bad_text"  # written back
    rejects = [json.loads(x) for x in (tmp_path / "out.jsonl.rejects.jsonl").read_text().splitlines()]
    assert [r["reason"] for r in rejects] == [
        "prediction_error",
        "missing_image",
        "unparseable_record",
        "too_few_samples",
        "bad_text",
    ]
    assert rejects[2]["ref"].endswith("train.jsonl:4")
    assert summary == {
        "records": 7,
        "scored": 2,
        "rejects": {
            "prediction_error": 1,
            "missing_image": 1,
            "unparseable_record": 1,
            "too_few_samples": 1,
            "bad_text": 1,
        },
    }


def test_annotate_keeps_a_gta1_json_list_a_json_list(tmp_path):
    _image(tmp_path, "g.png", (200, 100))
    conv = [{"from": "human", "value": "<image>the bowl"}, {"from": "gpt", "value": ""}]
    data = tmp_path / "gta1.json"
    data.write_text(json.dumps([{"image": "g.png", "conversations": conv, "bbox": [0, 0, 500, 500]}]))
    samples, report = load_samples([str(data)])
    preds = tmp_path / "p.jsonl"
    _predictions(preds, [{"sample_id": samples[0].sample_id, "point": None, "samples": [[100, 50], [101, 50]]}])
    annotate(str(data), samples, report, str(preds), str(tmp_path / "o.json"), 1)
    (rec,) = json.loads((tmp_path / "o.json").read_text())  # box 0-1000 -> (0, 0, 100, 50) px: (100, 50) on the edge
    assert rec["bbox"] == [0, 0, 500, 500] and rec["difficulty_hits"] == 1 and rec["pass_at_k"] == 0.5


def fake_backend(model, samples, out_path, *, adapter=None, tts=None, budget=None, **kwargs):
    """A backend by spec (``module:function``) that resumes as the real ones do (``open_predictions``): K answers per
    sample still to do, every one at the box centre but the first."""
    from gui_grounding.eval.backends import open_predictions, write_records

    out, todo = open_predictions(out_path, samples)
    lines = []
    for s in todo:
        x0, y0, x1, y1 = s.boxes[0]
        pts = [None] + [[(x0 + x1) / 2, (y0 + y1) / 2]] * (tts.samples - 1)
        lines.append({"sample_id": s.sample_id, "point": pts[-1], "samples": pts, "call": [model, tts.samples]})
    with out:
        write_records(out, lines)
    return out_path


def test_run_difficulty_asks_the_engine_for_k_samples(tmp_path):
    data = _canonical(tmp_path)
    _predictions(tmp_path / "o.jsonl.predictions.jsonl", [{"sample_id": "s1", "point": None, "samples": [[0, 0]] * 4}])
    summary = run_difficulty(
        str(data),
        str(tmp_path / "o.jsonl"),
        model="m",
        backend="tests.test_difficulty:fake_backend",
        adapter="qwen2.5-vl",
        samples=4,
        k=1,
        seed=3,
    )
    preds = [json.loads(x) for x in (tmp_path / "o.jsonl.predictions.jsonl").read_text().splitlines()]
    assert [(p["sample_id"], p.get("call")) for p in preds] == [("s1", None)] + [
        (sid, ["m", 4])
        for sid in ("s0", "s4", "train:5")  # s1 was answered by an earlier run: not asked again
    ]
    recs = [json.loads(x) for x in (tmp_path / "o.jsonl").read_text().splitlines()]
    assert [r["pass_at_k"] for r in recs] == [0.75, 0.0, None, 0.75, 0.75, None]
    assert summary["scored"] == 4
    with pytest.raises(ValueError, match="--k must be in"):
        run_difficulty(str(data), str(tmp_path / "o2.jsonl"), model="m", adapter="qwen2.5-vl", samples=2, k=3)


# ---- data_config: difficulty range and bins ---------------------------------------------------------------------


def _config(tmp_path, entry: str):
    (tmp_path / "a.jsonl").write_text("{}\n")
    p = tmp_path / "mix.yaml"
    p.write_text("seed: 5\ndatasets:\n  - json_path: a.jsonl\n" + entry)
    return load_data_config(str(p))


class _Rows:
    """A dataset stand-in with one column (``column_values`` reads it through ``with_format('arrow')``)."""

    def __init__(self, **columns):
        from datasets import Dataset

        self.ds = Dataset.from_dict(columns)

    def __getattr__(self, name):
        return getattr(self.ds, name)

    def __len__(self):
        return len(self.ds)


def test_difficulty_range_and_bins_keep_exact_records(tmp_path):
    (src,), seed = _config(
        tmp_path,
        "    difficulty_range: [0.1, 1.0]\n"
        "    difficulty_bins:\n"
        "      - {range: [0.0, 0.5], sampling_strategy: 'random:50%'}\n"
        "      - {range: [0.5, 1.0], sampling_strategy: 'first:2'}\n",
    )
    assert src.difficulty_column == "pass_at_k" and src.difficulty_range == (0.1, 1.0)
    #        0    1     2     3     4    5    6     7     8    9     10    11
    vals = [0.0, 0.1, None, 0.2, 0.5, 0.9, 1.0, 0.3, 0.45, 0.6, 1.5, 0.25]
    ds = _Rows(pass_at_k=vals)
    idx, report = source_indices(ds, src, seed, where="mix", logger=log)
    low = [1, 3, 7, 8, 11]  # [0.1, 0.5): 5 records, random:50% -> ceil(2.5) = 3, seeded seed + stride
    pick = sampling_indices(5, "random:50%", 5 + BIN_SEED_STRIDE, where="x")
    assert len(pick) == 3
    assert idx == sorted([low[j] for j in pick] + [4, 5])  # [0.5, 1.0]: 4, 5, 6, 9 -> first:2 = 4, 5
    assert report["left_out"] == {"no_difficulty": 1, "outside_range": 2}
    assert [(b["available"], b["selected"]) for b in report["bins"]] == [(5, 3), (4, 2)]
    assert source_indices(ds, src, seed, where="mix", logger=log)[0] == idx  # seeded


def test_difficulty_values_that_are_not_numbers_are_left_out_by_reason(tmp_path):
    (src,), seed = _config(tmp_path, "    difficulty_column: d\n    difficulty_range: [0, 1]\n")
    from datasets import Dataset

    from vlm_r1.data import rows_to_dataset

    rows = [{"k": i} for i in range(6)]
    extras = [{"d": v} for v in (0.5, "hard", True, [1], None, 1)]  # mixed kinds: stored as JSON text
    ds = rows_to_dataset(rows, extras, what="t", logger=log)
    assert isinstance(ds, Dataset)
    idx, report = source_indices(ds, src, seed, where="mix", logger=log)
    assert idx == [0, 5] and report["left_out"] == {"bad_difficulty": 3, "no_difficulty": 1}
    with pytest.raises(ValueError, match=r"difficulty_column: .*'nope' not in the dataset"):
        src.difficulty_column = "nope"
        source_indices(ds, src, seed, where="mix", logger=log)


@pytest.mark.parametrize(
    "entry, match",
    [
        ("    difficulty_range: [1, 0]\n", "lo <= hi"),
        ("    difficulty_range: [0, .nan]\n", "two finite numbers"),
        ("    difficulty_bins: []\n", "non-empty list"),
        ("    difficulty_bins:\n      - {range: [0, 1], sampling_strategy: 'some'}\n", "unknown sampling_strategy"),
        ("    difficulty_bins:\n      - {range: [0, 0.6]}\n      - {range: [0.5, 1]}\n", "must not overlap"),
        ("    difficulty_bins:\n      - {range: [0, 1], share: 3}\n", "expected"),
        ("    difficulty_column: ''\n", "difficulty_column must be"),
    ],
)
def test_difficulty_keys_errors_name_the_entry(tmp_path, entry, match):
    with pytest.raises(ValueError, match=match):
        _config(tmp_path, entry)


def test_entry_without_difficulty_keys_is_upstreams_rule(tmp_path):
    (src,), seed = _config(tmp_path, "    sampling_strategy: 'random:3'\n")
    assert not src.uses_difficulty
    ds = _Rows(x=list(range(10)))
    assert source_indices(ds, src, seed, where="m", logger=log) == (sampling_indices(10, "random:3", seed), None)


# ---- --sample_weight_column -------------------------------------------------------------------------------------


def test_sample_weight_rule():
    assert (
        sample_weight(0) == (0.0, None) and sample_weight(2.5) == (2.5, None) and sample_weight(1000) == (1000.0, None)
    )
    assert sample_weight(None)[1] == "no_weight"
    for bad in ("1", True, [1], float("nan")):
        assert sample_weight(bad)[1] == "bad_weight"
    for bad in (-0.1, 1000.5, float("inf"), 10**400):
        assert sample_weight(bad)[1] == "weight_out_of_range"


def test_keep_weighted_rows_drops_bad_rows_by_reason(caplog):
    from datasets import Dataset

    ds = Dataset.from_dict({"sample_id": ["a", "b", "c", "d"], "w": [1.0, None, -2.0, 0.5]})
    with caplog.at_level(logging.WARNING):
        kept = keep_weighted_rows(ds, "w", log)
    assert kept["sample_id"] == ["a", "d"]
    assert "2 of 4 rows dropped (1 no_weight, 1 weight_out_of_range), e.g. b: no_weight; c: weight" in caplog.text
    assert keep_weighted_rows(kept, "w", log) is kept
    with pytest.raises(ValueError, match="'x' not in the dataset"):
        keep_weighted_rows(ds, "x", log)
    assert row_weights([{"w": 2}, {"w": 0.5}], "w") == [2.0, 0.5]
    with pytest.raises(ValueError, match="row b: no_weight"):
        row_weights([{"sample_id": "b"}], "w")
    # a column whose records mix kinds is stored as JSON text (vlm_r1.data.rows_to_dataset): decoded, then checked
    assert row_weights([{"w": "2.5"}, {"w": "0"}], "w", json_text=True) == [2.5, 0.0]
    with pytest.raises(ValueError, match="bad_weight"):
        row_weights([{"w": '"x"'}], "w", json_text=True)
    with pytest.raises(ValueError, match="bad_weight"):
        row_weights([{"w": "2.5"}], "w")  # a string where the column holds numbers


def test_weight_flag_needs_the_columns_to_reach_the_trainer():
    from vlm_r1.configs import VLMGRPOConfig

    with pytest.raises(ValueError, match="needs --remove_unused_columns false"):
        VLMGRPOConfig(output_dir="/tmp/x", sample_weight_column="w", remove_unused_columns=True, use_cpu=True)
    assert VLMGRPOConfig(output_dir="/tmp/x", use_cpu=True).sample_weight_column is None  # default off


class _Acc:
    num_processes = 1
    sync_gradients = True

    def gather(self, x):
        return x.reshape(-1) if x.dim() == 0 else x

    gather_for_metrics = gather

    def reduce(self, x, reduction="sum"):
        return x


def _loss_case(loss_type: str, beta: float = 0.0):
    """A trainer holding only what TRL's ``_compute_loss`` reads, its policy log-probs fixed (no model)."""
    t = object.__new__(VLMGRPOTrainer)
    logps = torch.tensor([[-1.0, -2.0], [-0.5, -1.5]])
    t._get_per_token_logps_and_entropies = lambda *a, **k: (logps, torch.zeros(2, 2), None)
    t.__dict__.update(
        model=SimpleNamespace(training=True),
        top_entropy_quantile=1.0,
        off_policy_mask_threshold=None,
        importance_sampling_level="token",
        beta=beta,
        loss_type=loss_type,
        epsilon_low=0.2,
        epsilon_high=0.2,
        use_vllm=False,
        aux_loss_enabled=False,
        _entropy_bonus_enabled=False,
        current_gradient_accumulation_steps=1,
        max_completion_length=2,
        accelerator=_Acc(),
        _metrics={"train": defaultdict(list), "eval": defaultdict(list)},
        args=SimpleNamespace(delta=None, use_bias_correction_kl=False, steps_per_generation=1),
    )
    inputs = {
        "prompt_ids": torch.zeros(2, 1, dtype=torch.long),
        "prompt_mask": torch.ones(2, 1, dtype=torch.long),
        "completion_ids": torch.zeros(2, 2, dtype=torch.long),
        "completion_mask": torch.tensor([[1, 1], [1, 0]]),
        "old_per_token_logps": torch.tensor([[-1.2, -2.0], [-0.5, -1.0]]),
        "advantages": torch.tensor([1.0, -2.0]),
        "num_items_in_batch": torch.tensor(3.0),
    }
    if beta:
        inputs["ref_per_token_logps"] = torch.tensor([[-1.0, -2.0], [0.5, -1.5]])
    return t, inputs


def test_weighted_grpo_loss_equals_the_hand_computed_loss():
    # ratios: sample 0 exp(0.2) (clipped to 1.2 for A > 0) and 1; sample 1: 1 and (masked) exp(-0.5)
    # weights 0.5 and 3 -> A' = 0.5, -6; per-token loss -min(r A', clip(r) A'): [-0.6, -0.5], [6, masked]
    t, inputs = _loss_case("grpo")
    weighted = t._compute_loss(None, {**inputs, SAMPLE_WEIGHT_KEY: torch.tensor([0.5, 3.0])})
    assert weighted.item() == pytest.approx(((-0.6 - 0.5) / 2 + 6.0) / 2, abs=1e-6)  # 2.725
    assert t._metrics["train"]["sample_weight/mean"] == [pytest.approx(1.75)]
    plain = t._compute_loss(None, inputs)
    assert plain.item() == pytest.approx(((-1.2 - 1.0) / 2 + 2.0) / 2, abs=1e-6)  # 0.45, unchanged without weights
    assert len(t._metrics["train"]["sample_weight/mean"]) == 1


@pytest.mark.parametrize("loss_type, expected", [("bnpo", (-0.6 - 0.5 + 6.0) / 3), ("dapo", (-0.6 - 0.5 + 6.0) / 3)])
def test_weighted_token_level_losses(loss_type, expected):
    t, inputs = _loss_case(loss_type)
    loss = t._compute_loss(None, {**inputs, SAMPLE_WEIGHT_KEY: torch.tensor([0.5, 3.0])})
    assert loss.item() == pytest.approx(expected, abs=1e-6)


def test_kl_term_is_not_weighted():
    t, inputs = _loss_case("grpo", beta=0.1)
    kl = math.e - 1.0 - 1.0  # TRL's k3 exp(ref - logp) - (ref - logp) - 1, ref - logp = 1 on sample 1's first token
    loss = t._compute_loss(None, {**inputs, SAMPLE_WEIGHT_KEY: torch.tensor([0.5, 3.0])})
    assert loss.item() == pytest.approx(((-0.6 - 0.5) / 2 + (6.0 + 0.1 * kl)) / 2, abs=1e-6)


def test_weights_travel_with_the_generation_output():
    t = object.__new__(VLMGRPOTrainer)
    t.__dict__.update(args=SimpleNamespace(sample_weight_column="w"), model=SimpleNamespace(training=True))
    out = t._weighed([{"w": 2}, {"w": 0.25}], {"advantages": torch.zeros(2)})
    assert out[SAMPLE_WEIGHT_KEY].tolist() == [2.0, 0.25]
    t.args.sample_weight_column = None
    assert SAMPLE_WEIGHT_KEY not in t._weighed([{"w": 2}], {"advantages": torch.zeros(1)})


def test_dynamic_sampling_merge_keeps_each_rows_weight():
    from vlm_r1.trainer import merge_generation_rows

    def output(adv, weights):
        n = len(adv)
        return {
            "prompt_ids": torch.ones(n, 1, dtype=torch.long),
            "prompt_mask": torch.ones(n, 1, dtype=torch.long),
            "completion_ids": torch.ones(n, 1, dtype=torch.long),
            "completion_mask": torch.ones(n, 1, dtype=torch.long),
            "advantages": torch.tensor(adv),
            SAMPLE_WEIGHT_KEY: torch.tensor(weights),
        }

    got = merge_generation_rows([output([0.5, -0.5], [2.0, 0.0]), output([1.5, 0.1], [0.25, 9.0])], [(1, 0), (0, 1)], 0)
    assert got["advantages"].tolist() == [1.5, -0.5] and got[SAMPLE_WEIGHT_KEY].tolist() == [0.25, 0.0]


def test_a_difficulty_keyed_mixture_trains_on_the_selected_records(tmp_path):
    from datasets import Dataset

    from vlm_r1.configs import GRPOScriptArguments
    from vlm_r1.grpo import build_train_dataset

    (tmp_path / "a.jsonl").write_text("".join(json.dumps({"i": i, "p": i / 10}) + "\n" for i in range(10)))
    (tmp_path / "b.jsonl").write_text(json.dumps({"i": 99}) + "\n")
    (tmp_path / "mix.yaml").write_text(
        "seed: 1\ndatasets:\n  - json_path: a.jsonl\n    difficulty_column: p\n    difficulty_range: [0.2, 0.5]\n"
        "  - json_path: b.jsonl\n"
    )

    class Task:  # reads each file's records as rows (a task that keeps every record key as a column)
        def build_dataset(self, args, processor, vlm_module):
            return Dataset.from_list([json.loads(x) for x in open(args.data_file_paths)])

    args = GRPOScriptArguments(data_config=str(tmp_path / "mix.yaml"))
    ds, mixture = build_train_dataset(args, SimpleNamespace(seed=0), Task(), None, None)
    assert ds["i"] == [2, 3, 4, 5, 99]
    assert mixture[0]["selected"] == 4 and mixture[0]["difficulty"]["left_out"] == {"outside_range": 6}
    assert "difficulty" not in mixture[1]


def test_gui_grounding_rows_carry_the_difficulty_and_weight_columns(tmp_path, make_image):
    """The GUI task keeps a record's other keys as columns (as the core tasks do), so a data-config difficulty filter
    and --sample_weight_column work on GUI data: of 4 records with pass_at_k 0, 0.25, 0.5, 1 the range [0.2, 0.6]
    keeps the two in it, and the weight column reaches the rows."""
    from groundwork.pixel_budget import PixelBudget
    from gui_grounding.training.task import GUIGroundingTask
    from vlm_r1.configs import GRPOScriptArguments
    from vlm_r1.grpo import build_train_dataset

    make_image(1280, 720, "shot.png", folder=tmp_path)
    lines = []
    for i, p in enumerate((0.0, 0.25, 0.5, 1.0)):
        rec = {
            "sample_id": f"s{i}",
            "instruction": "Open the menu",
            "image_path": "shot.png",
            "target_bbox": {"x_min": 100, "y_min": 50, "x_max": 300, "y_max": 150},
            "image_width": 1280,
            "image_height": 720,
            "pass_at_k": p,
            "w": i + 1,
        }
        lines.append(json.dumps(rec) + "\n")
    (tmp_path / "train.jsonl").write_text("".join(lines))
    (tmp_path / "mix.yaml").write_text(
        f"seed: 1\ndatasets:\n  - json_path: {tmp_path / 'train.jsonl'}\n    image_folder: {tmp_path}\n"
        "    difficulty_range: [0.2, 0.6]\n"
    )

    class Module:
        model_type = "qwen2_5_vl"

    task = GUIGroundingTask()
    task.pixel_budget = PixelBudget.published("test", factor=28, min_pixels=3136, max_pixels=1_000_000)
    args = GRPOScriptArguments(data_config=str(tmp_path / "mix.yaml"))
    ds, mixture = build_train_dataset(args, SimpleNamespace(seed=0), task, None, Module())
    rows = ds.with_format(None).to_list() if hasattr(ds, "with_format") else list(ds)
    assert [(r["sample_id"], r["pass_at_k"], r["w"]) for r in rows] == [("s1", 0.25, 2), ("s2", 0.5, 3)]
    assert mixture[0]["selected"] == 2 and mixture[0]["difficulty"]["left_out"] == {"outside_range": 2}
