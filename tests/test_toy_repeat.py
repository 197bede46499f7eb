"""A seeded toy run repeats exactly (issue 30, item 6; docs/TRAINING.md "Why the toy numbers moved, and what is
pinned now"): the control reward follows the run's seed, a toy stage runs the code of the tree that launched it, and
a stage or a prepared input is reused only when it was made from the same inputs by the same code and libraries.
The slow test runs one GRPO stage twice and compares its log and weights bit for bit."""

from __future__ import annotations

import hashlib
import json
import os
import random
import sys

import pytest

TIMING = ("runtime", "per_second", "time", "timing", "tokens_per_s", "peak_mem")


def test_random_reward_follows_the_seed():
    """The control's coin is the global ``random`` the trainer seeds from --seed: same seed, same coins; another
    seed, other coins (it was a module-level ``random.Random(0)``, the same for every seed)."""
    from gui_grounding.ops.toy import random_reward

    completions = ["(1,1)"] * 64
    random.seed(1)
    first = random_reward(completions)
    random.seed(1)
    assert random_reward(completions) == first
    random.seed(2)
    assert random_reward(completions) != first


@pytest.mark.skipif(sys.version_info < (3, 11), reason="PYTHONSAFEPATH needs Python 3.11")
def test_toy_stage_imports_the_launching_tree(tmp_path, monkeypatch):
    """A decoy ``vlm_r1`` in the working folder (another checkout) is not what the stage's subprocess imports."""
    from gui_grounding.ops.toy_runs import _run, _tree_root

    (tmp_path / "vlm_r1").mkdir()
    (tmp_path / "vlm_r1" / "__init__.py").write_text("")
    monkeypatch.chdir(tmp_path)
    log = tmp_path / "stage" / "where.log"
    _run([sys.executable, "-c", "import vlm_r1; print(vlm_r1.__file__)"], str(log))
    assert log.read_text().strip() == os.path.join(_tree_root(), "vlm_r1", "__init__.py")


def test_stage_reused_only_on_the_same_inputs(tmp_path):
    from gui_grounding.ops.toy import _run

    counter, log = tmp_path / "n", str(tmp_path / "stage.log")
    cmd = [sys.executable, "-c", f"open({str(counter)!r}, 'a').write('x')"]
    _run(cmd, log, {"base": "a"})
    _run(cmd, log, {"base": "a"})  # reused
    assert counter.read_text() == "x"
    _run(cmd, log, {"base": "b"})  # same command, other inputs: reruns
    assert counter.read_text() == "xx"


def test_a_stage_that_reruns_starts_from_an_empty_folder(tmp_path):
    """A checkpoint an interrupted stage left (saved on SIGTERM by the preemption callback) is removed before the stage
    runs again, so ``--resume_from_checkpoint latest`` cannot resume the new run from it; a reused stage keeps its
    folder."""
    from gui_grounding.ops.toy_runs import _run

    out = tmp_path / "runs" / "grpo_random_reward"
    (out / "checkpoint-45").mkdir(parents=True)
    seen = tmp_path / "seen"
    cmd = [sys.executable, "-c", f"import os; open({str(seen)!r}, 'w').write(str(os.path.exists({str(out)!r})))"]
    _run(cmd, str(out) + ".log", {"base": "a"}, str(out))
    assert seen.read_text() == "False" and not out.exists()
    out.mkdir()
    (out / "model.safetensors").write_text("kept")
    _run(cmd, str(out) + ".log", {"base": "a"}, str(out))  # reused: the folder stays
    assert (out / "model.safetensors").read_text() == "kept"


def _tree_digest(folder: str) -> str:
    digest = hashlib.sha256()
    for root, dirs, files in sorted(os.walk(folder)):
        dirs.sort()
        for name in sorted(files):
            path = os.path.join(root, name)
            digest.update(os.path.relpath(path, folder).encode())
            with open(path, "rb") as f:
                digest.update(f.read())
    return digest.hexdigest()


def test_prepared_inputs_are_bit_identical_and_rebuilt_when_stale(tmp_path):
    """Two fresh builds of the tiny model and the synthetic set are byte-identical; a second prepare reuses them;
    a stamp from other code or libraries rebuilds them."""
    from gui_grounding.ops.toy import ToyExperiments, ToyRecipe

    recipe = ToyRecipe(synthetic={"num_train": 4, "num_test": 2, "buttons_per_image": 1, "background": "panels"})
    one, two = ToyExperiments(str(tmp_path / "one"), recipe), ToyExperiments(str(tmp_path / "two"), recipe)
    one.prepare(), two.prepare()
    for a, b in ((one.model_dir, two.model_dir), (one.data_dir, two.data_dir)):
        assert _tree_digest(a) == _tree_digest(b)
    weights = os.path.join(one.model_dir, "model.safetensors")
    built = os.stat(weights).st_mtime_ns
    one.prepare()
    assert os.stat(weights).st_mtime_ns == built  # reused
    stamp = tmp_path / "one" / "prepared.json"
    doc = json.loads(stamp.read_text())
    doc["environment"]["code"] = "another commit"
    stamp.write_text(json.dumps(doc))
    one.prepare()
    assert os.stat(weights).st_mtime_ns != built  # rebuilt
    assert _tree_digest(one.model_dir) == _tree_digest(two.model_dir)


@pytest.mark.slow
def test_seeded_grpo_stage_repeats_exactly(tmp_path):
    """The same seeded GRPO stage (random reward, so every step has gradients and sampled rollouts) in two fresh
    output folders: identical log_history (timings aside) and identical weights."""
    from gui_grounding.ops.toy import RANDOM_CONTROL, ToyExperiments, ToyRecipe, _history

    recipe = ToyRecipe(
        synthetic={"num_train": 16, "num_test": 4, "buttons_per_image": 1, "background": "panels"},
        grpo_steps=2,
        prompts_per_step=2,
        num_generations=4,
        eval_steps=2,
        eval_samples=4,
    )
    runs = []
    for name in ("a", "b"):
        exp = ToyExperiments(str(tmp_path / name), recipe)
        exp.prepare()
        run = exp.grpo("grpo", exp.model_dir, extra=[*RANDOM_CONTROL, "--activation_checkpointing", "false"])
        history = [{k: v for k, v in h.items() if not any(w in k for w in TIMING)} for h in _history(run["dir"])]
        with open(os.path.join(run["dir"], "model.safetensors"), "rb") as f:
            runs.append((history, hashlib.sha256(f.read()).hexdigest()))
    assert any(h.get("grad_norm") for h in runs[0][0])  # the run trained
    assert runs[0] == runs[1]
