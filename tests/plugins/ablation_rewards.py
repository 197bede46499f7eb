"""Deterministic reward plugins for the dynamic-sampling tests ('ablation_rewards:<function>' specs)."""


def is_flat_prompt(sample_id: str) -> bool:
    """The prompts :func:`split_signal_reward` scores with one constant: sample ids ending in an even number."""
    return int(str(sample_id).rsplit(":", 1)[-1]) % 2 == 0


def split_signal_reward(completions, sample_id, **kwargs):
    """0.0 for every completion of a 'flat' prompt (:func:`is_flat_prompt`: its group has zero reward std); for the
    other prompts, the completion's position in this call (0, 1, 2, ...). A group that lies on one process gets
    distinct consecutive rewards, hence non-zero std and (for an even group size) a non-zero advantage on every row."""
    return [0.0 if is_flat_prompt(s) else float(i) for i, s in enumerate(sample_id)]


def constant_reward(completions, **kwargs):
    """1.0 for everything: every group has zero reward std."""
    return [1.0] * len(completions)
