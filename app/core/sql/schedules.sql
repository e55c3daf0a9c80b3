-- Schedules and their fire ledger (`schedule_fires`). What a fire writes is in
-- `firing.sql`; runs are never written here: the trigger and "run now" create them
-- through `app.runs.submission.submit_fires`.

-- ---- the trigger's pauses and the reaper's pruning --------------------------------------

-- name: schedule_failing_streaks
-- Active schedules with auto-pause whose last N finished fires since they were last
-- resumed all failed, with the newest failed run and its error. A job schedule's fire is
-- its run; a workflow schedule's is its DAG run, finished when every step has ended, failed
-- when a step failed or timed out. Cancelled (and skipped) fires neither break nor extend
-- a streak. Hot and history both (ix_run_history_schedule_fire, ix_dag_run_history_schedule_fire):
-- a completed run that broke a streak stays seen after it moved, while the failures before
-- it, dead letters, stay hot for days.
SELECT s.id, s.name, s.auto_pause_after, s.resumed_at, last.run_id, last.error
FROM schedules s
CROSS JOIN LATERAL (
    SELECT count(*) AS finished,
           count(*) FILTER (WHERE f.failed) AS failed,
           (array_agg(f.run_id ORDER BY f.fire_time DESC))[1] AS run_id,
           (array_agg(f.error ORDER BY f.fire_time DESC))[1] AS error
    FROM (
        SELECT r.fire_time, r.status <> 'completed' AS failed, r.id AS run_id,
               r.last_error AS error
        FROM all_runs r
        WHERE s.job_id IS NOT NULL AND r.schedule_id = s.id AND r.dag_run_id IS NULL
          AND r.status IN ('completed', 'failed', 'timed_out')
          AND r.fire_time > coalesce(s.resumed_at, '-infinity')
        ORDER BY r.fire_time DESC
        LIMIT s.auto_pause_after
    ) f
    UNION ALL
    SELECT count(*), count(*) FILTER (WHERE f.failed),
           (array_agg(f.run_id ORDER BY f.fire_time DESC))[1],
           (array_agg(f.error ORDER BY f.fire_time DESC))[1]
    FROM (
        SELECT d.fire_time, steps.failed, steps.run_id, steps.error
        FROM all_dag_runs d
        CROSS JOIN LATERAL (
            SELECT bool_and(r.status NOT IN ('pending', 'blocked', 'running')) AS ended,
                   bool_or(r.status IN ('failed', 'timed_out')) AS failed,
                   bool_and(r.status = 'completed') AS completed,
                   min(r.id) FILTER (WHERE r.status IN ('failed', 'timed_out')) AS run_id,
                   (array_agg(concat('step ', r.dag_node, ': ', r.last_error) ORDER BY r.id)
                       FILTER (WHERE r.status IN ('failed', 'timed_out')))[1] AS error
            FROM all_runs r WHERE r.dag_run_id = d.id
        ) steps
        WHERE s.workflow_id IS NOT NULL AND d.schedule_id = s.id
          AND d.fire_time > coalesce(s.resumed_at, '-infinity')
          AND steps.ended AND (steps.failed OR steps.completed)
        ORDER BY d.fire_time DESC
        LIMIT s.auto_pause_after
    ) f
) last
WHERE s.auto_pause_after IS NOT NULL AND s.active
  AND last.finished = s.auto_pause_after AND last.failed = s.auto_pause_after;

-- name: schedule_auto_pause
-- active -> paused by the trigger, with the reason as the pause note, unless the schedule
-- was resumed since `schedule_failing_streaks` read its streak (a statement of its own, so
-- an earlier snapshot): that resume started a new streak.
UPDATE schedules
SET active = false, paused_at = coalesce(%(now)s::timestamptz, now()), paused_until = NULL,
    paused_note = %(note)s
WHERE id = %(id)s AND active AND resumed_at IS NOT DISTINCT FROM %(resumed_at)s::timestamptz
RETURNING id;

-- name: schedule_resume_expired
-- paused -> active where the pause's expiry has passed and its fires up to now are
-- recorded (a due schedule resumes in its fire batch instead). It resumed at the expiry.
UPDATE schedules
SET active = true, paused_note = NULL, paused_until = NULL, paused_at = NULL,
    resumed_at = paused_until
WHERE paused_until <= coalesce(%(now)s::timestamptz, now()) AND NOT active
  AND (next_fire_time IS NULL OR next_fire_time > coalesce(%(now)s::timestamptz, now()))
RETURNING id, name;

-- name: fire_prune
-- Ledger rows of fires before %(before)s, for the %(limit)s schedules after %(after)s in id
-- order (the reaper walks all schedules a slice at a time; each slice is a range scan of
-- the ledger's key per schedule). Queued fires stay until they are enqueued, and the fires
-- of a running backfill until it ends (they count its runs against its cap).
WITH slice AS (
    SELECT id FROM schedules
    WHERE id > coalesce(%(after)s::uuid, '00000000-0000-0000-0000-000000000000')
    ORDER BY id
    LIMIT %(limit)s
), gone AS (
    DELETE FROM schedule_fires f USING slice
    WHERE f.schedule_id = slice.id AND f.fire_time < %(before)s AND f.outcome <> 'queued'
      AND (f.backfill_id IS NULL OR NOT EXISTS (
          SELECT 1 FROM backfills b WHERE b.id = f.backfill_id AND b.status = 'running'
      ))
    RETURNING 1
)
SELECT (SELECT max(id::text)::uuid FROM slice) AS last, (SELECT count(*) FROM gone) AS fires;

-- ---- operations by people (CLI, web) ---------------------------------------------------

-- name: schedule_insert
INSERT INTO schedules (
    id, job_id, workflow_id, name, cron, interval_seconds, timezone, start_at, end_at, next_fire_time,
    overlap, catchup, catchup_limit, catchup_window_seconds, dst_skipped, dst_repeated,
    exact_minute, spread_seconds, auto_pause_after, expire_after_seconds, owns_job, created_at,
    updated_at
)
VALUES (
    %(id)s, %(job_id)s, %(workflow_id)s, %(name)s, %(cron)s, %(interval_seconds)s, %(timezone)s, %(start_at)s,
    %(end_at)s, %(next_fire_time)s, %(overlap)s, %(catchup)s, %(catchup_limit)s,
    %(catchup_window_seconds)s, %(dst_skipped)s, %(dst_repeated)s, %(exact_minute)s,
    %(spread_seconds)s, %(auto_pause_after)s, %(expire_after_seconds)s, %(owns_job)s,
    %(created_at)s, %(created_at)s
)
ON CONFLICT (name) WHERE name <> '' DO NOTHING
RETURNING id;

-- name: schedule_lock_by_name
-- One schedule and its job definition (none for a workflow schedule), locked against the
-- trigger and other people.
SELECT s.*, j.name AS job_name, j.handler, j.args, j.execution_model, j.priority,
       j.timeout_seconds, j.max_retries
FROM schedules s
LEFT JOIN job_definitions j ON j.id = s.job_id
WHERE s.name = %(name)s
FOR UPDATE OF s;

-- name: schedule_update
-- A schedule's new rule and policies, with the next fire the caller computed for them.
UPDATE schedules
SET cron = %(cron)s, interval_seconds = %(interval_seconds)s, timezone = %(timezone)s,
    start_at = %(start_at)s, end_at = %(end_at)s, overlap = %(overlap)s, catchup = %(catchup)s,
    catchup_limit = %(catchup_limit)s, catchup_window_seconds = %(catchup_window_seconds)s,
    dst_skipped = %(dst_skipped)s, dst_repeated = %(dst_repeated)s,
    exact_minute = %(exact_minute)s, spread_seconds = %(spread_seconds)s,
    auto_pause_after = %(auto_pause_after)s, expire_after_seconds = %(expire_after_seconds)s,
    next_fire_time = %(next_fire_time)s,
    updated_at = coalesce(%(now)s::timestamptz, now())
WHERE id = %(id)s;

-- name: schedule_pause
-- active -> paused (or a new note / expiry for a paused schedule).
UPDATE schedules
SET active = false, paused_note = %(note)s, paused_until = %(until)s,
    paused_at = coalesce(paused_at, coalesce(%(now)s::timestamptz, now())),
    updated_at = coalesce(%(now)s::timestamptz, now())
WHERE id = %(id)s;

-- name: schedule_resume
-- paused -> active; the failure streak for auto-pause starts again from here.
UPDATE schedules
SET active = true, paused_note = NULL, paused_until = NULL, paused_at = NULL,
    resumed_at = coalesce(%(now)s::timestamptz, now()),
    updated_at = coalesce(%(now)s::timestamptz, now())
WHERE id = %(id)s AND NOT active;

-- name: schedule_delete
-- A schedule and (by cascade) its fire ledger; its runs keep their history.
DELETE FROM schedules WHERE id = %(id)s;

-- name: schedule_list
SELECT s.*, j.name AS job_name, j.handler, w.name AS workflow_name
FROM schedules s
LEFT JOIN job_definitions j ON j.id = s.job_id
LEFT JOIN workflows w ON w.id = s.workflow_id
ORDER BY s.name, s.id;

-- name: schedule_by_name
SELECT id, timezone FROM schedules WHERE name = %(name)s;

-- name: fire_list
-- A schedule's ledger, newest first.
SELECT fire_time, local_time, outcome, run_id, dag_run_id, coalesced_count, manual, detail,
       recorded_at
FROM schedule_fires
WHERE schedule_id = %(id)s
ORDER BY fire_time DESC
LIMIT %(limit)s;

-- name: worker_handlers
-- Handler names workers registered; `live` marks workers seen recently and not stopped.
SELECT handlers,
       stopped_at IS NULL AND last_seen > coalesce(%(now)s::timestamptz, now())
           - make_interval(secs => %(live_seconds)s) AS live
FROM workers;

-- ---- dashboard pages ----------------------------------------------------------------------

-- name: schedule_by_name_full
-- One schedule with the names of what it runs and of its exclusion calendar (its page,
-- its audit snapshots).
SELECT s.*, j.name AS job_name, j.handler, w.name AS workflow_name,
       c.name AS calendar_name,
       (SELECT count(*) FROM schedules o WHERE o.job_id = s.job_id AND o.id <> s.id)
           AS job_shared_with
FROM schedules s
LEFT JOIN job_definitions j ON j.id = s.job_id
LEFT JOIN workflows w ON w.id = s.workflow_id
LEFT JOIN exclusion_calendars c ON c.id = s.calendar_id
WHERE s.name = %(name)s;

-- name: fire_page
-- A page of a schedule's ledger, newest first, with each run's status; keyset on
-- fire_time (the ledger's key is (schedule_id, fire_time)); `backfill_id` marks a
-- backfill's fires.
SELECT f.fire_time, f.local_time, f.outcome, f.run_id, f.dag_run_id, f.coalesced_count,
       f.manual, f.detail, f.recorded_at, f.backfill_id, r.status AS run_status
FROM schedule_fires f
LEFT JOIN all_runs r ON r.id = f.run_id
WHERE f.schedule_id = %(id)s
  AND (%(before)s::timestamptz IS NULL OR f.fire_time < %(before)s)
ORDER BY f.fire_time DESC
LIMIT %(limit)s;

-- name: fire_count
-- How many ledger rows a schedule has (what deleting it takes with it).
SELECT count(*) AS fires FROM schedule_fires WHERE schedule_id = %(id)s;

-- name: schedule_last_run
-- The newest run a schedule made (hot or history: ix_run_history_schedule_fire): a job's
-- run, or one step of a workflow's DAG run (the page links to the DAG run).
SELECT r.id, r.status, r.fire_time, r.finished_at, r.dag_run_id
FROM all_runs r
WHERE r.schedule_id = %(id)s
ORDER BY r.fire_time DESC, r.id DESC
LIMIT 1;

-- name: schedule_search
-- One page of the schedules list, by name (ix_schedules_name: names are unique), after the
-- name %(after)s when given. Each filter is ignored when null: part of the name, part of the
-- job's or workflow's name, paused or not (`schedule_search_count` takes the same filters).
-- A schedule without a name (from before names were required) has no page, so no row.
SELECT s.*, j.name AS job_name, j.handler, w.name AS workflow_name
FROM schedules s
LEFT JOIN job_definitions j ON j.id = s.job_id
LEFT JOIN workflows w ON w.id = s.workflow_id
WHERE (%(name)s::text IS NULL OR s.name ILIKE '%%' || %(name)s || '%%')
  AND (%(target)s::text IS NULL OR j.name ILIKE '%%' || %(target)s || '%%'
       OR w.name ILIKE '%%' || %(target)s || '%%')
  AND (%(paused)s::boolean IS NULL OR s.active = NOT %(paused)s)
  AND s.name > coalesce(%(after)s::text, '')
ORDER BY s.name
LIMIT %(limit)s;

-- name: schedule_search_count
-- How many schedules `schedule_search`'s filters match, on every page.
SELECT count(*) AS n
FROM schedules s
LEFT JOIN job_definitions j ON j.id = s.job_id
LEFT JOIN workflows w ON w.id = s.workflow_id
WHERE (%(name)s::text IS NULL OR s.name ILIKE '%%' || %(name)s || '%%')
  AND (%(target)s::text IS NULL OR j.name ILIKE '%%' || %(target)s || '%%'
       OR w.name ILIKE '%%' || %(target)s || '%%')
  AND (%(paused)s::boolean IS NULL OR s.active = NOT %(paused)s)
  AND s.name <> '';
