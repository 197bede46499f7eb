"""Benchmark registry: discovery of the benchmark modules, entry points and specs.

``BENCHMARKS`` maps a ``--benchmark`` name to its class; :func:`get_benchmark` builds one. Each module
(``screenspot_v2``, ``screenspot_pro``, ``osworld_g``, ``webclick``, ``canonical``) knows only its published file
layout and its breakdown keys; the scorer is the shared :func:`gui_grounding.eval.judge.judge`.

The registry (``REGISTRY``) is a :class:`groundwork.registry.Registry`: the built-in benchmarks above, then those that
installed packages declare under the entry-point group ``gui_grounding.benchmarks`` (name -> ``module:Class``; an
entry point replaces a built-in of the same name), and ``get_benchmark`` also takes a ``"package.module:Class"`` spec
directly. ``BENCHMARKS`` is built on first access (a plugin module may import this package), so it
includes the entry points installed at that time (after ``REGISTRY.refresh()``, at the next access).

The helpers the readers share (record readers, ids, boxes, image sizes, load reports) and the conventions they keep
are in :mod:`gui_grounding.data.annotations`; the accuracy cells and Markdown tables in :mod:`gui_grounding.eval.tables`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from groundwork.markdown import md_table
from groundwork.registry import Registry, discover
from gui_grounding.eval.benchmarks.base import Benchmark

ENTRY_POINT_GROUP = "gui_grounding.benchmarks"


def _builtins() -> dict[str, type[Benchmark]]:
    """The benchmarks of this package: every class a submodule lists in ``BENCHMARKS``
    (:func:`groundwork.registry.discover`, as model families and adapters are found), in ``--benchmark`` listing order
    (``Benchmark.listing_order``, then name). Adding a benchmark is adding its file (docs/ADDING_A_BENCHMARK.md)."""

    found = discover("gui_grounding.eval.benchmarks", "BENCHMARKS")
    return {cls.name: cls for cls in sorted(found, key=lambda c: (c.listing_order, c.name))}


#: built-ins + the entry-point group ``gui_grounding.benchmarks`` (name -> ``module:Class``), built lazily
REGISTRY = Registry("benchmark", ENTRY_POINT_GROUP, _builtins)

if TYPE_CHECKING:
    #: name -> benchmark class (a module attribute computed on access by ``__getattr__`` below)
    BENCHMARKS: dict[str, type[Benchmark]]


def __getattr__(name: str) -> Any:
    """``BENCHMARKS``: name -> class, the built-ins then the entry points (looked up on access, not at import, so a
    plugin module may import this package)."""
    if name == "BENCHMARKS":
        return REGISTRY.available()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def benchmarks_table() -> str:
    """A Markdown table of every registered benchmark: its headline rule, denominators (the authors' first), refusal
    handling and the source of the rule (docs/EVALUATION.md holds it; ``tests/test_headline.py`` keeps it in sync)."""
    rows = [
        [name, cls.headline_rule, " / ".join(cls.denominators), cls.refusal_handling, cls.headline_source or "-"]
        for name, cls in REGISTRY.available().items()
    ]
    return md_table(["benchmark", "headline rule", "denominators", "refusal items", "source"], rows, left=5)


def get_benchmark(name: str, **options) -> Benchmark:
    """The benchmark called ``name`` (a key of ``BENCHMARKS``, or a ``"package.module:Class"`` spec), built with
    ``options``.

    Options: ``osworld-g`` takes ``subset="auto"|"plain"|"refined"`` and ``denominator``; ``venusbench-gd`` takes
    ``denominator`` and ``language="en"|"cn"``; ``webclick`` takes ``cache_dir``.

    Raises:
        ValueError: unknown name (the message lists the registered ones), a spec that names nothing loadable, or
            options the benchmark does not take.
    """
    cls = REGISTRY.get_callable(name)
    try:
        return cls(**options)
    except TypeError as err:
        raise ValueError(f"benchmark {name!r} does not take options {sorted(options)}: {err}") from err


__all__ = ["BENCHMARKS", "benchmarks_table", "ENTRY_POINT_GROUP", "REGISTRY", "Benchmark", "get_benchmark"]
