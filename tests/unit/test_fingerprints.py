"""Error fingerprints: what varies between runs is blanked out, what tells failures apart
is kept."""

from __future__ import annotations

from app.runs.fingerprints import LEASE_EXPIRED, fingerprint_of, normalise, top_frame

TRACEBACK = """Traceback (most recent call last):
  File "/srv/app/worker.py", line 10, in main
    charge(order)
  File "/srv/app/billing.py", line {line}, in charge
    raise PaymentDeclined(f"card for order {{order}} declined")
billing.PaymentDeclined: card for order 42 declined
"""


def test_numbers_ids_hex_times_and_quoted_values_become_placeholders() -> None:
    assert normalise("KeyError: 'user 42'") == "KeyError: <str>"
    assert normalise('ValueError: no such invoice "INV-9"') == "ValueError: no such invoice <str>"
    assert normalise("order 7f3e2a1c-1111-2222-3333-444455556666 lost") == "order <id> lost"
    assert normalise("object at 0x7f3e2a1c in state 3") == "object at <id> in state <id>"
    assert normalise("commit 3f2a9c1b4e5d6f70 missing") == "commit <id> missing"
    assert normalise("due 2026-12-01T05:00:01Z, waited 2.5 s") == "due <time>, waited <id> s"
    assert normalise("HTTP 503 from api2.example.com") == "HTTP <id> from api2.example.com"
    assert normalise("utf8 and sha256 stay, v2 too") == "utf8 and sha256 stay, v2 too"


def test_every_kind_of_generated_id_groups_alike() -> None:
    ids = [
        "42",
        "1234567890123",
        "7f3e2a1c-1111-2222-3333-444455556666",
        "3f2a9c1b4e5d6f70",
        "0x7f3e2a1c",
        "a1b2c3d4e5",
        "ord_8f3k2j",
        "user-12345",
        "INV2026000123",
    ]
    keys = {fingerprint_of(f"LookupError: order {i} not found", None).key for i in ids}
    assert len(keys) == 1
    assert fingerprint_of("LookupError: order 42 not found", None).message == (
        "LookupError: order <id> not found"
    )


def test_only_the_first_line_counts_and_whitespace_is_squeezed() -> None:
    assert normalise("  RuntimeError:   boom\n  detail 1\n") == "RuntimeError: boom"
    assert normalise("") == ""


def test_the_top_frame_is_the_innermost_without_its_line_number() -> None:
    assert top_frame(TRACEBACK.format(line=7)) == "/srv/app/billing.py:charge"
    assert top_frame(None) == top_frame("no frames here") == ""


def test_same_failure_with_other_values_shares_a_fingerprint() -> None:
    a = fingerprint_of("PaymentDeclined: card for order 42 declined", TRACEBACK.format(line=7))
    b = fingerprint_of("PaymentDeclined: card for order 977 declined", TRACEBACK.format(line=9))
    assert a == b
    assert (a.exception, a.message) == (
        "PaymentDeclined",
        "PaymentDeclined: card for order <id> declined",
    )
    assert len(a.key) == 16


def test_class_message_and_frame_each_tell_failures_apart() -> None:
    base = fingerprint_of("ValueError: bad row 3", TRACEBACK.format(line=7)).key
    assert fingerprint_of("TypeError: bad row 3", TRACEBACK.format(line=7)).key != base
    assert fingerprint_of("ValueError: bad column 3", TRACEBACK.format(line=7)).key != base
    assert fingerprint_of("ValueError: bad row 3", None).key != base


def test_every_expired_lease_is_one_group_whatever_the_worker() -> None:
    one = fingerprint_of(
        "lease expired: worker host:1:ab stopped heartbeating during attempt 2", None
    )
    assert one.key == LEASE_EXPIRED
    assert one.exception == ""
