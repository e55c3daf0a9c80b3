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
-- (none while the queue is paused: resuming it wakes the workers).
SELECT extract(epoch FROM min(run_at) - coalesce(%(now)s::timestamptz, now()))::float8 AS wait
FROM job_runs WHERE status = 'pending' AND queue = %(queue)s
  AND NOT EXISTS (SELECT FROM queues q WHERE q.name = %(queue)s AND q.paused);

-- name: worker_ping
-- (read) one round trip: proves a connection works before the worker claims more.
SELECT 1;
