"""Job children under faults: they die with their worker (parent-death signal and the
lifeline pipe, each on its own), a reply to a worker that is gone is one JSON log line,
and a process job's timeout does not count its wait for a free pool child."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from app.executors import Executors
from app.executors.child_setup import LIFELINE_ENV
from app.executors.framing import encode_frame
from app.executors.protocol import encode_request
from app.executors.spawning import child_environment
from app.handlers.jobs import Outcome, OutcomeStatus
from tests.helpers import fixtures_handlers
from tests.helpers.commands import REPO
from tests.helpers.executors import job, with_executors
from tests.helpers.waits import gone, wait_until

POOL_CHILD = [sys.executable, "-m", "app.executors.pool_child", fixtures_handlers.MODULE]


def read_pids(path: Path) -> tuple[int, int]:
    wait_until(lambda: path.exists() and len(path.read_text().split()) == 2, "two pids")
    child, grandchild = map(int, path.read_text().split())
    return child, grandchild


def write_pids_request(path: Path) -> bytes:
    return encode_frame(encode_request(job("fixture_write_pids", "process", path=str(path))))


def test_a_process_job_waiting_for_a_child_is_not_timed_out_by_the_wait() -> None:
    """The second job waits for the only child longer than its timeout, then runs well
    within it: it completes (its timeout used to count the wait)."""

    async def scenario(ex: Executors) -> tuple[Outcome, Outcome]:
        first = asyncio.create_task(ex.run(job("sleep", "process", timeout=10, seconds=1.5)))
        await asyncio.to_thread(
            wait_until, lambda: ex.stats()["processes_busy"] == 1, "a busy process"
        )
        second = await ex.run(job("sleep", "process", timeout=1.2, seconds=0.2))
        return await first, second

    first, second = with_executors(scenario, processes=1)
    assert first.status is OutcomeStatus.COMPLETED
    assert second.status is OutcomeStatus.COMPLETED, second


def test_a_timeout_still_counts_the_handlers_own_run_time_behind_a_busy_pool() -> None:
    async def scenario(ex: Executors) -> Outcome:
        first = asyncio.create_task(ex.run(job("sleep", "process", timeout=10, seconds=0.5)))
        await asyncio.to_thread(
            wait_until, lambda: ex.stats()["processes_busy"] == 1, "a busy process"
        )
        second = await ex.run(job("sleep", "process", timeout=0.3, seconds=5))
        await first
        return second

    assert with_executors(scenario, processes=1).status is OutcomeStatus.TIMED_OUT


def test_the_parent_death_signal_kills_a_busy_child_and_its_group(tmp_path: Path) -> None:
    """A parent without the lifeline pipe, killed with SIGKILL: only the kernel's
    parent-death signal can tell the child (Linux)."""
    pids = tmp_path / "pids"
    parent_script = textwrap.dedent(
        f"""
        import os, subprocess, sys, time
        env = dict(os.environ)
        env.pop({LIFELINE_ENV!r}, None)
        child = subprocess.Popen({POOL_CHILD!r}, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                 start_new_session=True, env=env)
        child.stdin.write({write_pids_request(pids)!r})
        child.stdin.flush()
        time.sleep(120)
        """
    )
    env = child_environment()
    env.pop(LIFELINE_ENV, None)
    parent = subprocess.Popen([sys.executable, "-c", parent_script], env=env, cwd=REPO)
    try:
        child, grandchild = read_pids(pids)
        parent.kill()
        parent.wait()
        wait_until(lambda: gone(child) and gone(grandchild), "the job's processes gone")
    finally:
        parent.kill()
        parent.wait()


def test_the_lifeline_pipe_alone_kills_a_busy_child_and_its_group(tmp_path: Path) -> None:
    """The parent (this test) lives on and closes the pipe's write end, as the kernel does
    when a worker dies: the portable way, without any signal."""
    pids = tmp_path / "pids"
    read_end, write_end = os.pipe()
    env = {**child_environment(), LIFELINE_ENV: str(read_end)}
    with subprocess.Popen(
        POOL_CHILD,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        start_new_session=True,
        env=env,
        pass_fds=(read_end,),
        cwd=REPO,
    ) as child_proc:
        os.close(read_end)
        try:
            assert child_proc.stdin is not None
            child_proc.stdin.write(write_pids_request(pids))
            child_proc.stdin.flush()
            child, grandchild = read_pids(pids)
            assert not gone(child)
            os.close(write_end)
            wait_until(lambda: gone(child) and gone(grandchild), "the job's processes gone")
            assert child_proc.wait(20) == -signal.SIGKILL
        finally:
            child_proc.kill()


def test_a_reply_to_a_worker_that_is_gone_is_one_json_line_not_a_traceback() -> None:
    """The child finishes its job after the worker closed its end of the reply pipe."""
    read_end, write_end = os.pipe()
    env = {**child_environment(), LIFELINE_ENV: str(read_end)}
    with subprocess.Popen(
        POOL_CHILD,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        env=env,
        pass_fds=(read_end,),
        cwd=REPO,
    ) as child_proc:
        os.close(read_end)
        try:
            assert child_proc.stdin is not None and child_proc.stdout is not None
            assert child_proc.stdout.read(8)  # the start of the "ready" frame
            child_proc.stdout.close()  # the worker's end of the replies is gone
            spec = job("sleep", "process", seconds=0.2)
            child_proc.stdin.write(encode_frame(encode_request(spec)))
            child_proc.stdin.close()
            assert child_proc.wait(20) == 1
            assert child_proc.stderr is not None
            lines = child_proc.stderr.read().decode().splitlines()
        finally:
            os.close(write_end)
            child_proc.kill()
    assert len(lines) == 1, lines
    entry = json.loads(lines[0])
    assert entry["level"] == "warning" and "broken pipe" in entry["msg"]
    assert (entry["run_id"], entry["attempt"]) == (spec.run_id, spec.attempt)
