"""``gui-grounding toy zoom`` (issue 30): one-shot GRPO vs zoom-tool GRPO, and a random-reward control of the zoom arm,
on a toy set whose targets are too small to resolve at the pixel budget: 448-px screens (a 4 x 4 grid of grey
panels, each with the same gradient inside: ``background="tiles"`` of :func:`gui_grounding.data.synthetic.make_synthetic`)
with one 17-22 px coloured button, sent at 112 px (4x smaller: the button is a 4-6 px blob); the instruction names the
button's colour and cell ("Click the red button in row 2 column 3": where to zoom, not where to click); a crop of one
cell is sent at its own 112 px (the button at full size, the cell's gradient a position cue inside it). The runs are real ``python -m vlm_r1.sft`` /
``python -m vlm_r1.grpo_jsonl`` commands (:class:`gui_grounding.ops.toy.ToyExperiments`' runner); held-out click
accuracy is ``gui-grounding eval`` (greedy for one-shot, ``--tts zoom-tool`` for the zoom policy). Writes
``OUT/zoom/results.json`` and ``results.md``.
"""

from __future__ import annotations

import math
import os
from dataclasses import asdict, dataclass, field

from groundwork.argtypes import SEED
from gui_grounding.data.synthetic import SyntheticConfig
from gui_grounding.eval.run import run_eval
from gui_grounding.eval.stats import wilson_interval
from gui_grounding.eval.tts import TTSConfig
from gui_grounding.ops.toy import DEMO_FAST_FLAGS, RANDOM_CONTROL, ToyExperiments, ToyRecipe, toy_objective

# ---- the zoom study (issue 30): one-shot GRPO vs zoom-tool GRPO where the targets are too small to resolve -----------
# the zoom toy's pixel budget: a 448-px screen is sent at 112 px (4x smaller on each side), a 224-px crop at 112 px (2x)
ZOOM_BUDGET_FLAGS = ["--min_pixels", "3136", "--max_pixels", str(112 * 112)]
ZOOM_REWARDS = ["--reward_funcs", "click", "zoom_tool", "--reward_weights", "1", "0.25"]


@dataclass
class ZoomRecipe:
    """Settings of ``gui-grounding toy zoom`` (sizes chosen to fit about 1.5 hours on 2 CPU cores: the zoom SFT takes
    about 4.5 s per step of 16 rows, a zoom GRPO step of 32 rollouts about 10 s).

    Attributes:
        data: :class:`gui_grounding.data.synthetic.SyntheticConfig` fields (``background="tiles"``, ``name_cell``).
        sft_epochs, sft_lr, sft_batch: the two warm starts (one-shot rows; zoom rows: a call and an answer in the crop
            per sample), trained once and shared by every seed.
        grpo_steps, grpo_lr, prompts_per_step, num_generations: GRPO, the same for both arms and the control.
        one_shot_length, zoom_length: ``--max_completion_length`` (the zoom arm bounds each generated turn; its call
            is about 40 tokens of the tiny tokenizer).
        zoom_grid: the SFT window: the cell of this grid that holds the target (the screen's own 4 x 4 cells).
        seeds: GRPO seeds.
    """

    data: dict = field(
        default_factory=lambda: {
            "num_train": 1000,
            "num_test": 200,
            "width": 448,
            "height": 448,
            "cols": 4,
            "rows": 4,
            "buttons_per_image": 1,
            "min_fill": 0.15,
            "max_fill": 0.2,
            "background": "tiles",
            "name_cell": True,
        }
    )
    sft_epochs: float = 4.0
    sft_lr: float = 2e-3
    sft_batch: int = 16
    grpo_steps: int = 30
    grpo_lr: float = 5e-4
    prompts_per_step: int = 4
    num_generations: int = 8
    one_shot_length: int = 12
    zoom_length: int = 48
    zoom_grid: int = 4
    seeds: tuple = (42, 1, 2)


def pooled_interval(hits: list[int], total: int) -> list[float] | None:
    """The Wilson 95% interval (``gui_grounding.eval.stats.wilson_interval``, in %) of all seeds' test answers
    pooled (``hits``: correct answers per seed, each of ``total`` samples)."""
    ci = wilson_interval(sum(hits), total * len(hits))
    return [round(v, 1) for v in ci] if ci else None


def seed_interval(values: list[float]) -> list[float]:
    """Mean +- t(0.975, n-1) * sd / sqrt(n) of per-seed accuracies (%), the 95% interval across seeds (n >= 2)."""
    n = len(values)
    mean = sum(values) / n
    if n < 2:
        return [mean, mean]
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    t = {2: 12.706, 3: 4.303, 4: 3.182, 5: 2.776, 6: 2.571, 7: 2.447, 8: 2.365, 9: 2.306, 10: 2.262}.get(n, 1.96)
    return [round(mean - t * sd / math.sqrt(n), 1), round(mean + t * sd / math.sqrt(n), 1)]


class ZoomToyExperiments(ToyExperiments):
    """``gui-grounding toy zoom``: the zoom toy set (:func:`gui_grounding.data.synthetic.make_synthetic` with ``background="tiles"`` and ``name_cell``) under a
    budget that shows the screen 4x smaller; SFT warm starts for the one-shot and the zoom-tool prompt, then per seed
    GRPO of each arm and a random-reward control of the zoom arm; held-out click accuracy by ``gui-grounding eval``
    (greedy for one-shot, ``--tts zoom-tool`` for the zoom policy, which also records the same checkpoint's
    answers without the tool)."""

    def __init__(self, out_dir: str, recipe: ZoomRecipe | None = None):
        super().__init__(out_dir)
        self.zoom = recipe or ZoomRecipe()

    @property
    def data_dir(self) -> str:
        return os.path.join(self.out, "zoom_synthetic")

    def _tiny_options(self) -> dict:
        """The tiny tokenizer also learns Qwen's tool-call format (``vlm_r1.tiny_parts.TOOL_CORPUS``): the prompt with
        the tool costs about 300 tokens instead of 650."""
        return {"tool_format": True}

    def _data_config(self) -> SyntheticConfig:
        return SyntheticConfig(**self.zoom.data)

    def _flags(self, zoom: bool, seed: int) -> list[str]:
        tool = ["--zoom_tool", "true", "--zoom_sft_grid", str(self.zoom.zoom_grid)] if zoom else []
        return [*ZOOM_BUDGET_FLAGS, *tool, "--eval_strategy", "no", "--seed", str(seed), *DEMO_FAST_FLAGS]

    def warm(self, zoom: bool) -> str:
        z = self.zoom
        flags = {
            "num_train_epochs": z.sft_epochs,
            "per_device_train_batch_size": z.sft_batch,
            "learning_rate": z.sft_lr,
        }
        name = "zoom_sft_tool" if zoom else "zoom_sft_one_shot"
        out, _ = self._launch("vlm_r1.sft", name, self.model_dir, "non_thinking", flags, self._flags(zoom, 42))
        return out

    def train(self, name: str, base: str, zoom: bool, seed: int, rewards: list[str]) -> str:
        z = self.zoom
        flags = {
            "max_steps": z.grpo_steps,
            "per_device_train_batch_size": z.prompts_per_step * z.num_generations,
            "num_generations": z.num_generations,
            "max_completion_length": z.zoom_length if zoom else z.one_shot_length,
            "learning_rate": z.grpo_lr,
        }
        extra = [*toy_objective(rewards), *rewards, *self._flags(zoom, seed)]
        out, _ = self._launch("vlm_r1.grpo_jsonl", name, base, "non_thinking", flags, extra)
        return out

    def evaluate(self, name: str, model: str, zoom: bool) -> dict:
        """Held-out click accuracy of ``model``: ``{"accuracy", "hits", "total", "greedy_accuracy", "zoomed"}``."""
        cfg = TTSConfig(mode="zoom-tool" if zoom else "greedy", max_zoom_calls=1)
        doc = run_eval(
            "canonical",
            os.path.join(self.data_dir, "test.jsonl"),
            os.path.join(self.out, "zoom_eval", name),
            model=model,
            backend="hf",
            tts=cfg,
            batch_size=16,
            max_new_tokens=self.zoom.zoom_length if zoom else self.zoom.one_shot_length,
        )
        overall = doc["overall"]
        info = (doc.get("tts") or {}).get("zoom_tool") or {}
        return {
            "accuracy": overall["accuracy"],
            "hits": overall["num_correct"],
            "total": overall["num_total"],
            "greedy_accuracy": (doc.get("greedy") or doc)["overall"]["accuracy"],
            "zoomed": info.get("zoomed_share"),
        }

    def run(self) -> dict:
        self.prepare()
        z = self.zoom
        starts = {"one_shot": self.warm(False), "zoom": self.warm(True)}
        results = {"recipe": asdict(z), "start": {}, "arms": {"one_shot": [], "zoom": [], "control": []}}
        results["start"]["one_shot"] = self.evaluate("start_one_shot", starts["one_shot"], False)
        results["start"]["zoom"] = self.evaluate("start_zoom", starts["zoom"], True)
        arms = (
            ("one_shot", False, ["--reward_funcs", "click"]),
            ("zoom", True, ZOOM_REWARDS),
            ("control", True, RANDOM_CONTROL),
        )
        for seed in z.seeds:
            for arm, zoom, rewards in arms:
                base = starts["zoom" if zoom else "one_shot"]
                run_dir = self.train(f"zoom_{arm}_s{seed}", base, zoom, seed, rewards)
                res = self.evaluate(f"{arm}_s{seed}", run_dir, zoom)
                results["arms"][arm].append({"seed": seed, **res})
                self._write_zoom(results)
        return results

    def _write_zoom(self, results: dict) -> None:
        rows = []
        start = results["start"]
        for arm, label in (
            ("one_shot", "one-shot GRPO"),
            ("zoom", "zoom-tool GRPO"),
            ("control", "zoom-tool GRPO, random reward (control)"),
        ):
            runs = results["arms"][arm]
            if not runs:
                continue
            accs = [r["accuracy"] for r in runs]
            mean = sum(accs) / len(accs)
            pooled = pooled_interval([r["hits"] for r in runs], runs[0]["total"])
            across = seed_interval(accs)
            begin = start["zoom" if arm != "one_shot" else "one_shot"]["accuracy"]
            zoomed = [r["zoomed"] for r in runs if r.get("zoomed") is not None]
            rows.append(
                f"| {label} | {', '.join(f'{a:.1f}' for a in accs)} | {mean:.1f} | {pooled} | {across} | "
                f"{begin:.1f} | {(sum(zoomed) / len(zoomed) * 100 if zoomed else 0):.0f}% |"
            )
            results[f"summary_{arm}"] = {"mean": mean, "pooled_ci95": pooled, "seed_ci95": across, "start": begin}
        table = [
            "| arm | test click accuracy per seed (%) | mean | 95% CI, answers pooled (Wilson) | 95% CI across seeds (t) "
            "| SFT start (%) | answers that zoomed |",
            "|---|---|---:|---|---|---:|---:|",
            *rows,
        ]
        z = self.zoom
        intro = (
            f"Zoom toy: {z.data['num_train']} training screens of 448 px sent at 112 px (4x smaller), a 4x4 grid of grey "
            f"panels with one 17-22 px coloured button, the instruction naming its colour and cell; the zoom SFT calls "
            f"the button's cell (a 112-px crop, sent at "
            f"full size); SFT {z.sft_epochs} epochs per arm (shared by the "
            f"seeds), GRPO {z.grpo_steps} steps of {z.prompts_per_step} prompts x {z.num_generations} rollouts, seeds "
            f"{list(z.seeds)}; {results['start']['one_shot']['total']} held-out samples. The control is the zoom arm "
            "with a coin-flip reward (the click reward logged at weight 0)."
        )
        self._write_results("zoom", results, intro, table)


def run_from_args(args) -> dict:
    """``gui-grounding toy zoom``: :class:`ZoomToyExperiments` under ``--out`` with ``--seeds`` and ``--grpo-steps``
    (when given; else :class:`ZoomRecipe`'s)."""
    recipe = ZoomRecipe()
    seeds = tuple(SEED(s) for s in args.seeds.split(",")) if args.seeds else recipe.seeds
    steps = args.grpo_steps if args.grpo_steps != ToyRecipe().grpo_steps else recipe.grpo_steps
    return ZoomToyExperiments(args.out, ZoomRecipe(seeds=seeds, grpo_steps=steps)).run()
