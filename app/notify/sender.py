"""Sending one message through Apprise, the library that speaks to webhooks, Slack, SMTP
and many more; Sundial keeps no client of its own.

A webhook (Apprise's `json://` / `jsons://`) also carries the outbox row's id as the
`Idempotency-Key` header and the `idempotency_key` field of its JSON body, so a receiver can
drop the one repeat a crash can cause (see `app.notify.outbox`).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from urllib.parse import urlsplit

import apprise

# A sender: (Apprise URL, title, body, idempotency key) -> None when sent, else what went
# wrong in words.
Send = Callable[[str, str, str, str], str | None]
TIMEOUT_SECONDS = 10.0


def send(url: str, title: str, body: str, key: str) -> str | None:
    plugin = apprise.Apprise.instantiate(url, suppress_exceptions=True)
    if plugin is None:
        return "The saved address is not one Sundial can send to; edit the channel."
    headers = getattr(plugin, "headers", None)
    if isinstance(headers, dict):
        headers["Idempotency-Key"] = key
    extras = getattr(plugin, "payload_extras", None)
    if isinstance(extras, dict):
        extras["idempotency_key"] = key
    for attribute in ("socket_connect_timeout", "socket_read_timeout"):
        if hasattr(plugin, attribute):
            setattr(plugin, attribute, TIMEOUT_SECONDS)
    with apprise.LogCapture(level=logging.WARNING, fmt="%(message)s") as captured:  # type: ignore[no-untyped-call]
        ok = plugin.notify(body=body, title=title)
    if ok:
        return None
    said = [line.strip() for line in captured.getvalue().splitlines() if line.strip()]
    return _words(said[-1] if said else "The channel refused the message.", url)


def _words(line: str, url: str) -> str:
    """Apprise's warnings are sentences already ("Failed to send JSON notification:
    Internal Server Error - error=500."); kept short, and with any piece of the secret
    address that might appear in one blanked, since the delivery log shows them."""
    parts = urlsplit(url)
    pieces = [parts.path, parts.query, parts.password or "", parts.username or ""]
    pieces += [p for p in re.split(r"[/?&=:@]", f"{parts.path}?{parts.query}") if len(p) >= 6]
    for piece in sorted((p for p in pieces if len(p) >= 4), key=len, reverse=True):
        line = line.replace(piece, "••••")
    return line[:500]
