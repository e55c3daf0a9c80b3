"""`sundial job add|update --dependency` against a real database: a job names the services
its runs call, `update` replaces them keeping the job's other settings (audited), and a
refusal exits 2 with one sentence."""

from __future__ import annotations

from typing import Any

import psycopg

from app.catalog import job_definitions
from tests.helpers.commands import run_sundial

Conn = psycopg.Connection[Any]


def test_the_cli_names_and_replaces_the_services_a_job_calls(db_url: str, conn: Conn) -> None:
    added = run_sundial(db_url, "job", "add", "charge", "--handler", "noop", "--priority", "4",
                        "--dependency", "payments-api", "--dependency", "ledger")  # fmt: skip
    assert added.returncode == 0, added.stderr
    assert "calls=payments-api,ledger" in run_sundial(db_url, "job", "list").stdout

    updated = run_sundial(db_url, "job", "update", "charge", "--dependency", "mail")
    assert updated.returncode == 0, updated.stderr
    assert updated.stdout.strip() == "job 'charge' updated: its runs call mail"
    job = job_definitions.get(conn, "charge")
    assert (job["dependencies"], job["priority"], job["handler"]) == (["mail"], 4, "noop")

    cleared = run_sundial(db_url, "job", "update", "charge", "--no-dependencies")
    assert cleared.stdout.strip() == "job 'charge' updated: its runs call no service"
    assert job_definitions.get(conn, "charge")["dependencies"] == []
    audited = conn.execute("SELECT details FROM audit_log WHERE action = 'job.update' "
                           "ORDER BY id").fetchall()  # fmt: skip
    assert [r["details"]["after"]["dependencies"] for r in audited] == [["mail"], []]

    for args, message in [
        (["update", "charge"], "job update needs --dependency SERVICE or --no-dependencies"),
        (["update", "nope", "--dependency", "mail"], "there is no job named 'nope'"),
        (["update", "charge", "--dependency", " "], "a dependency's name cannot be empty"),
        (["add", "x", "--handler", "noop", *[a for n in range(21)
                                              for a in ("--dependency", f"s{n}")]],
         "a job may name at most 20 dependencies"),
    ]:  # fmt: skip
        refused = run_sundial(db_url, "job", *args)
        assert refused.returncode == 2 and message in refused.stderr, (args, refused.stderr)
        assert len(refused.stderr.strip().splitlines()) == 1, refused.stderr
