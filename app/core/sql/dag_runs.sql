-- DAG runs pages (`app/dags/dag_runs.py`): reads only, through the `all_*` views, so a DAG
-- run moved whole to the history (app.runs.history) reads the same. The list walks
-- ix_dag_runs_created and ix_dag_run_history_created merged, and counts each DAG run's
-- steps through ix_job_runs_dag_run and ix_run_history_dag_run; a DAG run's page reads its
-- steps and their edges the same way.

-- name: dag_runs_recent
-- (read) DAG runs newest first, before %(before)s when given (keyset paging), each with
-- its steps counted by status.
SELECT d.id, d.name, d.workflow_id, w.name AS workflow_name, d.schedule_id, d.fire_time,
       d.created_at, s.total, s.completed, s.failed, s.running, s.waiting, s.other
FROM all_dag_runs d
LEFT JOIN workflows w ON w.id = d.workflow_id
CROSS JOIN LATERAL (
    SELECT count(*)::int AS total,
           count(*) FILTER (WHERE r.status = 'completed')::int AS completed,
           count(*) FILTER (WHERE r.status IN ('failed', 'timed_out'))::int AS failed,
           count(*) FILTER (WHERE r.status = 'running')::int AS running,
           count(*) FILTER (WHERE r.status IN ('pending', 'blocked'))::int AS waiting,
           count(*) FILTER (WHERE r.status IN ('cancelled', 'skipped'))::int AS other
    FROM all_runs r WHERE r.dag_run_id = d.id
) s
WHERE %(before)s::timestamptz IS NULL OR d.created_at < %(before)s::timestamptz
ORDER BY d.created_at DESC
LIMIT %(limit)s;

-- name: dag_run_get
-- (read) one DAG run.
SELECT d.id, d.name, d.workflow_id, w.name AS workflow_name, d.schedule_id, d.fire_time,
       d.created_at
FROM all_dag_runs d
LEFT JOIN workflows w ON w.id = d.workflow_id
WHERE d.id = %(id)s;

-- name: dag_run_steps
-- (read) the runs of one DAG run, in the order they were submitted.
SELECT id, dag_node, handler, status, attempt, run_at, started_at, finished_at, last_error
FROM all_runs
WHERE dag_run_id = %(id)s
ORDER BY id;

-- name: dag_run_edges
-- (read) the edges between the runs of one DAG run: its steps' ids first, then their edges
-- by each one's run id (a join let the planner hash every edge of the history).
SELECT d.run_id, d.depends_on
FROM all_run_deps d
WHERE d.run_id = ANY(ARRAY(SELECT r.id FROM all_runs r WHERE r.dag_run_id = %(id)s));

-- name: dag_run_step_times
-- (read) the runs of one DAG run with the times their timeline is drawn from, and the
-- clock (%(now)s, or the database's) that open segments end at.
SELECT id, dag_node, status, attempt, created_at, started_at, finished_at,
       coalesce(%(now)s::timestamptz, now()) AS read_at
FROM all_runs
WHERE dag_run_id = %(id)s
ORDER BY id;

-- name: dag_run_attempts
-- (read) the finished attempts of the runs of one DAG run, each run's oldest first
-- (ix_job_runs_dag_run, then the attempts' primary key).
SELECT a.run_id, a.attempt, a.outcome, a.started_at, a.finished_at
FROM all_runs r
JOIN all_run_attempts a ON a.run_id = r.id
WHERE r.dag_run_id = %(id)s
ORDER BY a.run_id, a.attempt;
