"""``--use_peft true`` without ``--lora_target_modules``: upstream VLM-R1's default LoRA targets (every ``nn.Linear``
outside the vision tower, ``embed_tokens`` excluded), computed in ``VLMGRPOTrainer.__init__``, minus ``lm_head``
(upstream included it; TRL 1.16 refuses an adapter there and this test shows why the default must leave it out); an
explicit ``--lora_target_modules`` is honoured. Tiny Qwen2.5-VL, one training step."""

from __future__ import annotations

import json

import pytest
import torch


def _upstream_targets(model) -> list[str]:
    """Upstream's rule, computed here independently of the trainer: Qwen-VL's vision tower is ``model.visual``."""
    names = []
    for name, module in model.named_modules():
        if type(module) is torch.nn.Linear and ".visual." not in f".{name}." and not name.endswith("embed_tokens"):
            names.append(name)
    return sorted(names)


def _expected_targets(model) -> list[str]:
    return [n for n in _upstream_targets(model) if n != "lm_head"]


def _lora_modules(peft_model) -> set[str]:
    prefix = "base_model.model."
    return {
        name.removeprefix(prefix)
        for name, module in peft_model.named_modules()
        if hasattr(module, "lora_A") and len(module.lora_A) > 0
    }


@pytest.fixture
def tiny_setup(tiny_qwen25_dir, tmp_path, make_image):
    from vlm_r1.modules import get_vlm_module

    module = get_vlm_module(tiny_qwen25_dir)
    processor = module.load_processor(tiny_qwen25_dir, max_pixels=50176)
    model = module.get_model_class(tiny_qwen25_dir, {}).from_pretrained(tiny_qwen25_dir)
    return module, processor, model


def test_default_targets_are_the_language_model_linears(tiny_setup, tiny_qwen25_dir):
    from peft import LoraConfig

    from vlm_r1.trainer import default_lora_target_modules, resolve_lora_targets

    module, _, model = tiny_setup
    expected = _expected_targets(model)
    assert _upstream_targets(model) == sorted(expected + ["lm_head"])  # the one difference from upstream
    assert len(expected) == 14 and "model.language_model.layers.0.self_attn.q_proj" in expected  # 2 layers x 7
    assert default_lora_target_modules(model, module.get_vision_modules_keywords()) == expected
    user = LoraConfig(r=4, task_type="CAUSAL_LM")
    filled = resolve_lora_targets(user, model, module)
    assert filled.target_modules == expected and user.target_modules is None  # the caller's config is not changed
    # a checkpoint path (TRL loads the model): the names come from a weight-less meta-device build, identical
    assert resolve_lora_targets(user, tiny_qwen25_dir, module).target_modules == expected


def test_explicit_targets_are_honoured_vision_only_when_asked(tiny_setup):
    from peft import LoraConfig, get_peft_model

    from vlm_r1.trainer import resolve_lora_targets

    module, _, model = tiny_setup
    asked = LoraConfig(r=4, task_type="CAUSAL_LM", target_modules=["q_proj", "qkv"])  # qkv: Qwen2.5-VL vision attn
    assert resolve_lora_targets(asked, model, module) is asked  # upstream overwrote it; here it is used as given
    lora = _lora_modules(get_peft_model(model, asked))
    assert any("visual" in n for n in lora) and all(n.endswith(("q_proj", "qkv")) for n in lora)


def test_trl_rejects_an_adapter_on_lm_head(tiny_setup, tmp_path):
    """Why the default leaves out ``lm_head`` (upstream kept it): TRL computes log-probs from ``lm_head.weight``."""
    from peft import LoraConfig

    from vlm_r1.configs import VLMGRPOConfig
    from vlm_r1.trainer import VLMGRPOTrainer

    module, processor, model = tiny_setup
    args = VLMGRPOConfig(
        output_dir=str(tmp_path), report_to="none", bf16=False, per_device_train_batch_size=2, num_generations=2
    )
    with pytest.raises(ValueError, match="PEFT adapter to `lm_head` is not supported"):
        VLMGRPOTrainer(
            model=model,
            reward_funcs=[lambda completions, **kw: [0.0] * len(completions)],
            args=args,
            vlm_module=module,
            processing_class=processor,
            peft_config=LoraConfig(r=4, task_type="CAUSAL_LM", target_modules=_upstream_targets(model)),
        )


def test_use_peft_without_targets_trains_one_step(tiny_setup, tmp_path, make_image, caplog):
    import logging

    from trl import get_peft_config

    from vlm_r1.configs import GRPOModelConfig, GRPOScriptArguments, VLMGRPOConfig
    from vlm_r1.tasks import get_task
    from vlm_r1.trainer import VLMGRPOTrainer

    module, processor, model = tiny_setup
    expected = _expected_targets(model)
    make_image(84, 84, "a.png", folder=tmp_path / "img")
    data = tmp_path / "d.jsonl"
    turns = [{"from": "human", "value": "<image>Colour?"}, {"from": "gpt", "value": "red"}]
    data.write_text(json.dumps({"image": "a.png", "conversations": turns}) + "\n")
    dataset = get_task("default").build_dataset(
        GRPOScriptArguments(data_file_paths=str(data), image_folders=str(tmp_path / "img")), processor, module
    )

    def length_reward(completions, **kwargs):  # varies per rollout, so advantages (and LoRA gradients) are non-zero
        return [float(len(c[0]["content"])) for c in completions]

    peft_config = get_peft_config(GRPOModelConfig(use_peft=True, lora_r=4, lora_alpha=8))  # the CLI's path
    assert peft_config.target_modules is None  # PEFT alone would stop: "Please specify `target_modules`"
    args = VLMGRPOConfig(
        output_dir=str(tmp_path / "out"),
        report_to="none",
        bf16=False,
        max_steps=1,
        logging_steps=1,
        save_strategy="no",
        seed=0,
        per_device_train_batch_size=4,
        num_generations=4,
        max_completion_length=8,
        learning_rate=1e-2,
        beta=0.0,
    )
    with caplog.at_level(logging.INFO, logger="vlm_r1.trainer"):
        trainer = VLMGRPOTrainer(
            model=model,
            reward_funcs=[length_reward],
            args=args,
            vlm_module=module,
            processing_class=processor,
            train_dataset=dataset,
            peft_config=peft_config,
        )
    assert f"{len(expected)} modules, e.g." in caplog.text

    lora = _lora_modules(trainer.model)
    assert sorted(lora) == expected
    assert not any("visual" in n for n, p in trainer.model.named_parameters() if "lora_" in n)
    assert all("lora_" in n for n, p in trainer.model.named_parameters() if p.requires_grad)
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters() if "lora_B" in n}

    trainer.train()
    assert trainer.state.global_step == 1
    changed = [n for n, p in trainer.model.named_parameters() if n in before and not torch.equal(p, before[n])]
    assert changed, "no LoRA weight moved in one step"
    assert not any("visual" in n for n in changed)
