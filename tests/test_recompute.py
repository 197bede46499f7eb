"""The recompute policy (``--gradient_checkpointing_every``, ``--vision_gradient_checkpointing``; vlm_r1.recompute) and
its term in the memory estimator (gui_grounding.ops.memory).

On the tiny Qwen2.5-VL with 5 decoder layers and 3 vision blocks (random weights, fp32): the policy checkpoints
exactly the expected layers, also after TRL's disable/enable around generation; the gradients of every parameter
equal those without checkpointing; the estimator's saved activations change by the per-layer formula.
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch

from gui_grounding.ops.memory import RunShape, ZeroConfig, _activations, estimate, layer_activation_bytes
from gui_grounding.ops.memory_calibration import DEFAULT_CALIBRATION_PATH, load_calibration
from gui_grounding.ops.memory_shapes import QWEN2_5_VL_SHAPES
from vlm_r1.configs import VLMGRPOConfig
from vlm_r1.launch import install_recompute_policy
from vlm_r1.recompute import RecomputePolicy, checkpointed_layers, checkpointed_modules, install

LAYERS, VISION_DEPTH = 5, 3
CAL = load_calibration(DEFAULT_CALIBRATION_PATH)  # activation factor 1.142: the terms are scaled by it


@pytest.fixture(autouse=True)
def one_thread():
    """One intra-op thread: the model is tiny, and on a busy 2-core machine two OpenMP threads made each
    forward+backward 10-50x slower (0.7-3 s against 0.05 s)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def setup(tiny_qwen25_dir):
    """A 5-layer, 3-block model built from the tiny checkpoint's config, and one image + text input."""
    from PIL import Image
    from transformers import AutoConfig, Qwen2_5_VLForConditionalGeneration

    from vlm_r1.modules import get_vlm_module

    config = AutoConfig.from_pretrained(tiny_qwen25_dir)
    config.text_config.num_hidden_layers = LAYERS
    config.text_config.layer_types = ["full_attention"] * LAYERS
    config.vision_config.depth = VISION_DEPTH
    config.vision_config.fullatt_block_indexes = [2]
    torch.manual_seed(0)
    model = Qwen2_5_VLForConditionalGeneration(config).float()
    proc = get_vlm_module(tiny_qwen25_dir).load_processor(tiny_qwen25_dir)
    g = torch.Generator().manual_seed(0)
    pixels = torch.randint(0, 256, (120 * 90 * 3,), generator=g).to(torch.uint8).numpy().tobytes()
    msgs = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "Click the box."}]}]
    text = proc.apply_chat_template(msgs, add_generation_prompt=True, tokenize=False) + "(12,34)"
    inputs = proc(images=[Image.frombytes("RGB", (120, 90), pixels)], text=[text], return_tensors="pt")
    return SimpleNamespace(model=model, inputs=dict(inputs), state=model.state_dict())


def _grads(model, inputs) -> tuple[dict[str, torch.Tensor], dict[str, int]]:
    """Every parameter's gradient of one forward+backward in train mode, and how often each layer's MLP started (twice
    in a layer that the backward recomputes; a pre-hook, since the recompute stops inside the MLP's last matmul, once
    it has every tensor the backward needs: torch.utils.checkpoint's early stop)."""
    runs: dict[str, int] = {}
    hooks = [
        module.mlp.register_forward_pre_hook(lambda *_, n=name: runs.__setitem__(n, runs.get(n, 0) + 1))
        for name, module in model.named_modules()
        if name.startswith(("model.language_model.layers.", "model.visual.blocks.")) and name.count(".") == 3
    ]
    try:
        model.zero_grad(set_to_none=True)
        model.train()
        out = model(**inputs)
        (out.logits.float().square().mean()).backward()
    finally:
        for hook in hooks:
            hook.remove()
    return {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}, runs


def _fresh(setup):
    """The module's model with checkpointing off and no policy installed."""
    model = setup.model
    model.__dict__.pop("_set_gradient_checkpointing", None)
    model.activation_checkpointing_disable()
    return model


def test_policy_checkpoints_the_expected_layers_and_keeps_gradients(setup):
    model = _fresh(setup)
    reference, runs = _grads(model, setup.inputs)  # no checkpointing
    assert len(runs) == LAYERS + VISION_DEPTH and set(runs.values()) == {1}
    cases = [
        (RecomputePolicy(every=1, vision=True), [0, 1, 2, 3, 4], True),
        (RecomputePolicy(every=2, vision=True), [0, 2, 4], True),
        (RecomputePolicy(every=3, vision=False), [0, 3], False),
    ]
    for policy, layers, vision in cases:
        model = _fresh(setup)
        assert install(model, policy) is (not policy.is_default)
        model.activation_checkpointing_enable()  # what the trainer does (transformers trainer.py:1503-1515)
        on = checkpointed_modules(model)
        assert on["decoder"] == [f"model.language_model.layers.{i}" for i in layers]
        assert on["vision"] == ([f"model.visual.blocks.{i}" for i in range(VISION_DEPTH)] if vision else [])
        assert len(layers) == checkpointed_layers(LAYERS, policy.every)
        # TRL turns checkpointing off and on around each generation (trl/models/utils.py:136-154), kwargs only
        model.gradient_checkpointing_disable()
        assert checkpointed_modules(model) == {"decoder": [], "vision": []}
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        assert checkpointed_modules(model) == on
        grads, runs = _grads(model, setup.inputs)
        assert sorted(n for n, count in runs.items() if count == 2) == sorted(on["decoder"] + on["vision"])
        assert sum(runs.values()) == LAYERS + VISION_DEPTH + len(on["decoder"]) + len(on["vision"])
        assert grads.keys() == reference.keys()
        for name, grad in grads.items():  # fp32 on CPU: the recompute is the same computation, bit for bit
            assert torch.equal(grad, reference[name]), name
    _fresh(setup)


def test_deepcopy_keeps_the_policy(setup):
    import copy

    model = _fresh(setup)
    install(model, RecomputePolicy(every=2, vision=False))
    clone = copy.deepcopy(model)
    clone.activation_checkpointing_enable()
    assert checkpointed_modules(clone)["decoder"] == [f"model.language_model.layers.{i}" for i in (0, 2, 4)]
    assert checkpointed_modules(clone)["vision"] == []
    assert checkpointed_modules(model) == {"decoder": [], "vision": []}  # the original is untouched
    _fresh(setup)


def test_flags_parse_and_reach_the_model(setup):
    args = VLMGRPOConfig(
        output_dir="/tmp/unused",
        gradient_checkpointing=True,
        gradient_checkpointing_every=2,
        vision_gradient_checkpointing=False,
    )
    module = SimpleNamespace(get_vision_modules_keywords=lambda: ["visual"])
    model = _fresh(setup)
    assert install_recompute_policy(model, args, module)
    model.activation_checkpointing_enable()
    assert len(checkpointed_modules(model)["decoder"]) == 3 and not checkpointed_modules(model)["vision"]
    _fresh(setup)
    off = VLMGRPOConfig(output_dir="/tmp/unused", gradient_checkpointing=False, gradient_checkpointing_every=2)
    assert not install_recompute_policy(_fresh(setup), off, module)
    default = VLMGRPOConfig(output_dir="/tmp/unused", gradient_checkpointing=True)
    assert not install_recompute_policy(_fresh(setup), default, module)  # transformers' own every-layer default


def test_transformers_every_n_layers_is_translated_and_bad_values_refused():
    args = VLMGRPOConfig(
        output_dir="/tmp/unused",
        gradient_checkpointing=True,
        gradient_checkpointing_kwargs={"use_reentrant": False, "every_n_layers": 4},
    )
    assert args.gradient_checkpointing_every == 4
    assert args.activation_checkpointing_kwargs == {"use_reentrant": False}  # TRL passes the rest to checkpoint()
    with pytest.raises(ValueError, match="disagree"):
        VLMGRPOConfig(
            output_dir="/tmp/unused",
            gradient_checkpointing=True,
            gradient_checkpointing_every=2,
            gradient_checkpointing_kwargs={"every_n_layers": 3},
        )
    with pytest.raises(ValueError, match=">= 1"):
        VLMGRPOConfig(output_dir="/tmp/unused", gradient_checkpointing_every=0)


# ---- the estimator --------------------------------------------------------------------------------------------------
def _run(**kw) -> RunShape:
    base = dict(
        world_size=8,
        zero=ZeroConfig(stage=2),
        per_device_batch=8,
        num_generations=8,
        prompt_tokens=2773,
        image_tokens=2691,
        completion_tokens=64,
        train_vision=True,
    )
    return RunShape(**{**base, **kw})


@pytest.mark.parametrize("every", [1, 2, 3, 28, 100])
def test_estimator_activation_term_follows_the_policy(every):
    model = QWEN2_5_VL_SHAPES["Qwen2.5-VL-7B"]
    a, h, L = 2, model.hidden, model.layers
    est = estimate(model, _run(checkpoint_every=every), CAL)
    saved, working, _, T, _ = _activations(model, _run(checkpoint_every=every), True)
    saved_full, working_full, _, _, _ = _activations(model, _run(), True)
    n_c = math.ceil(L / every)
    assert est.counts["decoder_layers_checkpointed"] == n_c
    # each decoder layer left out keeps LAYER bytes per token instead of its input (a*h)
    assert saved - saved_full == (L - n_c) * T * (layer_activation_bytes(model, a) - a * h)
    assert working == working_full  # one layer's recompute is the same
    # time: one extra forward per checkpointed layer, forward = 1/3 of forward + backward
    assert est.counts["recompute_decoder_flops_fraction"] == pytest.approx(n_c / (3 * L))


def test_estimator_vision_recompute_and_off_agree():
    model = QWEN2_5_VL_SHAPES["Qwen2.5-VL-7B"]
    a, hv, depth = 2, model.vision_hidden, model.vision_depth
    on, off = _run(), _run(checkpoint_vision=False)
    saved_on, _, _, _, patches = _activations(model, on, True)
    saved_off, _, _, _, _ = _activations(model, off, True)
    vlayer = 12 * hv + a * (7 * hv + 4 * model.vision_intermediate)
    assert saved_off - saved_on == patches * (depth * vlayer - a * hv * (depth + 1))
    assert estimate(model, off, CAL).counts["recompute_vision"] is False
    assert estimate(model, on, CAL).counts["recompute_vision"] is True
    # a frozen tower that runs without autograd keeps nothing either way
    frozen = [
        _activations(model, _run(train_vision=False, frozen_vision_backward=False, checkpoint_vision=v), True)[0]
        for v in (True, False)
    ]
    assert frozen[0] == frozen[1]
    # every layer left out equals checkpointing off, but for layer 0 (the one checkpointed layer)
    none = _activations(model, _run(checkpoint_every=10**6, checkpoint_vision=False), True)
    no_ckpt = _activations(model, _run(gradient_checkpointing=False), True)
    assert no_ckpt[0] - none[0] == none[3] * (layer_activation_bytes(model, a) - a * model.hidden)
