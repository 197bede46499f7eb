"""``gui-grounding prompt``: the exact messages, resized size and (with --model) tokens an adapter sends, and each
adapter's default pixel budget (the family's published inference setting)."""

from __future__ import annotations

import json

import pytest
from PIL import Image

from gui_grounding.cli import main
from gui_grounding.models.adapters import ADAPTERS, get_adapter
from gui_grounding.ops.prompt import describe_prompt, parse_image_size

# GTA1's SYSTEM_PROMPT (Yan98/GTA1 src/grpo_grounding.py:78-84) for a 1932x1092 resized image, typed out.
GTA1_SYSTEM_1932x1092 = (
    "You are an expert UI element locator. Given a GUI image and a user's element description, provide the coordinates "
    "of the specified element as a single (x,y) point. The image resolution is height 1092 and width 1932. For "
    "elements with area, return the center point.\n\nOutput the coordinate pair exactly:\n(x,y)"
)
ARGS = ["prompt", "--adapter", "gta1", "--image-size", "1920x1080", "--instruction", "Click the search box"]


def _run(capsys, argv) -> dict:
    main(argv)
    return json.loads(capsys.readouterr().out)


def test_gta1_prompt_exact_json(capsys):
    out = _run(capsys, ARGS)
    budget = out.pop("pixel_budget")
    assert {k: budget[k] for k in ("factor", "min_pixels", "max_pixels", "max_tiles")} == {
        "factor": 28,
        "min_pixels": 3136,
        "max_pixels": 8_847_360,
        "max_tiles": None,
    }
    assert all("Yan98/GTA1 README.md:149-153" in budget["sources"][k] for k in ("factor", "min_pixels", "max_pixels"))
    # 1920x1080 = 2,073,600 px is inside GTA1's 3,136 .. 8,847,360: each side rounds to a multiple of 28
    assert out == {
        "adapter": "gta1",
        "profile": None,
        "image_size": [1920, 1080],
        "resized_size": [1932, 1092],
        "answer_frame": {"name": "resized", "size": [1932.0, 1092.0]},
        "messages": [
            {"role": "system", "content": [{"type": "text", "text": GTA1_SYSTEM_1932x1092}]},
            {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "Click the search box"}]},
        ],
    }
    assert out["messages"][0]["content"][0]["text"].encode() == GTA1_SYSTEM_1932x1092.encode()


def test_gta1_prompt_with_model_tokens(capsys, tiny_qwen25_dir):
    from vlm_r1.modules import load_processor

    out = _run(capsys, [*ARGS, "--model", tiny_qwen25_dir])
    assert set(out) == {
        "adapter",
        "profile",
        "image_size",
        "resized_size",
        "answer_frame",
        "pixel_budget",
        "messages",
        "chat_template_text",
        "num_tokens",
    }
    assert out["resized_size"] == [1932, 1092]  # GTA1's budget is applied to the tiny checkpoint's processor

    # what the model sees, computed here independently: the processor under GTA1's budget, the unexpanded template
    # text and a blank 1920x1080 image resized to 1932x1092
    processor = load_processor(tiny_qwen25_dir, min_pixels=3136, max_pixels=4096 * 2160)
    text = processor.apply_chat_template(out["messages"], tokenize=False, add_generation_prompt=True)
    image = Image.new("RGB", (1920, 1080), (255, 255, 255)).resize((1932, 1092))
    batch = processor(text=[text], images=[image], return_tensors="pt")
    t, h, w = (int(v) for v in batch["image_grid_thw"][0])
    n_pad = t * h * w // 4  # one pad token per 2x2 merged patch
    assert (w * 14, h * 14) == (1932, 1092) and n_pad == (1932 // 28) * (1092 // 28) == 2691
    pad = "<|image_pad|>"
    assert out["chat_template_text"] == (
        f"<|im_start|>system\n{GTA1_SYSTEM_1932x1092}<|im_end|>\n"
        f"<|im_start|>user\n<|vision_start|>{pad * n_pad}<|vision_end|>Click the search box<|im_end|>\n"
        "<|im_start|>assistant\n"
    )
    assert out["num_tokens"] == len(batch.input_ids[0])
    # the expanded text is exactly the token sequence the processor builds
    ids = processor.tokenizer(out["chat_template_text"], add_special_tokens=False)["input_ids"]
    assert ids == batch.input_ids[0].tolist()


@pytest.mark.parametrize(
    "adapter, size, expected",
    [
        ("gta1-thinking", (1920, 1080), [1932, 1092]),
        ("gta1-box", (1920, 1080), [1932, 1092]),
        ("ui-tars-1.5", (1920, 1080), [1932, 1092]),
        ("ui-tars-1.5", (200, 100), [420, 224]),  # UI-TARS min 78,400 upscales a small screenshot
        ("gta1", (200, 100), [196, 112]),  # GTA1 min 3,136 does not
        ("gta1", (7680, 4320), [3948, 2212]),  # 33.2 MP > 8,847,360: scaled down
        ("qwen2-vl", (1920, 1080), [1932, 1092]),
        ("qwen3-vl", (1920, 1080), [1920, 1088]),  # factor 32
    ],
)
def test_resized_size_under_each_default_budget(adapter, size, expected):
    info = describe_prompt(adapter, size, "Click OK")
    assert info["resized_size"] == expected
    assert info["messages"][-1]["content"][0] == {"type": "image"}


def test_budget_overrides_and_other_adapters_messages(capsys):
    out = _run(capsys, [*ARGS, "--max-pixels", "200704"])
    assert out["resized_size"] == [588, 336]
    assert "height 336 and width 588" in out["messages"][0]["content"][0]["text"]
    ui = _run(capsys, ["prompt", "--adapter", "ui-tars-1.5", "--image-size", "1920x1080", "--instruction", "Open"])
    assert ui["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "image"},
                {
                    "type": "text",
                    "text": (
                        "Output only the coordinate of one point in your response. What element matches the following task: Open"
                    ),
                },
            ],
        }
    ]
    with pytest.raises(ValueError, match=r"^pixel budget: min_pixels 9,000,000 exceeds max_pixels 8,847,360$"):
        describe_prompt("gta1", (1920, 1080), "x", min_pixels=9_000_000)


def test_image_size_argument():
    assert parse_image_size("1920x1080") == (1920, 1080)
    assert parse_image_size("640X480") == (640, 480)
    for bad in ("1920", "0x10", "-5x4", "axb", "1920x1080x3"):
        with pytest.raises(ValueError, match=r"image size must be WxH"):
            parse_image_size(bad)
    with pytest.raises(SystemExit):
        main(["prompt", "--adapter", "gta1", "--image-size", "1920", "--instruction", "x"])


def test_default_budgets_are_the_published_settings():
    budgets = {name: tuple(cls.default_budget.values().values()) for name, cls in ADAPTERS.items()}
    assert budgets == {  # (factor, min_pixels, max_pixels, max_tiles)
        "gta1": (28, 3136, 8_847_360, None),  # GTA1 README inference: min_pixels=3136, max_pixels=4096*2160
        "gta1-thinking": (28, 3136, 8_847_360, None),
        "gta1-box": (28, 3136, 8_847_360, None),
        "ui-tars-1.5": (28, 78_400, 12_845_056, None),  # UI-TARS README_coordinates.md: 100*28*28 .. 16384*28*28
        "ui-venus-ground": (28, 2_000_000, 4_800_000, None),  # UI-Venus ui_venus_ground_7b.py:42-43
        "gui-g2": (28, 3136, 12_845_056, None),  # qwen_vl_utils defaults: 4*28*28 .. 16384*28*28
        "qwen2.5-vl": (
            28,
            3136,
            99_999_999,
            None,
            12_845_056,
        ),  # + processor_max_pixels: its processor shrinks again  # ScreenSpot-Pro harness qwen2_5vl.py:143-150
        "qwen2-vl": (28, 3136, 12_845_056, None),  # processor default (no published grounding budget)
        "qwen3-vl": (32, 65_536, 16_777_216, None),  # processor default (no published grounding budget)
        "internvl": (None, None, None, 12),  # 448-px tiles, up to 12 (no smart_resize)
        "internvl-gui": (None, None, None, 12),  # ScreenSpot-Pro harness internvl.py:121 max_num=12
        "opencua": (28, 3136, 12_845_056, None),  # OpenCUA model/README.md:290-300 smart_resize(factor=28, ...)
        "ui-venus-1.5": (32, 65_536, 12_845_056, None),  # qwen_vl_utils' 16384*28*28 cap, the processor's factor 32
        "mai-ui": (32, 1_024, 6_553_600, None),  # MAI-UI eval_server.py:53-59
        "gui-owl-1.5": (32, 200_704, 10_035_200, None),  # GUI-Owl-1.5 eval_grounding_benchmarks.py:43-44
        "gui-owl-1.5-infeasible": (32, 200_704, 10_035_200, None),
    }
    for name, cls in ADAPTERS.items():
        b = cls.default_budget
        assert all(b.sources[k] for k, v in b.values().items() if v is not None), name  # every value cited
    # no budget given (API backends without flags): GTA1 requests under the published budget, 7680x4320 -> 3948x2212
    req = get_adapter("gta1").build_request(
        type("S", (), {"instruction": "x"})(), Image.new("RGB", (7680, 4320)), budget=None
    )
    assert req.image.size == (3948, 2212)


def test_a_tiling_adapter_on_a_patching_checkpoint_is_a_clear_error(tiny_qwen25_dir):
    """InternVL's adapter (tiles, no smart_resize frame) on a Qwen2.5-VL checkpoint: one ValueError naming both, not
    a TypeError from the frame maths (found by the layout refactor's behaviour comparison)."""
    with pytest.raises(ValueError) as err:
        describe_prompt("internvl-gui", (1280, 720), "Click x", model=tiny_qwen25_dir)
    assert str(err.value) == (
        f"the internvl-gui adapter tiles the image (no smart_resize frame), but {tiny_qwen25_dir} is a checkpoint "
        "whose processor resizes to a patch grid: use an adapter of the checkpoint's family (--adapter, or none)"
    )
