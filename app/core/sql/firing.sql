-- What a fire does: lock due schedules, advance them, write their fire ledger, release
-- queued fires. Runs are never written here: `app.scheduling.fire_batches` creates them through
-- `app.runs.submission.submit_fires`.

-- name: db_now
-- The database clock (or the injected one), for decisions made in Python.
SELECT coalesce(%(now)s::timestamptz, now()) AS now;

-- name: schedule_lock_due
-- Lock up to %(limit)s schedules whose next fire is due, with whether a fire is queued;
-- schedules another trigger has locked are skipped, not waited for. Within a tick,
-- batches resume after the last (next_fire_time, id) seen, so no batch rescans the index
-- entries that earlier batches left behind. `calendar_id` names the exclusion calendar,
-- loaded once per batch. One row per group of schedules that share everything their fires
-- depend on (rule, zone, next fire, pause, catch-up, overlap, spread, workflow, calendar).
-- A schedule alone in its group comes as a row of its own (`id`, `name`, `job_id_text`);
-- a group of several gives its members' ids, names and jobs as arrays in one order
-- (`ids`, ...). Ids come as text too, the form in which the batch's writes send them back.
-- At the top of the hour thousands of schedules share a group, and the trigger decides
-- their fire once. Their active runs are read by `schedule_active_runs`, once the locks
-- are held.
WITH due AS (
    SELECT s.id, s.name, s.job_id, s.workflow_id, s.cron COLLATE "C" AS cron,
           s.interval_seconds, s.timezone COLLATE "C" AS timezone, s.start_at, s.end_at,
           s.next_fire_time, s.active, s.paused_until, s.paused_note, s.overlap, s.catchup,
           s.catchup_limit, s.catchup_window_seconds, s.dst_skipped, s.dst_repeated,
           s.exact_minute, s.spread_seconds, s.calendar_id,
           -- only the anchor of an interval without a start reads the creation time
           CASE WHEN s.cron IS NULL AND s.start_at IS NULL THEN s.created_at END AS created_at
    FROM schedules s
    WHERE s.next_fire_time <= coalesce(%(now)s::timestamptz, now())
      AND (s.next_fire_time, s.id) > (
          coalesce(%(after_time)s::timestamptz, '-infinity'),
          coalesce(%(after_id)s::uuid, '00000000-0000-0000-0000-000000000000')
      )
    ORDER BY s.next_fire_time, s.id
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
), checked AS (
    SELECT due.*,
           due.overlap = 'queue' AND EXISTS (
               SELECT 1 FROM schedule_fires f WHERE f.schedule_id = due.id AND f.outcome = 'queued'
           ) AS has_queued_fire
    FROM due
)
SELECT c.cron, c.interval_seconds, c.timezone, c.start_at, c.end_at, c.created_at,
       c.next_fire_time, c.active, c.paused_until, c.paused_note, c.overlap, c.catchup,
       c.catchup_limit, c.catchup_window_seconds, c.dst_skipped, c.dst_repeated,
       c.exact_minute, c.spread_seconds, c.workflow_id, c.calendar_id, c.has_queued_fire,
       coalesce(%(now)s::timestamptz, now()) AS now,
       CASE WHEN count(*) = 1 THEN (array_agg(c.id))[1] END AS id,
       CASE WHEN count(*) = 1 THEN (array_agg(c.id))[1]::text END AS id_text,
       CASE WHEN count(*) = 1 THEN (array_agg(c.name))[1] END AS name,
       CASE WHEN count(*) = 1 THEN (array_agg(c.job_id::text))[1] END AS job_id_text,
       CASE WHEN count(*) > 1 THEN array_agg(c.id) END AS ids,
       CASE WHEN count(*) > 1 THEN array_agg(c.id::text) END AS id_texts,
       CASE WHEN count(*) > 1 THEN array_agg(c.name) END AS names,
       CASE WHEN count(*) > 1 THEN array_agg(c.job_id::text) END AS job_id_texts
FROM checked c
-- (The columns that most often tell schedules apart come first: the sort that groups them
-- then seldom compares the rest.)
GROUP BY c.next_fire_time, c.spread_seconds, c.cron, c.timezone, c.interval_seconds,
         c.created_at, c.workflow_id, c.calendar_id, c.overlap, c.start_at, c.end_at,
         c.active, c.paused_until, c.paused_note, c.catchup, c.catchup_limit,
         c.catchup_window_seconds, c.dst_skipped, c.dst_repeated, c.exact_minute,
         c.has_queued_fire;

-- name: schedule_active_runs
-- The runs still pending, blocked or running of the schedules given (by id, as text), for
-- the overlap policy. Read by a statement of its own once the schedules are locked: the
-- locking statement reads in the snapshot it started with, which misses a run that "run
-- now" committed while that statement was on its way to the schedule's lock. Runs of a
-- workflow fire carry the schedule too, so one lookup on the partial index of active
-- scheduled runs covers job and workflow schedules alike.
SELECT r.schedule_id, array_agg(r.id ORDER BY r.id) AS run_ids
FROM job_runs r
WHERE r.schedule_id = ANY(%(ids)s::uuid[]) AND r.status IN ('pending', 'blocked', 'running')
GROUP BY r.schedule_id;

-- name: schedule_advance_many
-- Move each schedule's next fire forward, never back (compare-and-set on the old value),
-- and end the pauses that expired (resumed at their expiry). Reads the batch's fire rows
-- (`app.scheduling.fire_batches.fire_batch_rows`): the one row per schedule that carries `previous` moves
-- it; and its shared fires (`app.scheduling.fire_batches.shared_fire_rows`), each of which moves every
-- schedule of its group alike.
UPDATE schedules s
SET next_fire_time = a.next_fire_time,
    active = s.active OR a.resume IS TRUE,
    paused_note = CASE WHEN a.resume THEN NULL ELSE s.paused_note END,
    paused_until = CASE WHEN a.resume THEN NULL ELSE s.paused_until END,
    paused_at = CASE WHEN a.resume THEN NULL ELSE s.paused_at END,
    resumed_at = CASE WHEN a.resume THEN s.paused_until ELSE s.resumed_at END
FROM (
    SELECT f.schedule_id, f.previous, f.next_fire_time, f.resume
    FROM jsonb_to_recordset(%(schedules)s::jsonb)
        AS f(schedule_id uuid, previous timestamptz, next_fire_time timestamptz, resume bool)
    UNION ALL
    SELECT m.schedule_id, g.previous, g.next_fire_time, NULL
    FROM jsonb_to_recordset(%(shared)s::jsonb)
        AS g(schedule_ids uuid[], previous timestamptz, next_fire_time timestamptz)
    CROSS JOIN LATERAL unnest(g.schedule_ids) AS m(schedule_id)
) AS a
WHERE s.id = a.schedule_id AND a.previous IS NOT NULL AND s.next_fire_time = a.previous
  AND (a.next_fire_time IS NULL OR a.next_fire_time > a.previous);

-- name: schedule_stop_broken
-- A schedule whose rule cannot be computed (a row written around validation, a zone gone
-- from tzdata) is paused with the reason and no next fire, so it cannot wedge a batch.
UPDATE schedules s
SET active = false, next_fire_time = NULL, paused_at = coalesce(%(now)s::timestamptz, now()),
    paused_note = b.note
FROM jsonb_to_recordset(%(schedules)s::jsonb) AS b(id uuid, note text)
WHERE s.id = b.id;

-- name: fire_record_many
-- Write ledger rows; a fire already recorded (by another trigger) is left as it is. A row
-- with a `link` fire time names the run (or a workflow schedule's DAG run) it links,
-- created earlier in this transaction: an enqueued fire's own, or for a coalesced fire the
-- run of the fire that covered it; by its id when the row gives it, else found by fire
-- time (a row that names its schedule's job is not looked for among DAG runs). Rows of
-- the trigger's batch (`app.scheduling.fire_batches.fire_batch_rows`) without a `fire_time` only move a
-- schedule. A shared fire (`%(shared)s`, none for "run now") is an enqueued row for each
-- schedule of its group, linking its run. A backfill's rows name it (`backfill_id`).
INSERT INTO schedule_fires (
    schedule_id, fire_time, local_time, outcome, run_id, dag_run_id, coalesced_count, manual,
    detail, recorded_at, updated_at, backfill_id
)
-- (Lookups as subqueries: one probe of a unique index per linked row, whatever the planner
-- guesses about the size of the batch.)
SELECT f.schedule_id, f.fire_time, f.local_time, f.outcome,
       CASE WHEN f.run_id IS NOT NULL THEN f.run_id WHEN f.link IS NOT NULL THEN (
           SELECT r.id FROM job_runs r
           WHERE r.schedule_id = f.schedule_id AND r.fire_time = f.link AND r.dag_run_id IS NULL
       ) END,
       CASE WHEN f.run_id IS NULL AND f.job_id IS NULL AND f.link IS NOT NULL THEN (
           SELECT d.id FROM dag_runs d WHERE d.schedule_id = f.schedule_id AND d.fire_time = f.link
       ) END,
       coalesce(f.coalesced_count, 0), coalesce(f.manual, false), f.detail,
       coalesce(%(now)s::timestamptz, now()), coalesce(%(now)s::timestamptz, now()),
       f.backfill_id
FROM (
    SELECT f.schedule_id, f.fire_time, f.local_time, f.outcome, f.link, f.coalesced_count,
           f.manual, f.detail, f.run_id, f.job_id, f.backfill_id
    FROM jsonb_to_recordset(%(fires)s::jsonb) AS f(
        schedule_id uuid, fire_time timestamptz, local_time timestamp, outcome text,
        link timestamptz, coalesced_count int, manual bool, detail text, run_id bigint,
        job_id uuid, backfill_id uuid
    )
    UNION ALL
    SELECT m.schedule_id, g.fire_time, g.local_time, g.outcome, g.fire_time, NULL, NULL,
           g.detail, NULL, m.job_id, NULL
    FROM jsonb_to_recordset(%(shared)s::jsonb) AS g(
        schedule_ids uuid[], job_ids uuid[], fire_time timestamptz, local_time timestamp,
        outcome text, detail text
    )
    CROSS JOIN LATERAL unnest(g.schedule_ids, g.job_ids) AS m(schedule_id, job_id)
) AS f
WHERE f.fire_time IS NOT NULL
ON CONFLICT (schedule_id, fire_time) DO NOTHING;

-- name: fire_lock_releasable
-- Lock queued fires of active schedules that no longer wait behind a pending or running run,
-- and their schedules: one that "run now" holds is skipped (its run is not committed yet),
-- and none can start a run until the release commits. Runs committed after this
-- statement's snapshot are looked for again once the locks are held
-- (`schedule_active_runs`).
SELECT f.schedule_id, f.fire_time, s.id, s.id::text AS id_text, s.name, s.job_id, s.workflow_id
FROM schedule_fires f
JOIN schedules s ON s.id = f.schedule_id
WHERE f.outcome = 'queued' AND s.active
  AND NOT EXISTS (
      SELECT 1 FROM job_runs r
      WHERE r.schedule_id = f.schedule_id AND r.status IN ('pending', 'blocked', 'running')
  )
ORDER BY f.fire_time
LIMIT %(limit)s
FOR UPDATE OF f, s SKIP LOCKED;

-- name: fire_release_many
-- queued -> enqueued, linking the run (or DAG run) just created for each fire.
UPDATE schedule_fires f
SET outcome = 'enqueued',
    run_id = (
        SELECT r.id FROM job_runs r
        WHERE r.schedule_id = f.schedule_id AND r.fire_time = f.fire_time AND r.dag_run_id IS NULL
    ),
    dag_run_id = (
        SELECT d.id FROM dag_runs d WHERE d.schedule_id = f.schedule_id AND d.fire_time = f.fire_time
    ),
    updated_at = coalesce(%(now)s::timestamptz, now()),
    detail = concat_ws('; ', f.detail, 'enqueued when the run ahead of it ended')
FROM jsonb_to_recordset(%(fires)s::jsonb) AS q(schedule_id uuid, fire_time timestamptz)
WHERE f.schedule_id = q.schedule_id AND f.fire_time = q.fire_time AND f.outcome = 'queued';
