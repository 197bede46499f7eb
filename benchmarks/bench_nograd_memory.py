"""CPU measurement of the no-grad working sets the memory estimator uses for the generation prefill (issue 29):
bytes per token of a Qwen2.5-VL-7B decoder layer and bytes per patch of its vision tower, without autograd, against
the formulas of ``gui_grounding/ops/memory.py`` (``_prefill_token_bytes``, ``_vision_patch_bytes``).

Measured: the peak of the bytes the CPU allocator holds over one forward (``torch.profiler`` with
``profile_memory=True``: the running sum of its ``[memory]`` allocation events; inputs allocated before it are not
counted) of transformers' own modules with the published 7B shapes (random bfloat16 weights, SDPA): the language model
with 2 decoder layers on 256 and 512 tokens (a ``DynamicCache`` filled as in prefill; its 2 layers' cache is
subtracted), and the vision tower with 2 blocks (one windowed, one full) on a 16 x 16 and a 32 x 32 patch grid, and
the tower's attention and MLP widths varied to find which step peaks. Both scale exactly linearly, so the per-unit
figure is the larger size's peak over its size.

    python benchmarks/bench_nograd_memory.py     # ~1 minute on 2 cores; writes benchmarks/results/memory_nograd_cpu.json
"""

from __future__ import annotations

import json
import os
import platform
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from gui_grounding.ops import memory as me  # noqa: E402
from gui_grounding.ops.memory_shapes import QWEN2_5_VL_SHAPES  # noqa: E402

OUT = os.path.join(REPO, "benchmarks", "results", "memory_nograd_cpu.json")
SHAPE = QWEN2_5_VL_SHAPES["Qwen2.5-VL-7B"]


def peak_bytes(fn) -> int:
    """The highest running sum of the CPU allocator's bytes over ``fn()`` (profiler memory events)."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    events = [e for e in prof.profiler.kineto_results.events() if e.name() == "[memory]"]
    current = peak = 0
    for e in sorted(events, key=lambda e: e.start_ns()):
        current += e.nbytes()
        peak = max(peak, current)
    return peak


def build(text_layers: int, vision: dict):
    import torch
    from transformers import Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration

    s = SHAPE
    text = dict(
        hidden_size=s.hidden,
        intermediate_size=s.intermediate,
        num_hidden_layers=text_layers,
        num_attention_heads=s.heads,
        num_key_value_heads=s.kv_heads,
        vocab_size=1024,
        bos_token_id=0,
        eos_token_id=1,
        rope_scaling={"type": "mrope", "mrope_section": [16, 24, 24]},
    )
    vision = dict(depth=2, fullatt_block_indexes=[1], window_size=112, out_hidden_size=s.hidden, **vision)
    config = Qwen2_5_VLConfig(text_config=text, vision_config=vision)
    for c in (config, config.vision_config, config.get_text_config()):
        c._attn_implementation = "sdpa"
    torch.manual_seed(0)
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)
    try:
        return Qwen2_5_VLForConditionalGeneration(config).eval()
    finally:
        torch.set_default_dtype(previous)


def decoder_per_token() -> dict:
    import torch
    from transformers import DynamicCache

    model = build(2, dict(hidden_size=64, intermediate_size=64, num_heads=2))
    lm, out = model.model.language_model, {}
    for tokens in (256, 512):
        x = torch.randn(1, tokens, SHAPE.hidden, dtype=torch.bfloat16)
        pos = torch.arange(tokens)[None, None].expand(3, 1, tokens)
        with torch.no_grad():
            peak = peak_bytes(
                lambda x=x, pos=pos: lm(
                    inputs_embeds=x, position_ids=pos, use_cache=True, past_key_values=DynamicCache(config=model.config)
                )
            )
        kv = 2 * 2 * SHAPE.kv_dim * 2  # the 2 layers' cache per token
        out[tokens] = peak / tokens - kv
    return out


def vision_per_patch(hidden: int, intermediate: int, heads: int) -> dict:
    import torch

    model = build(1, dict(hidden_size=hidden, intermediate_size=intermediate, num_heads=heads))
    out = {}
    for side in (16, 32):
        pixels = torch.randn(side * side, 3 * 2 * 14 * 14, dtype=torch.bfloat16)
        grid = torch.tensor([[1, side, side]])
        with torch.no_grad():
            out[side * side] = peak_bytes(lambda p=pixels, g=grid: model.model.visual(p, grid_thw=g)) / (side * side)
    return out


def main() -> dict:
    import torch
    import transformers

    torch.set_num_threads(min(2, os.cpu_count() or 1))
    decoder = decoder_per_token()
    vision = {
        f"h_v={h} I_v={i} heads={n}": {
            "measured": vision_per_patch(h, i, n),
            "formula": me._vision_patch_bytes(
                SHAPE.__class__(**{**SHAPE.__dict__, "vision_hidden": h, "vision_intermediate": i, "vision_heads": n}),
                2,
            ),
        }
        for h, i, n in ((1280, 3420, 16), (640, 3420, 16), (1280, 1710, 16), (1280, 3420, 8))
    }
    result = {
        "decoder_bytes_per_prefill_token": {"measured": decoder, "formula": me._prefill_token_bytes(SHAPE, 2)},
        "vision_bytes_per_patch_no_grad": vision,
        "source": f"benchmarks/bench_nograd_memory.py: transformers {transformers.__version__} Qwen2.5-VL (sdpa, "
        f"bfloat16), torch {torch.__version__}, profiler memory events",
        "device": f"cpu ({platform.machine()}, {os.cpu_count()} cores)",
    }
    with open(OUT, "w", encoding="utf-8") as f:
        json.dump(result, f, indent=1)
        f.write("\n")
    print(json.dumps(result, indent=1))
    return result


if __name__ == "__main__":
    main()
