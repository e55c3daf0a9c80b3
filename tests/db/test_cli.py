"""The `sundial` command as a person runs it: real processes, real database."""

import signal
import subprocess
import time

import psycopg
import pytest

from tests.helpers.commands import REPO, run_sundial, sundial_cmd, sundial_env
from tests.helpers.waits import wait_until


def test_help_lists_every_command() -> None:
    result = run_sundial(None, "--help")
    assert result.returncode == 0
    for command in ("migrate", "web", "worker", "trigger", "reaper", "dev"):
        assert command in result.stdout


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("mysql://root@127.0.0.1/app", "must be a PostgreSQL URL"),
        ("nonsense", "must look like postgresql://"),
    ],
)
@pytest.mark.parametrize("command", ["migrate", "worker", "trigger", "reaper", "web"])
def test_bad_database_url_is_one_clear_sentence(command: str, url: str, expected: str) -> None:
    _assert_one_sentence(command, url, expected)


# The worker, trigger and reaper wait for a database that does not answer yet: see
# test_services_wait_for_database.py.
@pytest.mark.parametrize("command", ["migrate", "web"])
def test_an_unreachable_database_is_one_clear_sentence(command: str) -> None:
    url = "postgresql://nobody@127.0.0.1:1/nothing"
    _assert_one_sentence(command, url, "cannot reach the database 'nothing'")


def _assert_one_sentence(command: str, url: str, expected: str) -> None:
    result = run_sundial(None, command, DATABASE_URL=url)
    assert result.returncode != 0
    assert expected in result.stderr
    assert "Traceback" not in result.stderr
    assert result.stderr.startswith(f"sundial {command}: error:")


def test_bad_setting_is_a_usage_error(db_url: str) -> None:
    result = run_sundial(db_url, "worker", SUNDIAL_LEASE_SECONDS="soon")
    assert result.returncode == 2
    assert "SUNDIAL_LEASE_SECONDS must be a number of seconds" in result.stderr


def test_migrate_twice_is_a_no_op_the_second_time(empty_db_url: str) -> None:
    first = run_sundial(empty_db_url, "migrate")
    assert first.returncode == 0, first.stderr
    assert "migrated database from empty to revision" in first.stdout
    second = run_sundial(empty_db_url, "migrate")
    assert second.returncode == 0, second.stderr
    assert "database is up to date" in second.stdout


@pytest.mark.parametrize("service", ["worker", "trigger", "reaper"])
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_service_starts_connects_and_stops_cleanly(
    db_url: str, service: str, sig: signal.Signals
) -> None:
    proc = subprocess.Popen(
        sundial_cmd(service),
        env=sundial_env(db_url),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=REPO,
    )
    assert proc.stdout is not None
    started = f"{service} started"
    deadline = time.monotonic() + 20
    lines: list[str] = []
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        lines.append(line)
        if started in line or not line:
            break
    assert any(started in line for line in lines), "".join(lines)
    if service == "worker":
        _wait_for_worker_row(db_url)
    proc.send_signal(sig)
    out, _ = proc.communicate(timeout=20)
    assert proc.returncode == 0, out
    assert f"{service} stopped" in out
    assert "Traceback" not in out


def _wait_for_worker_row(db_url: str) -> None:
    with psycopg.connect(db_url, autocommit=True) as conn:
        wait_until(
            lambda: conn.execute("SELECT host, pid FROM workers").fetchone(),
            "the worker to register itself",
        )


@pytest.mark.parametrize("service", ["worker", "trigger", "reaper", "web"])
def test_services_refuse_an_unmigrated_database(empty_db_url: str, service: str) -> None:
    result = run_sundial(empty_db_url, service)
    assert result.returncode == 2
    assert "run `sundial migrate` first" in result.stderr
    assert "Traceback" not in result.stderr
