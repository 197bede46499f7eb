"""Qwen3-VL (``model_type`` ``qwen3_vl``) in the VLM core: tiny checkpoint, module, processor, generation, training.

One tiny random Qwen3-VL checkpoint is built through the CLI (``python -m gui_grounding.cli make-tiny-model --arch
qwen3_vl``) once for the module: text hidden 64, 2 layers, head_dim 16, interleaved M-RoPE sections [4, 2, 2]; vision
depth 2, patch 16, merge 2, DeepStack on both vision layers; pixel budget 3,136 .. 200,704. Frames: smart_resize
factor 32 (16 * 2), so a 1280x720 screenshot is seen at 576x320 (18 x 10 = 180 image tokens) under max_pixels 200,704
and at 288x160 (9 x 5 = 45 tokens, 180 patches of 16 px) under 50,176.

Shared-prompt exactness is checked as for Qwen2.5-VL (``tests/test_shared_prompt.py``, whose batch builders are reused):
TRL 1.16's own ``GRPOTrainer._get_per_token_logps_and_entropies`` on the naive batch vs
``vlm_r1.shared_prompt.per_token_logps_and_entropies`` with ``Qwen3VLModule.shared_prompt_positions_fn``; log-probs /
entropies within 1e-5, gradients within 1e-5 relative (measured with SDPA, eager and split attention: 4.8e-7 and
<= 8.5e-7), and HF ``generate`` after ``shared_prompt_prefill`` token-identical to naive generation (logits 2.1e-7).
"""

from __future__ import annotations

import json
import os

import pytest
import torch
from PIL import Image

from groundwork.geometry import smart_resize
from tests.helpers.paths import SAMPLE
from tests.helpers.proc import child_env, run_module
from tests.helpers.train import step_logs, tiny_sft_argv, tiny_train_argv
from vlm_r1.modules import get_vlm_module, load_model, load_processor
from vlm_r1.modules.qwen3_vl import Qwen3VLModule, interleaved_mrope_section

SCREENSHOT = "images/installing-index__1280x720.png"
VISION_TOKENS = ["<|image_pad|>", "<|video_pad|>", "<|vision_start|>", "<|vision_end|>"]
ENV = child_env(threads=2)


@pytest.fixture(scope="module")
def q3_dir(tmp_path_factory) -> str:
    """The tiny Qwen3-VL checkpoint, written by the CLI (seed 0, defaults: size tiny, 3,136 .. 200,704 pixels)."""
    out = str(tmp_path_factory.mktemp("tiny_qwen3_vl") / "ckpt")
    run_module(
        ["gui_grounding.cli", "make-tiny-model", "--arch", "qwen3_vl", "--out", out, "--seed", "0"],
        env=ENV,
        timeout=300,
    )
    return out


@pytest.fixture(scope="module")
def module(q3_dir):
    return get_vlm_module(q3_dir)


@pytest.fixture(scope="module")
def processor(q3_dir):
    return load_processor(q3_dir)


@pytest.fixture(scope="module")
def rec_file(tmp_path_factory) -> str:
    """4 REC records (conversations form) on one committed 1280x720 screenshot; boxes in original pixels."""
    path = tmp_path_factory.mktemp("rec") / "rec.jsonl"
    lines = []
    with open(os.path.join(SAMPLE, "test.jsonl"), encoding="utf-8") as f:
        for i, line in enumerate(f):
            rec = json.loads(line)
            if rec["image_path"] != SCREENSHOT:
                continue
            b = rec["target_bbox"]
            lines.append(
                json.dumps(
                    {
                        "id": f"r{i}",
                        "image": SCREENSHOT,
                        "conversations": [
                            {"from": "human", "value": "<image>" + rec["instruction"]},
                            {"from": "gpt", "value": [b["x_min"], b["y_min"], b["x_max"], b["y_max"]]},
                        ],
                    }
                )
            )
            if len(lines) == 4:
                break
    path.write_text("\n".join(lines) + "\n")
    return str(path)


# --------------------------------------------------------------------------------------------------------------------
# checkpoint, registry, processor


def test_cli_checkpoint_reloads_with_the_real_architecture(q3_dir):
    from transformers import AutoConfig, AutoModelForImageTextToText, Qwen3VLForConditionalGeneration

    assert sorted(os.listdir(q3_dir)) == [
        "chat_template.jinja",
        "config.json",
        "generation_config.json",
        "model.safetensors",
        "processor_config.json",
        "tiny_model_info.json",
        "tokenizer.json",
        "tokenizer_config.json",
    ]
    cfg = AutoConfig.from_pretrained(q3_dir)
    assert cfg.model_type == "qwen3_vl" and cfg.architectures == ["Qwen3VLForConditionalGeneration"]
    text, vision = cfg.text_config, cfg.vision_config
    assert (
        text.hidden_size,
        text.num_hidden_layers,
        text.num_attention_heads,
        text.num_key_value_heads,
        text.head_dim,
    ) == (64, 2, 4, 2, 16)
    assert text.rope_parameters["mrope_section"] == [4, 2, 2] and text.rope_parameters["mrope_interleaved"] is True
    assert (vision.patch_size, vision.spatial_merge_size, vision.temporal_patch_size, vision.depth) == (16, 2, 2, 2)
    assert list(vision.deepstack_visual_indexes) == [0, 1] and vision.out_hidden_size == 64
    model = AutoModelForImageTextToText.from_pretrained(q3_dir)
    assert type(model) is Qwen3VLForConditionalGeneration
    info = json.load(open(os.path.join(q3_dir, "tiny_model_info.json")))
    assert info["arch"] == "qwen3_vl" and info["seed"] == 0 and info["size"] == "tiny"
    assert info["num_parameters"] == sum(p.numel() for p in model.parameters())
    # the image-only processor saved itself under the stock class name (loadable by AutoProcessor elsewhere)
    assert json.load(open(os.path.join(q3_dir, "processor_config.json")))["processor_class"] == "Qwen3VLProcessor"
    assert json.load(open(os.path.join(q3_dir, "tokenizer_config.json")))["processor_class"] == "Qwen3VLProcessor"


def test_same_seed_same_weights(q3_dir, tmp_path):
    from safetensors.torch import load_file

    Qwen3VLModule().build_tiny_checkpoint(str(tmp_path / "again"), seed=0)
    a = load_file(os.path.join(q3_dir, "model.safetensors"))
    b = load_file(str(tmp_path / "again" / "model.safetensors"))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_registry_and_module(q3_dir, module):
    from vlm_r1.tiny import supported_archs

    assert type(module) is Qwen3VLModule and module.model_type == "qwen3_vl"
    assert type(get_vlm_module("qwen3_vl")) is Qwen3VLModule
    assert "qwen3_vl" in supported_archs()
    assert module.get_model_class(q3_dir, {}).__name__ == "Qwen3VLForConditionalGeneration"
    assert module.get_processing_class().__name__ == "Qwen3VLProcessor"
    assert type(load_model(q3_dir)).__name__ == "Qwen3VLForConditionalGeneration"
    with pytest.raises(ValueError, match="does not serve model_type 'qwen2_5_vl'"):
        Qwen3VLModule("qwen2_5_vl")
    assert interleaved_mrope_section(128) == [24, 20, 20]  # the released models' split (head_dim 128)


def test_resize_params_come_from_the_processor(q3_dir, module, processor):
    ip = processor.image_processor
    factor, min_px, max_px = module.get_image_resize_params(processor)
    assert factor == ip.patch_size * ip.merge_size == 32
    assert (min_px, max_px) == (3136, 200_704)
    p2 = load_processor(q3_dir, min_pixels=4096, max_pixels=50_176)
    assert module.get_image_resize_params(p2) == (32, 4096, 50_176)
    assert p2.image_processor.size == {"shortest_edge": 4096, "longest_edge": 50_176}
    assert processor.tokenizer.padding_side == "left"


def test_banned_tokens_are_the_vision_specials(module, processor):
    ids = processor.tokenizer.convert_tokens_to_ids(VISION_TOKENS)
    assert module.get_banned_token_ids(processor) == ids and len(set(ids)) == 4


@pytest.mark.parametrize(
    ("width", "height", "resized", "tokens"),
    [
        (1280, 720, (576, 320), 180),
        (1024, 768, (512, 384), 192),
        (200, 120, (192, 128), 24),
        (10, 10, (64, 64), 4),
    ],
)
def test_image_tokens_follow_smart_resize_factor_32(width, height, resized, tokens, module, processor):
    factor, min_px, max_px = module.get_image_resize_params(processor)
    rh, rw = smart_resize(height, width, factor=factor, min_pixels=min_px, max_pixels=max_px)
    assert (rw, rh) == resized and (rh // 32) * (rw // 32) == tokens
    messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "Click the search box."}]}]
    text = module.prepare_prompt(processor, [{"prompt": messages}])[0]
    assert text.endswith("<|vision_end|>Click the search box.<|im_end|>\n<|im_start|>assistant\n")
    batch, extra = module.prepare_model_inputs(processor, [text], [Image.new("RGB", (width, height), (9, 99, 199))])
    assert batch["image_grid_thw"].tolist() == [[1, rh // 16, rw // 16]]
    assert [e["image_grid_thw"].tolist() for e in extra] == [[1, rh // 16, rw // 16]]
    ids = batch["input_ids"][0]
    image_pad = processor.tokenizer.convert_tokens_to_ids("<|image_pad|>")
    assert int((ids == image_pad).sum()) == tokens
    assert int((batch["mm_token_type_ids"][0] == 1).sum()) == tokens  # M-RoPE needs these (Qwen3VLProcessor)
    assert batch["pixel_values"].shape == (tokens * 4, 3 * 2 * 16 * 16)  # 4 patches per token, 3ch x 2t x 16 x 16


def test_generate_runs_greedy_and_bans_vision_tokens(q3_dir, module, processor):
    from transformers import Qwen3VLForConditionalGeneration

    model = Qwen3VLForConditionalGeneration.from_pretrained(q3_dir, dtype=torch.float32).eval()
    messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "Open the menu."}]}]
    text = module.prepare_prompt(processor, [{"prompt": messages}])[0]
    batch, _ = module.prepare_model_inputs(processor, [text], [Image.open(os.path.join(SAMPLE, SCREENSHOT))])
    banned = module.get_banned_token_ids(processor)
    gen = dict(
        max_new_tokens=8,
        min_new_tokens=8,
        do_sample=False,
        bad_words_ids=[[t] for t in banned],
        pad_token_id=processor.tokenizer.pad_token_id,
    )
    with torch.no_grad():
        out1 = model.generate(**batch, **gen)
        out2 = model.generate(**batch, **gen)
    P = batch["input_ids"].size(1)
    assert out1.shape == (1, P + 8) and torch.equal(out1[:, :P], batch["input_ids"])
    assert torch.equal(out1, out2)  # greedy: deterministic
    assert not set(out1[0, P:].tolist()) & set(banned)


# --------------------------------------------------------------------------------------------------------------------
# shared-prompt hooks: exact vs TRL and vs naive generation


def _shared_split(model, batch, positions_fn):
    """The shared path with split attention (no dense mask; ``vlm_r1.shared_prompt_attention``): (logps, entropies)."""
    from vlm_r1 import shared_prompt as sp

    G = batch["G"]
    pixel_values = sp.dedup_pixel_values(batch["pixel_values"], batch["image_grid_thw"], batch["num_images"], G)
    return sp.per_token_logps_and_entropies(
        model,
        batch["input_ids"],
        batch["attention_mask"],
        batch["logits_to_keep"],
        num_generations=G,
        positions_fn=positions_fn,
        compute_entropy=True,
        pixel_values=pixel_values,
        image_grid_thw=batch["image_grid_thw"],
        num_images=batch["num_images"],
        mm_token_type_ids=batch["mm_token_type_ids"],
        attention="split",
    )


@pytest.mark.parametrize("attn", ["sdpa", "eager", "split"])
def test_shared_prompt_matches_trl(attn, q3_dir, module, processor):
    """Dense 4D mask over SDPA / eager, and split attention (text attention switched, vision tower on SDPA)."""
    import test_shared_prompt as tsp
    from transformers import Qwen3VLForConditionalGeneration
    from trl.trainer.utils import add_fused_lm_head

    from vlm_r1.shared_prompt_attention import enable_split_attention

    base = "sdpa" if attn == "split" else attn
    model = Qwen3VLForConditionalGeneration.from_pretrained(q3_dir, attn_implementation=base, dtype=torch.float32)
    add_fused_lm_head(model, outputs=("log_probs", "entropy"))
    model.train()
    if attn == "split":
        assert enable_split_attention(model, backend="reference") == "sdpa"
        assert model.config.vision_config._attn_implementation == "sdpa"
    texts, images = tsp.build_prompts(processor)  # 200x120 and 160x300 images: prompts of 73 and 112 tokens
    batch = tsp.naive_batch(processor, texts, images, 4)
    assert batch["image_grid_thw"][::4].tolist() == [[1, 8, 12], [1, 18, 10]]
    positions_fn = module.shared_prompt_positions_fn(model)

    def shared(fn=positions_fn):
        if attn == "split":
            return _shared_split(model, batch, fn)
        return tsp.shared_logps(model, batch, fn, attn=attn)

    ref_lp, ref_en, ref_grads = tsp.run_backward(model, lambda: (*tsp.trl_logps(model, batch), batch))
    got_lp, got_en, got_grads = tsp.run_backward(model, lambda: (*shared(), batch))
    mask = batch["completion_mask"].bool()
    assert (ref_lp[mask] < 0).all() and (got_lp[~mask] == 0).all()
    assert (got_lp - ref_lp).abs().max().item() <= tsp.LOGP_ATOL
    assert (got_en - ref_en).abs().max().item() <= tsp.LOGP_ATOL
    assert got_grads.keys() == ref_grads.keys() and len(ref_grads) == sum(1 for _ in model.parameters())
    assert any(k.startswith("model.visual.deepstack_merger_list.") for k in ref_grads)  # DeepStack is on the path
    worst, name = tsp.max_rel_grad_error(ref_grads, got_grads)
    assert worst <= tsp.GRAD_RTOL, f"grad of {name}: relative error {worst:.3e}"
    # control: plain 1-D positions for the prompt (no M-RoPE image grid) are far off, so the check above has teeth
    with torch.no_grad():
        wrong, _ = shared(lambda ids, mm, grid: torch.arange(ids.numel())[None].expand(3, -1))
    assert (wrong - ref_lp).abs().max().item() > 1e-3


def test_shared_prompt_generation_is_token_identical(q3_dir, module, processor):
    from test_shared_prompt import LOGP_ATOL, _gen_kwargs, _generate, _generate_shared, build_prompts
    from transformers import Qwen3VLForConditionalGeneration

    model = Qwen3VLForConditionalGeneration.from_pretrained(q3_dir, dtype=torch.float32).eval()
    texts, images = build_prompts(processor, seed=3)
    G = 4
    naive = processor(
        text=[t for t in texts for _ in range(G)],
        images=[im for im in images for _ in range(G)],
        padding=True,
        padding_side="left",
        return_tensors="pt",
    )
    unique = processor(text=texts, images=images, padding=True, padding_side="left", return_tensors="pt")
    assert unique["attention_mask"].sum(1).tolist() == [73, 112]  # different lengths: left padding in play
    P = naive["input_ids"].size(1)
    for seed, extra in ((0, dict(do_sample=False, min_new_tokens=8)), (1, dict(do_sample=True, top_k=50))):
        gen = _gen_kwargs(processor, max_new_tokens=8, **extra)
        ref = _generate(model, naive, seed, **gen)
        got = _generate_shared(module, model, unique, G, seed, **gen)
        assert torch.equal(got.sequences, ref.sequences), (ref.sequences[:, P:], got.sequences[:, P:])
        err = max((a - b).abs().max().item() for a, b in zip(ref.logits, got.logits, strict=True))
        assert err <= LOGP_ATOL, f"max |logit diff| {err:.3e}"
    assert len({tuple(r) for r in ref.sequences[:G, P:].tolist()}) > 1  # sampling diversified the rollouts


# --------------------------------------------------------------------------------------------------------------------
# end to end: GRPO (--task_type rec, shared prompt on) and SFT, each saved and reloaded


def _reloads(out: str) -> None:
    assert type(get_vlm_module(out)) is Qwen3VLModule
    assert type(load_model(out)).__name__ == "Qwen3VLForConditionalGeneration"
    p = load_processor(out)
    assert Qwen3VLModule().get_image_resize_params(p)[0] == 32
    assert json.load(open(os.path.join(out, "processor_config.json")))["processor_class"] == "Qwen3VLProcessor"


@pytest.mark.slow  # a CLI subprocess run (~9 s); the default suite keeps the in-process checks
def test_grpo_rec_three_steps_shared_prompt(q3_dir, rec_file, tmp_path):
    out = str(tmp_path / "grpo")
    rec = dict(task_type="rec", reward_funcs=("accuracy", "format"), max_steps=3, per_device_train_batch_size=4)
    own = dict(num_generations=4, max_completion_length=6, max_pixels=50176, freeze_vision_modules=None)
    argv = tiny_train_argv(q3_dir, rec_file, out, **rec, **own, shared_prompt=True)
    proc = run_module(["vlm_r1.grpo_jsonl", *argv], env=ENV, timeout=600)
    assert "module=Qwen3VLModule pixel budget:" in proc.stderr  # printed with every value's source
    assert "  max_pixels       50,176   <- flag --max_pixels" in proc.stderr
    assert "shared-prompt GRPO: on (groups of 4" in proc.stderr
    # the vision tower's packed attention says at start-up which backend runs, and the first call what it ran
    assert "vision attention (qwen3_vl): packed" in proc.stderr and "on cpu float32: runs" in proc.stderr
    assert "vision attention: runs on cpu float32: 1 window/image segment in 1 call" in proc.stderr
    info = json.load(open(os.path.join(out, "vlm_r1_run.json")))
    assert info["model_type"] == "qwen3_vl" and info["num_train_rows"] == 4
    assert info["smart_resize"] == {"factor": 32, "min_pixels": 3136, "max_pixels": 50176}
    logs = step_logs(out)
    assert [h["step"] for h in logs] == [1, 2, 3]
    # 1280x720 at max_pixels 50176 -> 160x288 -> 10 x 18 = 180 patches of 16 px; one group of 4 per step, one copy
    rh, rw = smart_resize(720, 1280, factor=32, min_pixels=3136, max_pixels=50176)
    assert (rh, rw) == (160, 288)
    for h in logs:
        assert h["shared_prompt/vision_patches"] == (rh // 16) * (rw // 16) == 180
        assert h["shared_prompt/naive_vision_patches"] == 4 * 180
        assert h["shared_prompt/llm_tokens"] < h["shared_prompt/naive_llm_tokens"]
        assert 0.0 <= h["rewards/iou_reward/mean"] <= 1.0
    _reloads(out)


@pytest.mark.slow  # a CLI subprocess run (~9 s); the default suite keeps the in-process checks
def test_sft_three_steps(q3_dir, rec_file, tmp_path):
    from safetensors.torch import load_file

    out = str(tmp_path / "sft")
    argv = tiny_sft_argv(q3_dir, rec_file, out, image_folders=SAMPLE, learning_rate="3e-3", max_pixels=50176)
    run_module(["vlm_r1.sft", *argv], env=ENV, timeout=300)
    logs = step_logs(out)
    assert [h["step"] for h in logs] == [1, 2, 3] and all(h["loss"] > 0 for h in logs)
    before = load_file(os.path.join(q3_dir, "model.safetensors"))
    after = load_file(os.path.join(out, "model.safetensors"))
    assert before.keys() == after.keys()
    assert not torch.equal(before["lm_head.weight"], after["lm_head.weight"])  # it trained
    _reloads(out)
