"""Acting on many runs from the runs page: tick runs or take every run the filter matches,
see the count in words and confirm, then watch the batches go (`app.runs.bulk_actions`).

The request that confirms starts the action and returns at once; this web process works
through the batches in a thread (`BulkRunner`), each batch its own transaction, and the
runs page's progress panel follows over SSE. Every `TAKE_OVER_SECONDS` the runner also
takes over actions whose process stopped (their lease ran out) and goes on with them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any
from urllib.parse import urlencode

from psycopg_pool import ConnectionPool
from starlette.datastructures import FormData, QueryParams
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from app.core.db import Conn
from app.core.errors import UsageError
from app.core.limits import whole_id
from app.handlers.gate import may_run_commands
from app.people.roles import Role
from app.runs import bulk_actions
from app.runs.bulk_actions import BulkVerb, Selection
from app.web.access import current_user, requires
from app.web.database import call
from app.web.render import render
from app.web.runs import FILTER_FIELDS, filter_of
from app.web.viewer_zone import viewer_zone

log = logging.getLogger(__name__)

TAKE_OVER_SECONDS = 10.0


class BulkRunner:
    """Works through this process's bulk actions, each in a thread of its own, batch by
    batch; hands them back when the process stops."""

    def __init__(self, pool: ConnectionPool[Conn]) -> None:
        self.pool = pool
        self.owner = bulk_actions.owner_name("web")
        self._stopping = False
        self._tasks: set[asyncio.Task[None]] = set()
        self._watch: asyncio.Task[None] | None = None

    def launch(self, action_id: int) -> None:
        task = asyncio.create_task(asyncio.to_thread(self._run, action_id))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _run(self, action_id: int) -> None:
        try:
            while not self._stopping:
                with self.pool.connection() as conn:
                    if not bulk_actions.run_batch(conn, action_id, owner=self.owner):
                        return
            with self.pool.connection() as conn:
                bulk_actions.release(conn, action_id, owner=self.owner)
        except Exception:  # the lease runs out and a process takes it over
            log.exception("bulk action %s stopped", action_id)

    async def start(self) -> None:
        self._watch = asyncio.create_task(self._take_over_loop(), name="bulk actions")

    async def _take_over_loop(self) -> None:
        while True:
            try:
                ids = await asyncio.to_thread(self._take_over)
                for action_id in ids:
                    log.info("bulk action %s taken over where it stopped", action_id)
                    self.launch(action_id)
            except Exception as exc:  # the database is down: try again later
                log.warning("bulk actions: could not look for interrupted ones (%s)", exc)
            await asyncio.sleep(TAKE_OVER_SECONDS)

    def _take_over(self) -> list[int]:
        with self.pool.connection() as conn:
            return bulk_actions.take_over(conn, owner=self.owner)

    async def stop(self) -> None:
        self._stopping = True
        if self._watch is not None:
            self._watch.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watch
        if self._tasks:
            await asyncio.wait(self._tasks, timeout=5)


def runner_of(request: Request) -> BulkRunner:
    runner: BulkRunner = request.app.state.bulk_runner
    return runner


def verb_of(text: str | None) -> BulkVerb:
    try:
        return BulkVerb(text or "")
    except ValueError:
        raise UsageError("choose what to do: cancel, retry or re-run") from None


def selection_of(params: QueryParams | FormData, zone: str) -> Selection:
    """The form's choice: the ticked runs (`run`), or every run the filter matches."""
    if params.get("scope") == "ticked":
        ids = []
        for text in params.getlist("run"):
            run_id = whole_id(str(text))
            if run_id is None:
                raise UsageError(f"{text!r} is not a run id")
            ids.append(run_id)
        return Selection(run_ids=tuple(ids)).check()
    return Selection(where=filter_of(QueryParams(_filter_items(params)), zone)).check()


def _filter_items(params: QueryParams | FormData) -> list[tuple[str, str]]:
    return [(k, str(v)) for k in FILTER_FIELDS if (v := params.get(k))]


def runs_url(params: QueryParams | FormData) -> str:
    kept = _filter_items(params)
    return "/runs" + ("?" + urlencode(kept) if kept else "")


@requires(Role.OPERATOR)
async def confirm(request: Request) -> Response:
    """`/runs/bulk?action=cancel&scope=matching&status=failed`: the count, in words, and a
    button that starts it. Changes nothing."""
    params = request.query_params
    context: dict[str, Any] = {"back_url": runs_url(params), "params": params}
    try:
        verb = verb_of(params.get("action"))
        selection = selection_of(params, viewer_zone(request)[0])
        total, _ = await call(request, bulk_actions.count, selection)
    except UsageError as exc:
        return render(request, "runs/bulk_confirm.html", status_code=422, error=str(exc),
                      **context)  # fmt: skip
    return render(
        request,
        "runs/bulk_confirm.html",
        error=None,
        verb=verb,
        total=total,
        question=bulk_actions.question(verb, total, selection),
        button=f"Yes, {bulk_actions.WORDS[verb][0].lower()} {total:,} "
        f"run{'' if total == 1 else 's'}",
        why_skipped=bulk_actions.WORDS[verb][2],
        filter_items=_filter_items(params),
        run_ids=selection.run_ids or (),
        **context,
    )


@requires(Role.OPERATOR)
async def begin(request: Request) -> Response:
    """The confirmed action: stored and audited, then worked on in the background; back
    to the runs page, where its progress shows."""
    form = await request.form()
    try:
        verb = verb_of(str(form.get("action") or ""))
        selection = selection_of(form, viewer_zone(request)[0])
    except UsageError as exc:
        return render(request, "runs/bulk_confirm.html", status_code=422, error=str(exc),
                      back_url=runs_url(form), params=form)  # fmt: skip
    runner = runner_of(request)
    action_id = await call(
        request,
        bulk_actions.start,
        verb,
        selection,
        actor=current_user(request).username,
        owner=runner.owner,
        may_run_commands=may_run_commands.get(),
    )
    runner.launch(action_id)
    return RedirectResponse(runs_url(form) + "#bulk-progress", status_code=303)


@requires(Role.VIEWER)
async def progress(request: Request) -> Response:
    """The runs page's panel of bulk actions under way and lately finished (live)."""
    actions = await call(request, bulk_actions.recent)
    return render(request, "runs/_bulk_progress.html", actions=actions)


routes = [
    Route("/runs/bulk", confirm, methods=["GET"], name="runs_bulk_confirm"),
    Route("/runs/bulk", begin, methods=["POST"], name="runs_bulk_begin"),
    Route("/runs/bulk/progress", progress, methods=["GET"], name="runs_bulk_progress"),
]
