"""Import cycles: every import statement of the project's modules (top-level and inside functions), as a graph.

Guards the cycle issue 21 found (``gui_grounding.task`` -> ``train_eval`` -> ``eval.backends.hf`` -> ``task``, broken by
``gui_grounding.rows``): the core (``vlm_r1``) and the training side of the plugin are in no cycle. The ``eval``
package's modules still import their package's ``__init__`` (for ``EvalInputError``) while it imports them lazily;
that package-level pattern is the one cycle left, and the test names it so a new one shows up.
"""

from __future__ import annotations

import ast
import os

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


def test_no_import_cycle_outside_the_eval_package():
    cycles = _cycles(_graph())
    for comp in cycles:
        assert all(m.startswith("gui_grounding.eval") or m == "gui_grounding.profiles" for m in comp), comp
    assert not any("gui_grounding.task" in c or "gui_grounding.train_eval" in c for c in cycles)
    assert not any(m.startswith("vlm_r1") for c in cycles for m in c)


def test_the_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
