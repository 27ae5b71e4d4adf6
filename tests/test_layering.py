"""The package has layers and no import cycles (a static check of the imports, via ``ast``).

- No cycle among ``fastreid`` modules: module A imports B and B, directly or through others,
  imports A. Module-level imports (including those inside top-level ``if`` / ``try`` blocks) and
  imports inside functions both count: a lazy import hides a cycle from Python, not from a reader.
  Imports under ``if TYPE_CHECKING:`` and ``if __name__ == "__main__":`` do not count.
- ``fastreid.utils`` and ``fastreid.config`` are the bottom: they import no other ``fastreid``
  package (``fastreid.config`` may import ``fastreid.utils``).
- ``fastreid.engine`` is the top: nothing outside it imports it, except the packages above it
  (``ABOVE_TOP``: the command-line tools and inference), which nothing below imports.
- An import inside a function or method says why it is not at the top of the module (an optional
  dependency, torch kept off a command's start before the OpenMP decision, an import-time cost):
  a comment on its line or on the line directly above. Tool pragmas (``noqa``, ``type: ignore``)
  alone are no reason.
- Heavy libraries (``HEAVY``: matplotlib, plotly, faiss, scikit-learn, ONNX, FastAPI, Ray, ...) are
  imported inside the functions that use them, never at module level, so that no command and no
  training run loads them just by starting; the one module whose job is such a library
  (``HEAVY_HOMES``) is itself off those paths. torch and torchvision are what every run uses.

An edge goes to the module named by the import (``from a.b import c`` is an
edge to ``a.b.c`` when that is a module, else to ``a.b``); parent packages are not counted, so a
package's ``__init__`` may re-export its submodules. An import of a module's own ancestor package
(``from . import DATASET_REGISTRY`` in ``fastreid.data.datasets.market1501``, the registry pattern
upstream uses) is not an edge either: Python always runs the ancestor's ``__init__`` first.
"""

from __future__ import annotations

import ast
import functools
import io
import re
import tokenize
from collections import deque
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "fastreid"

# Cycles that another branch removes; the lead empties this set when the branches are merged.
KNOWN_CYCLES_FIXED_ELSEWHERE: set[frozenset[str]] = set()

# another branch is changing these; the lead removes this exemption when merging
LOCAL_IMPORTS_EXEMPT: set[str] = set()

BOTTOM = {"fastreid.utils": {"fastreid.utils"}, "fastreid.config": {"fastreid.config", "fastreid.utils"}}
TOP = "fastreid.engine"
# Packages above the engine: they use it (the feature extractor wraps DefaultPredictor, the training
# command runs DefaultTrainer, the search server the extractor) and nothing in the engine or below imports them.
# fastreid.projects (task families such as pedestrian attributes) subclass the engine's DefaultTrainer and
# register their trainers with it; the engine finds them through that registry and the config through
# fastreid/config/families.py's table of module names, neither of which is an import.
ABOVE_TOP = {"fastreid.inference", "fastreid.cli", "fastreid.tune", "fastreid.serve", "fastreid.projects"}

# Libraries that take a good part of a second to import (matplotlib ~0.5 s with pyparsing and
# fontTools, plotly ~1 s, TensorBoard's protobufs, faiss with its own OpenMP runtime) and serve one
# feature each: plots, the report's page, search, export, serving, tuning. The function that uses
# one imports it. A name covers its submodules.
HEAVY = (
    "faiss", "fastapi", "h5py", "httpx", "hyperopt", "matplotlib", "onnx", "onnxruntime", "onnxscript",
    "openvino", "optuna", "pandas", "playwright", "plotly", "ray", "scipy", "sklearn", "starlette",
    "tensorboard", "torch.utils.tensorboard", "uvicorn",
)  # fmt: skip
# Modules whose one job is a heavy library (upstream's faiss helpers): allowed to import it at the
# top, as long as no command or training run imports them on the way in.
HEAVY_HOMES = {"fastreid.utils.faiss_utils": {"faiss"}}
# Where commands and training runs start: every command-line tool, the engine, the task families.
START_ROOTS = ("fastreid.cli", "fastreid.engine", "fastreid.projects")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in PACKAGE.rglob("*.py")}


def _top_level_statements(body: list[ast.stmt]):
    """Statements that run at import time (descending into if / try / with blocks, not into
    functions or classes' methods; class bodies run at import time too)."""
    for node in body:
        yield node
        if isinstance(node, ast.If):
            if _is_main_guard(node.test):
                continue  # runs only as a script
            yield from _top_level_statements(node.body)
            yield from _top_level_statements(node.orelse)
        elif isinstance(node, ast.Try):
            yield from _top_level_statements(node.body)
            for handler in node.handlers:
                yield from _top_level_statements(handler.body)
            yield from _top_level_statements(node.orelse)
            yield from _top_level_statements(node.finalbody)
        elif isinstance(node, (ast.With, ast.ClassDef)):
            yield from _top_level_statements(node.body)


def _is_main_guard(test: ast.expr) -> bool:
    """``__name__ == "__main__"`` or ``TYPE_CHECKING``: blocks that never run on import."""
    if isinstance(test, ast.Name) and test.id == "TYPE_CHECKING":
        return True
    return (
        isinstance(test, ast.Compare)
        and isinstance(test.left, ast.Name)
        and test.left.id == "__name__"
        and len(test.comparators) == 1
        and isinstance(test.comparators[0], ast.Constant)
        and test.comparators[0].value == "__main__"
    )


def _resolve(module: str, is_package: bool, level: int, target: str | None) -> str:
    if level == 0:
        return target or ""
    base = module.split(".")
    if not is_package:
        base = base[:-1]
    if level > 1:
        base = base[: len(base) - (level - 1)]
    return ".".join(base + ([target] if target else []))


def _all_statements(body: list[ast.stmt]):
    """Every statement, in functions too (lazy imports still tie modules together)."""
    for node in body:
        if isinstance(node, ast.If) and _is_main_guard(node.test):
            continue
        yield node
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.stmt):
                yield from _all_statements([child])


@functools.cache
def _parsed(path: Path) -> tuple[str, ast.Module]:
    """A file's source and syntax tree, parsed once for all the checks of this module."""
    source = path.read_text(encoding="utf-8")
    return source, ast.parse(source, filename=str(path))


def _imported_names(name: str, path: Path, *, lazy: bool) -> Iterator[tuple[str, list[str]]]:
    """``(module, [name, ...])`` for each import statement: the module named (relative imports
    resolved) and the names imported from it (empty for ``import a.b``)."""
    is_package = path.name == "__init__.py"
    for node in (_all_statements if lazy else _top_level_statements)(_parsed(path)[1].body):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, []
        elif isinstance(node, ast.ImportFrom):
            yield _resolve(name, is_package, node.level, node.module), [alias.name for alias in node.names]


def _imports(modules: dict[str, Path], *, lazy: bool = False) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        edges: set[str] = set()
        for base, names in _imported_names(name, path, lazy=lazy):
            targets = [f"{base}.{n}" if f"{base}.{n}" in modules else base for n in names] or [base]
            for target in targets:
                while target and target not in modules and "." in target:
                    target = target.rsplit(".", 1)[0]
                ancestor = name.startswith(target + ".")
                if target in modules and target.startswith("fastreid") and target != name and not ancestor:
                    edges.add(target)
        graph[name] = edges
    return graph


def _heavy_imports(modules: dict[str, Path]) -> dict[str, set[str]]:
    """Module -> the ``HEAVY`` libraries it imports at module level (as written: ``matplotlib.pyplot``)."""
    found: dict[str, set[str]] = {}
    for name, path in modules.items():
        for base, names in _imported_names(name, path, lazy=False):
            for full in [f"{base}.{n}" for n in names] or [base]:
                if any(full == h or full.startswith(h + ".") for h in HEAVY):
                    found.setdefault(name, set()).add(full.rsplit(".", 1)[0] if names else full)
    return found


def _loaded_from(roots: Iterable[str], graph: dict[str, set[str]]) -> dict[str, str]:
    """The modules that importing ``roots`` runs (module-level imports followed, each module's
    parent packages included, as Python runs them first): module -> the module that imports it
    (a root -> itself), to print the chain (breadth first: the shortest)."""
    by: dict[str, str] = {}
    todo = deque((r, r) for r in sorted(roots))
    while todo:
        module, parent = todo.popleft()
        if module in by or module not in graph:
            continue
        by[module] = parent
        parts = module.split(".")
        todo += [(".".join(parts[:i]), module) for i in range(1, len(parts))]
        todo += [(target, module) for target in sorted(graph[module])]
    return by


def _chain(module: str, by: dict[str, str]) -> str:
    chain = [module]
    while by[chain[-1]] != chain[-1]:
        chain.append(by[chain[-1]])
    return " <- ".join(chain)


def _heavy_at_start(modules: dict[str, Path], roots: Iterable[str]) -> list[str]:
    """What the heavy-import rule finds: module-level imports of ``HEAVY`` libraries outside their
    ``HEAVY_HOMES``, and a home that a start path imports (each with its chain from the root)."""
    eager = _imports(modules)
    starts = [m for m in modules if any(m == r or m.startswith(r + ".") for r in roots)]
    by = _loaded_from(starts, eager)
    found = []
    for module, libraries in sorted(_heavy_imports(modules).items()):
        home = HEAVY_HOMES.get(module, set())
        if any(lib.split(".")[0] not in home for lib in libraries):
            where = f" (loaded at start: {_chain(module, by)})" if module in by else ""
            found.append(f"{module} imports {', '.join(sorted(libraries))} at module level{where}")
        elif module in by:
            found.append(
                f"{module}, the home of {', '.join(sorted(home))}, is loaded at start: {_chain(module, by)}"
            )
    return found


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def _package(module: str) -> str:
    return ".".join(module.split(".")[:2])


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    """The package's import graph, lazy imports included (parsed once for the module's tests)."""
    return _imports(_modules(), lazy=True)


def test_no_import_cycles(graph):
    cycles = [c for c in _cycles(graph) if frozenset(c) not in KNOWN_CYCLES_FIXED_ELSEWHERE]
    assert cycles == [], "import cycles: " + "; ".join(" <-> ".join(c) for c in cycles)


def test_bottom_layers_import_nothing_above(graph):
    upward = [
        f"{module} imports {target}"
        for module, targets in sorted(graph.items())
        for target in sorted(targets)
        if _package(module) in BOTTOM and _package(target) not in BOTTOM[_package(module)]
    ]
    assert upward == []


def test_engine_is_the_top(graph):
    into_engine = [
        f"{module} imports {target}"
        for module, targets in sorted(graph.items())
        for target in sorted(targets)
        if _package(target) == TOP and _package(module) not in {TOP, *ABOVE_TOP}
    ]
    assert into_engine == []
    into_above = [
        f"{module} imports {target}"
        for module, targets in sorted(graph.items())
        for target in sorted(targets)
        if _package(target) in ABOVE_TOP and _package(module) not in ABOVE_TOP
    ]
    assert into_above == []


def test_the_checker_sees_a_cycle_and_an_upward_import(tmp_path):
    """The checks above can fail: a synthetic graph with a cycle and an upward edge is caught."""
    graph = {
        "fastreid.a": {"fastreid.b"},
        "fastreid.b": {"fastreid.c"},
        "fastreid.c": {"fastreid.a"},
        "fastreid.d": set(),
    }
    assert _cycles(graph) == [["fastreid.a", "fastreid.b", "fastreid.c"]]
    pkg = tmp_path / "fastreid"
    (pkg / "utils").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "utils" / "__init__.py").write_text("")
    (pkg / "utils" / "x.py").write_text("from fastreid.data import y\n")
    (pkg / "data").mkdir()
    (pkg / "data" / "__init__.py").write_text("")
    (pkg / "data" / "y.py").write_text("def f():\n    from fastreid.utils import x\n")
    modules = {
        ".".join(p.relative_to(tmp_path).with_suffix("").parts).removesuffix(".__init__"): p
        for p in pkg.rglob("*.py")
    }
    assert _imports(modules)["fastreid.utils.x"] == {"fastreid.data.y"}
    assert _imports(modules)["fastreid.data.y"] == set()  # module level only
    lazy = _imports(modules, lazy=True)
    assert lazy["fastreid.data.y"] == {"fastreid.utils.x"}  # the import inside f() counts
    assert _cycles(lazy) == [["fastreid.data.y", "fastreid.utils.x"]]


def test_commands_and_training_start_without_heavy_libraries():
    found = _heavy_at_start(_modules(), START_ROOTS)
    assert found == [], (
        "import these inside the functions that use them (with a comment saying why), so that "
        "commands and training runs start without them: " + "; ".join(found)
    )


def test_the_heavy_import_check_can_fail(tmp_path):
    """A heavy library at module level is caught, with the chain that loads it at a command's start;
    one imported inside a function or under TYPE_CHECKING is not; a heavy home is allowed its
    library until a start path imports it."""
    files = {
        "fastreid/__init__.py": "",
        "fastreid/cli/__init__.py": "",
        "fastreid/cli/tool.py": "from fastreid.utils import plots\n",
        "fastreid/utils/__init__.py": "",
        "fastreid/utils/plots.py": "import numpy\nimport matplotlib.pyplot as plt\n",
        "fastreid/utils/lazy.py": (
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import plotly\n"
            "def f():\n    from sklearn.cluster import DBSCAN\n    return DBSCAN\n"
        ),
        "fastreid/utils/faiss_utils.py": "import faiss\n",
        "fastreid/data/__init__.py": "from torch.utils.tensorboard import SummaryWriter\n",
    }

    def package(root: Path, files: dict[str, str]) -> dict[str, Path]:
        for relative, text in files.items():
            (root / relative).parent.mkdir(parents=True, exist_ok=True)
            (root / relative).write_text(text)
        return {
            ".".join(p.relative_to(root).with_suffix("").parts).removesuffix(".__init__"): p
            for p in (root / "fastreid").rglob("*.py")
        }

    assert _heavy_at_start(package(tmp_path / "a", files), ["fastreid.cli"]) == [
        "fastreid.data imports torch.utils.tensorboard at module level",
        "fastreid.utils.plots imports matplotlib.pyplot at module level (loaded at start: "
        "fastreid.utils.plots <- fastreid.cli.tool)",
    ]
    files["fastreid/utils/__init__.py"] = "from . import faiss_utils\n"
    assert (
        "fastreid.utils.faiss_utils, the home of faiss, is loaded at start: fastreid.utils.faiss_utils "
        "<- fastreid.utils <- fastreid.utils.plots <- fastreid.cli.tool"
    ) in _heavy_at_start(package(tmp_path / "b", files), ["fastreid.cli"])


_PRAGMA = re.compile(r"noqa(:\s*[A-Z]+[0-9]+(\s*,\s*[A-Z]+[0-9]+)*)?|type:\s*ignore(\[[^\]]*\])?|fmt:\s*\w+")


def _reasons(source: str) -> dict[int, str]:
    """Line number -> the text of the comment on that line, without tool pragmas."""
    comments: dict[int, str] = {}
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            text = _PRAGMA.sub("", token.string.lstrip("#")).strip(" #()")
            comments[token.start[0]] = text
    return comments


def _unexplained_local_imports(source: str, tree: ast.Module | None = None) -> list[int]:
    """Lines of the imports inside functions and methods with no reason: no comment (other than
    pragmas) on the import's first line, nor a comment line directly above it. ``tree``: the
    source's, when it is already parsed."""
    local = {
        node.lineno
        for function in ast.walk(tree or ast.parse(source))
        if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef))
        for node in ast.walk(function)
        if isinstance(node, (ast.Import, ast.ImportFrom))
    }
    if not local:
        return []
    lines = source.splitlines()
    reasons = _reasons(source)
    found = []
    for line in sorted(local):
        above = line - 1
        comment_line_above = above >= 1 and lines[above - 1].lstrip().startswith("#")
        if not reasons.get(line) and not (comment_line_above and reasons.get(above)):
            found.append(line)
    return found


def test_every_local_import_says_why():
    unexplained = [
        f"{path.relative_to(REPO).as_posix()}:{line}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.relative_to(REPO).as_posix() not in LOCAL_IMPORTS_EXEMPT
        for line in _unexplained_local_imports(*_parsed(path))
    ]
    assert unexplained == [], (
        "imports inside functions without a comment saying why they are not at the top "
        "(an optional extra, torch after the OpenMP decision, a cycle, an import-time cost): "
        + ", ".join(unexplained)
    )


def test_the_local_import_check_can_fail():
    """The check above catches an import inside a function or method with no reason, a pragma
    as the only comment, and a comment that belongs to the line above (not a comment line)."""
    source = """import os


def a():
    import json

    return json


def b():
    import faiss  # optional: the 'faiss' extra
    # torch: after the OpenMP decision
    import torch

    return faiss, torch


class C:
    def m(self):
        import csv  # noqa: F401
        from typing import Any  # type: ignore[attr-defined]  # a reason after a pragma
        import hashlib  # comment of its own
        import zlib

        def inner():
            from collections import (  # the nested function's reason
                OrderedDict,
            )
            from pathlib import Path

            return OrderedDict, Path

        return csv, Any, hashlib, zlib, inner
"""
    lines = source.splitlines()
    assert [lines[n - 1].strip() for n in _unexplained_local_imports(source)] == [
        "import json",
        "import csv  # noqa: F401",
        "import zlib",
        "from pathlib import Path",
    ]
