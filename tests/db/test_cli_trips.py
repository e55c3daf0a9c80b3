"""Small trips of the `sundial` command: --limit says its bounds and refuses values past
them; submitting to a handler no live worker knows warns, and --strict refuses. Real
processes, real database."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.commands import run_sundial
from tests.helpers.processes import query, services
from tests.helpers.waits import wait_until

LIMITS = {
    ("runs", "list"): "(1-500, default 50)",
    ("schedule", "fires", "nightly"): "(1-10,000, default 50)",
}


@pytest.mark.parametrize("words", list(LIMITS))
def test_limit_options_say_their_bounds_in_help(words: tuple[str, ...]) -> None:
    result = run_sundial(None, *words[: 2 if words[0] == "schedule" else 1], "--help")
    assert result.returncode == 0
    assert LIMITS[words] in " ".join(result.stdout.split())


@pytest.mark.parametrize("words", list(LIMITS))
@pytest.mark.parametrize(
    ("value", "sentence"),
    [
        ("0", "must be between 1 and"),
        ("10001", "must be between 1 and"),
        ("-3", "must be between 1 and"),
        ("ten", "must be a whole number, got 'ten'"),
        ("\u0663", "must be a whole number"),  # an Arabic-Indic three
        ("1e3", "must be a whole number"),
    ],
)
def test_limit_options_refuse_values_past_their_bounds(
    db_url: str, words: tuple[str, ...], value: str, sentence: str
) -> None:
    result = run_sundial(db_url, *words, "--limit", value)
    assert result.returncode == 2, result.stderr
    assert f"argument --limit: {sentence}" in result.stderr
    assert "Traceback" not in result.stderr


def submitted_runs(db_url: str, handler: str) -> int:
    rows = query(db_url, "SELECT count(*) AS n FROM job_runs WHERE handler = %s", handler)
    return int(rows[0]["n"])


def test_submitting_with_no_worker_running_warns_and_strict_refuses(db_url: str) -> None:
    warned = run_sundial(db_url, "submit", "echo")
    assert warned.returncode == 0, warned.stderr
    assert "sundial submit: warning: no worker is running" in warned.stderr
    assert submitted_runs(db_url, "echo") == 1  # still submitted: it waits for a worker
    refused = run_sundial(db_url, "submit", "echo", "--strict")
    assert refused.returncode == 2
    assert "nothing submitted (--strict)" in refused.stderr
    assert submitted_runs(db_url, "echo") == 1


def test_submitting_to_a_handler_no_live_worker_knows(db_url: str, tmp_path: Path) -> None:
    with services(db_url, tmp_path) as start:
        worker = start("worker")
        wait_until(
            lambda: query(db_url, "SELECT 1 FROM workers WHERE stopped_at IS NULL"),
            "the worker's registration",
            60,
            worker,
        )
        known = run_sundial(db_url, "submit", "echo", "--strict")
        assert known.returncode == 0, known.stderr
        assert known.stderr == ""
        unknown = run_sundial(db_url, "submit", "ehco")
        assert unknown.returncode == 0, unknown.stderr
        assert "warning: no live worker knows handler 'ehco'" in unknown.stderr
        assert "echo" in unknown.stderr  # what they do know, to spot the typo
        refused = run_sundial(db_url, "submit", "ehco", "--strict")
        assert refused.returncode == 2
        assert "no live worker knows handler 'ehco'" in refused.stderr
        assert submitted_runs(db_url, "ehco") == 1
