"""StepStatsCallback: its keys reach log_history with plausible values in a short single-process GRPO run."""

from __future__ import annotations

import json
import sys

from tests.helpers.proc import run

# A plain trl.GRPOTrainer on the tiny Qwen2.5-VL (no project trainer, so the test does not depend on how grpo_jsonl
# registers the callback), 2 optimisation steps of 2 micro-batches each (exercises the gradient-accumulation path),
# two rewards, one named click_reward (aliased the way a task's metric_aliases asks) and one varying within a group
# (non-zero advantages).
SCRIPT = r"""
import json, sys
from datasets import Dataset
from PIL import Image
from trl import GRPOConfig, GRPOTrainer
from vlm_r1.callbacks import StepStatsCallback, STEP_STATS_KEYS
from vlm_r1.modules import load_model, load_processor

model_dir, out = sys.argv[1], sys.argv[2]

def click_reward(completions, **kwargs):
    return [float("(" in (c if isinstance(c, str) else c[-1]["content"])) for c in completions]

def length_reward(completions, **kwargs):
    return [len(c if isinstance(c, str) else c[-1]["content"]) / 100.0 for c in completions]

prompt = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "Click the search box"}]}]
rows = [{"prompt": prompt, "image": Image.new("RGB", (112, 84), (40 * i, 90, 200))} for i in range(4)]
args = GRPOConfig(output_dir=out, max_steps=2, per_device_train_batch_size=2, gradient_accumulation_steps=2,
                  num_generations=4, max_completion_length=8, logging_steps=1, report_to="none", use_cpu=True,
                  bf16=False, save_strategy="no", beta=0.0, seed=0)
trainer = GRPOTrainer(model=load_model(model_dir), reward_funcs=[click_reward, length_reward], args=args,
                      train_dataset=Dataset.from_list(rows), processing_class=load_processor(model_dir))
callback = StepStatsCallback(trainer, aliases={"click_accuracy": "rewards/click_reward/mean"})
trainer.add_callback(callback)
trainer.train()
assert trainer.reward_funcs[0] is click_reward, "reward functions not restored after training"
print("LOGS" + json.dumps(trainer.state.log_history))
"""


def test_step_stats_in_log_history(tiny_qwen25_dir, tmp_path):
    proc = run([sys.executable, "-c", SCRIPT, tiny_qwen25_dir, tmp_path / "run"])
    line = next(x for x in proc.stdout.splitlines() if x.startswith("LOGS"))
    logs = [h for h in json.loads(line[4:]) if "loss" in h]
    assert [h["step"] for h in logs] == [1, 2]
    eps = 1e-3
    for h in logs:
        gen, rew, train, step = (h[f"timing/{k}_s"] for k in ("generation", "reward", "training", "step"))
        assert min(gen, rew, train) >= 0 and step > 0, h
        assert gen + rew + train <= step + eps, h
        assert gen > 0 and train > 0, h  # both happen every step here (one generation per optimisation step)
        assert h["throughput/tokens_per_s"] > 0, h
        assert h["click_accuracy"] == h["rewards/click_reward/mean"]
        # already logged by TRL (reused, not recomputed)
        for key in ("reward", "reward_std", "frac_reward_zero_std", "completions/mean_length"):
            assert key in h, key
        assert 0.0 <= h["frac_reward_zero_std"] <= 1.0
