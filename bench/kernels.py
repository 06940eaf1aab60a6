"""Print the kernel benchmark table: NumPy reference vs OpenCL reference vs a device copy.

    POCL_CACHE_DIR=/tmp/pocl-cache python bench/kernels.py [--quick] [--repeats N] [--size RxD ...]

The default (1024x1024 and 4096x4096, 7 repeats) takes about a minute on
two CPU cores with PoCL. Each row shows the reduction passes and reads of x,
the compulsory DRAM bytes (which GB/s and % of copy use) and the row-pass
bytes (every pass over x from memory: RMSNorm's single reduction pass against
the two-pass LayerNorm). See reference/opencl/bench.py for what is measured.
"""

from __future__ import annotations

import argparse
import sys

from reference.opencl.bench import DEFAULT_SIZES, QUICK_SIZES, format_table, launch_latency_s, run_bench
from reference.opencl.runtime import opencl_unavailable_reason


def parse_size(text: str) -> tuple[int, int]:
    """'4096x4096' -> (4096, 4096)."""
    rows, _, cols = text.lower().partition("x")
    return int(rows), int(cols)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", action="append", type=parse_size, help="R x D, e.g. 1024x1024 (repeatable)")
    parser.add_argument("--repeats", type=int, default=7, help="timed runs per measurement (median reported)")
    parser.add_argument("--quick", action="store_true", help="one small size (256x1024), 3 repeats")
    args = parser.parse_args(argv)
    reason = opencl_unavailable_reason()
    if reason is not None:
        print(f"no OpenCL device: {reason}", file=sys.stderr)
        return 2
    sizes = tuple(args.size) if args.size else DEFAULT_SIZES
    repeats = args.repeats
    if args.quick:
        sizes, repeats = QUICK_SIZES, 3
    print(format_table(run_bench(sizes=sizes, repeats=repeats), launch_latency_s()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
