"""Shared-prompt GRPO vs TRL's naive layout, side by side: one group of G rollouts of one long screenshot prompt.

    .venv/bin/python benchmarks/bench_shared_prompt.py          # G=8, 2,000-token prompt, <= 20-token completions
    .venv/bin/python benchmarks/bench_shared_prompt.py --quick  # smoke: 300-token prompt, one repeat

Model: the ``small`` tiny random Qwen2.5-VL of :func:`vlm_r1.tiny.build_tiny_model` (built once in ``--workdir`` or a
temporary directory), fp32, SDPA, TRL's fused LM head (``add_fused_lm_head(outputs=("log_probs", "entropy"))``).
Prompt: GTA1's system prompt and one instruction with a committed screenshot (``--image``), resized so that the whole
prompt is about ``--prompt-tokens`` tokens (the image gives one token per 28x28 pixels; the chat text is counted and
the image fills the rest) and passed through the processor with ``max_pixels`` set to exactly that size. Completions: random non-special tokens, ``C/2..C`` of them (one rollout
exactly ``C``), right-padded to ``C`` as TRL lays them out.

Each variant runs in its own subprocess per phase (peak RSS only grows, and a generation peak must not mask the
training one), all with the same ``torch`` thread count:

* **train** phase: TRL's batch ``[prompt | completion]`` of G rows.
  ``naive`` = ``GRPOTrainer._get_per_token_logps_and_entropies`` (TRL 1.16) on G copies of the prompt and pixels;
  ``shared`` = :func:`vlm_r1.shared_prompt.per_token_logps_and_entropies` (dense mask, SDPA) on one packed row and one
  copy of the pixels (:func:`vlm_r1.shared_prompt.dedup_pixel_values`). Both then backward the same GRPO-shaped loss
  (clipped ratio x advantage, token-mean over the completion mask). The first forward+backward of the fresh process is
  the memory measurement (peak RSS delta: ``/proc/self/clear_refs`` "5" resets ``VmHWM`` to the current RSS just
  before, ``VmHWM - VmRSS(before)`` after; ``ru_maxrss`` fallback where clear_refs is not writable) and the warm-up;
  then ``--repeats`` timed passes, median reported. LLM tokens and vision patches: :func:`token_counts` and the
  ``pixel_values`` rows actually forwarded.
* **generate** phase (no grad, greedy, ``min_new_tokens = max_new_tokens = C``):
  ``naive`` = ``model.generate`` on the G repeated prompts (TRL layout); its *prefill* is the forward ``generate``
  starts with: the G prompts with an empty ``DynamicCache``, ``logits_to_keep=1``.
  ``shared`` = ``shared_prompt_prefill`` of the Qwen module (:mod:`vlm_r1.modules.qwen`) on the one unique prompt (prefill of ``prompt[:-1]``, cache
  repeated G times), then ``generate`` from that cache; its *prefill* is the hook call. The first generation of the
  fresh process is the memory measurement (peak RSS delta, prefill included) and the warm-up; then prefill alone and
  the whole generation (prefill included) are timed ``--repeats`` times.

The parent checks that the two variants computed the same thing: log-probs and entropies (max abs diff < 1e-4),
per-tensor gradient relative error of the first step, and the generation logits and greedy tokens.

Targets (issue): >= 5x fewer LLM tokens, >= 4x faster policy forward+backward, >= 3x lower peak memory of the training
forward+backward, >= 3x faster generation prefill. Output: a table on stdout and JSON (``--out``). Numbers depend on
the machine; nothing asserts them. Other processes on the cores distort wall times badly (two OpenMP threads that
lose a core stall each other): the report gives each measurement's *CPU share* (CPU time / (wall x threads), about 1
on an idle machine) and warns below 0.7.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_IMAGE = os.path.join(REPO, "data", "web_sample", "images", "about__1024x768.png")
DEFAULT_OUT = os.path.join(REPO, "benchmarks", "results", "shared_prompt.json")
INSTRUCTION = "Click the search box next to the Python documentation index."
PATCH = 28  # pixels per LLM image token side (patch 14 x spatial merge 2)
TARGETS = {"llm_tokens": 5.0, "policy_fwd_bwd_s": 4.0, "train_peak_rss_delta_mb": 3.0, "prefill_s": 3.0}
LOGP_TOL = 1e-4
VARIANTS = ("naive", "shared")
SHARE_KEYS = ("policy_fwd_bwd_cpu_share", "prefill_cpu_share", "generate_cpu_share")
MIN_CPU_SHARE = 0.7
PHASES = ("train", "generate")


# ---- memory --------------------------------------------------------------------------------------------------------
def _status_mb(key: str) -> float | None:
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def _maxrss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


class PeakRSS:
    """Peak resident memory of a block, relative to the RSS just before it (MB).

    ``VmHWM`` reset through ``/proc/self/clear_refs`` ("5"); where that is not possible, ``ru_maxrss`` (which never
    resets: the delta is then only right when the block reaches a new process peak).
    """

    def __enter__(self):
        gc.collect()
        self.method = "clear_refs+VmHWM"
        try:
            with open("/proc/self/clear_refs", "w", encoding="ascii") as f:
                f.write("5")
        except OSError:
            self.method = "ru_maxrss"
        rss = _status_mb("VmRSS")
        if rss is None:
            self.method = "ru_maxrss"
        self.before = rss if rss is not None else _maxrss_mb()
        return self

    def __exit__(self, *exc):
        hwm = _status_mb("VmHWM") if self.method != "ru_maxrss" else None
        self.peak = hwm if hwm is not None else _maxrss_mb()
        self.delta = self.peak - self.before
        return False

    def as_dict(self, prefix: str) -> dict:
        return {
            f"{prefix}_rss_before_mb": round(self.before, 1),
            f"{prefix}_peak_rss_mb": round(self.peak, 1),
            f"{prefix}_peak_rss_delta_mb": round(self.delta, 1),
        }


def cpu_share(wall: list[float], cpu: list[float], threads: int) -> float:
    """Process CPU time over ``wall x threads`` of the timed passes: near 1 when the threads had the cores to
    themselves (OpenMP spins while it waits), well below when other processes competed for them."""
    return round(sum(cpu) / max(1e-9, sum(wall) * threads), 3)


# ---- inputs --------------------------------------------------------------------------------------------------------
def image_size_for_tokens(tokens: int) -> tuple[int, int]:
    """``(width, height)`` in pixels, multiples of 28 at about 4:3, whose image gives about ``tokens`` LLM tokens."""
    rows = max(1, round((tokens * 3 / 4) ** 0.5))
    cols = max(1, round(tokens / rows))
    return cols * PATCH, rows * PATCH


def prompt_text(processor, width: int, height: int) -> str:
    from gui_grounding.models.prompts import build_messages

    messages = build_messages(INSTRUCTION, height, width, image_block=True)
    return processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)


def image_size_for_prompt(processor, prompt_tokens: int) -> tuple[int, int]:
    """Image size whose prompt (chat template text + image tokens) is about ``prompt_tokens`` tokens long."""
    width, height = image_size_for_tokens(prompt_tokens)
    text_tokens = len(processor.tokenizer(prompt_text(processor, width, height))["input_ids"]) - 1  # 1 image pad
    return image_size_for_tokens(max(1, prompt_tokens - text_tokens))


def build_group(processor, image_path: str, width: int, height: int, G: int, C: int, seed: int) -> dict:
    """One GRPO group in TRL's layout: G copies of the prompt, then right-padded completions of C/2..C tokens.

    The processor runs once on the unique prompt and the rows are copies of its output: G identical rows need no
    padding, so this is exactly what the processor returns for G copies (and skips G-1 image resizes).
    """
    import torch
    from PIL import Image

    with Image.open(image_path) as im:
        image = im.convert("RGB").resize((width, height), Image.BICUBIC)
    text = prompt_text(processor, width, height)
    uni = processor(images=[image], text=[text], padding=True, return_tensors="pt")
    tok = processor.tokenizer
    g = torch.Generator().manual_seed(seed)
    special = set(tok.all_special_ids) | {tok.convert_tokens_to_ids(t) for t in tok.get_added_vocab()}
    normal = torch.tensor([i for i in range(len(tok)) if i not in special])
    lens = torch.randint(max(1, C // 2), C + 1, (G,), generator=g)
    lens[0] = C
    comp = torch.full((G, C), tok.pad_token_id, dtype=torch.long)
    cmask = torch.zeros(G, C, dtype=torch.long)
    for r, n in enumerate(lens.tolist()):
        comp[r, :n] = normal[torch.randint(0, normal.numel(), (n,), generator=g)]
        cmask[r, :n] = 1
    adv = torch.randn(G, generator=g)
    adv = (adv - adv.mean()) / adv.std().clamp(min=1e-4)
    rep = {k: uni[k].repeat(G, 1) for k in ("input_ids", "attention_mask", "mm_token_type_ids")}
    return {
        "unique": dict(uni),
        "prompt_ids": rep["input_ids"],
        "prompt_mask": rep["attention_mask"],
        "input_ids": torch.cat([rep["input_ids"], comp], 1),
        "attention_mask": torch.cat([rep["attention_mask"], cmask], 1),
        "mm_token_type_ids": torch.cat([rep["mm_token_type_ids"], torch.zeros_like(comp)], 1),
        "prompt_mm_token_type_ids": rep["mm_token_type_ids"],
        "pixel_values": uni["pixel_values"].repeat(G, 1),
        "image_grid_thw": uni["image_grid_thw"].repeat(G, 1),
        "num_images": [1] * G,
        "completion_mask": cmask,
        "advantages": adv,
        "prompt_tokens": int(uni["attention_mask"].sum()),
        "image_tokens": int((uni["mm_token_type_ids"] != 0).sum()),
        "completion_tokens": lens.tolist(),
        "image_size_wh": [width, height],
    }


def load(args):
    import torch

    from vlm_r1.modules import get_vlm_module

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    module = get_vlm_module(args.model_dir)
    processor = module.load_processor(args.model_dir)
    width, height = image_size_for_prompt(processor, args.prompt_tokens)
    module.set_pixel_budget(processor, max_pixels=width * height)
    model = module.get_model_class(args.model_dir, {}).from_pretrained(
        args.model_dir, dtype=torch.float32, attn_implementation="sdpa"
    )
    batch = build_group(processor, args.image, width, height, args.num_generations, args.completion_tokens, args.seed)
    return torch, module, processor, model, batch


# ---- child phases --------------------------------------------------------------------------------------------------
def grpo_loss(logps, advantages, mask, eps: float = 0.2):
    """GRPO's clipped surrogate on one step (old log-probs = the current ones, detached), token-mean over the mask."""
    import torch

    ratio = torch.exp(logps - logps.detach())
    a = advantages[:, None]
    per_token = -torch.min(ratio * a, torch.clamp(ratio, 1 - eps, 1 + eps) * a)
    return (per_token * mask).sum() / mask.sum().clamp(min=1)


def child_train(args) -> dict:
    torch, module, processor, model, batch = load(args)
    from contextlib import nullcontext
    from types import SimpleNamespace

    from trl import GRPOTrainer
    from trl.trainer.utils import add_fused_lm_head

    from vlm_r1 import shared_prompt as sp

    add_fused_lm_head(model, outputs=("log_probs", "entropy"))
    model.train()
    G, C = args.num_generations, args.completion_tokens
    ids, am, mm, grid, nimg = (
        batch[k] for k in ("input_ids", "attention_mask", "mm_token_type_ids", "image_grid_thw", "num_images")
    )
    mask = batch["completion_mask"].float()
    if args.variant == "shared":
        pixel_values = sp.dedup_pixel_values(batch["pixel_values"], grid, nimg, G)
        counts = sp.token_counts(am, C, G, grid, nimg)
        positions_fn = module.shared_prompt_positions_fn(model)
    else:
        pixel_values = batch["pixel_values"]
        counts = sp.token_counts(am, C, None, grid, nimg)
        trainer = SimpleNamespace(accelerator=SimpleNamespace(autocast=nullcontext, is_main_process=True))
    del batch["pixel_values"], batch["unique"]
    pad_id = processor.tokenizer.pad_token_id
    stats: dict = {}

    def step():
        model.zero_grad(set_to_none=True)
        if args.variant == "shared":
            stats.clear()
            lp, en = sp.per_token_logps_and_entropies(
                model,
                ids,
                am,
                C,
                num_generations=G,
                positions_fn=positions_fn,
                compute_entropy=True,
                pixel_values=pixel_values,
                image_grid_thw=grid,
                num_images=nimg,
                mm_token_type_ids=mm,
                attention="dense",
                pad_token_id=pad_id,
                stats=stats,
            )
        else:
            lp, en, _ = GRPOTrainer._get_per_token_logps_and_entropies(
                trainer,
                model,
                ids,
                am,
                C,
                compute_entropy=True,
                pixel_values=pixel_values,
                image_grid_thw=grid,
                num_images=nimg,
                mm_token_type_ids=mm,
            )
        loss = grpo_loss(lp, batch["advantages"], mask)
        loss.backward()
        return lp.detach(), en.detach(), loss.detach().item()

    with PeakRSS() as mem:  # the first step of a fresh process: memory measurement and warm-up
        t0 = time.perf_counter()
        lp, en, loss = step()
        first_s = time.perf_counter() - t0
    grads = {n: p.grad.detach().clone() for n, p in model.named_parameters() if p.grad is not None}
    torch.save({"logps": lp, "entropies": en, "loss": loss, "grads": grads}, args.tensors_out)
    del grads
    wall, cpu = [], []
    for _ in range(args.repeats):
        gc.collect()
        t0, c0 = time.perf_counter(), time.process_time()
        step()
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    model.zero_grad(set_to_none=True)
    out = {
        "llm_tokens": counts["llm_tokens"],
        "naive_llm_tokens": counts["naive_llm_tokens"],
        "vision_patches": int(pixel_values.size(0)),
        "vision_patches_token_counts": counts["vision_patches"],
        "policy_fwd_bwd_s": round(statistics.median(wall), 4),
        "policy_fwd_bwd_s_min": round(min(wall), 4),
        "policy_fwd_bwd_s_all": [round(t, 4) for t in wall],
        "policy_fwd_bwd_cpu_s": round(statistics.median(cpu), 4),
        "policy_fwd_bwd_cpu_share": cpu_share(wall, cpu, args.threads),
        "policy_fwd_bwd_first_s": round(first_s, 4),
        "loss": loss,
        "prompt_tokens": batch["prompt_tokens"],
        "image_tokens": batch["image_tokens"],
        "completion_tokens": batch["completion_tokens"],
        "image_size_wh": batch["image_size_wh"],
        "memory_method": mem.method,
        **mem.as_dict("train"),
        "process_peak_rss_mb": round(_maxrss_mb(), 1),
    }
    if args.variant == "shared":
        out["shared_stats"] = dict(stats)
    return out


def child_generate(args) -> dict:
    torch, module, processor, model, batch = load(args)
    from transformers import DynamicCache

    model.eval()
    G, C = args.num_generations, args.completion_tokens
    owner = module._rope_owner(model)
    uni = batch.pop("unique")
    gen_kwargs = dict(
        do_sample=False,
        max_new_tokens=C,
        min_new_tokens=C,
        pad_token_id=processor.tokenizer.pad_token_id,
        output_logits=True,
        return_dict_in_generate=True,
    )
    if args.variant == "naive":
        inputs = {
            "input_ids": batch["prompt_ids"],
            "attention_mask": batch["prompt_mask"],
            "pixel_values": batch["pixel_values"],
            "image_grid_thw": batch["image_grid_thw"],
            "mm_token_type_ids": batch["prompt_mm_token_type_ids"],
        }
        vision_patches = int(inputs["pixel_values"].size(0))
        llm_prefill_tokens = int(inputs["attention_mask"].sum())

        def prefill():
            owner.rope_deltas = None
            model(**inputs, past_key_values=DynamicCache(config=model.config), use_cache=True, logits_to_keep=1)

        def generate():
            owner.rope_deltas = None
            return model.generate(**inputs, **gen_kwargs)
    else:
        inputs = {
            k: uni[k] for k in ("input_ids", "attention_mask", "pixel_values", "image_grid_thw", "mm_token_type_ids")
        }
        del batch["pixel_values"]
        vision_patches = int(inputs["pixel_values"].size(0))
        llm_prefill_tokens = int(inputs["attention_mask"].sum()) - 1

        def prefill():
            return module.shared_prompt_prefill(model, inputs, G)

        def generate():
            return model.generate(**module.shared_prompt_prefill(model, inputs, G), **gen_kwargs)

    with torch.no_grad():
        with PeakRSS() as mem_gen:  # first call of a fresh process: memory (prefill included) and warm-up
            result = generate()
        prefill()  # warm-up
        P = inputs["input_ids"].size(1)
        torch.save({"logits": torch.stack(result.logits, 1), "tokens": result.sequences[:, P:]}, args.tensors_out)
        del result
        pre_s, pre_cpu, gen_s, gen_cpu = [], [], [], []
        for _ in range(args.repeats):
            gc.collect()
            t0, c0 = time.perf_counter(), time.process_time()
            prefill()
            pre_s.append(time.perf_counter() - t0)
            pre_cpu.append(time.process_time() - c0)
            gc.collect()
            t0, c0 = time.perf_counter(), time.process_time()
            generate()
            gen_s.append(time.perf_counter() - t0)
            gen_cpu.append(time.process_time() - c0)
    return {
        "prefill_s": round(statistics.median(pre_s), 4),
        "prefill_s_min": round(min(pre_s), 4),
        "prefill_s_all": [round(t, 4) for t in pre_s],
        "prefill_cpu_s": round(statistics.median(pre_cpu), 4),
        "prefill_cpu_share": cpu_share(pre_s, pre_cpu, args.threads),
        "generate_s": round(statistics.median(gen_s), 4),
        "generate_s_min": round(min(gen_s), 4),
        "generate_s_all": [round(t, 4) for t in gen_s],
        "generate_cpu_s": round(statistics.median(gen_cpu), 4),
        "generate_cpu_share": cpu_share(gen_s, gen_cpu, args.threads),
        "prefill_llm_tokens": llm_prefill_tokens,
        "prefill_vision_patches": vision_patches,
        "memory_method": mem_gen.method,
        **mem_gen.as_dict("generate"),
    }


def run_child(args) -> None:
    import torch

    fn = child_train if args.phase == "train" else child_generate
    load_before = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    result = fn(args)
    result.update(
        {
            "variant": args.variant,
            "phase": args.phase,
            "torch_threads": torch.get_num_threads(),
            f"{args.phase}_loadavg_1min_start_end": [load_before, os.getloadavg()[0] if load_before else None],
        }
    )
    with open(args.json_out, "w", encoding="utf-8") as f:
        json.dump(result, f, indent=2)


# ---- parent --------------------------------------------------------------------------------------------------------
def build_model(workdir: str, size: str, max_pixels: int) -> str:
    """The tiny checkpoint in ``workdir`` (built once; reused when ``tiny_model_info.json`` says the same size)."""
    path = os.path.join(workdir, f"tiny_qwen2_5_vl_{size}")
    info = os.path.join(path, "tiny_model_info.json")
    if os.path.exists(info):
        with open(info, encoding="utf-8") as f:
            if json.load(f).get("size") == size:
                return path
    from vlm_r1.tiny import build_tiny_model

    return build_tiny_model("qwen2_5_vl", path, size=size, max_pixels=max_pixels)


def compare(workdir: str) -> dict:
    """Agreement of the two variants: log-probs, entropies, gradients (first train step), generation logits/tokens."""
    import torch

    def tensors(variant, phase):
        return torch.load(os.path.join(workdir, f"{variant}_{phase}.pt"), weights_only=True)

    a, b = tensors("naive", "train"), tensors("shared", "train")
    rel = {k: float((a["grads"][k] - b["grads"][k]).norm() / a["grads"][k].norm().clamp(min=1e-30)) for k in a["grads"]}
    worst = max(rel, key=rel.get)
    ga, gb = tensors("naive", "generate"), tensors("shared", "generate")
    checks = {
        "max_abs_logp_diff": float((a["logps"] - b["logps"]).abs().max()),
        "max_abs_entropy_diff": float((a["entropies"] - b["entropies"]).abs().max()),
        "loss_diff": abs(a["loss"] - b["loss"]),
        "grad_tensors": [len(a["grads"]), len(b["grads"])],
        "worst_grad_rel_error": rel[worst],
        "worst_grad_tensor": worst,
        "max_abs_generation_logit_diff": float((ga["logits"] - gb["logits"]).abs().max()),
        "same_greedy_completions": bool(torch.equal(ga["tokens"], gb["tokens"])),
        "logp_tolerance": LOGP_TOL,
    }
    checks["logps_agree"] = checks["max_abs_logp_diff"] < LOGP_TOL and checks["max_abs_entropy_diff"] < LOGP_TOL
    checks["same_grad_tensors"] = set(a["grads"]) == set(b["grads"])
    return checks


ROWS = [  # key, label, number format
    ("llm_tokens", "LLM tokens (policy fwd)", "{:,.0f}"),
    ("vision_patches", "vision patches (policy fwd)", "{:,.0f}"),
    ("policy_fwd_bwd_s", "policy fwd+bwd, s (median)", "{:.3f}"),
    ("policy_fwd_bwd_s_min", "policy fwd+bwd, s (min)", "{:.3f}"),
    ("policy_fwd_bwd_cpu_s", "policy fwd+bwd, CPU s (median)", "{:.3f}"),
    ("train_peak_rss_delta_mb", "train fwd+bwd peak RSS delta, MB", "{:,.1f}"),
    ("train_peak_rss_mb", "train fwd+bwd peak RSS, MB", "{:,.1f}"),
    ("prefill_llm_tokens", "prefill LLM tokens", "{:,.0f}"),
    ("prefill_s", "generation prefill, s (median)", "{:.3f}"),
    ("prefill_s_min", "generation prefill, s (min)", "{:.3f}"),
    ("prefill_cpu_s", "generation prefill, CPU s (median)", "{:.3f}"),
    ("generate_s", "generation total, s (median)", "{:.3f}"),
    ("generate_cpu_s", "generation total, CPU s (median)", "{:.3f}"),
    ("generate_peak_rss_delta_mb", "generation peak RSS delta, MB", "{:,.1f}"),
]


def main(argv: list[str] | None = None) -> dict:
    """Run the benchmark (parent) or one variant/phase (child); the parent returns and writes the results dict."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default=DEFAULT_OUT, help="JSON results path (default: %(default)s)")
    p.add_argument("--quick", action="store_true", help="smoke configuration: ~300-token prompt, 1 repeat")
    p.add_argument("--num-generations", type=int, default=8, help="G, rollouts per prompt (default: %(default)s)")
    p.add_argument(
        "--prompt-tokens",
        type=int,
        default=None,
        help="target prompt length in tokens, image included "
        "(default 2000; --quick 300); the image is sized to fill it",
    )
    p.add_argument("--completion-tokens", type=int, default=20, help="C, completion width (default: %(default)s)")
    p.add_argument(
        "--repeats", type=int, default=None, help="timed passes per measurement, median (default 3; --quick 1)"
    )
    p.add_argument(
        "--threads", type=int, default=os.cpu_count(), help="torch threads in every child (default: %(default)s)"
    )
    p.add_argument("--size", default="small", help="vlm_r1.tiny size (default: %(default)s)")
    p.add_argument("--image", default=DEFAULT_IMAGE, help="screenshot to resize (default: the committed web sample)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--workdir", default=None, help="checkpoint and per-child files (default: a temporary directory)")
    # internal: one child run
    p.add_argument("--variant", choices=VARIANTS, help=argparse.SUPPRESS)
    p.add_argument("--phase", choices=PHASES, help=argparse.SUPPRESS)
    p.add_argument("--json-out", help=argparse.SUPPRESS)
    p.add_argument("--tensors-out", help=argparse.SUPPRESS)
    p.add_argument("--model-dir", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.prompt_tokens is None:
        args.prompt_tokens = 300 if args.quick else 2000
    if args.repeats is None:
        args.repeats = 1 if args.quick else 3
    if args.variant:
        run_child(args)
        return {}

    t_start = time.perf_counter()
    tmp = None
    workdir = args.workdir
    if workdir is None:
        tmp = tempfile.TemporaryDirectory(prefix="bench_shared_prompt_")
        workdir = tmp.name
    os.makedirs(workdir, exist_ok=True)
    width, height = image_size_for_tokens(args.prompt_tokens)
    model_dir = build_model(workdir, args.size, width * height)  # an upper bound; children set the exact budget
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads), MKL_NUM_THREADS=str(args.threads))
    results: dict = {v: {} for v in VARIANTS}
    child_seconds = {}
    for phase in PHASES:
        for variant in VARIANTS:
            name = f"{variant}_{phase}"
            cmd = [
                sys.executable,
                os.path.abspath(__file__),
                "--variant",
                variant,
                "--phase",
                phase,
                "--json-out",
                os.path.join(workdir, name + ".json"),
                "--tensors-out",
                os.path.join(workdir, name + ".pt"),
                "--model-dir",
                model_dir,
                "--num-generations",
                str(args.num_generations),
                "--prompt-tokens",
                str(args.prompt_tokens),
                "--completion-tokens",
                str(args.completion_tokens),
                "--repeats",
                str(args.repeats),
                "--threads",
                str(args.threads),
                "--image",
                args.image,
                "--seed",
                str(args.seed),
            ]
            print(f"[{time.perf_counter() - t_start:6.1f}s] {name} ...", file=sys.stderr, flush=True)
            t0 = time.perf_counter()
            subprocess.run(cmd, check=True, env=env, cwd=REPO)
            child_seconds[name] = round(time.perf_counter() - t0, 1)
            with open(os.path.join(workdir, name + ".json"), encoding="utf-8") as f:
                results[variant].update(json.load(f))
    checks = compare(workdir)

    import torch
    import transformers
    import trl

    ratios = {}
    for key, _, _ in ROWS:
        a, b = results["naive"].get(key), results["shared"].get(key)
        if a is not None and b:
            ratios[key] = round(a / b, 2)
    targets = {k: {"target_x": t, "ratio_x": ratios.get(k), "met": ratios.get(k, 0) >= t} for k, t in TARGETS.items()}
    naive_train = results["naive"]
    report = {
        "benchmark": "shared-prompt GRPO vs naive (TRL 1.16 layout), one group",
        "settings": {
            "num_generations": args.num_generations,
            "prompt_tokens_target": args.prompt_tokens,
            "image_size_wh": naive_train["image_size_wh"],
            "max_pixels": math.prod(naive_train["image_size_wh"]),
            "image": os.path.relpath(args.image, REPO),
            "prompt_tokens": naive_train["prompt_tokens"],
            "image_tokens": naive_train["image_tokens"],
            "completion_tokens": naive_train["completion_tokens"],
            "completion_tokens_max": args.completion_tokens,
            "repeats": args.repeats,
            "quick": args.quick,
            "model": f"tiny random qwen2_5_vl, size {args.size!r} (vlm_r1.tiny)",
            "dtype": "float32",
            "attn_implementation": "sdpa",
            "shared_attention": "dense",
            "seed": args.seed,
        },
        "machine": {
            "cpu_count": os.cpu_count(),
            "torch_threads": naive_train.get("torch_threads"),
            "python": sys.version.split()[0],
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            "trl": trl.__version__,
            "platform": platform.platform(),
        },
        "variants": results,
        "ratios_naive_over_shared": ratios,
        "targets": targets,
        "all_targets_met": all(t["met"] for t in targets.values()),
        "checks": checks,
        "child_seconds": child_seconds,
        "total_seconds": None,
    }
    G = args.num_generations
    width, height = naive_train["image_size_wh"]
    report["total_seconds"] = round(time.perf_counter() - t_start, 1)

    print(
        f"\nshared-prompt GRPO vs naive: G={G}, prompt {report['settings']['prompt_tokens']:,} tokens "
        f"(image {width}x{height}), completions <= {args.completion_tokens}, tiny {args.size} Qwen2.5-VL fp32 sdpa, "
        f"{report['machine']['torch_threads']} threads / {os.cpu_count()} CPUs, median of {args.repeats}"
    )
    print(f"{'':<34} {'naive':>12} {'shared':>12} {'ratio':>8}  target")
    for key, label, fmt in ROWS:
        a, b = results["naive"].get(key), results["shared"].get(key)
        r = f"{ratios[key]:.2f}x" if key in ratios else "-"
        t = targets.get(key)
        mark = f">= {t['target_x']:g}x {'met' if t['met'] else 'MISSED'}" if t else ""
        print(f"{label:<34} {fmt.format(a):>12} {fmt.format(b):>12} {r:>8}  {mark}")
    print(
        f"checks: max |dlogp| {checks['max_abs_logp_diff']:.2e}, max |dentropy| {checks['max_abs_entropy_diff']:.2e} "
        f"(< {LOGP_TOL:g}: {checks['logps_agree']}), worst grad rel err {checks['worst_grad_rel_error']:.2e}, "
        f"gen max |dlogit| {checks['max_abs_generation_logit_diff']:.2e}, same greedy tokens "
        f"{checks['same_greedy_completions']}"
    )
    shares = {v: min(results[v][k] for k in SHARE_KEYS) for v in VARIANTS}
    report["min_cpu_share"] = shares
    report["timings_reliable"] = min(shares.values()) >= MIN_CPU_SHARE
    loads = [results[v][k][0] for v in VARIANTS for k in results[v] if k.endswith("_loadavg_1min_start_end")]
    print(
        f"CPU share of the timed passes (CPU time / (wall x threads); ~1 on an idle machine): naive "
        f"{shares['naive']:.2f}, shared {shares['shared']:.2f}; 1-min load average at child starts "
        f"{', '.join(f'{x:.1f}' for x in loads if x is not None)}"
    )
    if not report["timings_reliable"]:
        print(
            f"WARNING: CPU share below {MIN_CPU_SHARE}: other processes competed for the cores, wall times (and the "
            "time ratios) are unreliable; rerun on an idle machine"
        )
    print(f"all targets met: {report['all_targets_met']}; total {report['total_seconds']}s; JSON: {args.out}")
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(report, f, indent=2)
    if tmp is not None:
        tmp.cleanup()
    return report


if __name__ == "__main__":
    main()
