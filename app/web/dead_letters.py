"""Dead letters pages: groups by error fingerprint, a group's runs, and the operator's
actions (retry one, selected or a whole group after its count, edit args and retry,
resolve or discard a group with a reason) — through `app.runs.dead_letters`."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from app.core.db import Conn
from app.people.roles import Role
from app.runs import dead_letters
from app.runs.dead_letters import DeadLetterError
from app.web import sparklines as sparklines  # registers the filter the templates use
from app.web.access import current_user, requires
from app.web.database import call
from app.web.forms import field_errors
from app.web.render import redirect, render


def _group_url(fingerprint: str, message: str | None = None) -> str:
    url = f"/dead-letters/{quote(fingerprint, safe='')}"
    return url + ("?message=" + quote(message) if message else "")


def _index_page(conn: Conn) -> dict[str, Any]:
    return {
        "groups": dead_letters.groups(conn),
        "resolutions": dead_letters.recent_resolutions(conn),
    }


def _group_page(conn: Conn, fingerprint: str) -> dict[str, Any]:
    group = dead_letters.group(conn, fingerprint)
    if group is None:
        raise HTTPException(404, "This group has no open dead letters: all were retried, "
                            "resolved or discarded.")  # fmt: skip
    return {"group": group, "runs": dead_letters.group_runs(conn, fingerprint)}


def _run_page(conn: Conn, run_id: int) -> dict[str, Any]:
    run = dead_letters.get_run(conn, run_id)
    if run is None:
        raise HTTPException(404, f"There is no run {run_id}.")
    return {"run": run}


@requires(Role.VIEWER)
async def index(request: Request) -> Response:
    page = await call(request, _index_page)
    message = request.query_params.get("message")
    return render(request, "dead_letters/index.html", "dead_letters/_table.html",
                  message=message, **page)  # fmt: skip


@requires(Role.VIEWER)
async def show(request: Request) -> Response:
    fingerprint = request.path_params["fingerprint"]
    page = await call(request, _group_page, fingerprint)
    message = request.query_params.get("message")
    return render(request, "dead_letters/show.html", message=message, errors={},
                  values={}, **page)  # fmt: skip


def _run_ids(values: list[str]) -> list[int]:
    try:
        return [int(v) for v in values]
    except ValueError:
        raise HTTPException(422, "Run ids are whole numbers.") from None


@requires(Role.OPERATOR)
async def retry_selected(request: Request) -> Response:
    form = await request.form()
    fingerprint = str(form.get("fingerprint", ""))
    # A row's own Retry button names its run alone, whatever boxes are ticked.
    only = form.get("only")
    ids = _run_ids([str(only)] if only else [str(v) for v in form.getlist("run_ids")])
    try:
        retried = await call(
            request, dead_letters.retry_runs, ids, actor=current_user(request).username
        )
    except DeadLetterError as exc:
        return redirect(request, _group_url(fingerprint, str(exc)))
    message = _requeued(len(retried), len(ids))
    left = await call(request, dead_letters.group_count, fingerprint) if fingerprint else None
    if left and left.runs:
        return redirect(request, _group_url(fingerprint, message))
    return redirect(request, "/dead-letters?message=" + quote(message))


def _requeued(done: int, asked: int) -> str:
    text = f"Re-queued {done} run{'' if done == 1 else 's'}."
    if done < asked:
        text += f" {asked - done} had already left the dead letters (retried by someone else?)."
    return text


@requires(Role.OPERATOR)
async def confirm_group_retry(request: Request) -> Response:
    """The dry run: how many runs "retry group" would re-queue, and the button to do it."""
    fingerprint = request.path_params["fingerprint"]
    counted = await call(request, dead_letters.group_count, fingerprint)
    return render(request, "dead_letters/confirm.html", "dead_letters/_confirm.html",
                  fingerprint=fingerprint, count=counted.retryable,
                  in_history=counted.in_history)  # fmt: skip


@requires(Role.OPERATOR)
async def retry_group(request: Request) -> Response:
    fingerprint = request.path_params["fingerprint"]
    done = await call(
        request, dead_letters.retry_group, fingerprint, actor=current_user(request).username
    )
    return redirect(request, "/dead-letters?message=" + quote(_requeued(done, done)))


@requires(Role.OPERATOR)
async def resolve(request: Request) -> Response:
    fingerprint = request.path_params["fingerprint"]
    form = await request.form()
    values = {"action": str(form.get("action", "")), "reason": str(form.get("reason", ""))}
    try:
        saved = await call(
            request, dead_letters.resolve_group, fingerprint, values["action"], values["reason"],
            actor=current_user(request).username,
        )  # fmt: skip
    except DeadLetterError as exc:
        page = await call(request, _group_page, fingerprint)
        return render(request, "dead_letters/show.html", "dead_letters/_resolve.html",
                      status_code=422, values=values, errors=field_errors(exc),
                      **page)  # fmt: skip
    message = f"{saved.runs} run{'' if saved.runs == 1 else 's'} {saved.action}: {saved.reason}"
    return redirect(request, "/dead-letters?message=" + quote(message))


@requires(Role.OPERATOR)
async def edit_run(request: Request) -> Response:
    page = await call(request, _run_page, request.path_params["run_id"])
    args = json.dumps(page["run"]["args"], indent=2)
    return render(request, "dead_letters/edit.html", values={"args": args}, errors={}, **page)


@requires(Role.OPERATOR)
async def retry_run(request: Request) -> Response:
    run_id = request.path_params["run_id"]
    form = await request.form()
    text = str(form.get("args", ""))
    page = await call(request, _run_page, run_id)
    try:
        try:
            args = json.loads(text)
        except ValueError as exc:
            raise DeadLetterError(f"args are not valid JSON: {exc}", "args") from None
        done = await call(
            request, dead_letters.retry_with_args, run_id, args,
            actor=current_user(request).username,
        )  # fmt: skip
    except DeadLetterError as exc:
        return render(request, "dead_letters/edit.html", "dead_letters/_edit_form.html",
                      status_code=422, values={"args": text},
                      errors=field_errors(exc), **page)  # fmt: skip
    if not done:
        message = f"Run {run_id} is no longer a dead letter; nothing was changed."
    else:
        message = f"Run {run_id} re-queued with the new args."
    return redirect(request, "/dead-letters?message=" + quote(message))


routes = [
    Route("/dead-letters", index, methods=["GET"], name="dead_letters_index"),
    Route("/dead-letters/retry", retry_selected, methods=["POST"], name="dead_letters_retry"),
    Route("/dead-letters/runs/{run_id:int}/edit", edit_run, methods=["GET"],
          name="dead_letters_edit_run"),
    Route("/dead-letters/runs/{run_id:int}/retry", retry_run, methods=["POST"],
          name="dead_letters_retry_run"),
    Route("/dead-letters/{fingerprint}", show, methods=["GET"], name="dead_letters_show"),
    Route("/dead-letters/{fingerprint}/retry", confirm_group_retry, methods=["GET"],
          name="dead_letters_confirm_group_retry"),
    Route("/dead-letters/{fingerprint}/retry", retry_group, methods=["POST"],
          name="dead_letters_retry_group"),
    Route("/dead-letters/{fingerprint}/resolve", resolve, methods=["POST"],
          name="dead_letters_resolve"),
]  # fmt: skip
