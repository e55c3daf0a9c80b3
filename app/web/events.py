"""Live updates: one LISTEN connection per web process, fanned out to every browser by SSE.

The hub listens on the channels the services already notify (`sundial_runs` when runs are
inserted, released, reaped, retried or unblocked; `sundial_events` with a topic as payload
for claims, finishes, cancels, progress reports, worker liveness and new trigger leaders)
and turns them into "something changed in topic X" ticks. A browser never receives data,
only the tick: its htmx element re-fetches its own fragment (`hx-trigger="sse:runs"`), so
what it shows is always what the page would render.

Coalescing, so a storm of notifications costs each browser a few updates a second:
notifications only mark topics dirty; a flusher hands the dirty topics to subscribers at
most every `FLUSH_SECONDS` (the first change after a quiet spell goes out at once). Each
subscriber holds a *set* of pending topics (latest wins, at most one entry per topic), so
a slow browser never blocks the others nor grows memory; it gets one tick per topic when
it catches up.

For other modules:

    subscription = hub.subscribe({Topic.RUNS})
    topics = await subscription.next()   # the topics that changed since the last call
    subscription.close()

`CLOCK` ticks every `CLOCK_SECONDS` for what changes with time alone (a worker that
stopped heartbeating, the age of the oldest due run). A new subscription starts with all
its topics pending, so a browser that reconnects (after a web restart) refreshes at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Iterable
from enum import StrEnum
from typing import Any

import psycopg
from sse_starlette.sse import EventSourceResponse
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from app.core.db import connection_options
from app.people.roles import Role
from app.runs.transitions import NOTIFY_CHANNEL as RUNS_CHANNEL
from app.web.access import requires

log = logging.getLogger(__name__)

EVENTS_CHANNEL = "sundial_events"
LISTENER_NAME = "sundial web events"  # application_name of the hub's connection
FLUSH_SECONDS = 0.25
CLOCK_SECONDS = 5.0
RECONNECT_SECONDS = (0.5, 1.0, 2.0, 5.0)
SSE_PING_SECONDS = 15
SSE_RETRY_MS = 1000


class Topic(StrEnum):
    """What changed. The payload of a `sundial_events` notification is one of these."""

    RUNS = "runs"
    PROGRESS = "progress"  # a running job reported progress (run_progress_many)
    WORKERS = "workers"
    TRIGGER = "trigger"
    CLOCK = "clock"


ALL_TOPICS = frozenset(Topic)


class Subscription:
    """One browser's pending topics: a set, so it never holds more than one per topic."""

    def __init__(self, hub: EventHub, topics: frozenset[Topic]) -> None:
        self.topics = topics
        self._hub = hub
        self._pending: set[Topic] = set(topics)
        self._ready = asyncio.Event()
        self._ready.set()

    def offer(self, changed: Iterable[Topic]) -> None:
        wanted = self.topics.intersection(changed)
        if wanted:
            self._pending |= wanted
            self._ready.set()

    async def next(self) -> set[Topic]:
        """Wait until a topic of this subscription changed; the topics, then cleared."""
        await self._ready.wait()
        self._ready.clear()
        topics, self._pending = self._pending, set()
        return topics

    def close(self) -> None:
        self._hub.unsubscribe(self)


class EventHub:
    """Listens on one connection and ticks every subscriber (see the module docstring)."""

    def __init__(self, listen_url: str | None) -> None:
        self.listen_url = listen_url
        self._subscribers: set[Subscription] = set()
        self._dirty: set[Topic] = set()
        self._dirty_event: asyncio.Event | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self.notifications = 0  # received; for tests and benchmarks
        self.generation = 0  # grows with every publish: caches compare it
        self.flushes = 0

    # ---- for pages ---------------------------------------------------------------------

    def subscribe(self, topics: Iterable[Topic]) -> Subscription:
        subscription = Subscription(self, frozenset(topics))
        self._subscribers.add(subscription)
        return subscription

    def unsubscribe(self, subscription: Subscription) -> None:
        self._subscribers.discard(subscription)

    @property
    def subscriber_count(self) -> int:
        return len(self._subscribers)

    def publish(self, topics: Iterable[Topic]) -> None:
        """Mark topics changed; subscribers hear of it at the next flush."""
        self._dirty.update(topics)
        self.generation += 1
        if self._dirty_event is not None:
            self._dirty_event.set()

    # ---- lifecycle (the app's lifespan) -------------------------------------------------

    async def start(self) -> None:
        self._dirty_event = asyncio.Event()
        self._tasks = [asyncio.create_task(self._flush_loop(), name="events flush")]
        self._tasks.append(asyncio.create_task(self._clock_loop(), name="events clock"))
        if self.listen_url is not None:
            self._tasks.append(asyncio.create_task(self._listen_loop(), name="events listen"))

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks = []

    # ---- the loops ---------------------------------------------------------------------

    async def _flush_loop(self) -> None:
        assert self._dirty_event is not None
        while True:
            await self._dirty_event.wait()
            self._dirty_event.clear()
            changed, self._dirty = self._dirty, set()
            for subscription in list(self._subscribers):
                subscription.offer(changed)
            self.flushes += 1
            await asyncio.sleep(FLUSH_SECONDS)

    async def _clock_loop(self) -> None:
        while True:
            await asyncio.sleep(CLOCK_SECONDS)
            self.publish([Topic.CLOCK])

    async def _listen_loop(self) -> None:
        failures = 0
        while True:
            try:
                await self._listen()
            except (psycopg.Error, OSError) as exc:
                delay = RECONNECT_SECONDS[min(failures, len(RECONNECT_SECONDS) - 1)]
                failures += 1
                log.warning("event listener lost its connection (%s); again in %ss", exc, delay)
                await asyncio.sleep(delay)
            else:
                failures = 0

    async def _listen(self) -> None:
        assert self.listen_url is not None
        conn = await psycopg.AsyncConnection.connect(
            self.listen_url,
            autocommit=True,
            application_name=LISTENER_NAME,
            **connection_options(),
        )
        async with conn:
            await conn.execute(f"LISTEN {RUNS_CHANNEL}")
            await conn.execute(f"LISTEN {EVENTS_CHANNEL}")
            # Whatever happened while not listening: every page refreshes once.
            self.publish(ALL_TOPICS)
            async for notify in conn.notifies():
                self.notifications += 1
                self.publish([_topic_of(notify.channel, notify.payload)])


def _topic_of(channel: str, payload: str) -> Topic:
    if channel == EVENTS_CHANNEL:
        try:
            return Topic(payload)
        except ValueError:
            return Topic.RUNS
    return Topic.RUNS


def hub_of(request: Request) -> EventHub:
    hub: EventHub = request.app.state.events
    return hub


def parse_topics(text: str | None) -> frozenset[Topic]:
    """`runs,workers` -> those topics; unknown names are ignored; nothing: every topic."""
    if not text:
        return ALL_TOPICS
    return frozenset(Topic(t) for t in text.split(",") if t in Topic.__members__.values())


@requires(Role.VIEWER)
async def stream(request: Request) -> Response:
    """`/events?topics=runs,workers`: an SSE stream of `event: <topic>` ticks."""
    subscription = hub_of(request).subscribe(parse_topics(request.query_params.get("topics")))

    async def ticks() -> AsyncIterator[dict[str, Any]]:
        try:
            while True:
                for topic in sorted(await subscription.next()):
                    yield {"event": topic.value, "data": str(time.time()), "retry": SSE_RETRY_MS}
        finally:
            subscription.close()

    return EventSourceResponse(ticks(), ping=SSE_PING_SECONDS, send_timeout=30)


routes = [Route("/events", stream, name="events")]
