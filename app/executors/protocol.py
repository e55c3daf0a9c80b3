"""What crosses between the worker and a job child: JSON requests and JSON replies.

A request names the handler and carries its arguments and the context fields; a reply is
an `Outcome` as JSON. Before its reply, a child may send any number of log messages,
`{"log": [[unix time, stream, line], ...]}`: the lines its handler wrote so far (see
`app.runs.run_logs.capture_in_child`). Each message is one frame (`app.executors.framing`).
Only JSON-able data crosses, never pickled Python objects.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime
from typing import Any

from app.executors.framing import read_frame
from app.executors.invoke import invoke
from app.executors.outcomes import failed
from app.handlers.jobs import ClaimedRun, JobContext, Outcome, OutcomeStatus
from app.handlers.registry import HandlerRegistry, UnknownHandler
from app.runs.run_logs import ChildLine, capture_in_child

LOG_KEY = "log"

# What the worker does with the log lines a child sends before its reply.
LinesSink = Callable[[list[Any]], object]


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
    `send`, its log lines go out as log messages while it runs."""
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
    send_lines = None if send is None else lambda lines: send(encode_log_message(lines))
    with capture_in_child(ctx.run_id, ctx.attempt, send_lines) as lines:
        outcome = invoke(entry, ctx, request.get("args") or {})
    return replace(outcome, logs=tuple(lines))


def encode_log_message(lines: list[ChildLine]) -> bytes:
    return json.dumps({LOG_KEY: lines}).encode()


async def read_reply(reader: asyncio.StreamReader, on_lines: LinesSink) -> bytes | None:
    """The child's reply frame, after handing the lines of each log message before it to
    `on_lines`; None once the child has gone without a reply."""
    while (data := await read_frame(reader)) is not None:
        if not data.startswith(b'{"' + LOG_KEY.encode() + b'"'):  # a reply: status first
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
    return json.dumps(reply, allow_nan=False).encode()


def decode_reply(data: bytes) -> Outcome:
    """The child's `Outcome`; a reply that does not parse becomes a retryable failure. A
    result nested deeper than the worker's stack can read (the child's stack is shallower)
    fails the attempt for good, as `storable` fails one returned in the worker."""
    try:
        reply = json.loads(data)
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
