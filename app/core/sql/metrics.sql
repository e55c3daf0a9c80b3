-- What /metrics reads. Each statement is backed by a partial index over a small set (the
-- pending queue, running leases, blocked steps, lost attempts) or by a time window over
-- an index of finish or fire times: none scans job_runs whole.

-- name: metrics_pending
-- (read) each queue by priority: depth, runs due now, and the oldest due run's run_at
-- (ix_job_runs_dispatch).
SELECT queue, priority, count(*) AS n,
       count(*) FILTER (WHERE run_at <= coalesce(%(now)s::timestamptz, now())) AS due,
       min(run_at) FILTER (WHERE run_at <= coalesce(%(now)s::timestamptz, now())) AS oldest_due,
       coalesce(%(now)s::timestamptz, now()) AS now
FROM job_runs WHERE status = 'pending'
GROUP BY queue, priority;

-- name: metrics_paused_queues
-- (read) the queues paused now (a handful at most).
SELECT name FROM queues WHERE paused;

-- name: metrics_queue_limits
-- (read) the queues with concurrency or rate limits (a handful at most).
SELECT name, max_running, key_field, key_max_running,
       rate_limit::float8 / rate_period_seconds AS rate_per_second
FROM queues
WHERE limited;

-- name: metrics_finished_recent
-- (read) runs that ended within the window, by handler and status, with their schedule lag
-- (started_at - run_at) and attempt count as bucket numbers of the given bounds
-- (width_bucket: 0 below the first bound). One branch per partial index of ended runs.
WITH ended AS (
    SELECT handler, status, started_at, run_at, attempt FROM job_runs
    WHERE status IN ('completed', 'cancelled', 'skipped')
      AND finished_at > coalesce(%(now)s::timestamptz, now()) - make_interval(secs => %(window_seconds)s)
    UNION ALL
    SELECT handler, status, started_at, run_at, attempt FROM job_runs
    WHERE status IN ('failed', 'timed_out')
      AND finished_at > coalesce(%(now)s::timestamptz, now()) - make_interval(secs => %(window_seconds)s)
)
SELECT handler, status,
       width_bucket(extract(epoch FROM started_at - run_at)::float8, %(lag_bounds)s::float8[])
           AS lag_bucket,
       width_bucket(attempt::float8, %(attempt_bounds)s::float8[]) AS attempt_bucket,
       started_at IS NOT NULL AS started,
       count(*) AS n,
       coalesce(sum(extract(epoch FROM started_at - run_at)::float8), 0) AS lag_sum,
       sum(attempt) AS attempt_sum
FROM ended
GROUP BY 1, 2, 3, 4, 5;

-- name: metrics_queue_work
-- (read) per queue, the runs that ended within the window having started: how many and
-- their run time together, what the worker-count hint (app/observability/worker_hint.py)
-- sizes a queue's workers by. One branch per partial index of ended runs.
WITH ended AS (
    SELECT queue, started_at, finished_at FROM job_runs
    WHERE status IN ('completed', 'cancelled', 'skipped')
      AND finished_at > coalesce(%(now)s::timestamptz, now()) - make_interval(secs => %(window_seconds)s)
    UNION ALL
    SELECT queue, started_at, finished_at FROM job_runs
    WHERE status IN ('failed', 'timed_out')
      AND finished_at > coalesce(%(now)s::timestamptz, now()) - make_interval(secs => %(window_seconds)s)
)
SELECT queue, count(*) AS n,
       coalesce(sum(extract(epoch FROM finished_at - started_at)), 0)::float8 AS run_seconds
FROM ended
WHERE started_at IS NOT NULL
GROUP BY queue;

-- name: metrics_counts
-- (read) one round trip for the single figures: the reading's clock, runs holding a lease
-- (ix_job_runs_lease), DAG steps waiting for upstreams (ix_job_runs_blocked), and the
-- attempts the reaper declared lost with, of those, the ones after which it re-queued the
-- run (both index-only on ix_job_run_attempts_lost_requeued). History pruned by retention
-- drops out of both.
SELECT coalesce(%(now)s::timestamptz, now()) AS now,
       (SELECT count(*) FROM job_runs WHERE status = 'running') AS running,
       (SELECT count(*) FROM job_runs WHERE status = 'blocked') AS blocked,
       lost.expired, lost.requeued
FROM (
    SELECT count(*) AS expired, count(*) FILTER (WHERE requeued) AS requeued
    FROM job_run_attempts WHERE outcome = 'lost'
) AS lost;

-- name: metrics_fires_recent
-- (read) schedule fires within the window by outcome (ix_schedule_fires_fire_time_brin).
SELECT outcome, count(*) AS n FROM schedule_fires
WHERE fire_time > coalesce(%(now)s::timestamptz, now()) - make_interval(secs => %(window_seconds)s)
  AND fire_time <= coalesce(%(now)s::timestamptz, now())
GROUP BY outcome;

-- name: metrics_leaders
-- (read) each singleton role's lease: its term and whether someone holds it now.
SELECT name, term, lease_until > coalesce(%(now)s::timestamptz, now()) AS held
FROM leader_leases;

-- name: metrics_workers
-- (read) what workers report: live ones (recent heartbeat, not stopped) with their load;
-- every row, live or not, for the finishes they discarded.
SELECT id, concurrency, stats,
       stopped_at IS NULL
       AND last_seen > coalesce(%(now)s::timestamptz, now()) - make_interval(secs => %(live_seconds)s)
           AS live
FROM workers;
