"""The frozen vision tower (:mod:`vlm_r1.vision_cache`, issue 29 item 1): no autograd, one encoding per image per
generation batch, and the same numbers as before.

* ``test_exact_*``: on the tiny Qwen2.5-VL, Qwen2-VL and Qwen3-VL in fp32 (vision frozen as ``--freeze_vision_modules``
  does, TRL's fused LM head, gradient checkpointing off and on), TRL 1.16's own log-prob pass
  (``GRPOTrainer._get_per_token_logps_and_entropies``) and the shared-prompt pass give bit-identical log-probs,
  entropies and gradients of every trainable parameter with and without the cache (``torch.equal``), while the tower
  runs once for the whole "generation" + policy + shared sequence and its outputs never require grad (without the
  cache, transformers' checkpointing hook makes Qwen2/2.5-VL's require grad);
* the rest on a stand-in tower (a few ms each): copies and distinct images, a forced fingerprint collision, the batch
  lifecycle of :class:`vlm_r1.vision_cache.FrozenVisionMixin` under ``steps_per_generation`` x ``num_iterations``,
  evaluation scopes, trained towers left alone, the reference model's cache, and two gloo processes in lockstep.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from contextlib import nullcontext
from types import SimpleNamespace

import pytest
import torch
from transformers.modeling_outputs import BaseModelOutputWithPooling

from vlm_r1 import vision_cache as vc

ARCHS = ("qwen2_5_vl", "qwen2_vl", "qwen3_vl")
G = 2  # rollouts per group of the tiny batches (2 groups, two screenshot sizes)


# ---- the real tiny models --------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def family(request):
    """arch -> (vlm module, processor, fp32 policy with vision frozen and TRL's fused head, naive batch of 2 groups)."""
    import test_shared_prompt as tsp
    from trl.trainer.utils import add_fused_lm_head

    from vlm_r1.modules import get_vlm_module
    from vlm_r1.trainer import freeze_vision_modules

    built: dict = {}

    def get(arch: str):
        if arch not in built:
            path = request.getfixturevalue(
                {"qwen2_5_vl": "tiny_qwen25_dir", "qwen2_vl": "tiny_qwen2_dir"}.get(arch, "tiny_qwen3_dir")
            )
            module = get_vlm_module(path)
            processor = module.load_processor(path)
            torch.manual_seed(0)
            model = module.get_model_class(path, {}).from_pretrained(path, dtype=torch.float32)
            add_fused_lm_head(model, outputs=("log_probs", "entropy"))
            model.train()
            freeze_vision_modules(model, module.get_vision_modules_keywords())
            texts, images = tsp.build_prompts(processor)
            built[arch] = (module, processor, model, tsp.naive_batch(processor, texts, images, G))
        return built[arch]

    return get


def _checkpointing(model, on: bool | str) -> None:
    if on:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": on == "reentrant"})
        model.config.use_cache = False
    else:
        model.gradient_checkpointing_disable()


def _passes(model, module, batch):
    """What one generation batch runs: a no-grad pass (generation / old policy / reference), then TRL's policy pass
    and the shared-prompt policy pass, each with its backward. Returns their outputs and gradients."""
    import test_shared_prompt as tsp

    with torch.no_grad():
        old, _ = tsp.trl_logps(model, batch)
    naive = tsp.run_backward(model, lambda: (*tsp.trl_logps(model, batch), batch))
    positions = module.shared_prompt_positions_fn(model)
    shared = tsp.run_backward(model, lambda: (*tsp.shared_logps(model, batch, positions), batch))
    return old, naive, shared


def _assert_identical(ref, got):
    (ref_old, ref_naive, ref_shared), (old, naive, shared) = ref, got
    assert torch.equal(ref_old, old)
    for (lp0, en0, g0), (lp1, en1, g1) in ((ref_naive, naive), (ref_shared, shared)):
        assert torch.equal(lp0, lp1) and torch.equal(en0, en1)
        assert g0.keys() == g1.keys() and g0, "no trainable parameter got a gradient"
        assert not any(k.startswith("model.visual.") for k in g0)  # frozen
        bad = [k for k in g0 if not torch.equal(g0[k], g1[k])]
        assert not bad, f"gradients differ: {bad[:3]}"


@pytest.mark.parametrize(
    "arch,checkpointing",
    [(arch, ckpt) for arch in ARCHS for ckpt in (False, True)] + [("qwen2_5_vl", "reentrant")],
    ids=lambda v: {False: "nockpt", True: "ckpt"}.get(v, v) if not isinstance(v, str) else v,
)
@pytest.mark.filterwarnings("ignore:None of the inputs have requires_grad")  # the test's no-grad passes, reentrant
def test_exact_with_and_without_cache(arch, checkpointing, family):
    module, _, model, batch = family(arch)
    tower = module.vision_tower(model)
    _checkpointing(model, checkpointing)
    grads_seen, calls = [], []
    watch = tower.module.register_forward_hook(lambda m, a, out: grads_seen.append(out.pooler_output.requires_grad))
    count = tower.module.patch_embed.register_forward_hook(lambda m, a, out: calls.append(a[0].size(0)))
    wrapper = None
    try:
        ref = _passes(model, module, batch)
        # today, without the cache: the tower runs in every pass (no-grad, TRL, shared: 3 calls, the shared one on one
        # copy per group); with checkpointing, transformers' hook on Qwen2/2.5-VL's patch embedding makes the frozen
        # tower's output require grad in the grad passes
        hooked = bool(checkpointing) and arch != "qwen3_vl"
        assert grads_seen == [False, hooked, hooked] and len(calls) == 3
        grads_seen.clear(), calls.clear()

        cache = vc.VisionFeatureCache()
        wrapper = vc.FrozenVisionTower(tower, cache).install()
        cache.open()
        got = _passes(model, module, batch)
        _assert_identical(ref, got)
        assert grads_seen == [False, False, False]
        patches = batch["image_grid_thw"][::G].prod(-1).sum().item()
        assert calls == [patches]  # one tower call, the two distinct screenshots once each, for all three passes
        assert len(cache) == 2
        # no-grad pass: 2G rows, 2 new; TRL's pass: 2G rows; shared pass: 2 carriers
        assert cache.take_counts() == (2, 2 * G - 2 + 2 * G + 2)
        cache.close()
        assert len(cache) == 0
    finally:
        watch.remove(), count.remove()
        if wrapper is not None:
            wrapper.remove()
        _checkpointing(model, False)


def test_transformers_checkpointing_hook_sites(family):
    """Where transformers 5.23's ``enable_input_require_grads`` puts its hooks (``modeling_utils.py:2150-2167``): on
    the vision patch embedding of Qwen2/2.5-VL (``_input_embed_layer = "patch_embed"``), not on Qwen3-VL's. A canary:
    if this changes, the module docstring of ``vlm_r1.vision_cache`` does too."""
    sites = {}
    for arch in ARCHS:
        _, _, model, _ = family(arch)
        _checkpointing(model, True)
        try:
            ids = {h.id for h in model._require_grads_hooks}
            sites[arch] = sorted(n for n, m in model.named_modules() if ids & set(m._forward_hooks))
        finally:
            _checkpointing(model, False)
    assert sites == {
        "qwen2_5_vl": ["model.language_model.embed_tokens", "model.visual.patch_embed"],
        "qwen2_vl": ["model.language_model.embed_tokens", "model.visual.patch_embed"],
        "qwen3_vl": ["model.language_model.embed_tokens"],
    }


# ---- a stand-in tower ------------------------------------------------------------------------------------------------
class Tower(torch.nn.Module):
    """Qwen-VL's tower contract (``forward(pixel rows, grid_thw)``, merge 2): patch rows out and merged-token rows
    (sums of 2 consecutive patch rows) out, scaled by a parameter; counts its calls and patch rows."""

    def __init__(self, out_cls=BaseModelOutputWithPooling):
        super().__init__()
        self.scale = torch.nn.Parameter(torch.tensor(2.0), requires_grad=False)
        self.calls: list[int] = []
        self.out_cls = out_cls

    def forward(self, hidden_states, grid_thw=None, **kwargs):
        self.calls.append(hidden_states.size(0))
        h = hidden_states * self.scale
        return self.out_cls(last_hidden_state=h, pooler_output=h.view(-1, 2, h.size(1)).sum(1))


def _images(*seeds, rows=4, dim=3):
    """Pixel rows and grids of images (``rows`` patches each, grid (1, 2, rows/2)); equal seeds = equal pixels."""
    pix = [torch.randn(rows, dim, generator=torch.Generator().manual_seed(s)) for s in seeds]
    return torch.cat(pix), torch.tensor([[1, 2, rows // 2]] * len(seeds))


def _wrapped(tower=None, cache=None, **kw):
    tower = tower or Tower()
    cache = cache if cache is not None else vc.VisionFeatureCache()
    wrapper = vc.FrozenVisionTower(vc.GridTower(tower, 2), cache, **kw).install()
    return tower, cache, wrapper


def test_copies_and_distinct_images():
    tower, cache, _ = _wrapped()
    pix, grid = _images(1, 1, 1, 2, 2, 3)  # naive layout: G copies of each screenshot
    plain = Tower.forward(tower, pix, grid)
    tower.calls.clear()
    out = tower(pix, grid_thw=grid)
    assert torch.equal(out.last_hidden_state, plain.last_hidden_state)
    assert torch.equal(out.pooler_output, plain.pooler_output)
    assert not out.pooler_output.requires_grad
    assert tower.calls == [12]  # 3 distinct images of 4 rows, not 6
    assert len(cache) == 0  # closed: nothing kept
    cache.open()
    tower(pix, grid_thw=grid)
    tower(*_images(3, 2))
    assert tower.calls[1:] == [12]  # the second call hits both images
    assert len(cache) == 3 and cache.take_counts() == (6, 8)


def test_same_grid_different_pixels_and_forced_collision(monkeypatch):
    """Equal fingerprints are only a bucket: a hit needs equal pixels."""
    monkeypatch.setattr(vc, "image_fingerprints", lambda pixels, counts: [0] * len(counts))
    tower, cache, _ = _wrapped()
    cache.open()
    a, grid_a = _images(1)
    b, _ = _images(2)
    out_a, out_b = tower(a, grid_thw=grid_a), tower(b, grid_thw=grid_a)
    assert torch.equal(out_b.last_hidden_state, b * 2) and torch.equal(out_a.last_hidden_state, a * 2)
    assert tower.calls == [4, 4] and len(cache) == 2
    assert torch.equal(tower(b, grid_thw=grid_a).pooler_output, out_b.pooler_output) and tower.calls == [4, 4]


def test_fingerprints_see_position_and_dtype():
    x = torch.randn(6, 5)
    fp = vc.image_fingerprints(x, [3, 3])
    assert fp == vc.image_fingerprints(x.clone(), [3, 3])
    assert fp[0] != vc.image_fingerprints(x[[1, 0, 2, 3, 4, 5]], [3, 3])[0]  # rows swapped
    assert fp[0] != vc.image_fingerprints(x[:, [1, 0, 2, 3, 4]], [3, 3])[0]  # columns swapped
    assert len(vc.image_fingerprints(x.to(torch.bfloat16), [2, 4])) == 2


def test_cached_outputs_are_fresh_tensors():
    """A caller writing into an output cannot change the cache."""
    tower, cache, _ = _wrapped()
    cache.open()
    pix, grid = _images(1)
    tower(pix, grid_thw=grid).pooler_output.zero_()
    assert torch.equal(tower(pix, grid_thw=grid).pooler_output, Tower.forward(tower, pix, grid).pooler_output)


def test_trained_tower_runs_unchanged():
    tower, cache, _ = _wrapped()
    cache.open()
    tower.scale.requires_grad_(True)
    pix, grid = _images(1, 1)
    out = tower(pix, grid_thw=grid)
    assert out.pooler_output.requires_grad and tower.calls == [8] and len(cache) == 0


def test_unsplittable_output_runs_uncached(caplog):
    class Odd(BaseModelOutputWithPooling):
        pass

    class OddTower(Tower):
        def forward(self, hidden_states, grid_thw=None, **kwargs):
            out = super().forward(hidden_states, grid_thw)
            return Odd(last_hidden_state=out.last_hidden_state, pooler_output=out.pooler_output[:1])

    tower, cache, wrapper = _wrapped(OddTower())
    cache.open()
    pix, grid = _images(1, 2)
    with caplog.at_level(logging.WARNING, logger="vlm_r1.vision_cache"):
        out = tower(pix, grid_thw=grid)
    assert "does not split per image" in caplog.text and not wrapper.enabled
    assert out.pooler_output.shape == (1, 3) and len(cache) == 0
    tower(pix, grid_thw=grid)
    assert tower.calls == [8, 8, 8]  # encode attempt, the uncached rerun, then uncached


def test_install_twice_refused_and_remove_restores():
    tower, _, wrapper = _wrapped()
    with pytest.raises(RuntimeError, match="already"):
        vc.FrozenVisionTower(vc.GridTower(tower, 2), vc.VisionFeatureCache()).install()
    wrapper.remove()
    assert "forward" not in vars(tower)


# ---- the trainer side ------------------------------------------------------------------------------------------------
class _Base:
    """What the mixin calls down to (TRL's GRPOTrainer methods), recording the cache size it sees."""

    def _size(self) -> int:
        return -1 if self._vision_cache is None else len(self._vision_cache)

    def _prepare_inputs(self, batch):
        self.seen.append(("prepare", self._step, self._size()))
        if self._step % self._vision_generate_every() == 0:
            self.tower(*_images(self._step, self._step))  # "generation": one screenshot, two copies
            self._buffered_inputs = batch
        return batch

    def _compute_loss(self, model, inputs):
        self.tower(*_images(self._step // self._vision_generate_every() * self._vision_generate_every()))
        self.seen.append(("loss", self._step, self._size()))
        return torch.tensor(0.0)

    def prediction_step(self, model, inputs, prediction_loss_only, ignore_keys=None):
        self.tower(*_images(99))
        self.seen.append(("eval", self._step, self._size()))
        return None


class _Trainer(vc.FrozenVisionMixin, _Base):
    def __init__(self, tower, steps_per_generation=2, num_iterations=2, ref=None, trained=False, **args):
        self.tower, self.seen, self._step, self._buffered_inputs = tower, [], 0, None
        self.model = SimpleNamespace(training=True, tower=tower)
        self.ref_model = None if ref is None else SimpleNamespace(tower=ref)
        self.args = SimpleNamespace(steps_per_generation=steps_per_generation, **args)
        self.num_iterations = num_iterations
        self.vlm_module = SimpleNamespace(vision_tower=lambda m: vc.GridTower(m.tower, 2))
        self.accelerator = SimpleNamespace(is_main_process=True, num_processes=1, state=SimpleNamespace())
        self._metrics = {"train": defaultdict(list)}
        tower.scale.requires_grad_(trained)
        self._frozen_vision_setup(not trained)


def test_mixin_batch_lifecycle():
    """steps_per_generation 2 x num_iterations 2: the cache opens at steps 0 and 4 and is dropped after the forward of
    steps 3 and 7; each batch encodes its screenshot once; evaluation's entries go with it."""
    tower = Tower()
    trainer = _Trainer(tower)
    for step in range(8):
        trainer._step = step
        trainer._compute_loss(None, trainer._prepare_inputs({}))
        if step == 1:
            trainer.model.training = False
            trainer.prediction_step(None, {}, True)
            trainer.model.training = True
    gen = [(s, n) for kind, s, n in trainer.seen if kind == "prepare"]
    assert gen == [(0, 0), (1, 1), (2, 1), (3, 1), (4, 0), (5, 1), (6, 1), (7, 1)]
    assert ("eval", 1, 1) in trainer.seen and len(trainer._vision_cache) == 0
    assert tower.calls == [4, 4, 4]  # batch 1's screenshot, the evaluation image, batch 2's screenshot
    assert trainer._metrics["train"]["vision/images_encoded"] == [1.0, 1.0]
    assert trainer._metrics["train"]["vision/images_reused"] == [5.0, 5.0]  # 1 copy at generation + 4 loss passes
    assert trainer.vision_tower_status() == {
        "frozen": True,
        "no_grad": True,
        "cache": True,
        "reference": None,
        "reason": None,
        "lockstep": False,
    }


def test_mixin_trained_tower_is_left_alone(caplog):
    tower = Tower()
    with caplog.at_level(logging.INFO, logger="vlm_r1.vision_cache"):
        trainer = _Trainer(tower, trained=True)
    assert "forward" not in vars(tower) and trainer._vision_cache is None
    assert "vision tower trained (--freeze_vision_modules false)" in caplog.text
    assert trainer.vision_tower_status()["frozen"] is False
    trainer._step = 0
    trainer._compute_loss(None, trainer._prepare_inputs({}))  # nothing to open or drop
    assert "vision/images_encoded" not in trainer._metrics["train"]


@pytest.mark.parametrize(
    "same,sync,expect",
    [(True, False, "shares the policy's cache"), (False, False, "own cache"), (True, True, "own cache")],
)
def test_mixin_reference_tower(same, sync, expect):
    policy, ref = Tower(), Tower()
    if not same:
        ref.scale.data.fill_(3.0)
    ref.scale.requires_grad_(True)  # TRL's reference model keeps requires_grad; the mixin clears it on the tower
    trainer = _Trainer(policy, ref=ref, sync_ref_model=sync)
    assert trainer.vision_tower_status()["reference"].startswith(expect) and not ref.scale.requires_grad
    trainer._step = 0
    trainer._prepare_inputs({})
    ref(*_images(0))
    assert ref.calls == ([] if expect.startswith("shares") else [4])
    assert torch.equal(ref(*_images(0)).last_hidden_state, Tower.forward(ref, *_images(0)).last_hidden_state)


# ---- two processes ---------------------------------------------------------------------------------------------------
def _lockstep_rank(rank: int) -> list[int]:
    """Rank 0 has its image cached, rank 1 does not: both run the tower once in the call (ZeRO-3 gathers match)."""
    tower, cache, _ = _wrapped(lockstep=True)
    cache.open()
    tower(*_images(5 if rank == 0 else 6))  # both encode (a miss everywhere)
    tower.calls.clear()
    out = tower(*_images(5))
    assert torch.equal(out.last_hidden_state, _images(5)[0] * 2)
    return tower.calls


@pytest.mark.slow  # two spawned processes (~6 s)
def test_lockstep_two_processes(tmp_path):
    from tests.helpers.gloo import gloo_ranks

    results, codes = gloo_ranks(_lockstep_rank, tmp_path)
    assert codes == [0, 0] and results == {0: [4], 1: [4]}


def test_lockstep_off_without_a_group():
    assert vc.any_rank(False) is False and vc.any_rank(True) is True
    with nullcontext():
        tower, cache, _ = _wrapped(lockstep=True)
        cache.open()
        tower(*_images(5))
        tower(*_images(5))
        assert tower.calls == [4]


def test_dropout_tower_runs_uncached_in_training():
    """A tower that samples in training mode draws anew on every call, as before; in eval mode it is cached."""
    tower = Tower()
    tower.drop = torch.nn.Dropout(0.1)
    _, cache, _ = _wrapped(tower)
    cache.open()
    for _ in range(2):
        tower(*_images(1))
    tower.eval()
    for _ in range(2):
        tower(*_images(1))
    assert tower.calls == [4, 4, 4] and len(cache) == 1


def test_same_weights_compares_zero3_partitions():
    a, b = Tower(), Tower()
    assert vc.same_weights(a, b)
    b.scale.data.fill_(3.0)
    assert not vc.same_weights(a, b)
    a.scale.ds_tensor, b.scale.ds_tensor = torch.tensor([1.0]), torch.tensor([1.0])  # partitions (ZeRO-3)
    assert vc.same_weights(a, b)
    b.scale.ds_tensor = torch.tensor([1.5])
    assert not vc.same_weights(a, b)
    del a.scale.ds_tensor
    assert not vc.same_weights(a, b)  # one partitioned, one not


# ---- end to end ------------------------------------------------------------------------------------------------------
#: ``python -c`` driver: a GRPO run through ``vlm_r1.grpo_jsonl``; argv[1] ``off`` leaves the tower unwrapped (what
#: ran before ``vlm_r1.vision_cache``), ``on`` is the code as it is
_DRIVER = (
    "import sys\n"
    "from vlm_r1 import vision_cache as vc, grpo_jsonl\n"
    "if sys.argv[1] == 'off':\n"
    "    vc.FrozenVisionTower.install = lambda self: self\n"
    "grpo_jsonl.main(sys.argv[2:])\n"
)


@pytest.mark.slow  # two CLI runs (~25 s)
@pytest.mark.parametrize("shared_prompt", [False, True], ids=["naive", "shared"])
def test_training_run_identical_with_and_without_cache(shared_prompt, tiny_qwen25_dir, tmp_path):
    """Gradient checkpointing on (the hook case), KL on (reference passes), two steps per generation (old-policy pass
    and a reused batch), fp32: every logged number of the two steps is identical, and the cached run encoded each
    screenshot once per generation batch."""
    import sys

    from tests.helpers.proc import run
    from tests.helpers.train import sample_subset, step_logs, tiny_train_argv

    data = sample_subset(tmp_path / "train.jsonl", 4)
    logs = {}
    for mode in ("off", "on"):
        out = tmp_path / mode
        argv = tiny_train_argv(
            tiny_qwen25_dir,
            data,
            out,
            "--gradient_checkpointing",
            "true",
            beta=0.04,
            steps_per_generation=2,
            max_steps=2,
            dtype="float32",
            bf16=False,
            shared_prompt=shared_prompt,
        )
        run([sys.executable, "-c", _DRIVER, mode, *argv], timeout=900)
        logs[mode] = step_logs(out)
    off, on = logs["off"], logs["on"]
    assert len(off) == len(on) == 2
    for a, b in zip(off, on, strict=True):
        clocks = ("vision/", "timing/", "perf/", "step_time", "train_runtime")
        numbers = {k for k in a if isinstance(a[k], float) and not k.startswith(clocks) and "per_s" not in k}
        assert {"loss", "grad_norm", "kl", "entropy"} <= numbers
        assert {k: a[k] for k in numbers} == {k: b[k] for k in numbers}
    assert on[1]["vision/images_encoded"] >= 1 and on[1]["vision/images_reused"] > on[1]["vision/images_encoded"]
