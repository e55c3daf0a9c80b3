"""`sundial createuser` and `sundial job delete` through the real command."""

from __future__ import annotations

import subprocess

import psycopg
from psycopg.rows import dict_row

from app.people.users import sign_in
from tests.helpers.commands import REPO, run_sundial, sundial_cmd, sundial_env
from tests.helpers.processes import query


def test_createuser_reads_the_password_from_stdin_and_audits_it(db_url: str) -> None:
    done = subprocess.run(
        sundial_cmd("createuser", "alice", "--role", "operator", "--password-stdin"),
        input="a long passphrase\n", env=sundial_env(db_url), capture_output=True, text=True,
        cwd=REPO, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "user 'alice' created with role operator" in done.stdout
    with psycopg.connect(db_url, autocommit=True, row_factory=dict_row) as conn:
        user = sign_in(conn, "alice", "a long passphrase", address="test")
    assert user is not None and user.role.value == "operator"
    (entry,) = query(db_url, "SELECT actor, action, target_id FROM audit_log")
    assert entry["action"] == "user.create" and entry["actor"].startswith("cli")


def test_createuser_refuses_a_short_password_and_a_taken_name(db_url: str) -> None:
    def create(password: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            sundial_cmd("createuser", "bob", "--role", "viewer", "--password-stdin"),
            input=password + "\n", env=sundial_env(db_url), capture_output=True, text=True,
            cwd=REPO, timeout=120,
        )  # fmt: skip

    short = create("short")
    assert short.returncode == 2
    assert "sundial createuser: error: the password must have at least 8" in short.stderr
    assert create("long enough").returncode == 0
    taken = create("long enough")
    assert taken.returncode == 2 and "a user named 'bob' already exists" in taken.stderr


def test_job_delete_names_the_schedules_and_takes_them_only_when_asked(db_url: str) -> None:
    assert run_sundial(db_url, "job", "add", "report", "--handler", "noop").returncode == 0
    for name in ("night", "noon"):
        added = run_sundial(
            db_url, "schedule", "add", name, "--cron", "0 2 * * *", "--job", "report"
        )
        assert added.returncode == 0, added.stderr
    refused = run_sundial(db_url, "job", "delete", "report")
    assert refused.returncode == 2
    assert "schedules 'night', 'noon' run it" in refused.stderr
    assert "--with-schedules" in refused.stderr
    assert len(query(db_url, "SELECT 1 FROM schedules")) == 2
    done = run_sundial(db_url, "job", "delete", "report", "--with-schedules")
    assert done.returncode == 0, done.stderr
    assert "job 'report' deleted with schedule(s) night, noon" in done.stdout
    assert query(db_url, "SELECT 1 FROM schedules") == []
    actions = [r["action"] for r in query(db_url, "SELECT action FROM audit_log ORDER BY id")]
    assert actions == [
        "job.create", "schedule.create", "schedule.create",
        "schedule.delete", "schedule.delete", "job.delete",
    ]  # fmt: skip
