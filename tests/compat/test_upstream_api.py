"""Code written against upstream FastReID as a library runs on this package: upstream's module
paths import, its public classes and functions are there with its call signatures, and every name
upstream's ``projects/`` import resolves.

``data/upstream_api.json`` was written by ``make_upstream_api.py`` from upstream's source (the commit
is recorded in it); nothing here needs upstream. A name this package does not provide is listed in
``NOT_PROVIDED`` with the reason, and the list stays under 10 % of upstream's names.
"""

from __future__ import annotations

import importlib
import inspect
import json
import warnings
from pathlib import Path

import pytest

API = json.loads((Path(__file__).resolve().parent / "data" / "upstream_api.json").read_text(encoding="utf-8"))
MODULES: dict[str, dict] = API["modules"]
NAMES = [(module, name) for module, names in sorted(MODULES.items()) for name in sorted(names)]

# (module, name) -> why this package does not provide it. Keep it short: each entry is a gap.
NOT_PROVIDED: dict[tuple[str, str], str] = {}


def _import(module: str):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return importlib.import_module(module)


def _resolve(module: str, name: str):
    """``from module import name``: an attribute, or else a submodule."""
    mod = _import(module)
    if hasattr(mod, name):
        return getattr(mod, name)
    if not hasattr(mod, "__path__"):
        raise AttributeError(f"{module} has no {name!r}")
    return _import(f"{module}.{name}")


def _same_default(ours, theirs) -> bool:
    if isinstance(ours, (tuple, list)) and isinstance(theirs, (tuple, list)):
        return list(ours) == list(theirs)
    return type(ours) is type(theirs) and ours == theirs or (ours == theirs and not isinstance(ours, bool))


def signature_problems(obj, spec: dict) -> list[str]:
    """How calls written for upstream's ``spec`` would fail on ``obj`` (empty when none would)."""
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return []  # not introspectable (a builtin): nothing to compare
    params = list(sig.parameters.values())
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    by_name = {p.name: p for p in params}
    has_varargs = any(p.kind == p.VAR_POSITIONAL for p in params)
    has_varkw = any(p.kind == p.VAR_KEYWORD for p in params)
    problems = []
    for i, theirs in enumerate(spec["params"]):
        if i >= len(positional):
            if not has_varargs:
                problems.append(f"no positional parameter {i} ({theirs['name']!r})")
            continue
        ours = positional[i]
        if ours.name != theirs["name"]:
            problems.append(f"parameter {i} is {ours.name!r}, upstream's {theirs['name']!r}")
            continue
        if theirs["default"] is not None:
            if ours.default is inspect.Parameter.empty:
                problems.append(f"{ours.name!r} has no default (upstream's has one)")
            elif "value" in theirs["default"] and not _same_default(ours.default, theirs["default"]["value"]):
                problems.append(
                    f"{ours.name!r} defaults to {ours.default!r}, upstream's to {theirs['default']['value']!r}"
                )
    for extra in positional[len(spec["params"]) :]:
        if extra.default is inspect.Parameter.empty:
            problems.append(f"extra parameter {extra.name!r} has no default")
    for theirs in spec["kwonly"]:
        if theirs["name"] not in by_name and not has_varkw:
            problems.append(f"no keyword {theirs['name']!r}")
    if spec["varargs"] and not has_varargs:
        problems.append("takes no *args (upstream's does)")
    if spec["varkw"] and not has_varkw:
        problems.append("takes no **kwargs (upstream's does)")
    return problems


def _check(module: str, name: str) -> list[str]:
    """Problems of ``module.name`` against upstream's record; ``["missing: ..."]`` when absent."""
    try:
        obj = _resolve(module, name)
    except Exception as e:  # an import that fails counts as missing, with its reason
        return [f"missing: {type(e).__name__}: {e}"]
    entry = MODULES[module][name]
    spec = entry.get("init") if entry["kind"] == "class" else entry
    if entry["kind"] == "class" and not inspect.isclass(obj):
        return [f"upstream's is a class, ours a {type(obj).__name__}"]
    if (
        spec
        and [p["name"] for p in spec["params"]] == ["cfg"]
        and callable(getattr(obj, "from_config", None))
    ):
        return []  # upstream's Model(cfg): ours is @configurable, which takes a cfg as upstream's does
    return signature_problems(obj, spec) if spec else []


@pytest.mark.parametrize("module", sorted(MODULES))
def test_upstream_module_imports(module):
    _import(module)


def test_public_names_are_present_with_upstream_signatures():
    missing, wrong = {}, {}
    for module, name in NAMES:
        problems = _check(module, name)
        if (module, name) in NOT_PROVIDED:
            assert problems, f"{module}.{name} is provided now: remove it from NOT_PROVIDED"
        elif problems and problems[0].startswith("missing"):
            missing[f"{module}.{name}"] = problems[0]
        elif problems:
            wrong[f"{module}.{name}"] = problems
    assert wrong == {}, "signatures that differ from upstream's"
    assert missing == {}, "names neither provided nor listed in NOT_PROVIDED"
    assert len(NOT_PROVIDED) <= 0.1 * len(NAMES)


@pytest.mark.parametrize("module, name", [tuple(x) for x in API["project_imports"]])
def test_names_upstream_projects_import_resolve(module, name):
    if name == "*":
        mod = _import(module)
        exported = set(getattr(mod, "__all__", [n for n in dir(mod) if not n.startswith("_")]))
        assert sorted(set(API["star_exports"][module]) - exported) == []
    else:
        _resolve(module, name)


if __name__ == "__main__":
    # python tests/compat/test_upstream_api.py [module prefix ...]: what is missing or differs
    import sys

    prefixes = tuple(sys.argv[1:]) or ("fastreid",)
    total = bad = 0
    for module, name in NAMES:
        if not module.startswith(prefixes):
            continue
        total += 1
        problems = _check(module, name)
        if problems and (module, name) not in NOT_PROVIDED:
            bad += 1
            print(f"{module}.{name}: {'; '.join(problems)}")
    print(f"{total - bad} of {total} names under {', '.join(prefixes)} match upstream's")
