#!/usr/bin/env python
"""Wheels for a machine with no network (``make wheels``, ``make gpu-check WHEELS=folder``).

``download`` (run where PyPI is reachable) puts into one folder every wheel the package needs
beyond PyTorch and torchvision (its dependencies and the extras asked for, with theirs), built for
another machine's Python version and platform: pure-Python projects published only as source
(fvcore, iopath) are built into wheels here, the rest are downloaded for the target.

``install`` (run on the offline machine) installs from that folder, with no index, the wheels whose
project that Python does not have yet, into ``--target`` (put it on ``PYTHONPATH``): the
machine's own PyTorch, NumPy and the rest stay as they are.

    python tools/dev/offline_wheels.py download --dest wheels --python-version 3.12 --extras serve,deploy
    python tools/dev/offline_wheels.py install --wheels wheels --target .gpu-site
"""

from __future__ import annotations

import argparse
import glob
import importlib.metadata
import os
import re
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
#: Brought by the machine's PyTorch install, never downloaded here.
PROVIDED = {"torch", "torchvision"}
#: The manylinux tags an x86-64 Linux with glibc >= 2.28 accepts (pip matches each exactly).
LINUX_X86_64 = [f"manylinux_2_{n}_x86_64" for n in (17, 24, 27, 28)] + ["manylinux2014_x86_64"]


def normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def requirements(extras: list[str]) -> list[str]:
    """The package's dependencies and those of ``extras`` (pyproject.toml), PyTorch's left out."""
    import tomllib  # Python 3.11+: this tool runs where the wheels are made

    with open(os.path.join(REPO, "pyproject.toml"), "rb") as f:
        project = tomllib.load(f)["project"]
    reqs = list(project["dependencies"])
    for extra in extras:
        if extra not in project["optional-dependencies"]:
            raise SystemExit(
                f"no extra {extra!r} in pyproject.toml; known: {sorted(project['optional-dependencies'])}"
            )
        reqs += project["optional-dependencies"][extra]
    name = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")
    kept = []
    for req in reqs:
        match = name.match(req)
        if match and normalise(match.group(1).split("[")[0]) not in PROVIDED and req not in kept:
            kept.append(req)
    return kept


def pip(*args: str) -> None:
    cmd = [sys.executable, "-m", "pip", *args]
    print("$ " + " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True)


def download(args: argparse.Namespace) -> None:
    reqs = requirements([e for e in args.extras.split(",") if e])
    dest = os.path.abspath(args.dest)
    os.makedirs(dest, exist_ok=True)
    with tempfile.TemporaryDirectory() as local:
        # 1. wheels for this machine, built where only a source release exists; the pure-Python
        #    ones (any platform) are kept for the target
        pip("wheel", "--quiet", "-w", local, *reqs)
        for wheel in glob.glob(os.path.join(local, "*-none-any.whl")):
            os.replace(wheel, os.path.join(dest, os.path.basename(wheel)))
    # 2. everything for the target's Python and platform, the pure wheels above included
    platforms = [x for p in args.platform for x in ("--platform", p)]
    pip("download", "--quiet", "--only-binary=:all:", "--python-version", args.python_version,
        "--implementation", "cp", *platforms, "--find-links", dest, "-d", dest, *reqs)  # fmt: skip
    wheels = sorted(os.listdir(dest))
    size = sum(os.path.getsize(os.path.join(dest, w)) for w in wheels) / 2**20
    print(f"{len(wheels)} wheels, {size:.1f} MiB in {dest}")


def project_of(wheel: str) -> str:
    return normalise(os.path.basename(wheel).split("-")[0])


def install(args: argparse.Namespace) -> None:
    wheels = sorted(glob.glob(os.path.join(args.wheels, "*.whl")))
    if not wheels:
        raise SystemExit(f"no wheels in {args.wheels}: make them with `make wheels` where PyPI is reachable")
    have = {normalise(d.metadata["Name"]) for d in importlib.metadata.distributions() if d.metadata["Name"]}
    missing = [w for w in wheels if project_of(w) not in have]
    print(f"{len(wheels) - len(missing)} of {len(wheels)} wheels' projects are installed already; installing "
          f"{len(missing)} into {args.target}: {' '.join(project_of(w) for w in missing)}", flush=True)  # fmt: skip
    if missing:
        pip("install", "--quiet", "--no-index", "--no-deps", "--no-compile", "--upgrade", "--target", args.target,
            *missing)  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    d = sub.add_parser("download", help="fill a folder with the wheels (needs PyPI)")
    d.add_argument("--dest", default="wheels")
    d.add_argument("--python-version", default=f"{sys.version_info[0]}.{sys.version_info[1]}")
    d.add_argument(
        "--platform", action="append", default=None, help=f"wheel platform tags (default: {LINUX_X86_64})"
    )
    d.add_argument(
        "--extras", default="serve,deploy", help="extras of the package to include (comma-separated)"
    )
    i = sub.add_parser("install", help="install what is missing from the folder (no network)")
    i.add_argument("--wheels", required=True)
    i.add_argument("--target", required=True, help="folder to install into (put it on PYTHONPATH)")
    args = parser.parse_args(argv)
    if args.command == "download":
        args.platform = args.platform or LINUX_X86_64
        download(args)
    else:
        install(args)


if __name__ == "__main__":
    main()
