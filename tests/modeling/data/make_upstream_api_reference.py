"""Write ``data/upstream/api_reference.pt`` by running the cases of ``upstream_api_cases.py`` on
upstream FastReID's own code.

Run by hand against a checkout of upstream (JDAI-CV/fast-reid), from anywhere::

    python tests/modeling/data/make_upstream_api_reference.py /path/to/upstream-fastreid [--out FILE]

The script puts the checkout first on ``sys.path``, so the cases import upstream's ``fastreid``,
runs every case and saves ``{"source": ..., "commit": ..., "cases": {case: result}}`` with
``torch.save``. A few results come from upstream functions that are private there and public here
(``_mobilenet_v3_conf``: ``mobilenetv3_configs`` below). Not a test: the suite only reads the file.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "upstream", "api_reference.pt")


def mobilenetv3_configs() -> dict:
    """Upstream's block settings of MobileNetV3 Large/Small for each tail option."""
    from fastreid.modeling.backbones import mobilenetv3

    out = {}
    for arch in ("Large", "Small"):
        for reduced in (False, True):
            for dilated in (False, True):
                for width in (1.0, 0.75):
                    params = {"_reduced_tail": reduced, "_dilated": dilated, "_width_mult": width}
                    settings, last = mobilenetv3._mobilenet_v3_conf(arch, params)
                    rows = [
                        [c.input_channels, c.kernel, c.expanded_channels, c.out_channels]
                        + [c.use_se, c.use_hs, c.stride, c.dilation]
                        for c in settings
                    ]
                    out[f"{arch}.r{int(reduced)}.d{int(dilated)}.w{width}"] = [rows, last]
    return out


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("upstream", help="a checkout of upstream FastReID")
    parser.add_argument("--out", default=OUT, help="file to write (default: %(default)s)")
    args = parser.parse_args(argv)
    upstream = os.path.abspath(args.upstream)
    commit = subprocess.run(
        ["git", "-C", upstream, "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    sys.path.insert(0, upstream)
    sys.path.insert(1, os.path.dirname(HERE))  # upstream_reference, upstream_api_cases
    import upstream_api_cases

    assert upstream_api_cases.torch.__name__ == "torch"
    import fastreid

    assert os.path.dirname(fastreid.__file__).startswith(upstream), (
        f"not upstream's fastreid: {fastreid.__file__}"
    )
    cases = {name: upstream_api_cases.run(name) for name in upstream_api_cases.CASES}
    cases["mobilenetv3_configs"] = mobilenetv3_configs()
    record = {"source": "JDAI-CV/fast-reid", "commit": commit, "cases": cases}
    torch.save(record, args.out)
    print(f"wrote {len(cases)} cases to {args.out}")


if __name__ == "__main__":
    main(sys.argv[1:])
