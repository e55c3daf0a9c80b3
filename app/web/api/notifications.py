"""Notifications over the API: the channels (their addresses as hints only) with their
rules, a test message queued to a channel, and a message's outcome — through `app.notify`,
the functions the Notifications page and `sundial notify` call. Channels and rules are
changed on the page."""

from __future__ import annotations

from starlette.responses import Response
from starlette.routing import Route

from app.core.db import Conn
from app.core.errors import Missing
from app.notify import channels, outbox, rules
from app.people.roles import Role
from app.web.api.core import PREFIX, ApiCall, json_response, operation
from app.web.api.schemas import (
    NotificationChannelOut,
    NotificationListOut,
    NotificationMessageOut,
    NotificationRuleOut,
)
from app.web.database import call


def _list(conn: Conn) -> NotificationListOut:
    all_rules = rules.all_rules(conn)
    return NotificationListOut(
        channels=[
            NotificationChannelOut(
                id=c.id, name=c.name, kind=c.kind, address=c.hint, per_minute=c.per_minute,
                rules=[NotificationRuleOut(id=r.id, event=r.event, job=r.job,
                                           schedule=r.schedule, words=r.words)
                       for r in all_rules if r.channel_id == c.id],
            )
            for c in channels.all_channels(conn)
        ]
    )  # fmt: skip


def _message(conn: Conn, message_id: int) -> NotificationMessageOut:
    row = outbox.message(conn, message_id)
    if row is None:
        raise Missing(f"no notification message {message_id}", "id")
    return NotificationMessageOut.model_validate(row)


@operation(Role.OPERATOR, "List the notification channels and their rules",
           response=NotificationListOut)  # fmt: skip
async def index(api: ApiCall) -> Response:
    return json_response(await call(api.request, _list))


@operation(Role.OPERATOR, "Queue a test message to a channel; the reaper sends it",
           path={"name": str}, response=NotificationMessageOut, status=202,
           also=(404,))  # fmt: skip
async def send_test(api: ApiCall) -> Response:
    name = api.path["name"]

    def do(conn: Conn) -> NotificationMessageOut:
        channel = channels.by_name(conn, name)
        return _message(conn, outbox.queue_test(conn, channel.id, actor=api.actor))

    return json_response(await call(api.request, do), status=202)


@operation(Role.OPERATOR, "A notification message's outcome", path={"id": int},
           response=NotificationMessageOut, also=(404,))  # fmt: skip
async def message(api: ApiCall) -> Response:
    return json_response(await call(api.request, _message, api.path["id"]))


routes = [
    Route(f"{PREFIX}/notifications", index, methods=["GET"], name="api_notifications_index"),
    Route(f"{PREFIX}/notifications/channels/{{name}}/test", send_test, methods=["POST"],
          name="api_notifications_test"),
    Route(f"{PREFIX}/notifications/messages/{{id}}", message, methods=["GET"],
          name="api_notifications_message"),
]  # fmt: skip
