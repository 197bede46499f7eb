"""InternVL (transformers-native ``InternVLForConditionalGeneration``, model_type ``internvl``) on the VLM core:
tiny checkpoint, module, dynamic tiling, generation, GRPO and SFT (``vlm_r1.modules.internvl``)."""

from __future__ import annotations

import json
import os

import pytest

from tests.helpers.paths import REPO
from tests.helpers.proc import child_env, run_module
from tests.helpers.train import step_logs, tiny_sft_argv, tiny_train_argv

SAMPLE_IMAGES = os.path.join(REPO, "data", "web_sample", "images")
ENV = child_env(threads=1)


@pytest.fixture(scope="module")
def tiny_internvl(tmp_path_factory) -> str:
    """A tiny InternVL checkpoint built once through the CLI."""
    out = str(tmp_path_factory.mktemp("internvl") / "tiny")
    run_module(["gui_grounding.cli", "make-tiny-model", "--arch", "internvl", "--out", out], env=ENV)
    return out


@pytest.fixture(scope="module")
def rec_data(tmp_path_factory) -> str:
    """Four grpo_jsonl REC records (boxes in original pixels) on a 224x112 image (2x1 grid: 3 tiles) and a 112x112
    image (1 tile)."""
    from PIL import Image

    d = tmp_path_factory.mktemp("internvl_data")
    Image.new("RGB", (224, 112), (30, 120, 200)).save(d / "wide.png")
    Image.new("RGB", (112, 112), (200, 30, 20)).save(d / "square.png")
    lines = [
        json.dumps(
            {
                "id": i,
                "image": im,
                "conversations": [{"from": "human", "value": "<image>the box"}, {"from": "gpt", "value": box}],
            }
        )
        for i, (im, box) in enumerate([("wide.png", [10, 20, 60, 80]), ("square.png", [5, 5, 50, 50])] * 2)
    ]
    (d / "rec.jsonl").write_text("\n".join(lines) + "\n")
    return str(d / "rec.jsonl")


def _prompt(text: str = "Click the search box.") -> list[dict]:
    return [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": text}]}]


# --------------------------------------------------------------------------------------------------------------------
# checkpoint, registry, processor


def test_tiny_checkpoint_reloads(tiny_internvl):
    from transformers import AutoConfig, InternVLForConditionalGeneration, InternVLProcessor

    from vlm_r1.modules import get_vlm_module, load_model, load_processor
    from vlm_r1.modules.internvl import InternVLModule

    files = set(os.listdir(tiny_internvl))
    assert {
        "model.safetensors",
        "config.json",
        "processor_config.json",
        "chat_template.jinja",
        "tokenizer.json",
        "tiny_model_info.json",
    } <= files
    info = json.load(open(os.path.join(tiny_internvl, "tiny_model_info.json")))
    assert (info["arch"], info["tile_size"], info["patch_size"], info["image_seq_length"]) == ("internvl", 448, 14, 256)
    config = AutoConfig.from_pretrained(tiny_internvl)
    assert config.model_type == "internvl" and config.text_config.model_type == "qwen2"
    assert tuple(config.vision_config.image_size) == (448, 448) and config.downsample_ratio == 0.5
    assert config.image_seq_length == 256
    # stock class name on disk, so AutoProcessor loads it where torchvision exists
    assert (
        json.load(open(os.path.join(tiny_internvl, "processor_config.json")))["processor_class"] == "InternVLProcessor"
    )

    module = get_vlm_module(tiny_internvl)
    assert isinstance(module, InternVLModule) and module.model_type == "internvl"
    assert module.get_vlm_key() == "internvl"
    assert module.get_model_class(tiny_internvl, {}) is InternVLForConditionalGeneration
    assert module.get_processing_class() is InternVLProcessor
    processor = load_processor(tiny_internvl)
    assert isinstance(processor, InternVLProcessor) and processor.tokenizer.padding_side == "left"
    assert processor.image_seq_length == 256 and processor.image_processor.max_patches == 12
    assert processor.image_token_id == config.image_token_id
    model = load_model(tiny_internvl)
    assert isinstance(model, InternVLForConditionalGeneration)
    names = [n for n, _ in model.named_parameters()]
    vision = [n for n in names if any(k in n for k in module.get_vision_modules_keywords())]
    assert vision and all(n.startswith(("model.vision_tower.", "model.multi_modal_projector.")) for n in vision)
    assert not any(n.startswith("model.language_model.") for n in vision)


def test_module_contract(tiny_internvl):
    from vlm_r1.modules import load_processor
    from vlm_r1.modules.internvl import InternVLModule, format_reward_rec_internvl, has_internvl_rec_format
    from vlm_r1.tiny import supported_archs

    module, processor = InternVLModule(), load_processor(tiny_internvl)
    tok = processor.tokenizer
    assert "internvl" in supported_archs()
    assert module.get_banned_token_ids(processor) == [
        tok.convert_tokens_to_ids(t) for t in ("<IMG_CONTEXT>", "<img>", "</img>", "<video>")
    ]
    assert len(set(module.get_banned_token_ids(processor))) == 4
    with pytest.raises(ValueError, match="no smart_resize frame: images are tiled at 448x448.*0-1000 grid"):
        module.get_image_resize_params(processor)
    assert module.answer_frame_size(None, 1280, 720) == (1000, 1000)
    assert module.get_custom_processing_keywords() == [("image_processor", "max_patches")]
    assert module.get_custom_multimodal_keywords() == ["pixel_values"] and module.get_non_generate_params() == []
    assert module.get_eos_token_id(processor) == tok.convert_tokens_to_ids("<|im_end|>")
    assert module.get_question_template("rec").startswith("{Question} First output the thinking process")
    assert has_internvl_rec_format("<think>a</think>\n<answer>box [1, 2, 30, 40] here</answer>")
    assert not has_internvl_rec_format('<think>a</think><answer>{"bbox_2d": [1.5, 2, 3, 4]}</answer>')
    assert not has_internvl_rec_format("<answer>[1, 2, 3, 4]</answer>")
    assert module.select_reward_func("format", "rec") is format_reward_rec_internvl
    assert format_reward_rec_internvl(["<think>x</think><answer>[1, 2, 3, 4]</answer>", "[1, 2, 3, 4]"]) == [1.0, 0.0]
    with pytest.raises(ValueError, match="no InternVL-specific reward"):
        module.select_reward_func("format", "vqa")
    with pytest.raises(ValueError, match="max_tiles must be >= 1"):
        module.set_max_tiles(processor, 0)


# (image, max tiles) -> tiles: get_optimal_tiled_canvas picks the cols x rows grid (cols*rows <= max) closest in aspect
# ratio, ties going to the larger grid while W*H > half its pixel area; a grid of more than one tile adds a thumbnail.
#   1280x720 (16:9): max 12 -> 4x2 (ties 2x1 on ratio 2, 921600 > 0.5*448^2*8) + thumb = 9; max 6 -> 2x1 + thumb = 3
#   1024x768 (4:3): max 12 -> 4x3 + thumb = 13; max 6 -> 3x2 (ratio 1.5) + thumb = 7; max 1 -> no tiling = 1
TILING = [
    ("about__1280x720.png", 12, 9),
    ("about__1280x720.png", 6, 3),
    ("about__1280x720.png", 1, 1),
    ("about__1024x768.png", 12, 13),
    ("about__1024x768.png", 6, 7),
]


@pytest.mark.parametrize("name, max_tiles, tiles", TILING)
def test_tiling_and_image_tokens(tiny_internvl, name, max_tiles, tiles):
    from PIL import Image

    from vlm_r1.modules import get_vlm_module

    module = get_vlm_module(tiny_internvl)
    processor = module.load_processor(tiny_internvl, max_tiles=max_tiles)
    assert processor.image_processor.max_patches == max_tiles
    image = Image.open(os.path.join(SAMPLE_IMAGES, name)).convert("RGB")
    assert module.num_tiles(processor, *image.size) == tiles
    text = module.prepare_prompt(processor, [{"prompt": _prompt()}])
    assert text[0].count("<IMG_CONTEXT>") == 1  # the chat template's placeholder, expanded by the processor
    batch, extra = module.prepare_model_inputs(processor, text, [image])
    assert extra == [{"num_tiles": tiles}]
    assert tuple(batch["pixel_values"].shape) == (tiles, 3, 448, 448)
    ids = batch["input_ids"][0].tolist()
    assert ids.count(processor.image_token_id) == 256 * tiles
    assert ids.count(processor.start_image_token_id) == ids.count(processor.end_image_token_id) == 1
    if tiles > 1:  # the last tile is the thumbnail: the whole image resized to 448x448, as with tiling off
        module.set_max_tiles(processor, 1)
        single, _ = module.prepare_model_inputs(processor, text, [image])
        assert single["pixel_values"].shape[0] == 1
        assert (batch["pixel_values"][-1] - single["pixel_values"][0]).abs().max().item() == 0.0


def test_generate_batch_of_tiled_images(tiny_internvl):
    import torch
    from PIL import Image

    from vlm_r1.modules import get_vlm_module, load_model

    module = get_vlm_module(tiny_internvl)
    processor = module.load_processor(tiny_internvl, max_tiles=6)
    images = [
        Image.open(os.path.join(SAMPLE_IMAGES, "about__1280x720.png")).convert("RGB"),
        Image.new("RGB", (112, 112), (0, 0, 255)),
    ]
    text = module.prepare_prompt(processor, [{"prompt": _prompt("a")}, {"prompt": _prompt("Open the menu now")}])
    batch, _ = module.prepare_model_inputs(processor, text, images)
    assert batch["pixel_values"].shape[0] == 3 + 1
    model = load_model(tiny_internvl).eval()
    banned = module.get_banned_token_ids(processor)
    torch.manual_seed(0)
    out = model.generate(**batch, max_new_tokens=6, do_sample=False, bad_words_ids=[[t] for t in banned])
    prompt_len = batch["input_ids"].shape[1]
    assert out.shape[0] == 2 and prompt_len < out.shape[1] <= prompt_len + 6  # HF generate: prompt + completion
    assert torch.equal(out[:, :prompt_len], batch["input_ids"])
    assert not set(out[:, prompt_len:].flatten().tolist()) & set(banned)


# --------------------------------------------------------------------------------------------------------------------
# training


def _length_reward(completions, **kwargs):
    """Characters of each completion / 10: varies between rollouts of a random model, so advantages are non-zero."""
    from vlm_r1.upstream.rewards import completion_text

    return [len(completion_text(c)) / 10 for c in completions]


def test_grpo_three_steps_save_reload(tiny_internvl, rec_data, tmp_path):
    """GRPO on VLMGRPOTrainer (the trainer ``vlm_r1.grpo_jsonl`` builds), tile-indexed pixel_values of images with
    3 and 1 tiles (TRL's InternVL ``num_tiles`` split), frozen vision tower, save and reload."""
    import torch

    from vlm_r1.configs import GRPOScriptArguments, VLMGRPOConfig
    from vlm_r1.launch import save_final
    from vlm_r1.modules import get_vlm_module, load_model
    from vlm_r1.modules.internvl import format_reward_rec_internvl
    from vlm_r1.tasks import get_task
    from vlm_r1.trainer import VLMGRPOTrainer

    module = get_vlm_module(tiny_internvl)
    processor = module.load_processor(tiny_internvl, max_tiles=6)
    dataset = get_task("default").build_dataset(
        GRPOScriptArguments(data_file_paths=rec_data, task_type="default"), processor, module
    )
    out = str(tmp_path / "grpo")
    args = VLMGRPOConfig(
        output_dir=out,
        max_steps=3,
        per_device_train_batch_size=4,
        num_generations=2,
        max_completion_length=8,
        learning_rate=1e-3,
        report_to="none",
        save_strategy="no",
        logging_steps=1,
        seed=0,
        use_cpu=True,
        bf16=False,
        disable_tqdm=True,
    )
    model = load_model(tiny_internvl)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    trainer = VLMGRPOTrainer(
        model=model,
        reward_funcs=[_length_reward, format_reward_rec_internvl],
        args=args,
        vlm_module=module,
        processing_class=processor,
        freeze_vision=True,
        train_dataset=dataset,
    )
    trainer.train()
    save_final(trainer, processor, module, out, "internvl grpo test")
    history = [h for h in trainer.state.log_history if "loss" in h]
    assert [h["step"] for h in history] == [1, 2, 3]
    assert all(h["num_tokens"] > 0 for h in history) and any(h["grad_norm"] > 0 for h in history)

    reloaded = load_model(out)
    params = dict(reloaded.named_parameters())
    vision = module.get_vision_modules_keywords()
    changed = [n for n, p in params.items() if not torch.equal(p, before[n])]
    assert changed and not [n for n in changed if any(k in n for k in vision)]  # vision tower + projector frozen
    assert module.load_processor(out).image_processor.max_patches == 6  # the run's tiling bound is saved


@pytest.mark.slow  # a CLI subprocess run (~9 s); the default suite keeps the in-process checks
def test_grpo_cli_rec_three_steps(tiny_internvl, rec_data, tmp_path):
    """``python -m vlm_r1.grpo_jsonl --task_type rec`` on InternVL: no smart_resize frame is asked for (the REC frame
    is InternVL's 0-1000 grid, ``answer_frame_size``), ``--max_anyres_num`` reaches the image processor, 3 steps run
    and the model is saved; ``vlm_r1_run.json`` records no smart_resize."""
    out = str(tmp_path / "grpo_cli")
    rec = dict(task_type="rec", image_folders=None, reward_funcs=None, max_steps=3, per_device_train_batch_size=2)
    own = dict(num_generations=2, max_pixels=None, freeze_vision_modules=None, seed=None, max_anyres_num=2)
    run_module(["vlm_r1.grpo_jsonl", *tiny_train_argv(tiny_internvl, rec_data, out, **rec, **own)], env=ENV)
    history = step_logs(out)
    assert [h["step"] for h in history] == [1, 2, 3]
    info = json.load(open(os.path.join(out, "vlm_r1_run.json")))
    assert (info["model_type"], info["smart_resize"]) == ("internvl", None)
    assert os.path.exists(os.path.join(out, "model.safetensors"))
    saved = json.load(open(os.path.join(out, "processor_config.json")))
    assert saved["image_processor"]["max_patches"] == 2


@pytest.mark.slow  # a CLI subprocess run (~9 s); the default suite keeps the in-process checks
def test_sft_cli_three_steps_save_reload(tiny_internvl, rec_data, tmp_path):
    """``python -m vlm_r1.sft`` (task ``default``: target = the record's answer) on tiled images, saved and reloaded."""
    from PIL import Image

    from vlm_r1.modules import get_vlm_module, load_model

    out = str(tmp_path / "sft")
    proc = run_module(["vlm_r1.sft", *tiny_sft_argv(tiny_internvl, rec_data, out, learning_rate="1e-3")], env=ENV)
    assert "e.g. completion '<answer> [10, 20, 60, 80] </answer>'" in proc.stderr
    history = step_logs(out)
    assert [h["step"] for h in history] == [1, 2, 3]
    # each step: one 224x112 image (3 tiles = 768 image tokens + 2 markers) and one 112x112 image (256 + 2) + text
    assert history[0]["num_tokens"] > 768 + 256 + 4
    module = get_vlm_module(out)
    processor = module.load_processor(out)
    model = load_model(out).eval()
    text = module.prepare_prompt(processor, [{"prompt": _prompt()}])
    batch, _ = module.prepare_model_inputs(processor, text, [Image.new("RGB", (224, 112), (30, 120, 200))])
    assert model.generate(**batch, max_new_tokens=3, do_sample=False).shape[1] > batch["input_ids"].shape[1]


def test_pixel_budget_given_for_internvl_warns_and_tiles_are_set(tiny_internvl, caplog):
    import logging
    from types import SimpleNamespace

    from vlm_r1.grpo import load_processor_and_budget
    from vlm_r1.modules import get_vlm_module

    module = get_vlm_module(tiny_internvl)
    default = "default of vlm_r1.grpo_jsonl"
    with caplog.at_level(logging.INFO, logger="vlm_r1"):
        args = SimpleNamespace(
            min_pixels=3136,
            max_pixels=12845056,
            max_anyres_num=3,
            budget_sources={"min_pixels": default, "max_pixels": default, "max_anyres_num": "flag --max_anyres_num"},
        )
        processor, budget = load_processor_and_budget(module, tiny_internvl, args)
    assert processor.image_processor.max_patches == 3
    assert (budget.factor, budget.max_tiles, budget.sources["max_tiles"]) == (None, 3, "flag --max_anyres_num")
    assert budget.size_sent(1280, 720) == (1280, 720)  # no smart_resize frame: the processor tiles the original
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="vlm_r1"):
        args = SimpleNamespace(
            min_pixels=3136,
            max_pixels=100352,
            max_anyres_num=None,
            budget_sources={"min_pixels": default, "max_pixels": "flag --max_pixels"},
        )
        load_processor_and_budget(module, tiny_internvl, args)
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == [
        "--min_pixels/--max_pixels have NO effect for model_type internvl (no smart_resize frame; --max_anyres_num "
        "bounds its tiles)"
    ]
