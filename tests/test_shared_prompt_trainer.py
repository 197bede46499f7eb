"""``--shared_prompt`` through ``python -m vlm_r1.grpo_jsonl``: same losses and gradient norms as naive GRPO, a
fraction of the tokens, and a clear fallback where it cannot apply (issue 12).

Every pair of runs uses the same seed; the whole-group shuffle draws the same random numbers as TRL's row shuffle, so
the two runs stay on one random stream and match at every step, not only the first. ``--loss_type dapo``: under
``grpo`` with zero-mean group advantages the step-1 loss is ~1e-8 of rounding noise, which no relative tolerance can
compare.
"""

from __future__ import annotations

import json
import os
import sys

import pytest
import torch

from tests.helpers.proc import run as run_process
from tests.helpers.train import sample_subset, step_logs, tiny_train_argv
from vlm_r1 import shared_prompt as sp
from vlm_r1.shared_prompt_trainer import GroupedProcessor, split_generation_batch


@pytest.fixture(scope="module")
def screenshots(tmp_path_factory):
    """The first 4 records of the committed real sample (2 screenshots, 2 instructions each)."""
    return sample_subset(tmp_path_factory.mktemp("sp_data") / "train.jsonl", 4)


def _train(model_dir, data, out, shared: bool, steps=2, extra=()):
    argv = tiny_train_argv(
        model_dir,
        data,
        out,
        *extra,
        max_steps=steps,
        max_completion_length=16,
        max_pixels=200704,
        freeze_vision_modules=None,
        beta=0,
        loss_type="dapo",
        dtype="float32",
        shared_prompt=shared,
    )
    proc = run_process([sys.executable, "-m", "vlm_r1.grpo_jsonl", *argv], timeout=900)
    with open(os.path.join(out, "vlm_r1_run.json"), encoding="utf-8") as f:
        run = json.load(f)
    return step_logs(out), run, proc.stderr


def _rel(a, b):
    """Relative difference; values within 1e-7 of each other count as equal (a loss of 0 vs 7e-9 is rounding)."""
    return 0.0 if abs(a - b) <= 1e-7 else abs(a - b) / max(abs(a), abs(b))


@pytest.mark.parametrize(
    "name,extra",
    [
        # ~27 s, a CLI training run per arm: slow suite (the packed forward itself is exact against TRL in the
        # default suite, tests/test_shared_prompt.py::test_matches_trl)
        pytest.param("plain", (), marks=pytest.mark.slow),
        # reference log-probs packed too; KL > 0 at step 2
        pytest.param("beta_ref_pass", ("--beta", "0.04"), marks=pytest.mark.slow),
        # old log-probs packed; step 2 reuses the generation batch
        pytest.param(
            "two_iterations", ("--num_iterations", "2", "--steps_per_generation", "1"), marks=pytest.mark.slow
        ),
        # PEFT: the reference pass is the model with adapters disabled
        # (dropout 0: with LoRA dropout the prompt gets one dropout mask per group instead of one per rollout)
        pytest.param(
            "lora",
            ("--use_peft", "true", "--lora_r", "4", "--lora_dropout", "0", "--beta", "0.04"),
            marks=pytest.mark.slow,
        ),
        pytest.param("gradient_checkpointing", ("--gradient_checkpointing", "true"), marks=pytest.mark.slow),
        pytest.param("eager", ("--attn_implementation", "eager"), marks=pytest.mark.slow),
        # split attention (no dense mask; vlm_r1/shared_prompt_attention.py), its reference path on CPU
        pytest.param("split_attention", ("--shared_prompt_attention", "split"), marks=pytest.mark.slow),
    ],
)
def test_shared_matches_naive_end_to_end(tiny_qwen25_dir, screenshots, tmp_path, name, extra):
    """Issue 12 "done when": step losses and grad norms of shared vs naive within 1e-5 relative (fp32), and the
    naive/shared LLM-token ratio >= 5 on the committed screenshots (G=8, per-device batch 8, max_pixels 200704)."""
    naive, run_naive, _ = _train(tiny_qwen25_dir, screenshots, tmp_path / "naive", False, extra=extra)
    shared, run_shared, _ = _train(tiny_qwen25_dir, screenshots, tmp_path / "shared", True, extra=extra)
    assert run_naive["shared_prompt"]["active"] is False
    assert run_naive["shared_prompt"]["reason"] == "off (--shared_prompt false)"
    attention = "split" if name == "split_attention" else "dense"
    assert run_shared["shared_prompt"] == {
        "requested": True,
        "active": True,
        "reason": None,
        "attention": attention,
        "group_size": 8,
        "base_attention_implementation": "eager" if name == "eager" else "sdpa",
    }
    assert len(naive) == len(shared) == 2
    for step, (a, b) in enumerate(zip(naive, shared, strict=True), 1):
        assert _rel(a["loss"], b["loss"]) < 1e-5, (step, a["loss"], b["loss"])
        assert _rel(a["grad_norm"], b["grad_norm"]) < 1e-5, (step, a["grad_norm"], b["grad_norm"])
        assert a.get("reward") == b.get("reward")  # token-identical completions (no reward on a reuse step)
        assert a["shared_prompt/llm_tokens"] == a["shared_prompt/naive_llm_tokens"]
        assert b["shared_prompt/naive_llm_tokens"] == a["shared_prompt/naive_llm_tokens"]
        assert b["shared_prompt/naive_llm_tokens"] / b["shared_prompt/llm_tokens"] >= 5
        assert b["shared_prompt/naive_vision_patches"] == 8 * b["shared_prompt/vision_patches"]
        assert b.get("shared_prompt/active", 1.0) == 1.0  # logged on generation steps
    if name == "beta_ref_pass":
        assert shared[1]["kl"] > 0 and _rel(naive[1]["kl"], shared[1]["kl"]) < 1e-4


@pytest.mark.slow
def test_dynamic_sampling_keeps_groups_whole(tiny_qwen25_dir, screenshots, tmp_path):
    """--dynamic_sampling with shared prompts: a zero-std group is replaced by a refill group (merged batch keeps one
    pixel copy per group, groups whole); same numbers as the naive run. Reward: tests/plugins/ablation_rewards.py
    (constant for even sample ids, varied for odd ones)."""
    extra = (
        "--dynamic_sampling",
        "true",
        "--dynamic_sampling_max_tries",
        "4",
        "--reward_funcs",
        "ablation_rewards:split_signal_reward",
    )
    naive, _, _ = _train(tiny_qwen25_dir, screenshots, tmp_path / "naive", False, steps=2, extra=extra)
    shared, run, _ = _train(tiny_qwen25_dir, screenshots, tmp_path / "shared", True, steps=2, extra=extra)
    assert run["shared_prompt"]["active"] is True
    assert any(h["dynamic_sampling/tries"] > 1 for h in shared), "no refill happened: the merge was not exercised"
    for a, b in zip(naive, shared, strict=True):
        assert a["dynamic_sampling/tries"] == b["dynamic_sampling/tries"]
        assert b["dynamic_sampling/frac_trained_groups_zero_std"] == 0
        assert _rel(a["loss"], b["loss"]) < 1e-5 and _rel(a["grad_norm"], b["grad_norm"]) < 1e-5
    with open(tmp_path / "shared" / "batches.rank0.jsonl", encoding="utf-8") as f:
        for line in f:
            ids = json.loads(line)["sample_ids"]
            assert len(set(ids)) == 1 and int(ids[0].rsplit(":", 1)[1]) % 2 == 1, ids  # one whole, varied group


@pytest.mark.slow  # ~14 s: a CLI training run
def test_fallback_is_announced_and_recorded(tiny_qwen25_dir, screenshots, tmp_path):
    """Per-device batch not a multiple of G: the run says why at start-up, runs naive, records the reason."""
    history, run, stderr = _train(
        tiny_qwen25_dir,
        screenshots,
        tmp_path / "out",
        True,
        steps=1,
        extra=("--per_device_train_batch_size", "4", "--gradient_accumulation_steps", "2"),
    )
    status = run["shared_prompt"]
    assert status["requested"] is True and status["active"] is False
    assert status["reason"].startswith("per_device_train_batch_size 4 is not a multiple of num_generations 8")
    assert "shared-prompt GRPO requested but running naive: per_device_train_batch_size 4" in stderr
    assert history[0]["shared_prompt/llm_tokens"] == history[0]["shared_prompt/naive_llm_tokens"]


# ---- hook units ----------------------------------------------------------------------------------------------------
def _shared_output(G=2, groups=3, seed=0):
    """A fake shared-layout generation output: group k's carrier pixels are all k (patches 4 per image)."""
    rows = G * groups
    gen = torch.Generator().manual_seed(seed)
    grid = torch.tensor([[1, 2, 2]] * rows)
    pixels = torch.cat([torch.full((4, 3), float(k)) for k in range(groups)])
    return {
        "prompt_ids": torch.arange(rows)[:, None].repeat(1, 5),
        "prompt_mask": torch.ones(rows, 5, dtype=torch.long),
        "completion_ids": torch.randint(0, 9, (rows, 4), generator=gen),
        "completion_mask": torch.ones(rows, 4, dtype=torch.long),
        "advantages": torch.arange(rows, dtype=torch.float),
        "num_items_in_batch": torch.tensor(24),
        "pixel_values": pixels,
        "image_grid_thw": grid,
        "num_images": [1] * rows,
        sp.SHARED_KEY: G,
    }


def test_split_generation_batch_keeps_groups_and_trl_rng_draw():
    out = _shared_output(G=2, groups=4)
    torch.manual_seed(5)
    slices = split_generation_batch(out, 2, 2)
    after = torch.rand(1)
    torch.manual_seed(5)
    torch.randperm(8)  # TRL's shuffle_sequence_dict draws exactly this
    assert torch.equal(after, torch.rand(1))
    seen = []
    for part in slices:
        assert part[sp.SHARED_KEY] == 2 and part["num_items_in_batch"].item() == 24
        rows = part["prompt_ids"][:, 0].tolist()
        assert len(rows) == 4
        for g in range(0, 4, 2):
            assert rows[g] % 2 == 0 and rows[g + 1] == rows[g] + 1  # whole groups, in order
            start, end = sp.carrier_slices(part["image_grid_thw"], part["num_images"], 2, 4)[g // 2]
            assert torch.all(part["pixel_values"][start:end] == rows[g] // 2)  # the group's own pixels
        assert part["pixel_values"].shape == (8, 3)  # one copy per group
        assert torch.equal(part["advantages"], torch.tensor(rows, dtype=torch.float))
        seen += rows
    assert sorted(seen) == list(range(8))


def test_split_generation_batch_refuses_broken_groups():
    with pytest.raises(ValueError, match="whole groups"):
        split_generation_batch(_shared_output(G=2, groups=3), 2, 2)


def test_grouped_processor_processes_each_prompt_once(tiny_qwen25_dir):
    from PIL import Image

    from vlm_r1.modules import load_processor

    processor = load_processor(tiny_qwen25_dir)
    images = [[Image.new("RGB", (120, 90), (10, 200, 30))], [Image.new("RGB", (64, 160), (250, 0, 9))]]
    texts = [
        processor.apply_chat_template(
            [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": t}]}],
            add_generation_prompt=True,
            tokenize=False,
        )
        for t in ("Click A", "Open the long menu")
    ]
    G = 3
    calls = []

    class Counting:
        def __call__(self, **kw):
            calls.append(len(kw["text"]))
            return processor(**kw)

    naive = processor(
        images=[i for i in images for _ in range(G)],
        text=[t for t in texts for _ in range(G)],
        padding=True,
        return_tensors="pt",
    )
    grouped = GroupedProcessor(Counting(), G)(
        images=[i for i in images for _ in range(G)],
        text=[t for t in texts for _ in range(G)],
        padding=True,
        return_tensors="pt",
    )
    assert calls == [2]
    for key in ("input_ids", "attention_mask", "mm_token_type_ids", "image_grid_thw"):
        assert torch.equal(grouped[key], naive[key]), key
    assert grouped["pixel_values"].shape[0] * G == naive["pixel_values"].shape[0]
    assert torch.equal(
        sp.expand_pixel_values(grouped["pixel_values"], grouped["image_grid_thw"], [1] * 6, G), naive["pixel_values"]
    )
