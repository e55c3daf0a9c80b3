-- Deleting the history of ended runs past its retention, and sign-ins that can no longer be
-- used. `app/runs/retention.py` runs them (for the reaper). Not transitions: no status changes,
-- rows that ended long ago go.

-- name: run_prune
-- Up to %(limit)s runs outside any DAG whose retention has passed. Not a transition: the
-- history of runs that ended long ago, deleted with their attempts and log lines (and, by
-- cascade, their dependency edges). A run that ended well, was cancelled or skipped goes once it ended
-- before the runs_before cutoff; a dead letter (failed, timed out) once it ended before
-- failed_before. A NULL cutoff keeps that kind forever.
WITH doomed AS (
    SELECT id FROM job_runs
    WHERE dag_run_id IS NULL
      AND ((status IN ('completed', 'cancelled', 'skipped')
            AND finished_at < coalesce(%(runs_before)s::timestamptz, '-infinity'))
        OR (status IN ('failed', 'timed_out')
            AND finished_at < coalesce(%(failed_before)s::timestamptz, '-infinity')))
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
), gone AS (
    DELETE FROM job_runs r USING doomed WHERE r.id = doomed.id RETURNING r.id
), attempts AS (
    DELETE FROM job_run_attempts a USING gone WHERE a.run_id = gone.id
), logs AS (
    DELETE FROM run_logs l USING gone WHERE l.run_id = gone.id
)
SELECT count(*) AS runs FROM gone;

-- name: dag_run_lock_prunable
-- Up to %(limit)s DAG runs whose every step's retention has passed, locked with their
-- steps, each with how many of its steps were locked. Neither lock waits: a DAG run or a
-- step that another transaction holds (a person retrying a step, a run being submitted
-- after one) is passed over, and `dag_run_prune` then keeps that DAG run.
WITH doomed AS (
    SELECT d.id FROM dag_runs d
    WHERE d.created_at < greatest(
        coalesce(%(runs_before)s::timestamptz, '-infinity'),
        coalesce(%(failed_before)s::timestamptz, '-infinity')
    )
      AND NOT EXISTS (
          SELECT 1 FROM job_runs r
          WHERE r.dag_run_id = d.id
            AND NOT coalesce(
                (r.status IN ('completed', 'cancelled', 'skipped')
                 AND r.finished_at < coalesce(%(runs_before)s::timestamptz, '-infinity'))
                OR (r.status IN ('failed', 'timed_out')
                 AND r.finished_at < coalesce(%(failed_before)s::timestamptz, '-infinity')),
                false
            )
      )
    ORDER BY d.created_at
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
), steps AS (
    SELECT r.dag_run_id FROM job_runs r
    WHERE r.dag_run_id = ANY(ARRAY(SELECT id FROM doomed))
    FOR UPDATE SKIP LOCKED
)
SELECT d.id, coalesce(s.steps, 0) AS steps
FROM doomed d
LEFT JOIN (SELECT dag_run_id, count(*)::int AS steps FROM steps GROUP BY dag_run_id) s
  ON s.dag_run_id = d.id;

-- name: dag_run_prune
-- The DAG runs `dag_run_lock_prunable` locked, whole: every step, with its attempts and log
-- lines (and, by cascade, its edges), so no step is left without the upstreams whose
-- results it reads. Checked again in this statement's snapshot, taken once that one's
-- locks were held: a DAG run goes only if its steps are still all ended past their
-- retention and all locked (no step was passed over, or added since). One that a retry
-- or a new step changed meanwhile stays.
WITH doomed AS (
    SELECT l.id FROM unnest(%(ids)s::uuid[], %(steps)s::int[]) AS l(id, steps)
    WHERE (SELECT count(*) FROM job_runs r WHERE r.dag_run_id = l.id) = l.steps
      AND NOT EXISTS (
          SELECT 1 FROM job_runs r
          WHERE r.dag_run_id = l.id
            AND NOT coalesce(
                (r.status IN ('completed', 'cancelled', 'skipped')
                 AND r.finished_at < coalesce(%(runs_before)s::timestamptz, '-infinity'))
                OR (r.status IN ('failed', 'timed_out')
                 AND r.finished_at < coalesce(%(failed_before)s::timestamptz, '-infinity')),
                false
            )
      )
), steps AS (
    DELETE FROM job_runs r USING doomed WHERE r.dag_run_id = doomed.id RETURNING r.id
), attempts AS (
    DELETE FROM job_run_attempts a USING steps WHERE a.run_id = steps.id
), logs AS (
    DELETE FROM run_logs l USING steps WHERE l.run_id = steps.id
), dags AS (
    DELETE FROM dag_runs d USING doomed WHERE d.id = doomed.id RETURNING d.id
)
SELECT (SELECT count(*) FROM dags) AS dag_runs, (SELECT count(*) FROM steps) AS runs;

-- name: session_prune
-- Up to %(limit)s web sessions that have expired: a browser that never signed out leaves
-- its session behind, and `session_user` no longer accepts it (index on expires_at).
WITH doomed AS (
    SELECT id FROM web_sessions
    WHERE expires_at <= coalesce(%(now)s::timestamptz, now())
    ORDER BY expires_at
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
), gone AS (
    DELETE FROM web_sessions s USING doomed WHERE s.id = doomed.id RETURNING s.id
)
SELECT count(*) AS sessions FROM gone;

-- name: sign_in_link_prune
-- Up to %(limit)s sign-in links that have expired unused (a used link is deleted as it is
-- used). The table holds the few links of the last minutes: no index needed.
WITH doomed AS (
    SELECT id FROM sign_in_links
    WHERE expires_at <= coalesce(%(now)s::timestamptz, now())
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
), gone AS (
    DELETE FROM sign_in_links l USING doomed WHERE l.id = doomed.id RETURNING l.id
)
SELECT count(*) AS links FROM gone;
