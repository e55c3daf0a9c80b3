"""One error shape: a refusal names the input it concerns where it is raised, and pages put
it next to that field through one helper, never by reading the message's words."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from app.core.errors import Missing, UsageError, about
from app.web.forms import field_errors

WEB = Path(__file__).resolve().parents[2] / "app" / "web"


def test_about_names_the_field_of_an_error_that_names_none() -> None:
    with pytest.raises(UsageError) as caught, about("timezone"):
        raise UsageError("unknown time zone 'Mars/Olympus'")
    assert caught.value.field == "timezone"


def test_about_keeps_a_field_already_named() -> None:
    with pytest.raises(Missing) as caught, about("job"), about("name"):
        raise Missing("there is no workflow named 'x'", "workflow")
    assert caught.value.field == "workflow"


def test_field_errors_put_the_message_by_its_field_or_above_the_form() -> None:
    assert field_errors(UsageError("bad", "cron")) == {"cron": "bad"}
    assert field_errors(UsageError("bad")) == {"form": "bad"}
    assert field_errors(UsageError("bad"), whole_form="note") == {"note": "bad"}
    renamed = field_errors(UsageError("bad", "every_seconds"), {"every_seconds": "every"}.get)
    assert renamed == {"every": "bad"}


def test_no_page_guesses_a_field_from_the_words_of_a_message() -> None:
    guesses = [
        f"{path.name}:{text[: m.start()].count(chr(10)) + 1}"
        for path in sorted(WEB.rglob("*.py"))
        for text in [path.read_text()]
        for m in re.finditer(r"in str\(exc\)|in message\b|exc\.field or ", text)
    ]
    assert guesses == []
