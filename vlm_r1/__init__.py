"""VLM-R1-compatible GRPO core built on ``trl.GRPOTrainer``.

Keeps upstream VLM-R1's user-facing surface (``python -m vlm_r1.grpo_jsonl`` flags, JSONL format, reward names, VLM
module interface) on top of TRL. Knows nothing about GUIs: task and reward plugins (e.g. ``gui_grounding``) register
through the entry-point groups ``vlm_r1.tasks`` and ``vlm_r1.rewards``.
"""

__version__ = "0.1.0"
