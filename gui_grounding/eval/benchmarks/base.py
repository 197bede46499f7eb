"""The benchmark interface: read a published benchmark folder, and turn per-sample judgements into its metrics.

A benchmark module knows only its file format and its breakdown keys (lm-evaluation-harness style); prediction
backends and model adapters are separate axes (``gui_grounding.eval.backends``, ``gui_grounding.models.adapters``).
"""

from __future__ import annotations

from collections.abc import Callable

from gui_grounding.data.annotations import (
    BenchmarkLoadReport,
    ImageSizes,
    SampleIds,
    image_file,
    log_load_report,
    read_annotation_samples,
)
from gui_grounding.data.schema import LoadReport, Sample
from gui_grounding.eval.tables import headline_doc


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
    #: the authors' headline rule in words, and where it is defined (file:line at a pinned commit): printed above the
    #: breakdown and written to ``metrics.json["headline"]``
    headline_rule = "correct / total over all samples"
    headline_source = ""
    #: how the benchmark's items without a target are scored, in words (docs/EVALUATION.md's benchmark table)
    refusal_handling = "none: every item has a target"
    #: the denominators the headline can be reported over (:meth:`headline`); the first is the authors' own
    denominators: tuple[str, ...] = ("all",)
    #: each denominator's rule in words, where the benchmark has several (``--help``, the headline's ``rule``);
    #: a denominator not listed has :attr:`headline_rule`
    denominator_rules: dict[str, str] = {}
    #: the denominator this run reports its headline over (``None``: the authors', the first of :attr:`denominators`);
    #: a benchmark with several takes it as its ``denominator`` option (``__init__(..., denominator=None)``, checked
    #: with :meth:`check_denominator`; CLI ``--denominator``)
    denominator: str | None = None

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

    def check_denominator(self, denominator: str | None) -> str | None:
        """``denominator`` when it is ``None`` or one of :attr:`denominators`.

        Raises:
            ValueError: any other value (the message lists the choices).
        """
        if denominator is not None and denominator not in self.denominators:
            raise ValueError(
                f"{self.name}: denominator must be one of {', '.join(self.denominators)}, got {denominator!r}"
            )
        return denominator

    def score(self, samples: list[Sample], results: dict[str, dict]) -> dict:
        """:meth:`metrics` with the authors' headline first (``"headline"``: :meth:`headline` over this run's
        :attr:`denominator`): what ``metrics.json`` holds and every report prints first."""
        metrics = self.metrics(samples, results)
        return {"headline": self.headline(metrics), **metrics}

    def headline_cell(self, metrics: dict, denominator: str) -> dict:
        """The accuracy behind the headline over ``denominator`` (one of :attr:`denominators`): a
        :func:`gui_grounding.eval.tables.cell`, or ``{"accuracy": ...}`` alone for an average of averages (no single
        count, no interval). Default: ``metrics["overall"]``."""
        return metrics["overall"]

    def headline(self, metrics: dict, denominator: str | None = None) -> dict:
        """The authors' headline number of ``metrics`` (:func:`gui_grounding.eval.tables.headline_doc`): accuracy in
        percent over ``denominator`` (``None``: the first of :attr:`denominators`, the authors' rule), with the rule,
        the denominator and its source.

        Raises:
            ValueError: ``denominator`` is not one of :attr:`denominators`.
        """
        denominator = self.check_denominator(denominator or self.denominator) or self.denominators[0]
        rule = self.denominator_rules.get(denominator, self.headline_rule)
        return headline_doc(self.headline_cell(metrics, denominator), rule, denominator, self.headline_source)


class AnnotationLoad:
    """One load of a benchmark: the state and steps every reader shares (their one home).

    ``report`` (:class:`BenchmarkLoadReport`), ``sizes`` (:class:`ImageSizes`, each screenshot read once;
    ``need_pixels`` as the benchmark's :attr:`Benchmark.need_pixels`), ``ids`` (:class:`SampleIds`: every record's id,
    scored or not) and the ``samples`` read so far. :meth:`finish` ends every load the same way: the id check
    (:class:`~gui_grounding.data.annotations.DuplicateIdError`), the sample count and the logged report.
    """

    def __init__(self, need_pixels: bool = True):
        self.report, self.sizes, self.ids = BenchmarkLoadReport(), ImageSizes(need_pixels=need_pixels), SampleIds()
        self.samples: list[Sample] = []

    def read(
        self, path: str, make_sample: Callable[[str, dict, str], Sample], strict: bool, *, id_key="id", jsonl=False
    ) -> None:
        """Add the samples of one annotation file (:func:`read_annotation_samples` with this load's report and ids;
        ``jsonl``: a JSON-lines benchmark file, which need not start with a list)."""
        self.samples += read_annotation_samples(
            path, make_sample, self.report, strict, ids=self.ids, id_key=id_key, jsonl=jsonl
        )

    def image(self, image_dir: str, name, ref: str, stated=None) -> tuple[str, int, int]:
        """``(path, width, height)`` of a record's screenshot ``name``: inside ``image_dir`` (:func:`image_file`:
        ``path_outside_root`` otherwise), its size read once per load (:class:`ImageSizes`, ``stated`` the record's
        own size claim, used when rescoring without the image)."""
        path = image_file(image_dir, name, ref)
        width, height = self.sizes(path, ref, stated=stated, report=self.report)
        return path, width, height

    def finish(self, id_scope: str, where: str) -> tuple[list[Sample], BenchmarkLoadReport]:
        """``(samples, report)`` after the id check over ``id_scope`` and the report logged for ``where``.

        Raises:
            DuplicateIdError: a sample id was handed out twice.
        """
        self.ids.check(id_scope)
        self.report.num_samples = len(self.samples)
        log_load_report(self.report, where)
        return self.samples, self.report
