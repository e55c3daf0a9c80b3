"""Executors with real threads and processes: each model's results, errors, timeouts and
cancellation, and what the process models do when a child crashes or must be killed."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from app.executors import Executors, process_pool
from app.executors.attempt import Attempt
from app.executors.process_pool import ChildStartError
from app.executors.protocol import encode_request
from app.handlers import default_registry
from app.handlers.jobs import ClaimedRun, Outcome, OutcomeStatus
from tests.helpers import fixtures_handlers
from tests.helpers.executors import job, with_executors
from tests.helpers.waits import gone, wait_until, wait_until_async

MODELS = ["async", "thread", "process", "subprocess"]


def processes_for(model: str) -> int:
    return 1 if model == "process" else 0


# What shows that a job of each model is under way (`running` alone: held, maybe queued).
BUSY_STAT = {
    "async": "running",
    "thread": "threads_busy",
    "process": "processes_busy",
    "subprocess": "subprocesses_running",
}


async def wait_started(executors: Executors, model: str) -> None:
    """Wait until a job of `model` has a thread, a process or the loop busy."""
    key = BUSY_STAT[model]
    await wait_until_async(lambda: executors.stats()[key] >= 1, f"a {model} job to start")


async def cancel_once_started(executors: Executors, spec: ClaimedRun) -> Outcome:
    """Run `spec` and cancel it once it is under way, the way the worker does."""
    task = asyncio.create_task(executors.run(spec))
    await wait_started(executors, spec.execution_model)
    assert executors.cancel(spec.run_id, spec.attempt)
    return await task


# ---- every model ----------------------------------------------------------------------


@pytest.mark.parametrize("model", MODELS)
def test_success_returns_the_result_and_the_context_reaches_the_handler(model: str) -> None:
    spec = job("fixture_echo", model, colour="blue", n=[1, 2])
    outcome = with_executors(lambda ex: ex.run(spec), processes=processes_for(model))
    assert outcome.status is OutcomeStatus.COMPLETED, outcome
    assert isinstance(outcome.result, dict)
    assert outcome.result["args"] == {"colour": "blue", "n": [1, 2]}
    assert outcome.result["run_id"] == spec.run_id
    assert outcome.result["attempt"] == 1
    assert outcome.result["idempotency_key"] == "key-1"
    assert outcome.result["fire_time"] == "2026-01-02T03:04:00+00:00"


@pytest.mark.parametrize("model", MODELS)
def test_failure_is_retryable_with_a_traceback(model: str) -> None:
    spec = job("fixture_fail", model, message="disk on fire")
    outcome = with_executors(lambda ex: ex.run(spec), processes=processes_for(model))
    assert outcome.status is OutcomeStatus.FAILED
    assert outcome.retryable
    assert outcome.error == "ValueError: disk on fire"
    assert outcome.traceback is not None
    assert "in inner" in outcome.traceback and "ValueError: disk on fire" in outcome.traceback


@pytest.mark.parametrize("model", MODELS)
def test_non_retryable_error_is_not_retried(model: str) -> None:
    spec = job("fixture_nonretryable", model)
    outcome = with_executors(lambda ex: ex.run(spec), processes=processes_for(model))
    assert outcome.status is OutcomeStatus.FAILED
    assert not outcome.retryable
    assert outcome.error == "NonRetryableError: this run can never succeed"


@pytest.mark.parametrize("model", MODELS)
def test_unknown_handler_fails_without_retries_and_lists_known_names(model: str) -> None:
    outcome = with_executors(lambda ex: ex.run(job("no_such_handler", model)), processes=0)
    assert outcome.status is OutcomeStatus.FAILED
    assert not outcome.retryable
    assert outcome.error is not None
    assert outcome.error.startswith(
        "no handler named 'no_such_handler' is registered on this worker (known: "
    )
    assert "noop" in outcome.error and "fixture_echo" in outcome.error


@pytest.mark.parametrize("model", MODELS)
def test_result_that_is_not_json_fails_without_retries(model: str) -> None:
    outcome = with_executors(
        lambda ex: ex.run(job("fixture_not_json", model)), processes=processes_for(model)
    )
    assert outcome.status is OutcomeStatus.FAILED
    assert not outcome.retryable
    assert outcome.error is not None and "cannot be stored as JSON" in outcome.error


@pytest.mark.parametrize("model", MODELS)
def test_timeout_stops_the_job(model: str) -> None:
    async def scenario(ex: Executors) -> tuple[Outcome, float]:
        started = time.monotonic()
        outcome = await ex.run(job("sleep", model, timeout=0.3, seconds=60))
        return outcome, time.monotonic() - started

    outcome, elapsed = with_executors(scenario, processes=processes_for(model))
    assert outcome.status is OutcomeStatus.TIMED_OUT
    assert outcome.error == "the job ran longer than its timeout of 0.3s"
    assert 0.3 <= elapsed < 60  # not before its timeout; stopped long before its end


@pytest.mark.parametrize("model", MODELS)
def test_cancel_while_running_stops_the_job(model: str) -> None:
    async def scenario(ex: Executors) -> tuple[Outcome, float]:
        started = time.monotonic()
        outcome = await cancel_once_started(ex, job("sleep", model, seconds=60))
        return outcome, time.monotonic() - started

    outcome, elapsed = with_executors(scenario, processes=processes_for(model))
    assert outcome.status is OutcomeStatus.CANCELLED
    assert elapsed < 60  # stopped long before its end


@pytest.mark.parametrize("model", MODELS)
def test_an_asyncio_event_can_cancel_too(model: str) -> None:
    async def scenario(ex: Executors) -> Outcome:
        cancel = asyncio.Event()
        task = asyncio.create_task(ex.run(job("sleep", model, seconds=60), cancel))
        await wait_started(ex, model)
        cancel.set()
        return await task

    outcome = with_executors(scenario, processes=processes_for(model))
    assert outcome.status is OutcomeStatus.CANCELLED


def test_cancel_of_an_attempt_that_is_not_running_is_a_no_op() -> None:
    async def scenario(ex: Executors) -> bool:
        return ex.cancel(12345, 1)

    assert with_executors(scenario, processes=0) is False


# ---- async ------------------------------------------------------------------------------


def test_async_handler_runs_on_the_loop_and_a_plain_function_on_a_thread() -> None:
    async def scenario(ex: Executors) -> tuple[Outcome, Outcome]:
        return await ex.run(job("fixture_echo", "async")), await ex.run(
            job("fixture_sync_echo", "async")
        )

    on_loop, on_thread = with_executors(scenario, processes=0)
    assert isinstance(on_loop.result, dict) and isinstance(on_thread.result, dict)
    assert on_loop.result["thread"] == "MainThread"
    assert on_thread.result["thread"].startswith("sundial-job")


def test_async_handler_that_swallows_the_cancellation_still_times_out() -> None:
    async def scenario(ex: Executors) -> tuple[Outcome, int]:
        outcome = await ex.run(job("fixture_swallow_cancel", "async", timeout=0.2))
        task = asyncio.current_task()
        assert task is not None
        return outcome, task.cancelling()

    outcome, cancelling = with_executors(scenario, processes=0)
    assert outcome.status is OutcomeStatus.TIMED_OUT
    assert cancelling == 0  # the executor's own cancel request was withdrawn


def test_cancelling_the_callers_task_still_cancels_it() -> None:
    async def scenario(ex: Executors) -> bool:
        task = asyncio.create_task(ex.run(job("sleep", "async", seconds=60)))
        await wait_started(ex, "async")
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            return ex.stats()["running"] == 0
        return False

    assert with_executors(scenario, processes=0)


def test_wrong_arguments_fail_without_retries() -> None:
    outcome = with_executors(lambda ex: ex.run(job("noop", "thread", unexpected=1)), processes=0)
    assert outcome.status is OutcomeStatus.COMPLETED  # noop accepts anything
    outcome = with_executors(lambda ex: ex.run(job("fixture_fail", "async", colour=1)), processes=0)
    assert outcome.status is OutcomeStatus.FAILED
    assert not outcome.retryable
    assert outcome.error is not None and "does not accept arguments ['colour']" in outcome.error


def test_unknown_execution_model_fails_without_retries() -> None:
    outcome = with_executors(lambda ex: ex.run(job("noop", "quantum")), processes=0)
    assert outcome.status is OutcomeStatus.FAILED
    assert not outcome.retryable
    assert outcome.error is not None and "unknown execution model 'quantum'" in outcome.error


def test_many_async_noops_run_concurrently_and_leave_nothing_behind() -> None:
    async def scenario(ex: Executors) -> tuple[list[Outcome], dict[str, Any]]:
        outcomes = await asyncio.gather(*(ex.run(job("noop", "async")) for _ in range(2000)))
        return outcomes, ex.stats()

    outcomes, stats = with_executors(scenario, processes=0)
    assert {o.status for o in outcomes} == {OutcomeStatus.COMPLETED}
    assert stats["running"] == 0


# ---- thread -----------------------------------------------------------------------------


def test_thread_job_that_ignores_cancellation_leaks_its_slot_until_it_returns() -> None:
    async def scenario(ex: Executors) -> tuple[Outcome, dict[str, Any], dict[str, Any]]:
        outcome = await ex.run(job("fixture_ignore_cancel", "thread", timeout=0.1, seconds=2))
        during = ex.stats()
        await wait_until_async(lambda: ex.stats()["threads_busy"] == 0, "the job to return")
        return outcome, during, ex.stats()

    outcome, during, after = with_executors(scenario, processes=0)
    assert outcome.status is OutcomeStatus.TIMED_OUT
    assert during["leaked_thread_slots"] == 1 and during["threads_busy"] == 1
    assert after["leaked_thread_slots"] == 0 and after["threads_busy"] == 0


def test_a_leaked_thread_is_replaced_so_the_next_job_does_not_wait_behind_it() -> None:
    async def scenario(ex: Executors) -> tuple[Outcome, Outcome, dict[str, Any], dict[str, Any]]:
        leaked = await ex.run(job("fixture_ignore_cancel", "thread", timeout=0.1, seconds=3))
        # One pool thread, still held by the leaked job for seconds: without a
        # replacement this job would wait behind it and time out without having run.
        after_leak = await ex.run(job("noop", "thread", timeout=1))
        during = ex.stats()
        await wait_until_async(lambda: ex.stats()["threads_alive"] == 1, "the leaked thread gone")
        return leaked, after_leak, during, ex.stats()

    leaked, after_leak, during, after = with_executors(scenario, processes=0, threads=1)
    assert leaked.status is OutcomeStatus.TIMED_OUT
    assert after_leak.status is OutcomeStatus.COMPLETED
    assert (during["threads_alive"], during["leaked_thread_slots"]) == (2, 1)
    assert (after["threads_alive"], after["leaked_thread_slots"]) == (1, 0)  # it exited


def test_leaked_threads_are_replaced_at_most_pool_size_at_a_time() -> None:
    async def scenario(ex: Executors) -> dict[str, Any]:
        for _ in range(2):  # the second leaks the replacement thread of the first
            await ex.run(job("fixture_ignore_cancel", "thread", timeout=0.1, seconds=1.0))
        return ex.stats()

    stats = with_executors(scenario, processes=0, threads=1)
    assert (stats["threads_alive"], stats["leaked_thread_slots"]) == (2, 2)


def test_thread_job_sees_the_cancel_flag() -> None:
    async def scenario(ex: Executors) -> tuple[Outcome, dict[str, Any], float]:
        # `sleep` waits on the cancel flag itself, so its thread frees up at once
        outcome = await cancel_once_started(ex, job("sleep", "thread", seconds=60))
        cancelled = time.monotonic()
        await wait_until_async(lambda: ex.stats()["threads_busy"] == 0, "the thread to free up")
        return outcome, ex.stats(), time.monotonic() - cancelled

    outcome, stats, freed_after = with_executors(scenario, processes=0)
    assert outcome.status is OutcomeStatus.CANCELLED
    assert stats["leaked_thread_slots"] == 0 and stats["threads_busy"] == 0
    assert freed_after < 30  # by the flag, not after the sleep's 60 s (wide: shared machines)


@pytest.mark.parametrize("model", ["async", "thread"])
def test_a_long_sleep_times_out_promptly(model: str) -> None:
    async def scenario(ex: Executors) -> tuple[Outcome, float]:
        started = time.monotonic()
        outcome = await ex.run(job("sleep", model, timeout=0.2, seconds=600))
        await wait_until_async(lambda: ex.stats()["threads_busy"] == 0, "the thread to free up")
        return outcome, time.monotonic() - started

    outcome, took = with_executors(scenario, processes=0)
    assert outcome.status is OutcomeStatus.TIMED_OUT
    assert took < 60  # at its timeout, not after its 600 s (a wide bound: shared machines)


# ---- process ----------------------------------------------------------------------------


def test_process_jobs_run_in_long_lived_children_with_user_handler_modules() -> None:
    async def scenario(ex: Executors) -> list[Outcome]:
        return [await ex.run(job("fixture_sync_echo", "process")) for _ in range(3)]

    outcomes = with_executors(scenario, processes=1)
    pids = {o.result["pid"] for o in outcomes if isinstance(o.result, dict)}
    assert len(pids) == 1 and psutil.Process().pid not in pids


def test_segfault_fails_that_attempt_and_the_pool_keeps_serving() -> None:
    async def scenario(ex: Executors) -> tuple[Outcome, Outcome, dict[str, Any]]:
        crashed = await ex.run(job("crash", "process", signal="SEGV"))
        after = await ex.run(job("fixture_echo", "process"))
        return crashed, after, ex.stats()

    crashed, after, stats = with_executors(scenario, processes=1)
    assert crashed.status is OutcomeStatus.FAILED and crashed.retryable
    assert crashed.error == "worker process died (signal SIGSEGV) while running the job"
    assert after.status is OutcomeStatus.COMPLETED
    assert stats["process_restarts"] == 1 and stats["processes_alive"] == 1


def test_a_child_that_exits_by_itself_fails_the_attempt() -> None:
    outcome = with_executors(lambda ex: ex.run(job("fixture_exit", "process", code=7)), processes=1)
    assert outcome.status is OutcomeStatus.FAILED and outcome.retryable
    assert outcome.error == "worker process died (exit code 7) while running the job"


def test_timeout_kills_only_that_child_and_the_other_job_completes(tmp_path: Path) -> None:
    pids_file = tmp_path / "pids"

    async def scenario(ex: Executors) -> tuple[Outcome, Outcome, dict[str, Any]]:
        stuck = ex.run(job("fixture_write_pids", "process", timeout=0.5, path=str(pids_file)))
        steady = ex.run(job("sleep", "process", timeout=5, seconds=0.8))
        first, second = await asyncio.gather(stuck, steady)
        return first, second, ex.stats()

    stuck, steady, stats = with_executors(scenario, processes=2)
    assert stuck.status is OutcomeStatus.TIMED_OUT
    assert steady.status is OutcomeStatus.COMPLETED
    child, grandchild = map(int, pids_file.read_text().split())
    wait_until(lambda: gone(child) and gone(grandchild), "the job's processes gone")
    assert stats["process_restarts"] == 1


def test_jobs_wait_for_a_free_child_and_a_cancel_while_waiting_is_prompt() -> None:
    async def scenario(ex: Executors) -> tuple[Outcome, Outcome]:
        busy = asyncio.create_task(ex.run(job("sleep", "process", seconds=3)))
        await wait_started(ex, "process")
        waiting = job("fixture_echo", "process")
        task = asyncio.create_task(ex.run(waiting))
        await wait_until_async(lambda: ex.stats()["running"] == 2, "the job held, waiting")
        assert ex.cancel(waiting.run_id, waiting.attempt)
        cancelled = await task
        assert not busy.done()  # cancelled while still waiting behind the busy child
        return await busy, cancelled

    busy, cancelled = with_executors(scenario, processes=1)
    assert busy.status is OutcomeStatus.COMPLETED
    assert cancelled.status is OutcomeStatus.CANCELLED


def test_process_children_print_without_corrupting_replies_and_return_big_results() -> None:
    async def scenario(ex: Executors) -> tuple[Outcome, Outcome]:
        return await ex.run(job("fixture_print", "process")), await ex.run(
            job("fixture_big", "process", size=3_000_000)
        )

    printed, big = with_executors(scenario, processes=1)
    assert printed.result == "printed"
    assert isinstance(big.result, str) and len(big.result) == 3_000_000


@pytest.mark.parametrize("model", ["process", "subprocess"])
def test_a_child_sends_its_lines_while_it_runs_so_a_killed_one_keeps_them(model: str) -> None:
    async def scenario(ex: Executors) -> tuple[list[Any], Outcome, Outcome]:
        live: list[Any] = []
        ex.on_child_lines = lambda key, lines: live.extend(lines)
        running = job("fixture_say_then_sleep", model, text="before the cancel", seconds=60)
        task = asyncio.create_task(ex.run(running))
        await wait_until_async(lambda: live, "the line to arrive while the job runs")
        ex.cancel(running.run_id, running.attempt)
        cancelled = await task
        ex.on_child_lines = None  # then the lines sent early lead the reply's own
        both = await ex.run(
            job("fixture_say_then_sleep", model, text="sent early", seconds=1, then="replied")
        )
        return live, cancelled, both

    live, cancelled, both = with_executors(scenario, processes=processes_for(model))
    assert [(stream, line) for _, stream, line in live] == [("stdout", "before the cancel")]
    assert cancelled.status is OutcomeStatus.CANCELLED and cancelled.logs == ()
    assert both.result == "slept"
    assert [line for _, _, line in both.logs] == ["sent early", "replied"]


def test_a_handler_reading_stdin_cannot_swallow_the_next_request() -> None:
    async def scenario(ex: Executors) -> tuple[Outcome, Outcome]:
        return await ex.run(job("fixture_read_stdin", "process")), await ex.run(
            job("fixture_echo", "process")
        )

    read, after = with_executors(scenario, processes=1)
    assert read.result == ""
    assert after.status is OutcomeStatus.COMPLETED


def test_a_handler_module_that_fails_to_import_stops_the_pool_from_starting() -> None:
    async def scenario() -> None:
        ex = Executors(
            default_registry,
            thread_workers=1,
            process_workers=1,
            handler_modules=("tests.no_such_handlers",),
        )
        await ex.start()

    with pytest.raises(ChildStartError, match=re.escape("'tests.no_such_handlers'")):
        asyncio.run(scenario())


def test_close_waits_for_running_jobs_then_refuses_new_ones() -> None:
    async def scenario(ex: Executors) -> tuple[Outcome, Outcome]:
        gentle = asyncio.create_task(ex.run(job("sleep", "process", seconds=0.3)))
        await wait_started(ex, "process")
        await ex.close()
        late = await ex.run(job("noop", "async"))
        return await gentle, late

    gentle, late = with_executors(scenario, processes=1)
    assert gentle.status is OutcomeStatus.COMPLETED
    assert late.status is OutcomeStatus.FAILED and late.retryable


def test_pool_close_kills_a_child_still_busy_after_the_close_wait(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(process_pool, "CLOSE_WAIT_SECONDS", 0.3)

    async def scenario() -> tuple[Outcome, float]:
        pool = process_pool.ProcessPool(1)
        await pool.start()
        spec = job("sleep", "process", seconds=60)
        running = asyncio.create_task(pool.run(Attempt(spec), encode_request(spec)))
        await wait_until_async(lambda: pool.stats()["processes_busy"] == 1, "the job to start")
        started = time.monotonic()
        await pool.close()
        return await running, time.monotonic() - started

    outcome, elapsed = asyncio.run(scenario())
    assert outcome.status is OutcomeStatus.FAILED
    assert outcome.error == "worker process died (signal SIGKILL) while running the job"
    assert elapsed < 60  # killed, not waited out


def test_close_with_kill_stops_every_model_promptly() -> None:
    async def scenario(ex: Executors) -> tuple[list[Outcome], float]:
        tasks = [asyncio.create_task(ex.run(job("sleep", model, seconds=60))) for model in MODELS]
        for model in MODELS:
            await wait_started(ex, model)
        started = time.monotonic()
        await ex.close(kill=True)
        outcomes = await asyncio.gather(*tasks)
        return outcomes, time.monotonic() - started

    outcomes, elapsed = with_executors(scenario, processes=1)
    assert {o.status for o in outcomes} == {OutcomeStatus.CANCELLED}
    assert elapsed < 60  # none ran to its end


@pytest.mark.parametrize("model", ["process", "subprocess"])
def test_job_children_ignore_sigterm_so_a_graceful_shutdown_lets_jobs_finish(
    tmp_path: Path, model: str
) -> None:
    pid_file = tmp_path / "pid"

    async def scenario(ex: Executors) -> Outcome:
        task = asyncio.create_task(
            ex.run(job("fixture_pid_then_sleep", model, path=str(pid_file), seconds=0.5))
        )
        await asyncio.to_thread(wait_until, pid_file.exists, "the job's pid file")
        os.kill(int(pid_file.read_text()), signal.SIGTERM)  # as Heroku does to every process
        return await task

    outcome = with_executors(scenario, processes=processes_for(model))
    assert outcome.status is OutcomeStatus.COMPLETED and outcome.result == "survived"


# ---- subprocess -------------------------------------------------------------------------


def test_subprocess_runs_each_attempt_in_a_fresh_process() -> None:
    async def scenario(ex: Executors) -> list[Outcome]:
        specs = [job("fixture_sync_echo", "subprocess") for _ in range(2)]
        return list(await asyncio.gather(*(ex.run(spec) for spec in specs)))

    outcomes = with_executors(scenario, processes=0)
    pids = {o.result["pid"] for o in outcomes if isinstance(o.result, dict)}
    assert len(pids) == 2


def test_killed_subprocess_leaves_no_process_behind(tmp_path: Path) -> None:
    pids_file = tmp_path / "pids"

    async def scenario(ex: Executors) -> tuple[Outcome, dict[str, Any]]:
        spec = job("fixture_write_pids", "subprocess", path=str(pids_file))
        task = asyncio.create_task(ex.run(spec))
        await asyncio.to_thread(wait_until, pids_file.exists, "the job's pids file")
        ex.cancel(spec.run_id, spec.attempt)
        return await task, ex.stats()

    outcome, stats = with_executors(scenario, processes=0)
    assert outcome.status is OutcomeStatus.CANCELLED
    assert stats["subprocesses_running"] == 0
    child, grandchild = map(int, pids_file.read_text().split())
    wait_until(lambda: gone(child) and gone(grandchild), "the job's processes gone")


def test_subprocess_that_dies_by_a_signal_names_it() -> None:
    outcome = with_executors(
        lambda ex: ex.run(job("crash", "subprocess", signal="KILL")), processes=0
    )
    assert outcome.status is OutcomeStatus.FAILED and outcome.retryable
    assert outcome.error == "worker process died (signal SIGKILL) while running the job"


def test_subprocess_output_does_not_corrupt_the_reply() -> None:
    outcome = with_executors(lambda ex: ex.run(job("fixture_print", "subprocess")), processes=0)
    assert outcome.result == "printed"


# ---- badly behaved handlers: every model answers the same -------------------------------------

HOSTILE_CASES = [
    ("async", "fixture_hostile"),  # awaited on the worker's own loop
    ("async", "fixture_sync_hostile"),  # a plain function under async: a pool thread
    ("thread", "fixture_sync_hostile"),
    ("thread", "fixture_hostile"),  # an event loop of its own in a pool thread
    ("process", "fixture_sync_hostile"),
    ("subprocess", "fixture_hostile"),
]


# Only a bound on a hang: a dozen subprocesses starting at once on a busy machine (a parallel
# test run) can take longer than the usual 10 s, and no hostile kind is meant to time out.
HOSTILE_TIMEOUT_SECONDS = 120.0


def run_every_hostile_kind(model: str, handler: str) -> dict[str, Outcome]:
    """Each kind of misbehaviour as its own job, all at once, then a well-behaved job
    (which proves the executors and their children still serve)."""

    async def scenario(ex: Executors) -> dict[str, Outcome]:
        kinds = list(fixtures_handlers.HOSTILE)
        timeout = HOSTILE_TIMEOUT_SECONDS
        outcomes = await asyncio.gather(
            *(ex.run(job(handler, model, timeout, kind=k)) for k in kinds)
        )
        after = await ex.run(job("fixture_sync_echo", model, after="hostile"))
        return {**dict(zip(kinds, outcomes, strict=True)), "after": after}

    return with_executors(scenario, processes=processes_for(model))


@pytest.mark.parametrize(("model", "handler"), HOSTILE_CASES)
def test_any_exception_a_handler_raises_fails_only_its_attempt(model: str, handler: str) -> None:
    outcomes = run_every_hostile_kind(model, handler)
    expected_errors = {
        "system_exit": "SystemExit: 3",
        "keyboard_interrupt": "KeyboardInterrupt: ",
        "generator_exit": "GeneratorExit: ",
        "base_exception": "NotAnException: custom",
        "cancelled_by_itself": "CancelledError: ",
        "unprintable_error": "Unprintable: <the exception's message could not be read: ",
        "message_that_exits": "ExitingMessage: <the exception's message could not be read: ",
        "nul_error": "RuntimeError: x\x00y",
        "surrogate_error": "RuntimeError: x\ud800y",
    }
    assert set(expected_errors) == set(fixtures_handlers.HOSTILE_RAISES)
    for kind, error in expected_errors.items():
        outcome = outcomes[kind]
        assert outcome.status is OutcomeStatus.FAILED, (kind, outcome)
        assert outcome.retryable, kind  # an error of that attempt, like any other
        assert outcome.error is not None and outcome.error.startswith(error), (kind, outcome)
        assert outcome.traceback is not None, kind
    assert outcomes["after"].status is OutcomeStatus.COMPLETED


@pytest.mark.parametrize(("model", "handler"), HOSTILE_CASES)
def test_a_result_json_cannot_hold_fails_without_retries(model: str, handler: str) -> None:
    outcomes = run_every_hostile_kind(model, handler)
    for kind in fixtures_handlers.HOSTILE_NOT_JSON:
        outcome = outcomes[kind]
        assert outcome.status is OutcomeStatus.FAILED, (kind, outcome)
        assert not outcome.retryable, kind
        assert outcome.error is not None and "cannot be stored as JSON" in outcome.error, kind
    # Text PostgreSQL cannot hold is JSON all the same: the worker makes it storable.
    assert outcomes["nul_result"].result == "a\x00b"
    assert outcomes["surrogate_result"].result == fixtures_handlers.HOSTILE["surrogate_result"]()
    assert outcomes["after"].status is OutcomeStatus.COMPLETED
