"""Throughput of ``gui-grounding convert`` on a synthetic GTA1-format JSON list (records/s, peak RSS).

    python benchmarks/bench_convert.py --records 100000 --images 200 --workers 1 --verify header decode \
        --out runs/bench_convert.json

Builds, in ``--tmp`` (default ``/tmp/bench_convert``, never committed): an image root with ``--images`` image names,
each a symbolic link to one of the real screenshots in ``data/web_sample/images`` (cycled), and a GTA1 JSON list
(``image``, ``bbox`` in 0-1000, ``conversations``) of ``--records`` records, seeded. About 1% of the records name a
missing image, 1% have a box sticking a little out of the image (clipped) and 1% repeat an earlier record
(duplicates), so the reject and clipping paths are exercised too. Each ``--verify`` mode (``--verify-images``:
``header`` reads each unique image's header, ``decode`` decodes each unique image once) and ``--workers`` value runs
in a fresh Python process (``convert(..., workers=N, verify_images=MODE)``, the list streamed by ``groundwork.records.iter_records``), ``--repeats``
times, side by side; the report gives the median
records/s, the peak resident memory of that process (``VmHWM``) and its peak after imports
(transformers, pulled in by ``gui_grounding.models.frames``, is most of it), so the converter's own share is visible.
Besides records/s of wall-clock time it reports records per CPU-second of the converting process (user + system),
which does not move when other jobs share the cores.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SAMPLE_IMAGES = os.path.join(ROOT, "data", "web_sample", "images")

CHILD = r"""
import json, resource, sys, time


def peak_kib():
    # VmHWM: this process's own peak RSS (ru_maxrss can carry the parent's high-water mark across fork + exec)
    try:
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))
    except (OSError, StopIteration):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


from gui_grounding.data.convert import convert

base = peak_kib()
data, root, out, workers, verify = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
cpu = time.process_time()
report = convert("gta1", [data], root, out, workers=workers, progress=False, verify_images=verify)
cpu = time.process_time() - cpu
print(json.dumps({"summary": report.to_dict(), "peak_rss_kib": peak_kib(), "rss_after_imports_kib": base,
                  "cpu_s": cpu}))
"""


def build_inputs(tmp: str, records: int, images: int, seed: int) -> tuple[str, str]:
    """Write the image root (symlinks) and the GTA1 JSON list under ``tmp``; returns ``(data_path, image_root)``."""
    real = sorted(os.path.join(SAMPLE_IMAGES, n) for n in os.listdir(SAMPLE_IMAGES) if n.endswith(".png"))
    if not real:
        raise SystemExit(f"no PNG in {SAMPLE_IMAGES}")
    root = os.path.join(tmp, "images")
    os.makedirs(os.path.join(root, "shots"), exist_ok=True)
    for i in range(images):
        link = os.path.join(root, "shots", f"img_{i:05d}.png")
        if not os.path.islink(link):
            os.symlink(real[i % len(real)], link)
    rng = random.Random(seed)
    verbs = ["Click", "Open", "Select", "Press", "Choose", "Go to"]
    nouns = ["the search box", "the menu", "settings", "the next page link", "the logo", "the download button"]
    data = os.path.join(tmp, f"gta1_{records}.json")
    out = []
    for i in range(records):
        kind = rng.random()
        if kind < 0.01 and out:  # duplicate of an earlier record
            out.append(dict(out[rng.randrange(len(out))]))
            continue
        x0, y0 = rng.randint(0, 900), rng.randint(0, 900)
        box = [x0, y0, x0 + rng.randint(5, 99), y0 + rng.randint(5, 99)]
        if kind > 0.99:  # sticks 1-4 units (of 1000) out of the image: clipped
            box[2] = 1000 + rng.randint(1, 4)
        image = f"shots/img_{rng.randrange(images):05d}.png" if not 0.01 <= kind < 0.02 else f"shots/gone_{i}.png"
        text = f"{rng.choice(verbs)} {rng.choice(nouns)} #{i}"
        out.append(
            {
                "id": i,
                "image": image,
                "bbox": box,
                "conversations": [{"from": "human", "value": f"<image>{text}"}, {"from": "gpt", "value": "(0, 0)"}],
            }
        )
    with open(data, "w", encoding="utf-8") as f:
        json.dump(out, f)
    return data, root


def main() -> None:
    """Build the inputs, run each worker count in a fresh process, print and optionally save the results."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=100_000, help="records in the synthetic JSON list")
    ap.add_argument("--images", type=int, default=200, help="distinct image names (links to the real screenshots)")
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 4], help="worker counts to compare")
    ap.add_argument(
        "--verify",
        nargs="+",
        default=["header", "decode"],
        choices=["none", "header", "decode"],
        help="--verify-images modes to compare (default: header decode)",
    )
    ap.add_argument("--repeats", type=int, default=3, help="runs per worker count (median reported)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the synthetic records")
    ap.add_argument("--tmp", default="/tmp/bench_convert", help="scratch folder (inputs and outputs)")
    ap.add_argument("--out", default=None, help="write the results as JSON here")
    args = ap.parse_args()

    os.makedirs(args.tmp, exist_ok=True)
    data, root = build_inputs(args.tmp, args.records, args.images, args.seed)
    size_mb = os.path.getsize(data) / 2**20
    print(
        f"input: {data} ({args.records} records, {size_mb:.1f} MiB), image root {root} ({args.images} names -> "
        f"{len(os.listdir(SAMPLE_IMAGES))} real screenshots); {os.cpu_count()} CPU(s)"
    )
    results = []
    for verify, workers in [(v, w) for v in args.verify for w in args.workers]:
        runs = []
        for r in range(args.repeats):
            out = os.path.join(args.tmp, f"out_{verify}_w{workers}_r{r}.jsonl")
            proc = subprocess.run(
                [sys.executable, "-c", CHILD, data, root, out, str(workers), verify],
                cwd=ROOT,
                capture_output=True,
                text=True,
                check=True,
            )
            runs.append(json.loads(proc.stdout.strip().splitlines()[-1]))
        rates = [run["summary"]["records_per_s"] for run in runs]
        s = runs[0]["summary"]
        results.append(
            {
                "verify_images": verify,
                "workers": workers,
                "records": s["records"],
                "samples": s["samples"],
                "rejected": s["rejected"],
                "clipped": s["clipped"],
                "reasons": s["reasons"],
                "records_per_s_median": statistics.median(rates),
                "records_per_s_runs": rates,
                "elapsed_s_runs": [run["summary"]["elapsed_s"] for run in runs],
                "records_per_cpu_s_median": round(statistics.median(s["records"] / run["cpu_s"] for run in runs)),
                "peak_rss_mib": round(max(run["peak_rss_kib"] for run in runs) / 1024, 1),
                "rss_after_imports_mib": round(max(run["rss_after_imports_kib"] for run in runs) / 1024, 1),
            }
        )
    outputs = {
        open(os.path.join(args.tmp, f"out_{v}_w{w}_r0.jsonl"), "rb").read() for v in args.verify for w in args.workers
    }
    print(
        f"{'verify':>7} {'workers':>7} {'records/s':>10} {'rec/CPU-s':>10} {'peak RSS MiB':>13} {'RSS after imports':>18} "
        f"{'samples':>8} {'rejected':>9} {'clipped':>8}"
    )
    for r in results:
        print(
            f"{r['verify_images']:>7} {r['workers']:>7} {r['records_per_s_median']:>10.0f} "
            f"{r['records_per_cpu_s_median']:>10} {r['peak_rss_mib']:>13.1f} "
            f"{r['rss_after_imports_mib']:>18.1f} {r['samples']:>8} {r['rejected']:>9} {r['clipped']:>8}"
        )
    print(f"outputs identical across verify modes and worker counts: {len(outputs) == 1}")
    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w", encoding="utf-8") as f:
            json.dump(
                {
                    "input_mib": round(size_mb, 1),
                    "cpus": os.cpu_count(),
                    "results": results,
                    "outputs_identical": len(outputs) == 1,
                },
                f,
                indent=1,
            )


if __name__ == "__main__":
    main()
