"""The layered import contract (docs/ARCHITECTURE.md): imports only go down the layers, function-local imports
included, and no two modules need each other.

Every ``import`` statement of every library module is read from the AST, wherever it stands (module level, inside a
function, under ``if TYPE_CHECKING``). An import of ``a.b.c`` from outside package ``a.b`` also depends on the package
``a.b`` (its ``__init__`` runs first), and ``discover("a.b")`` (``groundwork.registry``) imports every module of
``a.b`` at run time. The layers, bottom first, are :data:`LAYERS`; a module may import its own layer
and the layers below it, never one above. Entry points (the modules run with ``python -m`` or named in
``console_scripts``) sit on top and are imported by no module. The upstream dialect (``vlm_r1.upstream``) is an edge:
only entry points import it.
"""

from __future__ import annotations

import ast
import os

import pytest

from tests.helpers.paths import REPO

#: bottom first; a module belongs to the first entry its name equals or starts with (``name.``), searched top down
LAYERS = (
    "groundwork",
    "vlm_r1",
    "gui_grounding",  # the plugin package's (empty) __init__
    "gui_grounding.models",
    "gui_grounding.data",
    "gui_grounding.eval",
    "gui_grounding.training",
    "gui_grounding.ops",
)
#: the edge above the core that only entry points import
EDGE = "vlm_r1.upstream"
#: modules run with ``python -m`` or named in ``console_scripts`` (setup.py): the top layer
ENTRY_POINTS = frozenset(
    {
        "vlm_r1.grpo_jsonl",
        "vlm_r1.sft",
        "vlm_r1.preflight.__main__",
        "vlm_r1.launcher_env",
        "vlm_r1.upstream_defaults",
        "gui_grounding.train",
        "gui_grounding.plan",
        "gui_grounding.cli",
    }
)
#: extra walls inside a layer: (importer prefix, imported prefix) never
FORBIDDEN = (("gui_grounding.eval.backends", "gui_grounding.eval.tts"),)
PACKAGES = ("groundwork", "vlm_r1", "gui_grounding")


def _modules(root: str = REPO) -> dict[str, str]:
    mods = {}
    for pkg in PACKAGES:
        for folder, _, files in os.walk(os.path.join(root, pkg)):
            for name in files:
                if name.endswith(".py"):
                    path = os.path.join(folder, name)
                    mods[os.path.relpath(path, root)[:-3].replace(os.sep, ".").removesuffix(".__init__")] = path
    return mods


def _is_package(mods: dict[str, str], mod: str) -> bool:
    return mods[mod].endswith("__init__.py")


def _resolve(mods: dict[str, str], name: str) -> str | None:
    while name and name not in mods:
        name = name.rpartition(".")[0]
    return name or None


def import_graph(root: str = REPO) -> dict[str, dict[str, int]]:
    """``{module: {imported module: first line}}`` over every import statement of the project's packages."""
    mods = _modules(root)
    graph: dict[str, dict[str, int]] = {}
    for mod, path in mods.items():
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), path)
        here = mod if _is_package(mods, mod) else mod.rpartition(".")[0]
        deps: dict[str, int] = {}
        for node in ast.walk(tree):
            names: list[str] = []
            if (  # groundwork.registry.discover("pkg"): imports every module of pkg at run time
                isinstance(node, ast.Call)
                and getattr(node.func, "id", getattr(node.func, "attr", None)) == "discover"
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str)
            ):
                names = [m for m in mods if m.startswith(node.args[0].value + ".")]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = here.split(".")
                    parts = parts[: len(parts) - (node.level - 1)]
                    base = ".".join(parts + ([node.module] if node.module else []))
                names = [f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in mods] or [base]
            for name in names:
                if name.split(".")[0] not in PACKAGES:
                    continue
                target = _resolve(mods, name)
                if target is None:
                    continue
                # the target and every package above it that the importer is not inside
                parts = target.split(".")
                for i in range(len(parts), 0, -1):
                    dep = ".".join(parts[:i])
                    if dep != target and (mod == dep or mod.startswith(dep + ".")):
                        break
                    if dep != mod and dep in mods:
                        deps.setdefault(dep, node.lineno)
        graph[mod] = deps
    return graph


def layer_of(mod: str) -> int | None:
    """The index in :data:`LAYERS` (``len(LAYERS)`` for entry points); ``None`` for the edge."""
    if mod in ENTRY_POINTS:
        return len(LAYERS)
    if mod == EDGE or mod.startswith(EDGE + "."):
        return None
    best = None
    for i, prefix in enumerate(LAYERS):
        if mod == prefix or mod.startswith(prefix + "."):
            best = i
    return best


def violations(graph: dict[str, dict[str, int]]) -> list[str]:
    """Every import that breaks the contract, as ``importer:line -> imported (why)``."""
    out = []
    for mod, deps in sorted(graph.items()):
        lm = layer_of(mod)
        for dep, line in sorted(deps.items()):
            where = f"{mod}:{line} -> {dep}"
            ld = layer_of(dep)
            if dep in ENTRY_POINTS:
                out.append(f"{where} (an entry point; nothing imports one)")
            elif ld is None and lm != len(LAYERS) and layer_of(mod) is not None:
                out.append(f"{where} (the upstream edge; only entry points import it)")
            elif ld is not None and lm is not None and ld > lm:
                out.append(f"{where} (upward: {LAYERS[ld]} is above {LAYERS[lm] if lm < len(LAYERS) else 'entry'})")
            elif lm is None and ld is not None and ld > LAYERS.index("vlm_r1"):
                out.append(f"{where} (the upstream edge imports only the core and the bottom layer)")
            for low, high in FORBIDDEN:
                if (mod == low or mod.startswith(low + ".")) and (dep == high or dep.startswith(high + ".")):
                    out.append(f"{where} (a wall: {low} never imports {high})")
    return out


def cycles(graph: dict[str, set[str]] | dict[str, dict[str, int]]) -> list[list[str]]:
    """Strongly connected components of more than one module (iterative Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        work = [(root, iter(sorted(graph[root])))]
        while work:
            v, children = work[-1]
            w = next(children, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
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


@pytest.fixture(scope="module")
def graph():
    return import_graph()


def test_every_module_has_a_layer(graph):
    assert [m for m in graph if layer_of(m) is None and not (m == EDGE or m.startswith(EDGE + "."))] == []
    assert ENTRY_POINTS <= set(graph), sorted(ENTRY_POINTS - set(graph))


def test_imports_only_go_down_the_layers(graph):
    assert violations(graph) == []


def test_no_two_modules_need_each_other(graph):
    assert cycles(graph) == []


def test_the_bottom_layer_imports_nothing_of_the_project(graph):
    bottom = {m: deps for m, deps in graph.items() if layer_of(m) == 0}
    assert {"groundwork.validate", "groundwork.records", "groundwork.outputs", "groundwork.argtypes"} <= set(bottom)
    assert [f"{m} -> {d}" for m, deps in bottom.items() for d in deps if not d.startswith("groundwork")] == []


def test_entry_points_are_the_console_scripts_and_python_m_modules():
    setup = open(os.path.join(REPO, "setup.py"), encoding="utf-8").read()
    assert "gui-grounding = gui_grounding.cli:main" in setup
    for mod in ENTRY_POINTS:
        path = _modules()[mod]
        text = open(path, encoding="utf-8").read()
        assert '__name__ == "__main__"' in text or mod == "gui_grounding.cli", mod


# ---- the checker itself finds what it should ------------------------------------------------------------------------


def _tree(tmp_path, files: dict[str, str]) -> str:
    for rel, text in files.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    for pkg in PACKAGES:
        (tmp_path / pkg).mkdir(exist_ok=True)
        (tmp_path / pkg / "__init__.py").touch()
    return str(tmp_path)


def test_a_function_local_upward_import_is_found(tmp_path):
    root = _tree(
        tmp_path,
        {
            "groundwork/rules.py": "def f():\n    from vlm_r1 import core\n",
            "vlm_r1/core.py": "X = 1\n",
        },
    )
    assert violations(import_graph(root)) == [
        "groundwork.rules:2 -> vlm_r1 (upward: vlm_r1 is above groundwork)",
        "groundwork.rules:2 -> vlm_r1.core (upward: vlm_r1 is above groundwork)",
    ]


def test_entry_points_and_the_edge_are_walled(tmp_path):
    root = _tree(
        tmp_path,
        {
            "vlm_r1/trainer.py": "import vlm_r1.grpo_jsonl\nfrom vlm_r1.upstream import tasks\n",
            "vlm_r1/grpo_jsonl.py": "from vlm_r1.upstream import tasks\n",
            "vlm_r1/upstream/__init__.py": "",
            "vlm_r1/upstream/tasks.py": "from gui_grounding.models import frames\n",
            "gui_grounding/models/__init__.py": "",
            "gui_grounding/models/frames.py": "",
        },
    )
    assert violations(import_graph(root)) == [
        "vlm_r1.trainer:1 -> vlm_r1.grpo_jsonl (an entry point; nothing imports one)",
        "vlm_r1.trainer:2 -> vlm_r1.upstream (the upstream edge; only entry points import it)",
        "vlm_r1.trainer:2 -> vlm_r1.upstream.tasks (the upstream edge; only entry points import it)",
        "vlm_r1.upstream.tasks:1 -> gui_grounding (the upstream edge imports only the core and the bottom layer)",
        "vlm_r1.upstream.tasks:1 -> gui_grounding.models (the upstream edge imports only the core and the bottom layer)",
        "vlm_r1.upstream.tasks:1 -> gui_grounding.models.frames (the upstream edge imports only the core and the bottom "
        "layer)",
    ]


def test_a_hidden_loop_is_a_cycle(tmp_path):
    root = _tree(
        tmp_path,
        {
            "gui_grounding/eval/__init__.py": "def run():\n    from gui_grounding.eval import predictions\n",
            "gui_grounding/eval/predictions.py": "from gui_grounding.eval import ON_DUPLICATE\n",
            "gui_grounding/eval/backends/__init__.py": "def f():\n    from gui_grounding.eval.tts import g\n",
            "gui_grounding/eval/tts.py": "",
        },
    )
    graph = import_graph(root)
    assert cycles(graph) == [["gui_grounding.eval", "gui_grounding.eval.predictions"]]
    assert violations(graph) == [
        "gui_grounding.eval.backends:2 -> gui_grounding.eval.tts (a wall: gui_grounding.eval.backends never imports "
        "gui_grounding.eval.tts)"
    ]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_importing_the_data_modules_loads_no_eval_module():
    """At run time too (a fresh interpreter): importing every data module leaves ``gui_grounding.eval`` out of
    ``sys.modules``, and evaluation raises the data layer's ``EvalInputError`` class."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "import gui_grounding.data.annotations, gui_grounding.data.clean, gui_grounding.data.convert\n"
        "import gui_grounding.data.detectors, gui_grounding.data.formats, gui_grounding.data.schema\n"
        "print(sorted(m for m in sys.modules if m == 'gui_grounding.eval' or m.startswith('gui_grounding.eval.')))\n"
        "import gui_grounding.eval.run as run\n"
        "print(run.EvalInputError is gui_grounding.data.annotations.EvalInputError)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[:2] == ["[]", "True"], out.stdout


def test_a_registry_discovery_is_an_import_of_every_module_it_finds(tmp_path):
    """The loop ``vlm_r1.tiny`` <-> ``vlm_r1.modules`` hid behind ``discover()``: the package imports its family
    modules at run time, so a family module that imports a module importing the package is a cycle."""
    root = _tree(
        tmp_path,
        {
            "vlm_r1/modules/__init__.py": 'from groundwork.registry import discover\nFOUND = discover("vlm_r1.modules")\n',
            "vlm_r1/modules/fam.py": "from vlm_r1.tiny import build\n",
            "vlm_r1/tiny.py": "from vlm_r1.modules import FOUND\n",
            "groundwork/registry.py": "def discover(package):\n    return []\n",
        },
    )
    assert cycles(import_graph(root)) == [["vlm_r1.modules", "vlm_r1.modules.fam", "vlm_r1.tiny"]]


#: the most lines a library file may have (issue 28): a longer one holds more than one concept
MAX_LIBRARY_FILE_LINES = 800


def test_no_library_file_is_over_800_lines():
    long = {}
    for path in _modules().values():
        with open(path, encoding="utf-8") as f:
            n = sum(1 for _ in f)
        if n > MAX_LIBRARY_FILE_LINES:
            long[os.path.relpath(path, REPO)] = n
    assert long == {}
