"""``gui-grounding``: the command-line entry point (one subcommand per job).

    gui-grounding make-tiny-model --arch qwen2_5_vl --out runs/tiny
    gui-grounding make-synthetic --out runs/synthetic
    gui-grounding toy learning --out runs/toy
    gui-grounding collect-web /usr/share/doc/python3-doc/html --out data/web_sample
    gui-grounding convert --format gta1 grounding.json --image-root /data/imgs --out data/canonical/gta1.jsonl
    gui-grounding clean data/canonical/gta1.jsonl --detector ocr+classic --out data/clean/gta1.jsonl
    gui-grounding train --config recipes/gta1/7b.yaml --dataset_name data.json --image_root imgs ...  (GTA1 entry)
    gui-grounding eval --data data/web_sample/test.jsonl --model runs/demo --out runs/demo/eval
    gui-grounding prompt --adapter gta1 --image-size 1920x1080 --instruction "Click the search box"
    gui-grounding profiles                      (pinned settings of published checkpoints, with sources)
    gui-grounding estimate --recipe recipes/gta1/7b.yaml --nnodes 1 --nproc-per-node 8   (peak GPU memory per rank)
    gui-grounding compare runs/baseline/eval runs/ours/eval --out runs/compare   (paired, sample by sample)
    gui-grounding eval --profile gta1-7b-2507 --benchmark screenspot-pro --data ScreenSpot-Pro --model ... --out ...

``gui-grounding <subcommand> --help`` explains every flag.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys

from groundwork import argtypes
from groundwork.argtypes import add_number_flag, flag_values, integer, number
from groundwork.outputs import OutputError
from gui_grounding.data.annotations import EvalInputError
from gui_grounding.data.clean import register_cli as register_clean
from gui_grounding.data.collect.web import register_cli
from gui_grounding.data.convert import register_cli as register_convert
from gui_grounding.data.schema import SampleError
from gui_grounding.data.synthetic import register_cli as register_synthetic
from gui_grounding.eval import benchmarks as benchmark_registry  # BENCHMARKS is looked up when the parser is built
from gui_grounding.eval.backends import REGISTRY as BACKEND_REGISTRY
from gui_grounding.eval.compare import add_parser as register_compare
from gui_grounding.eval.tts import (
    DEFAULT_SAMPLES,
    DEFAULT_TEMPERATURE,
    DEFAULT_TOP_P,
    DEFAULT_ZOOM,
    DEFAULT_ZOOM_CALLS,
    MAX_ZOOM_CALLS,
    TTS_MODES,
    TTSConfig,
)
from gui_grounding.models.adapters import ADAPTERS
from gui_grounding.models.consensus import DEFAULT_REGION, MAX_REGION, MAX_SAMPLES, MIN_REGION
from gui_grounding.models.profiles import PROFILES, describe_profile, get_profile, profile_dict, profiles_table
from gui_grounding.ops.difficulty import register_cli as register_difficulty
from gui_grounding.ops.prompt import register_cli as register_prompt
from gui_grounding.ops.toy import register_cli as register_toy
from gui_grounding.ops.toy_refusal import run_from_args as run_toy_refusal
from gui_grounding.ops.toy_zoom import run_from_args as run_toy_zoom
from vlm_r1.tiny import build_tiny_model, supported_archs
from vlm_r1.upstream import GTA1

#: make-tiny-model's image processor bounds (smart_resize pixels; :mod:`groundwork.argtypes`, the range in ``--help``)
_TINY_PIXELS = argtypes.integer(min=1, max=2**31 - 1)


def _make_tiny_model(args: argparse.Namespace) -> None:

    out = build_tiny_model(
        args.arch, args.out, seed=args.seed, min_pixels=args.min_pixels, max_pixels=args.max_pixels, size=args.size
    )
    print(f"wrote tiny {args.arch} checkpoint to {out}")


def _eval(args: argparse.Namespace) -> None:
    from gui_grounding.eval.run import run_eval  # the eval stack, loaded for the eval subcommand

    if args.min_pixels is not None and args.max_pixels is not None and args.min_pixels > args.max_pixels:
        raise SystemExit(
            f"gui-grounding eval: error: --min-pixels {args.min_pixels} exceeds --max-pixels {args.max_pixels}"
        )
    options = {}
    if args.subset:
        options["subset"] = args.subset
    if args.image_cache:
        options["cache_dir"] = args.image_cache
    if args.denominator:
        options["denominator"] = args.denominator
    if args.language:
        options["language"] = args.language
    kwargs = {}
    if args.model:
        kwargs = flag_values(args, "max_new_tokens", "min_pixels", "max_pixels", "max_tiles")
        if args.backend == "hf":
            kwargs["batch_size"] = args.batch_size
        elif args.backend == "openai":
            kwargs.update(flag_values(args, "base_url", "concurrency", "max_retries"))
    try:
        run_eval(
            args.benchmark,
            args.data,
            args.out,
            **flag_values(args, "model", "predictions", "backend", "adapter", "limit", "strict", "max_failures"),
            **flag_values(args, "on_duplicate", "predictions_format", "profile"),
            benchmark_options=options,
            tts=_tts_config(args),
            **kwargs,
        )
    except (EvalInputError, SampleError, FileNotFoundError, OutputError) as err:  # refused (or --strict): one line
        text = err.strerror if isinstance(err, OutputError) and err.strerror else str(err)  # no "[Errno N]"
        message = " ".join(text.split())
        raise SystemExit(f"gui-grounding eval: error: {message}") from None


def _add_tts_flags(p: argparse.ArgumentParser) -> None:
    """``--tts`` and its settings (``gui_grounding.eval.tts``)."""

    g = p.add_argument_group("test-time grounding (greedy and the mode side by side in one run)")
    g.add_argument(
        "--tts",
        choices=TTS_MODES,
        default="greedy",
        help="greedy (default: one greedy answer, the run as before); consensus: K sampled answers voted "
        "by GUI-RC's region rule (a box answer votes with its box, a point with a 50-px square; agreement stored as "
        "confidence); zoom: the greedy answer picks a "
        "window, the crop is asked again; zoom+consensus: both; zoom-tool: the model is offered a zoom tool "
        "and decides whether to call it (adapters with a tool-call format: gta1 family, qwen3-vl). With "
        "--predictions: consensus re-votes each line's 'samples', zoom modes score its tts.point",
    )
    k = integer(min=1, max=MAX_SAMPLES)
    add_number_flag(
        g,
        "--tts-samples",
        k,
        DEFAULT_SAMPLES,
        "K, answers sampled per screenshot (consensus modes; GUI-RC samples 64: use 64 to reproduce it)",
    )
    temp = number(min=0, max=100, min_open=True)
    add_number_flag(g, "--tts-temperature", temp, DEFAULT_TEMPERATURE, "sampling temperature (GUI-RC: 0.7)")
    top_p = number(min=0, max=1, min_open=True)
    add_number_flag(g, "--tts-top-p", top_p, DEFAULT_TOP_P, "nucleus sampling mass (GUI-RC: 0.95)")
    seed = integer(min=0, max=2**31 - 1)
    add_number_flag(g, "--tts-seed", seed, 0, "sampling seed (recorded; per sample and pass from it and the sample_id)")
    # gui_grounding.models.consensus.check_region: a narrower square votes for no point near the origin (int()
    # truncation), so the flag refuses it
    region = number(min=MIN_REGION, max=MAX_REGION)
    add_number_flag(
        g,
        "--tts-region",
        region,
        DEFAULT_REGION,
        "side of each sampled point's voting square, original pixels (GUI-RC: 50)",
    )
    zoom = number(min=0, max=1, min_open=True)
    add_number_flag(
        g, "--tts-zoom", zoom, DEFAULT_ZOOM, "zoom window side as a fraction of the screenshot's side (clamped to it)"
    )
    add_number_flag(
        g,
        "--max-zoom-calls",
        integer(min=1, max=MAX_ZOOM_CALLS),
        DEFAULT_ZOOM_CALLS,
        "zoom-tool: zoom calls the model may make per sample (a call after them is rejected: no point)",
    )


def _tts_config(args: argparse.Namespace):

    settings = flag_values(args, "samples", "temperature", "top_p", "seed", "region", "zoom", prefix="tts_")
    return TTSConfig(mode=args.tts, **settings, **flag_values(args, "max_zoom_calls"))


class _NamesOrSpecs(list):
    """``choices`` of a registry flag: the registered names (shown by ``--help`` and in the invalid-choice message),
    and any ``"package.module:object"`` spec (resolved by the registry when used)."""

    def __contains__(self, value) -> bool:
        return list.__contains__(self, value) or (isinstance(value, str) and ":" in value)


def _profiles(args: argparse.Namespace) -> None:
    import json

    if args.json:
        names = [args.name] if args.name else list(PROFILES)
        print(json.dumps({n: profile_dict(get_profile(n)) for n in names}, indent=2, ensure_ascii=False))
    elif args.name:
        print(describe_profile(get_profile(args.name)))
    else:
        print(profiles_table())
        print("\n" + "\n\n".join(describe_profile(p) for p in PROFILES.values()))


def _train(argv: list[str]) -> None:
    from gui_grounding.training.gta1 import main as train_main

    train_main(argv, dialect=GTA1)


def build_parser() -> argparse.ArgumentParser:
    """The ``gui-grounding`` argument parser with all subcommands (each added by its own function: ``_add_<name>``
    here, ``register_cli`` / ``add_parser`` in the module that runs it), in the order ``--help`` lists them."""
    parser = argparse.ArgumentParser(
        prog="gui-grounding", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="SUBCOMMAND")
    _add_make_tiny_model(sub)

    register_synthetic(sub)

    register_toy(sub, {"zoom": run_toy_zoom, "refusal": run_toy_refusal})

    register_cli(sub)

    register_convert(sub)

    register_clean(sub)
    _add_train(sub)
    _add_eval(sub)
    _add_profiles(sub)

    register_compare(sub)

    register_prompt(sub)
    register_difficulty(sub)

    from gui_grounding.ops.plan import register_estimate_cli

    register_estimate_cli(sub, dialect=GTA1)
    return parser


def _add_make_tiny_model(sub) -> None:
    """The ``make-tiny-model`` subcommand: a tiny random checkpoint of a real architecture (:mod:`vlm_r1.tiny`)."""
    p = sub.add_parser(
        "make-tiny-model",
        help="write a tiny randomly initialised Qwen-VL checkpoint (offline)",
        description="Write a tiny, randomly initialised checkpoint of a real VLM architecture "
        "(model, tokenizer, image processor, chat template) that loads with from_pretrained.",
    )

    p.add_argument(
        "--arch",
        choices=list(supported_archs()),
        default="qwen2_5_vl",
        help="architecture (config.model_type; families whose module implements build_tiny_checkpoint)",
    )
    p.add_argument("--out", required=True, help="output directory")
    add_number_flag(p, "--seed", argtypes.SEED, 0, "seed of the random weights")
    p.add_argument(
        "--size",
        choices=["tiny", "small"],
        default="tiny",
        help="tiny: hidden 64, 2 layers; small: hidden 128, 4 layers (~1M parameters)",
    )
    add_number_flag(p, "--min-pixels", _TINY_PIXELS, 3136, "image processor min_pixels (smart_resize bound)")
    add_number_flag(p, "--max-pixels", _TINY_PIXELS, 200_704, "image processor max_pixels (smart_resize bound)")
    p.set_defaults(func=_make_tiny_model)


def _add_train(sub) -> None:
    """The ``train`` subcommand: listed for ``--help`` only (:func:`main` hands ``train ARGS`` to the GTA1 trainer
    before parsing)."""
    p = sub.add_parser(
        "train", help="GTA1 GRPO training (python -m gui_grounding.train; see docs/GTA1.md)", add_help=False
    )
    p.set_defaults(func=None)


def _add_eval(sub) -> None:
    """The ``eval`` subcommand (:func:`_eval`, :func:`gui_grounding.eval.run.run_eval`): benchmark, data, model or
    predictions, backend, adapter, pixel budget, test-time mode and output flags."""
    layouts = "\n\n".join(
        f"{name}:\n{getattr(cls, 'layout_help', '')}" for name, cls in benchmark_registry.BENCHMARKS.items()
    )
    p = sub.add_parser(
        "eval",
        help="evaluate a model or rescore predictions on a GUI grounding benchmark",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Predict click points with a model (or rescore a predictions file) on a benchmark "
        "laid out locally as published, score them exactly as the official scorers do, and write "
        "metrics.json, results.md and failures.html into --out. Nothing is downloaded.",
        epilog="Where each benchmark is published and how to lay it out:\n\n" + layouts,
    )
    p.add_argument(
        "--benchmark",
        choices=_NamesOrSpecs(sorted(benchmark_registry.BENCHMARKS)),
        default="canonical",
        help="benchmark format (canonical = our JSONL, e.g. data/web_sample/test.jsonl; also a name "
        "registered under the entry-point group gui_grounding.benchmarks, or a package.module:Class spec)",
    )
    p.add_argument("--data", required=True, help="benchmark folder as published (canonical: a JSONL file or folder)")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--model", help="checkpoint (hf, vllm backends) or served model name (openai backend)")
    src.add_argument(
        "--predictions",
        help="predictions JSONL {sample_id, point: [x, y] | null (original pixels), "
        "raw_response} or an official ScreenSpot-Pro harness log, to rescore",
    )
    p.add_argument(
        "--out",
        required=True,
        help="output folder (created; refused if it is an existing file or one of the inputs; locked "
        "while the run writes it)",
    )
    p.add_argument(
        "--backend",
        choices=_NamesOrSpecs(BACKEND_REGISTRY.names()),
        default="hf",
        help="how the model runs: hf (transformers, here), openai (an OpenAI-compatible endpoint such as "
        "`vllm serve`), vllm (offline engine, GPU extra); also a name registered under the entry-point "
        "group gui_grounding.backends, or a package.module:function spec",
    )
    p.add_argument(
        "--adapter",
        choices=sorted(ADAPTERS),
        default=None,
        help="prompt + coordinate convention; "
        "default from config.model_type (qwen2_5_vl -> gta1, qwen2_vl -> qwen2-vl, qwen3_vl -> qwen3-vl, "
        "internvl -> internvl)",
    )
    positive = integer(min=1)
    add_number_flag(p, "--batch-size", positive, 8, "hf backend: prompts per generate call")

    p.add_argument(
        "--profile",
        choices=list(PROFILES),
        default=None,
        help="a published checkpoint's pinned settings (adapter, pixel budget, max_new_tokens, benchmark options; "
        "`gui-grounding profiles` lists them with their sources); flags given here win; metrics.json and "
        "results.md then show its published numbers next to ours",
    )
    add_number_flag(
        p,
        "--min-pixels",
        positive,
        None,
        "smart_resize min_pixels of the pixel budget (default: --profile, else the budget recorded with the "
        "checkpoint, else the adapter's published one; at most --max-pixels)",
    )
    add_number_flag(
        p,
        "--max-pixels",
        positive,
        None,
        "smart_resize max_pixels of the pixel budget (same defaults as --min-pixels; a value other than the "
        "checkpoint's recorded training budget is warned about)",
    )
    add_number_flag(
        p,
        "--max-tiles",
        positive,
        None,
        "InternVL: at most this many 448-px tiles per image (same defaults as --min-pixels)",
    )
    add_number_flag(
        p, "--max-new-tokens", positive, None, "generation budget per sample (default: --profile's, else 32 as GTA1)"
    )
    p.add_argument(
        "--base-url",
        default="http://127.0.0.1:8000/v1",
        help="openai backend: endpoint base URL (API key from $OPENAI_API_KEY, default 'EMPTY')",
    )
    concurrency, retries = integer(min=1, max=1024), integer(min=0, max=100)
    add_number_flag(p, "--concurrency", concurrency, 8, "openai backend: requests in flight")
    add_number_flag(p, "--max-retries", retries, 5, "openai backend: retries with exponential backoff (capped at 60 s)")
    p.add_argument(
        "--subset",
        default=None,
        help="OSWorld-G: 'plain' (OSWorld-G.json) or 'refined' "
        "(OSWorld-G_refined.json); default: the plain file when present",
    )
    several = {n: c.denominators for n, c in benchmark_registry.BENCHMARKS.items() if len(c.denominators) > 1}
    p.add_argument(
        "--denominator",
        default=None,
        help="the headline's denominator, for a benchmark that has several (metrics.json holds them all; the "
        "default is the authors' rule, listed first): "
        + "; ".join(f"{name}: {' | '.join(d)}" for name, d in several.items())
        + ". docs/EVALUATION.md says what each counts",
    )
    p.add_argument(
        "--language",
        choices=("en", "cn"),
        default=None,
        help="VenusBench-GD: the instruction language, en (the field 'instruction', the published command's "
        "--language en; default) or cn ('instruction_zh'); one language per run",
    )
    p.add_argument(
        "--image-cache",
        default=None,
        help="WebClick: folder for the images decoded from the parquet rows (default: DATA/.gui_grounding_images)",
    )
    add_number_flag(p, "--limit", positive, None, "evaluate only the first N samples")
    p.add_argument("--strict", action="store_true", help="stop at the first bad record or prediction line")
    p.add_argument(
        "--on-duplicate",
        choices=["first", "last"],
        default="error",
        help="several predictions for one sample: by default the file is refused (naming them); 'first' or "
        "'last' makes that line count (the others are counted in metrics.json). ScreenSpot-Pro harness "
        "logs, which repeat keys legitimately, are never refused",
    )
    p.add_argument(
        "--predictions-format",
        choices=["auto", "jsonl", "json-list", "harness-log"],
        default="auto",
        help="how to read --predictions: auto (default) takes a file for a ScreenSpot-Pro harness log only "
        "when it has the harness's full shape (one {details, metrics} object, every detail with the "
        "harness's keys), else our predictions; jsonl / json-list: our predictions (any framing: JSONL, "
        "a JSON list, both); harness-log: the harness's --log_path file",
    )
    _add_tts_flags(p)
    not_negative = integer(min=0)
    add_number_flag(p, "--max-failures", not_negative, 200, "wrong samples drawn in failures.html")
    p.set_defaults(func=_eval)


def _add_profiles(sub) -> None:
    """The ``profiles`` subcommand (:func:`_profiles`): the pinned settings of published checkpoints."""
    p = sub.add_parser(
        "profiles",
        help="list the pinned, cited evaluation settings of published checkpoints",
        description="List the profiles `gui-grounding eval --profile NAME` and `gui-grounding prompt "
        "--profile NAME` use: adapter (prompt, frame, parser), pixel budget, decoding, benchmark "
        "options, backends and published numbers, each value with its source.",
    )
    p.add_argument("name", nargs="?", default=None, help="one profile (default: all, as a table, then each in full)")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    p.set_defaults(func=_profiles)


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "train":
        return _train(argv[1:])
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S"
    )
    args = build_parser().parse_args(argv)
    try:
        args.func(args)
    except KeyboardInterrupt:
        raise SystemExit(130) from None
    except Exception as err:  # any error of a subcommand: one line, non-zero (GUI_GROUNDING_TRACEBACK=1 shows it)
        if os.environ.get("GUI_GROUNDING_TRACEBACK"):
            raise

        text = err.strerror if isinstance(err, OutputError) and err.strerror else str(err)  # no "[Errno N]"
        message = " ".join(text.split()) or type(err).__name__
        raise SystemExit(f"gui-grounding {argv[0] if argv else ''}: error: {type(err).__name__}: {message}") from None


if __name__ == "__main__":
    main()
