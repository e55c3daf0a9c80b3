"""/metrics after a scripted workload, with a worker SIGKILLed mid-run: the figures agree
with the database (counts by status, exactly one lease expiry the reaper re-queued)."""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from tests.helpers.api_client import make_token, request
from tests.helpers.commands import REPO
from tests.helpers.processes import query, run_row, services
from tests.helpers.waits import wait_until


def scrape(base: str, token: str) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    """Samples by name, then by their sorted labels."""
    answer = request(base, "GET", "/metrics", token)
    assert answer.status == 200, answer.body
    samples: dict[str, dict[tuple[tuple[str, str], ...], float]] = defaultdict(dict)
    for family in text_string_to_metric_families(answer.body):
        for sample in family.samples:
            samples[sample.name][tuple(sorted(sample.labels.items()))] = sample.value
    return samples


def database_figures(db_url: str) -> dict[str, Any]:
    finished = query(db_url, "SELECT handler, status, count(*) AS n FROM job_runs "
                     "WHERE finished_at IS NOT NULL GROUP BY 1, 2")  # fmt: skip
    pending = query(db_url, "SELECT priority, count(*) AS n FROM job_runs "
                    "WHERE status = 'pending' GROUP BY 1")  # fmt: skip
    lost = query(db_url, "SELECT count(*) AS n FROM job_run_attempts WHERE outcome = 'lost'")
    completed = query(db_url, "SELECT attempt FROM job_runs WHERE status = 'completed'")
    return {
        "finished": {(("job", r["handler"]), ("status", r["status"])): r["n"] for r in finished},
        "pending": {(("priority", str(r["priority"])),): r["n"] for r in pending},
        "lost": lost[0]["n"],
        "completed_attempts": sorted(r["attempt"] for r in completed),
    }


def test_metrics_match_the_database_after_a_worker_is_killed_mid_run(
    live_server: str, db_url: str, tmp_path: Path
) -> None:
    token = make_token(db_url, "operator", "write")

    def submit(body: dict[str, Any]) -> int:
        answer = request(live_server, "POST", "/api/v1/runs", token, body)
        assert answer.status == 201, answer.body
        return int(answer.body["run"]["id"])

    quick = [submit({"handler": "echo", "args": {"n": n}}) for n in range(5)]
    long_run = submit({"handler": "step", "args": {"name": "long", "sleep": 3}})
    later = [submit({"handler": "echo", "delay_seconds": 3600, "priority": p}) for p in (1, 5, 5)]
    assert request(live_server, "POST", f"/api/v1/runs/{later[0]}/cancel", token).status == 200

    with services(db_url, tmp_path) as start:
        first = start("worker")
        wait_until(
            lambda: (
                all(run_row(db_url, r)["status"] == "completed" for r in quick)
                and run_row(db_url, long_run)["status"] == "running"
            ),
            "quick runs done and the long one running",
            30,
            first,
        )
        first.kill()  # SIGKILL: no hand-back, the lease simply stops being renewed
        reaper = start("reaper")
        wait_until(
            lambda: run_row(db_url, long_run)["status"] == "pending", "the re-queue", 30, reaper
        )
        second = start("worker")
        wait_until(
            lambda: run_row(db_url, long_run)["status"] == "completed", "the rerun", 30, second
        )

        expected = database_figures(db_url)
        assert expected["lost"] == 1
        assert expected["completed_attempts"] == [1, 1, 1, 1, 1, 2]

        def fresh() -> Any:
            got = scrape(live_server, token)
            done = got["sundial_attempts_per_completed_run_count"] == {(): 6.0}
            return got if done else None

        # One reading is served for a few seconds: wait for one taken after the workload.
        got = wait_until(fresh, "a reading of /metrics taken after the workload", 30)
        assert got["sundial_runs_finished_recent"] == expected["finished"]
        assert got["sundial_pending_runs"] == expected["pending"]
        assert got["sundial_lease_expiries_total"] == {(): 1.0}
        assert got["sundial_reaper_requeues_total"] == {(): 1.0}
        assert got["sundial_attempts_per_completed_run_bucket"][(("le", "1.0"),)] == 5.0
        assert got["sundial_schedule_lag_seconds_count"] == {(): 6.0}
        assert got["sundial_active_runs"] == {
            (("status", "running"),): 0.0, (("status", "blocked"),): 0.0}  # fmt: skip
        assert got["sundial_oldest_due_run_age_seconds"] == {(): 0.0}
        workers = {labels for labels in got["sundial_worker_loop_lag_seconds"]}
        assert (("worker", second_id(db_url)),) in workers


def test_dead_man_alerts_count_schedules_whose_expected_fire_made_no_run(
    live_server: str, db_url: str
) -> None:
    token = make_token(db_url, "editor", "write")
    for name in ("hourly", "daily"):
        made = request(live_server, "POST", "/api/v1/schedules", token,
                       {"name": name, "cron": "0 * * * *", "handler": "noop"})  # fmt: skip
        assert made.status == 201, made.body

    def firing() -> float | None:
        return scrape(live_server, token)["sundial_dead_man_alerts_firing"].get(())

    assert wait_until(lambda: firing() == 0.0, "a reading with no alert", 30)
    # No trigger runs in this test: a schedule whose next fire is well past is overdue,
    # which the Lag SLO page reports as a missing fire.
    query(db_url, "UPDATE schedules SET next_fire_time = now() - interval '2 hours' "
          "WHERE name = 'hourly' RETURNING id")  # fmt: skip
    assert wait_until(lambda: firing() == 1.0, "a reading with the overdue schedule", 30)


def test_the_grafana_dashboard_reads_only_metrics_sundial_exposes(
    live_server: str, db_url: str
) -> None:
    exposed = request(live_server, "GET", "/metrics", make_token(db_url, "viewer", "read")).body
    dashboard = (REPO / "static" / "grafana" / "sundial-dashboard.json").read_text()
    used = set(re.findall(r"sundial_[a-z_]+", dashboard)) - {"sundial"}
    assert used
    declared = set(re.findall(r"^# TYPE (\S+) ", exposed, re.MULTILINE))
    missing = [n for n in sorted(used) if n not in declared and _family(n) not in declared]
    assert missing == []


def _family(sample: str) -> str:
    """The family a sample belongs to (# TYPE lines name families, without suffixes)."""
    for suffix in ("_bucket", "_sum", "_count", "_total"):
        if sample.endswith(suffix):
            return sample.removesuffix(suffix)
    return sample


def second_id(db_url: str) -> str:
    """The id of the worker that is still alive (the most recently started)."""
    (row,) = query(db_url, "SELECT id FROM workers ORDER BY started_at DESC LIMIT 1")
    return str(row["id"])
