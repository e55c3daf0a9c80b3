-- Backfills: a schedule's fires over a past range, run on request with a concurrency cap
-- (`app.scheduling.backfills`). Runs are never written here: the backfill creates them
-- through `app.runs.submission.submit_fires`, cancels them through
-- `app.runs.transitions.cancel`, and marks its ledger rows with `fire_record_many`.

-- name: backfill_insert
-- A new backfill of a schedule, running from the start of its range.
INSERT INTO backfills (
    id, schedule_id, range_start, range_end, next_from, concurrency, fire_count, left_alone,
    created_by, created_at
)
VALUES (
    %(id)s, %(schedule_id)s, %(range_start)s, %(range_end)s, %(range_start)s, %(concurrency)s,
    %(fire_count)s, %(left_alone)s, %(created_by)s, coalesce(%(now)s::timestamptz, now())
)
RETURNING id;

-- name: backfill_running_ids
-- The backfills still running, oldest first: the trigger feeds each of them every tick.
SELECT id FROM backfills WHERE status = 'running' ORDER BY created_at, id;

-- name: backfill_lock_running
-- Lock one running backfill (another trigger feeding it is skipped, not waited for) with
-- its schedule's rule and how many of its runs are pending, blocked or running now.
SELECT b.id, b.range_start, b.range_end, b.next_from, b.concurrency, b.fire_count,
       s.id AS schedule_id, s.name, s.job_id, s.overlap, s.cron, s.interval_seconds,
       s.timezone, s.start_at, s.end_at, s.created_at, s.dst_skipped, s.dst_repeated,
       (
           SELECT count(*) FROM schedule_fires f JOIN job_runs r ON r.id = f.run_id
           WHERE f.backfill_id = b.id AND r.status IN ('pending', 'blocked', 'running')
       ) AS active
FROM backfills b
JOIN schedules s ON s.id = b.schedule_id
WHERE b.id = %(id)s AND b.status = 'running'
FOR UPDATE OF b SKIP LOCKED;

-- name: fires_recorded_between
-- The ledger's fires of a schedule in [start, end], with their outcome: a backfill leaves
-- them alone. (The ledger's primary key (schedule_id, fire_time) serves the range.)
SELECT fire_time, local_time, outcome, run_id, backfill_id
FROM schedule_fires
WHERE schedule_id = %(schedule_id)s AND fire_time >= %(start)s AND fire_time <= %(end)s
ORDER BY fire_time;

-- name: backfill_advance
-- Move a running backfill's next fire forward past the fires just submitted (compare-and-
-- set on the old value, so it only moves forward).
UPDATE backfills
SET next_from = %(next_from)s
WHERE id = %(id)s AND status = 'running' AND next_from = %(previous)s AND %(next_from)s > next_from;

-- name: backfill_finish
-- running -> done, once every fire of its range is submitted and none of its runs is
-- pending, blocked or running any more.
UPDATE backfills b
SET status = 'done', ended_at = coalesce(%(now)s::timestamptz, now())
WHERE b.id = %(id)s AND b.status = 'running' AND b.next_from > b.range_end
  AND NOT EXISTS (
      SELECT 1 FROM schedule_fires f JOIN job_runs r ON r.id = f.run_id
      WHERE f.backfill_id = b.id AND r.status IN ('pending', 'blocked', 'running')
  )
RETURNING b.id;

-- name: backfill_cancel
-- running -> cancelled: no more of its fires are submitted (its runs are cancelled by
-- `app.runs.transitions.cancel`, one by one).
UPDATE backfills
SET status = 'cancelled', ended_at = coalesce(%(now)s::timestamptz, now())
WHERE id = %(id)s AND status = 'running'
RETURNING id, schedule_id;

-- name: backfill_active_run_ids
-- The runs of a backfill still pending, blocked or running.
SELECT r.id
FROM schedule_fires f JOIN job_runs r ON r.id = f.run_id
WHERE f.backfill_id = %(id)s AND r.status IN ('pending', 'blocked', 'running')
ORDER BY r.id;

-- name: backfill_list
-- A schedule's backfills, newest first, with how their runs stand: submitted, completed,
-- failed (failed or timed out), stopped (cancelled or skipped), running, waiting to start.
SELECT b.id, b.schedule_id, s.name AS schedule, s.timezone, s.overlap, b.range_start, b.range_end,
       b.next_from, b.concurrency, b.fire_count, b.left_alone, b.status, b.created_by,
       b.created_at, b.ended_at, p.submitted, p.completed, p.failed, p.stopped, p.running,
       p.pending
FROM backfills b
JOIN schedules s ON s.id = b.schedule_id
CROSS JOIN LATERAL (
    SELECT count(*) AS submitted,
           count(*) FILTER (WHERE r.status = 'completed') AS completed,
           count(*) FILTER (WHERE r.status IN ('failed', 'timed_out')) AS failed,
           count(*) FILTER (WHERE r.status IN ('cancelled', 'skipped')) AS stopped,
           count(*) FILTER (WHERE r.status = 'running') AS running,
           count(*) FILTER (WHERE r.status IN ('pending', 'blocked')) AS pending
    FROM schedule_fires f LEFT JOIN all_runs r ON r.id = f.run_id
    WHERE f.backfill_id = b.id
) AS p
WHERE (%(schedule_id)s::uuid IS NULL OR b.schedule_id = %(schedule_id)s::uuid)
  AND (%(id)s::uuid IS NULL OR b.id = %(id)s::uuid)
ORDER BY b.created_at DESC, b.id
LIMIT %(limit)s;
