"""Per-job cost of the executors' async path for the `noop` handler.

    .venv/bin/python bench/executor_overhead.py [jobs-per-round] [rounds]

Prints the median time per job of `Executors.run()` (async model, with a timeout timer),
of awaiting the handler directly with a ready-made context, and the difference: the
executors' overhead per job (registry lookup, context, timer, bookkeeping, outcome).
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time

from app.executors import Executors
from app.handlers import default_registry
from app.handlers.builtin import noop
from app.handlers.jobs import ClaimedRun, JobContext

DEFAULT_JOBS = 50_000
DEFAULT_ROUNDS = 7


async def per_job_executors(executors: Executors, jobs: list[ClaimedRun]) -> float:
    started = time.perf_counter()
    for job in jobs:
        await executors.run(job)
    return (time.perf_counter() - started) / len(jobs)


async def per_job_direct(jobs: list[ClaimedRun]) -> float:
    ctx = JobContext.for_job(jobs[0])
    started = time.perf_counter()
    for job in jobs:
        await noop(ctx, **job.args)
    return (time.perf_counter() - started) / len(jobs)


async def main(count: int, rounds: int) -> None:
    executors = Executors(default_registry, thread_workers=1, process_workers=0)
    await executors.start()
    jobs = [ClaimedRun(i, 1, "noop", {}, "async", 30.0) for i in range(count)]
    through, direct = [], []
    for _ in range(rounds):
        through.append(await per_job_executors(executors, jobs))
        direct.append(await per_job_direct(jobs))
    await executors.close()
    run_us = statistics.median(through) * 1e6
    direct_us = statistics.median(direct) * 1e6
    print(f"Executors.run(noop, async): {run_us:.2f} us/job ({1e6 / run_us:,.0f} jobs/s)")
    print(f"noop called directly:       {direct_us:.2f} us/job")
    print(f"executor overhead:          {run_us - direct_us:.2f} us/job")


if __name__ == "__main__":
    args = [int(a) for a in sys.argv[1:3]]
    asyncio.run(main(*(args + [DEFAULT_JOBS, DEFAULT_ROUNDS][len(args) :])))
