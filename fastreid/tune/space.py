"""A search space over config keys, read from YAML, checked against the config before any trial.

    # search.yml: config key -> distribution (one of the forms below)
    SOLVER.BASE_LR: {loguniform: [1.0e-5, 1.0e-2]}
    SOLVER.WEIGHT_DECAY: {uniform: [0.0, 1.0e-3]}
    MODEL.LOSSES.TRI.MARGIN: {quniform: [0.0, 0.6, 0.1]}
    DATALOADER.NUM_INSTANCE: {choice: [2, 4, 8]}
    SOLVER.IMS_PER_BATCH: {randint: [32, 129]}          # upper bound excluded
    INPUT.REA.ENABLED: {choice: [true, false]}
    INPUT.REA.PROB: {uniform: [0.2, 0.8], when: {INPUT.REA.ENABLED: true}}
    MODEL.HEADS.SCALE: {grid: [16, 32, 64]}             # every value, in every sample

Distributions: ``uniform``, ``loguniform``, ``quniform`` ``[low, high, step]``, ``randint`` and
``lograndint`` ``[low, high)``, ``choice`` (a list of values), ``grid`` (all values, Ray's grid search).
``when`` makes a key conditional: it is set only when every named key has the given value (or
one of a list of values) in the trial's config. The searcher samples a conditional key in every
trial (so any searcher works); a trial whose condition fails ignores it.
"""

from __future__ import annotations

import difflib
import os
from dataclasses import dataclass, field
from typing import Any

import yaml

from fastreid.config import CfgNode, ConfigError

__all__ = ["DISTRIBUTIONS", "Dimension", "SearchSpace", "SearchSpaceError", "load_search_space"]

# name -> number of bounds it takes (None: a list of any length)
DISTRIBUTIONS: dict[str, int | None] = {
    "uniform": 2,
    "loguniform": 2,
    "quniform": 3,
    "randint": 2,
    "lograndint": 2,
    "choice": None,
    "grid": None,
}


class SearchSpaceError(ConfigError):
    """The search-space file is malformed or names a config key or value the config refuses."""


@dataclass
class Dimension:
    """One searched config key."""

    key: str
    kind: str
    args: list[Any]
    when: dict[str, list[Any]] = field(default_factory=dict)

    def example(self) -> Any:
        """A value this dimension can take (to check the key and the type against the config)."""
        return self.args[0]

    def applies(self, cfg: CfgNode) -> bool:
        return all(_get(cfg, key) in values for key, values in self.when.items())


@dataclass
class SearchSpace:
    dimensions: list[Dimension]
    source: str = ""

    @property
    def keys(self) -> list[str]:
        return [d.key for d in self.dimensions]

    def apply(self, cfg: CfgNode, params: dict[str, Any]) -> dict[str, Any]:
        """Merge a trial's ``params`` into ``cfg`` (unconditional keys first, then each conditional
        key whose condition holds); returns the values actually set."""
        applied: dict[str, Any] = {}
        ordered = sorted(self.dimensions, key=lambda d: bool(d.when))
        for dim in ordered:
            if dim.key in params and dim.applies(cfg):
                cfg.merge_from_list([dim.key, params[dim.key]])
                applied[dim.key] = params[dim.key]
        return applied

    def check_against(self, cfg: CfgNode) -> None:
        """Every key exists and accepts its values; every condition names a key (raises
        :class:`SearchSpaceError` naming the entry and, for an unknown key, the closest one)."""
        for dim in self.dimensions:
            values = dim.args if dim.kind in ("choice", "grid") else [dim.example()]
            for value in values:
                try:
                    cfg.clone().merge_from_list([dim.key, value])
                except ConfigError as e:
                    raise SearchSpaceError(f"{self.source}: {dim.key}: {e}") from e
            for key in dim.when:
                try:
                    _get(cfg, key)
                except KeyError:
                    raise SearchSpaceError(
                        f"{self.source}: {dim.key}: its 'when' names {key}, which is not a config key"
                        + _closest(key, cfg)
                    ) from None

    def ray_space(self) -> dict[str, Any]:
        """The space as Ray Tune's ``param_space``."""
        from ray import tune  # the 'tune' extra, checked by the caller

        makers: dict[str, Any] = {
            "uniform": tune.uniform,
            "loguniform": tune.loguniform,
            "quniform": tune.quniform,
            "randint": tune.randint,
            "lograndint": tune.lograndint,
            "choice": tune.choice,
            "grid": tune.grid_search,
        }
        space = {}
        for dim in self.dimensions:
            maker = makers[dim.kind]
            space[dim.key] = maker(dim.args) if dim.kind in ("choice", "grid") else maker(*dim.args)
        return space


def _get(cfg: CfgNode, dotted: str) -> Any:
    node: Any = cfg
    for part in dotted.split("."):
        if not isinstance(node, CfgNode) or part not in node:
            raise KeyError(dotted)
        node = node[part]
    return node


def _all_keys(cfg: CfgNode, prefix: str = "") -> list[str]:
    keys = []
    for name, value in cfg.items():
        full = f"{prefix}{name}"
        keys += _all_keys(value, full + ".") if isinstance(value, CfgNode) else [full]
    return keys


def _closest(key: str, cfg: CfgNode) -> str:
    match = difflib.get_close_matches(key, _all_keys(cfg), n=1)
    return f" (did you mean {match[0]}?)" if match else ""


def _parse_entry(source: str, key: str, spec: Any) -> Dimension:
    where = f"{source}: {key}"
    if not isinstance(spec, dict):
        raise SearchSpaceError(f"{where}: expected a mapping such as {{uniform: [0.1, 0.5]}}, got {spec!r}")
    spec = dict(spec)
    when = spec.pop("when", {}) or {}
    if len(spec) != 1:
        raise SearchSpaceError(
            f"{where}: expected one distribution ({', '.join(DISTRIBUTIONS)}), got {sorted(spec) or 'none'}"
        )
    kind, args = next(iter(spec.items()))
    if kind not in DISTRIBUTIONS:
        hint = difflib.get_close_matches(str(kind), DISTRIBUTIONS, n=1)
        raise SearchSpaceError(
            f"{where}: unknown distribution {kind!r}"
            + (f" (did you mean {hint[0]}?)" if hint else f"; known: {', '.join(DISTRIBUTIONS)}")
        )
    if not isinstance(args, list) or not args:
        raise SearchSpaceError(f"{where}: {kind} takes a non-empty list, got {args!r}")
    arity = DISTRIBUTIONS[kind]
    if arity is not None:
        if len(args) != arity or not all(
            isinstance(a, (int, float)) and not isinstance(a, bool) for a in args
        ):
            raise SearchSpaceError(f"{where}: {kind} takes {arity} numbers, got {args!r}")
        if args[0] >= args[1]:
            raise SearchSpaceError(f"{where}: {kind} needs low < high, got {args[0]} and {args[1]}")
        if kind in ("loguniform", "lograndint") and args[0] <= 0:
            raise SearchSpaceError(f"{where}: {kind} needs positive bounds, got {args!r}")
    if not isinstance(when, dict):
        raise SearchSpaceError(f"{where}: 'when' takes a mapping KEY: value, got {when!r}")
    conditions = {str(k): (v if isinstance(v, list) else [v]) for k, v in when.items()}
    return Dimension(key=str(key), kind=kind, args=list(args), when=conditions)


def load_search_space(path: str) -> SearchSpace:
    """Read the search-space YAML file ``path`` (raises :class:`SearchSpaceError`)."""
    if not os.path.isfile(path):
        raise SearchSpaceError(f"Search space file not found: {path}")
    with open(path, encoding="utf-8") as f:
        try:
            data = yaml.safe_load(f)
        except yaml.YAMLError as e:
            raise SearchSpaceError(f"{path} is not valid YAML: {e}") from e
    if not isinstance(data, dict) or not data:
        raise SearchSpaceError(f"{path}: expected a mapping of config keys to distributions, e.g. "
                               "SOLVER.BASE_LR: {loguniform: [1.0e-5, 1.0e-2]}")  # fmt: skip
    dims = [_parse_entry(path, str(key), spec) for key, spec in data.items()]
    grid_and_conditional = [d.key for d in dims if d.kind == "grid" and d.when]
    if grid_and_conditional:
        raise SearchSpaceError(f"{path}: a grid key cannot be conditional: {', '.join(grid_and_conditional)}")
    return SearchSpace(dims, source=path)
