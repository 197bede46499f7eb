"""Reward plugins loaded by tests through a 'package.module:function' spec (no packaging needed)."""


def completion_length_reward(completions, **kwargs):
    """Length of each completion / 100: varies within a group, so GRPO gets a non-zero advantage and gradient."""
    texts = [c if isinstance(c, str) else c[-1]["content"] for c in completions]
    return [len(t) / 100.0 for t in texts]
