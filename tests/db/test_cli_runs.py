"""`sundial submit / cancel / retry / show` as a person uses them."""

from __future__ import annotations

import json
from pathlib import Path

import psycopg
import pytest
from psycopg.rows import dict_row

from app.handlers.jobs import Outcome, OutcomeStatus
from app.runs import transitions
from tests.helpers.commands import run_sundial
from tests.helpers.processes import run_row


def test_submit_prints_the_run_id_and_stores_every_option(db_url: str) -> None:
    result = run_sundial(
        db_url,
        "submit", "sleep", "--args", '{"seconds": 1}', "--delay", "60", "--priority", "7",
        "--idempotency-key", "nightly-1", "--timeout", "30", "--max-retries", "5",
        "--execution-model", "thread",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    row = run_row(db_url, int(result.stdout.strip()))
    assert row["handler"] == "sleep" and row["args"] == {"seconds": 1}
    assert (row["priority"], row["timeout_seconds"], row["max_retries"]) == (7, 30, 5)
    assert (row["execution_model"], row["idempotency_key"]) == ("thread", "nightly-1")
    assert (row["run_at"] - row["created_at"]).total_seconds() >= 59


def test_same_key_same_payload_prints_the_same_id(db_url: str) -> None:
    first = run_sundial(db_url, "submit", "noop", "--idempotency-key", "k")
    second = run_sundial(db_url, "submit", "noop", "--idempotency-key", "k")
    assert first.stdout == second.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["noop", "--args", "{not json"], "--args is not valid JSON"),
        (["noop", "--args", "[1, 2]"], "--args must be a JSON object"),
        (["noop", "--at", "tomorrow"], "--at must be an ISO 8601 time"),
        (["noop", "--at", "2030-01-01T09:00"], "--at needs a time zone"),
        (["noop", "--timeout", "0"], "the timeout must be between 1 and"),
        (["noop", "--delay", "-1"], "the delay must be between 0 and"),
    ],
)
def test_bad_submit_input_is_one_sentence_and_exit_code_2(
    db_url: str, args: list[str], message: str
) -> None:
    result = run_sundial(db_url, "submit", *args)
    assert result.returncode == 2
    assert message in result.stderr
    assert "Traceback" not in result.stderr
    assert run_sundial(db_url, "show", "1").returncode == 2  # nothing was written


def test_reused_key_with_other_payload_is_refused(db_url: str) -> None:
    run_sundial(db_url, "submit", "noop", "--idempotency-key", "k", "--args", '{"a": 1}')
    result = run_sundial(db_url, "submit", "noop", "--idempotency-key", "k", "--args", '{"a": 2}')
    assert result.returncode == 2
    assert "already belongs to run" in result.stderr


def test_cancel_retry_and_show(db_url: str) -> None:
    run_id = run_sundial(db_url, "submit", "noop", "--delay", "3600").stdout.strip()
    cancelled = run_sundial(db_url, "cancel", run_id)
    assert cancelled.returncode == 0 and "cancelled" in cancelled.stdout
    again = run_sundial(db_url, "cancel", run_id)
    assert again.returncode == 2 and "already ended cancelled" in again.stderr
    retried = run_sundial(db_url, "retry", run_id)
    assert retried.returncode == 0 and "queued again" in retried.stdout
    shown = run_sundial(db_url, "show", run_id)
    assert json.loads(shown.stdout)["status"] == "pending"
    missing = run_sundial(db_url, "show", "999999")
    assert missing.returncode == 2 and "there is no run 999999" in missing.stderr


def test_submit_after_makes_a_blocked_run(db_url: str) -> None:
    first = run_sundial(db_url, "submit", "noop", "--delay", "3600").stdout.strip()
    second = run_sundial(db_url, "submit", "noop", "--after", first).stdout.strip()
    assert run_row(db_url, int(second))["status"] == "blocked"
    missing = run_sundial(db_url, "submit", "noop", "--after", "424242")
    assert missing.returncode == 2 and "no such run" in missing.stderr


def test_dag_submit_show_and_cancel(db_url: str, tmp_path: Path) -> None:
    doc = {
        "nodes": {
            "extract": {"handler": "noop"},
            "t1": {"handler": "sleep", "args": {"seconds": 1}, "after": ["extract"]},
            "t2": {"handler": "sleep", "args": {"seconds": 1}, "after": ["extract"]},
            "load": {"handler": "noop", "execution_model": "thread"},
        },
        "edges": [["t1", "load"], ["t2", "load"]],
    }
    path = tmp_path / "dag.json"
    path.write_text(json.dumps(doc))
    submitted = run_sundial(db_url, "dag", "submit", str(path))
    assert submitted.returncode == 0, submitted.stderr
    out = json.loads(submitted.stdout)
    assert set(out["runs"]) == {"extract", "t1", "t2", "load"}
    assert run_row(db_url, out["runs"]["load"])["upstream_remaining"] == 2
    shown = json.loads(run_sundial(db_url, "dag", "show", out["dag_run_id"]).stdout)
    assert [r["status"] for r in shown] == ["pending", "blocked", "blocked", "blocked"]
    cancelled = run_sundial(db_url, "dag", "cancel", out["dag_run_id"])
    assert "4 runs cancelled" in cancelled.stdout


def test_retry_of_a_failed_dag_step_says_what_waits_for_it_again(
    db_url: str, tmp_path: Path
) -> None:
    doc = {"nodes": {"extract": {"handler": "noop", "max_retries": 0},
                     "t1": {"handler": "noop", "after": ["extract"]},
                     "load": {"handler": "noop", "after": ["t1"]}}}  # fmt: skip
    path = tmp_path / "dag.json"
    path.write_text(json.dumps(doc))
    out = json.loads(run_sundial(db_url, "dag", "submit", str(path)).stdout)
    with psycopg.connect(db_url, autocommit=True, row_factory=dict_row) as conn:
        (job,) = transitions.claim(conn, "w", 1, 30)
        failure = Outcome(OutcomeStatus.FAILED, error="boom", retryable=False)
        transitions.finish_many(conn, "w", [transitions.Finish(job.run_id, job.attempt, failure)])
    assert run_row(db_url, out["runs"]["load"])["status"] == "skipped"
    retried = run_sundial(db_url, "retry", str(out["runs"]["extract"]))
    assert retried.returncode == 0, retried.stderr
    assert retried.stdout.strip() == (
        f"run {out['runs']['extract']} queued again; 2 skipped downstream step(s) wait for it again"
    )
    assert run_row(db_url, out["runs"]["load"])["status"] == "blocked"


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        (
            {
                "nodes": {
                    "a": {"handler": "noop", "after": ["b"]},
                    "b": {"handler": "noop", "after": ["a"]},
                }
            },
            "cycle",
        ),
        ({"nodes": {"a": {"handler": "noop"}}, "edges": [["a", "zz"]]}, "unknown node 'zz'"),
        (
            {"nodes": {"a": {"handler": "noop", "timeout": "soon"}}},
            '"timeout" must be a whole number',
        ),
        ({"nodes": {"a": {"handler": "noop", "colour": "red"}}}, "unknown key 'colour'"),
        ({"nodes": {}}, '"nodes" must be a non-empty object'),
        ([1, 2], "must be a JSON object"),
    ],
)
def test_bad_dag_documents_are_refused_with_a_sentence(
    db_url: str, tmp_path: Path, doc: object, message: str
) -> None:
    path = tmp_path / "dag.json"
    path.write_text(json.dumps(doc))
    result = run_sundial(db_url, "dag", "submit", str(path))
    assert result.returncode == 2
    assert message in result.stderr
    assert "Traceback" not in result.stderr
