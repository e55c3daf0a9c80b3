"""The executors' small parts: the lazy cancel flag, frames, deadlines and the child
protocol."""

from __future__ import annotations

import asyncio
import json
import os
import threading
from datetime import UTC, datetime

import pytest

from app.executors.attempt import Attempt
from app.executors.deadlines import Deadlines
from app.executors.framing import encode_frame, read_frame, read_frame_blocking, write_frame
from app.executors.outcomes import MAX_ERROR_CHARS, describe_exit, storable
from app.executors.protocol import (
    BadRequest,
    decode_reply,
    encode_log_message,
    encode_reply,
    encode_request,
    read_reply,
    serve_request,
)
from app.handlers import default_registry, load_modules
from app.handlers.cancel_flag import CancelFlag
from app.handlers.jobs import ClaimedRun, Outcome, OutcomeStatus
from tests.helpers.waits import wait_until_async


def spec(timeout: float = 10.0, **args: object) -> ClaimedRun:
    return ClaimedRun(7, 2, "fixture_echo", dict(args), "process", timeout, "idem", None)


def test_cancel_flag_behaves_like_a_threading_event_across_threads() -> None:
    flag = CancelFlag()
    assert isinstance(flag, threading.Event) and not flag.is_set()
    assert flag.wait(0.01) is False
    seen: list[bool] = []
    waiter = threading.Thread(target=lambda: seen.append(flag.wait(5)))
    waiter.start()
    flag.set()
    waiter.join(5)
    assert seen == [True] and flag.is_set()
    flag.clear()
    assert not flag.is_set()


def test_cancel_flag_calls_its_wakers_once_set_and_not_after_removal() -> None:
    flag = CancelFlag()
    woken: list[str] = []
    kept, removed = (lambda: woken.append("kept")), (lambda: woken.append("removed"))
    flag.add_waker(kept)
    flag.add_waker(removed)
    flag.remove_waker(removed)
    flag.remove_waker(removed)  # twice: harmless
    setter = threading.Thread(target=flag.set)
    setter.start()
    setter.join(5)
    assert woken == ["kept"] and flag.is_set()


def test_frames_survive_arriving_in_pieces() -> None:
    async def read_two(chunks: list[bytes]) -> list[bytes | None]:
        reader = asyncio.StreamReader()
        for chunk in chunks:
            reader.feed_data(chunk)
        reader.feed_eof()
        return [await read_frame(reader), await read_frame(reader), await read_frame(reader)]

    data = encode_frame(b"first") + encode_frame(b"x" * 100_000)
    chunks = [data[i : i + 7] for i in range(0, len(data), 7)]
    assert asyncio.run(read_two(chunks)) == [b"first", b"x" * 100_000, None]


def test_blocking_frames_through_a_pipe() -> None:
    read_end, write_end = os.pipe()
    write_frame(write_end, b"hello")
    os.close(write_end)
    with os.fdopen(read_end, "rb") as stream:
        assert read_frame_blocking(stream) == b"hello"
        assert read_frame_blocking(stream) is None


def test_deadlines_stop_only_attempts_past_their_timeout_with_one_timer() -> None:
    async def scenario() -> tuple[list[OutcomeStatus | None], int]:
        active: dict[int, Attempt] = {}
        deadlines = Deadlines(active)
        for i, timeout in enumerate([0.05, 0.1, 5.0, 0.0]):
            active[i] = attempt = Attempt(spec(timeout))
            deadlines.arm(attempt, timeout)
        await wait_until_async(
            lambda: active[0].stop_status and active[1].stop_status, "the two short deadlines"
        )
        timers = len(asyncio.get_running_loop()._scheduled)  # type: ignore[attr-defined]
        deadlines.close()
        return [a.stop_status for a in active.values()], timers

    statuses, timers = asyncio.run(scenario())
    assert statuses == [OutcomeStatus.TIMED_OUT, OutcomeStatus.TIMED_OUT, None, None]
    assert timers == 1  # armed for the 5 s deadline only


def test_a_stopped_attempt_sets_its_cancel_flag_once() -> None:
    calls: list[str] = []
    attempt = Attempt(spec())
    attempt.on_stop = lambda: calls.append("stopped")
    attempt.stop(OutcomeStatus.CANCELLED)
    attempt.stop(OutcomeStatus.TIMED_OUT)
    assert calls == ["stopped"] and attempt.ctx.cancelled
    assert attempt.stopped_outcome().status is OutcomeStatus.CANCELLED


def test_request_carries_the_context_and_a_reply_round_trips() -> None:
    load_modules(["tests.helpers.fixtures_handlers"])
    fire = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
    job = ClaimedRun(7, 2, "fixture_echo", {"a": [1]}, "process", 10.0, "idem", fire)
    request = json.loads(encode_request(job, ("tests.helpers.fixtures_handlers",)))
    assert request["handler_modules"] == ["tests.helpers.fixtures_handlers"]
    outcome = serve_request(request, default_registry)
    assert outcome.status is OutcomeStatus.COMPLETED and isinstance(outcome.result, dict)
    assert outcome.result["fire_time"] == fire.isoformat()
    assert outcome.result["run_id"] == 7 and outcome.result["attempt"] == 2
    assert decode_reply(encode_reply(outcome)) == outcome


def test_arguments_that_are_not_json_cannot_be_sent_to_a_child() -> None:
    with pytest.raises(BadRequest, match="cannot be sent as JSON"):
        encode_request(spec(value={1, 2}))


def test_log_messages_before_a_reply_go_to_their_sink_and_the_reply_is_returned() -> None:
    async def scenario() -> tuple[list[list[object]], bytes | None, bytes | None]:
        reader = asyncio.StreamReader()
        reply = encode_reply(Outcome.completed("done"))
        for message in (
            encode_log_message([(1.0, "stdout", "one")]),
            b'{"log": [unreadable',  # costs its own lines, nothing else
            encode_log_message([(2.0, "log", "two")]),
            reply,
        ):
            reader.feed_data(encode_frame(message))
        reader.feed_data(encode_frame(encode_log_message([(3.0, "stderr", "cut off")]))[:-3])
        reader.feed_eof()
        got: list[list[object]] = []
        return got, await read_reply(reader, got.append), await read_reply(reader, got.append)

    got, reply, after = asyncio.run(scenario())
    assert got == [[[1.0, "stdout", "one"]], [[2.0, "log", "two"]]]
    assert reply is not None and decode_reply(reply).result == "done"
    assert after is None  # the child went without a reply


def test_an_unreadable_reply_is_a_retryable_failure() -> None:
    outcome = decode_reply(b"{not json")
    assert outcome.status is OutcomeStatus.FAILED and outcome.retryable
    assert decode_reply(encode_reply(Outcome.completed([1, "two"]))).result == [1, "two"]


@pytest.mark.parametrize(
    ("returncode", "text"),
    [(-11, "signal SIGSEGV"), (-9, "signal SIGKILL"), (3, "exit code 3"), (None, "unknown")],
)
def test_describe_exit(returncode: int | None, text: str) -> None:
    assert describe_exit(returncode).startswith(text)


# ---- making an outcome storable ----------------------------------------------------------


def test_storable_replaces_nul_and_lone_surrogates_everywhere() -> None:
    outcome = Outcome(
        OutcomeStatus.COMPLETED,
        result={"k\x00": ["a\ud800", {"deep": "\x00"}], "ok": "😀", "n": 1.5},
    )
    assert storable(outcome, 10_000).result == {
        "k\ufffd": ["a\ufffd", {"deep": "\ufffd"}],
        "ok": "😀",  # a real character, not a surrogate: kept
        "n": 1.5,
    }
    failure = Outcome(OutcomeStatus.FAILED, error="x\x00" * MAX_ERROR_CHARS, traceback="\udc80")
    made = storable(failure, 10_000)
    assert made.error == "x\ufffd" * (MAX_ERROR_CHARS // 2)
    assert made.traceback == "\ufffd"
    assert made.retryable


def test_storable_leaves_a_clean_outcome_as_it_is() -> None:
    clean = Outcome.completed({"text": "plain", "n": [1, 2]})
    assert storable(clean, 10_000) is clean
    written_out = Outcome.completed({"text": "a backslash-u0000 \\u0000 is not a NUL"})
    assert storable(written_out, 10_000) == written_out


@pytest.mark.parametrize(
    ("result", "error"),
    [
        (10**5000, "the result cannot be stored as JSON: ValueError: "),
        (float("nan"), "the result cannot be stored as JSON: ValueError: "),
        ("x" * 101, "the handler returned a 103-byte result; results are limited to 100 bytes"),
    ],
    ids=["huge-int", "nan", "too-big"],
)
def test_a_result_that_cannot_be_stored_fails_without_retries(result: object, error: str) -> None:
    made = storable(Outcome.completed(result), 100)  # type: ignore[arg-type]
    assert made.status is OutcomeStatus.FAILED and not made.retryable
    assert made.error is not None and made.error.startswith(error)
