"""Tiny checkpoints, the Qwen VLM module (processor, pixel budget, image grid) and the vision-token ban.

The ban proof biases the tiny model's lm_head towards the four vision special tokens (+30 logits), shows that sampling
then emits them when only TRL's own image-pad suppression is active, and that with the project's ``bad_words_ids``
(directly and inside ``VLMGRPOTrainer`` training steps) not one of them is ever generated.
"""

from __future__ import annotations

import json
import os
import types

import pytest
import torch
from PIL import Image

from gui_grounding.models.frames import Frame
from gui_grounding.models.prompts import build_messages
from vlm_r1.modules import Qwen2VLModule, available_modules, get_vlm_module, load_model, load_processor
from vlm_r1.trainer import banned_generation_kwargs, freeze_vision_modules

ARCHS = {
    "qwen2_5_vl": ("tiny_qwen25_dir", "Qwen2_5_VLProcessor", "Qwen2_5_VLForConditionalGeneration"),
    "qwen2_vl": ("tiny_qwen2_dir", "Qwen2VLProcessor", "Qwen2VLForConditionalGeneration"),
}
VISION_TOKENS = ["<|image_pad|>", "<|video_pad|>", "<|vision_start|>", "<|vision_end|>"]


@pytest.fixture(params=list(ARCHS))
def arch_dir(request):
    """(arch, checkpoint dir) for each tiny architecture."""
    return request.param, request.getfixturevalue(ARCHS[request.param][0])


# --------------------------------------------------------------------------------------------------------------------
# checkpoint directory, reload, module registry


def test_tiny_checkpoint_files(arch_dir):
    from vlm_r1.tiny_parts import QWEN_CHAT_TEMPLATE

    arch, path = arch_dir
    stock = ARCHS[arch][1]
    for name in (
        "config.json",
        "model.safetensors",
        "processor_config.json",
        "chat_template.jinja",
        "tokenizer.json",
        "tokenizer_config.json",
        "generation_config.json",
    ):
        assert os.path.isfile(os.path.join(path, name)), f"{name} missing from the tiny {arch} checkpoint"
    with open(os.path.join(path, "config.json")) as f:
        assert json.load(f)["model_type"] == arch
    with open(os.path.join(path, "processor_config.json")) as f:
        assert json.load(f)["processor_class"] == stock
    with open(os.path.join(path, "tokenizer_config.json")) as f:
        assert json.load(f)["processor_class"] == stock  # tidied from ImageOnly...
    with open(os.path.join(path, "chat_template.jinja")) as f:
        assert f.read() == QWEN_CHAT_TEMPLATE


def test_build_tiny_model_rejects_unknown_arch(tmp_path):
    from vlm_r1.tiny import build_tiny_model

    with pytest.raises(ValueError, match=r"unknown arch 'llava'; supported: qwen2_5_vl, qwen2_vl"):
        build_tiny_model("llava", str(tmp_path))


def test_reload_processor_and_model(arch_dir):
    import transformers

    arch, path = arch_dir
    _, stock, model_cls = ARCHS[arch]
    processor = load_processor(path)
    model = load_model(path)
    assert type(model) is getattr(transformers, model_cls)
    assert isinstance(processor, getattr(transformers, stock))
    assert processor.tokenizer.padding_side == "left"
    assert model.config.model_type == arch
    vocab = model.config.text_config.vocab_size
    assert vocab == len(processor.tokenizer) == model.lm_head.out_features


def test_get_vlm_module_by_type_and_by_path(arch_dir):
    arch, path = arch_dir
    by_type, by_path = get_vlm_module(arch), get_vlm_module(path)
    assert type(by_type) is type(by_path) is Qwen2VLModule
    assert by_type.model_type == by_path.model_type == arch
    assert by_path.get_vlm_key() == "qwen"
    assert by_path.get_model_class(path, {}).__name__ == ARCHS[arch][2]


def test_unknown_model_type_name_raises():
    with pytest.raises(ValueError) as info:
        get_vlm_module("llama")
    msg = str(info.value)
    supported = ", ".join(sorted(available_modules()))  # internvl, qwen2_5_vl, qwen2_vl, qwen3_vl
    assert msg.startswith(f"'llama' is neither a supported model_type ({supported}) nor a loadable checkpoint")


def test_unknown_model_type_checkpoint_raises(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "llama"}))
    with pytest.raises(ValueError) as info:
        get_vlm_module(str(tmp_path))
    supported = ", ".join(sorted(available_modules()))
    assert str(info.value) == f"model_type 'llama' is not supported; supported model types: {supported}"


def test_digits_are_one_token_each(tiny_qwen25_dir):
    tok = load_processor(tiny_qwen25_dir).tokenizer
    assert tok.tokenize("(123,45)") == ["(", "1", "2", "3", ",", "4", "5", ")"]
    assert len(tok("(123,45)", add_special_tokens=False)["input_ids"]) == 8
    assert tok.decode(tok("(1279,719)", add_special_tokens=False)["input_ids"]) == "(1279,719)"


# --------------------------------------------------------------------------------------------------------------------
# pixel budget and image grid


def test_image_resize_params_default_and_overrides(arch_dir):
    arch, path = arch_dir
    module = get_vlm_module(path)
    assert module.get_image_resize_params(load_processor(path)) == (28, 3136, 200704)
    assert module.get_image_resize_params(load_processor(path, max_pixels=100352)) == (28, 3136, 100352)
    assert module.get_image_resize_params(load_processor(path, min_pixels=6272)) == (28, 6272, 200704)
    with pytest.raises(ValueError, match=r"^min_pixels 300000 > max_pixels 200704$"):
        load_processor(path, min_pixels=300000)


def _grid(processor, image) -> list:
    text = processor.apply_chat_template(
        build_messages("Click", 10, 10, image_block=True), tokenize=False, add_generation_prompt=True
    )
    batch = processor(text=[text], images=[image], return_tensors="pt")
    n_pad = int((batch["input_ids"] == processor.tokenizer.convert_tokens_to_ids("<|image_pad|>")).sum())
    return batch["image_grid_thw"].tolist(), n_pad


def test_image_grid_for_screenshot_and_pre_resized_image(tiny_qwen25_dir):
    processor = load_processor(tiny_qwen25_dir)
    assert _grid(processor, Image.new("RGB", (1280, 720))) == ([[1, 24, 42]], 252)  # 24*42/(2*2) pad tokens
    grid, n_pad = _grid(processor, Image.new("RGB", (588, 336)))  # already the smart_resize size: identity
    assert (grid, n_pad) == ([[1, 24, 42]], 252)
    assert (grid[0][1] * 14, grid[0][2] * 14) == (336, 588)


@pytest.mark.parametrize("max_pixels", [200_704, 100_352])
def test_frame_matches_processor_resize(arch_dir, max_pixels):
    """The frame the reward uses (Frame.for_image) is exactly the size the processor feeds the vision tower."""
    arch, path = arch_dir
    module = get_vlm_module(path)
    processor = load_processor(path, max_pixels=max_pixels)
    factor, lo, hi = module.get_image_resize_params(processor)
    for w, h in [(1280, 720), (1000, 500), (333, 777), (50, 60), (3000, 200), (1920, 1080)]:
        frame = Frame.for_image(w, h, factor=factor, min_pixels=lo, max_pixels=hi)
        (grid,), _ = _grid(processor, Image.new("RGB", (w, h)))
        assert (grid[1] * 14, grid[2] * 14) == (frame.resized_height, frame.resized_width), (w, h)
        resized = Image.new("RGB", (frame.resized_width, frame.resized_height))
        assert _grid(processor, resized)[0] == [grid], f"pre-resized {w}x{h} is not an identity resize"


# --------------------------------------------------------------------------------------------------------------------
# banned ids and generation kwargs


def test_banned_token_ids_are_the_vision_tokens(arch_dir):
    arch, path = arch_dir
    processor, model = load_processor(path), load_model(path)
    ids = get_vlm_module(path).get_banned_token_ids(processor)
    cfg = model.config
    assert ids == [cfg.image_token_id, cfg.video_token_id, cfg.vision_start_token_id, cfg.vision_end_token_id]
    assert processor.tokenizer.convert_ids_to_tokens(ids) == VISION_TOKENS


def test_banned_generation_kwargs_hf_and_vllm(tiny_qwen25_dir):
    module, processor = get_vlm_module(tiny_qwen25_dir), load_processor(tiny_qwen25_dir)
    image_pad, video_pad, v_start, v_end = module.get_banned_token_ids(processor)
    ns = types.SimpleNamespace

    # default: what GTA1 bans, the image token (bad_words_ids=[[image_token_id]])
    gen = banned_generation_kwargs(ns(generation_kwargs=None, use_vllm=False), module, processor)
    assert gen == {"bad_words_ids": [[image_pad]]}
    every = [image_pad, video_pad, v_start, v_end]
    gen = banned_generation_kwargs(ns(generation_kwargs=None, use_vllm=False), module, processor, ids=every)
    assert gen == {"bad_words_ids": [[image_pad], [video_pad], [v_start], [v_end]]}

    # user kwargs kept, existing bad words kept first and not duplicated
    user = {"bad_words_ids": [[video_pad], [5, 6]], "top_k": 5}
    gen = banned_generation_kwargs(ns(generation_kwargs=user, use_vllm=False), module, processor, ids=every)
    assert gen == {"bad_words_ids": [[video_pad], [5, 6], [image_pad], [v_start], [v_end]], "top_k": 5}
    assert user == {"bad_words_ids": [[video_pad], [5, 6]], "top_k": 5}  # the caller's dict is not mutated

    # a user suppress_tokens list replaces TRL's image-pad suppression: the image pad is put back into it
    gen = banned_generation_kwargs(ns(generation_kwargs={"suppress_tokens": [7]}, use_vllm=False), module, processor)
    assert gen["suppress_tokens"] == sorted({7, image_pad})

    # vLLM takes strings
    gen = banned_generation_kwargs(ns(generation_kwargs=None, use_vllm=True), module, processor)
    assert gen == {"bad_words": ["<|image_pad|>"]}
    gen = banned_generation_kwargs(
        ns(generation_kwargs={"bad_words": ["<|video_pad|>", "foo"]}, use_vllm=True), module, processor, ids=every
    )
    assert gen == {"bad_words": ["<|video_pad|>", "foo", "<|image_pad|>", "<|vision_start|>", "<|vision_end|>"]}


def test_freeze_vision_modules(tiny_qwen25_dir):
    model = load_model(tiny_qwen25_dir)
    visual = sum(p.numel() for n, p in model.named_parameters() if "visual" in n)
    assert visual > 0
    assert freeze_vision_modules(model, get_vlm_module(tiny_qwen25_dir).get_vision_modules_keywords()) == visual
    assert all(not p.requires_grad for n, p in model.named_parameters() if "visual" in n)
    assert all(p.requires_grad for n, p in model.named_parameters() if "visual" not in n)
    with pytest.raises(ValueError, match=r"no parameter name contains any of \['no_such_tower'\]"):
        freeze_vision_modules(model, ["no_such_tower"])


# --------------------------------------------------------------------------------------------------------------------
# the bad-words proof

BIAS = 30.0


def _bias_towards(model, token_ids):
    """Add BIAS to the lm_head logits of ``token_ids`` (a forward hook, so TRL's forward passes see it too)."""
    bias = torch.zeros(model.lm_head.out_features)
    bias[token_ids] = BIAS
    return model.lm_head.register_forward_hook(lambda mod, inp, out: out + bias.to(out.device, out.dtype))


def _prompt_inputs(processor, instruction="Click the search box"):
    text = processor.apply_chat_template(
        build_messages(instruction, 336, 588, image_block=True), tokenize=False, add_generation_prompt=True
    )
    return processor(text=[text], images=[Image.new("RGB", (588, 336), (30, 60, 90))], return_tensors="pt")


def _next_token_argmax(model, inputs) -> int:
    with torch.no_grad():
        return int(model(**inputs).logits[0, -1].argmax())


@pytest.fixture
def biased_qwen25(tiny_qwen25_dir):
    module = get_vlm_module(tiny_qwen25_dir)
    processor = load_processor(tiny_qwen25_dir)
    model = load_model(tiny_qwen25_dir)
    banned = module.get_banned_token_ids(processor)
    inputs = _prompt_inputs(processor)
    unbiased_top = _next_token_argmax(model, inputs)
    _bias_towards(model, banned)
    assert unbiased_top not in banned
    assert _next_token_argmax(model, inputs) in banned, "the lm_head bias is not active"
    return module, processor, model, banned, inputs


def _sample(model, inputs, seed, **gen) -> list:
    torch.manual_seed(seed)
    out = model.generate(
        **inputs, do_sample=True, temperature=1.0, top_k=0, top_p=1.0, max_new_tokens=32, min_new_tokens=32, **gen
    )
    return out[0, inputs["input_ids"].shape[1] :].tolist()


def test_without_ban_the_biased_model_samples_vision_tokens(biased_qwen25):
    _, _, model, banned, inputs = biased_qwen25
    image_pad = banned[0]
    completion = _sample(model, inputs, seed=0, suppress_tokens=[image_pad])  # what TRL does on its own
    assert len(completion) == 32
    assert completion.count(image_pad) == 0
    leaked = sum(completion.count(t) for t in banned[1:])
    assert leaked >= 16, f"only {leaked}/32 vision tokens sampled: {completion}"


def test_bad_words_ids_ban_every_vision_token(biased_qwen25):
    module, processor, model, banned, inputs = biased_qwen25
    gen = banned_generation_kwargs(
        types.SimpleNamespace(generation_kwargs=None, use_vllm=False), module, processor, ids=banned
    )
    tokens = []
    for seed in range(4):
        tokens += _sample(model, inputs, seed, **gen)
    assert len(tokens) == 128
    assert [t for t in tokens if t in banned] == []


def _write_dataset(tmp_path, make_image, n=4) -> str:
    make_image(1280, 720, "images/screen.png", folder=tmp_path)
    path = tmp_path / "train.jsonl"
    with open(path, "w") as f:
        for i in range(n):
            box = {"x_min": 100 * i, "y_min": 50, "x_max": 100 * i + 90, "y_max": 120}
            f.write(
                json.dumps({"instruction": f"Click item {i}", "image_path": "images/screen.png", "target_bbox": box})
                + "\n"
            )
    return str(path)


def _train_one_step(biased, tmp_path, make_image, *, ban: bool):
    from gui_grounding.training.task import GUIGroundingTask
    from vlm_r1.configs import VLMGRPOConfig
    from vlm_r1.trainer import VLMGRPOTrainer

    module, processor, model, banned, _ = biased
    script_args = types.SimpleNamespace(
        data_file_list=[_write_dataset(tmp_path, make_image)],
        image_folder_list=None,
        strict_data=False,
        prompt_mode="non_thinking",
    )
    dataset = GUIGroundingTask().build_dataset(script_args, processor, module)
    seen = []

    def record_completion_ids(completions, completion_ids, **kwargs):
        seen.extend(list(ids) for ids in completion_ids)
        return [0.0] * len(completions)

    args = VLMGRPOConfig(
        output_dir=str(tmp_path / "out"),
        max_steps=1,
        per_device_train_batch_size=8,
        num_generations=8,
        max_completion_length=16,
        report_to="none",
        save_strategy="no",
        logging_steps=1,
        ban_vision_tokens=ban,
    )
    trainer = VLMGRPOTrainer(
        model=model,
        reward_funcs=[record_completion_ids],
        args=args,
        vlm_module=module,
        processing_class=processor,
        train_dataset=dataset,
    )
    trainer.train()
    return trainer, seen


def test_trainer_bans_what_gta1_bans(biased_qwen25, tmp_path, make_image):
    """--ban_vision_tokens true bans the image token with bad_words_ids, as GTA1's trainer does
    (bad_words_ids=[[image_token_id]]); the other vision specials stay allowed, as in GTA1."""
    module, processor, model, banned, inputs = biased_qwen25
    image_pad = banned[0]
    assert (
        module.get_image_token_ids(processor)
        == [image_pad]
        == [processor.tokenizer.convert_tokens_to_ids("<|image_pad|>")]
    )
    trainer, seen = _train_one_step(biased_qwen25, tmp_path, make_image, ban=True)
    assert trainer.generation_config.bad_words_ids == [[image_pad]]
    assert trainer.generation_kwargs["bad_words_ids"] == [[image_pad]]
    assert trainer.model is model and _next_token_argmax(model, inputs) in banned  # bias still on after the step
    assert len(seen) == 8
    assert sum(map(len, seen)) >= 64
    flat = [t for ids in seen for t in ids]
    assert flat.count(image_pad) == 0 and sum(flat.count(t) for t in banned[1:]) > 0


def _core_default_ban() -> bool:
    from vlm_r1.configs import VLMGRPOConfig

    return VLMGRPOConfig(output_dir="unused").ban_vision_tokens


def test_trainer_without_ban_leaks_vision_tokens(biased_qwen25, tmp_path, make_image):
    """Control for the test above: same biased model, --ban_vision_tokens false -> only TRL's image-pad suppression."""
    _, _, _, banned, _ = biased_qwen25
    trainer, seen = _train_one_step(biased_qwen25, tmp_path, make_image, ban=False)
    assert _core_default_ban() is False  # the core's default: upstream bans nothing
    assert trainer.generation_config.bad_words_ids is None
    assert trainer.generation_config.suppress_tokens == [banned[0]]
    flat = [t for ids in seen for t in ids]
    assert flat.count(banned[0]) == 0
    assert sum(flat.count(t) for t in banned[1:]) > 0


def test_tiny_model_sizes(tmp_path):
    import json

    from vlm_r1.tiny import build_tiny_model

    build_tiny_model("qwen2_5_vl", str(tmp_path / "s"), size="small", rope_theta=1e4)
    cfg = json.load(open(tmp_path / "s" / "config.json"))
    text = cfg.get("text_config", cfg)
    assert (text["hidden_size"], text["num_hidden_layers"], text["rope_parameters"]["rope_theta"]) == (128, 4, 1e4)
    assert text["rope_parameters"]["mrope_section"] == [4, 6, 6]  # sums to head_dim / 2 = 128 / 4 / 2
    assert cfg["vision_config"]["hidden_size"] == 64 and cfg["vision_config"]["out_hidden_size"] == 128
    with pytest.raises(ValueError, match="unknown size 'huge'; supported: tiny, small"):
        build_tiny_model("qwen2_5_vl", str(tmp_path / "h"), size="huge")
