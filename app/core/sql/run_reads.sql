-- Read queries of runs for the `sundial` command, the Python client and the worker. They change
-- nothing; every statement that writes a run lives in runs.sql. A run is read through the
-- `all_*` views, so one moved to the history (app.runs.history) still reads the same; only
-- what a DAG step's start needs (its upstreams, never moved while it waits) reads job_runs.

-- name: run_by_id
-- One run's row, every column.
SELECT * FROM all_runs WHERE id = %(id)s;

-- name: run_attempt_list
-- A run's attempts, oldest first.
SELECT attempt, worker, outcome, started_at, finished_at, error
FROM all_run_attempts WHERE run_id = %(run_id)s ORDER BY attempt;

-- name: run_list_by_dag
-- The runs of one DAG run, in submit order.
SELECT id, dag_node, status, attempt, started_at, finished_at, last_error
FROM all_runs WHERE dag_run_id = %(dag_run_id)s ORDER BY id;

-- name: run_upstream_results
-- (read) DAG steps' upstream results, by step name (or run id), in a fresh snapshot.
SELECT r.id, (
    SELECT jsonb_object_agg(coalesce(u.dag_node, u.id::text), u.result)
    FROM job_runs u
    WHERE u.id = ANY(ARRAY(SELECT depends_on FROM job_run_deps d WHERE d.run_id = r.id))
) AS upstream_results
FROM job_runs r
WHERE r.id = ANY(%(ids)s::bigint[]);

-- name: run_in_history
-- (read) when a run that left the hot tables ended (ix_run_history_id, one probe per day
-- kept); no row: it is hot, or there is no such run.
SELECT id, status, finished_at FROM run_history WHERE id = %(id)s LIMIT 1;
