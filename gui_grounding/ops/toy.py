"""Learning experiments on the synthetic toy set (``gui-grounding toy``): proof that the pipeline learns, SFT vs GRPO,
and the seed's ablations, each as real runs of ``python -m vlm_r1.sft`` / ``python -m vlm_r1.grpo_jsonl``.

Experiments (each writes ``OUT/<experiment>/results.json``, ``results.md`` and a PNG of the curves; ``tts`` writes
the results and one eval folder per mode):

* ``learning``: tiny model -> SFT warm start -> GRPO with the ``click`` reward, and the same GRPO with a deliberately
  broken reward (:func:`random_reward`: a coin flip that ignores the answer). Greedy test click accuracy is measured
  after SFT (the start) and every ``eval_steps`` GRPO steps. A working pipeline rises with ``click`` and stays flat
  with the random reward (``tests/test_learning.py`` asserts both).
* ``sft-vs-grpo``: same data and the same number of optimisation steps after the shared short SFT: SFT alone (more
  SFT steps), SFT + GRPO, and GRPO from a weaker start (a shorter SFT that learned the answer format but little
  skill, then GRPO for the remaining steps).
* ``tts``: greedy vs test-time grounding (``gui-grounding eval --tts``: consensus with K=8 and K=16, zoom,
  zoom+consensus) on the toy test set with the cost of each (:meth:`ToyExperiments.tts`).
* ``ablations``: GRPO from the same SFT checkpoint with one switch changed per run (reward function, KL, rollouts per
  prompt, prompts per step, dynamic sampling, loss preset), table of final accuracy, reward curve and completion length.

The stages share one seeded synthetic set and one tiny checkpoint under ``OUT/`` and reuse them when present (made
by the same code and libraries: :meth:`ToyExperiments.prepare`); a stage is reused when the same command already ran
on the same inputs (:func:`_run`). A seeded run repeats bit for bit on one machine; what it depends on besides the
seed is :func:`environment_fingerprint`, recorded in every ``results.json`` (docs/TRAINING.md "Why the toy numbers
moved, and what is pinned now").
"""

from __future__ import annotations

import logging
import os
import random
import shutil
import sys
import time
from dataclasses import asdict, dataclass, field

from groundwork import outputs
from groundwork.argtypes import SEED, add_number_flag, flag_values, integer, number
from groundwork.records import load_json_file
from gui_grounding.data.synthetic import SyntheticConfig, make_synthetic
from gui_grounding.eval.run import run_eval
from gui_grounding.eval.tts import TTSConfig
from gui_grounding.ops.toy_runs import _read_stamp, _run, environment_fingerprint, file_digest
from vlm_r1.tiny import build_tiny_model

logger = logging.getLogger(__name__)


def random_reward(completions: list, **kwargs) -> list[float]:
    """Deliberately broken reward for control runs: 1.0 or 0.0 by a seeded coin flip, independent of the answer.

    GRPO with this reward has the same advantage statistics as with a real reward but no information about the task,
    so test accuracy must not rise (``gui-grounding toy learning``). Use as
    ``--reward_funcs gui_grounding.ops.toy:random_reward``.

    The coin is Python's global ``random``, which the trainer seeds from ``--seed`` (``transformers.set_seed``), so the
    control follows the run's seed (it was a module-level ``random.Random(0)``: the same coins for every seed, and a
    stream that carried over between runs in one process).
    """
    return [float(random.random() < 0.5) for _ in completions]


@dataclass
class ToyRecipe:
    """Settings of the toy experiments (defaults: the measured recipe in docs/TRAINING.md, about 10 CPU minutes for
    ``learning`` on 2 cores).

    Attributes:
        synthetic: data settings (``gui_grounding.data.synthetic.SyntheticConfig`` fields).
        arch, model_seed: tiny model architecture and weight seed.
        sft_epochs, sft_lr, sft_batch: warm-start SFT (epochs over the training split).
        weak_sft_epochs: SFT epochs of the "weaker start" in ``sft-vs-grpo`` (format, little skill).
        grpo_steps, grpo_lr, prompts_per_step, num_generations, max_completion_length: GRPO settings (one process;
            ``prompts_per_step * num_generations`` rollouts per step).
        eval_steps, eval_samples: greedy test click accuracy every ``eval_steps`` steps on the first ``eval_samples``
            test samples.
        seed: training seed (data order, sampling).
    """

    synthetic: dict = field(
        default_factory=lambda: {"num_train": 1000, "num_test": 200, "buttons_per_image": 1, "background": "panels"}
    )
    arch: str = "qwen2_5_vl"
    model_seed: int = 0
    sft_epochs: float = 4.0
    sft_lr: float = 2e-3
    sft_batch: int = 16
    weak_sft_epochs: float = 1.0
    grpo_steps: int = 150
    # 5e-4, measured (docs/TRAINING.md "learning"): at 1e-3 the same seed's test accuracy peaked at step 50 and fell
    # back to +3.5 points by step 150 on the 2026-11-27 stack (identical at ef89a1b), at 5e-4 it rose to +21
    grpo_lr: float = 5e-4
    prompts_per_step: int = 16
    num_generations: int = 8
    max_completion_length: int = 12
    eval_steps: int = 50
    eval_samples: int = 200
    seed: int = 42
    grpo_warmup_steps: int = 0


# The demo's learning stage (`gui-grounding toy demo`, run by run_scripts/demo.sh): sizes chosen by measurement so the
# rollout hit rate rises on every seed tried while the stage stays under 2 minutes on 2 idle cores (README
# "Measurements": SFT 35 s, GRPO 66 s; hit rate 0.15 -> 0.21 / 0.16 -> 0.20 / 0.17 -> 0.24 for GRPO seeds 42, 1, 2).
# The measured recipe's SFT (4 epochs) and GRPO (16 prompts x 8 rollouts, lr 1e-3) with fewer GRPO steps; twice the
# learning rate (2e-3, even with 5 warm-up steps) and 3e-3 made the hit rate fall, 8 prompts per step left it in noise.
DEMO_RECIPE = ToyRecipe(
    sft_epochs=4.0, grpo_steps=60, prompts_per_step=16, grpo_lr=1e-3, eval_steps=10**6, eval_samples=100
)
# `gui-grounding toy tts`: the test-time runs (name, TTSConfig settings). The toy's 112-px screens have ~30-px buttons,
# so the voting square is 10 px (GUI-RC's 50 px is for full-resolution screenshots; --tts-region)
TTS_RUNS = [
    ("greedy", {"mode": "greedy"}),
    ("consensus_k8", {"mode": "consensus", "samples": 8}),
    ("consensus_k16", {"mode": "consensus", "samples": 16}),
    ("zoom", {"mode": "zoom"}),
    ("zoom_consensus_k8", {"mode": "zoom+consensus", "samples": 8}),
]
TOY_TTS_REGION = 10.0
# tiny model: activation checkpointing only costs time (TRL's SFT default is on)
DEMO_FAST_FLAGS = ["--activation_checkpointing", "false"]


def rise_summary(hits: list[tuple[int, float]], start_accuracy: float, end_accuracy: float, eval_samples: int) -> dict:
    """The rise of a GRPO run in numbers: mean rollout hit rate (the click reward) of the first and the last fifth of
    the logged steps (at least one step each), and greedy test click accuracy before and after; ``line`` says it in
    one sentence."""
    values = [v for _, v in hits]
    if not values:
        raise ValueError("no logged click reward: the run logged no training step")
    k = max(1, len(values) // 5)
    first, last = sum(values[:k]) / k, sum(values[-k:]) / k
    line = (
        f"toy GRPO reward (click hit rate of the rollouts): {first:.2f} -> {last:.2f} over {hits[-1][0]} steps "
        f"(mean of the first / last {k} steps); test click accuracy (greedy, {eval_samples} screens): "
        f"{start_accuracy:.1f}% -> {end_accuracy:.1f}%"
    )
    return {
        "hit_first": first,
        "hit_last": last,
        "steps": hits[-1][0],
        "window": k,
        "accuracy_start": start_accuracy,
        "accuracy_end": end_accuracy,
        "line": line,
    }


def _history(run_dir: str) -> list[dict]:
    """The ``log_history`` of a run's ``trainer_state.json`` (transformers writes NaN as ``NaN``)."""
    state = load_json_file(os.path.join(run_dir, "trainer_state.json"), "trainer state", allow_nan=True)
    return state["log_history"]


def accuracy_curve(run_dir: str, offset: int = 0) -> list[tuple[int, float]]:
    """``[(step, eval_click/accuracy %), ...]`` from a run's ``trainer_state.json`` (steps shifted by ``offset``)."""
    return [(h["step"] + offset, h["eval_click/accuracy"]) for h in _history(run_dir) if "eval_click/accuracy" in h]


def reward_curve(run_dir: str) -> list[tuple[int, float]]:
    """``[(step, mean reward of the logged steps), ...]`` of a GRPO run."""
    return [(h["step"], h["reward"]) for h in _history(run_dir) if "reward" in h and "loss" in h]


# The toy's GRPO objective, pinned: the results in README.md were measured with TRL 1.16's defaults (no KL, DAPO
# token-level loss, no top-k), before the core's defaults became upstream VLM-R1's (beta 0.04, grpo loss, top_k 50).
TOY_GRPO_OBJECTIVE = {"--beta": "0", "--loss_type": "dapo", "--top_k": "0"}


def toy_objective(extra) -> list[str]:
    """:data:`TOY_GRPO_OBJECTIVE` as flags, minus those ``extra`` sets itself (a ``--loss_preset`` sets beta and
    loss_type, so they are left to it)."""
    given = set(extra)
    if "--loss_preset" in given:
        given |= {"--beta", "--loss_type"}
    return [part for flag, value in TOY_GRPO_OBJECTIVE.items() if flag not in given for part in (flag, value)]


RANDOM_CONTROL = ["--reward_funcs", "gui_grounding.ops.toy:random_reward", "click", "--reward_weights", "1", "0"]


def hit_rate_curve(run_dir: str) -> list[tuple[int, float]]:
    """``[(step, mean click reward of the step's rollouts), ...]``: the training-time hit rate (logged also when
    the click reward has weight 0, as in the random-reward control)."""
    key = "rewards/click_reward/mean"
    return [(h["step"], h[key]) for h in _history(run_dir) if key in h]


class ToyExperiments:
    """Runs the toy experiments under ``out_dir`` with ``recipe`` (see the module docstring)."""

    def __init__(self, out_dir: str, recipe: ToyRecipe | None = None):
        self.out = out_dir
        self.recipe = recipe or ToyRecipe()
        os.makedirs(out_dir, exist_ok=True)

    # shared inputs -------------------------------------------------------------------------------------------------
    @property
    def data_dir(self) -> str:
        return os.path.join(self.out, "synthetic")

    @property
    def model_dir(self) -> str:
        return os.path.join(self.out, "tiny")

    def prepare(self) -> None:
        """Write the tiny model and the synthetic set once. Reused when ``OUT/prepared.json`` says they were made with
        this recipe's data settings, architecture and weight seed by the same code and libraries
        (:func:`environment_fingerprint`); otherwise both are rebuilt (a tiny model or a set written by another commit
        is not reused under the same paths)."""

        r = self.recipe
        cfg = self._data_config()
        want = {
            "synthetic": asdict(cfg),
            "arch": r.arch,
            "model_seed": r.model_seed,
            "tiny": self._tiny_options(),
            "environment": environment_fingerprint(),
        }
        stamp = os.path.join(self.out, "prepared.json")
        present = all(
            os.path.exists(path) for path in (os.path.join(self.model_dir, "config.json"), *self._data_files())
        )
        if present and _read_stamp(stamp) == want:
            return
        for folder in (self.data_dir, self.model_dir):
            shutil.rmtree(folder, ignore_errors=True)
        self._make_data(cfg)
        build_tiny_model(r.arch, self.model_dir, seed=r.model_seed, **self._tiny_options())
        outputs.write_json(stamp, want)

    def _data_config(self):
        """The data settings :meth:`prepare` writes and stamps (the toy's :class:`SyntheticConfig`)."""
        return SyntheticConfig(**self.recipe.synthetic)

    def _tiny_options(self) -> dict:
        """More ``vlm_r1.tiny.build_tiny_model`` arguments for this experiment's tiny model (none)."""
        return {}

    def _make_data(self, cfg) -> None:
        """Write the data set of ``cfg`` to :attr:`data_dir`."""
        make_synthetic(self.data_dir, cfg)

    def _data_files(self) -> list[str]:
        return [os.path.join(self.data_dir, name) for name in ("train.jsonl", "test.jsonl")]

    def _inputs(self, base: str) -> dict:
        """What a stage trained from ``base`` depends on besides its command (:func:`_run`'s ``inputs``): digests
        of the base checkpoint's weights and of the data files, and :func:`environment_fingerprint`."""
        weights = sorted(name for name in os.listdir(base) if name.endswith(".safetensors"))
        return {
            "base": {name: file_digest(os.path.join(base, name)) for name in weights},
            "data": {os.path.basename(path): file_digest(path) for path in self._data_files()},
            "environment": environment_fingerprint(),
        }

    def _common(self, out_dir: str, prompt_mode: str) -> list[str]:
        r = self.recipe
        return [
            "--task_type",
            "gui_grounding",
            "--data_file_paths",
            os.path.join(self.data_dir, "train.jsonl"),
            "--eval_data_file_paths",
            os.path.join(self.data_dir, "test.jsonl"),
            "--eval_strategy",
            "steps",
            "--eval_steps",
            str(r.eval_steps),
            "--eval_max_samples",
            str(r.eval_samples),
            "--output_dir",
            out_dir,
            "--save_strategy",
            "no",
            "--report_to",
            "none",
            "--disable_tqdm",
            "true",
            "--seed",
            str(r.seed),
            "--prompt_mode",
            prompt_mode,
            "--logging_steps",
            str(min(5, r.grpo_steps)),
        ]

    def _launch(
        self, module: str, name: str, base: str, prompt_mode: str, flags: dict, extra: list
    ) -> tuple[str, float]:
        """Train ``python -m <module>`` from ``base`` into ``OUT/runs/<name>`` (log: ``<that>.log``): the model, the
        shared toy flags (:meth:`_common`), then ``--<key> <value>`` for each of ``flags`` and the ``extra`` words
        (the one command shape of :meth:`sft` and :meth:`grpo`). Returns ``(run folder, seconds)``."""
        out_dir = os.path.join(self.out, "runs", name)
        words = [word for key, value in flags.items() for word in (f"--{key}", str(value))]
        cmd = [sys.executable, "-m", module, "--model_name_or_path", base, *self._common(out_dir, prompt_mode)]
        return out_dir, _run([*cmd, *words, *extra], out_dir + ".log", self._inputs(base), out_dir)

    def sft(
        self,
        name: str,
        epochs: float,
        *,
        prompt_mode: str = "non_thinking",
        base: str | None = None,
        extra: list[str] = (),
    ) -> dict:
        """SFT ``base`` (default: the tiny model) for ``epochs`` (``extra``: more ``vlm_r1.sft`` flags); returns
        ``{dir, seconds, steps, accuracy}``."""
        r = self.recipe
        flags = {"num_train_epochs": epochs, "per_device_train_batch_size": r.sft_batch, "learning_rate": r.sft_lr}
        out_dir, seconds = self._launch("vlm_r1.sft", name, base or self.model_dir, prompt_mode, flags, [*extra])
        curve = accuracy_curve(out_dir)
        steps = max(h["step"] for h in _history(out_dir))
        return {"dir": out_dir, "seconds": round(seconds, 1), "steps": steps, "accuracy": curve[-1][1], "curve": curve}

    def grpo(
        self,
        name: str,
        base: str,
        *,
        steps: int | None = None,
        extra: list[str] = (),
        prompt_mode: str = "non_thinking",
    ) -> dict:
        """GRPO from checkpoint ``base``; returns ``{dir, seconds, accuracy, curve, rewards, mean_length}``."""
        r = self.recipe
        batch = r.prompts_per_step * r.num_generations
        flags = {
            "max_steps": steps or r.grpo_steps,
            "per_device_train_batch_size": batch,
            "per_device_eval_batch_size": batch,
            "num_generations": r.num_generations,
            "max_completion_length": r.max_completion_length,
            "learning_rate": r.grpo_lr,
        }
        out_dir, seconds = self._launch(
            "vlm_r1.grpo_jsonl", name, base, prompt_mode, flags, [*toy_objective(extra), *extra]
        )
        hist = _history(out_dir)
        lengths = [h["completions/mean_length"] for h in hist if "completions/mean_length" in h]
        return {
            "dir": out_dir,
            "seconds": round(seconds, 1),
            "accuracy": accuracy_curve(out_dir)[-1][1],
            "curve": accuracy_curve(out_dir),
            "rewards": reward_curve(out_dir),
            "hits": hit_rate_curve(out_dir),
            "mean_length": round(sum(lengths) / len(lengths), 2) if lengths else None,
        }

    # experiments ---------------------------------------------------------------------------------------------------
    def warm_start(self) -> dict:
        """The shared SFT warm start (``runs/sft``), run once."""
        if not hasattr(self, "_sft"):
            self._sft = self.sft("sft", self.recipe.sft_epochs)
        return self._sft

    def learning(self) -> dict:
        """SFT -> GRPO(click) vs SFT -> GRPO(random reward). Returns (and writes) the results."""
        self.prepare()
        sft = self.warm_start()
        click = self.grpo("grpo_click", sft["dir"], extra=["--reward_funcs", "click"])
        # the control logs the click reward too (weight 0: it does not reach the advantages) so both runs report the
        # hit rate of their own rollouts
        broken = self.grpo("grpo_random_reward", sft["dir"], extra=RANDOM_CONTROL)
        results = {
            "recipe": asdict(self.recipe),
            "start_accuracy": sft["accuracy"],
            "sft": sft,
            "runs": {"click": click, "random_reward": broken},
        }
        rows = [
            ("SFT warm start", sft["accuracy"], "-", sft["seconds"]),
            ("+ GRPO, click reward", click["accuracy"], click["accuracy"] - sft["accuracy"], click["seconds"]),
            (
                "+ GRPO, random reward (control)",
                broken["accuracy"],
                broken["accuracy"] - sft["accuracy"],
                broken["seconds"],
            ),
        ]
        table = ["| run | test click accuracy (%) | change (points) | wall (s) |", "|---|---:|---:|---:|"]
        table += [f"| {a} | {b} | {c if isinstance(c, str) else f'{c:+.0f}'} | {d} |" for a, b, c, d in rows]
        self._write("learning", results, table, {"click": click, "random reward": broken}, sft)
        return results

    def sft_vs_grpo(self) -> dict:
        """Same data, same optimisation steps after SFT: SFT alone vs SFT+GRPO vs GRPO from a weaker start."""
        self.prepare()
        r = self.recipe
        sft = self.warm_start()
        n_train = r.synthetic.get("num_train", 1000)
        steps_per_epoch = -(-n_train // r.sft_batch)
        total = sft["steps"] + r.grpo_steps
        sft_only = self.sft("sft_only", total / steps_per_epoch)
        plus = self.grpo("grpo_click", sft["dir"], extra=["--reward_funcs", "click"])
        weak = self.sft("sft_weak", r.weak_sft_epochs)
        weak_steps = total - weak["steps"]
        from_weak = self.grpo("grpo_from_weak", weak["dir"], steps=weak_steps, extra=["--reward_funcs", "click"])
        results = {
            "recipe": asdict(self.recipe),
            "total_steps": total,
            "runs": {"sft_only": sft_only, "sft_then_grpo": plus, "weak_sft": weak, "grpo_from_weak": from_weak},
        }
        rows = [
            ("SFT alone", f"{sft_only['steps']} SFT", sft_only["accuracy"], sft_only["seconds"]),
            (
                "SFT + GRPO",
                f"{sft['steps']} SFT + {r.grpo_steps} GRPO",
                plus["accuracy"],
                round(sft["seconds"] + plus["seconds"], 1),
            ),
            (
                "GRPO from a weaker start",
                f"{weak['steps']} SFT + {weak_steps} GRPO",
                from_weak["accuracy"],
                round(weak["seconds"] + from_weak["seconds"], 1),
            ),
        ]
        table = ["| recipe | optimisation steps | test click accuracy (%) | wall (s) |", "|---|---|---:|---:|"]
        table += [f"| {a} | {b} | {c} | {d} |" for a, b, c, d in rows]
        curves = {"SFT alone": sft_only, "SFT + GRPO": plus, "GRPO from weaker start": from_weak}
        self._write(
            "sft-vs-grpo",
            results,
            table,
            curves,
            sft,
            offsets={"SFT + GRPO": sft["steps"], "GRPO from weaker start": weak["steps"]},
            starts={
                "SFT + GRPO": (sft["steps"], sft["accuracy"]),
                "GRPO from weaker start": (weak["steps"], weak["accuracy"]),
            },
        )
        return results

    ABLATIONS: dict[str, list[str]] = {
        "click (GTA1, baseline)": ["--reward_funcs", "click"],
        "distance (MSE-like)": ["--reward_funcs", "distance"],
        "gaussian_point (GUI-G2)": ["--reward_funcs", "gaussian_point"],
        "click_distance_bonus (SE-GUI)": ["--reward_funcs", "click_distance_bonus"],
        "click + KL beta 0.04": ["--reward_funcs", "click", "--beta", "0.04", "--use_bias_correction_kl", "true"],
        "click, 4 rollouts per prompt": ["--reward_funcs", "click", "--num_generations", "4"],
        "click, 2 prompts per step (small batch)": ["--reward_funcs", "click", "--per_device_train_batch_size", "16"],
        "click + dynamic sampling": ["--reward_funcs", "click", "--dynamic_sampling", "true"],
        "click, loss preset vlm_r1": ["--reward_funcs", "click", "--loss_preset", "vlm_r1"],
        "random reward (control)": RANDOM_CONTROL,
    }

    def ablations(self, names: list[str] | None = None, thinking: bool = True) -> dict:
        """GRPO from the shared SFT checkpoint with one switch changed per run (see :attr:`ABLATIONS`); with
        ``thinking`` also SFT+GRPO in thinking mode (its own SFT, same epochs) with ``click`` + ``click_format``."""
        self.prepare()
        sft = self.warm_start()
        runs = {}
        for name in list(self.ABLATIONS) if names is None else names:
            extra = self.ABLATIONS[name]
            slug = "abl_" + "".join(ch if ch.isalnum() else "_" for ch in name.lower()).strip("_")
            # the baseline and the control are the `learning` runs: same command, reused when already trained
            slug = {"click (GTA1, baseline)": "grpo_click", "random reward (control)": "grpo_random_reward"}.get(
                name, slug
            )
            runs[name] = self.grpo(slug, sft["dir"], extra=list(extra))
        if thinking:
            think_sft = self.sft("sft_thinking", self.recipe.sft_epochs, prompt_mode="thinking")
            runs["thinking prompt (click + click_format)"] = self.grpo(
                "abl_thinking",
                think_sft["dir"],
                prompt_mode="thinking",
                extra=["--reward_funcs", "click", "click_format", "--max_completion_length", "48"],
            )
        table = [
            "| setting | final test click accuracy (%) | change vs SFT start | reward first -> last | "
            "mean completion length | wall (s) |",
            "|---|---:|---:|---|---:|---:|",
        ]
        for name, run in runs.items():
            rw = run["rewards"]
            trend = f"{rw[0][1]:.3f} -> {rw[-1][1]:.3f}" if rw else "not logged (fewer steps than --logging_steps)"
            table.append(
                f"| {name} | {run['accuracy']} | {run['accuracy'] - sft['accuracy']:+.0f} | {trend} | "
                f"{run['mean_length']} | {run['seconds']} |"
            )
        results = {"recipe": asdict(self.recipe), "start_accuracy": sft["accuracy"], "runs": runs}
        self._write("ablations", results, table, runs, sft)
        return results

    def demo(self) -> dict:
        """The short learning stage of ``run_scripts/demo.sh``: SFT warm start, then GRPO with the ``click`` reward,
        logged every step (:data:`DEMO_RECIPE` sizes). Writes ``OUT/demo/results.json``, ``results.md`` and
        ``curves.png``, prints :func:`rise_summary` and returns the results."""
        self.prepare()
        r = self.recipe
        sft = self.sft("demo_sft", r.sft_epochs, extra=DEMO_FAST_FLAGS)
        grpo = self.grpo(
            "demo_grpo",
            sft["dir"],
            extra=[
                "--reward_funcs",
                "click",
                "--logging_steps",
                "1",
                "--warmup_steps",
                str(r.grpo_warmup_steps),
                *DEMO_FAST_FLAGS,
            ],
        )
        rise = rise_summary(grpo["hits"], sft["accuracy"], grpo["accuracy"], r.eval_samples)
        results = {"recipe": asdict(r), "sft": sft, "grpo": grpo, "rise": rise}
        table = [
            "| stage | test click accuracy (%) | rollout hit rate, first -> last steps | wall (s) |",
            "|---|---:|---|---:|",
            f"| SFT warm start ({sft['steps']} steps) | {sft['accuracy']} | | {sft['seconds']} |",
            f"| + GRPO, click ({r.grpo_steps} steps) | {grpo['accuracy']} | {rise['hit_first']:.2f} -> "
            f"{rise['hit_last']:.2f} | {grpo['seconds']} |",
        ]
        self._write("demo", results, table, {"GRPO (click)": grpo}, sft)
        print(rise["line"])
        return results

    def tts(self, model: str | None = None) -> dict:
        """Test-time grounding on the toy test set (:data:`TTS_RUNS`): greedy, consensus (K=8, K=16), zoom and
        zoom+consensus, each one ``gui-grounding eval --tts`` run on the same checkpoint, with accuracy, the greedy
        accuracy of the same run, the cost per sample and the mean agreement. ``model``: a checkpoint; default the
        GRPO(click) model of ``toy learning`` when present under ``OUT/runs/grpo_click``, else the shared SFT warm
        start (trained once, reused when ``OUT/runs/sft`` holds it). Writes ``OUT/tts/results.{json,md}`` and each
        run's eval folder under ``OUT/tts/<name>/``."""

        self.prepare()
        if model is None:
            for name in ("grpo_click", "sft"):
                path = os.path.join(self.out, "runs", name)
                if os.path.exists(os.path.join(path, "config.json")):
                    model = path
                    break
            else:
                model = self.warm_start()["dir"]
        r = self.recipe
        results = {"model": model, "runs": {}}
        greedy_cost = None  # a greedy run records no cost; the test-time runs measure the same greedy pass
        for name, settings in TTS_RUNS:
            cfg = TTSConfig(seed=r.seed, region=TOY_TTS_REGION, **settings)
            t0 = time.time()
            doc = run_eval(
                "canonical",
                os.path.join(self.data_dir, "test.jsonl"),
                os.path.join(self.out, "tts", name),
                model=model,
                backend="hf",
                tts=cfg,
                batch_size=16,
                max_new_tokens=r.max_completion_length,
            )
            info = doc.get("tts") or {}
            if info and greedy_cost is None:
                greedy_cost = info["cost"]["greedy"]
            results["runs"][name] = {
                "config": cfg.to_dict(),
                "label": cfg.label(),
                "accuracy": doc["overall"]["accuracy"],
                "ci95": doc["overall"]["ci95"],
                "greedy_accuracy": (doc.get("greedy") or doc)["overall"]["accuracy"],
                "cost": (info.get("cost") or {}).get(cfg.mode),
                "agreement": (info.get("agreement") or {}).get("mean"),
                "wall_s": round(time.time() - t0, 1),
            }
        rows = []
        for run in results["runs"].values():
            cost = run["cost"] or greedy_cost or {}
            acc, ci, agreement = run["accuracy"], run["ci95"], run["agreement"]
            rows.append(
                f"| {run['label']} | {acc:.1f} ({ci[0]:.1f}-{ci[1]:.1f}) | {run['greedy_accuracy']:.1f} | "
                f"{cost.get('calls_per_sample', '-')} | {cost.get('sequences_per_sample', '-')} | "
                f"{cost.get('generated_tokens_per_sample', '-')} | {cost.get('wall_s_per_sample', '-')} | "
                f"{'-' if agreement is None else agreement} | {cost.get('wall_s', '-')} |"
            )
        table = [
            "| mode | test click accuracy % (95% CI) | greedy, same run % | model calls / sample | "
            "sequences / sample | generated tokens / sample | model wall s / sample | mean agreement | "
            "model wall s, all screens |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
            *rows,
        ]
        self._write_results(
            "tts",
            results,
            f"Checkpoint `{model}`; {r.synthetic['num_test']} test screens; seed "
            f"{r.seed}; voting square {TOY_TTS_REGION:g} px. The greedy row's cost is the greedy pass measured in "
            "the test-time runs.",
            table,
        )
        return results

    # output --------------------------------------------------------------------------------------------------------
    def _write(
        self, name: str, results: dict, table: list[str], curves: dict, sft: dict, offsets=None, starts=None
    ) -> None:
        out = self._write_results(
            name, results, f"SFT warm start: {sft['steps']} steps, test click accuracy {sft['accuracy']}%.", table
        )
        plot_curves(
            curves,
            os.path.join(out, "curves.png"),
            title=f"toy experiment: {name}",
            start=sft["accuracy"],
            offsets=offsets or {},
            starts=starts,
        )
        logger.info("wrote %s/curves.png", out)

    def _write_results(self, name: str, results: dict, intro: str, table: list[str]) -> str:
        """``OUT/<name>/results.json`` and ``results.md`` (``intro`` then ``table``); prints the table; returns
        the folder."""
        out = os.path.join(self.out, name)
        os.makedirs(out, exist_ok=True)
        # what the numbers' bits depend on besides the seed (docs/TRAINING.md "Why the toy numbers moved")
        results = {**results, "environment": environment_fingerprint()}
        outputs.write_json(os.path.join(out, "results.json"), results)  # atomic (groundwork.outputs)
        outputs.write_text(
            os.path.join(out, "results.md"), f"# toy experiment: {name}\n\n{intro}\n\n" + "\n".join(table) + "\n"
        )
        print("\n".join(table))
        logger.info("wrote %s/results.{json,md}", out)
        return out


def plot_curves(
    runs: dict,
    out_png: str,
    *,
    title: str,
    start: float | None = None,
    offsets: dict | None = None,
    starts: dict | None = None,
) -> str:
    """Two panels like the seed's TensorBoard view: GRPO rollout hit rate (or reward) per step, and greedy test click
    accuracy (%) per step, one line per run (``runs``: name -> result dict with ``hits``/``rewards`` and ``curve``).

    GRPO runs are drawn from ``offsets[name]`` (default 0) and start at ``start`` (the SFT accuracy), or at
    ``starts[name] = (step, accuracy)`` when given."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    offsets = offsets or {}
    fig, (ax_r, ax_a) = plt.subplots(1, 2, figsize=(12, 4.5))
    for name, run in runs.items():
        off = offsets.get(name, 0)
        train = run.get("hits") or run.get("rewards")
        if train:
            ax_r.plot([s + off for s, _ in train], [v for _, v in train], label=name, lw=1.5)
        first = (starts or {}).get(name, (off, start) if run.get("rewards") and start is not None else None)
        points = ([first] if first else []) + [(s + (off if run.get("rewards") else 0), v) for s, v in run["curve"]]
        ax_a.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=name, lw=1.5)
    ax_r.set_title("training: click hit rate of the rollouts (reward if no click)", fontsize=10)
    ax_a.set_title("test click accuracy (%, greedy)", fontsize=10)
    for ax in (ax_r, ax_a):
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(title, fontsize=11)
    try:
        fig.tight_layout()
        with outputs.atomic_writer(out_png, "wb") as f:  # a unique temporary name, then renamed (groundwork.outputs)
            fig.savefig(f, format="png", dpi=100)
    finally:
        plt.close(fig)
    return out_png


def register_cli(sub, extra: dict | None = None) -> None:
    """Add the ``toy`` subcommand to the ``gui-grounding`` parser. ``extra``: more experiments, name -> a function of
    the parsed arguments (``zoom``: :func:`gui_grounding.ops.toy_zoom.run_from_args`)."""
    extra = dict(extra or {})
    d = ToyRecipe()
    p = sub.add_parser(
        "toy",
        help="learning experiments on the synthetic toy set (learning, sft-vs-grpo, ablations)",
        description=__doc__.split("\n\n")[0],
    )
    p.add_argument(
        "experiment",
        choices=["learning", "sft-vs-grpo", "ablations", "demo", "tts", *extra],
        help="which experiment ('demo': the short SFT -> GRPO stage of run_scripts/demo.sh, its own sizes; 'tts': "
        "greedy vs test-time grounding (consensus K=8/16, zoom, zoom+consensus) on the toy test set, with the cost "
        "of each, on --model or the toy's GRPO / SFT checkpoint)",
    )
    p.add_argument("--out", required=True, help="output folder (shared tiny model + data reused between experiments)")
    steps, epochs, lr = integer(min=1, max=10_000_000), number(min=0, max=1_000_000), number(min=0, min_open=True)
    add_number_flag(p, "--grpo-steps", steps, d.grpo_steps, "GRPO steps per run")
    add_number_flag(p, "--sft-epochs", epochs, d.sft_epochs, "warm-start SFT epochs")
    add_number_flag(p, "--grpo-lr", lr, d.grpo_lr, "GRPO learning rate (toy scale, not GTA1's 1e-6)")
    add_number_flag(p, "--eval-steps", steps, d.eval_steps, "evaluate test accuracy every N steps")
    add_number_flag(p, "--seed", SEED, d.seed, "training seed")
    p.add_argument("--only", action="append", default=None, help="ablations: run only this setting (repeatable)")
    p.add_argument("--no-thinking", action="store_true", help="ablations: skip the thinking-mode SFT+GRPO pair")
    p.add_argument(
        "--model",
        default=None,
        help="tts: the checkpoint to evaluate (default: OUT/runs/grpo_click, else OUT/runs/sft, trained when absent)",
    )

    p.add_argument(
        "--seeds",
        default=None,
        help="zoom, refusal: comma-separated GRPO seeds (default 42,1,2); --grpo-steps, when given, sets the steps of "
        "every run",
    )

    def run(args) -> None:
        if args.experiment in extra:
            extra[args.experiment](args)
            return
        if args.experiment == "demo":  # DEMO_RECIPE's sizes; only the seed is taken from the command line
            from dataclasses import replace

            ToyExperiments(args.out, replace(DEMO_RECIPE, seed=args.seed)).demo()
            return
        recipe = ToyRecipe(**flag_values(args, "grpo_steps", "sft_epochs", "grpo_lr", "eval_steps", "seed"))
        exp = ToyExperiments(args.out, recipe)
        if args.experiment == "learning":
            exp.learning()
        elif args.experiment == "tts":
            exp.tts(args.model)
        elif args.experiment == "sft-vs-grpo":
            exp.sft_vs_grpo()
        else:
            exp.ablations(args.only, thinking=not args.no_thinking)

    p.set_defaults(func=run)
