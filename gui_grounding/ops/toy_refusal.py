"""``gui-grounding toy refusal`` (issue 32): does the tiny model learn to refuse, and what does refusing cost its clicks?

The set: the toy's 112-px screens (one coloured button on grey panels, ``gui_grounding.data.synthetic``) where a
stated share (:attr:`RefusalRecipe.data` ``no_target_share``) names no element on the screen: by default
(``no_target_kind`` ``empty_screen``) that share of the screens is drawn without its button; with ``absent_colour``
the instruction names a colour on no button of the screen. Those records carry ``"no_target": true`` and no box.
Every run trains with ``--refusal_training true`` (the refusal clause in the prompt; the SFT target of a no-target
sample is the family's refusal answer, for the toy's gta1 family ours: ``(-1,-1)``). One SFT warm start, shared by
every seed, then per seed GRPO with the plain ``click`` reward (the control: no pay for abstaining, a refusal scores
0 everywhere) and GRPO with the refusal-aware ``click_refusal`` reward at each of
:attr:`RefusalRecipe.refusal_penalties` (1 for abstaining on a no-target sample; ``-penalty`` for abstaining on a
sample with a target). The runs are real ``python -m vlm_r1.sft`` / ``python -m vlm_r1.grpo_jsonl`` commands
(:class:`gui_grounding.ops.toy.ToyExperiments`' runner, reused when the same command already ran on the same inputs).

Held-out metrics are the training-time greedy eval at the end of each run (``gui_grounding.training.train_eval``):
``eval_click/accuracy_on_targets`` (% of the test samples with a target answered inside the box) and
``eval_click/refusal_recall`` / ``_precision`` / ``_share`` (abstentions on the no-target samples, among all abstentions, of all
answers). Writes ``OUT/refusal_toy/refusal/results.json`` and ``results.md``, and prints the table; the committed
results are ``docs/results/toy_refusal.{json,md}``.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field

from groundwork.argtypes import SEED
from groundwork.records import iter_records
from gui_grounding.data.synthetic import SyntheticConfig
from gui_grounding.ops.toy import DEMO_FAST_FLAGS, ToyExperiments, ToyRecipe, _history
from gui_grounding.ops.toy_zoom import seed_interval

#: the control arm: the plain click reward (a refusal scores 0 everywhere)
CONTROL = "click"


def arms(penalties) -> list[tuple[str, str, float | None, str]]:
    """``(key, reward, penalty, label)`` of each GRPO arm: the control, then ``click_refusal`` at each of
    ``penalties`` (key ``click_refusal`` for penalty 0, ``click_refusal_p<penalty>`` otherwise)."""
    out = [(CONTROL, "click", None, "GRPO, click reward (no refusal reward)")]
    for p in penalties:
        key = "click_refusal" if p == 0 else f"click_refusal_p{p:g}"
        out.append((key, "click_refusal", float(p), f"GRPO, click_refusal reward (penalty {p:g})"))
    return out


METRICS = (
    "eval_click/accuracy_on_targets",
    "eval_click/refusal_recall",
    "eval_click/refusal_precision",
    "eval_click/refusal_share",
)


@dataclass
class RefusalRecipe:
    """Settings of ``gui-grounding toy refusal`` (ours, sized to fit about an hour on 2 shared CPU cores).

    Attributes:
        data: :class:`gui_grounding.data.synthetic.SyntheticConfig` fields (``no_target_share``: the share of
            instructions that name no element on the screen).
        sft_epochs, sft_lr, sft_batch: the warm start (refusal training on), shared by every seed.
        grpo_steps, grpo_lr, prompts_per_step, num_generations, max_completion_length: GRPO, the same for both arms.
        refusal_penalties: ``--refusal_penalty`` of each click_refusal arm (one arm per value).
        seeds: GRPO seeds.
    """

    data: dict = field(
        default_factory=lambda: {
            "num_train": 1000,
            "num_test": 400,
            "buttons_per_image": 1,
            "background": "panels",
            "no_target_share": 0.25,
            "no_target_kind": "empty_screen",
        }
    )
    sft_epochs: float = 12.0  # 4 epochs left a start that refused on every screen (docs/results/toy_refusal_sft4.md)
    sft_lr: float = 2e-3
    sft_batch: int = 16
    grpo_steps: int = 100
    grpo_lr: float = 5e-4
    prompts_per_step: int = 16
    num_generations: int = 8
    max_completion_length: int = 12
    refusal_penalties: tuple = (0.0, 0.5)
    seeds: tuple = (42, 1, 2)


def final_metrics(run_dir: str) -> dict:
    """The last training-time eval of a run (:data:`METRICS`, those it logged)."""
    evals = [h for h in _history(run_dir) if "eval_click/accuracy" in h]
    last = evals[-1]
    return {key: last[key] for key in METRICS if key in last} | {"step": last["step"]}


def share_interval(values: list[float]) -> list[float]:
    """:func:`gui_grounding.ops.toy_zoom.seed_interval` of per-seed percentages, clipped to [0, 100] (a share lies
    there; with 2 or 3 seeds the t interval often reaches past it)."""
    lo, hi = seed_interval(values)
    return [max(0.0, lo), min(100.0, hi)]


def _penalties(results: dict) -> list[float]:
    """The click_refusal penalties of ``results``' recipe (``refusal_penalties``; results written before the penalty
    arms existed name one ``refusal_penalty``)."""
    recipe = results["recipe"]
    return list(recipe.get("refusal_penalties", [recipe.get("refusal_penalty", 0.0)]))


def summary_rows(results: dict) -> list[str]:
    """The markdown table of ``results`` (per arm: per-seed values, mean and the 95% interval across seeds,
    :func:`gui_grounding.ops.toy_zoom.seed_interval`), then :func:`verdicts`."""

    def cell(runs: list[dict], key: str, scale: float) -> tuple[str, str, str]:
        values = [r[key] * scale for r in runs if key in r]
        if not values:
            return "-", "-", "-"
        mean = sum(values) / len(values)
        ci = share_interval(values) if len(values) > 1 else None
        return ", ".join(f"{v:.1f}" for v in values), f"{mean:.1f}", f"{ci[0]:.1f} to {ci[1]:.1f}" if ci else "-"

    table = [
        "| run | seeds | click accuracy on targets (%) per seed | mean | 95% CI | refusal recall (%) per seed | mean "
        "| 95% CI | refusal precision (%) per seed | refusal share (%) per seed |",
        "|---|---|---|---:|---|---|---:|---|---|---|",
    ]
    start = results["start"]
    acc, rec = cell([start], METRICS[0], 1.0), cell([start], METRICS[1], 100.0)
    prec, share = cell([start], METRICS[2], 100.0), cell([start], METRICS[3], 100.0)
    table.append(f"| SFT warm start | - | {acc[0]} | {acc[1]} | - | {rec[0]} | {rec[1]} | - | {prec[0]} | {share[0]} |")
    for arm, _, _, label in arms(_penalties(results)):
        runs = results["arms"].get(arm) or []
        if not runs:
            continue
        acc, rec = cell(runs, METRICS[0], 1.0), cell(runs, METRICS[1], 100.0)
        prec, share = cell(runs, METRICS[2], 100.0), cell(runs, METRICS[3], 100.0)
        seeds = ", ".join(str(r["seed"]) for r in runs)
        table.append(
            f"| {label} | {seeds} | {acc[0]} | {acc[1]} | {acc[2]} | {rec[0]} | {rec[1]} | {rec[2]} | {prec[0]} "
            f"| {share[0]} |"
        )
    return table + [""] + verdicts(results)


def verdicts(results: dict) -> list[str]:
    """One line per refusal arm, the issue's two criteria in numbers:

    * **learns to refuse**: its mean refusal recall, and its mean refusal precision against the share of no-target
      test samples (the precision of refusing at random);
    * **click accuracy kept**: its mean click accuracy on the samples with a target, inside or outside the 95%
      interval across seeds of the control arm (the plain click reward).

    Nothing is claimed with fewer than 2 seeds of the control (no interval)."""
    penalties = _penalties(results)
    control = [r[METRICS[0]] for r in results["arms"].get(CONTROL) or [] if METRICS[0] in r]
    base = results.get("no_target_test_share")
    lines = []
    for arm, _, _, label in arms(penalties)[1:]:
        runs = results["arms"].get(arm) or []
        if not runs:
            continue
        mean = {}
        for k in METRICS:  # over the runs that logged it (precision is undefined for a run that never refused)
            values = [r[k] for r in runs if k in r]
            mean[k] = sum(values) / len(values) if values else None
        recall, precision = mean[METRICS[1]], mean[METRICS[2]]
        refuse = f"refusal recall {100 * recall:.1f}%" if recall is not None else "no refusal recall logged"
        if precision is None:
            refuse += ", never refused (no precision)"
        else:
            refuse += f", precision {100 * precision:.1f}%"
            refuse += f" (refusing at random: {100 * base:.1f}%)" if base is not None else ""
        if mean[METRICS[0]] is None:
            kept = "no click accuracy logged"
        elif len(control) < 2:
            kept = "no interval for the control yet (fewer than 2 seeds)"
        else:
            lo, hi = share_interval(control)
            inside = "inside" if lo <= mean[METRICS[0]] <= hi else "outside"
            kept = (
                f"click accuracy on targets {mean[METRICS[0]]:.1f}%, {inside} the control's 95% interval {lo} to {hi}"
            )
        lines.append(f"- {label}, {len(runs)} seed(s): {refuse}; {kept}.")
    return lines


class RefusalToyExperiments(ToyExperiments):
    """``gui-grounding toy refusal`` (see the module docstring); everything under ``OUT/refusal_toy``."""

    def __init__(self, out_dir: str, recipe: RefusalRecipe | None = None):
        self.study = recipe or RefusalRecipe()
        r = self.study
        super().__init__(
            os.path.join(out_dir, "refusal_toy"),
            ToyRecipe(
                synthetic=dict(r.data),
                sft_epochs=r.sft_epochs,
                sft_lr=r.sft_lr,
                sft_batch=r.sft_batch,
                grpo_steps=r.grpo_steps,
                grpo_lr=r.grpo_lr,
                prompts_per_step=r.prompts_per_step,
                num_generations=r.num_generations,
                max_completion_length=r.max_completion_length,
                eval_steps=r.grpo_steps,
                eval_samples=r.data["num_test"],
            ),
        )

    def _data_config(self) -> SyntheticConfig:
        return SyntheticConfig(**self.study.data)

    def run(self) -> dict:
        self.prepare()
        r = self.study
        refusal = ["--refusal_training", "true", *DEMO_FAST_FLAGS]
        sft = self.sft("refusal_sft", r.sft_epochs, extra=refusal)
        plan = arms(r.refusal_penalties)
        results = {
            "recipe": asdict(r),
            "no_target_test_share": self._no_target_test_share(),
            "start": final_metrics(sft["dir"]),
            "arms": {arm: [] for arm, *_ in plan},
        }
        for seed in r.seeds:
            for arm, reward, penalty, _ in plan:
                rewards = ["--reward_funcs", reward]
                if penalty is not None:
                    rewards += ["--refusal_penalty", str(penalty)]
                run = self.grpo(f"refusal_{arm}_s{seed}", sft["dir"], extra=[*refusal, *rewards, "--seed", str(seed)])
                results["arms"][arm].append({"seed": seed, "seconds": run["seconds"], **final_metrics(run["dir"])})
                self._write_refusal(results)
        return results

    def _no_target_test_share(self) -> float | None:
        """The share of no-target samples in the test split (the precision of refusing at random)."""
        path = os.path.join(self.data_dir, "test.jsonl")
        flags = [rec.get("no_target") is True for _, _, rec in iter_records(path) if isinstance(rec, dict)]
        return round(sum(flags) / len(flags), 4) if flags else None

    def _write_refusal(self, results: dict) -> None:
        r = self.study
        table = summary_rows(results)
        share = f"{r.data['no_target_share']:.0%}"
        no_target = (
            f"{share} of the screens show no button and every instruction on them is `no_target`"
            if r.data.get("no_target_kind") == "empty_screen"
            else f"{share} of the instructions name a colour on no button (`no_target`)"
        )
        intro = (
            f"Refusal toy: {r.data['num_train']} training and {r.data['num_test']} test screens of 112 px (one "
            f"coloured button on grey panels); {no_target}. Refusal training on in every run (the refusal clause "
            f"in the prompt; the SFT target of a no-target sample is `(-1,-1)`); SFT {r.sft_epochs} epochs (shared), "
            "then per seed GRPO "
            f"{r.grpo_steps} steps of {r.prompts_per_step} prompts x {r.num_generations} rollouts, lr {r.grpo_lr}, "
            f"with the click reward or the click_refusal reward (refusal penalty "
            f"{' or '.join(f'{p:g}' for p in r.refusal_penalties)}). Greedy eval "
            "on the whole test split at the end of each run; 95% CI: mean +- t * sd / sqrt(n) across seeds, clipped "
            "to 0-100."
        )
        self._write_results("refusal", results, intro, table)


def run_from_args(args) -> dict:
    """``gui-grounding toy refusal``: :class:`RefusalToyExperiments` under ``--out`` with ``--seeds`` and
    ``--grpo-steps`` (when given; else :class:`RefusalRecipe`'s)."""
    recipe = RefusalRecipe()
    seeds = tuple(SEED(s) for s in args.seeds.split(",")) if args.seeds else recipe.seeds
    steps = args.grpo_steps if args.grpo_steps != ToyRecipe().grpo_steps else recipe.grpo_steps
    return RefusalToyExperiments(args.out, RefusalRecipe(seeds=seeds, grpo_steps=steps)).run()
