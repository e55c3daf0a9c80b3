"""DAG picture benchmark: lay out large DAGs as the DAG run page draws them.

    .venv/bin/python -m bench.dag_layout [--rounds 5]

Three shapes: a 1,000-step chain, a 1,000-wide fan-out from one root, and a dense DAG of
300 steps with every forward edge (44,850 edges). Prints the median CPU time of each
over the rounds (targets: chain and fan-out together under 0.5 s, the dense DAG under 3 s).
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import time
from collections.abc import Callable

from app.dags.dag_layout import layout


def chain() -> None:
    names = [f"c{i}" for i in range(1000)]
    layout(names, list(itertools.pairwise(names)))


def fan_out() -> None:
    names = ["root", *(f"f{i}" for i in range(1000))]
    layout(names, [("root", f) for f in names[1:]])


def dense() -> None:
    names = [f"n{i}" for i in range(300)]
    layout(names, [(names[i], names[j]) for i in range(300) for j in range(i + 1, 300)])


def cpu_seconds(draw: Callable[[], None]) -> float:
    started = time.process_time()
    draw()
    return time.process_time() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    for name, draw in (("1,000-step chain", chain), ("1,000-wide fan-out", fan_out),
                       ("dense, 300 steps, 44,850 edges", dense)):  # fmt: skip
        times = [cpu_seconds(draw) for _ in range(args.rounds)]
        print(
            f"{name}: {statistics.median(times) * 1000:.0f} ms CPU "
            f"(median of {args.rounds}, {min(times) * 1000:.0f}-{max(times) * 1000:.0f})"
        )


if __name__ == "__main__":
    main()
