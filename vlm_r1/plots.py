"""Training curves as a picture: reward, reward spread, zero-signal groups, completion length and loss per step.

Reads the ``log_history`` of a ``trainer_state.json`` (HF Trainer) and writes one PNG, the view researchers otherwise
open TensorBoard for (GTA1 watches the reward rise over optimisation steps).
"""

from __future__ import annotations

from groundwork.outputs import atomic_writer
from groundwork.records import load_json_file

PANELS = (
    ("reward", "reward (mean over rollouts)"),
    ("reward_std", "reward std"),
    ("frac_reward_zero_std", "fraction of groups with zero reward variance"),
    ("completions/mean_length", "completion length (tokens)"),
    ("loss", "loss"),
)


def plot_training_curves(trainer_state_path: str, out_png: str, title: str | None = None) -> str:
    """Plot the per-step metrics of ``trainer_state_path`` into ``out_png``; also one line per ``rewards/*/mean``.

    Raises:
        ValueError: the log history has no training steps.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    state = load_json_file(trainer_state_path, "trainer state", allow_nan=True)  # transformers writes NaN losses
    log = state.get("log_history", []) if isinstance(state, dict) else []
    history = [h for h in log if isinstance(h, dict) and "step" in h and "loss" in h]
    if not history:
        raise ValueError(f"{trainer_state_path}: no training steps in log_history")
    steps = [h["step"] for h in history]
    fig, grid = plt.subplots(2, 3, figsize=(13, 6.5))
    axes = grid.ravel()
    axes[-1].axis("off")
    for ax, (key, label) in zip(axes[: len(PANELS)], PANELS, strict=True):
        if key == "reward":
            for name in sorted({k for h in history for k in h if k.startswith("rewards/") and k.endswith("/mean")}):
                ax.plot(steps, [h.get(name) for h in history], lw=1, alpha=0.7, label=name.split("/")[1])
        ax.plot(steps, [h.get(key) for h in history], lw=2, color="black", label=key)
        ax.set_title(label, fontsize=9)
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
        if key == "reward":
            ax.legend(fontsize=7)
    fig.suptitle(title or trainer_state_path, fontsize=10)
    try:
        fig.tight_layout()
        with atomic_writer(out_png, "wb") as f:  # a unique temporary name, then renamed (groundwork.outputs)
            fig.savefig(f, format="png", dpi=100)
    finally:
        plt.close(fig)
    return out_png
