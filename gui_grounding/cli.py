"""``gui-grounding``: the command-line entry point (one subcommand per job).

    gui-grounding make-tiny-model --arch qwen2_5_vl --out runs/tiny
    gui-grounding collect-web /usr/share/doc/python3-doc/html --out data/web_sample
    gui-grounding train --model_name_or_path runs/tiny --data_file_paths data/web_sample/train.jsonl ...
    gui-grounding eval --data data/web_sample/test.jsonl --model runs/demo --out runs/demo/eval

``gui-grounding <subcommand> --help`` explains every flag.
"""

from __future__ import annotations

import argparse
import logging
import sys


def _make_tiny_model(args: argparse.Namespace) -> None:
    from vlm_r1.tiny import build_tiny_model

    out = build_tiny_model(args.arch, args.out, seed=args.seed, min_pixels=args.min_pixels,
                           max_pixels=args.max_pixels)  # fmt: skip
    print(f"wrote tiny {args.arch} checkpoint to {out}")


def _eval(args: argparse.Namespace) -> None:
    from gui_grounding.eval import run_eval

    kwargs = {}
    if args.model:
        kwargs = dict(batch_size=args.batch_size, min_pixels=args.min_pixels, max_pixels=args.max_pixels,
                      prompt_mode=args.prompt_mode, max_new_tokens=args.max_new_tokens)  # fmt: skip
    run_eval(args.data, args.out, model=args.model, predictions=args.predictions, limit=args.limit, **kwargs)


def _train(argv: list[str]) -> None:
    from vlm_r1.grpo_jsonl import main as grpo_main

    if not any(a == "--task_type" or a.startswith("--task_type=") for a in argv):
        argv = ["--task_type", "gui_grounding", *argv]
    grpo_main(argv)


def build_parser() -> argparse.ArgumentParser:
    """The ``gui-grounding`` argument parser with all subcommands."""
    parser = argparse.ArgumentParser(prog="gui-grounding", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    sub = parser.add_subparsers(dest="command", required=True, metavar="SUBCOMMAND")

    p = sub.add_parser("make-tiny-model", help="write a tiny randomly initialised Qwen-VL checkpoint (offline)",
                       description="Write a tiny, randomly initialised checkpoint of a real VLM architecture "
                       "(model, tokenizer, image processor, chat template) that loads with from_pretrained.")  # fmt: skip
    p.add_argument("--arch", choices=["qwen2_5_vl", "qwen2_vl"], default="qwen2_5_vl", help="architecture")
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument("--seed", type=int, default=0, help="seed of the random weights")
    p.add_argument("--min-pixels", type=int, default=3136, help="image processor min_pixels (smart_resize bound)")
    p.add_argument("--max-pixels", type=int, default=200_704, help="image processor max_pixels (smart_resize bound)")
    p.set_defaults(func=_make_tiny_model)

    from gui_grounding.collect.web import register_cli

    register_cli(sub)

    p = sub.add_parser("train", help="GRPO training (python -m vlm_r1.grpo_jsonl with --task_type gui_grounding)",
                       add_help=False)  # fmt: skip
    p.set_defaults(func=None)

    p = sub.add_parser("eval", help="predict click points and score them (accuracy table + metrics.json)",
                       description="Evaluate a model (or rescore a predictions file) on canonical JSONL data. "
                       "Writes predictions.jsonl (model mode), metrics.json and results.md into --out.")  # fmt: skip
    p.add_argument("--benchmark", choices=["canonical"], default="canonical",
                   help="data format: 'canonical' (our JSONL, also GTA1/VLM-R1 records)")
    p.add_argument("--data", nargs="+", required=True, help="JSONL/JSON data file(s)")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--model", help="checkpoint to predict with (transformers backend)")
    src.add_argument("--predictions", help="predictions JSONL to rescore: {sample_id, point: [x,y]|null, raw_response}")
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument("--batch-size", type=int, default=8, help="prompts per generate call")
    p.add_argument("--min-pixels", type=int, default=None, help="override the processor's smart_resize min_pixels")
    p.add_argument("--max-pixels", type=int, default=None, help="override the processor's smart_resize max_pixels")
    p.add_argument("--prompt-mode", choices=["non_thinking", "thinking"], default="non_thinking", help="prompt")
    p.add_argument("--max-new-tokens", type=int, default=32, help="generation budget per sample (GTA1: 32)")
    p.add_argument("--limit", type=int, default=None, help="evaluate only the first N samples")
    p.set_defaults(func=_eval)
    return parser


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "train":
        return _train(argv[1:])
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s",
                        datefmt="%H:%M:%S")  # fmt: skip
    args = build_parser().parse_args(argv)
    args.func(args)


if __name__ == "__main__":
    main()
