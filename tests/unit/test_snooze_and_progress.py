"""From inside a job: `ctx.snooze` and `ctx.progress` refuse what they cannot store with a
clear sentence, and both reach the worker from every execution model (threads, the loop,
process-pool children, subprocesses), a child's word checked again."""

from __future__ import annotations

import asyncio
import json
import math
from typing import Any

import pytest

import sundial
from app.core import limits
from app.core.limits import LimitError
from app.executors.framing import encode_frame
from app.executors.progress_relay import ProgressRelay, encode_progress_message
from app.executors.protocol import decode_reply, encode_reply, read_reply
from app.handlers.jobs import JobContext, Outcome, OutcomeStatus, Snooze, check_progress
from app.runs.run_progress import ProgressBoard
from tests.helpers.executors import job, with_executors

MODELS = ["async", "thread", "process", "subprocess"]
REFUSED_SNOOZES: list[tuple[Any, Any, str]] = [
    (0, "why", "snooze seconds must be between 0.001 and 2,592,000 seconds, got 0"),
    (-5, "why", "snooze seconds must be between"),
    (limits.MAX_SNOOZE_SECONDS + 1, "why", "2,592,000 seconds"),
    (math.nan, "why", "got nan"),
    (math.inf, "why", "got inf"),
    (True, "why", "snooze seconds must be a number of seconds, got True"),
    ("60", "why", "snooze seconds must be a number of seconds, got '60'"),
    (60, "", "snooze reason must say why"),
    (60, "   ", "snooze reason must say why"),
    (60, None, "snooze reason must be text, got None"),
    (60, "x" * 501, "snooze reason may have at most 500 characters"),
    (60, "a\x00b", "snooze reason cannot contain a NUL character"),
]


@pytest.mark.parametrize(("seconds", "reason", "message"), REFUSED_SNOOZES)
def test_a_snooze_that_cannot_be_kept_is_refused_in_words(
    seconds: Any, reason: Any, message: str
) -> None:
    ctx = JobContext(1, 1, None, None)
    with pytest.raises(LimitError) as refused:
        ctx.snooze(seconds, reason)
    assert message in str(refused.value)


def test_a_snooze_raises_snooze_with_its_delay_and_reason() -> None:
    with pytest.raises(sundial.Snooze) as asked:
        JobContext(1, 1, None, None).snooze(90, "waiting for the bank")
    assert (asked.value.seconds, asked.value.reason) == (90.0, "waiting for the bank")
    outcome = Outcome.snoozed(asked.value)
    assert (outcome.status, outcome.snooze_seconds, outcome.snooze_reason) == (
        OutcomeStatus.SNOOZED, 90.0, "waiting for the bank"
    )  # fmt: skip


@pytest.mark.parametrize(
    ("value", "message", "refusal"),
    [
        (math.nan, None, "progress must be a finite number"),
        (math.inf, None, "progress must be a finite number"),
        (2.0**60, None, "within ±2^53"),
        (True, None, "progress must be a number, got bool"),
        ("50", None, "progress must be a number, got str"),
        (None, None, "progress must be a number, got NoneType"),
        (5, "x" * 201, "progress message may have at most 200 characters"),
        (5, 42, "progress message must be text"),
    ],
)
def test_progress_that_cannot_be_stored_is_refused_in_words(
    value: Any, message: Any, refusal: str
) -> None:
    with pytest.raises(LimitError) as refused:
        JobContext(1, 1, None, None).progress(value, message)
    assert refusal in str(refused.value)


def test_progress_goes_to_the_context_sink_as_a_float() -> None:
    seen: list[tuple[float, str | None]] = []
    ctx = JobContext(1, 1, None, None, on_progress=lambda v, m: seen.append((v, m)))
    ctx.progress(3, "three")
    ctx.progress(12.5)
    assert seen == [(3.0, "three"), (12.5, None)]
    JobContext(1, 1, None, None).progress(1)  # no sink (called directly): nothing happens


def test_the_board_keeps_the_latest_valid_report_per_attempt() -> None:
    board = ProgressBoard()
    board.report((1, 1), 10, "a")
    board.report((1, 1), 20, "b")
    board.report((1, 1), "not a number", None)  # a child's bad message: dropped
    board.report((2, 3), 5.5)
    assert board.drain() == {(1, 1): (20.0, "b"), (2, 3): (5.5, None)}
    assert not board.pending() and board.drain() == {}


def test_check_progress_gives_what_is_stored() -> None:
    assert check_progress(7) == (7.0, None)


# ---- across every execution model ----------------------------------------------------------


@pytest.mark.parametrize("model", MODELS)
def test_a_snooze_comes_back_from_every_model(model: str) -> None:
    spec = job("fixture_snooze", model, seconds=120, reason="rate limited until noon")
    outcome = with_executors(lambda ex: ex.run(spec), processes=1 if model == "process" else 0)
    assert outcome.status is OutcomeStatus.SNOOZED, outcome
    assert (outcome.snooze_seconds, outcome.snooze_reason) == (120, "rate limited until noon")
    assert outcome.error is None


@pytest.mark.parametrize("model", MODELS)
def test_a_refused_snooze_fails_the_attempt_in_every_model(model: str) -> None:
    spec = job("fixture_snooze", model, seconds=-1, reason="never")
    outcome = with_executors(lambda ex: ex.run(spec), processes=1 if model == "process" else 0)
    assert outcome.status is OutcomeStatus.FAILED
    assert outcome.error is not None and "snooze seconds must be between" in outcome.error


@pytest.mark.parametrize("model", MODELS)
def test_progress_reaches_the_worker_from_every_model_latest_last(model: str) -> None:
    spec = job("fixture_progress", model, reports=500)
    seen: list[tuple[tuple[int, int], Any, Any]] = []

    async def run(executors: Any) -> Outcome:
        executors.on_progress = lambda key, value, message: seen.append((key, value, message))
        return await executors.run(spec)

    outcome = with_executors(run, processes=1 if model == "process" else 0)
    assert outcome.status is OutcomeStatus.COMPLETED, outcome
    assert seen[-1] == ((spec.run_id, 1), 100.0, "done")
    if model in ("process", "subprocess"):  # a child sends the latest, throttled
        assert len(seen) < 50, len(seen)


def test_a_child_snooze_is_checked_again_by_the_worker() -> None:
    reply = json.loads(encode_reply(Outcome.snoozed(Snooze(60, "ok"))))
    assert decode_reply(json.dumps(reply).encode()).snooze_reason == "ok"
    reply["snooze_seconds"] = 10**9
    refused = decode_reply(json.dumps(reply).encode())
    assert refused.status is OutcomeStatus.FAILED
    assert refused.error is not None and "unreadable reply" in refused.error


def test_progress_messages_before_the_reply_go_to_their_sink() -> None:
    async def read() -> tuple[bytes | None, list[Any]]:
        reader = asyncio.StreamReader()
        messages = [encode_progress_message(5, "five"), b'{"progress": "broken"}',
                    b'{"log": [[1.0, "stdout", "hi"]]}', b'{"status": "completed"}']  # fmt: skip
        for message in messages:
            reader.feed_data(encode_frame(message))
        reader.feed_eof()
        progress: list[Any] = []
        reply = await read_reply(reader, lambda lines: None, lambda *r: progress.append(r))
        return reply, progress

    reply, progress = asyncio.run(read())
    assert reply == b'{"status": "completed"}'
    assert progress == [(5, "five")]


def test_the_relay_sends_the_last_report_when_stopped() -> None:
    sent: list[bytes] = []
    relay = ProgressRelay(sent.append)
    relay.stop()
    assert sent == []  # nothing reported: no thread, nothing sent
    relay = ProgressRelay(sent.append)
    for i in range(1000):
        relay.report(i, None)
    relay.stop()
    assert json.loads(sent[-1]) == {"progress": [999, None]}
    assert len(sent) <= 3
