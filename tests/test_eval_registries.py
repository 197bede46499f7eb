"""Benchmark and prediction-backend registries (``groundwork.registry.Registry``): built-ins, entry points, specs."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys
from pathlib import Path

import pytest

from gui_grounding.cli import build_parser
from gui_grounding.eval import backends
from gui_grounding.eval import benchmarks as benchmarks_pkg
from gui_grounding.eval.backends import BACKENDS, get_backend, predict
from gui_grounding.eval.benchmarks import Benchmark, get_benchmark
from gui_grounding.eval.benchmarks.canonical import Canonical
from gui_grounding.eval.benchmarks.osworld_g import OSWorldG
from gui_grounding.eval.benchmarks.screenspot_pro import ScreenSpotPro
from gui_grounding.eval.benchmarks.screenspot_v2 import ScreenSpotV2
from gui_grounding.eval.benchmarks.webclick import WebClick

REPO = Path(__file__).resolve().parents[1]
BUILTIN_BENCHMARKS = {
    "screenspot-v2": ScreenSpotV2,
    "screenspot-pro": ScreenSpotPro,
    "osworld-g": OSWorldG,
    "webclick": WebClick,
    "canonical": Canonical,
}


class MyBench(Benchmark):
    """A third-party benchmark, addressed by spec (``f"{__name__}:MyBench"``: this module's import name)."""

    name = "my-bench"
    layout_help = "anything"

    def __init__(self, level: int = 1):
        self.level = level


CALLS: list[tuple[tuple, dict]] = []


def fake_backend(model, samples, out_path, *, adapter=None, **kwargs):
    """A third-party predict function: records its arguments, returns a marker."""
    CALLS.append(((model, samples, out_path), {"adapter": adapter, **kwargs}))
    return "fake-result:" + out_path


class _EntryPoint:
    """Enough of ``importlib.metadata.EntryPoint`` for ``Registry.available``."""

    def __init__(self, name: str, value: str, group: str):
        self.name, self.value, self.group = name, value, group

    def load(self):
        from groundwork.registry import load_spec

        return load_spec(self.value)


@pytest.fixture
def fake_entry_points(monkeypatch):
    """Installs ``{group: {name: "module:object"}}`` as the only entry points; both registries refreshed before and
    after."""
    installed: dict[str, dict[str, str]] = {}

    def entry_points(group=None, **_):
        return [_EntryPoint(n, v, group) for n, v in installed.get(group, {}).items()]

    monkeypatch.setattr(importlib.metadata, "entry_points", entry_points)
    backends.REGISTRY.refresh()
    benchmarks_pkg.REGISTRY.refresh()
    yield installed
    monkeypatch.undo()
    backends.REGISTRY.refresh()
    benchmarks_pkg.REGISTRY.refresh()


@pytest.fixture(autouse=True)
def _clear_calls():
    CALLS.clear()


# ---------------------------------------------------------------------------------------------------------------------
# built-ins


def test_builtin_names():
    assert benchmarks_pkg.REGISTRY.kind == "benchmark"
    assert benchmarks_pkg.REGISTRY.group == "gui_grounding.benchmarks"
    assert backends.REGISTRY.kind == "backend"
    assert backends.REGISTRY.group == "gui_grounding.backends"
    assert {n: benchmarks_pkg.BENCHMARKS[n] for n in BUILTIN_BENCHMARKS} == BUILTIN_BENCHMARKS  # a subset: the shape
    assert {"screenspot-v2", "screenspot-pro", "osworld-g", "webclick", "canonical"} <= set(benchmarks_pkg.BENCHMARKS)
    assert set(benchmarks_pkg.REGISTRY.names()) == set(benchmarks_pkg.BENCHMARKS) >= set(BUILTIN_BENCHMARKS)
    assert BACKENDS == ("hf", "openai", "vllm")
    assert set(backends.REGISTRY.names()) == {"hf", "openai", "vllm"}
    specs = {name: fn.spec for name, fn in backends.REGISTRY.available().items()}
    assert specs == {
        "hf": "gui_grounding.eval.backends.hf:predict_hf",
        "openai": "gui_grounding.eval.backends.openai_api:predict_openai",
        "vllm": "gui_grounding.eval.backends.vllm_engine:predict_vllm",
    }
    assert type(get_benchmark("screenspot-v2")) is ScreenSpotV2
    assert get_benchmark("osworld-g", subset="refined").subset == "refined"


def test_builtin_backend_resolves_lazily_to_its_function():
    from gui_grounding.eval.backends.openai_api import predict_openai

    assert backends.REGISTRY.get("openai").load() is predict_openai


# ---------------------------------------------------------------------------------------------------------------------
# module:object specs


def test_get_benchmark_spec():
    bench = get_benchmark(f"{__name__}:MyBench", level=3)
    assert type(bench) is MyBench
    assert bench.level == 3
    with pytest.raises(ValueError) as err:
        get_benchmark(f"{__name__}:MyBench", nope=1)
    assert str(err.value).startswith(f"benchmark '{__name__}:MyBench' does not take options ['nope']: ")
    with pytest.raises(ValueError) as err:
        get_benchmark("no_such_module_xyz:Bench")
    assert str(err.value) == (
        "benchmark 'no_such_module_xyz:Bench': cannot load 'no_such_module_xyz:Bench': No module "
        f"named 'no_such_module_xyz'; registered: {', '.join(benchmarks_pkg.BENCHMARKS)}"
    )


def test_predict_spec_calls_the_function_with_the_exact_arguments():
    samples = [object(), object()]
    got = predict(
        f"{__name__}:fake_backend", "my-model", samples, "out/p.jsonl", adapter="gta1", batch_size=2, max_new_tokens=7
    )
    assert got == "fake-result:out/p.jsonl"
    assert CALLS == [(("my-model", samples, "out/p.jsonl"), {"adapter": "gta1", "batch_size": 2, "max_new_tokens": 7})]
    assert get_backend(f"{__name__}:fake_backend") is fake_backend


def test_unknown_names_list_the_registered_ones():
    with pytest.raises(ValueError) as err:
        get_benchmark("screenspot")
    assert str(err.value) == f"unknown benchmark 'screenspot'; registered: {', '.join(benchmarks_pkg.BENCHMARKS)}"
    with pytest.raises(ValueError) as err:
        predict("tgi", "m", [], "x.jsonl", adapter="gta1")
    assert str(err.value) == "unknown backend 'tgi'; registered: hf, openai, vllm"
    with pytest.raises(ValueError) as err:
        predict(f"{__name__}:no_such_function", "m", [], "x.jsonl")
    assert str(err.value).startswith(f"backend '{__name__}:no_such_function': cannot load ")
    assert str(err.value).endswith("; registered: hf, openai, vllm")
    with pytest.raises(ValueError) as err:
        predict(f"{__name__}:REPO", "m", [], "x.jsonl")
    assert str(err.value) == f"backend '{__name__}:REPO' is {REPO!r}, not callable"


# ---------------------------------------------------------------------------------------------------------------------
# entry points


def test_entry_points_add_and_replace(fake_entry_points):
    fake_entry_points["gui_grounding.benchmarks"] = {
        "my-bench": f"{__name__}:MyBench",
        "canonical": f"{__name__}:MyBench",
    }
    fake_entry_points["gui_grounding.backends"] = {"fake": f"{__name__}:fake_backend", "hf": f"{__name__}:fake_backend"}
    backends.REGISTRY.refresh()
    benchmarks_pkg.REGISTRY.refresh()

    assert benchmarks_pkg.BENCHMARKS["canonical"] is MyBench and benchmarks_pkg.BENCHMARKS["my-bench"] is MyBench
    assert list(benchmarks_pkg.BENCHMARKS)[-1] == "my-bench"  # entry points after the built-ins
    assert type(get_benchmark("my-bench", level=5)) is MyBench
    assert type(get_benchmark("canonical")) is MyBench
    with pytest.raises(ValueError) as err:
        get_benchmark("nope")
    assert str(err.value) == f"unknown benchmark 'nope'; registered: {', '.join(benchmarks_pkg.BENCHMARKS)}"

    assert backends.REGISTRY.names() == ["hf", "openai", "vllm", "fake"]
    assert BACKENDS == ("hf", "openai", "vllm")
    assert predict("fake", "m1", [], "a.jsonl") == "fake-result:a.jsonl"
    assert predict("hf", "m2", [], "b.jsonl", adapter="qwen3-vl") == "fake-result:b.jsonl"  # replaced built-in
    assert CALLS == [(("m1", [], "a.jsonl"), {"adapter": None}), (("m2", [], "b.jsonl"), {"adapter": "qwen3-vl"})]
    with pytest.raises(ValueError) as err:
        predict("tgi", "m", [], "x.jsonl")
    assert str(err.value) == "unknown backend 'tgi'; registered: hf, openai, vllm, fake"

    # the CLI accepts the entry-point names, and specs, for --backend and --benchmark
    args = build_parser().parse_args(
        ["eval", "--benchmark", "my-bench", "--backend", "fake", "--data", "d", "--out", "o", "--model", "m"]
    )
    assert (args.benchmark, args.backend) == ("my-bench", "fake")


def test_entry_points_restored_after_refresh():
    """After the fixture above: back to the built-ins only."""
    assert "my-bench" not in benchmarks_pkg.BENCHMARKS and benchmarks_pkg.BENCHMARKS["canonical"] is Canonical
    assert backends.REGISTRY.names() == ["hf", "openai", "vllm"]


# ---------------------------------------------------------------------------------------------------------------------
# CLI and import weight


def test_cli_choices_accept_specs_and_refuse_unknown_names(capsys):
    args = build_parser().parse_args(
        [
            "eval",
            "--benchmark",
            f"{__name__}:MyBench",
            "--backend",
            f"{__name__}:fake_backend",
            "--data",
            "d",
            "--out",
            "o",
            "--model",
            "m",
        ]
    )
    assert (args.benchmark, args.backend) == (f"{__name__}:MyBench", f"{__name__}:fake_backend")
    with pytest.raises(SystemExit):
        build_parser().parse_args(["eval", "--backend", "tgi", "--data", "d", "--out", "o", "--model", "m"])
    assert "argument --backend: invalid choice: 'tgi' (choose from 'hf', 'openai', 'vllm')" in capsys.readouterr().err


def test_importing_backends_is_light():
    code = (
        "import sys, gui_grounding.eval.backends as b; b.REGISTRY.available(); "
        "print(sorted(m for m in ('torch', 'vllm', 'openai', 'transformers') if m in sys.modules))"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip().splitlines()[-1] == "[]"


def test_benchmarks_are_discovered():
    """Every class a module of gui_grounding.eval.benchmarks lists in BENCHMARKS is registered under its name, and
    the registry's built-ins name no class by hand (docs/ADDING_A_BENCHMARK.md: adding a benchmark is adding its
    file)."""
    import importlib
    import inspect
    import pkgutil

    listed = {}
    for info in pkgutil.iter_modules(benchmarks_pkg.__path__):
        module = importlib.import_module(f"gui_grounding.eval.benchmarks.{info.name}")
        listed.update({cls.name: cls for cls in getattr(module, "BENCHMARKS", ())})
    assert all(benchmarks_pkg.BENCHMARKS[name] is cls for name, cls in listed.items())
    assert {n: listed[n] for n in BUILTIN_BENCHMARKS} == BUILTIN_BENCHMARKS
    source = inspect.getsource(benchmarks_pkg._builtins)
    assert not any(cls.__name__ in source for cls in listed.values())
