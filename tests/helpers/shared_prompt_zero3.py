"""One rank of ``tests/test_shared_prompt.py::test_zero3_two_processes`` (run under torchrun, 2 processes, gloo, CPU).

Wraps the tiny Qwen2.5-VL (fp32, fused LM head, vision tower trainable) in a DeepSpeed ZeRO-3 engine, then on this
rank's own prompts (different image sizes and pixels per rank) computes the log-probs and entropies with TRL's own
``_get_per_token_logps_and_entropies`` (naive layout) and with :func:`vlm_r1.shared_prompt.per_token_logps_and_entropies`
(one packed row per group), backpropagates TRL's loss through the engine for each, and gathers every parameter's full
gradient (``deepspeed.utils.safe_get_full_grad``; reduced over both ranks). Writes ``<out>/rank<r>.json`` with the
worst differences; the test asserts on them.

    python -m torch.distributed.run --nproc_per_node 2 tests/helpers/shared_prompt_zero3.py --model DIR --out DIR
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import torch

T0 = time.perf_counter()
TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, TESTS)
sys.path.insert(0, os.path.dirname(TESTS))

#: per rank: (image sizes, instructions): two groups of different prompt lengths, other prompts on the other rank
RANK_PROMPTS = {
    0: (((200, 120), (160, 300)), ("Click the search box.", "Open the settings menu, then the account page.")),
    1: (((224, 168), (140, 280)), ("Press the blue submit button.", "Select the second tab in the toolbar.")),
}
G = 4


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()

    import deepspeed
    import torch.distributed as dist
    from deepspeed.utils import safe_get_full_grad
    from test_shared_prompt import (
        build_prompts,
        grpo_loss,
        load_policy,
        max_rel_grad_error,
        naive_batch,
        shared_logps,
        trl_logps,
    )

    from vlm_r1.modules import get_vlm_module

    timings = {"imports": time.perf_counter() - T0}
    deepspeed.init_distributed(dist_backend="gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    try:
        module = get_vlm_module(args.model)
        processor = module.load_processor(args.model)
        torch.manual_seed(0)
        model = load_policy(args.model, "sdpa")
        n_params = sum(1 for p in model.parameters() if p.requires_grad)
        config = {
            "train_micro_batch_size_per_gpu": 2 * G,
            "gradient_accumulation_steps": 1,
            "zero_optimization": {"stage": 3, "stage3_param_persistence_threshold": 0},
            "optimizer": {"type": "SGD", "params": {"lr": 0.0}},
            "zero_allow_untested_optimizer": True,
        }
        engine, *_ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=config)
        engine.train()
        timings["engine"] = time.perf_counter() - T0
        sizes, instructions = RANK_PROMPTS[rank]
        texts, images = build_prompts(processor, seed=100 + rank, sizes=sizes, instructions=instructions)
        batch = naive_batch(processor, texts, images, G, seed=100 + rank)
        positions_fn = module.shared_prompt_positions_fn(engine)  # finds the inner model through the engine

        results = {}
        for name in ("naive", "shared"):
            if name == "naive":
                logps, entropies = trl_logps(engine, batch)
            else:
                logps, entropies = shared_logps(engine, batch, positions_fn)
            engine.backward(grpo_loss(logps, batch))
            grads = {}
            for pname, p in engine.module.named_parameters():
                full = safe_get_full_grad(p)
                if full is not None:
                    grads[pname] = full.detach().clone().float()
            results[name] = (logps.detach(), entropies.detach(), grads)
            engine.optimizer.zero_grad()
            timings[name] = time.perf_counter() - T0
        (ref_lp, ref_en, ref_g), (got_lp, got_en, got_g) = results["naive"], results["shared"]
        mask = batch["completion_mask"].bool()
        common = {k: ref_g[k] for k in ref_g if k in got_g}
        worst, worst_name = max_rel_grad_error(common, got_g)
        report = {
            "rank": rank,
            "world_size": world,
            "zero_stage": engine.zero_optimization_stage(),
            "prompt_lengths": batch["attention_mask"][:, : -batch["logits_to_keep"]].sum(1).tolist(),
            "max_dlogp": (got_lp - ref_lp).abs().max().item(),
            "max_dent": (got_en - ref_en).abs().max().item(),
            "masked_zero": bool((got_lp[~mask] == 0).all() and (ref_lp[~mask] == 0).all()),
            "max_grad_rel": worst,
            "worst_grad": worst_name,
            "n_grads": len(ref_g),
            "n_params": n_params,
            "same_grad_names": sorted(ref_g) == sorted(got_g),
            "timings_s": {k: round(v, 1) for k, v in timings.items()},
            "vision_grads": sum(1 for k in ref_g if ".visual." in f".{k}" and ref_g[k].norm() > 0),
        }
        with open(os.path.join(args.out, f"rank{rank}.json"), "w") as f:
            json.dump(report, f)
        print(json.dumps(report), flush=True)
        dist.barrier()
    finally:
        # destroy the group before exit: gloo may abort a worker that exits with it alive (issue 11)
        if dist.is_initialized():
            dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
