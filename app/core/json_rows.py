"""Rows as one JSON array, the way batches reach PostgreSQL.

A statement reads the array with `jsonb_to_recordset`: one parameter however many rows,
several times cheaper to send than one array parameter per column. Values must already be
JSON (ids and instants as text): a value that is not is a bug to raise, never a string to
guess, since run arguments travel this way too.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

encode_json = json.JSONEncoder(separators=(",", ":")).encode


def json_rows(rows: list[dict[str, Any]]) -> str:
    return encode_json(rows)


def iso_text(cache: dict[datetime, str], moment: datetime) -> str:
    """`moment` in ISO 8601, remembered in `cache`: the rows of one batch mostly share a
    few instants, and writing one out costs more than looking it up."""
    text = cache.get(moment)
    if text is None:
        text = cache[moment] = moment.isoformat()
    return text
