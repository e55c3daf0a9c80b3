"""Executors for tests: a job to hand them, and all four models started and stopped."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any, TypeVar

from app.executors import Executors
from app.handlers import default_registry
from app.handlers.jobs import ClaimedRun
from tests.helpers import fixtures_handlers


def job(handler: str, model: str, timeout: float = 10.0, **args: Any) -> ClaimedRun:
    return ClaimedRun(
        run_id=next(_run_ids),
        attempt=1,
        handler=handler,
        args=args,
        execution_model=model,
        timeout_seconds=timeout,
        idempotency_key="key-1",
        fire_time=datetime(2026, 1, 2, 3, 4, tzinfo=UTC),
    )


def with_executors(
    test: Callable[[Executors], Awaitable[T]], *, processes: int = 2, threads: int = 2
) -> T:
    """Run `test` against started executors on a fresh loop; always kill them after."""

    async def main() -> T:
        executors = Executors(
            default_registry,
            thread_workers=threads,
            process_workers=processes,
            handler_modules=(fixtures_handlers.MODULE,),
        )
        await executors.start()
        try:
            return await test(executors)
        finally:
            await executors.close(kill=True)

    return asyncio.run(main())


T = TypeVar("T")


_run_ids = itertools.count(1)
