"""The shared builders of issue 28's de-duplication: each repeated block now has one home, and these tests pin that
home's behaviour (the exact texts and values the copies had)."""

from __future__ import annotations

import argparse
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from groundwork.argtypes import add_number_flag, flag_values, integer, number, with_range
from gui_grounding.cli import _tts_config, build_parser
from gui_grounding.data import formats
from gui_grounding.data.collect.web import WebSettings
from gui_grounding.data.collect.web import register_cli as register_collect_web
from gui_grounding.data.formats_common import ReadContext
from gui_grounding.eval.tts import TTSConfig
from gui_grounding.training import rewards

# ---- groundwork.argtypes: the number flag types and add_number_flag --------------------------------------------------

_TEXTS = st.one_of(
    st.text(max_size=12),
    st.integers(-(10**6), 10**6).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.sampled_from(["nan", "inf", "-inf", "1e3", "1_000", " 7 ", "0x10", "", "3.0", "-0", "1.5"]),
)


def _refused(parse, value: str) -> str | None:
    try:
        parse(value)
    except argparse.ArgumentTypeError as err:
        return str(err)
    return None


@settings(max_examples=50, deadline=None)
@given(value=_TEXTS, lo=st.integers(-5, 5), span=st.integers(0, 10), lo_open=st.booleans(), hi_open=st.booleans())
def test_number_accepts_exactly_the_finite_values_in_range(value, lo, span, lo_open, hi_open):
    """``number``: the float of the text when it is finite and inside the (open or closed) bounds, else the one
    message ``must be <range>, got '<text>'``."""
    hi = lo + span
    parse = number(min=lo, max=hi, min_open=lo_open, max_open=hi_open)
    try:
        x = float(value)
    except ValueError:
        x = math.nan
    inside = math.isfinite(x) and (x > lo if lo_open else x >= lo) and (x < hi if hi_open else x <= hi)
    if inside:
        assert parse(value) == x
    else:
        assert _refused(parse, value) == f"must be {parse.range_text}, got {value!r}"
    assert parse.__name__ == "number" and parse.bounds == (lo, hi, lo_open, hi_open)


@settings(max_examples=50, deadline=None)
@given(value=_TEXTS, lo=st.integers(-5, 5), span=st.integers(0, 10))
def test_integer_accepts_exactly_the_integers_in_range(value, lo, span):
    """``integer``: base-10 integer text (underscores and surrounding blanks allowed, no float) within the bounds."""
    hi = lo + span
    parse = integer(min=lo, max=hi)
    try:
        x = int(value.strip().replace("_", ""), 10)
    except ValueError:
        x = None
    if x is not None and lo <= x <= hi:
        assert parse(value) == x
    else:
        assert _refused(parse, value) == f"must be an integer >= {lo} and <= {hi}, got {value!r}"
    assert parse.__name__ == "integer" and parse.bounds == (lo, hi, False, False)


def test_add_number_flag_pairs_the_type_with_its_help():
    """The flag's type is ``parse``, its help ends with ``parse``'s range; other keywords pass through; a refused
    value is argparse's one-line usage error naming the flag."""
    parser = argparse.ArgumentParser(prog="p", exit_on_error=False)
    count = integer(min=1)
    action = add_number_flag(parser, "--limit", count, None, "evaluate only the first N", metavar="N")
    assert (action.type, action.default, action.metavar) == (count, None, "N")
    assert (
        action.help == with_range("evaluate only the first N", count) == "evaluate only the first N (an integer >= 1)"
    )
    assert parser.parse_args(["--limit", "3"]).limit == 3
    with pytest.raises(argparse.ArgumentError, match=r"argument --limit: must be an integer >= 1, got '0'"):
        parser.parse_args(["--limit", "0"])


def test_flag_values_hands_on_the_named_dests():
    """``flag_values``: exactly the named dests (with ``prefix`` before each), in order; a name the parser does not
    define is an AttributeError, never a silent default."""
    args = argparse.Namespace(cache_dir="c", shard=None, tts_seed=3, tts_zoom=0.5, func=print)
    assert flag_values(args, "shard", "cache_dir") == {"shard": None, "cache_dir": "c"}
    assert flag_values(args, "seed", "zoom", prefix="tts_") == {"seed": 3, "zoom": 0.5}
    assert flag_values(args) == {}
    with pytest.raises(AttributeError, match="strict"):
        flag_values(args, "cache_dir", "strict")


def test_eval_tts_flags_build_the_tts_config():
    """``gui-grounding eval``'s --tts-* flags arrive in TTSConfig under the field of the same name."""
    args = build_parser().parse_args(
        ["eval", "--data", "d", "--predictions", "p", "--out", "o", "--tts", "consensus", "--tts-samples", "5"]
        + [
            "--tts-temperature",
            "0.5",
            "--tts-top-p",
            "0.9",
            "--tts-seed",
            "4",
            "--tts-region",
            "30",
            "--tts-zoom",
            "0.3",
        ]
    )
    assert _tts_config(args) == TTSConfig(
        mode="consensus", samples=5, temperature=0.5, top_p=0.9, seed=4, region=30.0, zoom=0.3
    )


# ---- gui_grounding.data.collect.web: WebSettings, the collector's settings as one object ---------------------------


def _collect_web_args(*flags: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="p")
    register_collect_web(parser.add_subparsers(dest="command"))
    return parser.parse_args(["collect-web", "pages", "--out", "o", *flags])


def test_collect_web_flags_are_the_settings():
    """Every WebSettings field is a collect-web flag of the same dest, with the same default (one home: the
    dataclass); given flags arrive unchanged."""
    assert WebSettings.from_args(_collect_web_args()) == WebSettings()
    given_flags = ["--viewports", "640x480", "--scroll-offsets", "0,300", "--seed", "7", "--max-pages", "3"]
    given_flags += ["--test-fraction", "0.5", "--min-size", "2", "--min-area", "9", "--max-name-chars", "20"]
    given_flags += ["--max-per-screenshot", "4", "--page-timeout", "12", "--resource-root", "r", "--chromium", "c"]
    assert WebSettings.from_args(_collect_web_args(*given_flags)) == WebSettings(
        viewports=((640, 480),),
        seed=7,
        scroll_offsets=(0, 300),
        max_pages=3,
        test_fraction=0.5,
        min_size=2,
        min_area=9,
        max_name_chars=20,
        max_per_screenshot=4,
        page_timeout=12.0,
        resource_roots=["r"],
        chromium="c",
    )


_BAD_SETTINGS = st.sampled_from(
    [
        ("seed", -1),
        ("seed", 1.0),
        ("seed", True),
        ("max_pages", 0),
        ("min_size", -1),
        ("min_area", 1.5),
        ("max_name_chars", 0),
        ("max_per_screenshot", 0),
        ("test_fraction", 1.0),
        ("test_fraction", math.nan),
        ("page_timeout", 0),
        ("page_timeout", math.inf),
        ("viewports", ((0, 600),)),
        ("viewports", ((10, 10), (10, 10))),
        ("scroll_offsets", (0, 0)),
        ("scroll_offsets", ()),
    ]
)


@settings(max_examples=25, deadline=None)
@given(bad=_BAD_SETTINGS)
def test_web_settings_refuse_what_the_flags_refuse(bad):
    """``WebSettings.checked`` (what collect_web and collect-web both call) refuses a value the CLI types would
    refuse, one line naming the setting."""
    name, value = bad
    with pytest.raises(ValueError, match=rf"^{name}\b") as err:
        WebSettings(**{name: value}).checked()
    assert "\n" not in str(err.value)


def test_web_settings_checked_normalises():
    """Lists become tuples of ints; one resource root given as text becomes a list of it."""
    s = WebSettings(viewports=[[640, 480]], scroll_offsets=[0, 5], resource_roots="docs").checked()
    assert (s.viewports, s.scroll_offsets, s.resource_roots) == (((640, 480),), (0, 5), ["docs"])


# ---- gui_grounding.training.rewards: one column plumbing for the target rewards ------------------------------------

_REWARDS = [
    (rewards.distance_reward, rewards.score_distance, "non_thinking", True, True),
    (rewards.click_distance_bonus_reward, rewards.score_click_distance_bonus, "non_thinking", True, True),
    (rewards.gaussian_point_reward, rewards.score_gaussian_point, "non_thinking", False, True),
    (rewards.iou_reward, rewards.score_iou, "box", False, False),
    (rewards.gaussian_coverage_reward, rewards.score_gaussian_coverage, "box", False, False),
]
_ANSWERS = st.sampled_from(["(10,20)", "[5, 5, 30, 30]", "<answer>(3,4)</answer>", "nothing", "(1e9,2)", "[0,0,9,9]"])


@settings(max_examples=40, deadline=None)
@given(
    which=st.integers(0, len(_REWARDS) - 1),
    answers=st.lists(_ANSWERS, min_size=1, max_size=4),
    answer_frame=st.booleans(),
    modes=st.booleans(),
)
def test_target_rewards_score_each_row_in_its_answer_frame(which, answers, answer_frame, modes):
    """Every target reward is its score function applied row by row to the answer-frame columns (``target_boxes_answer``
    / ``answer_size`` when present, else the resized ones), the row's mode (default per reward) and, where the score
    takes one, the row's adapter."""
    reward, score, default_mode, sized, takes_adapter = _REWARDS[which]
    n = len(answers)
    completions = [[{"role": "assistant", "content": a}] for a in answers]
    resized = [[[0, 0, 40, 40]]] * n
    columns = {"adapter": ["gta1"] * n}
    if answer_frame:
        columns.update(target_boxes_answer=[[[0, 0, 400, 400]]] * n, answer_size=[[1000, 1000]] * n)
    mode_column = [default_mode] * n if modes else None
    boxes = columns.get("target_boxes_answer", resized)
    sizes = columns.get("answer_size", [[50, 50]] * n)
    if sized:
        got = reward(completions, resized, [[50, 50]] * n, prompt_mode=mode_column, **columns)
        want = [score(a, b, s, default_mode, "gta1") for a, b, s in zip(answers, boxes, sizes, strict=True)]
    else:
        got = reward(completions, resized, prompt_mode=mode_column, **columns)
        extra = ("gta1",) if takes_adapter else ()
        want = [score(a, b, default_mode, *extra) for a, b in zip(answers, boxes, strict=True)]
    assert got == want
    key = "target_boxes_answer" if answer_frame else "resized"
    short = {"resized": resized, **columns, key: [[[0, 0, 9, 9]]] * (n + 1)}  # the boxes read: one row too many
    with pytest.raises(ValueError):  # a column of another length is refused, never silently cut
        if sized:
            reward(completions, short.pop("resized"), [[50, 50]] * n, **short)
        else:
            reward(completions, short.pop("resized"), **short)


# ---- gui_grounding.data.formats: the flat readers' one last step, OS-Atlas and SeeClick's one element shape --------

_ELEMENTS = st.fixed_dictionaries(
    {"instruction": st.sampled_from(["Click OK", "", "x" * 3]), "bbox": st.just([0.1, 0.2, 0.3, 0.4])},
    optional={"data_type": st.sampled_from(["text", "icon", "hover", None, 3])},
)


@settings(max_examples=30, deadline=None)
@given(element=_ELEMENTS)
def test_os_atlas_and_seeclick_read_one_element_alike(element):
    """An element ``{instruction, bbox ratios, data_type?}`` is the same target in OS-Atlas (flat and grouped) and in
    SeeClick: ratio box, ``ui_type`` only text/icon, ``data_type`` kept when present."""
    ctx = ReadContext("web_domain/a.json", "a.json:[0]", 0, "a")
    flat = formats.read_os_atlas({"img_filename": "web/s.png", **element}, ctx)[0]
    grouped = formats.read_os_atlas({"img_filename": "web/s.png", "elements": [element]}, ctx)[0]
    seeclick = formats.read_seeclick({"img_filename": "web/s.png", "elements": [element]}, ctx)[0]
    for t in (flat, grouped, seeclick):
        assert (t.instruction, t.boxes, t.unit) == (element["instruction"], [(0.1, 0.2, 0.3, 0.4)], "ratio")
        assert t.ui_type == (element.get("data_type") if element.get("data_type") in ("text", "icon") else None)
        assert t.extra.get("data_type", "absent") == element.get("data_type", "absent")
    assert flat.raw is not None and flat.image == grouped.image == seeclick.image == "web/s.png"


@pytest.mark.parametrize("platform", ["web", "mobile", "desktop", "tv", None, ["web"]])
def test_flat_readers_keep_only_known_platforms(platform):
    """GUI-R1's ``group`` and VLM-R1's ``platform`` become the sample's platform only when mobile/desktop/web."""
    ctx = ReadContext("g.parquet", "g.parquet:[0]", 0, "g")
    row = {"image": "i.png", "instruction": "Click", "gt_bbox": [1, 2, 30, 40], "group": platform, "ui_type": "icon"}
    target = formats.read_gui_r1(row, ctx)[0]
    assert target.platform == (platform if platform in ("web", "mobile", "desktop") else None)
    assert (target.boxes, target.unit, target.ui_type, target.raw) == ([(1.0, 2.0, 30.0, 40.0)], "pixel", "icon", row)
