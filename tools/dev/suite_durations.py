#!/usr/bin/env python
"""Write ``tests/durations.json``, the seconds each test file took in a run of the suite, from that
run's JUnit XML. ``tests/conftest.py`` starts the heaviest files first, so that on two pytest-xdist
workers a long file never starts last while the other worker has nothing left to do.

    make test PYTEST_ARGS=--junitxml=logs/junit.xml && python tools/dev/suite_durations.py logs/junit.xml
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import xml.etree.ElementTree as ET

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def file_seconds(junit_xml: str) -> dict[str, float]:
    """Seconds per test file (``tests/x/test_y.py``) of the test cases in ``junit_xml``."""
    totals: collections.Counter[str] = collections.Counter()
    for case in ET.parse(junit_xml).iter("testcase"):
        parts = (case.get("classname") or "").split(".")
        modules = [i for i, p in enumerate(parts) if p.startswith("test_")]
        if not modules:
            continue
        totals["/".join(parts[: modules[0] + 1]) + ".py"] += float(case.get("time") or 0.0)
    return {name: round(seconds, 1) for name, seconds in sorted(totals.items(), key=lambda kv: -kv[1])}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("junit_xml")
    parser.add_argument("--output", default=os.path.join(REPO, "tests", "durations.json"))
    args = parser.parse_args(argv)
    seconds = file_seconds(args.junit_xml)
    with open(args.output, "w", encoding="utf-8") as f:
        json.dump(seconds, f, indent=0)
        f.write("\n")
    print(f"{len(seconds)} files, {sum(seconds.values()):.0f} s in all, written to {args.output}")


if __name__ == "__main__":
    main()
