"""Group a callgrind profile of the event loop into where the instructions per packet-hop go.

valgrind --tool=callgrind --callgrind-out-file=cg.out --toggle-collect='*Engine::run*' \
    "$(python -c 'import sys; print(sys.executable)')" bench/one_run.py 1024   # prints packet_hops
python bench/cg_breakdown.py cg.out 2985718

Each line of `callgrind_annotate --inclusive=no` (self cost per source file and function,
inlined code counted in its own file) goes to one group by that file and function.
"""

import re
import subprocess
import sys

GROUPS = (
    (
        "event queue, run loop, scheduling",
        lambda f, fn: f.endswith(("event_queue.hpp", "engine.hpp", "engine.cpp")),
    ),
    ("NIC arbitration and DCQCN", lambda f, fn: f.endswith("roce.cpp") or "pull_nic" in fn),
    ("event dispatch (on_event handlers)", lambda f, fn: "on_event" in fn),
    ("arrival, forwarding, queues, transmit", lambda f, fn: True),
)


def main(path: str, hops: int) -> None:
    out = subprocess.run(
        ["callgrind_annotate", "--inclusive=no", "--threshold=100", path],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    total, grouped = 0, dict.fromkeys(name for name, _ in GROUPS)
    for line in out.splitlines():
        m = re.match(r"\s*([\d,]+) \(\s*[\d.]+%\)\s+(\S+?):(.*)", line)
        if not m or "PROGRAM TOTALS" in line:
            continue
        ir, f, fn = int(m.group(1).replace(",", "")), m.group(2), m.group(3)
        total += ir
        name = next(name for name, match in GROUPS if match(f, fn))
        grouped[name] = (grouped[name] or 0) + ir
    for name, ir in grouped.items():
        print(f"{name:40s} {(ir or 0) / hops:7.1f} instructions per packet-hop")
    print(f"{'total':40s} {total / hops:7.1f}")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
