"""The Qwen3-VL-8B GRPO recipe (issue 32 item 1): recipes/qwen3vl/{8b,tiny_cpu}.yaml, run_scripts/qwen3vl_8b.sh,
the 8B shape of the memory estimate (gui_grounding/ops/memory_shapes.py).

Fast (default suite, in process, no model built): the recipe's pixel budget is the eval profile qwen3-vl-8b's, the
YAML parses into the entry point's dataclasses with every key known and its value kept, every value names its source,
the launcher's dry run prints the batch maths and the per-rank memory, and the 8B shape counts 8.77B parameters.
Slow: the tiny CPU twin trains, saves and resumes on 2 processes through the launcher.
"""

from __future__ import annotations

import json
import os
import re
import sys

import pytest
import yaml

from tests.helpers.paths import REPO

RECIPE = os.path.join(REPO, "recipes", "qwen3vl", "8b.yaml")
TINY = os.path.join(REPO, "recipes", "qwen3vl", "tiny_cpu.yaml")
#: the tags a value's comment names its source with (recipes/qwen3vl/8b.yaml's header defines them)
SOURCE_TAGS = ("Gelato", "README", "trainer", "seed", "profile", "ours", "script")
#: the 8B keys the tiny twin leaves to its launcher (run_scripts/qwen3vl_tiny_cpu.sh: MODEL, DEEPSPEED=none) or to the
#: defaults (no dataloader workers on 2 CPU cores)
LAUNCHER_KEYS = {"model_name_or_path", "deepspeed", "dataloader_num_workers"}


def _load(path: str) -> dict:
    with open(path, encoding="utf-8") as f:
        return yaml.safe_load(f)


def _comments(path: str) -> dict[str, str]:
    """``{key: its line's comment}`` of a flat recipe YAML ('' where the line has none)."""
    out = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            m = re.match(r"^([a-z_0-9]+):[^#]*(?:#\s*(.*))?$", line.rstrip("\n"))
            if m:
                out[m.group(1)] = (m.group(2) or "").strip()
    return out


def test_the_budget_and_the_frame_are_the_eval_profile_s():
    """One source of truth, checked where it cannot drift unseen: the recipe's model, adapter, min/max pixels are the
    qwen3-vl-8b profile's (its PixelBudget), the adapter answers on the 0-1000 grid, and the budget's factor (patch
    16 x merge 2) is the estimator's 8B shape's."""
    from gui_grounding.models.adapters import get_adapter
    from gui_grounding.models.profiles import get_profile
    from gui_grounding.ops.memory_shapes import QWEN3_VL_SHAPES

    recipe, profile = _load(RECIPE), get_profile("qwen3-vl-8b")
    assert (recipe["model_name_or_path"], recipe["adapter"]) == (profile.model, profile.adapter)
    assert (recipe["min_pixels"], recipe["max_pixels"]) == (profile.budget.min_pixels, profile.budget.max_pixels)
    assert (recipe["min_pixels"], recipe["max_pixels"]) == (65_536, 16_777_216)
    assert profile.budget.factor == QWEN3_VL_SHAPES["Qwen3-VL-8B"].resize_factor == 32
    assert get_adapter(recipe["adapter"]).answer_frame == "norm1000"
    assert _load(TINY)["min_pixels"] == profile.budget.min_pixels  # the twin shrinks max_pixels only


def test_the_8b_shape_counts_8_77b_parameters():
    """Qwen3-VL-8B (config.json numbers, memory_shapes.QWEN3_VL_8B_SOURCE): 8,767,123,696 parameters, the count of
    transformers 5.23's Qwen3VLForConditionalGeneration built from those numbers; within 1% of 8.77B. The config
    reader gives the same shape from the config dict."""
    from gui_grounding.ops.estimate import shape_for_model
    from gui_grounding.ops.memory_shapes import QWEN3_VL_SHAPES, shape_from_config

    shape = QWEN3_VL_SHAPES["Qwen3-VL-8B"]
    assert (shape.total_params(), shape.lm_params(), shape.vision_params()) == (
        8_767_123_696,
        8_190_735_360,
        576_388_336,
    )
    assert abs(shape.total_params() / 8.77e9 - 1) < 0.01
    assert (shape.head_dim, shape.q_dim, shape.kv_dim) == (128, 4096, 1024)
    assert shape_for_model("Qwen/Qwen3-VL-8B-Instruct") == shape
    config = {
        "model_type": "qwen3_vl",
        "tie_word_embeddings": False,
        "text_config": {
            "head_dim": 128,
            "hidden_size": 4096,
            "intermediate_size": 12288,
            "num_attention_heads": 32,
            "num_hidden_layers": 36,
            "num_key_value_heads": 8,
            "vocab_size": 151936,
        },
        "vision_config": {
            "deepstack_visual_indexes": [8, 16, 24],
            "depth": 27,
            "hidden_size": 1152,
            "intermediate_size": 4304,
            "num_heads": 16,
            "num_position_embeddings": 2304,
            "out_hidden_size": 4096,
            "patch_size": 16,
            "spatial_merge_size": 2,
            "temporal_patch_size": 2,
        },
    }
    assert shape_from_config(config, "x", "config.json").total_params() == shape.total_params()
    with pytest.raises(ValueError, match="unknown family"):
        type(shape)("x", 1, 1, 1, 1, 1, 1, False, family="qwen9")


def test_every_value_names_its_source():
    """8b.yaml: every key's line has a comment naming a source tag (or 'ours' with a reason). tiny_cpu.yaml: the 8B
    keys less those its launcher passes, each value the 8B one unless its comment says tiny/CPU."""
    comments = _comments(RECIPE)
    assert comments.keys() == _load(RECIPE).keys()
    for key, comment in comments.items():
        assert any(tag in comment for tag in SOURCE_TAGS), f"8b.yaml {key}: no source in {comment!r}"
        if comment.startswith("ours"):
            assert len(comment) > len("ours: "), f"8b.yaml {key}: 'ours' without a reason"
    big, tiny, tiny_comments = _load(RECIPE), _load(TINY), _comments(TINY)
    assert big.keys() - tiny.keys() == LAUNCHER_KEYS and tiny.keys() <= big.keys()
    differ = {k for k in tiny if tiny[k] != big[k]}
    assert differ == {
        "steps_per_generation",
        "max_completion_length",
        "max_pixels",
        "bf16",
        "dtype",
        "gradient_checkpointing",
        "attn_implementation",
        "max_steps",
        "save_steps",
        "save_total_limit",
        "report_to",
        "seed",
        "data_seed",
    }
    for key in differ:
        assert re.search(r"\b(tiny|CPU)\b", tiny_comments[key]), f"tiny_cpu.yaml {key}: differs without saying why"


def test_the_launcher_sets_no_recipe_value():
    """run_scripts/qwen3vl_8b.sh names the recipe and the run folder only; the values live in the YAML."""
    with open(os.path.join(REPO, "run_scripts", "qwen3vl_8b.sh"), encoding="utf-8") as f:
        script = f.read()
    exports = re.findall(r"^export (\w+)=", script, flags=re.M)
    assert exports == ["RECIPE_YAML", "OUTPUT_DIR"] and "recipes/qwen3vl/8b.yaml" in script
    assert 'exec bash "$ROOT/run_scripts/gta1_recipe.sh" "$@"' in script


def test_dry_run_parses_every_key_and_prints_batch_maths_and_memory(capsys, monkeypatch):
    """The launcher's plan step (python -m gui_grounding.plan --dry-run, what run_scripts/qwen3vl_8b.sh --dry-run
    runs) on 1 node x 8 GPUs: the YAML parses into gui_grounding.train's dataclasses with every key known and its
    value kept; the batch maths (128 prompts x 8 = 1,024 completions = 8 x 8 x 16), the objective and the per-rank
    memory of the 8B shape are printed."""
    from gui_grounding.ops.plan import main, resolve
    from vlm_r1.upstream import GTA1

    for name in ("WORLD_SIZE", "RANK", "LOCAL_RANK", "PMI_SIZE", "OMPI_COMM_WORLD_SIZE"):
        monkeypatch.delenv(name, raising=False)
    argv = ["--config", RECIPE, "--data_file_paths", "unused.jsonl", "--output_dir", "/tmp/unused"]
    plan = resolve(argv, nproc_per_node=8, final=True, dialect=GTA1)
    script_args, training_args, model_args = plan.args
    where = (script_args, script_args.task_options, training_args, model_args)
    machine = {"bf16", "attn_implementation"}  # fp32 and sdpa on a machine without bf16 / flash-attn (notices)
    for key, value in _load(RECIPE).items():
        holders = [h for h in where if hasattr(h, key)]
        assert holders, f"{key}: no dataclass of gui_grounding.train has it"
        got = getattr(holders[0], key)
        if key == "deepspeed":
            assert os.path.join(REPO, got) == os.path.join(REPO, value), (key, got)  # kept, or made absolute
        elif key not in machine:
            assert got == value, (key, got, value)
    assert (plan.batch.per_device, plan.batch.grad_accum, plan.batch.steps_per_generation) == (8, 16, 8)

    assert main(["--nnodes", "1", "--nproc-per-node", "8", "--dry-run", "--", *argv], dialect=GTA1) == 0
    err = capsys.readouterr().err.splitlines()
    for line in (
        "[plan] world size 8 = 1 node(s) x 8 process(es) per node",
        "[plan] completions per optimisation step: 1 node(s) x 8 GPU(s) per node x 8 per-device batch x 16 gradient "
        "accumulation = 1,024",
        "[plan] prompts (groups) per step: 1,024 completions / 8 num_generations = 128",
        "[plan] steps: 250 (max_steps) -> 32,000 prompts, 256,000 completions",
        "[plan] generation: 64 completions (8 prompts) per process per generate call (per-device batch x "
        "steps_per_generation 8)",
    ):
        assert line in err, line
    dry = {x.split()[1]: x.split(None, 2)[2] for x in err if x.startswith("[dry-run]")}
    assert (dry["adapter"], dry["reward_funcs"], dry["box_rounding"]) == ("qwen3-vl", "['click']", "float")
    assert (dry["max_pixels"], dry["min_pixels"], dry["epsilon_high"]) == ("16777216", "65536", "0.28")
    memory = [x for x in err if x.startswith("[memory]")]
    assert any("model Qwen3-VL-8B: 8,767,123,696 parameters" in x for x in memory), memory
    assert any("1920x1080 -> 1920x1088 (smart_resize, factor 32, pixels 65,536..16,777,216)" in x for x in memory)
    assert "[memory] training phase (per rank):" in memory and "[memory] generation phase (per rank):" in memory
    assert (
        "[memory]   KV cache                              20.02 GiB    64 rows x (2,150 + 128) tokens x 36 layers "
        "x 2 x 1024 x 2 B" in memory
    )
    peak = next(x for x in memory if x.startswith("[memory] predicted peak per GPU: "))
    assert peak == "[memory] predicted peak per GPU: 56.15 GiB (generation phase) of 80 GiB", peak
    assert not any("WARNING" in x for x in memory)
    assert any("qwen3_vl shape" in x and "not measured for this family" in x for x in memory)


def _batches(out: str) -> list[int]:
    with open(os.path.join(out, "batches.rank0.jsonl"), encoding="utf-8") as f:
        return [json.loads(x)["step"] for x in f]


@pytest.mark.slow  # two 2-process CPU runs of the tiny twin, 3 steps in all (~2 min on 2 shared cores)
def test_tiny_twin_trains_saves_and_resumes_on_two_processes(tmp_path, tiny_qwen3_dir):
    """run_scripts/qwen3vl_tiny_cpu.sh (recipes/qwen3vl/tiny_cpu.yaml, the launcher's CPU path: torchrun, 2 gloo
    processes, 2 prompts x 8 rollouts, shared prompts): 2 steps and a complete checkpoint-2; then the same command with
    MAX_STEPS=3 resumes from checkpoint-2 and trains step 3 only. The run records the Qwen3-VL frame and
    budget it trained at."""
    from tests.helpers.proc import child_env, run
    from vlm_r1.preemption import COMPLETE_MARKER

    out = str(tmp_path / "run")

    def launch(steps: int):
        env = child_env(threads=1, plugins=False, PYTHON=sys.executable, TINY_MODEL_DIR=tiny_qwen3_dir)
        env.update(OUTPUT_DIR=out, MAX_STEPS=str(steps))
        for name in ("NUM_GENERATIONS", "ZERO", "GLOBAL_PROMPTS", "ROLLOUTS_PER_DEVICE", "MODEL", "NPROC_PER_NODE"):
            env.pop(name, None)
        p = run(["bash", "run_scripts/qwen3vl_tiny_cpu.sh"], env=env, timeout=300, check=False)
        assert p.returncode == 0, p.stderr[-3000:]
        return p

    launch(2)
    assert os.path.isfile(os.path.join(out, "checkpoint-2", COMPLETE_MARKER))
    assert _batches(out) == [1, 2]
    with open(os.path.join(out, "vlm_r1_run.json"), encoding="utf-8") as f:
        info = json.load(f)
    assert (info["model_type"], info["adapter"], info["answer_frame"], info["reward_funcs"]) == (
        "qwen3_vl",
        "qwen3-vl",
        "norm1000",
        ["click_reward"],
    )
    assert info["shared_prompt"]["active"] is True and info["num_generations"] == 8
    budget = info["pixel_budget"]
    assert (budget["factor"], budget["min_pixels"], budget["max_pixels"]) == (32, 65_536, 131_072)

    p = launch(3)
    assert f"resuming from {os.path.join(out, 'checkpoint-2')}" in p.stderr
    assert _batches(out) == [1, 2, 3]  # step 3 trained once, after the resumed step 2
    with open(os.path.join(out, "trainer_state.json"), encoding="utf-8") as f:
        assert json.load(f)["global_step"] == 3
