-- Reads of what Sundial keeps about one run's life, for its event timeline
-- (app.runs.run_timeline): the run and where it came from, its finished attempts, the
-- actions people took on it (from the audit log), and its DAG upstreams. Each is a
-- primary-key lookup or bounded by an index, on the hot tables and the history both
-- (the `all_*` views): a run reads the same after it moved.

-- name: run_timeline_run
-- (read) one run with where it came from: its schedule and whether that fire was a
-- person's "run now" (the fire ledger, by its key), its DAG run and workflow, and who
-- started it by hand when the audit log says so (schedule.run_now, workflow.run or job.run
-- naming this run or its DAG run, through the audit log's subject index).
SELECT r.id, r.status, r.attempt, r.created_at, r.run_at, r.started_at, r.finished_at,
       r.deadline, r.lease_owner, r.cancel_requested, r.quarantined, r.skip_reason,
       r.last_error, r.schedule_id, r.fire_time, r.dag_run_id, r.dag_node,
       s.name AS schedule_name, f.manual AS manual_fire,
       d.name AS dag_name, d.workflow_id, w.name AS workflow_name,
       d.schedule_id AS dag_schedule_id, ds.name AS dag_schedule_name,
       coalesce(%(now)s::timestamptz, now()) AS read_at,
       (SELECT a.actor FROM audit_log a
        WHERE a.target_type IN ('schedule', 'workflow', 'job')
          AND a.subject_id IN (r.schedule_id, d.schedule_id, d.workflow_id, r.job_id)
          AND a.action IN ('schedule.run_now', 'workflow.run', 'job.run')
          AND (a.details -> 'after' ->> 'run_id' = r.id::text
               OR a.details -> 'after' ->> 'dag_run_id' = r.dag_run_id::text)
        ORDER BY a.id
        LIMIT 1) AS started_by
FROM all_runs r
LEFT JOIN schedules s ON s.id = r.schedule_id
LEFT JOIN all_dag_runs d ON d.id = r.dag_run_id
LEFT JOIN workflows w ON w.id = d.workflow_id
LEFT JOIN schedules ds ON ds.id = d.schedule_id
LEFT JOIN schedule_fires f
  ON f.schedule_id = coalesce(r.schedule_id, d.schedule_id)
 AND f.fire_time = coalesce(r.fire_time, d.fire_time)
WHERE r.id = %(id)s;

-- name: run_timeline_attempts
-- (read) every finished attempt of a run, oldest first, without tracebacks.
SELECT attempt, worker, outcome, started_at, finished_at, error, requeued
FROM all_run_attempts WHERE run_id = %(id)s ORDER BY attempt;

-- name: run_timeline_actions
-- (read) the audited actions of people (and API tokens) on one run, newest first, at
-- most %(limit)s: cancels, retries, retries with new args. Each falls within the run's
-- life: a cancel before its finish, a retry after which it is unfinished again; so the
-- audit log's time index bounds the scan to its creation up to its finish (or now).
SELECT a.id, a.at, a.actor, a.action, a.details
FROM all_runs r
JOIN audit_log a
  ON a.at >= r.created_at
 AND a.at <= coalesce(r.finished_at, coalesce(%(now)s::timestamptz, now()))
 AND a.target_type = 'run'
 AND a.target_id = r.id::text
 AND a.action = ANY (%(actions)s::text[])
WHERE r.id = %(id)s
ORDER BY a.at DESC, a.id DESC
LIMIT %(limit)s;

-- name: run_timeline_upstreams
-- (read) the runs a DAG step waits for, with their status and when they finished.
SELECT r.id, r.dag_node, r.status, r.finished_at
FROM all_run_deps d
JOIN all_runs r ON r.id = d.depends_on
WHERE d.run_id = %(id)s
ORDER BY r.id;
