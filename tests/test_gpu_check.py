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
        assert h["total"] == pytest.approx(h["policy"] + h["prefill"] + h["decode (memory-bound)"])
    assert m["hours"]["naive"]["decode (memory-bound)"] == m["hours"]["shared"]["decode (memory-bound)"]


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


def test_decoding_is_memory_bound():
    """Issue 29: one decoding step reads the weights once and every row's KV cache, at the HBM bandwidth (NVIDIA
    datasheets: 3.35 TB/s H100 SXM, 4.8 TB/s H200)."""
    assert cost_model.HBM_BYTES_PER_S == {"H100 SXM": 3.35e12, "H200": 4.8e12}
    # known numbers: W = 10 GB of weights, 1 MB of cache per token, 2 rows, prompt 100, completion 5 tokens
    # steps t = 1..4 read 10e9 + 2 x 1e6 x (100 + t) bytes: 4 x 10e9 + 2e6 x (400 + 10) = 40.82e9 bytes
    assert cost_model.decode_seconds(10e9, 1e6, 2, 100, 5, 4e12) == pytest.approx(40.82e9 / 4e12, rel=1e-12)
    assert cost_model.decode_seconds(10e9, 1e6, 2, 100, 1, 4e12) == 0.0  # the prefill gives the only token
    # the recipe: 7.07e9 parameters x 2 B, 28 layers x 2 x 512 x 2 B = 57,344 B per cached token, 128 rows a call
    r = cost_model.main(["--json-out", os.devnull])
    d = r["decode_memory_bound"]
    assert d["weight_bytes"] == 7.07e9 * 2 and d["kv_bytes_per_token"] == 57344 and d["rows_per_call"] == 128
    P, C = r["prompt_tokens"], 20
    call = ((C - 1) * 14.14e9 + 128 * 57344 * ((C - 1) * P + C * (C - 1) / 2)) / 3.35e12
    assert d["seconds_per_call"] == pytest.approx(call, rel=1e-12)
    assert d["calls"] == 250 * 128 * 8 / 128 and d["hours"] == pytest.approx(d["calls"] * call / 3600)
    h200 = cost_model.main(["--json-out", os.devnull, "--hbm-tb-s", "4.8"])["decode_memory_bound"]
    assert h200["hours"] == pytest.approx(d["hours"] * 3.35 / 4.8)
