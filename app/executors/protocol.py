"""What crosses between the worker and a job child: JSON requests and JSON replies.

A request names the handler and carries its arguments and the context fields; a reply is
an `Outcome` as JSON (a snooze with its `snooze_seconds` and `snooze_reason`). Before its
reply, a child may send any number of log messages, `{"log": [[unix time, stream, line],
...]}`: the lines its handler wrote so far (see `app.runs.run_logs.capture_in_child`), and
progress messages, `{"progress": [value, message]}`: the latest `ctx.progress` report (see
`app.executors.progress_relay`). Each message is one frame (`app.executors.framing`).
Only JSON-able data crosses, never pickled Python objects.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime
from typing import Any

from app.executors.framing import read_frame
from app.executors.invoke import invoke
from app.executors.outcomes import failed
from app.executors.progress_relay import PROGRESS_KEY, ProgressRelay
from app.handlers.jobs import ClaimedRun, JobContext, Outcome, OutcomeStatus, Snooze
from app.handlers.registry import HandlerRegistry, UnknownHandler
from app.runs.run_logs import ChildLine, capture_in_child

LOG_KEY = "log"

# What the worker does with the log lines a child sends before its reply.
LinesSink = Callable[[list[Any]], object]
# And with its progress reports: (value, message), as the child sent them (unchecked).
ProgressSink = Callable[[Any, Any], object]


class BadRequest(ValueError):
    """A job's arguments cannot be sent to a child as JSON."""


def encode_request(job: ClaimedRun, handler_modules: tuple[str, ...] = ()) -> bytes:
    request = {
        "handler": job.handler,
        "args": job.args,
        "run_id": job.run_id,
        "attempt": job.attempt,
        "idempotency_key": job.idempotency_key,
        "fire_time": job.fire_time.isoformat() if job.fire_time else None,
        "upstream": job.upstream_results or {},
        "handler_modules": list(handler_modules),
    }
    try:
        return json.dumps(request, allow_nan=False).encode()
    except (TypeError, ValueError) as exc:
        raise BadRequest(f"the job's arguments cannot be sent as JSON: {exc}") from exc


def serve_request(
    request: dict[str, Any],
    registry: HandlerRegistry,
    send: Callable[[bytes], object] | None = None,
) -> Outcome:
    """Run the requested handler in this process (a child) and say how it ended; with
    `send`, its log lines and progress reports go out as messages while it runs."""
    fire_time = request.get("fire_time")
    ctx = JobContext(
        run_id=request["run_id"],
        attempt=request["attempt"],
        idempotency_key=request.get("idempotency_key"),
        fire_time=datetime.fromisoformat(fire_time) if fire_time else None,
        upstream=request.get("upstream") or {},
    )
    try:
        entry = registry.get(request["handler"])
    except UnknownHandler as exc:
        return failed(str(exc), retryable=False)
    if send is None:
        with capture_in_child(ctx.run_id, ctx.attempt) as lines:
            outcome = invoke(entry, ctx, request.get("args") or {})
        return replace(outcome, logs=tuple(lines))
    lock = threading.Lock()  # log lines and progress come from threads of their own

    def send_whole(message: bytes) -> None:
        with lock:
            send(message)

    relay = ProgressRelay(send_whole)
    ctx.on_progress = relay.report
    try:
        send_lines = lambda lines: send_whole(encode_log_message(lines))  # noqa: E731
        with capture_in_child(ctx.run_id, ctx.attempt, send_lines) as lines:
            outcome = invoke(entry, ctx, request.get("args") or {})
    finally:
        relay.stop()  # the last report goes before the reply
    return replace(outcome, logs=tuple(lines))


def encode_log_message(lines: list[ChildLine]) -> bytes:
    return json.dumps({LOG_KEY: lines}).encode()


_LOG_MESSAGE = b'{"' + LOG_KEY.encode() + b'"'
_PROGRESS_MESSAGE = b'{"' + PROGRESS_KEY.encode() + b'"'


async def read_reply(
    reader: asyncio.StreamReader, on_lines: LinesSink, on_progress: ProgressSink | None = None
) -> bytes | None:
    """The child's reply frame, after handing the lines of each log message before it to
    `on_lines` and each progress report to `on_progress`; None once the child has gone
    without a reply."""
    while (data := await read_frame(reader)) is not None:
        if data.startswith(_PROGRESS_MESSAGE):
            try:
                value, message = json.loads(data)[PROGRESS_KEY]
            except (ValueError, KeyError, TypeError):
                continue  # an unreadable report costs that report, not the attempt
            if on_progress is not None:
                on_progress(value, message)
            continue
        if not data.startswith(_LOG_MESSAGE):  # a reply: status first
            return data
        try:
            lines = json.loads(data)[LOG_KEY]
        except (ValueError, KeyError, TypeError):
            continue  # an unreadable message costs its lines, not the attempt
        if isinstance(lines, list):
            on_lines(lines)
    return None


def encode_reply(outcome: Outcome) -> bytes:
    reply = {
        "status": str(outcome.status),
        "result": outcome.result,
        "error": outcome.error,
        "traceback": outcome.traceback,
        "retryable": outcome.retryable,
        "logs": outcome.logs,
    }
    if outcome.status is OutcomeStatus.SNOOZED:
        reply["snooze_seconds"] = outcome.snooze_seconds
        reply["snooze_reason"] = outcome.snooze_reason
    return json.dumps(reply, allow_nan=False).encode()


def decode_reply(data: bytes) -> Outcome:
    """The child's `Outcome`; a reply that does not parse becomes a retryable failure. A
    result nested deeper than the worker's stack can read (the child's stack is shallower)
    fails the attempt for good, as `storable` fails one returned in the worker."""
    try:
        reply = json.loads(data)
        if reply["status"] == OutcomeStatus.SNOOZED:  # checked again: the child is not trusted
            snooze = Snooze(reply["snooze_seconds"], reply["snooze_reason"])
            return replace(Outcome.snoozed(snooze), logs=tuple(reply.get("logs") or ()))
        return Outcome(
            OutcomeStatus(reply["status"]),
            result=reply.get("result"),
            error=reply.get("error"),
            traceback=reply.get("traceback"),
            retryable=bool(reply.get("retryable", True)),
            logs=tuple(reply.get("logs") or ()),
        )
    except RecursionError as exc:
        return failed(
            f"the result cannot be stored as JSON: RecursionError: {exc}", retryable=False
        )
    except (ValueError, KeyError, TypeError) as exc:
        return failed(f"the job process sent an unreadable reply: {exc}")
