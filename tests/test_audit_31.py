"""Issue 31 item 3: the profile audit's fixes, each pinned by the inputs and outputs of the authors' code or card.

Fast (no model, no image decoding beyond tiny PIL images): every test runs in well under a second.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gui_grounding.models.profiles import PROFILES
from gui_grounding.models.prompts import parse_literal_box


# ---- a. GTA1-32B/72B: the model cards, not the paper; budget assumed ---------------------------------------------
def test_gta1_big_profiles_cite_the_model_card_and_flag_the_assumed_budget():
    for name, values in (("gta1-32b-2507", (53.6, 93.2, 61.9)), ("gta1-72b-2507", (58.4, 94.8, 66.7))):
        prof = PROFILES[name]
        assert [s.value for s in prof.published] == list(values)
        assert {s.source for s in prof.published} == {
            "https://huggingface.co/HelloKKMe/GTA1-72B (model card, grounding table: GTA1-32B and GTA1-72B rows)"
        }
        assert "paper" not in " ".join(s.source for s in prof.published)
        assert "pixel budget ASSUMED equal to the 7B README's" in prof.notes and "unverified" in prof.notes
        assert prof.budget == PROFILES["gta1-7b-2507"].budget


def test_osworld_g_published_numbers_state_their_denominator():
    """No GTA1 / UI-Venus source says how refusal items were counted: every OSWorld-G number is 'unstated'."""
    found = {
        (p.name, s.value): s.denominator for p in PROFILES.values() for s in p.published if s.benchmark == "osworld-g"
    }
    for key in (
        ("gta1-7b-2507", 55.1),
        ("gta1-7b-2507", 67.7),
        ("gta1-32b-2507", 61.9),
        ("gta1-72b-2507", 66.7),
        ("ui-venus-ground-7b", 54.6),
    ):
        assert found[key] == "unstated"


# ---- h. Qwen3-VL: ClawGUI's 512 new tokens; the #1881 request unread and said so ----------------------------------
def test_qwen3_vl_profile_allows_clawguis_512_tokens_and_labels_its_prompt():
    prof = PROFILES["qwen3-vl-8b"]
    assert prof.max_new_tokens == 512
    assert "qwen3vl_run_transformers.sh:21-22 (d990d3e): MAX_TOKENS=512" in prof.sources["max_new_tokens"]
    assert "paraphrase" in prof.sources["adapter"]
    assert "QwenLM/Qwen3-VL#1881" in prof.notes and "UNVERIFIED" in prof.notes


# ---- e. InternVL: the harness's order, not its broken box path ----------------------------------------------------
def test_internvl_reads_the_boxes_the_harness_box_path_cannot():
    """likaixin2000/ScreenSpot-Pro-GUI-Grounding models/internvl.py:152-177 at bd8bbbb: '[[500,500]]' is the point
    (0.5, 0.5) there; '[[100, 200, 300, 400]]' matches nothing there (no point); '[[100,200,300,400]]' raises
    AttributeError there. Ours: the point, and both boxes' centre, on the 0-1000 grid."""
    from gui_grounding.models.adapters import get_adapter

    ad = get_adapter("internvl-gui")
    assert ad.parse_answer("[[500,500]]", strict=False) == (500.0, 500.0)
    assert ad.parse_answer("[[100, 200, 300, 400]]", strict=False) == (200.0, 300.0)
    assert ad.parse_answer("[[100,200,300,400]]", strict=False) == (200.0, 300.0)
    assert ad.parse_answer("[[1,2,3,4]] then [[10, 20, 30, 40]]", strict=False) == (20.0, 30.0)  # the last box
    assert "harness's box rule" in type(ad).__doc__ and "AttributeError" in type(ad).__doc__
    assert "AttributeError" in PROFILES["internvl3-8b"].notes


# ---- c. UI-Venus / GUI-G2 boxes: what Python's eval reads as a list of numbers, read as data ------------------------
def test_literal_box_reads_what_the_official_eval_reads():
    """ui_venus_ground_7b.py:88-98 (fc7670d) / GUI-G2 README.md:213-221 (5c5c365): eval(answer), then box[0..3]."""
    box = (850.0, 1149.0, 967.0, 1177.0)
    for text in (
        "[ 850, 1149, 967, 1177 ]",
        "[850 ,1149 ,967 ,1177]",
        "[850,\n1149,\n967,\n1177]\n",
        "(850, 1149, 967, 1177)",
        "[850, 1149, 967, 1177,]",
        "[850.0, 1149, 0x3c7, 1_177]",
        "[850, 1149, 967, 1177, 5]",  # eval reads box[0..3] of a longer list
        "The box: [850, 1149, 967, 1177]",  # eval raises on the prose; we read the literal (documented)
        "[OK] [850, 1149, 967, 1177]",  # a span that is no literal is passed over
    ):
        assert parse_literal_box(text) == box, text
    for text in ("[-1,-1]", "[[850, 1149, 967, 1177]]", "['a', 1, 2, 3]", "[True, 1, 2, 3]", "[1, 2, 3, 1e999]"):
        assert parse_literal_box(text) is None, text
    from gui_grounding.models.adapters import get_adapter

    for name in ("ui-venus-ground", "gui-g2"):  # the adapters' inference parse: the centre, in resized pixels
        assert get_adapter(name).parse_answer("[ 850, 1149, 967, 1177 ]", strict=False) == (908.5, 1163.0)
        assert get_adapter(name).parse_answer("[ 850, 1149, 967, 1177 ]", strict=True) is None  # training: one form


_SPACE = st.text(alphabet=" \t\n", max_size=3)
_COORD = st.integers(min_value=-10_000, max_value=10_000)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_COORD, min_size=4, max_size=4), st.lists(_SPACE, min_size=10, max_size=10), st.booleans())
def test_literal_box_is_the_same_box_whatever_the_spacing(values, spaces, as_tuple):
    opening, closing = ("(", ")") if as_tuple else ("[", "]")
    text = spaces[0] + opening + spaces[1]
    for i, v in enumerate(values):
        text += f"{v}{spaces[2 + 2 * i]}" + ("," + spaces[3 + 2 * i] if i < 3 else "")
    text += closing + spaces[9]
    assert parse_literal_box(text) == tuple(float(v) for v in values)


_HOSTILE_ITEM = st.one_of(
    st.integers(min_value=10**7 + 1, max_value=10**300).map(str),  # beyond +-1e7, up to 300 digits
    st.sampled_from(["nan", "inf", "-inf", "1e999", "float('nan')", "None", "True", "'12'", "1j", "{}", "...", "x"]),
    st.lists(st.integers(-5, 5), min_size=1, max_size=4).map(repr),  # a nested list
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_COORD, min_size=3, max_size=3), _HOSTILE_ITEM, st.integers(0, 3))
def test_literal_box_hostile_item_gives_no_box_never_an_exception(values, bad, where):
    items = [str(v) for v in values]
    items.insert(where, bad)
    assert parse_literal_box("[" + ", ".join(items) + "]") is None


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(alphabet=st.sampled_from(list("[](),.-+e0123456789 \n'\"jxTN")), max_size=400))
def test_literal_box_never_raises_and_returns_coordinates(text):
    box = parse_literal_box(text)
    assert box is None or (len(box) == 4 and all(isinstance(v, float) and abs(v) <= 1e7 for v in box))


def test_literal_box_is_linear_on_hostile_lengths():
    import time

    start = time.perf_counter()
    for text in ("[" * 200_000, "(a)" * 70_000, "[1," * 70_000, "[" + "9" * 100_000 + "]"):
        assert parse_literal_box(text) is None
    assert time.perf_counter() - start < 2.0


# ---- d. the family's [-1,-1]: read per profile, as each checkpoint's own script reads it --------------------------
def _venus_reading(adapter, text, size=(1920, 1080)):
    """eval's reading of ``text`` (the predictions line's point and refusal) on a 1920x1080 screenshot, which
    UI-Venus's budget (2,000,000 .. 4,800,000, factor 28) sends at 1932x1092 (written out: no smart_resize import)."""
    from gui_grounding.data.schema import Sample
    from gui_grounding.eval.backends import eval_reading
    from gui_grounding.models.adapters.base import Request
    from gui_grounding.models.frames import Frame

    frame = Frame(*size, 1932, 1092)
    request = Request(adapter.messages("x", frame), None, {"frame": frame})
    reading = eval_reading(Sample("s", "x", "", [], *size), request, text, adapter)
    return reading["point"], reading["refusal"]


def test_refusal_reading_reaches_the_adapter_of_the_profile():
    """ui_venus_ground_7b.py:88-98 (fc7670d): eval('[-1,-1]') then box[3] -> IndexError -> [0,0,0,0] -> the point
    (0, 0); eval('[-1,-1,-1,-1]') -> the box, centre (-1, -1) resized -> negative original pixels."""
    from gui_grounding.models.adapters import get_adapter

    plain = get_adapter("ui-venus-ground")
    venus = PROFILES["ui-venus-ground-7b"].configure(plain)
    assert (
        PROFILES["ui-venus-ground-7b"].refusal == "origin"
        and "refusal 'origin'" in PROFILES["ui-venus-ground-7b"].notes
    )
    assert (plain.refusal_reading, venus.refusal_reading) == ("refusal", "origin")  # a copy; the registry's unchanged
    # 1920x1080 under UI-Venus's budget is sent at 1932x1092
    assert _venus_reading(plain, "[-1,-1]") == (None, True)
    assert _venus_reading(venus, "[-1,-1]") == ([0.0, 0.0], False)
    assert _venus_reading(venus, " [ -1 , -1 ]\n") == ([0.0, 0.0], False)
    assert _venus_reading(venus, "[-1,-1,-1,-1]") == ([-1 / (1932 / 1920), -1 / (1092 / 1080)], False)
    point = PROFILES["gui-g2-7b"].configure(get_adapter("gui-g2")).configured(refusal="point")
    assert _venus_reading(point, "[-1,-1]") == ([-1 / (1932 / 1920), -1 / (1092 / 1080)], False)
    # another adapter than the profile's is left as it is; a reading for a family without a no-target answer fails
    assert PROFILES["ui-venus-ground-7b"].configure(get_adapter("gui-g2")).refusal_reading == "refusal"
    import pytest

    with pytest.raises(ValueError, match="no explicit 'no target' answer"):
        get_adapter("gta1").configured(refusal="origin")
    with pytest.raises(ValueError, match="refusal reading must be one of"):
        plain.configured(refusal="zero")


def test_refusal_origin_scores_osworld_g_like_the_script():
    """On OSWorld-G the 'origin' reading of [-1,-1] is the point (0, 0): wrong on a refusal item (not negative),
    correct on an item whose target covers the origin, wrong elsewhere."""
    from gui_grounding.data.schema import Sample
    from gui_grounding.eval.judge import CORRECT, WRONG, judge
    from gui_grounding.models.adapters import get_adapter

    venus = PROFILES["ui-venus-ground-7b"].configure(get_adapter("ui-venus-ground"))
    point, refusal = _venus_reading(venus, "[-1,-1]")
    refusal_item = Sample("r", "x", "", [], 1920, 1080, refusal=True)
    origin_item = Sample("o", "x", "", [(0.0, 0.0, 40.0, 30.0)], 1920, 1080)
    other_item = Sample("t", "x", "", [(100.0, 100.0, 140.0, 130.0)], 1920, 1080)
    assert [judge(s, point, refusal=refusal) for s in (refusal_item, origin_item, other_item)] == [
        WRONG,
        CORRECT,
        WRONG,
    ]


# ---- b. Qwen2.5-VL harness: stated at the 99,999,999 frame, sent shrunk again by the processor's default ----------
def test_qwen25vl_harness_states_one_frame_and_sends_the_processor_shrunk_image():
    """likaixin2000/ScreenSpot-Pro-GUI-Grounding models/qwen2_5vl.py at bd8bbbb: smart_resize(2880, 5120, factor 28,
    min 3136, max 99999999) = 2884x5124 is stated in the prompt (:143-154) and divides the answer (:208); the
    processor at its defaults (:121, :164-169; max_pixels 12845056) resizes that image again to 2688x4760."""
    from PIL import Image

    from gui_grounding.data.schema import Sample
    from gui_grounding.eval.backends import record
    from gui_grounding.models.adapters import get_adapter

    profile = PROFILES["qwen2.5-vl-7b"]
    budget = profile.budget
    adapter = get_adapter(profile.adapter)
    sample = Sample("s", "Click OK", "", [(2550.0, 1430.0, 2570.0, 1450.0)], 5120, 2880)
    request = adapter.build_request(sample, Image.new("RGB", (5120, 2880)), budget=budget)
    assert "* The screen's resolution is 5124x2884.\n" in request.messages[0]["content"][1]["text"]
    assert request.image.size == (4760, 2688) == budget.size_sent(5120, 2880)
    assert budget.stated_size(5120, 2880) == (5124, 2884)
    # the answer is in the stated frame: x / 5124 * 5120 (the harness's point / resized_width, times img_size)
    line = record(sample, request, "2562, 1442]}}\n</tool_call>", adapter)
    assert line["point"] == [2560.0, 1440.0]
    # the processor is set to the bounds that leave the sent image as it is (hf: apply; vllm: mm_processor_kwargs)
    assert budget.processor_bounds() == (3136, 12_845_056)
    seen = []
    budget.apply(None, type("M", (), {"apply_pixel_budget": lambda self, proc, b: seen.append(b)})())
    assert (seen[0].min_pixels, seen[0].max_pixels) == (3136, 12_845_056)
    # a screenshot at or under 12,845,056 pixels is sent as stated (one resize), and the record says the bound
    assert budget.size_sent(1920, 1080) == budget.stated_size(1920, 1080) == (1932, 1092)
    assert budget.to_dict()["processor_max_pixels"] == 12_845_056
    assert "processor max_pixels 12,845,056" in budget.describe()
    # every other published budget states what it sends
    assert all(not p.budget.reshrinks for p in PROFILES.values() if p.adapter != "qwen2.5-vl")


# ---- f. consensus: box answers vote with their box, points with the 50-px square (GUI-RC) -------------------------
GUI_RC_BOXES = [[100.0, 100.0, 200.0, 140.0], [105.0, 102.0, 198.0, 139.0], [300.0, 200.0, 310.0, 210.0]]


def test_consensus_votes_with_the_box_a_sample_wrote():
    """ZJU-REAL/GUI-RCPO GUI-RC/evaluation.py:28-39,166-206 at cd3bd51: a four-number answer is its own region
    (int() edges, clipped), a two-number answer a 50-px square; the answer is the centre of the largest max-vote
    region. The three boxes overlap twice in [105, 198) x [102, 139): GUI-RC answers (151.5, 120.5)."""
    from gui_grounding.models.consensus import consensus

    centres = [((b[0] + b[2]) / 2, (b[1] + b[3]) / 2) for b in GUI_RC_BOXES]
    vote = consensus(centres, 1920, 1080, boxes=GUI_RC_BOXES)
    assert (vote.point, vote.region, vote.votes, vote.members) == ((151.5, 120.5), (105, 102, 198, 139), 2, (1, 1, 0))
    assert consensus(centres, 1920, 1080).point == (150.5, 120.0)  # the old vote on 50-px squares around the centres
    mixed = consensus([centres[0], (151.0, 121.0)], 1920, 1080, boxes=[GUI_RC_BOXES[0], None])  # a box and a point
    assert (mixed.point, mixed.region) == ((151.0, 120.0), (126, 100, 176, 140))  # [126, 176) x [96, 146) and the box


class _Scripted:
    """An engine answering every request with ``texts`` (greedy: the first)."""

    name, sampling_note, chunk_size = "scripted", "", 8

    def __init__(self, texts):
        self.texts = texts

    def generate(self, requests, *, n, temperature, top_p=1.0, seeds=None):
        from gui_grounding.eval.engine import Draw

        return [Draw(list(self.texts[:n]) if n > 1 else [self.texts[0]]) for _ in requests]


def test_consensus_run_writes_and_rescores_the_sample_boxes(tmp_path):
    """ui-venus-ground answers boxes in resized pixels; on a 560x336 screenshot under a budget that keeps it as it is
    (resized == original) the vote is GUI-RC's: (151.5, 120.5), written with its sample_boxes and rescored alike."""
    import json

    from PIL import Image

    from groundwork.pixel_budget import PixelBudget
    from gui_grounding.data.schema import Sample
    from gui_grounding.eval.tts import TTSConfig, predict_tts, tts_predictions
    from gui_grounding.models.adapters import get_adapter

    path = tmp_path / "s.png"
    Image.new("RGB", (560, 336)).save(path)
    sample = Sample("a", "Click ok", str(path), [(140.0, 110.0, 160.0, 130.0)], 560, 336)
    budget = PixelBudget.published("test", factor=28, min_pixels=3136, max_pixels=1_000_000)
    texts = ["[" + ", ".join(str(int(v)) for v in b) + "]" for b in GUI_RC_BOXES]
    cfg = TTSConfig(mode="consensus", samples=3)
    out = tmp_path / "p.jsonl"
    predict_tts(_Scripted(texts), [sample], str(out), adapter=get_adapter("ui-venus-ground"), budget=budget, tts=cfg)
    (line,) = [json.loads(x) for x in out.read_text().splitlines()]
    assert line["sample_boxes"] == GUI_RC_BOXES
    assert line["samples"] == [[150.0, 120.0], [151.5, 120.5], [305.0, 205.0]]
    assert (line["tts"]["point"], line["tts"]["region"]) == ([151.5, 120.5], [105, 102, 198, 139])
    answers = tts_predictions({"a": line}, [sample], cfg)
    assert answers["a"]["point"] == [151.5, 120.5]
    without = tts_predictions({"a": {k: v for k, v in line.items() if k != "sample_boxes"}}, [sample], cfg)
    assert without["a"]["point"] == [150.5, 120.0]
    hostile = tts_predictions({"a": {**line, "sample_boxes": [[1, 2, 3]] * 3}}, [sample], cfg)
    assert hostile["a"]["point"] is None and "sample_boxes[0]" in hostile["a"]["malformed"]


def test_gui_rc_defaults_are_stated_beside_ours():
    from gui_grounding.eval import tts
    from gui_grounding.models import consensus

    assert (tts.DEFAULT_SAMPLES, tts.DEFAULT_TOP_P, tts.DEFAULT_TEMPERATURE) == (8, 1.0, 0.7)
    for doc in (tts.__doc__, consensus.__doc__):
        assert "64" in doc and "0.95" in doc


# ---- g. UI-TARS-1.5: the published snippet's decoding, as a second profile; each backend sends it or refuses ------
def test_ui_tars_api_profile_sends_the_snippets_settings():
    """bytedance/UI-TARS README_v1.md:324-337 at 582f3a7: chat.completions.create(..., frequency_penalty=1,
    max_tokens=128), no temperature (the server's default)."""
    from gui_grounding.eval.backends import check_decoding, greedy_settings, sampling_settings
    from gui_grounding.eval.backends.openai_api import OpenAIEngine
    from gui_grounding.models.adapters.base import Request

    greedy, api = PROFILES["ui-tars-1.5-7b"], PROFILES["ui-tars-1.5-7b-api"]
    assert (greedy.decoding, api.decoding) == ({}, {"frequency_penalty": 1.0, "temperature": None})
    assert api.max_new_tokens == 128 and api.backends == ("openai",) and api.adapter == greedy.adapter
    assert (
        "README_v1.md:335-336" in api.sources["decoding"] and "unverified" in api.notes and "unverified" in greedy.notes
    )
    assert api.decoding_text() == "frequency_penalty 1.0, temperature the server default, max_new_tokens 128"
    assert greedy_settings(api.decoding) == {"frequency_penalty": 1.0}  # no temperature field: the server's default
    assert greedy_settings({}) == {"temperature": 0.0}
    assert sampling_settings(api.decoding) == {"frequency_penalty": 1.0}
    sent = []

    class Resp:
        usage = None
        choices = [type("C", (), {"message": type("M", (), {"content": "(1,2)"})()})()]

    def create(sid, request, **params):
        sent.append(params)
        return Resp()

    engine = OpenAIEngine(create, concurrency=1, stats={"failed": 0}, decoding=check_decoding(api.decoding, "openai"))
    request = Request([], None, {"sample_id": "s"})
    engine.generate([request], n=1, temperature=0.0)
    engine.generate([request], n=1, temperature=0.7, top_p=0.95, seeds=[5])
    assert sent == [
        {"frequency_penalty": 1.0},
        {"temperature": 0.7, "frequency_penalty": 1.0, "n": 1, "top_p": 0.95, "seed": 5},
    ]


def test_decoding_reaches_vllm_sampling_params_and_hf_refuses_it():
    import pytest

    from gui_grounding.eval.backends import check_decoding
    from gui_grounding.eval.backends.vllm_engine import VLLMEngine
    from gui_grounding.models.adapters.base import Request

    made = []
    vllm = type("V", (), {"SamplingParams": staticmethod(lambda **kw: made.append(kw) or kw)})
    llm = type("L", (), {"chat": lambda self, msgs, **kw: []})()
    engine = VLLMEngine(vllm, llm, max_new_tokens=128, chunk_size=8, decoding={"frequency_penalty": 1.0})
    engine.generate([Request([], None, {})], n=1, temperature=0.0)
    assert made == [{"temperature": 0.0, "frequency_penalty": 1.0, "max_tokens": 128}]
    with pytest.raises(ValueError, match="has no such default: use --backend openai"):
        check_decoding({"temperature": None}, "vllm")
    with pytest.raises(ValueError, match="repetition_penalty is a different, multiplicative penalty"):
        check_decoding({"frequency_penalty": 1.0}, "hf")
    assert check_decoding({"temperature": 0}, "hf") == {"temperature": 0}
    with pytest.raises(ValueError, match="unknown setting 'repetition_penalty'"):
        check_decoding({"repetition_penalty": 1.1}, "openai")
    with pytest.raises(ValueError, match=r"frequency_penalty must be a number in \[-2, 2\], got nan"):
        check_decoding({"frequency_penalty": float("nan")}, "openai")


def test_eval_refuses_a_profiles_decoding_the_backend_cannot_send(tmp_path):
    """Before any data is read or model loaded: --profile ui-tars-1.5-7b-api --backend hf is refused, naming why."""
    import pytest

    from gui_grounding.eval.run import run_eval

    with pytest.raises(ValueError, match="hf backend decodes greedily"):
        run_eval(
            "screenspot-v2",
            str(tmp_path / "none"),
            str(tmp_path / "out"),
            model="m",
            backend="hf",
            profile="ui-tars-1.5-7b-api",
        )
    assert not (tmp_path / "out").exists()


# ---- i. OSWorld-G unreadable answers: the authors' eval.py unreadable here; ours kept, the difference stated ------
def test_osworld_g_unreadable_answer_stays_no_point_on_an_origin_target():
    """The VLMEvalKit port (vlmeval/dataset/GUI/osworld_g.py:42-75,191-243 at ae5fdb1) makes an unparsable answer
    [0,0,0,0]: centre (0, 0), correct on a box covering the origin. xlang-ai/OSWorld-G's own eval.py could not be
    read, so ours stays: no point is wrong_format on every item; the point (0, 0) itself is scored as any point."""
    from gui_grounding.data.schema import Sample
    from gui_grounding.eval import judge as judge_module
    from gui_grounding.eval.judge import CORRECT, WRONG, WRONG_FORMAT, judge

    origin = Sample("o", "x", "", [(0.0, 0.0, 40.0, 30.0)], 1920, 1080)
    refusal = Sample("r", "x", "", [], 1920, 1080, refusal=True)
    assert [judge(origin, None), judge(refusal, None)] == [WRONG_FORMAT, WRONG_FORMAT]
    assert [judge(origin, (0.0, 0.0)), judge(refusal, (0.0, 0.0))] == [CORRECT, WRONG]  # the port's reading
    doc = judge_module.__doc__
    assert "unverified at its source" in doc and "correct on a bbox item whose box covers the screen origin" in doc


# ---- j. 0-1000 answers beyond the grid: flagged, counted, never clipped ---------------------------------------------
def test_outside_frame_answers_are_flagged_counted_and_mapped_as_written(tmp_path):
    import json

    from gui_grounding.eval.backends import record
    from gui_grounding.eval.benchmarks import get_benchmark
    from gui_grounding.eval.run import run_eval
    from gui_grounding.models.adapters import get_adapter
    from gui_grounding.models.adapters.base import Request
    from gui_grounding.models.frames import Frame

    data = "data/mini_benchmarks/osworld_g"
    samples, _ = get_benchmark("osworld-g", subset="plain").load(data)
    adapter = get_adapter("qwen3-vl")
    answers = ['{"point_2d": [1200, 300]}', '{"point_2d": [-5, 10]}', '{"point_2d": [1000, 0]}', "no idea"]
    lines = []
    for s, text in zip(samples, answers + ["none"] * len(samples), strict=False):
        request = Request([], None, {"frame": Frame(s.width, s.height, s.width, s.height)})
        lines.append(record(s, request, text, adapter))
    assert [line.get("outside_frame") for line in lines[:4]] == [True, True, None, None]
    s0 = samples[0]
    assert lines[0]["point"] == [1200 / 1000 * s0.width, 300 / 1000 * s0.height]  # mapped as written, not clipped
    lines[5]["outside_frame"] = "yes"  # a hostile flag: dropped, counted in bad_values, not in outside_frame
    preds = tmp_path / "p.jsonl"
    preds.write_text("".join(json.dumps(x) + "\n" for x in lines))
    doc = run_eval(
        "osworld-g", data, str(tmp_path / "out"), predictions=str(preds), benchmark_options={"subset": "plain"}
    )
    summary = doc["predictions"]
    assert (summary["outside_frame"], summary["bad_values"]) == (2, 1)
    assert summary["examples"]["outside_frame"] == [samples[0].sample_id, samples[1].sample_id]
    md = (tmp_path / "out" / "results.md").read_text(encoding="utf-8")
    assert "2 answers outside the 0-1000 frame" in md
    assert get_adapter("gta1").answer_frame == "resized" and "outside_frame" not in record(
        s0,
        Request([], None, {"frame": Frame(s0.width, s0.height, s0.width, s0.height)}),
        "(1200,300)",
        get_adapter("gta1"),
    )


def test_prompt_command_shows_the_size_sent_where_the_budget_reshrinks():
    from gui_grounding.ops.prompt import describe_prompt

    shown = describe_prompt(None, (5120, 2880), "Click OK", profile="qwen2.5-vl-7b")
    assert (shown["resized_size"], shown["sent_size"]) == ([5124, 2884], [4760, 2688])
    assert "sent_size" not in describe_prompt(None, (5120, 2880), "Click OK", profile="gta1-7b-2507")


def test_qwen25vl_processor_sees_what_the_harness_processor_saw(tiny_qwen25_dir):
    """transformers' Qwen2.5-VL processor at the harness's bounds (its defaults, 3136 .. 12845056) turns the stated
    5124x2884 image into a 340x192 patch grid (4760x2688 pixels); our sent image, under the bounds the budget writes
    into the processor, gives the same grid (the processor leaves it as it is)."""
    from PIL import Image

    from gui_grounding.data.schema import Sample
    from gui_grounding.models.adapters import get_adapter
    from vlm_r1.modules import get_vlm_module, load_processor

    budget = PROFILES["qwen2.5-vl-7b"].budget
    module = get_vlm_module(tiny_qwen25_dir)
    harness = load_processor(tiny_qwen25_dir)
    module.set_pixel_budget(harness, min_pixels=3136, max_pixels=12_845_056)  # the checkpoint's default bounds
    stated = Image.new("RGB", (5124, 2884))
    assert harness.image_processor(images=[stated], return_tensors="pt")["image_grid_thw"].tolist() == [[1, 192, 340]]
    ours = load_processor(tiny_qwen25_dir)
    budget.apply(ours, module)
    request = get_adapter("qwen2.5-vl").build_request(
        Sample("s", "x", "", [], 5120, 2880), Image.new("RGB", (5120, 2880)), budget=budget
    )
    assert ours.image_processor(images=[request.image], return_tensors="pt")["image_grid_thw"].tolist() == [
        [1, 192, 340]
    ]
