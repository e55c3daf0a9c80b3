-- Statements about worker processes (not runs): registration, liveness, idle sleeps.
-- Registration and liveness notify `sundial_events` ('workers') for the dashboard.

-- name: worker_register
-- A worker announces itself, the handlers it can run and the args schemas they declare.
INSERT INTO workers (id, host, pid, concurrency, handlers, handler_args, stats, started_at,
                     last_seen)
VALUES (%(id)s, %(host)s, %(pid)s, %(concurrency)s, %(handlers)s, %(handler_args)s, %(stats)s,
        coalesce(%(now)s::timestamptz, now()), coalesce(%(now)s::timestamptz, now()))
RETURNING pg_notify('sundial_events', 'workers') IS NULL AS notified;

-- name: worker_refresh
-- Liveness and load, every heartbeat.
UPDATE workers SET last_seen = coalesce(%(now)s::timestamptz, now()), stats = %(stats)s
WHERE id = %(id)s
RETURNING pg_notify('sundial_events', 'workers') IS NULL AS notified;

-- name: worker_unregister
-- A clean stop.
UPDATE workers
SET stopped_at = coalesce(%(now)s::timestamptz, now()), last_seen = coalesce(%(now)s::timestamptz, now()),
    stats = %(stats)s
WHERE id = %(id)s
RETURNING pg_notify('sundial_events', 'workers') IS NULL AS notified;

-- name: worker_seconds_until_next_due
-- How long an idle worker may sleep before the earliest pending run of its queue is due
-- (none while the queue is paused: resuming it wakes the workers). The earliest run of a
-- priority is the first of that priority in ix_job_runs_dispatch: one index descent per
-- priority waiting (a handful), where min(run_at) read every pending run (40 ms for a
-- backlog of 100,000, after each claim of a queue whose limits hold runs back).
WITH RECURSIVE firsts(priority, run_at) AS (
    (SELECT priority, run_at FROM job_runs
     WHERE status = 'pending' AND queue = %(queue)s
     ORDER BY priority DESC, run_at LIMIT 1)
    UNION ALL
    SELECT next.priority, next.run_at FROM firsts f, LATERAL (
        SELECT priority, run_at FROM job_runs
        WHERE status = 'pending' AND queue = %(queue)s AND priority < f.priority
        ORDER BY priority DESC, run_at LIMIT 1
    ) next
)
SELECT extract(epoch FROM min(run_at) - coalesce(%(now)s::timestamptz, now()))::float8 AS wait
FROM firsts WHERE NOT EXISTS (SELECT FROM queues q WHERE q.name = %(queue)s AND q.paused);

-- name: worker_ping
-- (read) one round trip: proves a connection works before the worker claims more.
SELECT 1;
