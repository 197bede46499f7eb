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
import step_profile  # noqa: E402

MEASURED = os.path.join(REPO, "benchmarks", "results", "gpu_check_h200_run2.json")


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("gpu_check")
    argv = ["--shape", "tiny", "--out", str(out), "--parts", "a,b", "--repeats", "1", "--no-profile"]
    # as if the module had been imported a day earlier (a test session imports it at collection): --budget-s counts
    # from main(), so the run's own clock starts at 0 (it once counted from the import, and a long slow suite left the
    # --baseline child no time)
    gpu_check.T0 -= 86_400
    result = gpu_check.main(argv + ["--variants", "naive,shared_dense,shared_split"])
    return out, result


def test_tiny_run_writes_json_and_table(tiny_run):
    out, result = tiny_run
    with open(out / "gpu_check.json", encoding="utf-8") as f:
        saved = json.load(f)
    assert saved["shape"] == "tiny" and set(saved) >= {"environment", "a", "b", "model"}
    assert 0 < result["wall_s"] < 600  # counted from main(), not from the (day-old) import
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


def test_tiny_run_reports_the_mfu_of_each_variant(tiny_run):
    out, result = tiny_run
    b = result["b"]["G8"]
    assert result["mfu_formula"]["peak_flops"] == step_profile.PEAK_BF16_FLOPS == 989e12
    assert result["mfu_formula"]["formula"] == step_profile.FORMULA and "6*N*T + 3*A + V" in step_profile.FORMULA
    for variant in ("naive", "shared_dense", "shared_split"):
        r = b[variant]
        f = r["model_flops"]
        assert f["T"] == r["llm_tokens"] and f["total"] == f["llm_6NT"] + f["attention_3A"] + f["vision_V"]
        assert r["mfu"] == round(f["total"] / (r["fwd_bwd_s"] * 989e12), 4)
    assert b["naive"]["model_flops"]["vision_V"] == b["shared_dense"]["model_flops"]["vision_V"]  # one screenshot
    assert "| variant | fwd+bwd s | MFU |" in (out / "gpu_check.md").read_text(encoding="utf-8")
    assert result["environment"]["vlm_r1"].startswith(os.path.join(REPO, "vlm_r1"))


def test_mfu_formula_on_known_numbers():
    """6 N T + 3 A + V over seconds x peak, on numbers worked by hand."""
    f = step_profile.model_flops(params=10, tokens=3, attn_width=4, layers=2, pairs=6, vision=100)
    # 6*10*3 = 180; A = 4 * 4 * 2 * 6 = 192, x3 = 576; V = 100
    assert f == {"total": 856, "llm_6NT": 180, "attention_3A": 576, "vision_V": 100}
    assert step_profile.mfu(856, 2.0, peak=107.0) == 4.0
    assert step_profile.mfu(989e12 * 0.35, 1.0) == pytest.approx(0.35)
    # causal pairs n(n+1)/2 per row; shared: the prompt causally, each suffix against the prompt and itself
    assert step_profile.causal_pairs([3, 1]) == 6 + 1
    assert step_profile.shared_pairs(4, [2, 1]) == 10 + (2 * 4 + 3) + (1 * 4 + 1)
    # windows of 2 x 2 merged cells (4 patches each) over a 6 x 4 patch grid (3 x 2 cells): windows 2x2 and 1x2
    assert step_profile.window_pairs(6, 4, 2, 2) == (2 * 2 * 4) ** 2 + (1 * 2 * 4) ** 2
    v = step_profile.vision_flops(
        6, 4, hidden=8, depth=3, full_blocks=1, window_cells=2, merge=2, patch_params=5, merger_params=7
    )
    assert v == 2 * 5 * 24 + 2 * 7 * 6 + 4 * 8 * (2 * (256 + 64) + 24 * 24)


def _tiny_group(G=2, C=8):
    import torch

    args = gpu_check.parse_args(["--shape", "tiny", "--out", os.devnull])
    device, dtype = torch.device("cpu"), torch.float32
    model, _ = gpu_check.load_model(args, device, dtype)
    model.train()
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    batch = gpu_check.build_group("tiny", 224, 168, gpu_check.GTA1_MAX_PIXELS, G, C, 0, device, dtype)
    return model, batch, device


@pytest.mark.parametrize("variant", ["shared_dense", pytest.param("naive", marks=pytest.mark.slow)])
def test_profile_breakdown_of_one_tiny_cpu_step(variant):
    """The profiler breakdown of one training step (forward, backward with recomputation, AdamW step) of the tiny
    Qwen2.5-VL on CPU: every category is there, the labelled ones took time, and they sum to the profiled window,
    which the wall clock around it covers."""
    from vlm_r1.modules import get_vlm_module

    model, batch, device = _tiny_group()
    module = get_vlm_module("qwen2_5_vl")
    p = gpu_check.profile_variant(model, module, batch, variant, device, optimizer=True)
    assert set(p["seconds"]) == set(step_profile.CATEGORIES) == set(step_profile.DESCRIPTIONS)
    for category in ("vision", "attention", "mlp", "lm_head_loss", "optimizer", "other"):
        assert p["seconds"][category] > 0, (variant, category, p["seconds"])
    assert min(p["seconds"].values()) >= 0
    assert sum(p["seconds"].values()) == pytest.approx(p["window_s"], rel=1e-9)
    assert p["window_s"] <= p["wall_s"]
    assert p["busy"] == "cpu ops (innermost)" and p["optimizer"].startswith("torch.optim.AdamW(fused=False)")
    assert all(q.grad is None for q in model.parameters() if q.requires_grad)  # nothing left behind


def test_breakdown_attributes_gpu_kernels_and_backward():
    """The GPU path on synthetic profiler events: a kernel counts where the CPU op that launched it is labelled; a
    backward node's kernels count where its forward op was (sequence number + forward thread); overlapping kernels
    are counted once; the rest of the window is idle."""
    E = step_profile.Event
    ms = 1_000_000
    events = [
        E("gc::step", "label", 0, 100 * ms, thread=1),
        E("gc::mlp", "label", 10 * ms, 20 * ms, thread=1),
        E("aten::mm", "op", 11 * ms, 12 * ms, thread=1, corr=5, seq=7),  # forward op, seq 7
        E("autograd::engine::evaluate_function: MmBackward0", "op", 50 * ms, 52 * ms, thread=2, seq=7, fwd_thread=1),
        E("aten::mm", "op", 50 * ms, 51 * ms, thread=2, corr=9),  # launched by the backward node
        E("gc::optimizer", "label", 80 * ms, 90 * ms, thread=1),
        E("fused_adam", "op", 81 * ms, 82 * ms, thread=1, corr=11),
        E("aten::add", "op", 95 * ms, 96 * ms, thread=1, corr=12),  # unlabelled
        E("k_mm", "kernel", 12 * ms, 22 * ms, linked=5),
        E("k_mm_bwd", "kernel", 51 * ms, 71 * ms, linked=9),
        E("k_overlap", "kernel", 60 * ms, 75 * ms, linked=9),  # 60-71 already counted
        E("k_adam", "kernel", 82 * ms, 87 * ms, linked=11),
        E("k_add", "kernel", 96 * ms, 104 * ms, linked=12),  # runs past the window: clipped at 100
    ]
    b = step_profile.breakdown(events)
    s = b["seconds"]
    assert b["window_s"] == pytest.approx(0.1) and b["busy"] == "gpu kernels"
    assert s["mlp"] == pytest.approx(0.010 + 0.024)  # forward 12-22, backward 51-75 (overlap once)
    assert s["optimizer"] == pytest.approx(0.005) and s["other"] == pytest.approx(0.004)
    assert s["vision"] == s["attention"] == s["lm_head_loss"] == 0
    assert s["idle"] == pytest.approx(0.1 - 0.034 - 0.005 - 0.004)
    assert sum(s.values()) == pytest.approx(b["window_s"])
    with pytest.raises(ValueError, match="no 'gc::step' range"):
        step_profile.breakdown(events[1:])


def test_before_after_table():
    after = {"naive": {"fwd_bwd_s": 2.0, "fwd_bwd_s_all": [2.1, 2.0, 1.9], "mfu": 0.3, "peak_gib": 40.0}}
    before = {"naive": {"fwd_bwd_s": 20.0, "fwd_bwd_s_all": [20.0, 21.0, 19.5], "mfu": 0.03, "peak_gib": 43.2}}
    c = gpu_check.compare_baseline(after, before)
    assert c["naive"]["speedup"] == 10.0
    assert c["naive"]["before"] == {
        "median_s": 20.0,
        "min_s": 19.5,
        "max_s": 21.0,
        "spread_s": 1.5,
        "runs": 3,
        "mfu": 0.03,
        "peak_gib": 43.2,
    }
    assert c["shared_dense"] == {}
    text = gpu_check._compare_lines(
        {
            "args": {"group": 8, "repeats": 3, "width": 1920, "height": 1080},
            "baseline": {"tree": "/t", "commit": "abc", "G8": before},
            "compare": c,
        }
    )
    assert "| naive | 20.0 (19.5-21.0) | 2.0 (1.9-2.1) | 10.0 | 3.0% | 30.0% | 43.2 | 40 |" in text
    missing = gpu_check.run_baseline(
        gpu_check.parse_args(["--shape", "tiny", "--out", os.devnull, "--baseline", os.devnull]), 10
    )
    assert missing["skipped"] == "no vlm_r1 package in the --baseline tree"


@pytest.mark.slow
def test_baseline_runs_this_script_on_the_previous_tree(tmp_path):
    """--baseline: the same measurement in a child process importing vlm_r1 from the given tree (a git archive of
    HEAD here), merged into the parent's result as the before/after comparison."""
    tree = tmp_path / "prev"
    tree.mkdir()
    archive = subprocess.run(
        ["git", "-C", REPO, "archive", "HEAD", "vlm_r1", "groundwork"], capture_output=True, check=True
    )
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive.stdout, check=True)
    (tree / "COMMIT").write_text("HEAD of the test\n")
    out = tmp_path / "gc"
    result = gpu_check.main(
        [
            "--shape",
            "tiny",
            "--out",
            str(out),
            "--parts",
            "b",
            "--repeats",
            "1",
            "--no-profile",
            "--no-prefill",
            "--baseline",
            str(tree),
        ]
    )
    base = result["baseline"]
    assert base["returncode"] == 0 and base["commit"] == "HEAD of the test"
    assert base["environment"]["library"] == str(tree)
    assert base["environment"]["vlm_r1"] == str(tree / "vlm_r1" / "__init__.py")
    for variant in ("naive", "shared_dense"):
        row = result["compare"][variant]
        assert row["before"]["runs"] == row["after"]["runs"] == 1 and row["speedup"] > 0
    assert "## Before/after: G=8 224x168, the previous commit (HEAD of the test)" in (out / "gpu_check.md").read_text()


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
    for script in ("gpu_check.sh", "gpu_check_baseline.sh"):
        subprocess.run(["bash", "-n", os.path.join(REPO, "run_scripts", script)], check=True)


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
