"""What the feature tools' commands share (``fastreid-extract``, ``fastreid-search``,
``fastreid-export``): config overrides written after the input words, the console logger, and one
``run(argv=None)`` per tool that reports a user error in one line (:func:`fastreid.utils.errors.run_tool`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from typing import Any, Optional

from fastreid.utils.errors import run_tool
from fastreid.utils.logger import setup_logger

__all__ = ["run_command_line", "split_config_overrides", "tool_entry_point"]

_CONFIG_KEY = re.compile(r"[A-Z][A-Z0-9_]*(\.[A-Z0-9_]+)+")


def split_config_overrides(values: Sequence[str], opts: Sequence[str]) -> tuple[list[str], list[str]]:
    """``--input a b MODEL.WEIGHTS w.pth``: argparse gives every word to ``--input``; the words from
    the first config key on (``KEY.SUBKEY`` in capitals) are the overrides. Returns
    ``(inputs, overrides + opts)``."""
    values = list(values)
    for i, value in enumerate(values):
        if _CONFIG_KEY.fullmatch(value) and not os.path.exists(value):
            return values[:i], values[i:] + list(opts)
    return values, list(opts)


def run_command_line(parser: Any, main: Any, inputs_attr: str, argv: Optional[Sequence[str]] = None) -> int:
    """Parse ``argv`` (config overrides after the ``inputs_attr`` words go to ``opts``), set up
    the console logger and run ``main(args)`` under ``run_tool``: the entry point of each tool."""
    args = parser.parse_args(argv)
    if getattr(args, inputs_attr, None):
        inputs, args.opts = split_config_overrides(getattr(args, inputs_attr), args.opts)
        setattr(args, inputs_attr, inputs)
    setup_logger(name="fastreid")
    return run_tool(lambda: main(args))


def tool_entry_point(
    get_parser: Callable[[], Any], main: Callable[[Any], object], inputs_attr: str
) -> Callable[..., int]:
    """A tool's ``run(argv=None)`` (its console script and ``tools/*.py`` call it):
    :func:`run_command_line` with the tool's parser, ``main`` and input words."""

    def run(argv: Optional[Sequence[str]] = None) -> int:
        return run_command_line(get_parser(), main, inputs_attr, argv)

    return run
