"""Which model a checkpoint (.pth) belongs to, and whether it loads strictly.

    fastreid-convert model_final.pth          # or: python tools/convert_checkpoint.py model_final.pth
    fastreid-convert model_final.pth --config-file configs/Market1501/sbs_R50-ibn.yml
    fastreid-convert model_final.pth --output clean.pth

Compares the checkpoint's tensor names and shapes with the model of every config shipped with
the package (``configs/``; or the given ``--config-file``/``--config-dir``) and prints the
configs it fits, or the closest ones and what differs. ``--output`` writes the model's tensors as
``{"model": state_dict}`` (no optimizer state, no ``module.`` prefix), the layout
``MODEL.WEIGHTS`` reads. Exit 0 when some config loads the checkpoint strictly, 1 when none does.
"""

from __future__ import annotations

import argparse
import sys

from fastreid.config.locate import packaged_configs_dir, resolve_config_file
from fastreid.utils.errors import CheckpointError, run_tool

__all__ = ["main", "parse_args", "run"]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument(
        "checkpoint", help="a .pth file: fastreid's or upstream FastReID's model_final.pth, ..."
    )
    parser.add_argument(
        "--config-file",
        action="append",
        default=[],
        type=resolve_config_file,
        help="compare with this config only (repeatable)",
    )
    parser.add_argument(
        "--config-dir",
        action="append",
        default=[],
        help="compare with every config under this folder (default: the configs shipped with fastreid)",
    )
    parser.add_argument(
        "--top", type=int, default=3, help="closest configs to show when none fits (default 3)"
    )
    parser.add_argument(
        "--output", default="", help="write the model's tensors as {'model': state_dict} here"
    )
    parser.add_argument(
        "--trust",
        action="store_true",
        help="also read files holding pickled Python objects (runs their code: trusted files only)",
    )
    parser.add_argument(
        "opts",
        nargs="*",
        default=[],
        help="config overrides applied to every config, e.g. MODEL.HEADS.NUM_CLASSES 751",
    )
    return parser.parse_intermixed_args(argv)


def _read(path: str, trust: bool):
    from fastreid.utils.safe_load import load_torch_file  # torch: only once the arguments are good

    return load_torch_file(path, trust=trust, trust_hint="--trust")


def _shape(shape) -> str:
    return "[" + ", ".join(map(str, shape)) + "]"


def _explain(match, limit: int = 3) -> list[str]:
    if match.error:
        return [f"    does not build here: {match.error}"]
    lines = []
    if match.mismatched:
        examples = "; ".join(
            f"{k} {_shape(got)} in the file, {_shape(want)} in the model"
            for k, (got, want) in list(match.mismatched.items())[:limit]
        )
        lines.append(f"    {len(match.mismatched)} tensors of another shape, e.g. {examples}")
    if match.missing:
        lines.append(
            f"    {len(match.missing)} model tensors missing from the file, e.g. {', '.join(match.missing[:limit])}"
        )
    if match.unexpected:
        lines.append(
            f"    {len(match.unexpected)} file tensors the model does not have, e.g. "
            f"{', '.join(match.unexpected[:limit])}"
        )
    return lines


def main(args: argparse.Namespace) -> int:
    # torch and the models: only once the arguments are good
    from fastreid.modeling.checkpoint_match import checkpoint_state, config_files, match_configs

    checkpoint = _read(args.checkpoint, args.trust)
    try:
        state = checkpoint_state(checkpoint)
    except ValueError as e:
        raise CheckpointError(f"{args.checkpoint}: {e}") from None
    extra = [k for k in ("iteration", "epoch") if isinstance(checkpoint, dict) and k in checkpoint]
    about = ", ".join(f"{k} {checkpoint[k]}" for k in extra)
    print(f"{args.checkpoint}: {len(state)} tensors" + (f" ({about})" if about else ""))

    # the shipped configs unless --config-file or --config-dir names what to compare with
    shipped = [] if args.config_file else [d for d in [packaged_configs_dir()] if d]
    folders = args.config_dir or shipped
    files = list(args.config_file) + config_files(folders)
    if not files:
        raise CheckpointError("no config files to compare with; pass --config-file or --config-dir")
    matches = match_configs(state, files, args.opts)
    strict = [m for m in matches if m.strict]
    for m in strict:
        classes = (
            f", {m.num_classes} identities (MODEL.HEADS.NUM_CLASSES {m.num_classes})" if m.num_classes else ""
        )
        print(f"Loads strictly into {m.description}{classes}; configs: {', '.join(m.configs)}")
    if not strict:
        print("No config loads it strictly. Closest:")
        for m in matches[: args.top]:
            print(f"  {', '.join(m.configs)} ({m.description or 'not built'})")
            print("\n".join(_explain(m)))
    if args.output:
        from fastreid.utils.checkpoint import Checkpointer  # torch: only once the arguments are good

        Checkpointer.write(args.output, {"model": state})
        print(f"Wrote the model's {len(state)} tensors to {args.output}")
    return 0 if strict else 1


def run(argv: list[str] | None = None) -> int:
    """The entry point of ``fastreid-convert`` and ``tools/convert_checkpoint.py``."""
    args = parse_args(argv)
    return run_tool(lambda: main(args))


if __name__ == "__main__":
    sys.exit(run())
