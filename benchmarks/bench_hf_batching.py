"""Throughput of the ``hf`` prediction backend: batched (``--batch-size``, default 8) vs one sample at a time.

Runs ``gui_grounding.eval.backends.hf.predict_points`` (greedy, left padding, vision tokens banned, GTA1 adapter)
on real screenshots of ``data/web_sample/test.jsonl`` with a tiny random Qwen2.5-VL built offline (or ``--model``),
and prints a table of samples/s; ``--out`` gets the same figures as JSON. Not a test: numbers depend on the machine.

    .venv/bin/python benchmarks/bench_hf_batching.py --out runs/bench_hf_batching.json

Samples are taken round-robin over the distinct screenshots (the test split has 10: five 1280x720 and five
1024x768), so every batch mixes image sizes and prompt lengths, i.e. real left padding.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time


def pick_samples(data: str, n: int) -> list:
    """``n`` samples of ``data``, round-robin over its distinct screenshots (file order within each)."""
    from gui_grounding.data.schema import load_samples

    samples, _ = load_samples([data])
    by_image: dict[str, list] = {}
    for s in samples:
        by_image.setdefault(s.image_path, []).append(s)
    queues, picked = list(by_image.values()), []
    while len(picked) < n and any(queues):
        for q in queues:
            if q and len(picked) < n:
                picked.append(q.pop(0))
    return picked


def main(argv: list[str] | None = None) -> dict:
    """Run the benchmark; returns (and writes to ``--out``) the results dict."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, help="JSON results path")
    p.add_argument("--data", default="data/web_sample/test.jsonl", help="canonical JSONL with the screenshots")
    p.add_argument("--model", default=None, help="checkpoint (default: a tiny random Qwen2.5-VL built in a tmp dir)")
    p.add_argument("--num-samples", type=int, default=32, help="samples per timed pass")
    p.add_argument("--batch-size", type=int, default=8, help="batch size of the batched mode")
    p.add_argument("--repeats", type=int, default=3, help="timed passes per mode (median reported)")
    p.add_argument("--max-new-tokens", type=int, default=32, help="generation budget (GTA1 inference: 32)")
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's own choice)")
    args = p.parse_args(argv)

    import torch

    from gui_grounding.eval.backends.hf import predict_points
    from vlm_r1.modules import get_vlm_module

    if args.threads:
        torch.set_num_threads(args.threads)
    tmp = None
    model_path = args.model
    if model_path is None:
        from vlm_r1.tiny import build_tiny_model

        tmp = tempfile.TemporaryDirectory()
        model_path = build_tiny_model("qwen2_5_vl", tmp.name)
    module = get_vlm_module(model_path)
    processor = module.load_processor(model_path)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    model = module.get_model_class(model_path, {}).from_pretrained(model_path, dtype=dtype).to(device)
    samples = pick_samples(args.data, args.num_samples)

    def run(batch_size: int) -> tuple[float, list[str]]:
        if device == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        recs = predict_points(
            model, processor, module, samples, "gta1", batch_size=batch_size, max_new_tokens=args.max_new_tokens
        )
        if device == "cuda":
            torch.cuda.synchronize()
        return time.perf_counter() - t0, [r["raw_response"] for r in recs]

    modes = {"serial": 1, "batched": args.batch_size}
    run(args.batch_size)  # warm-up (allocator, kernels, first-call overheads)
    results, answers = {}, {}
    for _ in range(args.repeats):  # interleave the modes so drift in machine load hits both alike
        for name, bs in modes.items():
            seconds, answers[name] = run(bs)
            results.setdefault(name, []).append(seconds)
    rows = {}
    for name, bs in modes.items():
        med = statistics.median(results[name])
        rows[name] = {
            "batch_size": bs,
            "seconds_per_pass": [round(t, 4) for t in results[name]],
            "median_seconds": round(med, 4),
            "samples_per_s": round(len(samples) / med, 2),
        }
    speedup = rows["batched"]["samples_per_s"] / rows["serial"]["samples_per_s"]
    report = {
        "model": args.model or "tiny random qwen2_5_vl (vlm_r1.tiny)",
        "num_samples": len(samples),
        "distinct_screenshots": len({s.image_path for s in samples}),
        "image_sizes": sorted({f"{s.width}x{s.height}" for s in samples}),
        "max_new_tokens": args.max_new_tokens,
        "repeats": args.repeats,
        "modes": rows,
        "speedup_batched_over_serial": round(speedup, 2),
        "same_answers_batched_and_serial": answers["batched"] == answers["serial"],
        "device": device,
        "torch_threads": torch.get_num_threads(),
        "cpu_count": os.cpu_count(),
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "platform": platform.platform(),
    }
    print(
        f"hf backend, {len(samples)} samples ({report['distinct_screenshots']} screenshots, "
        f"{', '.join(report['image_sizes'])}), max_new_tokens {args.max_new_tokens}, {device}, "
        f"{report['torch_threads']} threads, median of {args.repeats}"
    )
    print(f"{'mode':<8} {'batch':>5} {'s/pass':>8} {'samples/s':>10}")
    for name, row in rows.items():
        print(f"{name:<8} {row['batch_size']:>5} {row['median_seconds']:>8.3f} {row['samples_per_s']:>10.2f}")
    print(f"speedup {speedup:.2f}x; identical answers: {report['same_answers_batched_and_serial']}")
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(report, f, indent=2)
    if tmp is not None:
        tmp.cleanup()
    return report


if __name__ == "__main__":
    main()
