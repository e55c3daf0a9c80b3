"""Notification channels: where messages go, kept as an Apprise URL encrypted at rest.

A person fills a form by kind (a webhook address, a Slack incoming-webhook address, an SMTP
server and mailboxes, or any Apprise URL); `address_of` turns it into the Apprise URL and a
hint that shows which address is saved without revealing it ("Slack webhook …/T0/B0/••••").
The secret is never read back out to a person: the page, the API and the CLI show the hint.

Every change is audited in its transaction; the audit keeps names and hints, never secrets.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import parse_qsl, quote, urlsplit

import apprise

from app.core import limits
from app.core.db import Conn
from app.core.errors import Conflict, Missing, UsageError
from app.core.sql import query
from app.notify import secrets
from app.people import audit

KINDS = {
    "webhook": "Webhook (JSON POST)",
    "slack": "Slack incoming webhook",
    "email": "E-mail (SMTP)",
    "apprise": "Other (an Apprise URL)",
}
MAX_NAME_CHARS = 100
DEFAULT_PER_MINUTE = 10
DOTS = "••••"
SLACK_HOSTS = ("hooks.slack.com", "hooks.slack-gov.com")


class ChannelError(UsageError):
    """Input a person can fix, naming the form field it concerns."""


class UnknownChannel(ChannelError, Missing):
    pass


@dataclass(frozen=True, slots=True)
class Channel:
    id: uuid.UUID
    name: str
    kind: str
    hint: str
    per_minute: int
    created_at: datetime

    @property
    def kind_words(self) -> str:
        return KINDS.get(self.kind, self.kind)


@dataclass(frozen=True, slots=True)
class Address:
    url: str  # the Apprise URL: secret
    hint: str  # what a person may see again


def _channel(row: dict[str, Any]) -> Channel:
    return Channel(row["id"], row["name"], row["kind"], row["hint"], row["per_minute"],
                   row["created_at"])  # fmt: skip


def address_of(kind: str, fields: dict[str, str]) -> Address:
    """The Apprise URL and its hint from a form's fields; a refusal names the field."""
    if kind == "webhook":
        return _webhook(fields.get("url", "").strip())
    if kind == "slack":
        return _slack(fields.get("url", "").strip())
    if kind == "email":
        return _email(fields)
    if kind == "apprise":
        url = fields.get("url", "").strip()
        if not url:
            raise ChannelError("Enter the Apprise URL.", "url")
        _check_apprise(url, "url")
        return Address(url, f"{url.split(':', 1)[0]}://{DOTS}")
    raise ChannelError(f"Choose a kind of channel: {', '.join(KINDS)}.", "kind")


def _webhook(url: str) -> Address:
    if not url:
        raise ChannelError("Enter the address to send to, like https://example.com/hook.", "url")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ChannelError("The address must start with https:// (or http://).", "url")
    schema = "jsons" if parts.scheme == "https" else "json"
    netloc = parts.netloc  # user:password@host:port, as given
    params = "&".join(f"-{quote(k, safe='')}={quote(v, safe='')}"
                      for k, v in parse_qsl(parts.query, keep_blank_values=True))  # fmt: skip
    apprise_url = f"{schema}://{netloc}{parts.path or '/'}" + (f"?{params}" if params else "")
    _check_apprise(apprise_url, "url")
    port = f":{parts.port}" if parts.port else ""
    return Address(apprise_url, f"Webhook {parts.scheme}://{parts.hostname}{port}/…{DOTS}")


def _slack(url: str) -> Address:
    parts = urlsplit(url)
    tokens = [t for t in parts.path.split("/") if t]
    if (
        parts.scheme != "https"
        or parts.hostname not in SLACK_HOSTS
        or len(tokens) != 4
        or tokens[0] != "services"
    ):
        raise ChannelError(
            "Paste the Slack incoming-webhook address, like "
            "https://hooks.slack.com/services/T000/B000/XXXX.",
            "url",
        )
    a, b, c = tokens[1:]
    apprise_url = f"slack://{a}/{b}/{c}"
    _check_apprise(apprise_url, "url")
    return Address(apprise_url, f"Slack webhook …/{a}/{b}/{DOTS}")


def _email(fields: dict[str, str]) -> Address:
    host = fields.get("host", "").strip()
    if not host:
        raise ChannelError("Enter the mail server, like smtp.example.com.", "host")
    port_text = fields.get("port", "").strip() or "587"
    if not port_text.isdigit() or not 1 <= int(port_text) <= 65535:
        raise ChannelError("The port is a number, usually 587 (or 465).", "port")
    port = int(port_text)
    sender = fields.get("sender", "").strip()
    to = fields.get("to", "").strip()
    if "@" not in sender:
        raise ChannelError("Enter the address messages come from, like sundial@example.com.",
                           "sender")  # fmt: skip
    if "@" not in to:
        raise ChannelError("Enter the address to send to, like oncall@example.com.", "to")
    user = fields.get("user", "").strip()
    password = fields.get("password", "")
    login = f"{quote(user, safe='')}:{quote(password, safe='')}@" if user else ""
    schema = "mailtos" if user else "mailto"
    mode = "ssl" if port == 465 else "starttls"
    domain = sender.rsplit("@", 1)[1]
    apprise_url = (
        f"{schema}://{login}{domain}:{port}?smtp={quote(host, safe='')}"
        f"&from={quote(sender, safe='')}&to={quote(to, safe='')}"
        + (f"&mode={mode}" if user else "")
    )
    _check_apprise(apprise_url, "host")
    return Address(apprise_url, f"E-mail to {to} through {host}:{port}")


def _check_apprise(url: str, field: str) -> None:
    if apprise.Apprise.instantiate(url, suppress_exceptions=True) is None:
        raise ChannelError("That address is not one Sundial can send to; check it.", field)


def _check_name(name: str) -> str:
    name = name.strip()
    if not name:
        raise ChannelError("Give the channel a name, like On-call Slack.", "name")
    if len(name) > MAX_NAME_CHARS:
        raise ChannelError(f"A channel's name is at most {MAX_NAME_CHARS} characters.", "name")
    return name


def _check_rate(per_minute: int | None) -> int:
    if per_minute is None:
        return DEFAULT_PER_MINUTE
    if not 1 <= per_minute <= limits.MAX_NOTIFY_PER_MINUTE:
        raise ChannelError(
            f"Messages a minute is a number from 1 to {limits.MAX_NOTIFY_PER_MINUTE}.",
            "per_minute",
        )
    return per_minute


def _snapshot(row: dict[str, Any]) -> dict[str, Any]:
    return {"name": row["name"], "kind": row["kind"], "address": row["hint"],
            "per_minute": row["per_minute"]}  # fmt: skip


def create(conn: Conn, secret_key: str, *, name: str, kind: str, fields: dict[str, str],
           per_minute: int | None = None, actor: str) -> Channel:  # fmt: skip
    """Save a new channel; its address is encrypted before it reaches the database."""
    name = _check_name(name)
    rate = _check_rate(per_minute)
    address = address_of(kind, fields)
    with conn.transaction():
        row = conn.execute(
            query("notify", "channel_insert"),
            {"name": name, "kind": kind, "secret": secrets.encrypt(secret_key, address.url),
             "hint": address.hint, "per_minute": rate, "actor": actor},
        ).fetchone()  # fmt: skip
        if row is None:
            raise Conflict(f"A channel is already called {name}; choose another name.", "name")
        audit.record(conn, actor, "notify.channel_create", "notification_channel", name,
                     after=_snapshot(row), subject_id=row["id"])  # fmt: skip
    return _channel(row)


def update(conn: Conn, secret_key: str, channel_id: uuid.UUID, *, name: str,
           per_minute: int | None, kind: str | None = None,
           fields: dict[str, str] | None = None, actor: str,
           now: datetime | None = None) -> Channel:  # fmt: skip
    """Rename a channel or change its rate; a new address replaces the saved one only when
    `fields` holds one (empty boxes keep it)."""
    name = _check_name(name)
    rate = _check_rate(per_minute)
    address = None
    if fields and any(v.strip() for k, v in fields.items() if k != "port"):
        address = address_of(kind or "", fields)
    with conn.transaction():
        before = conn.execute(query("notify", "channel_by_id"), {"id": channel_id}).fetchone()
        if before is None:
            raise UnknownChannel("That channel no longer exists.")
        taken = conn.execute(query("notify", "channel_by_name"), {"name": name}).fetchone()
        if taken is not None and taken["id"] != channel_id:
            raise Conflict(f"A channel is already called {name}; choose another name.", "name")
        row = conn.execute(
            query("notify", "channel_update"),
            {"id": channel_id, "name": name, "per_minute": rate,
             "secret": None if address is None else secrets.encrypt(secret_key, address.url),
             "hint": None if address is None else address.hint,
             "kind": None if address is None else kind, "now": now},
        ).fetchone()  # fmt: skip
        assert row is not None
        audit.record(conn, actor, "notify.channel_update", "notification_channel", name,
                     before=_snapshot(before), after=_snapshot(row),
                     subject_id=channel_id)  # fmt: skip
    return _channel(row)


def delete(conn: Conn, channel_id: uuid.UUID, *, actor: str) -> str:
    """Delete a channel with its rules and delivery log; its name."""
    with conn.transaction():
        row = conn.execute(query("notify", "channel_delete"), {"id": channel_id}).fetchone()
        if row is None:
            raise UnknownChannel("That channel no longer exists.")
        audit.record(conn, actor, "notify.channel_delete", "notification_channel", row["name"],
                     before=_snapshot(row), subject_id=channel_id)  # fmt: skip
    return str(row["name"])


def all_channels(conn: Conn) -> list[Channel]:
    return [_channel(r) for r in conn.execute(query("notify", "channels_list")).fetchall()]


def get(conn: Conn, channel_id: uuid.UUID) -> Channel:
    row = conn.execute(query("notify", "channel_by_id"), {"id": channel_id}).fetchone()
    if row is None:
        raise UnknownChannel("That channel no longer exists.")
    return _channel(row)


def by_name(conn: Conn, name: str) -> Channel:
    row = conn.execute(query("notify", "channel_by_name"), {"name": name}).fetchone()
    if row is None:
        raise UnknownChannel(f"No channel is called {name}.", "name")
    return _channel(row)
