"""Ablation switches: ``--loss_preset``, KL (``--beta > 0``) incl. ZeRO-3, and DAPO-style ``--dynamic_sampling``.

* Loss presets: exact field values per preset, explicit flags (command line or ``--config`` YAML) beat the preset and
  each conflict is logged, TRL's own loss flags pass through, ``--help`` lists the flags.
* KL: 1 process in-process (the reference model exists, stays at the initial weights, ``kl`` is 0 at step 1 and > 0
  once the policy moved), and 2 processes over gloo under ZeRO-3 vs DDP through the real launcher: same ``kl``.
* Dynamic sampling: pure helpers (group layout across processes, refill plan, row merge), then training with a
  deterministic reward (``tests/plugins/ablation_rewards.py``: constant for even sample ids, varied otherwise): the
  logged dropped fraction equals the one recomputed from the recorded batches, and the trained micro-batches hold only
  non-zero advantages (no zero-std group) when the refill succeeded; with an all-constant reward the run finishes after
  ``--dynamic_sampling_max_tries`` tries and says so.

Every run uses the tiny Qwen2.5-VL and 6 records of the committed web sample; run with ``OMP_NUM_THREADS=1``.
"""

from __future__ import annotations

import json
import logging
import math
import os

import pytest
import torch

from tests.helpers.paths import REPO, SAMPLE
from tests.helpers.proc import PLUGINS
from tests.helpers.train import launch, sample_subset, step_logs, tiny_train_argv

CONFIGS = os.path.join(REPO, "configs", "deepspeed")
MINIMAL = ["--model_name_or_path", "unused", "--data_file_paths", "unused.jsonl"]


@pytest.fixture(scope="module")
def train6(tmp_path_factory):
    """First 6 records of the committed sample (ids about__1280x720:0..5: 0, 2, 4 are 'flat' for the test reward)."""
    return sample_subset(tmp_path_factory.mktemp("abl_data") / "train.jsonl", 6)


@pytest.fixture
def plugins_on_path(monkeypatch):
    monkeypatch.syspath_prepend(PLUGINS)


def _settings(argv):
    from vlm_r1.grpo_jsonl import parse_args

    _, training_args, _ = parse_args(MINIMAL + list(argv))
    return training_args.loss_settings()


def _loss(settings):
    return {k: v for k, v in settings.items() if k not in ("loss_preset", "loss_preset_overrides")}


# ---- loss presets ------------------------------------------------------------------------------------------------
# the core's defaults: upstream VLM-R1's effective ones
_DEFAULTS = dict(
    loss_type="grpo", scale_rewards="group", beta=0.04, epsilon=0.2, epsilon_high=0.2, mask_truncated_completions=False
)
PRESET_VALUES = {
    "none": _DEFAULTS,
    "gta1": dict(_DEFAULTS, beta=0.0),
    "vlm_r1": dict(_DEFAULTS),
    "dapo": dict(_DEFAULTS, loss_type="dapo", beta=0.0, epsilon_high=0.28, mask_truncated_completions=True),
    "dr_grpo": dict(_DEFAULTS, loss_type="dr_grpo", scale_rewards="none", beta=0.0),
}


@pytest.mark.parametrize("preset", list(PRESET_VALUES))
def test_loss_preset_exact_values(preset):
    got = _settings(["--loss_preset", preset])
    assert got["loss_preset"] == preset and got["loss_preset_overrides"] == {}
    assert _loss(got) == PRESET_VALUES[preset]


def test_explicit_flags_beat_the_preset_and_conflicts_are_logged(caplog):
    caplog.set_level(logging.WARNING, logger="vlm_r1")
    # --loss_type dapo is TRL's default value: still explicit, so it wins. --beta 0 equals gta1's: no conflict.
    got = _settings(["--loss_preset", "gta1", "--loss_type", "dapo", "--epsilon_high=0.28", "--beta", "0.0"])
    assert _loss(got) == dict(PRESET_VALUES["gta1"], loss_type="dapo", epsilon_high=0.28)
    assert got["loss_preset_overrides"] == {"loss_type": "dapo", "epsilon_high": 0.28}
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("LOSS PRESET:")]
    assert len(lines) == 2, lines
    assert "--loss_type='dapo' (given explicitly) overrides --loss_preset gta1's loss_type='grpo'" in lines[0]
    assert "--epsilon_high=0.28 (given explicitly) overrides --loss_preset gta1's epsilon_high=None" in lines[1]
    # vlm_r1 leaves epsilon_high as given: no conflict, the value is used
    got = _settings(["--loss_preset", "vlm_r1", "--epsilon_high", "0.28"])
    assert got["epsilon_high"] == 0.28 and got["beta"] == 0.04 and got["loss_preset_overrides"] == {}


def test_config_yaml_keys_count_as_explicit(tmp_path):
    cfg = tmp_path / "run.yaml"
    cfg.write_text("loss_preset: dapo\nmask_truncated_completions: false\nepsilon: 0.1\n")
    got = _settings(["--config", str(cfg)])
    assert _loss(got) == dict(PRESET_VALUES["dapo"], mask_truncated_completions=False, epsilon=0.1)
    got = _settings(["--config", str(cfg), "--epsilon", "0.3"])  # the command line beats the YAML
    assert got["epsilon"] == 0.3 and got["epsilon_high"] == 0.28


def test_programmatic_config_uses_the_default_comparison_rule():
    from vlm_r1.configs import VLMGRPOConfig

    cfg = VLMGRPOConfig(output_dir="unused", loss_preset="dapo", epsilon_high=0.3)
    assert (cfg.loss_type, cfg.epsilon_high, cfg.mask_truncated_completions) == ("dapo", 0.3, True)
    assert cfg.loss_preset_overrides == {"epsilon_high": 0.3}
    # without a command line, a value equal to the class default (TRL's dapo) cannot be told apart from "not set": the
    # preset wins
    cfg = VLMGRPOConfig(output_dir="unused", loss_preset="vlm_r1", loss_type="dapo")
    assert cfg.loss_type == "grpo"
    with pytest.raises(ValueError, match="dynamic_sampling_max_tries"):
        VLMGRPOConfig(output_dir="unused", dynamic_sampling_max_tries=0)


def test_trl_loss_flags_pass_through():
    got = _settings(
        [
            "--loss_type",
            "bnpo",
            "--scale_rewards",
            "batch",
            "--epsilon",
            "0.1",
            "--epsilon_high",
            "0.3",
            "--beta",
            "0.01",
            "--mask_truncated_completions",
            "true",
        ]
    )
    assert _loss(got) == dict(
        loss_type="bnpo",
        scale_rewards="batch",
        beta=0.01,
        epsilon=0.1,
        epsilon_high=0.3,
        mask_truncated_completions=True,
    )


def test_help_lists_the_switches(capsys):
    from vlm_r1.grpo_jsonl import parse_args

    with pytest.raises(SystemExit) as exit_info:
        parse_args(["--help"])
    assert exit_info.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    for needle in (
        "--loss_preset {none,gta1,vlm_r1,dapo,dr_grpo}",
        "--dynamic_sampling",
        "--dynamic_sampling_max_tries",
        "--loss_type",
        "--scale_rewards",
        "--epsilon_high",
        "--beta",
        "dynamic_sampling/frac_groups_dropped",
        "gta1: loss_type='grpo', scale_rewards='group', beta=0.0, epsilon=0.2, epsilon_high=None",
    ):
        assert needle in text, needle


# ---- dynamic sampling: pure helpers ------------------------------------------------------------------------------
def test_group_layout_and_local_rows():
    from vlm_r1.trainer import group_layout, group_local_rows

    # 2 processes x 6 rows, groups of 4: group 1 spans both processes
    assert group_layout(6, 2, 4) == [((0, 4),), ((0, 2), (1, 2)), ((1, 4),)]
    assert [group_local_rows(1, r, 6, 4) for r in (0, 1)] == [[4, 5], [0, 1]]
    # GTA1's layout: 1 row per process, 8 generations on 8 processes
    assert group_layout(1, 8, 8) == [tuple((p, 1) for p in range(8))]
    assert group_layout(8, 1, 4) == [((0, 4),), ((0, 4),)]
    with pytest.raises(ValueError):
        group_layout(3, 1, 2)


def test_refill_plan_fills_only_slots_with_the_same_layout():
    from vlm_r1.trainer import RefillPlan, group_layout

    plan = RefillPlan(group_layout(6, 2, 4), [True, True, False])  # slots 0 (rank 0) and 1 (both ranks) are open
    plan.add_try([True, False, False])  # group 1 fits slot 1; group 2 (rank 1 only) fits nothing open
    assert plan.assignment == [(0, 0), (1, 1), (0, 2)] and plan.unfilled == 1 and not plan.done
    plan.add_try([False, False, True])  # group 0 fits slot 0; group 1 is surplus
    assert plan.assignment == [(2, 0), (1, 1), (0, 2)] and plan.done
    assert plan.metrics() == {
        "dynamic_sampling/frac_groups_dropped": 4 / 9,
        "dynamic_sampling/tries": 3.0,
        "dynamic_sampling/groups_generated": 9.0,
        "dynamic_sampling/frac_trained_groups_zero_std": 0.0,
    }
    assert plan.local_sources(0, 6, 4) == [(2, 0), (2, 1), (2, 2), (2, 3), (1, 4), (1, 5)]
    assert plan.local_sources(1, 6, 4) == [(1, 0), (1, 1), (0, 2), (0, 3), (0, 4), (0, 5)]
    stuck = RefillPlan(group_layout(4, 1, 2), [True, False])
    stuck.add_try([True, True])
    assert stuck.metrics()["dynamic_sampling/frac_trained_groups_zero_std"] == 0.5
    assert stuck.metrics()["dynamic_sampling/frac_groups_dropped"] == 2 / 4  # 3 zero-std generated, 1 still trained


def test_merge_generation_rows_repads_and_keeps_images_per_row():
    from vlm_r1.trainer import merge_generation_rows

    pad_id = 99

    def output(prompts, completions, patches, adv):
        p_len, c_len = max(map(len, prompts)), max(map(len, completions))
        out = {
            "prompt_ids": torch.tensor([[pad_id] * (p_len - len(p)) + p for p in prompts]),
            "prompt_mask": torch.tensor([[0] * (p_len - len(p)) + [1] * len(p) for p in prompts]),
            "completion_ids": torch.tensor([c + [pad_id] * (c_len - len(c)) for c in completions]),
            "completion_mask": torch.tensor([[1] * len(c) + [0] * (c_len - len(c)) for c in completions]),
            "old_per_token_logps": torch.tensor([[-1.0] * len(c) + [0.0] * (c_len - len(c)) for c in completions]),
            "advantages": torch.tensor(adv),
            "num_items_in_batch": torch.tensor(123),
            "image_grid_thw": torch.tensor([[1, 1, n] for n in patches]),
            "pixel_values": torch.cat([torch.full((n, 2), float(n)) for n in patches]),
            "num_images": [1] * len(prompts),
        }
        out["mm_token_type_ids"] = torch.cat(
            [(out["prompt_ids"] == 7).long(), torch.zeros_like(out["completion_ids"])], dim=1
        )
        return out

    a = output([[1, 7], [1, 7, 2]], [[5], [5, 6]], [2, 3], [0.5, -0.5])
    b = output([[1, 7, 2, 3]], [[4, 4, 4]], [4], [1.5])
    got = merge_generation_rows([a, b], [(1, 0), (0, 0)], pad_id)
    assert got["prompt_ids"].tolist() == [[1, 7, 2, 3], [pad_id, pad_id, 1, 7]]
    assert got["prompt_mask"].tolist() == [[1, 1, 1, 1], [0, 0, 1, 1]]
    assert got["completion_ids"].tolist() == [[4, 4, 4], [5, pad_id, pad_id]]
    assert got["completion_mask"].tolist() == [[1, 1, 1], [1, 0, 0]]
    assert got["old_per_token_logps"].tolist() == [[-1.0, -1.0, -1.0], [-1.0, 0.0, 0.0]]
    assert got["mm_token_type_ids"].tolist() == [[0, 1, 0, 0, 0, 0, 0], [0, 0, 0, 1, 0, 0, 0]]
    assert got["advantages"].tolist() == [1.5, 0.5]
    assert got["image_grid_thw"].tolist() == [[1, 1, 4], [1, 1, 2]] and got["num_images"] == [1, 1]
    assert got["pixel_values"][:, 0].tolist() == [4.0] * 4 + [2.0] * 2
    assert "num_items_in_batch" not in got  # a count over all processes: recomputed by the trainer
    with pytest.raises(NotImplementedError, match="spatial_shapes"):
        merge_generation_rows([dict(a, spatial_shapes=torch.zeros(2, 2))], [(0, 0)], pad_id)
    with pytest.raises(NotImplementedError, match="Qwen-VL-style"):
        merge_generation_rows([{k: v for k, v in a.items() if k != "image_grid_thw"}], [(0, 0)], pad_id)


# ---- training runs -----------------------------------------------------------------------------------------------
def _trainer(model_dir, data, out, reward_funcs, **overrides):
    """The CLI's trainer (gui_grounding task, frozen vision, the image token banned as GTA1 bans it), built in this
    process."""
    from vlm_r1.configs import GRPOScriptArguments, VLMGRPOConfig
    from vlm_r1.modules import get_vlm_module
    from vlm_r1.rewards import resolve_rewards
    from vlm_r1.tasks import get_task
    from vlm_r1.trainer import VLMGRPOTrainer

    vlm_module = get_vlm_module(model_dir)
    processor = vlm_module.load_processor(model_dir, max_pixels=100352)
    script_args = GRPOScriptArguments(data_file_paths=data, image_folders=SAMPLE, task_type="gui_grounding")
    task = get_task("gui_grounding")
    dataset = task.build_dataset(script_args, processor, vlm_module)
    config = dict(
        output_dir=out,
        report_to="none",
        bf16=False,
        max_steps=3,
        logging_steps=1,
        save_strategy="no",
        seed=0,
        per_device_train_batch_size=8,
        num_generations=8,
        max_completion_length=8,
        ban_vision_tokens=True,
    )
    args = VLMGRPOConfig(**{**config, **overrides})
    model = vlm_module.get_model_class(model_dir, {}).from_pretrained(model_dir)
    return VLMGRPOTrainer(
        model=model,
        reward_funcs=resolve_rewards(reward_funcs, task),
        args=args,
        vlm_module=vlm_module,
        processing_class=processor,
        freeze_vision=True,
        train_dataset=dataset,
    )


def _dynamic_sampling(max_tries: int, **overrides) -> dict:
    """``_trainer``'s keywords for dynamic sampling: on, groups of 4, at most ``max_tries`` generations a step."""
    return dict(num_generations=4, dynamic_sampling=True, dynamic_sampling_max_tries=max_tries, **overrides)


def _spy_advantages(trainer) -> list:
    """Record the ``advantages`` of every micro-batch the loss is computed on."""
    seen, compute = [], trainer._compute_loss

    def spy(model, inputs):
        seen.append(inputs["advantages"].detach().clone())
        return compute(model, inputs)

    trainer._compute_loss = spy
    return seen


def _step_logs(history):
    return [h for h in history if "loss" in h]


def _records(out, rank=0):
    with open(os.path.join(out, f"batches.rank{rank}.jsonl"), encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def _groups(ids, size):
    chunks = [ids[i : i + size] for i in range(0, len(ids), size)]
    assert all(len(set(c)) == 1 for c in chunks), f"a group is not whole: {chunks}"
    return [c[0] for c in chunks]


def test_kl_one_process_reference_model(tiny_qwen25_dir, train6, tmp_path, plugins_on_path):
    trainer = _trainer(
        tiny_qwen25_dir,
        train6,
        str(tmp_path / "kl"),
        ["click", "toy_rewards:completion_length_reward"],
        beta=0.04,
        learning_rate=1e-2,
    )
    assert trainer.ref_model is not None and trainer.ref_model is not trainer.model
    assert [
        [i] for i in trainer.vlm_module.get_image_token_ids(trainer.processing_class)
    ] == trainer.args.generation_kwargs["bad_words_ids"]
    trainer.train()
    logs = _step_logs(trainer.state.log_history)
    kl = [h["kl"] for h in logs]
    assert [h["step"] for h in logs] == [1, 2, 3] and all(math.isfinite(v) for v in kl)
    assert abs(kl[0]) < 1e-6, f"step 1: the reference must equal the initial policy, kl={kl[0]}"
    assert kl[1] > 1e-4 and kl[2] > 1e-4, f"lr 1e-2 moves the policy away from the reference: kl={kl}"
    assert not any(k.startswith("dynamic_sampling/") for k in logs[0])
    initial = type(trainer.model).from_pretrained(tiny_qwen25_dir).state_dict()
    ref, policy = trainer.ref_model.state_dict(), trainer.model.state_dict()
    assert ref.keys() == policy.keys() == initial.keys()
    assert all(torch.equal(ref[k], initial[k]) for k in initial), "the reference model was trained"
    vision = [k for k in initial if "visual" in k]
    assert vision and all(torch.equal(policy[k], initial[k]) for k in vision), "frozen vision tower changed"
    assert any(not torch.equal(policy[k], initial[k]) for k in initial if k not in vision)


def test_dynamic_sampling_trains_only_groups_with_signal(tiny_qwen25_dir, train6, tmp_path, plugins_on_path):
    from ablation_rewards import is_flat_prompt

    out = str(tmp_path / "ds")
    sampling = _dynamic_sampling(6, per_device_train_batch_size=4, gradient_accumulation_steps=2)
    trainer = _trainer(tiny_qwen25_dir, train6, out, ["ablation_rewards:split_signal_reward"], **sampling)
    advantages = _spy_advantages(trainer)
    trainer.train()
    logs, records = _step_logs(trainer.state.log_history), _records(out)
    assert [h["step"] for h in logs] == [r["step"] for r in records] == [1, 2, 3]
    for log, rec in zip(logs, records, strict=True):
        tries = rec["dynamic_sampling"]["generated_sample_ids"]
        generated = [g for batch in tries for g in _groups(batch, 4)]
        trained = _groups(rec["sample_ids"], 4)
        assert len(rec["sample_ids"]) == 8 and log["dynamic_sampling/tries"] == len(tries)
        assert log["dynamic_sampling/groups_generated"] == len(generated)
        assert log["dynamic_sampling/frac_trained_groups_zero_std"] == 0.0, "refill expected to succeed (seed 0)"
        assert not any(map(is_flat_prompt, trained)), rec["sample_ids"]
        flat = sum(map(is_flat_prompt, generated))
        assert log["dynamic_sampling/frac_groups_dropped"] == flat / len(generated)
        assert "frac_reward_zero_std" in log  # TRL's own metric (averaged over the tries)
    assert any(h["dynamic_sampling/frac_groups_dropped"] > 0 for h in logs), "no group was ever dropped"
    assert len(advantages) == 6 and all(a.numel() == 4 for a in advantages)
    assert all(bool((a != 0).all()) for a in advantages), f"a zero-std group was trained: {advantages}"


def test_dynamic_sampling_gives_up_after_max_tries(tiny_qwen25_dir, train6, tmp_path, plugins_on_path, caplog):
    caplog.set_level(logging.WARNING, logger="vlm_r1.trainer")
    sampling = _dynamic_sampling(3, max_steps=1, per_device_train_batch_size=8)
    trainer = _trainer(
        tiny_qwen25_dir, train6, str(tmp_path / "stuck"), ["ablation_rewards:constant_reward"], **sampling
    )
    advantages = _spy_advantages(trainer)
    trainer.train()
    (log,) = _step_logs(trainer.state.log_history)
    assert log["dynamic_sampling/tries"] == 3 and log["dynamic_sampling/groups_generated"] == 6
    assert log["dynamic_sampling/frac_trained_groups_zero_std"] == 1.0
    assert log["dynamic_sampling/frac_groups_dropped"] == 4 / 6  # 6 zero-std groups generated, 2 trained anyway
    assert log["frac_reward_zero_std"] == 1.0
    assert all(bool((a == 0).all()) for a in advantages)
    assert any("2 of 2 groups still have zero reward std after 3 tries" in r.getMessage() for r in caplog.records)


def _launch(model_dir, data, out, extra):
    args = tiny_train_argv(
        model_dir,
        data,
        out,
        *extra,
        reward_funcs="ablation_rewards:split_signal_reward",
        max_steps=3,
        per_device_train_batch_size=6,
        num_generations=4,
        data_seed=0,
        bf16=False,
        loss_preset="vlm_r1",
        beta="0.04",
        learning_rate="1e-2",
        dynamic_sampling=True,
        dynamic_sampling_max_tries=4,
    )
    launch(args)
    with open(os.path.join(out, "vlm_r1_run.json")) as f:
        info = json.load(f)
    return step_logs(out), info


@pytest.mark.slow  # four 2-process runs (~70 s); ZeRO-3 vs DDP stays in the default suite (test_deepspeed.py)
def test_zero3_kl_and_dynamic_sampling_match_ddp(tiny_qwen25_dir, train6, tmp_path):
    """2 processes, 6 rows each, groups of 4: one group per step spans both processes. ZeRO-3 with the reference
    model (vlm_r1 preset: beta 0.04) and dynamic sampling trains exactly like DDP."""
    pytest.importorskip("deepspeed", reason="DeepSpeed not installed: pip install -e .[deepspeed]")

    z3_out, ddp_out = str(tmp_path / "zero3"), str(tmp_path / "ddp")
    z3, info = _launch(tiny_qwen25_dir, train6, z3_out, ["--deepspeed", os.path.join(CONFIGS, "zero3.json")])
    ddp, _ = _launch(tiny_qwen25_dir, train6, ddp_out, [])
    assert info["world_size"] == 2 and info["distributed_type"].endswith("DEEPSPEED") and info["has_ref_model"]
    expected = dict(PRESET_VALUES["vlm_r1"], loss_preset="vlm_r1", dynamic_sampling={"enabled": True, "max_tries": 4})
    assert {k: info[k] for k in expected} == expected
    assert [h["step"] for h in z3] == [h["step"] for h in ddp] == [1, 2, 3]
    kl = [h["kl"] for h in z3]
    assert all(math.isfinite(v) for v in kl) and abs(kl[0]) < 1e-6 and kl[2] > 1e-4, kl
    for ours, ref in zip(z3, ddp, strict=True):
        for key in ("kl", "loss", "grad_norm"):
            assert ours[key] == pytest.approx(ref[key], rel=1e-4, abs=1e-7), (ours["step"], key)
        assert {k: v for k, v in ours.items() if k.startswith("dynamic_sampling/")} == {
            k: v for k, v in ref.items() if k.startswith("dynamic_sampling/")
        }
    # the batches each rank trained on: whole groups across the two ranks; no flat group where the refill succeeded
    ranks = [_records(z3_out, r) for r in (0, 1)]
    assert ranks == [_records(ddp_out, r) for r in (0, 1)]
    for log, rec0, rec1 in zip(z3, *ranks, strict=True):
        trained = _groups(rec0["sample_ids"] + rec1["sample_ids"], 4)
        flat = sum(1 for g in trained if int(g.rsplit(":", 1)[1]) % 2 == 0)
        assert log["dynamic_sampling/frac_trained_groups_zero_std"] == flat / len(trained)
        for t0, t1 in zip(
            rec0["dynamic_sampling"]["generated_sample_ids"],
            rec1["dynamic_sampling"]["generated_sample_ids"],
            strict=True,
        ):
            _groups(t0 + t1, 4)
