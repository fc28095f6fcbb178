"""python -m tests.fuzz [--n N] [--seed S] [--surface NAME ...]: run the harness, print the
outcome table, exit 1 if any input ended generic or hung."""

import argparse
import sys
import time

from .harness import SURFACES, format_table, run


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=2000, help="inputs in all (default 2000)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--surface", action="append", choices=sorted(SURFACES), help="only these (repeat)")
    args = ap.parse_args()
    t0 = time.perf_counter()
    result = run(args.n, args.seed, args.surface)
    print(format_table(result))
    print(f"{args.n} inputs in {time.perf_counter() - t0:.1f} s (seed {args.seed})")
    bad = sum(c["generic"] + c["hang"] for c in result["table"].values())
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
