"""Import cycles: every import statement of the project's modules (top-level and inside functions), as a graph.

Guards the cycle issue 21 found (``gui_grounding.training.task`` -> ``train_eval`` -> ``eval.backends.hf`` -> ``task``, broken by
``gui_grounding.models.rows``): the core (``vlm_r1``) and the training side of the plugin are in no cycle. Some ``eval``
modules (predictions, report, tts, backends) still import their package's ``__init__`` (``ON_DUPLICATE``,
``EvalInputError``) while it imports them lazily; that package-level pattern is the one cycle left, and the test names
it so a new one shows up. The benchmark readers' helpers live outside ``eval`` (``gui_grounding.data.annotations``), so the
data side (``gui_grounding.data``) never imports ``eval``: checked on the import graph (every import statement, also
inside functions) and by importing the data modules in a fresh interpreter.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys

from tests.helpers.paths import REPO


def _graph() -> dict[str, set[str]]:
    mods = {}
    for pkg in ("gui_grounding", "vlm_r1"):
        for folder, _, files in os.walk(os.path.join(REPO, pkg)):
            for name in files:
                if name.endswith(".py"):
                    path = os.path.join(folder, name)
                    mod = os.path.relpath(path, REPO)[:-3].replace(os.sep, ".").removesuffix(".__init__")
                    mods[mod] = path
    graph = {}
    for mod, path in mods.items():
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read())
        deps = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                deps.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                deps.add(node.module)
                deps.update(f"{node.module}.{a.name}" for a in node.names)
        graph[mod] = {d for d in deps if d in mods and d != mod}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (iterative Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, children = work[-1]
            w = next(children, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def _reachable(graph: dict[str, set[str]], root: str) -> set[str]:
    """Every module ``root`` imports, directly or through others (any import statement, also inside functions)."""
    seen, todo = set(), [root]
    while todo:
        for dep in graph[todo.pop()] - seen:
            seen.add(dep)
            todo.append(dep)
    return seen


def test_no_import_cycle_outside_the_eval_package():
    cycles = _cycles(_graph())
    for comp in cycles:
        assert all(m.startswith("gui_grounding.eval") for m in comp), comp
    assert not any("gui_grounding.training.task" in c or "gui_grounding.training.train_eval" in c for c in cycles)
    assert not any(m.startswith("vlm_r1") for c in cycles for m in c)
    # the shared helpers, the benchmark registry and the tables are in no cycle
    in_cycles = {m for c in cycles for m in c}
    assert not in_cycles & {
        "gui_grounding.data.annotations",
        "gui_grounding.eval.tables",
        "gui_grounding.models.profiles",
    }
    assert not any(m.startswith("gui_grounding.eval.benchmarks") for m in in_cycles)


def test_the_data_side_never_imports_eval():
    graph = _graph()
    data = sorted(m for m in graph if m == "gui_grounding.data" or m.startswith("gui_grounding.data."))
    assert "gui_grounding.data.formats" in data and "gui_grounding.data.convert" in data
    for mod in [*data, "gui_grounding.data.annotations", "gui_grounding.data.schema"]:
        reached = _reachable(graph, mod)
        assert not {m for m in reached if m == "gui_grounding.eval" or m.startswith("gui_grounding.eval.")}, mod
    assert "gui_grounding.data.annotations" in graph["gui_grounding.data.formats"]  # the one home both sides import
    benchmarks = sorted(m for m in graph if m.startswith("gui_grounding.eval.benchmarks."))
    assert all("gui_grounding.data.annotations" in graph[m] for m in benchmarks if not m.endswith(".base")), benchmarks


def test_importing_the_data_modules_loads_no_eval_module():
    """A fresh interpreter: importing every data module (and the shared helpers) leaves ``gui_grounding.eval`` out of
    ``sys.modules``; importing the eval package gives the same ``EvalInputError`` class as the helpers."""
    code = (
        "import sys\n"
        "import gui_grounding.data.annotations, gui_grounding.data.clean, gui_grounding.data.convert\n"
        "import gui_grounding.data.detectors, gui_grounding.data.formats\n"
        "print(sorted(m for m in sys.modules if m == 'gui_grounding.eval' or m.startswith('gui_grounding.eval.')))\n"
        "import gui_grounding.eval as ev\n"
        "print(ev.EvalInputError is gui_grounding.data.annotations.EvalInputError)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[:2] == ["[]", "True"], out.stdout


def test_the_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
