"""A real worker publishes the args schema its handlers declare, and job definitions are
checked against it (the same rule for the CLI, the API and the dashboard)."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest
from psycopg.rows import dict_row

from app.catalog import job_definitions
from app.catalog.job_definitions import JobError, JobSpec
from app.scheduling import schedules
from app.scheduling.schedule_spec import ScheduleError, ScheduleSpec
from tests.helpers.processes import query, services, wait_until
from tests.helpers.worker_handlers import ReportArgs


def test_a_worker_registers_the_schema_of_a_handler_declaring_a_pydantic_model(
    db_url: str, tmp_path: Path
) -> None:
    with services(db_url, tmp_path) as start:
        worker = start("worker")
        wait_until(lambda: query(db_url, "SELECT 1 FROM workers"), "worker registered", 60, worker)
        row = query(db_url, "SELECT handlers, handler_args FROM workers")[0]
        assert "send_report_args" in row["handlers"]
        assert row["handler_args"] == {"send_report_args": ReportArgs.model_json_schema()}
        # in declared order: the form shows the fields in it
        assert list(row["handler_args"]["send_report_args"]["properties"]) == ["email", "retries"]

        with psycopg.connect(db_url, autocommit=True, row_factory=dict_row) as conn:
            spec = JobSpec(name="weekly", handler="send_report_args", args={"retries": "three"})
            with pytest.raises(JobError) as caught:
                job_definitions.create(conn, spec, actor="cli")
            assert str(caught.value) == "email is required"
            assert caught.value.field == "args.email"
            with pytest.raises(JobError, match=r"^retries must be a whole number$"):
                args = {"email": "a", "retries": "x"}
                job_definitions.create(
                    conn, JobSpec(name="weekly", handler="send_report_args", args=args), actor="cli"
                )
            assert query(db_url, "SELECT count(*) AS n FROM job_definitions")[0]["n"] == 0
            args = {"email": "ops@example.com"}
            job_definitions.create(
                conn, JobSpec(name="weekly", handler="send_report_args", args=args), actor="cli"
            )
            with pytest.raises(JobError, match=r"^email is required$"):
                job_definitions.update(
                    conn,
                    "weekly",
                    JobSpec(name="weekly", handler="send_report_args", args={}),
                    actor="cli",
                )
            assert query(db_url, "SELECT args FROM job_definitions")[0]["args"] == {
                "email": "ops@example.com"
            }
            # a schedule that makes its own job (`--handler`) meets the same rule
            own_job = ScheduleSpec(name="hourly", cron="0 * * * *", handler="send_report_args")
            with pytest.raises(ScheduleError, match=r"^args: email is required$"):
                schedules.create_schedule(conn, own_job)
            assert query(db_url, "SELECT count(*) AS n FROM schedules")[0]["n"] == 0
