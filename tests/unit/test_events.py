"""The event hub without a database: coalescing, latest-wins per subscriber, topics."""

from __future__ import annotations

import asyncio

import pytest

from app.web import events
from app.web.events import EventHub, Topic, parse_topics


def test_topics_parse_from_the_query_string() -> None:
    assert parse_topics("runs,workers") == {Topic.RUNS, Topic.WORKERS}
    assert parse_topics("runs,bogus") == {Topic.RUNS}
    assert parse_topics(None) == events.ALL_TOPICS


def test_a_storm_becomes_a_few_ticks_and_a_slow_subscriber_holds_one_per_topic(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def scenario() -> None:
        monkeypatch.setattr(events, "FLUSH_SECONDS", 0.05)
        hub = EventHub(listen_url=None)
        await hub.start()
        fast = hub.subscribe({Topic.RUNS})
        slow = hub.subscribe({Topic.RUNS, Topic.WORKERS})
        assert await fast.next() == {Topic.RUNS}  # a new subscription refreshes at once
        ticks = 0
        deadline = asyncio.get_running_loop().time() + 0.5
        while asyncio.get_running_loop().time() < deadline:
            for _ in range(500):  # 5,000 notifications in 0.5 s
                hub.publish([Topic.RUNS])
            hub.publish([Topic.WORKERS])
            await asyncio.sleep(0.05)
            while True:
                try:
                    await asyncio.wait_for(fast.next(), 0.001)
                    ticks += 1
                except TimeoutError:
                    break
        # at most one tick per flush interval, never one per notification
        assert 1 <= ticks <= 0.5 / 0.05 + 2
        # the slow one never read: it holds one pending entry per topic, nothing more
        assert slow._pending == {Topic.RUNS, Topic.WORKERS}
        assert await slow.next() == {Topic.RUNS, Topic.WORKERS}
        fast.close()
        slow.close()
        assert hub.subscriber_count == 0
        await hub.stop()

    asyncio.run(scenario())


def test_a_subscriber_only_hears_its_topics() -> None:
    async def scenario() -> None:
        hub = EventHub(listen_url=None)
        await hub.start()
        workers = hub.subscribe({Topic.WORKERS})
        await workers.next()
        hub.publish([Topic.RUNS])
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(workers.next(), events.FLUSH_SECONDS * 2)
        hub.publish([Topic.WORKERS])
        assert await asyncio.wait_for(workers.next(), 1) == {Topic.WORKERS}
        await hub.stop()

    asyncio.run(scenario())
