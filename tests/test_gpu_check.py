"""benchmarks/gpu_check.py's CPU path (``--shape tiny``: the code the GPU check runs, on a tiny model) and the cost
model's measured inputs (benchmarks/cost_model_shared_prompt.py ``--measured``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.helpers.paths import REPO

sys.path.insert(0, os.path.join(REPO, "benchmarks"))
import cost_model_shared_prompt as cost_model  # noqa: E402
import gpu_check  # noqa: E402

MEASURED = os.path.join(REPO, "benchmarks", "results", "gpu_check_h200_run2.json")


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("gpu_check")
    result = gpu_check.main(["--shape", "tiny", "--out", str(out), "--parts", "a,b", "--repeats", "1"])
    return out, result


def test_tiny_run_writes_json_and_table(tiny_run):
    out, result = tiny_run
    with open(out / "gpu_check.json", encoding="utf-8") as f:
        saved = json.load(f)
    assert saved["shape"] == "tiny" and set(saved) >= {"environment", "a", "b", "model"}
    table = (out / "gpu_check.md").read_text(encoding="utf-8")
    assert "## a. Split attention (reference) vs naive dense, float32" in table
    assert "| naive |" in table and "| shared_dense |" in table and "| shared_split |" in table


def test_part_a_split_equals_naive_in_fp32(tiny_run):
    a = tiny_run[1]["a"]
    assert "error" not in a, a.get("traceback")
    assert a["split_backend"] == "reference" and a["base_attention"] == "sdpa"  # CPU: no flash, no CUDA flex
    assert a["prompt_tokens"] == 20 + 2 + (168 // 28) * (224 // 28) + gpu_check.TEXT_AFTER  # 90
    for key in ("shared_vs_naive", "shared_vs_naive_fp32"):
        assert a["outputs"][key]["max_rel"] < 1e-5
        assert a["gradients"][key]["rel_norm"] < 1e-5
    assert a["outputs"]["naive_vs_naive_fp32"]["max_abs"] == 0.0  # fp32 run: the reference is the same computation


def test_part_b_counts_and_agreement(tiny_run):
    b = tiny_run[1]["b"]["G8"]
    i = b["inputs"]
    P, lens, G = i["prompt_tokens"], i["completion_tokens"], i["G"]
    assert (G, i["C"], i["image_tokens"], i["vision_patches"]) == (8, 64, 48, 192)
    assert b["naive"]["llm_tokens"] == G * P + sum(lens)
    for variant in ("shared_dense", "shared_split"):
        assert b[variant]["llm_tokens"] == P - 1 + sum(n + 1 for n in lens)
        assert b[variant]["vision_patches"] == 192 and b["naive"]["vision_patches"] == G * 192
        assert b[f"{variant}_logp_max_abs_diff_vs_naive"] < 1e-4
    assert b["shared_split"]["split_backend"] == "reference"
    assert b["prefill"]["naive"]["cache_tokens"] == P and b["prefill"]["shared"]["cache_tokens"] == P - 1


def test_committed_gpu_result_is_a_7b_h200_run():
    with open(MEASURED, encoding="utf-8") as f:
        data = json.load(f)
    assert data["shape"] == "7b" and data["environment"]["gpu"] == "NVIDIA H200"
    assert data["model"]["parameters"] == 8_292_166_656  # Qwen2.5-VL-7B's published size (8.29B)
    b = data["b"]["G8"]
    assert b["inputs"]["image_tokens"] == 2691 and b["naive"]["llm_tokens"] == 22607


def test_cost_model_takes_the_measured_seconds(tmp_path):
    result = cost_model.main(["--measured", MEASURED, "--json-out", str(tmp_path / "cost.json")])
    m = result["measured"]
    with open(MEASURED, encoding="utf-8") as f:
        b = json.load(f)["b"]["G8"]
    groups = 250 * 128
    assert m["groups"] == groups
    assert m["hours"]["naive"]["policy"] == pytest.approx(b["naive"]["fwd_bwd_s"] * groups / 3600)
    assert m["hours"]["shared"]["policy"] == pytest.approx(b["shared_dense"]["fwd_bwd_s"] * groups / 3600)
    assert m["hours"]["shared"]["prefill"] == pytest.approx(b["prefill"]["shared"]["prefill_s"] * groups / 3600)
    for v in ("naive", "shared"):
        h = m["hours"][v]
        assert h["total"] == pytest.approx(h["policy"] + h["prefill"] + h["decode (FLOP model)"])


def test_cost_model_flags_and_throughput(tmp_path):
    out = tmp_path / "c.json"
    r = cost_model.main(["--naive-step-s", "10", "--measured-tokens-per-s", "1000", "--json-out", str(out)])
    m = r["measured"]
    assert m["hours"]["naive"]["policy"] == pytest.approx(10 * 250 * 128 / 3600)
    shared_tokens_per_group = r["llm_tokens_per_step"]["shared"] / 128
    assert m["hours"]["shared"]["policy"] == pytest.approx(shared_tokens_per_group / 1000 * 250 * 128 / 3600)
    assert "measured" not in cost_model.main(["--json-out", str(out)])  # no measurement: the FLOP model alone


def test_launcher_script_parses():
    subprocess.run(["bash", "-n", os.path.join(REPO, "run_scripts", "gpu_check.sh")], check=True)


def test_memory_calibration_reproduces_from_the_committed_gpu_check(tmp_path):
    import calibrate_memory

    out = tmp_path / "cal.json"
    got = calibrate_memory.main(
        [os.path.join(REPO, "benchmarks", "results", "gpu_check_h200_run3.json"), "--out", str(out)]
    )
    with open(os.path.join(REPO, "benchmarks", "results", "memory_calibration.json"), encoding="utf-8") as f:
        committed = json.load(f)
    assert got["activation_factor"] == committed["activation_factor"] and got["cases"] == committed["cases"]
    naive = next(c for c in got["cases"] if c["case"] == "b/G8/naive")
    assert naive["measured_peak_gib"] == naive["predicted_peak_gib"] == 43.2  # the calibration case is met
    assert {c["case"] for c in got["cases"]} == {
        f"{p}/{n}/{v}" for p, n in (("b", "G8"), ("c", "G16"), ("c", "4k")) for v in ("naive", "shared_dense")
    }
