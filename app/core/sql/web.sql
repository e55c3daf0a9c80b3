-- Read queries of the dashboard's pages (writes go through the domain modules).

-- name: health_check
SELECT 1 AS ok;

-- ---- overview -----------------------------------------------------------------------------

-- name: overview_run_counts
-- Runs by status, each count stopping at %(cap)s (shown as "10,000+"): exact where it
-- matters to on-call, and never a scan of the whole history. Each status is written out:
-- only a constant lets the planner use the index of that status's rows (dispatch, lease,
-- blocked, rare statuses); completed runs are the bulk of the history, found at once.
-- Live statuses read the hot table only (nothing live moves); ended ones hot and history
-- (`all_runs`), so the counts do not drop when the reaper moves runs.
SELECT
    (SELECT count(*) FROM (SELECT FROM job_runs WHERE status = 'pending' LIMIT %(cap)s) AS c) AS pending,
    (SELECT count(*) FROM (SELECT FROM job_runs WHERE status = 'blocked' LIMIT %(cap)s) AS c) AS blocked,
    (SELECT count(*) FROM (SELECT FROM job_runs WHERE status = 'running' LIMIT %(cap)s) AS c) AS running,
    (SELECT count(*) FROM (SELECT FROM all_runs WHERE status = 'completed' LIMIT %(cap)s) AS c) AS completed,
    (SELECT count(*) FROM (SELECT FROM all_runs WHERE status = 'failed' LIMIT %(cap)s) AS c) AS failed,
    (SELECT count(*) FROM (SELECT FROM all_runs WHERE status = 'timed_out' LIMIT %(cap)s) AS c) AS timed_out,
    (SELECT count(*) FROM (SELECT FROM all_runs WHERE status = 'cancelled' LIMIT %(cap)s) AS c) AS cancelled,
    (SELECT count(*) FROM (SELECT FROM all_runs WHERE status = 'skipped' LIMIT %(cap)s) AS c) AS skipped;

-- name: overview_pending_depth
-- Pending runs by effective priority: how many, how many already due, and how long the
-- oldest due one has waited (the dispatch index holds exactly these rows).
SELECT priority, count(*) AS n,
       count(*) FILTER (WHERE run_at <= coalesce(%(now)s::timestamptz, now())) AS due,
       extract(epoch FROM coalesce(%(now)s::timestamptz, now())
               - min(run_at) FILTER (WHERE run_at <= coalesce(%(now)s::timestamptz, now())))::float8
           AS oldest_due_seconds
FROM job_runs WHERE status = 'pending'
GROUP BY priority ORDER BY priority DESC;

-- name: overview_minutes
-- Minute by minute since %(since)s: runs finished, and schedule lag (started_at - run_at)
-- p50/p99 of the runs that started in that minute. Ended runs come from the two
-- finished_at indexes, running ones from the lease index; a run started since then is in
-- one of them. The overview keeps past minutes and asks only for the last ones.
WITH recent AS (
    SELECT status, run_at, started_at, finished_at FROM job_runs
    WHERE status IN ('completed', 'cancelled', 'skipped') AND finished_at >= %(since)s
    UNION ALL
    SELECT status, run_at, started_at, finished_at FROM job_runs
    WHERE status IN ('failed', 'timed_out') AND finished_at >= %(since)s
    UNION ALL
    SELECT status, run_at, started_at, finished_at FROM job_runs WHERE status = 'running'
), finished AS (
    SELECT date_trunc('minute', finished_at) AS minute, count(*) AS finished,
           count(*) FILTER (WHERE status IN ('failed', 'timed_out')) AS failed
    FROM recent WHERE finished_at IS NOT NULL GROUP BY 1
), lag AS (
    SELECT date_trunc('minute', started_at) AS minute,
           percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM started_at - run_at)) AS p50,
           percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM started_at - run_at)) AS p99,
           count(*) AS started
    FROM recent
    WHERE started_at >= %(since)s
    GROUP BY 1
)
SELECT coalesce(f.minute, l.minute) AS minute, coalesce(f.finished, 0) AS finished,
       coalesce(f.failed, 0) AS failed, coalesce(l.started, 0) AS started,
       greatest(l.p50, 0)::float8 AS lag_p50, greatest(l.p99, 0)::float8 AS lag_p99
FROM finished f FULL JOIN lag l ON l.minute = f.minute
ORDER BY 1;

-- name: overview_live_workers
-- Workers that heartbeat within %(stale_seconds)s and have not stopped.
SELECT count(*) AS n FROM workers
WHERE stopped_at IS NULL
  AND last_seen > coalesce(%(now)s::timestamptz, now()) - make_interval(secs => %(stale_seconds)s);

-- name: overview_leaders
-- Who leads each singleton role (the trigger), at which term, and whether the lease holds.
SELECT name, holder, term, acquired_at, lease_until,
       lease_until >= coalesce(%(now)s::timestamptz, now()) AS current
FROM leader_leases ORDER BY name;

-- name: overview_poison_jobs
-- Alert: handlers whose runs ended failed or timed out in the last hour after using
-- retries (attempt > 1), most first (the dead-letter index).
SELECT handler, count(*) AS n, max(finished_at) AS last_at
FROM job_runs
WHERE status IN ('failed', 'timed_out')
  AND finished_at >= coalesce(%(now)s::timestamptz, now()) - interval '1 hour'
  AND attempt > 1
GROUP BY handler ORDER BY n DESC, handler LIMIT 10;

-- name: overview_lease_expiries
-- Alert: attempts whose lease expired (the reaper took the run back) in the last hour.
SELECT count(*) AS n, count(DISTINCT worker) AS workers FROM job_run_attempts
WHERE outcome = 'lost'
  AND finished_at >= coalesce(%(now)s::timestamptz, now()) - interval '1 hour';

-- name: overview_stuck_runs
-- Alert: running runs whose lease ran out more than %(grace_seconds)s ago and that no
-- reaper has taken back (is a reaper running?).
SELECT count(*) AS n, min(lease_until) AS oldest FROM job_runs
WHERE status = 'running'
  AND lease_until < coalesce(%(now)s::timestamptz, now()) - make_interval(secs => %(grace_seconds)s);

-- ---- runs ---------------------------------------------------------------------------------

-- name: run_list
-- (read) runs newest first, one page after keyset `before_id`; every filter optional
-- (NULL: any). The runs page and `sundial runs list` share it. Hot and history as one
-- (`all_runs`): each side walks its own index newest first, merged by id. The names of job and
-- schedule are looked up by key for the page's runs only (after the LIMIT, also when a
-- bitmap, as a search's, needs a sort): not a hash of every job and schedule.
SELECT r.id, r.handler, r.status, r.priority, r.attempt, r.max_retries, r.run_at,
       r.started_at, r.finished_at, r.created_at, r.job_id,
       (SELECT j.name FROM job_definitions j WHERE j.id = r.job_id) AS job_name,
       r.schedule_id, (SELECT s.name FROM schedules s WHERE s.id = r.schedule_id) AS schedule_name,
       r.dag_run_id, r.dag_node, r.cancel_requested, left(r.last_error, 300) AS last_error
FROM all_runs r
WHERE (%(before_id)s::bigint IS NULL OR r.id < %(before_id)s::bigint)
  AND (%(status)s::text IS NULL OR r.status = %(status)s::text)
  AND (%(handler)s::text IS NULL OR r.handler = %(handler)s::text)
  AND (%(job_id)s::uuid IS NULL OR r.job_id = %(job_id)s::uuid)
  AND (%(schedule_id)s::uuid IS NULL OR r.schedule_id = %(schedule_id)s::uuid)
  AND (%(dag_run_id)s::uuid IS NULL OR r.dag_run_id = %(dag_run_id)s::uuid)
  AND (%(since)s::timestamptz IS NULL OR r.created_at >= %(since)s::timestamptz)
  AND (%(until)s::timestamptz IS NULL OR r.created_at < %(until)s::timestamptz)
  AND (%(error)s::text IS NULL OR r.last_error ILIKE %(error)s::text)
  AND (%(queue)s::text IS NULL OR r.queue = %(queue)s::text)
  -- What it carried (app.runs.run_search): args containing any of the documents. Ended
  -- runs by ix_job_runs_args (ix_run_history_args in history), the others by their status's
  -- partial index, one arm each.
  AND (%(args_any)s::jsonb[] IS NULL
       OR (r.status IN ('completed', 'failed', 'timed_out', 'cancelled', 'skipped')
           AND r.args @> ANY(%(args_any)s::jsonb[]))
       OR (r.status = 'pending' AND r.args @> ANY(%(args_any)s::jsonb[]))
       OR (r.status = 'running' AND r.args @> ANY(%(args_any)s::jsonb[]))
       OR (r.status = 'blocked' AND r.args @> ANY(%(args_any)s::jsonb[])))
  -- the result is not indexed: its search walks the runs newest first
  AND (%(result_any)s::jsonb[] IS NULL OR r.result @> ANY(%(result_any)s::jsonb[]))
ORDER BY r.id DESC
LIMIT %(limit)s;

-- name: run_match_count
-- (read) how many runs the runs list's filter matches, and the newest of them: a bulk
-- action's count and where it starts. Its WHERE is run_list's, word for word (a test
-- compares them), so a filter selects the same runs to show and to act on.
SELECT count(*) AS total, max(r.id) AS newest
FROM all_runs r
WHERE (%(before_id)s::bigint IS NULL OR r.id < %(before_id)s::bigint)
  AND (%(status)s::text IS NULL OR r.status = %(status)s::text)
  AND (%(handler)s::text IS NULL OR r.handler = %(handler)s::text)
  AND (%(job_id)s::uuid IS NULL OR r.job_id = %(job_id)s::uuid)
  AND (%(schedule_id)s::uuid IS NULL OR r.schedule_id = %(schedule_id)s::uuid)
  AND (%(dag_run_id)s::uuid IS NULL OR r.dag_run_id = %(dag_run_id)s::uuid)
  AND (%(since)s::timestamptz IS NULL OR r.created_at >= %(since)s::timestamptz)
  AND (%(until)s::timestamptz IS NULL OR r.created_at < %(until)s::timestamptz)
  AND (%(error)s::text IS NULL OR r.last_error ILIKE %(error)s::text)
  AND (%(queue)s::text IS NULL OR r.queue = %(queue)s::text)
  -- What it carried (app.runs.run_search): args containing any of the documents. Ended
  -- runs by ix_job_runs_args (ix_run_history_args in history), the others by their status's
  -- partial index, one arm each.
  AND (%(args_any)s::jsonb[] IS NULL
       OR (r.status IN ('completed', 'failed', 'timed_out', 'cancelled', 'skipped')
           AND r.args @> ANY(%(args_any)s::jsonb[]))
       OR (r.status = 'pending' AND r.args @> ANY(%(args_any)s::jsonb[]))
       OR (r.status = 'running' AND r.args @> ANY(%(args_any)s::jsonb[]))
       OR (r.status = 'blocked' AND r.args @> ANY(%(args_any)s::jsonb[])))
  -- the result is not indexed: its search walks the runs newest first
  AND (%(result_any)s::jsonb[] IS NULL OR r.result @> ANY(%(result_any)s::jsonb[]))
;

-- name: run_match_ids
-- (read) the next batch of a bulk action: ids of runs matching the runs list's filter
-- below keyset `before_id`, newest first. run_list's WHERE, word for word.
SELECT r.id
FROM all_runs r
WHERE (%(before_id)s::bigint IS NULL OR r.id < %(before_id)s::bigint)
  AND (%(status)s::text IS NULL OR r.status = %(status)s::text)
  AND (%(handler)s::text IS NULL OR r.handler = %(handler)s::text)
  AND (%(job_id)s::uuid IS NULL OR r.job_id = %(job_id)s::uuid)
  AND (%(schedule_id)s::uuid IS NULL OR r.schedule_id = %(schedule_id)s::uuid)
  AND (%(dag_run_id)s::uuid IS NULL OR r.dag_run_id = %(dag_run_id)s::uuid)
  AND (%(since)s::timestamptz IS NULL OR r.created_at >= %(since)s::timestamptz)
  AND (%(until)s::timestamptz IS NULL OR r.created_at < %(until)s::timestamptz)
  AND (%(error)s::text IS NULL OR r.last_error ILIKE %(error)s::text)
  AND (%(queue)s::text IS NULL OR r.queue = %(queue)s::text)
  -- What it carried (app.runs.run_search): args containing any of the documents. Ended
  -- runs by ix_job_runs_args (ix_run_history_args in history), the others by their status's
  -- partial index, one arm each.
  AND (%(args_any)s::jsonb[] IS NULL
       OR (r.status IN ('completed', 'failed', 'timed_out', 'cancelled', 'skipped')
           AND r.args @> ANY(%(args_any)s::jsonb[]))
       OR (r.status = 'pending' AND r.args @> ANY(%(args_any)s::jsonb[]))
       OR (r.status = 'running' AND r.args @> ANY(%(args_any)s::jsonb[]))
       OR (r.status = 'blocked' AND r.args @> ANY(%(args_any)s::jsonb[])))
  -- the result is not indexed: its search walks the runs newest first
  AND (%(result_any)s::jsonb[] IS NULL OR r.result @> ANY(%(result_any)s::jsonb[]))
ORDER BY r.id DESC
LIMIT %(limit)s;

-- name: run_search_page_price
-- (read) a search's plan, for the rest of its transaction only: a random page read priced
-- at %(cost)s sequential ones (an SSD's or memory's price) instead of PostgreSQL's default
-- 4 (a spinning disk's). At 4, the planner walks each history day's id index up to its
-- first match rather than read a value's few hundred matches from the day's GIN index.
SELECT set_config('random_page_cost', %(cost)s, true);

-- name: run_job_by_name
-- (read) a job definition's id from its name, for the runs filter.
SELECT id FROM job_definitions WHERE name = %(job)s;

-- name: run_schedule_by_name
-- (read) a schedule's id from its name or its id's text, for the runs filter.
SELECT id FROM schedules WHERE name = %(schedule)s OR id::text = %(schedule)s LIMIT 1;

-- name: run_detail
-- (read) one run with the names of its job definition and schedule, and whether it moved to
-- the history (not in the hot table: nothing retries or cancels it there).
SELECT r.*, j.name AS job_name, s.name AS schedule_name,
       NOT EXISTS (SELECT 1 FROM job_runs h WHERE h.id = r.id) AS in_history
FROM all_runs r
LEFT JOIN job_definitions j ON j.id = r.job_id
LEFT JOIN schedules s ON s.id = r.schedule_id
WHERE r.id = %(id)s;

-- name: run_detail_attempts
-- (read) every finished attempt of a run, oldest first, with error and traceback.
SELECT attempt, worker, outcome, started_at, finished_at, error, traceback, requeued
FROM all_run_attempts WHERE run_id = %(id)s ORDER BY attempt;

-- name: run_detail_upstreams
-- (read) the runs this run waits for (DAG edges).
SELECT r.id, r.dag_node, r.handler, r.status FROM all_run_deps d
JOIN all_runs r ON r.id = d.depends_on
WHERE d.run_id = %(id)s ORDER BY r.id;

-- name: run_detail_downstreams
-- (read) the runs that wait for this run (DAG edges).
SELECT r.id, r.dag_node, r.handler, r.status FROM all_run_deps d
JOIN all_runs r ON r.id = d.run_id
WHERE d.depends_on = %(id)s ORDER BY r.id;

-- ---- workers ------------------------------------------------------------------------------

-- name: workers_live
-- Workers that heartbeat within %(stale_seconds)s and have not stopped.
SELECT id, host, pid, concurrency, handlers, stats, started_at, last_seen,
       extract(epoch FROM coalesce(%(now)s::timestamptz, now()) - last_seen)::float8 AS silent_seconds
FROM workers
WHERE stopped_at IS NULL
  AND last_seen > coalesce(%(now)s::timestamptz, now()) - make_interval(secs => %(stale_seconds)s)
ORDER BY host, pid;

-- name: workers_gone
-- Workers seen in the last hour that stopped, or went silent for %(stale_seconds)s.
SELECT id, host, pid, started_at, last_seen, stopped_at FROM workers
WHERE last_seen >= coalesce(%(now)s::timestamptz, now()) - interval '1 hour'
  AND (stopped_at IS NOT NULL
       OR last_seen <= coalesce(%(now)s::timestamptz, now()) - make_interval(secs => %(stale_seconds)s))
ORDER BY last_seen DESC LIMIT 50;

-- name: workers_released_runs
-- The attempts these workers lost (lease expired, reaped) or handed back at shutdown in
-- the last hour: their runs went back to the queue (or ended).
SELECT a.worker, a.run_id, a.attempt, a.outcome, a.finished_at, r.status, r.handler
FROM job_run_attempts a
LEFT JOIN job_runs r ON r.id = a.run_id
WHERE a.outcome IN ('lost', 'released')
  AND a.finished_at >= coalesce(%(now)s::timestamptz, now()) - interval '1 hour'
  AND a.worker = ANY(%(workers)s::text[])
ORDER BY a.finished_at DESC LIMIT 200;
