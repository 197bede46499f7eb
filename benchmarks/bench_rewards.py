"""Wall time of every reward on adversarial completions: p50/p99 over 4 KB texts, and the worst 1 MB text.

    python benchmarks/bench_rewards.py --repeats 5 --out runs/bench_rewards.json

Every reward registered for ``--reward_funcs`` (``vlm_r1.rewards.available_rewards``: the core's ``accuracy``,
``format``, ``rec_iou``, ``rec_format`` and the plugin's ``click``, ``click_format``, ``distance``, ``iou``,
``gaussian_point``, ``gaussian_coverage``, ``click_distance_bonus``) is resolved by name and called the way TRL calls
it: one completion ``[{"role": "assistant", "content": text}]`` per call, with a plausible row of its task's columns
(``gui_grounding`` rows in each prompt mode the reward accepts; ``rec`` and default rows for the core rewards).

* **4 KB set**: ``--texts`` seeded completions of exactly 4096 characters, built from the shapes that made the old
  parsers polynomial or crash (a ``(`` or ``[`` before a long digit run, 155+ digit numbers, many pairs or boxes,
  nested brackets, unclosed ``<answer>`` tags, repeated ``<think></think><answer>``, NaN/inf tokens, lone
  surrogates) plus random mixtures of them. Each is timed ``--repeats`` times; p50, p99 and max over all calls.
  Target: p99 under 1 ms.
* **1 MB set**: one text per shape, 1,000,000 characters each, timed ``--repeats`` times (best of the repeats, so a
  scheduler hiccup does not count); the report gives the worst text, its wall time and the CPU time of that call
  (``time.process_time``: on a loaded machine wall time is CPU time plus waiting). Target: wall under 100 ms.

* **math_verify**: ``accuracy``'s library step (``vlm_r1.upstream.accuracy.math_verify_match``: ``parse`` + ``verify`` under
  ``MATH_VERIFY_TIMEOUT_S``), timed cold (parse cache cleared before each call) and warm on typical answers (numbers,
  fractions, LaTeX, boxed, text) and on the 4 KB hostile set; calls that hit the timeout are counted. ``accuracy``'s
  4 KB target is therefore not 1 ms: math_verify parses a 4 KB completion in up to hundreds of ms (as upstream's
  did), so its target is that no call passes the deadline budget (two parses and one comparison,
  ``3 x MATH_VERIFY_TIMEOUT_S``); its 1 MB target stays (texts past ``MATH_VERIFY_MAX_CHARS`` skip math_verify).

Timings are single-threaded wall clock (``time.perf_counter``) on this machine; they are not asserted anywhere
(``tests/test_reward_fuzz.py`` checks totality on the same shapes).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import time

from vlm_r1.rewards import available_rewards, resolve_reward
from vlm_r1.upstream import accuracy

KB4, MB = 4096, 1_000_000
TARGET_4KB_P99_MS, TARGET_1MB_MS = 1.0, 100.0
#: rewards whose 4 KB calls run math_verify: their 4 KB target is the deadline budget (two parses, one comparison)
MATH_VERIFY_REWARDS = {"accuracy"}
MATH_VERIFY_BUDGET_MS = 3 * accuracy.MATH_VERIFY_TIMEOUT_S * 1000
# typical (prediction, solution) pairs of the default task's math and text answers
MATH_PAIRS = [
    ("3.5", "\\frac{7}{2}"),
    ("7/2", "3.5"),
    ("\\boxed{\\sqrt{2}}", "\\sqrt 2"),
    ("x = 2", "2"),
    ("The answer is 42.", "42"),
    ("$\\frac{1}{3}$", "0.3333"),
    ("2\\pi r", "2 \\pi r"),
    ("\\left(1, 2\\right)", "(1,2)"),
    ("Dark red", "Red"),
    ("B", "C"),
]

# The shapes, as functions of the length n: each returns a string of at least n characters (cut to n).
SHAPES = {
    "paren-digits": lambda n: "(" + "1" * n,
    "pair-second-digits": lambda n: "(1," + "1" * n,
    "box-digits": lambda n: "[" + "1" * n,
    "box-last-digits": lambda n: "[1,2,3," + "1" * n,
    "paren-digit-runs": lambda n: ("(" + "1" * 999) * (n // 1000 + 1),
    "box-prefixes": lambda n: "[1,2,3," * (n // 7 + 1),
    "huge-pair": lambda n: ("(" + "9" * 155 + "," + "9" * 155 + ") ") * (n // 314 + 1),
    "huge-box": lambda n: ("[0,0," + "9" * 200 + "," + "9" * 200 + "] ") * (n // 407 + 1),
    "many-pairs": lambda n: "(1,2)" * (n // 5 + 1),
    "many-boxes": lambda n: "[1,2,3,4]" * (n // 9 + 1),
    "nested-parens": lambda n: "(" * (n // 2) + "1,2" + ")" * (n // 2),
    "nested-brackets": lambda n: "[" * (n // 2) + "1,2,3,4" + "]" * (n // 2),
    "open-parens": lambda n: "(" * n,
    "unclosed-answers": lambda n: "<answer>" * (n // 8 + 1),
    "think-answer-repeats": lambda n: "<think></think><answer>" * (n // 23 + 1),
    "think-close-answer": lambda n: "<think>" + "</think><answer></answer>x" * (n // 26 + 1),
    "rec-format-repeats": lambda n: "<think>" + "</think><answer>{[1,1,1,1]" * (n // 26 + 1),
    "open-braces": lambda n: "<think></think><answer>" + "{" * n,
    "point-tags": lambda n: "<point>1 " * (n // 9 + 1),
    "json-points": lambda n: '"point_2d": [1, ' * (n // 16 + 1),
    "nan-inf-tokens": lambda n: "(nan,inf) [nan,nan,inf,inf] (1e400,2) NaN -inf " * (n // 48 + 1),
    "surrogates": lambda n: "\ud800(1,2)\udfff[1,2,3,4]" * (n // 20 + 1),
    "whitespace": lambda n: "<think>x</think>" + " " * n,
    "think-space-answer": lambda n: "<think>x</think>" + " " * (n - 38) + "<answer>(1,2)</answer>",
}
PIECES = [
    "(",
    ")",
    "[",
    "]",
    "{",
    "}",
    ",",
    ", ",
    " ",
    "-",
    ".",
    "1",
    "12",
    "9" * 155,
    "<think>",
    "</think>",
    "<answer>",
    "</answer>",
    "nan",
    "inf",
    "(1,2)",
    "[1,2,3,4]",
    "\ud800",
    "\U0001f600",
    "\u00a0",
]

# The task whose columns each reward reads, and the prompt modes it accepts.
TASKS = {
    "accuracy": "default",
    "format": "default",
    "rec_iou": "rec",
    "rec_format": "rec",
    "iou": "gui_box",
    "gaussian_coverage": "gui_box",
}
GUI_ROW = {
    "image_path": "a.png",
    "resized_size": [1288, 728],
    "image_size": [2560, 1440],
    "target_boxes_resized": [[100.5, 200.25, 180.0, 240.75]],
    "target_boxes": [[199, 396, 356, 476]],
    "instruction": "click the search box",
    "sample_id": "s0",
    "prompt_mode": "non_thinking",
    "target_boxes_source": [[78, 275, 139, 331]],
    "source_box_unit": "norm1000",
    "source_box_scale": [1000.0, 1000.0],
    "box_rounding": "float",
    "image": None,
}
REC_ROW = {
    "image_path": "a.png",
    "problem": "the cat",
    "solution": "<answer> [10, 20, 30, 40] </answer>",
    "gt_bbox": [12.5, 30.0, 210.3, 400.9],
    "image_size": [1280, 720],
    "resized_size": [588, 336],
    "id": 0,
}
DEFAULT_ROW = {
    "image_path": "a.png",
    "problem": "how many?",
    "solution": "<answer> 3 </answer>",
    "id": 0,
    "accu_reward_method": "default",
}


def rows_for(name: str) -> list[dict]:
    """The rows a reward is timed with: its task's columns, in every prompt mode it accepts."""
    task = TASKS.get(name, "gui")
    if task == "default":
        return [DEFAULT_ROW]
    if task == "rec":
        return [REC_ROW]
    modes = ["box"] if task == "gui_box" else ["non_thinking", "thinking", "box"]
    return [{**GUI_ROW, "prompt_mode": m} for m in modes]


def texts_4kb(count: int, seed: int) -> list[str]:
    """Every shape at 4096 characters, then seeded random mixtures of hostile pieces, ``count`` texts in all."""
    rng = random.Random(seed)
    texts = [make(KB4)[:KB4] for make in SHAPES.values()]
    while len(texts) < count:
        unit = "".join(rng.choice(PIECES) for _ in range(rng.randint(1, 12)))
        texts.append((unit * (KB4 // len(unit) + 1))[:KB4])
    return texts[:count]


def call(fn, text: str, row: dict) -> tuple[float, float]:
    """Wall and CPU seconds for one call of ``fn`` as TRL makes it (one completion, the row's columns as one-element
    lists)."""
    kwargs = {key: [value] for key, value in row.items()}
    cpu, start = time.process_time(), time.perf_counter()
    out = fn(
        prompts=[[{"role": "user", "content": "q"}]],
        completions=[[{"role": "assistant", "content": text}]],
        completion_ids=[[1, 2, 3]],
        trainer_state=None,
        **kwargs,
    )
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    if not (len(out) == 1 and isinstance(out[0], float) and out[0] == out[0] and abs(out[0]) != float("inf")):
        raise SystemExit(f"{fn.__name__} returned {out!r}: not one finite float")
    return elapsed, cpu


def percentile(values: list[float], q: float) -> float:
    """The ``q`` quantile (0-1) of ``values``, nearest rank."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered)) - 1))]


def bench(name: str, small: list[str], large: dict[str, str], repeats: int) -> dict:
    fn = resolve_reward(name)
    rows = rows_for(name)
    ms = []
    for _ in range(repeats):
        accuracy.clear_math_verify_cache()  # every pass cold: the first call of a text in training is
        ms += [call(fn, text, row)[0] * 1000 for text in small for row in rows]
    worst_case, worst_s, worst_cpu = "", 0.0, 0.0
    for case, text in large.items():
        # best of the repeats per prompt mode, then the slowest mode
        seconds, cpu = max(min(call(fn, text, row) for _ in range(repeats)) for row in rows)
        if seconds > worst_s:
            worst_case, worst_s, worst_cpu = case, seconds, cpu
    return {
        "reward": name,
        "calls_4kb": len(ms),
        "p50_ms_4kb": statistics.median(ms),
        "p99_ms_4kb": percentile(ms, 0.99),
        "max_ms_4kb": max(ms),
        "worst_ms_1mb": worst_s * 1000,
        "worst_cpu_ms_1mb": worst_cpu * 1000,
        "worst_case_1mb": worst_case,
        "meets_targets": (
            max(ms) < MATH_VERIFY_BUDGET_MS if name in MATH_VERIFY_REWARDS else percentile(ms, 0.99) < TARGET_4KB_P99_MS
        )
        and worst_s * 1000 < TARGET_1MB_MS,
    }


def _timed_match(pred: str, gold: str) -> tuple[float, bool]:
    start = time.perf_counter()
    accuracy.math_verify_match(pred, gold)
    elapsed = time.perf_counter() - start
    return elapsed * 1000, elapsed >= accuracy.MATH_VERIFY_TIMEOUT_S


def bench_math_verify(small: list[str], repeats: int) -> dict:
    """Cost of ``math_verify_match`` (parse both, verify the pairs, under the deadline): cold and warm on
    :data:`MATH_PAIRS`, cold on the 4 KB set against the solution ``3``."""
    out = {"timeout_s": accuracy.MATH_VERIFY_TIMEOUT_S, "max_chars": accuracy.MATH_VERIFY_MAX_CHARS}
    cases = {"typical": MATH_PAIRS, "hostile_4kb": [(text, "3") for text in small]}
    for label, pairs in cases.items():
        cold, warm, timeouts = [], [], 0
        for _ in range(repeats):
            for pred, gold in pairs:
                accuracy.clear_math_verify_cache()
                ms, timed_out = _timed_match(pred, gold)
                cold.append(ms)
                timeouts += timed_out
                warm.append(_timed_match(pred, gold)[0])
        out[label] = {
            "calls": len(cold),
            "cold_p50_ms": statistics.median(cold),
            "cold_p99_ms": percentile(cold, 0.99),
            "cold_max_ms": max(cold),
            "warm_p50_ms": statistics.median(warm),
            "timeouts": timeouts,
        }
    return out


def main() -> None:
    """Time every registered reward on the 4 KB and 1 MB sets; print a table and optionally write JSON."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--texts", type=int, default=200, help="4 KB completions (the shapes, then random mixtures)")
    ap.add_argument("--repeats", type=int, default=5, help="calls per text and row")
    ap.add_argument("--seed", type=int, default=0, help="seed of the random mixtures")
    ap.add_argument("--rewards", nargs="+", default=None, help="reward names (default: every registered one)")
    ap.add_argument("--out", default=None, help="write the results as JSON here")
    args = ap.parse_args()

    names = args.rewards or sorted(available_rewards())
    small = texts_4kb(args.texts, args.seed)
    large = {case: make(MB)[:MB] for case, make in SHAPES.items()}
    print(
        f"{len(small)} texts of 4 KB x {args.repeats} repeats; {len(large)} texts of 1 MB; "
        f"Python {platform.python_version()}, {os.cpu_count()} CPU(s)"
    )
    results = [bench(name, small, large, args.repeats) for name in names]
    print(
        f"{'reward':<22} {'4KB p50 ms':>11} {'4KB p99 ms':>11} {'4KB max ms':>11} {'1MB worst ms':>13} "
        f"{'(CPU ms)':>9}  {'1MB worst text':<22} targets"
    )
    for r in results:
        print(
            f"{r['reward']:<22} {r['p50_ms_4kb']:>11.4f} {r['p99_ms_4kb']:>11.4f} {r['max_ms_4kb']:>11.4f} "
            f"{r['worst_ms_1mb']:>13.2f} {r['worst_cpu_ms_1mb']:>9.2f}  {r['worst_case_1mb']:<22} "
            f"{'met' if r['meets_targets'] else 'MISSED'}"
        )
    print(
        f"targets: 4 KB p99 < {TARGET_4KB_P99_MS} ms ({', '.join(sorted(MATH_VERIFY_REWARDS))}: every 4 KB call < "
        f"{MATH_VERIFY_BUDGET_MS:.0f} ms, math_verify's deadline budget), 1 MB worst < {TARGET_1MB_MS} ms"
    )
    math_cost = None
    if MATH_VERIFY_REWARDS & set(names):
        math_cost = bench_math_verify(small, args.repeats)
        print(
            f"\nmath_verify (timeout {math_cost['timeout_s']} s per parse/comparison, texts <= "
            f"{math_cost['max_chars']} chars)"
        )
        print(
            f"{'answers':<14} {'calls':>6} {'cold p50 ms':>12} {'cold p99 ms':>12} {'cold max ms':>12} {'warm p50 ms':>12} timeouts"
        )
        for label in ("typical", "hostile_4kb"):
            c = math_cost[label]
            print(
                f"{label:<14} {c['calls']:>6} {c['cold_p50_ms']:>12.2f} {c['cold_p99_ms']:>12.2f} "
                f"{c['cold_max_ms']:>12.2f} {c['warm_p50_ms']:>12.4f} {c['timeouts']}"
            )
    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w", encoding="utf-8") as f:
            json.dump(
                {
                    "python": platform.python_version(),
                    "cpus": os.cpu_count(),
                    "texts_4kb": len(small),
                    "texts_1mb": sorted(large),
                    "repeats": args.repeats,
                    "targets": {"p99_ms_4kb": TARGET_4KB_P99_MS, "worst_ms_1mb": TARGET_1MB_MS},
                    "results": results,
                    "math_verify": math_cost,
                },
                f,
                indent=1,
            )


if __name__ == "__main__":
    main()
