"""Test-time grounding (gui_grounding.eval.tts): the driver with a scripted engine (every mode, exact points, seeds,
cost), the zoom window and its frame round trip (every edge, EXIF-rotated files), rescoring, greedy unchanged, and
the hf backend on tiny models (shared prefill vs independent samples, seeded)."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

from gui_grounding.data.schema import Sample
from gui_grounding.eval.engine import Draw, Engine
from gui_grounding.eval.run import run_eval
from gui_grounding.eval.tts import TTSConfig, predict_tts, seed_for
from gui_grounding.models.frames import CropWindow, zoom_window


class ScriptEngine(Engine):
    """Answers from a script keyed by (sample_id, "full" | "crop", "greedy" | "sampled"); records every call."""

    name = "script"
    chunk_size = 2

    def __init__(self, script: dict):
        self.script = script
        self.calls: list[dict] = []

    def generate(self, requests, *, n, temperature, top_p=1.0, seeds=None):
        out = []
        for i, r in enumerate(requests):
            frame = r.context["frame"]
            view = "full" if (frame.width, frame.height) == self.full_size[r.context["sample_id"]] else "crop"
            kind = "greedy" if temperature == 0 else "sampled"
            texts = self.script[(r.context["sample_id"], view, kind)]
            assert len(texts) == n
            self.calls.append(
                {
                    "sid": r.context["sample_id"],
                    "view": view,
                    "n": n,
                    "temperature": temperature,
                    "seed": seeds[i] if seeds else None,
                    "image": r.image.size,
                    "frame": (frame.width, frame.height),
                }
            )
            out.append(Draw(list(texts), calls=1, prompt_tokens=10, generated_tokens=3 * n))
        return out


@pytest.fixture
def screen(tmp_path):
    path = tmp_path / "s.png"
    Image.new("RGB", (200, 100), (200, 200, 200)).save(path)
    samples = [
        Sample("a", "Click ok", str(path), [(90.0, 40.0, 110.0, 60.0)], 200, 100),
        Sample("b", "Click no", str(path), [(0.0, 0.0, 30.0, 30.0)], 200, 100),
    ]
    return samples


SCRIPT = {
    # qwen2-vl answers (x,y) on the 0-1000 grid of the image it is sent: x/1000*W, y/1000*H original pixels
    ("a", "full", "greedy"): ["(100,200)"],  # (20, 20): outside the target
    ("a", "full", "sampled"): ["(500,500)", "(500,500)", "(500,500)", "(100,200)", "nothing"],  # 3 x (100, 50)
    ("a", "crop", "greedy"): ["(250,500)"],
    ("a", "crop", "sampled"): ["(100,100)"] * 5,
    ("b", "full", "greedy"): ["no answer"],
    ("b", "full", "sampled"): ["junk"] * 5,
    ("b", "crop", "greedy"): ["(1,1)"],
    ("b", "crop", "sampled"): ["(1,1)"] * 5,
}


def _run(tmp_path, samples, mode, name="p.jsonl", script=None):
    engine = ScriptEngine(script or SCRIPT)
    engine.full_size = {s.sample_id: (s.width, s.height) for s in samples}
    cfg = TTSConfig(mode=mode, samples=5, temperature=0.9, top_p=0.8, seed=7)
    out = tmp_path / name
    from gui_grounding.models.adapters import get_adapter

    adapter = get_adapter("qwen2-vl")
    predict_tts(engine, samples, str(out), adapter=adapter, budget=adapter.default_budget, tts=cfg)
    return engine, [json.loads(x) for x in out.read_text().splitlines()]


def test_consensus_driver_exact(tmp_path, screen):
    engine, (a, b) = _run(tmp_path, screen, "consensus")
    assert a["point"] == [20.0, 20.0] and a["raw_response"] == "(100,200)"  # the greedy answer, as a greedy run
    assert a["samples"] == [[100.0, 50.0]] * 3 + [[20.0, 20.0], None]
    assert a["tts"]["point"] == [100.0, 50.0] and a["tts"]["agreement"] == 0.6 and a["tts"]["votes"] == 3
    assert a["tts"]["region"] == [75, 25, 125, 75] and a["tts"]["window"] is None
    assert b["point"] is None and b["samples"] == [None] * 5 and b["tts"]["point"] is None
    assert b["tts"]["agreement"] == 0.0
    sampled = [c for c in engine.calls if c["n"] == 5]
    assert [c["seed"] for c in sampled] == [seed_for(7, "a", "sampling"), seed_for(7, "b", "sampling")]
    assert all(c["temperature"] == 0.9 for c in sampled)
    assert a["cost"] == {
        "greedy": {
            "calls": 1,
            "sequences": 1,
            "prompt_tokens": 10,
            "generated_tokens": 3,
            "wall_s": a["cost"]["greedy"]["wall_s"],
        },
        "sampling": {
            "calls": 1,
            "sequences": 5,
            "prompt_tokens": 10,
            "generated_tokens": 15,
            "wall_s": a["cost"]["sampling"]["wall_s"],
        },
    }


def test_zoom_driver_maps_the_crop_answer_back(tmp_path, screen):
    engine, (a, b) = _run(tmp_path, screen, "zoom")
    # greedy (20, 20) -> window 100x50 at the top-left corner; crop answer (250,500)/1000 of 100x50 = (25, 25)
    assert a["tts"]["window"] == [0, 0, 100, 50] and a["tts"]["zoom_point"] == [25.0, 25.0]
    assert a["tts"]["point"] == [25.0, 25.0] and a["tts"]["fallback"] is None
    crop = [c for c in engine.calls if c["view"] == "crop"]
    assert [(c["sid"], c["frame"], c["n"]) for c in crop] == [("a", (100, 50), 1)]
    assert b["tts"]["point"] is None and b["tts"]["fallback"] == "no first-pass point: no window"
    assert set(a["cost"]) == {"greedy", "zoom"} and "samples" not in a


def test_zoom_consensus_driver(tmp_path, screen):
    engine, (a, _) = _run(tmp_path, screen, "zoom+consensus")
    # consensus (100, 50) -> window [50, 25, 150, 75]; 5 x (100,100)/1000 of 100x50 = (10, 5) in the crop; their
    # squares clip to [0, 35] x [0, 30] of the crop -> centre (17.5, 15) -> (67.5, 40) in the screenshot
    assert a["tts"]["window"] == [50, 25, 150, 75]
    assert a["tts"]["zoom_point"] == [17.5, 15.0] and a["tts"]["point"] == [67.5, 40.0]
    assert a["tts"]["agreement"] == 1.0 and a["tts"]["region"] == [50, 25, 85, 55]
    crop = [c for c in engine.calls if c["view"] == "crop"]
    assert crop[0]["seed"] == seed_for(7, "a", "zoom") and crop[0]["n"] == 5


def _write_data(tmp_path, samples):
    data = tmp_path / "test.jsonl"
    keys = ("x_min", "y_min", "x_max", "y_max")
    data.write_text(
        "".join(
            json.dumps(
                {
                    "sample_id": s.sample_id,
                    "instruction": s.instruction,
                    "image_path": s.image_path,
                    "target_bbox": dict(zip(keys, s.boxes[0], strict=True)),
                    "image_width": s.width,
                    "image_height": s.height,
                }
            )
            + "\n"
            for s in samples
        )
    )
    return data


def test_rescoring_a_model_runs_file_gives_its_answers(tmp_path, screen):
    """--tts consensus --predictions on the driver's own file re-votes 'samples' to the same answer."""
    _, lines = _run(tmp_path, screen, "consensus")
    data = _write_data(tmp_path, screen)
    doc = run_eval(
        "canonical",
        str(data),
        str(tmp_path / "ev"),
        predictions=str(tmp_path / "p.jsonl"),
        tts=TTSConfig(mode="consensus", samples=5),
    )
    assert doc["overall"]["num_correct"] == 1 and doc["greedy"]["overall"]["num_correct"] == 0  # (100, 50) hits a's box
    assert doc["tts"]["disagreements"]["tts_only_correct_ids"] == ["a"]
    scores = [json.loads(x) for x in (tmp_path / "ev" / "scores.jsonl").read_text().splitlines()]
    assert scores[0]["point"] == lines[0]["tts"]["point"] and scores[0]["greedy_correctness"] == "wrong"
    assert scores[0]["agreement"] == 0.6
    md = (tmp_path / "ev" / "results.md").read_text()
    assert "## Test-time mode: consensus (K=5, T=0.7)" in md and "calibration.png" in md
    assert os.path.getsize(tmp_path / "ev" / "calibration.png") > 1000
    page = (tmp_path / "ev" / "failures.html").read_text()
    assert "greedy: no answer\nsamples: junk | junk | junk | junk | junk" in page  # b's card: every answer of the run
    # zoom is scored from tts.point, and a file of another mode is malformed for it
    doc = run_eval(
        "canonical", str(data), str(tmp_path / "ev2"), predictions=str(tmp_path / "p.jsonl"), tts=TTSConfig(mode="zoom")
    )
    assert doc["tts"]["malformed_for_mode"] == 2 and doc["overall"]["num_correct"] == 0


def test_greedy_default_leaves_every_metric_unchanged(tmp_path, screen):
    _, _ = _run(tmp_path, screen, "zoom+consensus")
    data = _write_data(tmp_path, screen)
    docs = []
    for name, tts in (("none", None), ("greedy", TTSConfig())):
        doc = run_eval("canonical", str(data), str(tmp_path / name), predictions=str(tmp_path / "p.jsonl"), tts=tts)
        docs.append({k: v for k, v in doc.items() if k != "meta"})
        assert "tts" not in doc["meta"] and "greedy" not in doc and "tts" not in doc
        assert not (tmp_path / name / "calibration.png").exists()
    assert docs[0] == docs[1]
    tts_doc = run_eval(
        "canonical",
        str(data),
        str(tmp_path / "zc"),
        predictions=str(tmp_path / "p.jsonl"),
        tts=TTSConfig(mode="zoom+consensus"),
    )
    greedy = {k: v for k, v in docs[0].items() if k not in ("benchmark", "predictions", "data", "targets_sha256")}
    assert tts_doc["greedy"] == greedy


# ---------------------------------------------------------------------------------------------------------------------
# the zoom window and its frame


@pytest.mark.parametrize("point", [(0, 0), (199, 0), (0, 99), (199, 99), (100, 50), (-40, 500), (1e6, -1e6), (3, 97)])
def test_zoom_window_at_every_edge(point):
    w = zoom_window(point, 200, 100, 0.3)
    assert (w.width, w.height) == (60, 30)
    assert 0 <= w.x_min and w.x_max <= 200 and 0 <= w.y_min and w.y_max <= 100
    inside = (min(max(point[0], 0), 199), min(max(point[1], 0), 99))
    assert w.x_min <= inside[0] <= w.x_max and w.y_min <= inside[1] <= w.y_max


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 90), st.integers(1, 90), st.floats(0.01, 1.0), st.floats(-50, 150), st.floats(-50, 150))
def test_zoom_window_crop_round_trip_exact(w, h, fraction, x, y):
    pixels = np.arange(w * h * 3, dtype=np.uint32).reshape(h, w, 3) % 251
    image = Image.fromarray(pixels.astype(np.uint8))
    win = zoom_window((x, y), w, h, fraction)
    assert win.width == min(w, max(1, round(fraction * w))) and win.height == min(h, max(1, round(fraction * h)))
    crop = np.asarray(win.crop(image))
    assert crop.shape == (win.height, win.width, 3)
    assert (crop == pixels[win.y_min : win.y_max, win.x_min : win.x_max].astype(np.uint8)).all()
    for cx, cy in [(0, 0), (win.width - 1, win.height - 1), (win.width / 8, win.height / 4), (0.5, 0.125)]:
        ix, iy = win.to_image((cx, cy))
        assert win.to_window((ix, iy)) == (cx, cy)  # exact: integer offsets, dyadic fractions
    ix, iy = win.to_image((win.width / 3, win.height / 7))  # other fractions: within the addition's rounding
    assert ix - win.x_min == pytest.approx(win.width / 3, abs=1e-12) and iy - win.y_min == pytest.approx(
        win.height / 7, abs=1e-12
    )
    for cx, cy in [(0, 0), (win.width - 1, win.height - 1)]:
        ix, iy = win.to_image((cx, cy))
        if float(cx).is_integer() and float(cy).is_integer():
            assert (crop[int(cy), int(cx)] == np.asarray(image)[int(iy), int(ix)]).all()


@pytest.mark.parametrize("orientation", [1, 3, 6, 8])
def test_zoom_on_exif_rotated_screenshots(tmp_path, orientation):
    """The window is cut from the displayed frame (EXIF applied), the frame of boxes and points: a marker pixel at
    (x, y) of the displayed screenshot is found in the crop at the window's offset, and mapped back exactly."""
    from gui_grounding.eval.backends import load_image

    displayed = np.full((120, 160, 3), 255, np.uint8)  # 160 x 120 as displayed
    for x, y in [(3, 4), (150, 110), (80, 60)]:
        displayed[y, x] = (255, 0, 0)
    shown = Image.fromarray(displayed)
    # store the pixels so that applying the orientation gives `shown` back
    inverse = {1: None, 3: Image.Transpose.ROTATE_180, 6: Image.Transpose.ROTATE_90, 8: Image.Transpose.ROTATE_270}
    stored = shown if inverse[orientation] is None else shown.transpose(inverse[orientation])
    exif = Image.Exif()
    exif[0x0112] = orientation
    path = tmp_path / f"r{orientation}.png"
    stored.save(path, exif=exif.tobytes())
    image = load_image(Sample("r", "x", str(path), [(0.0, 0.0, 1.0, 1.0)], 160, 120))
    assert image.size == (160, 120)
    for x, y in [(3, 4), (150, 110), (80, 60)]:
        win = zoom_window((x, y), 160, 120, 0.25)
        crop = np.asarray(win.crop(image))
        ys, xs = np.nonzero((crop[:, :, 0] == 255) & (crop[:, :, 1] == 0))
        found = {win.to_image((int(cx), int(cy))) for cx, cy in zip(xs, ys, strict=True)}
        assert (x, y) in found


def test_crop_window_and_config_errors():
    with pytest.raises(ValueError, match="fraction"):
        zoom_window((1, 1), 10, 10, 0)
    with pytest.raises(ValueError, match="at least 1x1"):
        zoom_window((1, 1), 0, 10, 0.5)
    assert CropWindow(2, 3, 12, 8).as_list() == [2, 3, 12, 8]
    for bad in (
        {"mode": "vote"},
        {"samples": 0},
        {"samples": True},
        {"temperature": 0.0},
        {"top_p": float("nan")},
        {"zoom": 1.5},
        {"region": -1},
        {"seed": -1},
    ):
        with pytest.raises(ValueError):
            TTSConfig(**bad)
    assert seed_for(0, "a", "sampling") == seed_for(0, "a", "sampling") != seed_for(1, "a", "sampling")


# ---------------------------------------------------------------------------------------------------------------------
# the hf backend on tiny models


def _toy_samples(tmp_path, n=3):
    out = []
    for k in range(n):
        path = tmp_path / f"t{k}.png"
        Image.new("RGB", (112, 112), (40 * k, 100, 200)).save(path)
        out.append(Sample(f"t{k}", f"Click button {k}", str(path), [(10.0, 10.0, 60.0, 60.0)], 112, 112))
    return out


def test_hf_consensus_shared_prefill_seeded(tmp_path, tiny_qwen25_dir):
    from gui_grounding.eval.backends import predict

    samples = _toy_samples(tmp_path)
    cfg = TTSConfig(mode="zoom+consensus", samples=3, seed=3)
    runs = []
    for name in ("one", "two"):
        out = tmp_path / f"{name}.jsonl"
        predict("hf", tiny_qwen25_dir, samples, str(out), batch_size=2, max_new_tokens=6, tts=cfg)
        runs.append([json.loads(x) for x in out.read_text().splitlines()])
    assert [r["sample_responses"] for r in runs[0]] == [r["sample_responses"] for r in runs[1]]  # same seed
    first = runs[0][0]
    assert len(first["samples"]) == 3 and len(first["sample_responses"]) == 3
    assert first["cost"]["sampling"]["calls"] == 1 and first["cost"]["sampling"]["sequences"] == 3  # one prefill
    assert first["cost"]["sampling"]["prompt_tokens"] == first["cost"]["greedy"]["prompt_tokens"] > 0
    other = tmp_path / "other.jsonl"
    predict(
        "hf",
        tiny_qwen25_dir,
        samples,
        str(other),
        batch_size=2,
        max_new_tokens=6,
        tts=TTSConfig(mode="consensus", samples=3, seed=4),
    )
    zoom = tmp_path / "zoom.jsonl"
    predict("hf", tiny_qwen25_dir, samples, str(zoom), batch_size=2, max_new_tokens=6, tts=TTSConfig(mode="zoom"))
    for line in map(json.loads, zoom.read_text().splitlines()):
        assert set(line["cost"]) <= {"greedy", "zoom"} and line["tts"]["mode"] == "zoom" and "samples" not in line
        assert (line["tts"]["window"] is None) == (line["point"] is None)  # a window exactly when greedy has a point
    assert [json.loads(x)["sample_responses"] for x in other.read_text().splitlines()] != [
        r["sample_responses"] for r in runs[0]
    ]


def test_hf_without_a_prefill_hook_draws_k_independent_samples(tmp_path, tmp_path_factory):
    from gui_grounding.eval.backends import predict
    from tests.conftest import _build_tiny

    model = _build_tiny("internvl", tmp_path_factory)
    out = tmp_path / "ivl.jsonl"
    predict(
        "hf",
        model,
        _toy_samples(tmp_path, 2),
        str(out),
        batch_size=2,
        max_new_tokens=4,
        tts=TTSConfig(mode="consensus", samples=3),
    )
    line = json.loads(out.read_text().splitlines()[0])
    sampling, greedy = line["cost"]["sampling"], line["cost"]["greedy"]
    assert sampling["calls"] == 3 and sampling["sequences"] == 3 and len(line["samples"]) == 3
    assert sampling["prompt_tokens"] == 3 * greedy["prompt_tokens"] > 0  # the prompt is run K times


def test_hostile_tts_fields_are_reason_coded_never_a_crash(tmp_path, screen):
    data = _write_data(tmp_path, screen)
    preds = tmp_path / "hostile.jsonl"
    lines = [
        {
            "sample_id": "a",
            "point": None,
            "samples": [[1, 2]] * 1025,
            "cost": {"greedy": {"calls": 10**400, "wall_s": "x"}, "zoom": [1]},
        },
        {
            "sample_id": "b",
            "point": [5, 5],
            "samples": [[1, 2], [3, "4"]],
            "tts": "nope",
            "cost": {"sampling": {"calls": True, "prompt_tokens": 7}},
        },
    ]
    preds.write_text("".join(json.dumps(x) + "\n" for x in lines))
    doc = run_eval(
        "canonical", str(data), str(tmp_path / "ev"), predictions=str(preds), tts=TTSConfig(mode="consensus")
    )
    assert doc["overall"]["num_correct"] == 0 and doc["overall"]["wrong_format"] == 2
    assert doc["tts"]["malformed_for_mode"] == 2
    assert doc["tts"]["cost"]["phases"]["sampling"]["prompt_tokens"] == 7
    assert "calls" not in doc["tts"]["cost"]["phases"].get("greedy", {})
    assert doc["greedy"]["overall"]["num_correct"] == 1  # b's greedy point (5, 5) lies in its box


@pytest.mark.slow
def test_toy_tts_table(tmp_path, tiny_qwen25_dir):
    """`gui-grounding toy tts` on a small synthetic set with a given checkpoint: one eval folder per mode, the table's
    rows in order, each row's accuracy equal to its run's metrics.json, greedy measured in every run."""
    from gui_grounding.ops.toy import TTS_RUNS, ToyExperiments, ToyRecipe

    recipe = ToyRecipe(
        synthetic={"num_train": 2, "num_test": 6, "buttons_per_image": 1, "background": "panels"},
        max_completion_length=6,
    )
    results = ToyExperiments(str(tmp_path), recipe).tts(model=tiny_qwen25_dir)
    assert list(results["runs"]) == [name for name, _ in TTS_RUNS]
    for name, run in results["runs"].items():
        doc = json.loads((tmp_path / "tts" / name / "metrics.json").read_text())
        assert run["accuracy"] == doc["overall"]["accuracy"]
        assert run["greedy_accuracy"] == (doc.get("greedy") or doc)["overall"]["accuracy"]
        assert (run["cost"] is None) == (name == "greedy")
    md = (tmp_path / "tts" / "results.md").read_text()
    assert md.count("\n| ") == 1 + len(TTS_RUNS) and "| consensus (K=16, T=0.7) |" in md


def test_zoom_consensus_without_a_crop_point_keeps_the_first_vote(tmp_path, screen):
    script = {
        **SCRIPT,
        ("c", "full", "greedy"): ["(500,500)"],
        ("c", "full", "sampled"): ["(500,500)"] * 4 + ["x"],
        ("c", "crop", "sampled"): ["none"] * 5,
    }
    c = Sample("c", "Click c", screen[0].image_path, [(90.0, 40.0, 110.0, 60.0)], 200, 100)
    _, (line,) = _run(tmp_path, [c], "zoom+consensus", script=script)
    assert line["tts"]["fallback"] == "no point in the crop: first-pass point kept"
    assert line["tts"]["point"] == [100.0, 50.0] and line["tts"]["agreement"] == 0.8 and line["tts"]["votes"] == 4
    assert line["tts"]["region"] == [75, 25, 125, 75] and line["tts"]["window"] == [50, 25, 150, 75]


def test_compare_rescore_command_keeps_the_test_time_mode():
    from gui_grounding.eval.compare import rescore_command

    meta = {"benchmark": "canonical", "data": "d.jsonl", "predictions": "p.jsonl"}
    assert rescore_command("out", {"meta": {**meta, "tts": TTSConfig(mode="consensus", region=12.5).to_dict()}}) == (
        "gui-grounding eval --benchmark canonical --data d.jsonl --predictions p.jsonl --tts consensus "
        "--tts-region 12.5 --out out"
    )
    assert rescore_command("out", {"meta": meta}).endswith("--predictions p.jsonl --out out")
