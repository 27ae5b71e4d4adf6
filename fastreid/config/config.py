"""Config node with readable errors, ``_BASE_`` inheritance and the ``configurable`` decorator."""

from __future__ import annotations

import ast
import difflib
import functools
import inspect
import os
from collections.abc import Iterable
from typing import Any, Callable

import yaml
from fvcore.common.config import CfgNode as _FvCfgNode

from fastreid.utils.errors import UserError

from .defaults import _C, MULTI_TYPE_KEYS
from .families import extend_for_names, names_in
from .locate import resolve_config_file
from .saved import read_side_file, side_file

__all__ = ["CfgNode", "ConfigError", "configurable", "get_cfg", "global_cfg", "set_global_cfg"]

BASE_KEY = "_BASE_"


class ConfigError(UserError, ValueError):
    """A config file or override that cannot be applied. The message is one readable line."""

    exit_code = 2
    label = "Config error"


def _type_name(value: Any) -> str:
    return type(value).__name__


def _all_keys(node: CfgNode, prefix: str = "") -> list[str]:
    keys = []
    for key, value in node.items():
        full = f"{prefix}{key}"
        keys.append(full)
        if isinstance(value, _FvCfgNode):
            keys.extend(_all_keys(value, full + "."))
    return keys


class CfgNode(_FvCfgNode):
    """fvcore's CfgNode whose merges check keys and types and fail with one clear line.

    - an unknown key names the closest valid key;
    - a wrong type names the key, the expected type and the given type;
    - a missing file names the path.
    """

    def merge_from_file(self, cfg_filename: str, allow_unsafe: bool = False) -> None:
        """Merge a YAML config (and its ``_BASE_`` chain). A relative path that is not in the
        working directory is looked up in the configs shipped with fastreid (``configs/...`` works
        from any folder, as on a command line: :func:`fastreid.config.locate.resolve_config_file`)."""
        cfg_filename = resolve_config_file(str(cfg_filename))
        if not os.path.isfile(cfg_filename):
            raise ConfigError(f"Config file not found: {cfg_filename}")
        loaded = self.load_yaml_with_base(cfg_filename, allow_unsafe=allow_unsafe)
        if not self.is_frozen():  # a task family the file names adds its keys first (families.py)
            extend_for_names(self, names_in(loaded))
        self._merge_checked(loaded, source=cfg_filename)

    @classmethod
    def load_yaml_with_base(cls, filename: str, allow_unsafe: bool = False) -> dict:
        """The YAML mapping of ``filename`` merged over its ``_BASE_`` file(s), recursively.

        Unlike fvcore's, every problem is a one-line :class:`ConfigError`: a missing base file,
        invalid YAML, an empty file, a top-level value that is not a mapping, and a ``_BASE_``
        cycle (named as the chain of files). ``allow_unsafe`` is accepted for compatibility;
        config files are always read with ``yaml.safe_load``.
        """
        return _load_yaml_chain(str(filename), ())

    def merge_from_other_cfg(self, cfg_other: CfgNode) -> None:
        self._merge_checked(cfg_other, source="another config")

    def merge_from_list(self, cfg_list: list) -> None:
        if len(cfg_list) % 2 != 0:
            raise ConfigError(
                f"Overrides must come in KEY VALUE pairs; got an odd number of items: {list(cfg_list)}"
            )
        for key, raw in zip(cfg_list[0::2], cfg_list[1::2]):
            value = _parse_override(raw)
            tree: dict = {}
            node = tree
            parts = str(key).split(".")
            for part in parts[:-1]:
                node = node.setdefault(part, {})
            node[parts[-1]] = value
            self._merge_checked(tree, source="command line")

    def _merge_checked(self, other: Any, source: str, prefix: str = "", root: CfgNode | None = None) -> None:
        if self.is_frozen():
            raise ConfigError(f"Cannot merge {source} into a frozen config; call cfg.defrost() first")
        root = self if root is None else root
        for key, value in dict(other).items():
            if key == BASE_KEY:
                continue
            full_key = f"{prefix}{key}"
            if key not in self:
                raise ConfigError(_unknown_key_message(root, _first_leaf(full_key, value), source))
            current = self[key]
            if isinstance(current, _FvCfgNode):
                if not isinstance(value, dict):
                    raise ConfigError(
                        f"Config key {full_key} ({source}) is a section and needs a mapping of keys, "
                        f"got {_type_name(value)} {value!r}"
                    )
                current._merge_checked(value, source, prefix=full_key + ".", root=root)
                continue
            if isinstance(value, str) and not isinstance(current, str):
                value = _parse_override(value)
            self[key] = _coerce(value, current, full_key, source)


def _safe_load(text: str) -> Any:
    """``yaml.safe_load(text)``, parsed by libyaml where PyYAML was built with it (~8x faster on the
    shipped configs, the same values: the same safe constructor and resolver). A document libyaml
    refuses is parsed again by PyYAML's own parser, whose error (line and column) is the one shown."""
    loader = getattr(yaml, "CSafeLoader", None)
    if loader is not None:
        try:
            return yaml.load(text, Loader=loader)  # CSafeLoader: the safe loader, in C
        except yaml.YAMLError:
            pass
    return yaml.safe_load(text)


def _read_yaml_mapping(filename: str, chain: tuple[str, ...], via: str = "") -> tuple[dict, str]:
    """The YAML mapping in ``filename`` and the file's text; ``via`` says how it was reached (for
    messages; default: as a ``_BASE_`` of ``chain``'s last file, when there is a chain)."""
    via = via or (f" (a {BASE_KEY} of {chain[-1]})" if chain else "")
    if not os.path.isfile(filename):
        if chain:
            raise ConfigError(
                f"Config file {chain[-1]} names a {BASE_KEY} file that does not exist: {filename}"
            )
        raise ConfigError(f"Config file not found: {filename}")
    try:
        with open(filename, encoding="utf-8") as f:
            text = f.read()
        loaded = _safe_load(text)
    except yaml.YAMLError as e:
        detail = " ".join(str(e).split())
        raise ConfigError(f"Config file {filename}{via} is not valid YAML: {detail}") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"Config file {filename}{via} cannot be read: {e}") from None
    if loaded is None:
        raise ConfigError(
            f"Config file {filename}{via} is empty; it needs KEY: value lines (e.g. MODEL: ...)"
        )
    if not isinstance(loaded, dict):
        raise ConfigError(
            f"Config file {filename}{via} holds a {_type_name(loaded)} at the top level; it must be a "
            "mapping of KEY: value lines"
        )
    return loaded, text


def _merge_dicts(src: dict, dst: dict, filename: str, prefix: str = "", under: str = "") -> None:
    """Merge ``src`` into ``dst`` (values of ``src`` win; sections merge key by key). ``under`` names
    what ``dst`` came from, for the message (default: a ``_BASE_`` file)."""
    for key, value in src.items():
        if isinstance(value, dict) and key in dst:
            if not isinstance(dst[key], dict):
                raise ConfigError(
                    f"Config file {filename}: {prefix}{key} is a section, but "
                    f"{under or f'a {BASE_KEY} file'} sets it to the value {dst[key]!r}"
                )
            _merge_dicts(value, dst[key], filename, f"{prefix}{key}.", under)
        else:
            dst[key] = value


def _load_yaml_chain(filename: str, chain: tuple[str, ...]) -> dict:
    """:meth:`CfgNode.load_yaml_with_base` for ``filename`` reached through ``chain``."""
    real = os.path.realpath(filename)
    seen = [os.path.realpath(c) for c in chain]
    if real in seen:
        cycle = " -> ".join([*chain[seen.index(real) :], filename])
        raise ConfigError(f"{BASE_KEY} cycle in config files: {cycle}")
    loaded, text = _read_yaml_mapping(filename, chain)
    side = read_side_file(
        filename, text, lambda path: _read_yaml_mapping(path, chain, f" (the fastreid keys of {filename})")[0]
    )
    if side is not None:  # this package's keys saved beside the file (saved.py); the file's own win
        _merge_dicts(loaded, side, filename, under=f"its side file {side_file(filename)}")
        loaded = side
    bases = loaded.pop(BASE_KEY, None)
    if bases is None:
        return loaded
    if isinstance(bases, str):
        bases = [bases]
    if not isinstance(bases, list) or not all(isinstance(b, str) and b for b in bases):
        raise ConfigError(
            f"Config file {filename}: {BASE_KEY} must be a file name or a list of file names, got {bases!r}"
        )
    merged: dict = {}
    for base in bases:
        path = os.path.expanduser(base)
        if not os.path.isabs(path):
            path = os.path.join(os.path.dirname(filename), path)
        _merge_dicts(_load_yaml_chain(path, (*chain, filename)), merged, filename)
    _merge_dicts(loaded, merged, filename)
    return merged


def _unknown_key_message(root: CfgNode, full_key: str, source: str) -> str:
    candidates = _all_keys(root)
    close = difflib.get_close_matches(full_key, candidates, n=1, cutoff=0.5)
    if not close:
        last = full_key.split(".")[-1]
        close = [k for k in candidates if k.split(".")[-1] == last][:1]
    hint = f"; did you mean {close[0]}?" if close else ""
    return f"Unknown config key {full_key} ({source}){hint}"


def _first_leaf(full_key: str, value: Any) -> str:
    """``A.B`` with value ``{"C": 1}`` -> ``A.B.C``: the key the user most likely meant to set."""
    while isinstance(value, dict) and len(value) > 0:
        key, value = next(iter(value.items()))
        full_key = f"{full_key}.{key}"
    return full_key


def _parse_override(raw: Any) -> Any:
    if not isinstance(raw, str):
        return raw
    try:
        return ast.literal_eval(raw)
    except (ValueError, SyntaxError):
        pass
    try:
        return yaml.safe_load(raw)
    except yaml.YAMLError:
        return raw


def _upstream_spelling(full_key: str, value: Any) -> Any:
    """A ``MODEL.BACKBONE.DEPTH`` given as a number N (``50``, ``"50"``) as upstream's "Nx", how every
    backbone here reads it, so the config holds what upstream's config and backbones take."""
    if full_key != "MODEL.BACKBONE.DEPTH" or isinstance(value, bool):
        return value
    if isinstance(value, int) or (isinstance(value, str) and value.strip().isdigit()):
        return f"{str(value).strip()}x"
    return value


def _coerce(value: Any, default: Any, full_key: str, source: str) -> Any:
    allowed = MULTI_TYPE_KEYS.get(full_key, ()) + (type(default),)
    if isinstance(value, bool) and bool not in allowed:
        pass  # a bool is an int in Python; only accept it where bools are expected
    elif isinstance(value, allowed):
        return _upstream_spelling(full_key, value)
    if isinstance(default, float) and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if isinstance(default, (list, tuple)) and isinstance(value, (list, tuple)):
        return type(default)(value)
    if isinstance(default, str) and value is None:
        return ""
    expected = " or ".join(t.__name__ for t in dict.fromkeys(allowed))
    raise ConfigError(
        f"Config key {full_key} ({source}) expects {expected}, got {_type_name(value)} {value!r}"
    )


def get_cfg() -> CfgNode:
    """A fresh copy of the default config."""
    return CfgNode(_C)  # a deep copy, every node a checking CfgNode


global_cfg = CfgNode()
"""Upstream's process-wide config (for quick experiments): :func:`set_global_cfg` fills it, code
anywhere reads it with ``from fastreid.config import global_cfg``. Empty until then."""


def set_global_cfg(cfg: CfgNode) -> None:
    """Make ``global_cfg`` hold ``cfg``'s keys (the same object is updated in place, so modules
    that imported it see the new values)."""
    global_cfg.clear()
    global_cfg.update(cfg)


# ---------------------------------------------------------------------------
# configurable: builders that accept either a cfg or explicit arguments
# ---------------------------------------------------------------------------


def _called_with_cfg(*args: Any, **kwargs: Any) -> bool:
    if args and isinstance(args[0], _FvCfgNode):
        return True
    return isinstance(kwargs.get("cfg"), _FvCfgNode)


def _explicit_from_cfg(from_config: Callable, *args: Any, **kwargs: Any) -> dict:
    """Call ``from_config`` with the cfg (and any extra arguments it declares); extra keyword
    arguments it does not take are passed through to the wrapped callable."""
    params = inspect.signature(from_config).parameters
    if "cfg" not in params:
        raise TypeError(f"{from_config.__qualname__} must take 'cfg' as its first argument")
    takes_var_kw = any(p.kind == p.VAR_KEYWORD for p in params.values())
    if takes_var_kw:
        return from_config(*args, **kwargs)
    own = {k: v for k, v in kwargs.items() if k in params}
    rest = {k: v for k, v in kwargs.items() if k not in params}
    explicit = from_config(*args, **own)
    explicit.update(rest)
    return explicit


def configurable(init_func: Callable | None = None, *, from_config: Callable | None = None):
    """Let a class ``__init__`` or a function accept a cfg in place of its explicit arguments.

    On a class: decorate ``__init__`` and define ``from_config(cls, cfg, ...)`` returning a dict
    of ``__init__`` arguments. On a function: ``@configurable(from_config=fn)``. Calling with a
    CfgNode as first argument (or ``cfg=``) goes through ``from_config``; anything else is a
    plain call.
    """
    if init_func is not None:
        if not (inspect.isfunction(init_func) and init_func.__name__ == "__init__"):
            raise TypeError("@configurable without arguments only decorates __init__ methods")

        @functools.wraps(init_func)
        def wrapped_init(self, *args, **kwargs):
            from_cfg = getattr(type(self), "from_config", None)
            if from_cfg is None:
                raise AttributeError(f"{type(self).__name__} uses @configurable but has no from_config")
            if _called_with_cfg(*args, **kwargs):
                explicit = _explicit_from_cfg(from_cfg, *args, **kwargs)
                init_func(self, **explicit)
            else:
                init_func(self, *args, **kwargs)

        return wrapped_init

    if from_config is None:
        raise TypeError("@configurable on a function needs from_config=...")

    def decorator(func: Callable) -> Callable:
        @functools.wraps(func)
        def wrapped(*args, **kwargs):
            if _called_with_cfg(*args, **kwargs):
                return func(**_explicit_from_cfg(from_config, *args, **kwargs))
            return func(*args, **kwargs)

        wrapped.from_config = from_config  # type: ignore[attr-defined]  # function attribute, as detectron2 does
        return wrapped

    return decorator


def keys_of(node: CfgNode) -> Iterable[str]:
    """Every full key of a config, sections included (used for messages and tests)."""
    return _all_keys(node)
