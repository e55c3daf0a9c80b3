"""The run state machine is written down once: enum, transitions table, SQL, one module."""

from __future__ import annotations

import re
from pathlib import Path

from app.sql import load
from app.states import TRANSITIONS, RunStatus

APP = Path(__file__).resolve().parent.parent.parent / "app"


def test_transition_table_only_names_known_states() -> None:
    states = set(RunStatus)
    for name, (sources, targets) in TRANSITIONS.items():
        assert sources <= states and targets <= states, name
        assert targets, f"{name} leads nowhere"


def test_every_status_written_in_sql_is_a_known_state() -> None:
    for file in ("runs.sql", "run_inserts.sql"):
        text = (APP / "sql" / file).read_text()
        written = set(re.findall(r"'([a-z_]+)'", text)) - {"sundial_runs", ""}
        outcomes = {"completed", "failed", "timed_out", "cancelled", "lost", "released"}
        other_literals = {"upstream_failed"}
        assert written - outcomes - other_literals <= {s.value for s in RunStatus}, file


def test_every_run_statement_belongs_to_a_named_transition() -> None:
    # reads, and writes that change no status
    reads = {"run_find_by_keys", "run_held_check", "run_lock_upstreams", "run_join_dag"}
    reads |= {"run_lock_skipped_downstream"}
    reads |= {"run_dag_edges"}
    for name in load("runs"):
        if name in reads:
            continue
        base = re.sub(r"_(many|fires|downstream|dag|staged)$", "", name)
        assert base in TRANSITIONS or name == "run_age_priorities", name


def test_no_module_but_the_state_module_writes_a_run_status() -> None:
    offenders = []
    for path in APP.rglob("*.py"):
        text = path.read_text()
        if re.search(r"UPDATE\s+job_runs", text, re.IGNORECASE) or re.search(
            r"INSERT\s+INTO\s+job_runs\b", text, re.IGNORECASE
        ):
            offenders.append(str(path.relative_to(APP)))
    for path in (APP / "sql").glob("*.sql"):
        if path.name != "runs.sql" and re.search(r"UPDATE\s+job_runs", path.read_text(), re.I):
            offenders.append(str(path.relative_to(APP)))
    assert offenders == []


# Inserting a new run is not a transition of an existing one: `app.run_inserts` sends the
# rows (COPY staging, pipelined JSON batches) whose first status `app.runs` chose. So the
# insert statements live in their own file, only that module runs them, and none of them
# may change the status of a run already there.
def test_new_runs_are_inserted_without_touching_existing_runs() -> None:
    for name, statement in load("run_inserts").items():
        assert not re.search(r"UPDATE\s+job_runs|DO\s+UPDATE", statement, re.I), name


def test_only_the_state_module_and_the_insert_module_run_their_statements() -> None:
    owners = {"runs": {"runs.py"}, "run_inserts": {"run_inserts.py"}}
    for path in APP.rglob("*.py"):
        text = path.read_text()
        for file, modules in owners.items():
            if re.search(rf"query\(\s*\"{file}\"", text):
                assert str(path.relative_to(APP)) in modules, (path, file)


def test_every_time_dependent_run_statement_takes_now() -> None:
    # `coalesce(%(now)s, now())` everywhere a statement reads the clock, so a test moves
    # time by passing `now` instead of sleeping.
    for file in ("runs", "run_inserts"):
        for name, statement in load(file).items():
            code = "\n".join(
                line for line in statement.splitlines() if not line.lstrip().startswith("--")
            )
            bare = code.replace("coalesce(%(now)s::timestamptz, now())", "")
            assert "now()" not in bare, f"{file}.sql {name} reads the clock without %(now)s"
