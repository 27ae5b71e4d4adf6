"""Write ``data/upstream_api.json``: upstream FastReID's public API, read from its source with ``ast``.

Run by hand against a checkout of upstream (JDAI-CV/fast-reid)::

    python tests/compat/make_upstream_api.py /path/to/upstream-fastreid

Nothing of upstream is imported or copied: the file records, per module of upstream's ``fastreid/``
package (its Cython ``rank_cylib`` aside), the public top-level classes and functions with their
call signatures (a class's is its ``__init__``'s without ``self``), and the ``fastreid`` names that
upstream's ``projects/`` import. ``test_upstream_api.py`` checks this package against it.
"""

from __future__ import annotations

import argparse
import ast
import json
import subprocess
from pathlib import Path

OUT = Path(__file__).resolve().parent / "data" / "upstream_api.json"
PROJECTS = ("FastAttr", "FastClas", "FastDistill", "FastFace", "FastRetri", "PartialReID", "FastTune")


def _default(node: ast.expr | None):
    """A default value as JSON: the literal when it is one, else ``{"expr": source}``."""
    if node is None:
        return None
    try:
        value = ast.literal_eval(node)
        json.dumps(value)
        return {"value": value}
    except (ValueError, TypeError, SyntaxError):
        return {"expr": ast.unparse(node)}


def _signature(args: ast.arguments, drop_self: bool) -> dict:
    positional = args.posonlyargs + args.args
    defaults = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
    params = [{"name": a.arg, "default": _default(d)} for a, d in zip(positional, defaults)]
    if drop_self and params and params[0]["name"] in ("self", "cls"):
        params = params[1:]
    kwonly = [{"name": a.arg, "default": _default(d)} for a, d in zip(args.kwonlyargs, args.kw_defaults)]
    return {
        "params": params,
        "kwonly": kwonly,
        "varargs": args.vararg is not None,
        "varkw": args.kwarg is not None,
    }


def _module_api(path: Path) -> dict:
    api = {}
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if node.name.startswith("_") if hasattr(node, "name") else True:
            continue
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            api[node.name] = {"kind": "function", **_signature(node.args, drop_self=False)}
        elif isinstance(node, ast.ClassDef):
            init = next(
                (b for b in node.body if isinstance(b, ast.FunctionDef) and b.name == "__init__"), None
            )
            signature = _signature(init.args, drop_self=True) if init else None
            api[node.name] = {"kind": "class", "init": signature}
    return api


def _star_exports(root: Path, module: str) -> list[str]:
    """The names ``from <module> import *`` gives in upstream's package: its ``__all__`` when it is a
    literal list, else its public names, following ``from .x import *`` / ``from .x import a``."""
    base = root / Path(*module.split("."))
    path = base / "__init__.py" if base.is_dir() else base.with_suffix(".py")
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "__all__" for t in node.targets):
            try:
                return sorted(ast.literal_eval(node.value))
            except ValueError:
                break  # computed (upstream's `[k for k in globals() ...]`): collect the names below
    names = set()
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            sub = f"{module}.{node.module}" if base.is_dir() else f"{module.rsplit('.', 1)[0]}.{node.module}"
            for alias in node.names:
                names.update(_star_exports(root, sub) if alias.name == "*" else [alias.asname or alias.name])
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
    return sorted(n for n in names if not n.startswith("_"))


def _project_imports(projects: Path) -> list[list[str]]:
    found = set()
    for project in PROJECTS:
        for path in sorted((projects / project).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("fastreid"):
                    found.update((node.module, a.name) for a in node.names)
    return sorted([m, n] for m, n in found)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("upstream", help="a checkout of upstream FastReID")
    args = parser.parse_args()
    root = Path(args.upstream).resolve()
    commit = subprocess.run(
        ["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    modules = {}
    for path in sorted((root / "fastreid").rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if "rank_cylib" in parts:
            continue
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = _module_api(path)
    project_imports = _project_imports(root / "projects")
    record = {
        "source": {"repository": "https://github.com/JDAI-CV/fast-reid", "commit": commit},
        "modules": modules,
        "project_imports": project_imports,
        "star_exports": {m: _star_exports(root, m) for m, n in project_imports if n == "*"},
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    names = sum(len(v) for v in modules.values())
    print(f"{len(modules)} modules, {names} names, {len(record['project_imports'])} project imports -> {OUT}")


if __name__ == "__main__":
    main()
