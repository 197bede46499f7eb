"""The benchmark interface: read a published benchmark folder, and turn per-sample judgements into its metrics.

A benchmark module knows only its file format and its breakdown keys (lm-evaluation-harness style); prediction
backends and model adapters are separate axes (``gui_grounding.eval.backends``, ``gui_grounding.models.adapters``).
"""

from __future__ import annotations

from gui_grounding.data.schema import LoadReport, Sample


class Benchmark:
    """Base class. Subclasses set ``name`` and ``layout_help`` and implement ``load``, ``metrics`` and ``table``."""

    name = "base"
    # Place in `--benchmark` listings and the registry's order (then by name); built-ins use 10..50.
    listing_order = 100
    # Where the benchmark is published and how to lay it out locally; shown by `gui-grounding eval --help`.
    layout_help = ""
    # Whether ``load`` must be able to read every screenshot. ``run_eval`` sets it False when it only rescores a
    # predictions file: a missing or unreadable image then keeps its record in the denominator, with a warning
    # (``ImageSizes(need_pixels=False)``), since scoring a point against a box needs no pixels.
    need_pixels = True

    def load(self, data_dir: str, *, strict: bool = False) -> tuple[list[Sample], LoadReport]:
        """Read ``data_dir`` (laid out as published) into samples in original pixels with stable ``sample_id``s.

        Bad records are skipped and counted in the report (or raise in strict mode), naming file and index.
        Benchmark metadata needed by ``metrics`` (group, application, platform, data_source, bucket, classes, ...)
        goes in ``Sample.extra`` / ``platform`` / ``ui_type``.
        """
        raise NotImplementedError

    def metrics(self, samples: list[Sample], results: dict[str, dict]) -> dict:
        """Benchmark metrics from ``results[sample_id] = {"correctness": correct|wrong|wrong_format, "point": ...}``.

        Every sample must have a result (the caller fills missing predictions as ``wrong_format``).
        """
        raise NotImplementedError

    def table(self, metrics: dict) -> str:
        """A readable Markdown table of ``metrics`` (for results.md and the terminal)."""
        raise NotImplementedError
