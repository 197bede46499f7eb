"""Every reward, called by its registry name the way TRL calls it, is total on hostile completions and rows (issue 11).

TRL calls each reward on every rank with ``prompts``, ``completions`` (``[{"role": "assistant", "content": text}]``),
``completion_ids``, every dataset column as a per-completion list, and ``trainer_state`` / ``log_extra`` /
``log_metric``; a reward that raises kills the step. The rows here carry the columns each task writes, named exactly
as the tasks write them (``gui_grounding.training.task.sample_to_row``, ``vlm_r1.upstream.tasks.RECTask`` / ``DefaultTask``), with
hostile values: NaN/inf, inverted, zero-size, huge and malformed boxes and sizes. Completions go up to 20 KB (huge
integers, NaN/inf tokens, unicode with lone surrogates, nested brackets, many pairs, ``(`` before 16k digits) and the
fixed cases below up to 1 MB. Every call must return one finite float per completion. Timing is measured by
``benchmarks/bench_rewards.py``, not asserted here.

The default task's ``accuracy`` runs every ``accu_reward_method`` it scores (``default``, ``mcq``, ``yes_no``,
``all_match``, ``math``; ``llm`` is refused and scores 0.0) on LaTeX, choice-letter and yes/no pieces too, and on
worst cases of its own: huge LaTeX, deeply nested braces, many ``<answer>`` blocks, 1 MB texts against 1 MB solutions
(the Levenshtein cell bound), and short answers that make math_verify time out or raise. The math_verify deadline is
lowered to 0.2 s here (production keeps upstream's 5 s), so such an answer costs a fraction of a second, not five.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gui_grounding.models.adapters import ADAPTERS
from gui_grounding.models.consensus import MAX_SAMPLES
from gui_grounding.models.prompts import PROMPT_MODES
from gui_grounding.training.rewards import BOX_ROUNDINGS
from gui_grounding.training.task import GUIGroundingTask
from vlm_r1.rewards import available_rewards, resolve_reward
from vlm_r1.upstream import accuracy

# the task whose rows each reward reads; box rewards need prompt_mode "box"
TASK_OF = {
    "accuracy": "default",
    "format": "default",
    "rec_iou": "rec",
    "rec_format": "rec",
    "click": "gui",
    "click_format": "gui",
    "distance": "gui",
    "gaussian_point": "gui",
    "click_distance_bonus": "gui",
    "consensus": "gui",  # label-free: reads the answer frame, image size and sample_id, no target
    "click_refusal": "gui",  # refusal training: reads no_target and refusal_penalty too
    "iou": "gui_box",
    "gaussian_coverage": "gui_box",
    "zoom_tool": "gui",  # the zoom tool's stages read the rollout's turns (rollout_turns) too
    "zoom_gain": "gui",
    "zoom_cost": "gui",
}
NAMES = sorted(TASK_OF)
MAX_TEXT = 20_000


def test_every_registered_reward_is_fuzzed():
    # a new built-in or plugin reward must be added to TASK_OF (and so to this fuzz test)
    assert sorted(available_rewards(GUIGroundingTask())) == NAMES


# --------------------------------------------------------------------------------------------------------------------
# hostile values

HUGE = [10**400, -(10**400), 2**63, 1e308, -1e308, 1e13, 1e12, 5e-324, 1e-300]
SPECIAL = [float("nan"), float("inf"), float("-inf"), -0.0, True, None, "12", "nan", b"1", [1], {"x": 1}]
numbers = st.one_of(
    st.integers(-2000, 2000),
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(-(10**40), 10**40),
    st.sampled_from(HUGE + SPECIAL),
)
box = st.one_of(
    st.lists(numbers, min_size=4, max_size=4),
    st.lists(st.integers(-50, 1100), min_size=4, max_size=4),  # often inverted or zero-size, often plausible
    st.lists(numbers, max_size=6),
    st.sampled_from([None, "0,0,10,10", 7, [[0, 0, 10, 10]], (0, 0, 10, 10), [float("nan")] * 4]),
)
boxes = st.one_of(st.lists(box, max_size=3), st.sampled_from([None, [], "[[0,0,10,10]]", [0, 0, 10, 10], 3.5]))
size = st.one_of(
    st.lists(numbers, min_size=2, max_size=2),
    st.lists(st.integers(-2, 4000), min_size=2, max_size=2),
    st.sampled_from([None, [], [100], [100, 100, 3], "100x100", [float("nan"), 100], [100, float("inf")], [0.5, 2]]),
)

DIGITS_16K = "1" * 16_000
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
    "\n",
    "\t",
    "-",
    ".",
    "<think>",
    "</think>",
    "<answer>",
    "</answer>",
    "<point>",
    "</point>",
    '"point_2d": [',
    '"bbox_2d": [',
    "nan",
    "NaN",
    "inf",
    "-inf",
    "Infinity",
    "1e400",
    "(nan,nan)",
    "(inf,-inf)",
    "[nan,1,2,3]",
    "[0,0,inf,10]",
    "(1,2)",
    "(-5,7)",
    "(12.5,3)",
    "[1,2,3,4]",
    "[10,20,30,40]",
    "[40,30,20,10]",
    '{"bbox_2d": [1, 2, 3, 4]}',
    "(0,0),(9,9)",
    "9" * 155,
    "1" * 400,
    "(" + "9" * 155 + ",1)",
    "[1,2," + "9" * 200 + ",4]",
    "(" + DIGITS_16K,
    "[" + "1" * 203,
    "\ud800",
    "\udfff",
    "\udc00(1,2)",
    "\U0001f600",
    "\u00a0",
    "\u2028",
    "\x00",
    "\x1c",
    "٣",
    "０",
    "((((",
    "]]]]",
    "(((1,2)))",
    "[[[1,2,3,4]]]",
    # accuracy's paths: math_verify's LaTeX, the math normalisation, choice letters, yes/no, line breaks
    "$",
    "\\frac{",
    "\\frac",
    "\\boxed{",
    "\\boxed ",
    "\\fbox{",
    "^{",
    "\\sqrt",
    "\\text{ ",
    "\\%",
    "\\left(",
    "=",
    "/",
    "A.",
    "(B)",
    "B",
    "yes",
    "no",
    "\r\n",
    "\r",
]
pieces = st.one_of(
    st.sampled_from(PIECES),
    st.integers(-(10**200), 10**200).map(str),
    st.text(st.characters(codec=None, categories=None), max_size=8),  # any code point, surrogates included
)


@st.composite
def completions(draw) -> str:
    """Up to 20 KB: a random run of hostile pieces, repeated (many pairs, deep nesting, long digit runs)."""
    unit = "".join(draw(st.lists(pieces, min_size=0, max_size=12)))
    repeat = draw(st.sampled_from([1, 1, 2, 10, 100, 1000, 20_000]))
    return (unit * repeat)[:MAX_TEXT]


# a zoom rollout's turns (vlm_r1.tool_rollout writes them; gui_grounding.training.zoom reads them), hostile
turn_info = st.one_of(
    st.none(),
    st.sampled_from(["x", 3, [], {"stop": "malformed"}]),
    st.fixed_dictionaries(
        {
            "window": st.one_of(box, st.none()),
            "crop_frame": st.one_of(box, st.none()),
            "cost": st.one_of(numbers, st.none()),
        }
    ),
)
turns = st.one_of(
    st.none(),
    st.sampled_from(["turns", 7, [None], [[]]]),
    st.lists(st.fixed_dictionaries({"text": st.one_of(completions(), st.none()), "info": turn_info}), max_size=3),
)


def _gui_row(draw, mode_choices) -> dict:
    """One gui_grounding row (sample_to_row's columns) with hostile values; names and shapes as the task writes."""
    target = draw(boxes)
    return {
        "image_path": "shots/a.png",
        "resized_size": draw(size),
        "image_size": draw(size),
        "target_boxes_resized": target,
        "target_boxes": target,
        "instruction": "click the button",
        "sample_id": "s0",
        "prompt_mode": draw(st.sampled_from(mode_choices)),
        "target_boxes_source": draw(boxes),
        "source_box_unit": draw(st.sampled_from(["norm1000", "pixel"])),
        "source_box_scale": draw(size),
        "box_rounding": draw(st.sampled_from(BOX_ROUNDINGS)),
        "image": None,
        "rollout_turns": draw(turns),
        # refusal training's columns (click_refusal), hostile
        "no_target": draw(st.sampled_from([True, False, None, "true", 1, float("nan"), [True]])),
        "refusal_penalty": draw(st.one_of(numbers, st.just(0.5))),
    }


solutions = st.one_of(
    completions(),
    st.sampled_from(
        [
            "<answer> 3 </answer>",
            "<answer>yes</answer>",
            "nan",
            "inf",
            "1" * 400,
            10**5000,
            1e400,
            float("nan"),
            None,
            [1, 2, 3, 4],
            "\ud800",
        ]
    ),
)


@st.composite
def rows(draw, task: str) -> dict:
    if task in ("gui", "gui_box"):
        return _gui_row(draw, ["box"] if task == "gui_box" else list(PROMPT_MODES))
    if task == "rec":
        return {
            "image_path": "a.png",
            "problem": "the cat",
            "solution": "<answer> [1, 2, 3, 4] </answer>",
            "gt_bbox": draw(box),
            "image_size": draw(size),
            "resized_size": draw(size),
            "id": 0,
        }
    return {
        "image_path": "a.png",
        "problem": "how many?",
        "solution": draw(solutions),
        "id": 0,
        "accu_reward_method": draw(st.sampled_from([*accuracy.ACCURACY_METHODS, "llm", "odd", None])),
    }


# A deadline alarm never raises into a garbage-collector callback (hypothesis's gc_cumulative_time) or a finalizer,
# where Python would swallow it and report "Exception ignored in": vlm_r1.upstream.accuracy._swallowed_there; so no
# unraisable-exception warning is filtered here.


@pytest.fixture(autouse=True)
def _math_verify_deadline(monkeypatch):
    monkeypatch.setattr(accuracy, "MATH_VERIFY_TIMEOUT_S", 0.2)


def call_like_trl(name: str, texts: list[str], row_list: list[dict]) -> list:
    """Call the reward registered as ``name`` with TRL's keyword arguments; assert one finite float per completion."""
    fn = resolve_reward(name, GUIGroundingTask())
    kwargs = {key: [row[key] for row in row_list] for key in row_list[0]}
    out = fn(
        prompts=[[{"role": "user", "content": "q"}]] * len(texts),
        completions=[[{"role": "assistant", "content": t}] for t in texts],
        completion_ids=[[1, 2, 3]] * len(texts),
        trainer_state=None,
        log_extra=lambda *a, **k: None,
        log_metric=lambda *a, **k: None,
        **kwargs,
    )
    assert len(out) == len(texts)
    for value in out:
        assert isinstance(value, float) and math.isfinite(value), (name, value)
    return out


@pytest.mark.parametrize("name", NAMES)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_reward_is_total_on_hostile_completions_and_rows(name, data):
    task = TASK_OF[name]
    texts = data.draw(st.lists(completions(), min_size=1, max_size=3), label="texts")
    row_list = [data.draw(rows(task), label="row") for _ in texts]
    call_like_trl(name, texts, row_list)


# the consensus reward votes per group: hostile group keys (sample_id), answer frames and adapters, groups of many
GROUP_KEYS = ["s0", "s1", "", None, 0, 1.0, float("nan"), [1, 2], {"id": 1}, "\ud800", "9" * 1000]
FAMILIES = [None, *sorted(ADAPTERS)]
PLAUSIBLE_ANSWERS = ["(5,5)", "(6,5)", "[1,2,9,9]", "(-3,4)", '{"point_2d": [500, 500]}', "<answer>(5,5)</answer>"]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_consensus_is_total_on_hostile_groups(data):
    k = data.draw(st.integers(1, 12), label="k")
    answer = st.one_of(completions(), st.sampled_from(PLAUSIBLE_ANSWERS))  # plausible ones vote, so groups form
    texts = data.draw(st.lists(answer, min_size=k, max_size=k), label="texts")
    family = data.draw(st.sampled_from(FAMILIES), label="adapter")
    row_list = []
    for _ in texts:
        row = _gui_row(data.draw, list(PROMPT_MODES))
        row["sample_id"] = data.draw(st.sampled_from(GROUP_KEYS), label="sample_id")
        row["answer_size"] = data.draw(st.one_of(size, st.just([1000, 1000])), label="answer_size")
        row["image_size"] = data.draw(st.one_of(size, st.just([1920, 1080])), label="image_size")
        if family is not None:
            row["adapter"] = family
        row_list.append(row)
    out = call_like_trl("consensus", texts, row_list)
    assert set(out) <= {0.0, 1.0}


def test_consensus_is_total_on_a_large_group():
    # MAX_SAMPLES answers in one group, nearly all distinct (the O(K^2) worst case), then one more: every value 0.0
    # or 1.0, and the 8 equal answers win (no other answer lies within 50 original pixels of theirs)
    texts = [f"({i},{(7 * i) % 1000})" for i in range(MAX_SAMPLES - 8)] + ["(250,333)"] * 8
    row = {**GOOD_GUI, "answer_size": [1000, 1000], "image_size": [4000, 4000]}
    out = call_like_trl("consensus", texts, [row] * len(texts))
    assert set(out) <= {0.0, 1.0} and out[-8:] == [1.0] * 8 and sum(out) < 12
    assert call_like_trl("consensus", texts + ["(1,1)"], [row] * (len(texts) + 1)) == [0.0] * (len(texts) + 1)


# --------------------------------------------------------------------------------------------------------------------
# fixed worst cases, up to 1 MB, against a plausible row and hostile ones

MB = 1_000_000
FIXED = {
    "open-paren-16k-digits": "(" + DIGITS_16K,
    "box-204-chars": "[" + "1" * 203,
    "box-4x50-digits": "[" + ",".join(["1" * 50] * 4) + "]",
    "pair-155-digits": "(" + "9" * 155 + "," + "9" * 155 + ")",
    "box-155-digits": "[0,0," + "9" * 155 + "," + "9" * 155 + "]",
    "think-answer-155-digits": "<think>x</think><answer>(" + "9" * 155 + ",1)</answer>",
    "rec-155-digits": '<think>x</think><answer>{"bbox_2d": [0, 0, ' + "9" * 155 + ", 9]}</answer>",
    "nan-inf-tokens": "(nan,inf) [nan,nan,inf,inf] <answer>NaN</answer> (1e400,2)",
    "lone-surrogates": "\ud800(1,2)\udfff[1,2,3,4]\udc00",
    "1mb-digits": "1" * MB,
    "1mb-open-parens": "(" * MB,
    "1mb-open-brackets": "[" * MB,
    "1mb-nested": "(" * (MB // 2) + ")" * (MB // 2),
    "1mb-pairs": "(1,2)" * (MB // 5),
    "1mb-boxes": "[1,2,3,4]" * (MB // 9),
    "1mb-paren-digits": ("(" + "1" * 999) * (MB // 1000),
    "1mb-box-prefixes": "[1,2,3," * (MB // 7),
    "1mb-unclosed-answers": "<answer>" * (MB // 8),
    "1mb-think-answer-repeats": "<think></think><answer>" * (MB // 23),
    "1mb-think-close-answer": "<think>" + "</think><answer></answer>x" * (MB // 26),
    "1mb-rec-format": "<think>" + "</think><answer>{[1,1,1,1]" * (MB // 26),
    "1mb-braces": "<think></think><answer>" + "{" * MB,
    "1mb-surrogates": "\ud800" * MB,
    "1mb-whitespace": " " * MB,
    "1mb-think-space-answer": "<think>x</think>" + " " * MB + "<answer>{[1,2,3,4]}(1,2)</answer>",
    "1mb-point-tags": "<point>1 " * (MB // 9),
}
GOOD_GUI = {
    "image_path": "a.png",
    "resized_size": [1000, 800],
    "image_size": [2000, 1600],
    "target_boxes_resized": [[10, 10, 50, 50]],
    "target_boxes": [[20, 20, 100, 100]],
    "instruction": "x",
    "sample_id": "s",
    "prompt_mode": "non_thinking",
    "target_boxes_source": [[10, 12, 50, 62]],
    "source_box_unit": "norm1000",
    "source_box_scale": [1000.0, 1000.0],
    "box_rounding": "float",
    "image": None,
}
BAD_GUI = [
    {"target_boxes_resized": [[float("nan")] * 4], "resized_size": [float("nan"), 800]},
    {"target_boxes_resized": [[50, 50, 10, 10]], "box_rounding": "gta1", "target_boxes_source": [[50, 50, 10, 10]]},
    {
        "target_boxes_resized": [[0, 0, float("inf"), 10]],
        "resized_size": [0, 0],
        "box_rounding": "gta1",
        "source_box_scale": [0.0, float("nan")],
    },
    {
        "target_boxes_resized": [[10**400, 0, 10**401, 5]],
        "resized_size": [10**400, 1],
        "box_rounding": "gta1",
        "target_boxes_source": [[1e300, 0, 1e308, 1]],
        "source_box_scale": [1e-300, 1e-300],
    },
    {"target_boxes_resized": [[5, 5, 5, 5], None, "x", [1, 2]], "resized_size": None, "image_size": "big"},
]
GOOD_REC = {
    "image_path": "a.png",
    "problem": "p",
    "solution": "<answer> [1, 2, 3, 4] </answer>",
    "gt_bbox": [10, 10, 50, 50],
    "image_size": [1280, 720],
    "resized_size": [588, 336],
    "id": 0,
}
BAD_REC = [
    {"gt_bbox": [float("nan")] * 4, "image_size": [0, 720]},
    {"gt_bbox": [50, 50, 10, 10], "resized_size": [float("inf"), 1]},
    {"gt_bbox": None, "image_size": None, "resized_size": "x"},
]
GOOD_DEFAULT = {
    "image_path": "a.png",
    "problem": "p",
    "solution": "<answer> 3 </answer>",
    "id": 0,
    "accu_reward_method": "default",
}
BAD_DEFAULT = [{"solution": 10**5000}, {"solution": float("nan")}, {"solution": "1" * MB}, {"accu_reward_method": None}]


def _fixed_rows(task: str) -> list[dict]:
    if task in ("gui", "gui_box"):
        modes = ["box"] if task == "gui_box" else list(PROMPT_MODES)
        return [{**GOOD_GUI, **bad, "prompt_mode": m} for m in modes for bad in [{}, *BAD_GUI]]
    good, bad_rows = (GOOD_REC, BAD_REC) if task == "rec" else (GOOD_DEFAULT, BAD_DEFAULT)
    return [{**good, **bad} for bad in [{}, *bad_rows]]


@pytest.mark.parametrize("case", sorted(FIXED))
def test_rewards_are_total_on_worst_cases(case):
    text = FIXED[case]
    for name in NAMES:
        row_list = _fixed_rows(TASK_OF[name])
        call_like_trl(name, [text] * len(row_list), row_list)


def test_plausible_answers_still_score():
    # the hostile rows score 0.0, the plausible one still pays: totality did not zero everything
    assert call_like_trl("click", ["(30,30)"] * 2, [GOOD_GUI, {**GOOD_GUI, **BAD_GUI[0]}]) == [1.0, 0.0]
    box_rows = [{**GOOD_GUI, "prompt_mode": "box"}, {**GOOD_GUI, **BAD_GUI[1], "prompt_mode": "box"}]
    assert call_like_trl("iou", ["[10,10,50,50]"] * 2, box_rows) == [1.0, 0.0]
    assert call_like_trl("gaussian_coverage", ["[10,10,50,50]"] * 2, box_rows) == [1.0, 0.0]
    rec = '<think>t</think><answer>{"bbox_2d": [10, 10, 50, 50]}</answer>'
    assert call_like_trl("rec_format", [rec], [GOOD_REC]) == [1.0]
    assert call_like_trl("rec_iou", [rec] * 2, [GOOD_REC, {**GOOD_REC, **BAD_REC[0]}])[1] == 0.0
    assert call_like_trl(
        "accuracy", ["<answer>3</answer>"] * 2, [GOOD_DEFAULT, {**GOOD_DEFAULT, **BAD_DEFAULT[0]}]
    ) == [
        1.0,
        0.0,
    ]


# --------------------------------------------------------------------------------------------------------------------
# the default task's accuracy and format: every method on its own worst cases

DEFAULT_WORST = {
    "1mb-latex": "<answer>$" + ("\\frac{1}{2}+\\sqrt{x^{2}}\\cdot" * (MB // 28))[:MB] + "$</answer>",
    "1mb-nested-braces": "<answer>$" + "{" * (MB // 2) + "1" + "}" * (MB // 2) + "$</answer>",
    "1mb-answer-blocks": "<answer>1</answer>" * (MB // 17),
    "1mb-answer-lines": "<answer>a\n" * (MB // 10) + "</answer>",
    "1mb-boxed": "\\boxed{" * (MB // 7),
    "1mb-boxed-space": "\\boxed 1$" * (MB // 9),
    "1mb-fracs-units": "\\frac\\sqrt\\text{ /=" * (MB // 19),
    "1mb-choice-letters": "A. B, C! " * (MB // 9),
    "1mb-yes-no": "not yes " * (MB // 8),
    "1mb-newlines": " \n\r" * (MB // 3),
    "16k-nested-braces": "<answer>$" + "{" * 8000 + "1" + "}" * 8000 + "$</answer>",  # at math_verify's length bound
}
DEFAULT_SOLUTIONS = [
    "<answer> 3 </answer>",
    "<answer>B</answer>",
    "<answer>\nyes\n</answer>",  # a multi-line block: upstream reads the whole solution
    "<answer>\\boxed{\\frac{1}{2}}</answer>",
    "A. " * (MB // 3),
]


@pytest.mark.parametrize("case", sorted(DEFAULT_WORST))
def test_default_task_rewards_are_total_on_their_worst_cases(case):
    text = DEFAULT_WORST[case]
    methods = [*accuracy.ACCURACY_METHODS, "llm", None]
    rows = [
        {**GOOD_DEFAULT, "solution": DEFAULT_SOLUTIONS[i % len(DEFAULT_SOLUTIONS)], "accu_reward_method": m}
        for i, m in enumerate(methods)
    ]
    rows.append({**GOOD_DEFAULT, "solution": "1" * MB})  # 1 MB against 1 MB: past the Levenshtein cell bound
    for name in ("accuracy", "format"):
        out = call_like_trl(name, [text] * len(rows), rows)
        assert all(0.0 <= v <= 1.0 for v in out)


# short answers math_verify cannot finish: comparisons past the deadline (10^(10^10) against 3), parses past it
MATH_TIMEOUTS = [
    "<answer>$10^{10^{10}}$</answer>",
    "<answer>$" + "{" * 50 + "1" + "}" * 50 + "$</answer>",
    "<answer>$" + "2^{" * 400 + "2" + "}" * 400 + "$</answer>",
    "<answer>" + "\\[" * 5000 + "</answer>",
]


@pytest.mark.parametrize("text", MATH_TIMEOUTS, ids=["power", "nested-braces", "power-tower", "open-brackets"])
def test_accuracy_is_total_when_math_verify_times_out(text):
    rows = [{**GOOD_DEFAULT, "accu_reward_method": m} for m in ("default", "math")]
    assert call_like_trl("accuracy", [text] * 2, rows) == [0.0, 0.0]


@pytest.mark.parametrize(
    "error",
    [
        ValueError("signal only works in main thread of the main interpreter"),
        RecursionError(),
        MemoryError(),
        TypeError("x"),
        "timeout",
    ],
    ids=["thread", "recursion", "memory", "type", "timeout"],
)
def test_accuracy_is_total_when_math_verify_raises(monkeypatch, error):
    import math_verify
    from math_verify.errors import TimeoutException

    def boom(*args, **kwargs):
        raise TimeoutException("late alarm") if error == "timeout" else error

    for fn in ("parse", "verify"):
        with monkeypatch.context() as patch:
            patch.setattr(math_verify, fn, boom)
            accuracy.clear_math_verify_cache()
            rows = [{**GOOD_DEFAULT, "accu_reward_method": m} for m in accuracy.ACCURACY_METHODS]
            out = call_like_trl("accuracy", ["<answer>3</answer>"] * len(rows), rows)
            # the text rules still pay a right answer (mcq: "3" is no choice letter)
            assert out == [0.0 if m == "mcq" else 1.0 for m in accuracy.ACCURACY_METHODS]
    accuracy.clear_math_verify_cache()
