"""The Notifications page: channels (where messages go) and rules (which events), a
"Send a test" button per channel and its delivery log — through `app.notify`, like the CLI.

Operators read the page, add and delete rules and send tests; admins add, change and
delete channels (their addresses are secrets, shown only as a hint once saved).
"""

from __future__ import annotations

import uuid
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from app.core.db import Conn
from app.core.errors import UsageError
from app.notify import channels, outbox, rules
from app.people.roles import Role
from app.web.access import current_user, requires
from app.web.database import call
from app.web.forms import field_errors
from app.web.render import redirect, render

ADDRESS_FIELDS = ("url", "host", "port", "user", "password", "sender", "to")
DONE = {
    "channel_added": "Channel saved.",
    "channel_changed": "Channel saved.",
    "channel_deleted": "Channel deleted, with its rules and its delivery log.",
    "rule_added": "Rule added: matching events are sent from now on.",
    "rule_deleted": "Rule deleted.",
    "test_queued": "Test message queued: it shows in the delivery log below once sent.",
}


def _blank_channel() -> dict[str, str]:
    return {
        "name": "",
        "kind": "webhook",
        "per_minute": str(channels.DEFAULT_PER_MINUTE),
        **dict.fromkeys(ADDRESS_FIELDS, ""),
    }


def _blank_rule() -> dict[str, str]:
    return {"channel": "", "event": "dead_letter", "job": "", "schedule": ""}


def _index_data(conn: Conn) -> dict[str, Any]:
    all_rules = rules.all_rules(conn)
    return {
        "channels": channels.all_channels(conn),
        "rules": all_rules,
        "rules_of": {
            r.channel_id: [x for x in all_rules if x.channel_id == r.channel_id] for r in all_rules
        },
        "kinds": channels.KINDS,
        "events": rules.EVENT_LABELS,
    }


def _index(
    request: Request,
    *,
    status: int = 200,
    channel_values: dict[str, str] | None = None,
    channel_errors: dict[str, str] | None = None,
    rule_values: dict[str, str] | None = None,
    rule_errors: dict[str, str] | None = None,
    data: dict[str, Any],
) -> Response:
    done = DONE.get(request.query_params.get("done", ""))
    return render(
        request,
        "notifications/index.html",
        status_code=status,
        done=done,
        values=channel_values or _blank_channel(),
        errors=channel_errors or {},
        channel=None,
        rule_values=rule_values or _blank_rule(),
        rule_errors=rule_errors or {},
        **data,
    )


@requires(Role.OPERATOR)
async def index(request: Request) -> Response:
    return _index(request, data=await call(request, _index_data))


def _rate(text: str) -> int | None:
    if not text:
        return None
    if not text.isdigit():
        raise channels.ChannelError("Messages a minute is a whole number, like 10.", "per_minute")
    return int(text)


@requires(Role.ADMIN)
async def add_channel(request: Request) -> Response:
    form = await request.form()
    values = {f: str(form.get(f, "")) for f in ("name", "kind", "per_minute", *ADDRESS_FIELDS)}
    actor = current_user(request).username
    key = request.app.state.settings.secret_key
    try:
        rate = _rate(values["per_minute"].strip())
        fields = {f: values[f] for f in ADDRESS_FIELDS}
        await call(
            request,
            lambda conn: channels.create(
                conn,
                key,
                name=values["name"],
                kind=values["kind"],
                fields=fields,
                per_minute=rate,
                actor=actor,
            ),
        )
    except UsageError as exc:
        values["password"] = ""  # never sent back to the browser
        data = await call(request, _index_data)
        return _index(
            request, status=422, channel_values=values, channel_errors=field_errors(exc), data=data
        )
    return redirect(request, "/notifications?done=channel_added#channels")


@requires(Role.OPERATOR)
async def add_rule(request: Request) -> Response:
    form = await request.form()
    values = {f: str(form.get(f, "")).strip() for f in ("channel", "event", "job", "schedule")}
    actor = current_user(request).username
    try:
        channel_id = _uuid(values["channel"], "channel", "Choose a channel.")
        await call(
            request,
            lambda conn: rules.create(
                conn,
                channel_id=channel_id,
                event=values["event"],
                job=values["job"] or None,
                schedule=values["schedule"] or None,
                actor=actor,
            ),
        )
    except UsageError as exc:
        data = await call(request, _index_data)
        return _index(
            request, status=422, rule_values=values, rule_errors=field_errors(exc), data=data
        )
    return redirect(request, "/notifications?done=rule_added#rules")


@requires(Role.OPERATOR)
async def delete_rule(request: Request) -> Response:
    rule_id = _uuid(request.path_params["rule_id"], None, "No such rule.")
    actor = current_user(request).username
    try:
        await call(request, lambda conn: rules.delete(conn, rule_id, actor=actor))
    except UsageError:
        pass  # already gone: the list shows it as it is
    return redirect(request, "/notifications?done=rule_deleted#rules")


def _uuid(text: str, field: str | None, message: str) -> uuid.UUID:
    try:
        return uuid.UUID(text)
    except ValueError:
        raise channels.UnknownChannel(message, field) from None


def _channel_data(conn: Conn, channel_id: uuid.UUID) -> dict[str, Any]:
    channel = channels.get(conn, channel_id)
    log = outbox.log_of(conn, channel_id)
    return {
        "channel": channel,
        "log": log,
        "waiting": any(d.status == "pending" for d in log),
        "rules": [r for r in rules.all_rules(conn) if r.channel_id == channel_id],
        "kinds": channels.KINDS,
    }


async def _channel_or_missing(request: Request) -> dict[str, Any] | Response:
    try:
        channel_id = _uuid(request.path_params["channel_id"], None, "No such channel.")
        return await call(request, _channel_data, channel_id)
    except UsageError as exc:
        return render(request, "shared/error.html", status_code=404, detail=str(exc))


def _channel_values(channel: channels.Channel) -> dict[str, str]:
    return {
        "name": channel.name,
        "kind": channel.kind,
        "per_minute": str(channel.per_minute),
        **dict.fromkeys(ADDRESS_FIELDS, ""),
    }


@requires(Role.OPERATOR)
async def show_channel(request: Request) -> Response:
    data = await _channel_or_missing(request)
    if isinstance(data, Response):
        return data
    return render(
        request,
        "notifications/channel.html",
        "notifications/_log.html",
        done=DONE.get(request.query_params.get("done", "")),
        values=_channel_values(data["channel"]),
        errors={},
        **data,
    )


@requires(Role.ADMIN)
async def change_channel(request: Request) -> Response:
    data = await _channel_or_missing(request)
    if isinstance(data, Response):
        return data
    channel: channels.Channel = data["channel"]
    form = await request.form()
    values = {f: str(form.get(f, "")) for f in ("name", "per_minute", *ADDRESS_FIELDS)}
    values["kind"] = channel.kind
    actor = current_user(request).username
    key = request.app.state.settings.secret_key
    try:
        rate = _rate(values["per_minute"].strip())
        fields = {f: values[f] for f in ADDRESS_FIELDS}
        await call(
            request,
            lambda conn: channels.update(
                conn,
                key,
                channel.id,
                name=values["name"],
                per_minute=rate,
                kind=channel.kind,
                fields=fields,
                actor=actor,
            ),
        )
    except UsageError as exc:
        values["password"] = ""
        return render(
            request,
            "notifications/channel.html",
            status_code=422,
            done=None,
            values=values,
            errors=field_errors(exc),
            **data,
        )
    return redirect(request, f"/notifications/channels/{channel.id}?done=channel_changed")


@requires(Role.ADMIN)
async def delete_channel(request: Request) -> Response:
    data = await _channel_or_missing(request)
    if isinstance(data, Response):
        return data
    channel: channels.Channel = data["channel"]
    form = await request.form()
    if form.get("confirm") != "yes":
        return render(
            request,
            "notifications/channel.html",
            status_code=422,
            done=None,
            values=_channel_values(channel),
            errors={"confirm": "Tick the box to confirm the deletion."},
            **data,
        )
    actor = current_user(request).username
    try:
        await call(request, lambda conn: channels.delete(conn, channel.id, actor=actor))
    except UsageError:
        pass  # deleted meanwhile
    return redirect(request, "/notifications?done=channel_deleted#channels")


@requires(Role.OPERATOR)
async def send_test(request: Request) -> Response:
    data = await _channel_or_missing(request)
    if isinstance(data, Response):
        return data
    channel: channels.Channel = data["channel"]
    actor = current_user(request).username
    await call(request, lambda conn: outbox.queue_test(conn, channel.id, actor=actor))
    return redirect(request, f"/notifications/channels/{channel.id}?done=test_queued#log")


routes = [
    Route("/notifications", index, methods=["GET"], name="notifications"),
    Route("/notifications/channels", add_channel, methods=["POST"], name="notify_add_channel"),
    Route("/notifications/rules", add_rule, methods=["POST"], name="notify_add_rule"),
    Route(
        "/notifications/rules/{rule_id}/delete",
        delete_rule,
        methods=["POST"],
        name="notify_delete_rule",
    ),
    Route(
        "/notifications/channels/{channel_id}", show_channel, methods=["GET"], name="notify_channel"
    ),
    Route(
        "/notifications/channels/{channel_id}",
        change_channel,
        methods=["POST"],
        name="notify_change_channel",
    ),
    Route(
        "/notifications/channels/{channel_id}/delete",
        delete_channel,
        methods=["POST"],
        name="notify_delete_channel",
    ),
    Route(
        "/notifications/channels/{channel_id}/test", send_test, methods=["POST"], name="notify_test"
    ),
]
