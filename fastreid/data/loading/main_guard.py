"""The ``if __name__ == "__main__":`` guard: is a loader being started from the unguarded
top-level code of the script? Spawned workers re-run that code and Python stops them."""

from __future__ import annotations

import ast
import functools
import multiprocessing
import os
import sys
import types

__all__ = ["find_unguarded_main_call", "unguarded_main_message", "inside_spawn_bootstrap"]


# --------------------------------------------------------------------------------------------
# The `if __name__ == "__main__":` guard
# --------------------------------------------------------------------------------------------
def _is_main_guard(test: ast.expr) -> bool:
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq)):
        return False
    sides = [test.left, test.comparators[0]]
    names = [s for s in sides if isinstance(s, ast.Name) and s.id == "__name__"]
    consts = [s for s in sides if isinstance(s, ast.Constant) and s.value == "__main__"]
    return len(names) == 1 and len(consts) == 1


@functools.lru_cache(maxsize=32)
def _guarded_ranges(path: str, mtime: float) -> tuple[tuple[int, int], ...] | None:
    try:
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), filename=path)
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
        return None
    ranges: list[tuple[int, int]] = []

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.If) and _is_main_guard(node.test) and node.body:
                ranges.append((node.body[0].lineno, node.body[-1].end_lineno or node.body[-1].lineno))
            elif isinstance(node, (ast.If, ast.For, ast.While, ast.With, ast.Try)):
                for block in ("body", "orelse", "finalbody"):
                    visit(getattr(node, block, []) or [])
                for handler in getattr(node, "handlers", []) or []:
                    visit(handler.body)

    visit(tree.body)
    return tuple(ranges)


def find_unguarded_main_call() -> tuple[str, int] | None:
    """(script, line) when the caller runs in the top-level code of the ``__main__`` script outside
    ``if __name__ == "__main__":``. Spawned workers re-import that script, re-run that line, and
    Python stops them with the "bootstrapping phase" RuntimeError."""
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    if main is None or not path or not os.path.isfile(path):
        return None  # interactive sessions and `python -c` are not re-run by spawned workers
    main_globals = vars(main)
    frame: types.FrameType | None = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_name == "<module>" and frame.f_globals is main_globals:
            break
        frame = frame.f_back
    if frame is None:
        return None
    try:
        ranges = _guarded_ranges(os.path.abspath(path), os.path.getmtime(path))
    except OSError:
        return None
    if ranges is None:
        return None
    line = frame.f_lineno
    if any(start <= line <= end for start, end in ranges):
        return None
    return os.path.abspath(path), line


def unguarded_main_message(where: tuple[str, int], method: str, fallback: str | None) -> str:
    path, line = where
    text = (
        f"{path}, line {line}: {method} worker processes would be started from the top-level code of the "
        f'script, which has no `if __name__ == "__main__":` guard around it. Each {method} worker re-runs '
        'the script and Python stops it with "An attempt has been made to start a new process before the '
        'current process has finished its bootstrapping phase". Fix: move the code from line '
        f"{line} into a function, e.g. `def main(): ...`, and call it at the end of the file under the "
        'guard: `if __name__ == "__main__": main()`.'
    )
    return text + (f" Using {fallback} for now." if fallback else "")


def inside_spawn_bootstrap() -> bool:
    return bool(getattr(multiprocessing.current_process(), "_inheriting", False))
