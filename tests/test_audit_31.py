"""Issue 31 item 3: the profile audit's fixes, each pinned by the inputs and outputs of the authors' code or card.

Fast (no model, no image decoding beyond tiny PIL images): every test runs in well under a second.
"""

from __future__ import annotations

from gui_grounding.models.profiles import PROFILES


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
