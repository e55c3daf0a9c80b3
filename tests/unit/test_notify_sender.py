"""What the delivery log says when a send fails: Apprise's sentence, never a piece of the
secret address."""

from __future__ import annotations

from app.notify import sender

URL = "json://bot:hunter22@127.0.0.1:9/hooks/SECRETPATH?-token=SECRETQUERY"


def test_a_failed_send_says_why_in_a_sentence() -> None:
    said = sender.send("json://127.0.0.1:9/hooks", "title", "body", "1")
    assert said == "A Connection error occurred sending JSON notification to 127.0.0.1."


def test_pieces_of_the_address_are_blanked_from_what_is_shown() -> None:
    line = f"refused {URL} (SECRETPATH, token SECRETQUERY, password hunter22)"
    shown = sender._words(line, URL)
    for secret in ("SECRETPATH", "SECRETQUERY", "hunter22"):
        assert secret not in shown
    assert shown.startswith("refused json://")
