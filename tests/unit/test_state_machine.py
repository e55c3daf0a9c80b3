"""The run state machine is written down once: enum, transitions table, SQL, one module."""

from __future__ import annotations

import re
from pathlib import Path

from sqlalchemy import CheckConstraint

from app.core.sql import load, sql_in
from app.models import JobRun
from app.runs.states import ACTIVE, TERMINAL, TRANSITIONS, RunStatus

APP = Path(__file__).resolve().parent.parent.parent / "app"


def test_transition_table_only_names_known_states() -> None:
    states = set(RunStatus)
    for name, (sources, targets) in TRANSITIONS.items():
        assert sources <= states and targets <= states, name
        assert targets, f"{name} leads nowhere"


def test_every_status_written_in_sql_is_a_known_state() -> None:
    for file in ("runs.sql", "run_inserts.sql"):
        text = (APP / "core" / "sql" / file).read_text()
        # minus the notification channels and the dashboard's topic (pg_notify arguments)
        written = set(re.findall(r"'([a-z_]+)'", text)) - {
            "sundial_runs",
            "sundial_events",
            "runs",
            "progress",
            "",
        }
        outcomes = {"completed", "failed", "timed_out", "cancelled", "lost", "released", "snoozed"}
        # skip reasons, an execution model, the default queue
        other_literals = {"upstream_failed", "expired", "process", "default"}
        other_literals |= {"attempt", "value", "message"}  # the keys of a progress report
        other_literals |= {"closed"}  # a circuit breaker's state (the claims' breaker check)
        assert written - outcomes - other_literals <= {s.value for s in RunStatus}, file


# Statements of runs.sql that read, or write without changing a status: the submitting
# modules may run these; every other statement there is a transition, run by one module.
NOT_TRANSITIONS = {
    "run_find_by_keys",
    "run_held_check",
    "run_lock_upstreams",
    "run_join_dag",
    "run_lock_skipped_downstream",
    "run_dag_edges",
    "run_limited_running",
    "run_limited_candidates",
    "run_fair_candidates",
}


def test_every_run_statement_belongs_to_a_named_transition() -> None:
    for name in load("runs"):
        if name in NOT_TRANSITIONS:
            continue
        base = re.sub(r"_(many|fires|downstream|dag|staged|limited)$", "", name)
        assert base in TRANSITIONS or name in ("run_age_priorities", "run_mark_begun"), name


def test_no_module_but_the_state_module_writes_a_run_status() -> None:
    offenders = []
    for path in APP.rglob("*.py"):
        text = path.read_text()
        if re.search(r"UPDATE\s+job_runs", text, re.IGNORECASE) or re.search(
            r"INSERT\s+INTO\s+job_runs\b", text, re.IGNORECASE
        ):
            offenders.append(str(path.relative_to(APP)))
    for path in (APP / "core" / "sql").glob("*.sql"):
        if path.name != "runs.sql" and re.search(r"UPDATE\s+job_runs", path.read_text(), re.I):
            offenders.append(str(path.relative_to(APP)))
    assert offenders == []


# ---- the TRANSITIONS table against the SQL that implements it ----------------------------

STATUS_COLUMN = r"\b(?:\w+\.)?status"
QUOTED = re.compile(r"'([a-z_]+)'")


TAGGED_UPDATE = re.compile(r"-- transition: (\w+)\s*\n\s*UPDATE\s+job_runs")


def _transition_statements() -> dict[str, list[str]]:
    """Transition name -> the SQL implementing it (`run_fail_many` is `run_fail`,
    `run_cancel_dag` is `run_cancel`, ...). A statement holding a second UPDATE of
    job_runs names that one's transition (`-- transition: run_unblock` above it); each
    UPDATE is then checked with the text after the one before it."""
    found: dict[str, list[str]] = {}
    statements = {**load("runs"), **load("run_inserts")}
    for name, sql in statements.items():
        base = re.sub(r"_(many|fires|downstream|dag|staged|limited)$", "", name)
        tagged = list(TAGGED_UPDATE.finditer(sql))
        parts = [(base, sql[: tagged[0].start()] if tagged else sql)]
        for i, tag in enumerate(tagged):
            end = tagged[i + 1].start() if i + 1 < len(tagged) else len(sql)
            # what follows the previous UPDATE's RETURNING: the CTEs picking this one's rows
            before = re.split(r"\bRETURNING\b", sql[: tag.start()])[-1]
            parts.append((tag.group(1), before + sql[tag.start() : end]))
        for transition, text in parts:
            if transition in TRANSITIONS:
                found.setdefault(transition, []).append(text)
    return found


def test_a_statement_with_two_updates_names_the_transition_of_the_second() -> None:
    for name, sql in load("runs").items():
        updates = len(re.findall(r"UPDATE\s+job_runs", sql))
        assert max(updates - 1, 0) == len(TAGGED_UPDATE.findall(sql)), name


# A CTE that reads runs beside those an UPDATE changes (`running AS (  -- (read) ...`:
# the runs a claim counts) says nothing of the states that UPDATE changes runs from.
READ_CTE = re.compile(r"\bAS \(\s*-- \(read\)")


def _without_reads(sql: str) -> str:
    """`sql` with the bodies of its CTEs marked `-- (read)` blanked out."""
    code = re.sub(r"--[^\n]*", lambda m: " " * len(m.group()), sql)  # parentheses in comments
    out = list(sql)
    for marker in READ_CTE.finditer(sql):
        start = sql.index("(", marker.start())
        depth = 0
        for end in range(start, len(code)):
            depth += {"(": 1, ")": -1}.get(code[end], 0)
            if depth == 0:
                break
        out[start : end + 1] = " " * (end + 1 - start)
    return "".join(out)


def _update_states(sql: str) -> tuple[set[str], set[str]]:
    """(from, to) of an UPDATE of job_runs as its SQL writes them: the states its WHERE
    clauses accept (the UPDATE's own, and those of the CTE picking its rows), and the
    states its SET clause can write (the same ones when it writes no status)."""
    sql = _without_reads(sql)
    start = re.search(r"UPDATE\s+job_runs", sql).start()  # type: ignore[union-attr]
    update = re.split(r"\bRETURNING\b", sql[start:])[0]
    set_clause, where = update.rsplit("WHERE", 1)
    sources = set()
    condition = STATUS_COLUMN + r"\s*(=\s*'[a-z_]+'|IN\s*\([^)]*\))"
    for match in re.finditer(condition, sql[:start] + where):
        sources |= set(QUOTED.findall(match.group(1)))
    assigned = r"(?<![.\w])\(?status\b"
    written = r"(?:THEN|ELSE|(?<![.\w])status\s*=)\s*'([a-z_]+)'"
    targets = set(re.findall(written, set_clause))
    if not re.search(assigned, set_clause):
        targets = set(sources)
    if re.search(r"ELSE\s+f\.outcome", set_clause):  # the attempt's own outcome
        outcomes = re.search(r"f\.outcome\s+IN\s*\(([^)]*)\)", update)
        assert outcomes, "an outcome written as status must be limited by the WHERE clause"
        targets |= set(QUOTED.findall(outcomes.group(1)))
    return sources, targets


def _insert_states(sql: str) -> set[str]:
    """The states an INSERT creates runs in, as its header declares `(new) -> a | b`; the
    default in the SQL must be one of them."""
    header = re.search(r"^-- \(new\) -> ([^:]*)", sql, re.MULTILINE)
    assert header, "an INSERT of runs declares `(new) -> <states>` in its header"
    declared = {part.split()[0] for part in header.group(1).split("|")}
    literal = re.search(r"coalesce\(\w+\.status, '([a-z_]+)'\)|, '([a-z_]+)'\s*\n", sql)
    assert literal and (literal.group(1) or literal.group(2)) in declared
    return declared


def test_the_transitions_table_is_what_the_sql_of_each_transition_writes() -> None:
    statements = _transition_statements()
    assert set(statements) == set(TRANSITIONS), "a transition without a statement"
    for name, sqls in statements.items():
        sources: set[str] = set()
        targets: set[str] = set()
        for sql in sqls:
            if re.search(r"INSERT\s+INTO\s+job_runs\b", sql):
                targets |= _insert_states(sql)
            else:
                update_sources, update_targets = _update_states(sql)
                sources |= update_sources
                targets |= update_targets
        expected_sources, expected_targets = TRANSITIONS[name]
        assert sources == {s.value for s in expected_sources}, f"{name} from"
        assert targets == {s.value for s in expected_targets}, f"{name} to"


def test_the_database_check_constraint_allows_exactly_the_states() -> None:
    check = next(
        c
        for c in JobRun.__table__.constraints  # type: ignore[attr-defined]
        if isinstance(c, CheckConstraint) and c.name == "job_runs_status"
    )
    allowed = set(QUOTED.findall(str(check.sqltext)))
    assert allowed == {s.value for s in RunStatus}
    in_transitions = set().union(*(a | b for a, b in TRANSITIONS.values()))
    assert allowed == {s.value for s in in_transitions}


def test_every_state_is_either_active_or_terminal() -> None:
    assert ACTIVE | TERMINAL == set(RunStatus)
    assert not ACTIVE & TERMINAL
    # a run can be cancelled exactly while it is active
    assert TRANSITIONS["run_cancel"][0] == ACTIVE
    # terminal states only leave by a person's retry (or a retried upstream's un-skip), or
    # by the late completion of an attempt the reaper alone declared dead
    leaving_terminal = {name for name, (sources, _) in TRANSITIONS.items() if sources & TERMINAL}
    assert leaving_terminal == {"run_retry", "run_unskip", "run_complete_late"}


def test_sql_in_quotes_each_value_in_a_stable_order() -> None:
    assert sql_in(["b", "a"]) == "'a', 'b'"


# Inserting a new run is not a transition of an existing one: `app.runs.run_inserts` sends the
# rows (COPY staging, pipelined JSON batches) whose first status `app.runs.transitions` chose. So
# the insert statements live in their own file, only that module runs them, and none of them
# may change the status of a run already there.
def test_new_runs_are_inserted_without_touching_existing_runs() -> None:
    for name, statement in load("run_inserts").items():
        assert not re.search(r"UPDATE\s+job_runs|DO\s+UPDATE", statement, re.I), name


def test_only_the_state_module_and_the_insert_module_run_their_statements() -> None:
    owners = {"runs": "runs/transitions.py", "run_inserts": "runs/run_inserts.py"}
    for path in APP.rglob("*.py"):
        module = str(path.relative_to(APP))
        text = path.read_text()
        for file, owner in owners.items():
            used = set(re.findall(rf"query\(\s*\"{file}\",\s*\"(\w+)\"", text))
            if module != owner and file == "runs":
                assert used <= NOT_TRANSITIONS, (module, used - NOT_TRANSITIONS)
            elif module != owner:
                assert not used, (module, used)
            assert module == owner or not re.search(rf"query\(\s*\"{file}\"\s*,\s*[^\"\s]", text)


def test_every_time_dependent_statement_takes_now() -> None:
    # `coalesce(%(now)s, now())` everywhere a statement reads the clock, so a test moves
    # time by passing `now` instead of sleeping.
    for file in sorted(path.stem for path in (APP / "core" / "sql").glob("*.sql")):
        for name, statement in load(file).items():
            code = "\n".join(
                line for line in statement.splitlines() if not line.lstrip().startswith("--")
            )
            bare = code.replace("coalesce(%(now)s::timestamptz, now())", "")
            assert "now()" not in bare, f"{file}.sql {name} reads the clock without %(now)s"


def test_the_overview_counts_every_state_under_its_own_name() -> None:
    # written out one by one (a constant per status lets each count use its index)
    statement = load("web")["overview_run_counts"]
    pairs = re.findall(r"status = '([a-z_]+)' LIMIT %\(cap\)s\) AS c\) AS ([a-z_]+)", statement)
    assert sorted(status for status, _ in pairs) == sorted(s.value for s in RunStatus)
    assert all(status == column for status, column in pairs)
