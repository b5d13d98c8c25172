"""Run every benchmark and print each figure next to its same-run baseline.

``python benchmarks/run.py [--json FILE]``
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from vyre_benchmarks import (
    bench_contract,
    bench_foundation,
    bench_routing,
    bench_wgpu,
    bench_workers,
)

SUITES = [bench_foundation, bench_contract, bench_routing, bench_workers, bench_wgpu]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--json", type=Path, help="also write the results to this file")
    args = parser.parse_args()
    results = []
    print(f"{'benchmark':48} {'value':>12} {'baseline':>36} {'ratio':>8}")
    for suite in SUITES:
        for bench in suite.BENCHMARKS:
            r = bench()
            results.append(r)
            print(f"{r.name:48} {r.value:>9.3f} {r.unit:2} "
                  f"{r.baseline + ' ' + format(r.baseline_value, '.3f') + ' ' + r.unit:>36} "
                  f"{r.ratio:>7.2f}x", flush=True)
    if args.json:
        args.json.write_text(json.dumps({"machine": platform.platform(),
                                         "python": platform.python_version(),
                                         "results": [r.to_dict() for r in results]}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
