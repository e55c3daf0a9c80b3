-- Every statement that changes a run's status. `app/runs/transitions.py` runs them; nothing else may.
-- Each is one conditional statement: the WHERE clause names the states (and, for a
-- leased run, the attempt) it moves a run from, so an actor that lost a race changes
-- 0 rows. `coalesce(%(now)s, now())` lets tests move time; production uses the database
-- clock. One pg_notify per statement (never per row, never with job args) wakes workers
-- (`sundial_runs`) or tells the dashboard's event hub that runs changed (`sundial_events`).
-- New runs are inserted by `run_inserts.sql`, old history deleted by `retention.sql`.
-- Statements given attempts (ids, and each one's attempt) find them by primary key, whatever
-- the statistics say. Those once joined the runs to the arrays sent, and under statistics
-- saying few runs were running (a burst after a quiet spell, kept by a cached plan) the
-- planner walked every running run once per id sent: a heartbeat or a finish of 1,000
-- attempts 10-20 times slower. So the worker's own statements take the ids as
-- `id = ANY(ARRAY(SELECT unnest(ids)))`, which the planner cannot size and so looks up by
-- primary key (given the array itself, it scanned mid-sized tables whole), and the
-- attempts as a JSON object keyed by id: no join to misorder. The others check
-- `(r.status = 'running') IS TRUE`, which the partial lease index cannot match.

-- name: run_find_by_keys
-- (read) the runs already holding these idempotency keys, to compare their payloads.
SELECT id, idempotency_key, handler, args FROM job_runs WHERE idempotency_key = ANY(%(keys)s::text[]);

-- name: run_claim
-- pending -> running: lease up to %(limit)s due runs to one worker, highest effective
-- priority first, then oldest; attempt + 1 is the new fencing token.
-- A suspect (a run whose worker died under it before) runs alone, so that if it kills its
-- worker again it takes no neighbour along: a claim takes the runs ahead of the first
-- suspect it sees, and that suspect alone only when it comes first and the worker holds
-- nothing else (%(busy)s false). A busy worker with a suspect first takes nothing, drains,
-- then takes it: the suspect keeps its place in line.
-- The claim marks the attempt begun (began_attempt), since the worker starts it at once;
-- a process run begins when a pool child takes it (run_mark_begun).
-- It reads one queue (ix_job_runs_dispatch leads with it), and nothing while that queue is
-- paused or has a concurrency or rate limit (one primary-key lookup, evaluated once): a
-- limited queue's runs are claimed by run_claim_limited.
WITH picked AS (
    SELECT id, priority, run_at, crash_count > 0 AS suspect FROM job_runs
    WHERE status = 'pending' AND queue = %(queue)s
      AND run_at <= coalesce(%(now)s::timestamptz, now())
      -- a run past its deadline never starts: the reaper ends it (run_expire)
      AND (deadline IS NULL OR deadline > coalesce(%(now)s::timestamptz, now()))
      AND NOT EXISTS (SELECT FROM queues q WHERE q.name = %(queue)s AND (q.paused OR q.limited))
      -- a run a dependency's circuit breaker holds back waits (the first test is one
      -- check of a small table, evaluated once, true while no breaker holds anything)
      AND (NOT EXISTS (SELECT FROM dependencies WHERE state <> 'closed' OR retries_held)
           OR NOT sundial_breaker_holds(job_id, id, attempt, retry_base))
    ORDER BY priority DESC, run_at
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
), first_suspect AS (
    SELECT id, priority, run_at FROM picked WHERE suspect ORDER BY priority DESC, run_at, id LIMIT 1
), ahead AS (
    SELECT p.id FROM picked p
    WHERE NOT p.suspect AND NOT EXISTS (
        SELECT FROM first_suspect f
        WHERE p.priority < f.priority OR (p.priority = f.priority AND p.run_at >= f.run_at)
    )
), chosen AS (
    SELECT id FROM ahead
    UNION ALL
    SELECT id FROM first_suspect WHERE NOT %(busy)s AND NOT EXISTS (SELECT FROM ahead)
), claimed AS (
UPDATE job_runs r
SET status = 'running',
    lease_owner = %(worker)s,
    lease_until = coalesce(%(now)s::timestamptz, now()) + make_interval(secs => %(lease_seconds)s),
    attempt = r.attempt + 1,
    began_attempt = CASE WHEN r.execution_model = 'process' THEN r.began_attempt ELSE r.attempt + 1 END,
    started_at = coalesce(%(now)s::timestamptz, now()),
    -- a new attempt reports its own progress; a snooze it may have come from is over
    progress = NULL, progress_message = NULL, progress_at = NULL,
    snooze_reason = NULL, snoozed_until = NULL
-- = ANY(ARRAY(...)) keeps the join a primary-key lookup whatever the table statistics say.
WHERE r.id = ANY(ARRAY(SELECT id FROM chosen))
-- JSON as text: the worker decodes it itself, with a shortcut for the common `{}` args.
RETURNING r.id, r.attempt, r.handler, r.args::text AS args, r.execution_model,
          r.timeout_seconds, r.idempotency_key, r.fire_time, r.priority, r.run_at, r.crash_count,
          -- A DAG step reads its upstreams' results, by step name (or run id).
          CASE WHEN r.dag_run_id IS NOT NULL THEN (
              SELECT jsonb_object_agg(coalesce(u.dag_node, u.id::text), u.result)
              FROM job_runs u
              WHERE u.id = ANY(ARRAY(SELECT depends_on FROM job_run_deps d WHERE d.run_id = r.id))
          )::text END AS upstream_results
)
SELECT claimed.* FROM claimed
LEFT JOIN (SELECT pg_notify('sundial_events', 'runs') WHERE EXISTS (SELECT FROM claimed)) AS seen ON true;

-- name: run_limited_running
-- (read) a limited queue's runs running now, by key (the value of args field
-- %(key_field)s; NULL for the runs without it, or when the queue has no per-key limit).
-- A run counts while its lease holds: a worker killed with its runs frees their places
-- when their leases expire, whether or not the reaper has come. Through ix_job_runs_lease.
SELECT args ->> %(key_field)s::text AS key, count(*)::int AS n
FROM job_runs
WHERE status = 'running' AND queue = %(queue)s
  AND lease_until > coalesce(%(now)s::timestamptz, statement_timestamp())
GROUP BY 1;

-- name: run_limited_candidates
-- (read) up to %(scan)s due runs of a limited queue in claim order (highest priority
-- first, then oldest), read past the keys already at their limit (%(full)s, a JSON array:
-- sent as one string, where a list is adapted key by key): one key's backlog holds no other
-- key up. Unlocked: the queue's claims take turns.
SELECT id, args ->> %(key_field)s::text AS key, crash_count > 0 AS suspect
FROM job_runs
WHERE status = 'pending' AND queue = %(queue)s
  AND run_at <= coalesce(%(now)s::timestamptz, statement_timestamp())
  AND (deadline IS NULL OR deadline > coalesce(%(now)s::timestamptz, statement_timestamp()))
  -- (NOT IN over a subquery: one hash of the full keys, not a search per run)
  AND (args ->> %(key_field)s::text IS NULL
       OR args ->> %(key_field)s::text NOT IN (SELECT jsonb_array_elements_text(%(full)s::jsonb)))
  AND (NOT EXISTS (SELECT FROM dependencies WHERE state <> 'closed' OR retries_held)
       OR NOT sundial_breaker_holds(job_id, id, attempt, retry_base))  -- as in run_claim
ORDER BY priority DESC, run_at
LIMIT %(scan)s;

-- name: run_fair_candidates
-- (read) run_limited_candidates for a queue that shares fairly between its keys: its due
-- runs in turns, each key's runs in claim order, %(weights)s[key] of a key's per turn (1
-- unless listed; the runs without a key share one place), a turn's runs by priority, then
-- age. A key with 10,000 runs waiting has as many places in the first turn as a key with
-- one. Reads every due run of the queue (no index holds the keys).
WITH due AS (
    SELECT id, args ->> %(key_field)s::text AS key, crash_count > 0 AS suspect, priority, run_at
    FROM job_runs
    WHERE status = 'pending' AND queue = %(queue)s
      AND run_at <= coalesce(%(now)s::timestamptz, statement_timestamp())
      AND (deadline IS NULL OR deadline > coalesce(%(now)s::timestamptz, statement_timestamp()))
      AND (args ->> %(key_field)s::text IS NULL
           OR args ->> %(key_field)s::text NOT IN (SELECT jsonb_array_elements_text(%(full)s::jsonb)))
      AND (NOT EXISTS (SELECT FROM dependencies WHERE state <> 'closed' OR retries_held)
           OR NOT sundial_breaker_holds(job_id, id, attempt, retry_base))
), ranked AS (
    SELECT id, key, suspect, priority, run_at,
           row_number() OVER (PARTITION BY key ORDER BY priority DESC, run_at, id) AS nth
    FROM due
)
SELECT id, key, suspect
FROM ranked
WHERE nth <= %(scan)s
ORDER BY ceil(nth / coalesce((%(weights)s::jsonb ->> key)::float8, 1)), priority DESC, run_at, id
LIMIT %(scan)s;

-- name: run_claim_limited
-- pending -> running: run_claim for a limited queue, in the queue's claim turn (queues.sql
-- queue_claim_turn). With %(ids)s NULL (limits of concurrency alone: at most
-- %(max_running)s running, at most %(key_max_running)s per key; NULL: no such limit) it
-- counts, chooses and claims in one statement, choosing as `app.runs.limit_fit.fit` does
-- (a test holds the two to the same choice): the due runs in claim order, read past the
-- keys at their limit, a run passed over while its key is full, at most the room the
-- queue has left, and a suspect alone only when it comes first and the worker is not
-- %(busy)s. Otherwise it claims %(ids)s, the runs `limit_fit` chose for a queue with a rate
-- per key or fair share (from run_limited_candidates or the queue's turns). A run
-- cancelled since it was read is passed over (the WHERE clause reads its new version), as
-- is one past its deadline. The lease, fencing token and begun attempt are run_claim's;
-- the clock is the statement's, read after the turn was taken, so a run's start is never
-- before the end of the run whose place it took.
WITH running AS (  -- (read) as run_limited_running: a run counts while its lease holds
    SELECT args ->> %(key_field)s::text AS key, count(*)::int AS n
    FROM job_runs
    WHERE status = 'running' AND queue = %(queue)s
      AND lease_until > coalesce(%(now)s::timestamptz, statement_timestamp())
    GROUP BY 1
), counts AS (  -- one row: the running runs by key (looked up per due run), and in all
    SELECT coalesce(jsonb_object_agg(key, n) FILTER (WHERE key IS NOT NULL), '{}') AS by_key,
           coalesce(sum(n), 0) AS total
    FROM running
), due AS (  -- as run_limited_candidates, the full keys read from `running`
    SELECT id, args ->> %(key_field)s::text AS key, crash_count > 0 AS suspect, priority, run_at
    FROM job_runs
    WHERE status = 'pending' AND queue = %(queue)s
      AND run_at <= coalesce(%(now)s::timestamptz, statement_timestamp())
      AND (deadline IS NULL OR deadline > coalesce(%(now)s::timestamptz, statement_timestamp()))
      AND (args ->> %(key_field)s::text IS NULL
           OR args ->> %(key_field)s::text NOT IN (
               SELECT key FROM running WHERE key IS NOT NULL AND n >= %(key_max_running)s::int))
      AND (NOT EXISTS (SELECT FROM dependencies WHERE state <> 'closed' OR retries_held)
           OR NOT sundial_breaker_holds(job_id, id, attempt, retry_base))  -- as in run_claim
    ORDER BY priority DESC, run_at
    LIMIT %(scan)s
), ranked AS (  -- each due run's place among its key's
    SELECT id, key, suspect, priority, run_at,
           row_number() OVER (PARTITION BY key ORDER BY priority DESC, run_at, id) AS nth
    FROM due
), eligible AS (  -- in claim order, numbered: those whose key stays within its limit
    -- (its running runs looked up in one JSON object, read once: planned before the count,
    -- a join with `running` became a nested loop of every due run against every key)
    SELECT id, suspect, row_number() OVER (ORDER BY priority DESC, run_at, id) AS place
    FROM ranked
    WHERE key IS NULL OR %(key_max_running)s::int IS NULL
       OR nth + coalesce(((SELECT by_key FROM counts) ->> key)::int, 0) <= %(key_max_running)s::int
), room AS (
    SELECT least(%(limit)s::int, %(max_running)s::int - total) AS n FROM counts
), first_suspect AS (
    SELECT min(place) AS place FROM eligible WHERE suspect
), chosen AS (  -- (none of the above is read when the runs are given)
    SELECT e.id FROM eligible e, room, first_suspect f
    WHERE %(ids)s::bigint[] IS NULL
      AND e.place <= room.n AND (f.place IS NULL OR e.place < f.place)
    UNION ALL
    SELECT e.id FROM eligible e, room, first_suspect f
    WHERE %(ids)s::bigint[] IS NULL
      AND e.place = 1 AND f.place = 1 AND room.n >= 1 AND NOT %(busy)s
    UNION ALL
    SELECT unnest(%(ids)s::bigint[])
), claimed AS (
UPDATE job_runs r
SET status = 'running',
    lease_owner = %(worker)s,
    lease_until = coalesce(%(now)s::timestamptz, statement_timestamp())
                  + make_interval(secs => %(lease_seconds)s),
    attempt = r.attempt + 1,
    began_attempt = CASE WHEN r.execution_model = 'process' THEN r.began_attempt ELSE r.attempt + 1 END,
    started_at = coalesce(%(now)s::timestamptz, statement_timestamp()),
    progress = NULL, progress_message = NULL, progress_at = NULL,  -- as run_claim
    snooze_reason = NULL, snoozed_until = NULL
WHERE r.id = ANY(ARRAY(SELECT id FROM chosen)) AND r.status = 'pending'
  -- (a fairly shared queue's turns are kept a moment: a deadline may have passed since)
  AND (r.deadline IS NULL OR r.deadline > coalesce(%(now)s::timestamptz, statement_timestamp()))
RETURNING r.id, r.attempt, r.handler, r.args::text AS args, r.execution_model,
          r.timeout_seconds, r.idempotency_key, r.fire_time, r.priority, r.run_at, r.crash_count,
          CASE WHEN r.dag_run_id IS NOT NULL THEN (
              SELECT jsonb_object_agg(coalesce(u.dag_node, u.id::text), u.result)
              FROM job_runs u
              WHERE u.id = ANY(ARRAY(SELECT depends_on FROM job_run_deps d WHERE d.run_id = r.id))
          )::text END AS upstream_results
)
SELECT claimed.* FROM claimed
LEFT JOIN (SELECT pg_notify('sundial_events', 'runs') WHERE EXISTS (SELECT FROM claimed)) AS seen ON true;

-- name: run_expire
-- pending -> skipped: runs not started by their deadline, up to %(limit)s, the earliest
-- deadline first (through ix_job_runs_expiring), with reason `expired`. Rows a claim or a
-- cancel holds are left to the next sweep (a claim never starts a run past its deadline).
WITH due AS (
    SELECT id FROM job_runs
    WHERE status = 'pending' AND deadline IS NOT NULL
      AND deadline <= coalesce(%(now)s::timestamptz, now())
    ORDER BY deadline
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
), expired AS (
UPDATE job_runs r
SET status = 'skipped', skip_reason = 'expired', finished_at = coalesce(%(now)s::timestamptz, now()),
    last_error = 'not run: not started by its deadline, '
                 || to_char(r.deadline AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS') || ' UTC'
WHERE r.id IN (SELECT id FROM due) AND r.status = 'pending'
RETURNING r.id, r.status, r.dag_run_id IS NOT NULL AS in_dag
)
SELECT expired.* FROM expired
LEFT JOIN (SELECT pg_notify('sundial_events', 'runs') WHERE EXISTS (SELECT FROM expired)) AS seen ON true;

-- name: run_heartbeat
-- running -> running: extend every lease this worker still holds, in one statement.
-- Rows locked by a concurrent finish or cancel are skipped, not waited for (no deadlock);
-- `run_held_check` tells those apart from leases really lost.
WITH held AS (
    SELECT r.id
    FROM job_runs r
    -- by primary key, attempts keyed by id: see the top of this file
    WHERE r.id = ANY(ARRAY(SELECT unnest(%(ids)s::bigint[])))
      AND r.attempt = (%(attempts)s::jsonb ->> r.id::text)::int
      AND (r.status = 'running') IS TRUE AND r.lease_owner = %(worker)s
    FOR UPDATE OF r SKIP LOCKED
)
UPDATE job_runs r
SET lease_until = coalesce(%(now)s::timestamptz, now()) + make_interval(secs => %(lease_seconds)s)
FROM held
WHERE r.id = held.id
RETURNING r.id, r.attempt, r.cancel_requested;

-- name: run_held_check
-- (read) which of these attempts are still leased to this worker.
SELECT r.id, r.attempt, r.cancel_requested
FROM job_runs r
-- by primary key, attempts keyed by id: see the top of this file
WHERE r.id = ANY(ARRAY(SELECT unnest(%(ids)s::bigint[])))
  AND r.attempt = (%(attempts)s::jsonb ->> r.id::text)::int
  AND (r.status = 'running') IS TRUE AND r.lease_owner = %(worker)s;

-- name: run_complete_many
-- running -> completed: the attempts' results, and one history row per attempt. The
-- errors of earlier attempts are cleared from the run (their history rows keep them).
-- The results come as one JSON object keyed by run id, none for runs without a result:
-- far cheaper to send than an array of jsonb.
-- blocked -> pending | blocked | running, in the same statement: the dependents of the
-- DAG steps completed here (and of %(completed_before)s, completed earlier in the caller's
-- transaction). Each loses one remaining upstream per completed edge; one that reaches 0
-- is released. Rows are locked in id order first, so finishes that release shared
-- dependents at the same time queue up instead of deadlocking. Up to %(claim_limit)s of
-- the released steps that are due start at once (highest priority first, then oldest),
-- leased to %(worker)s with the lease and fencing token run_claim gives (attempt + 1):
-- the next step of a chain starts without a notification, another claim or a second
-- write of its row. One row per run changed: the completions (status completed), then the
-- dependents with their new status. Workers are woken for released steps left pending;
-- the dashboard is told of the completions.
WITH done AS (
    UPDATE job_runs r
    SET status = 'completed', finished_at = coalesce(%(now)s::timestamptz, now()), lease_owner = NULL, lease_until = NULL,
        result = %(results)s::jsonb -> r.id::text,
        last_error = NULL, traceback = NULL
    -- by primary key, attempts keyed by id: see the top of this file
    WHERE r.id = ANY(ARRAY(SELECT unnest(%(ids)s::bigint[])))
      AND r.attempt = (%(attempts)s::jsonb ->> r.id::text)::int
      AND (r.status = 'running') IS TRUE
    RETURNING r.id, r.attempt, r.started_at, r.dag_run_id IS NOT NULL AS in_dag, r.result
), history AS (
    INSERT INTO job_run_attempts (run_id, attempt, worker, outcome, started_at, finished_at)
    SELECT id, attempt, %(worker)s, 'completed', started_at, coalesce(%(now)s::timestamptz, now()) FROM done
), edges AS (
    SELECT d.run_id, count(*)::int AS n
    FROM job_run_deps d
    WHERE d.depends_on = ANY(ARRAY(SELECT id FROM done WHERE in_dag) || %(completed_before)s::bigint[])
    GROUP BY d.run_id
), locked AS (
    SELECT r.id, r.upstream_remaining, r.priority, r.run_at, r.queue FROM job_runs r
    WHERE r.id = ANY(ARRAY(SELECT run_id FROM edges)) AND r.status = 'blocked'
    ORDER BY r.id
    FOR UPDATE
), started AS (
    -- only steps of the finishing worker's queue, none while it is paused or limited
    -- (a limited queue's runs start through its claims in turn only)
    SELECT l.id FROM locked l JOIN edges e ON e.run_id = l.id
    WHERE l.upstream_remaining = e.n AND l.run_at <= coalesce(%(now)s::timestamptz, now())
      AND l.queue = %(queue)s
      AND NOT EXISTS (SELECT FROM queues WHERE name = l.queue AND (paused OR limited))
      -- while a circuit breaker holds anything back, released steps wait for run_claim,
      -- which asks whether it holds them (a function: this statement is near its size)
      AND NOT sundial_breakers_hold()
    ORDER BY l.priority DESC, l.run_at
    LIMIT %(claim_limit)s
), released AS (
    -- transition: run_unblock
    UPDATE job_runs r
    SET upstream_remaining = r.upstream_remaining - e.n,
        status = CASE WHEN r.upstream_remaining <> e.n THEN 'blocked'
            WHEN s.id IS NOT NULL THEN 'running' ELSE 'pending' END,
        run_at = CASE WHEN r.upstream_remaining = e.n THEN greatest(r.run_at, coalesce(%(now)s::timestamptz, now()))
            ELSE r.run_at END,
        lease_owner = CASE WHEN s.id IS NOT NULL THEN %(worker)s ELSE r.lease_owner END,
        lease_until = CASE WHEN s.id IS NOT NULL
            THEN coalesce(%(now)s::timestamptz, now()) + make_interval(secs => %(lease_seconds)s)
            ELSE r.lease_until END,
        attempt = r.attempt + CASE WHEN s.id IS NOT NULL THEN 1 ELSE 0 END,
        began_attempt = CASE WHEN s.id IS NOT NULL AND r.execution_model <> 'process'
                             THEN r.attempt + 1 ELSE r.began_attempt END,
        started_at = CASE WHEN s.id IS NOT NULL THEN coalesce(%(now)s::timestamptz, now()) ELSE r.started_at END
    FROM edges e LEFT JOIN started s ON s.id = e.run_id
    WHERE r.id = e.run_id AND r.id = ANY(ARRAY(SELECT id FROM locked)) AND r.status = 'blocked'
    RETURNING r.id, r.status, r.attempt, r.handler, r.args, r.execution_model,
              r.timeout_seconds, r.idempotency_key, r.fire_time, r.priority, r.run_at,
              -- A step started here reads its upstreams' results, by step name (or run
              -- id): those completed in this statement from `done` (its own snapshot
              -- does not show them). The snapshot also predates the wait for the step's
              -- row lock: an upstream completed by a finish that committed during that
              -- wait still looks unfinished here. Then NULL (a started step has
              -- upstreams, so never otherwise): the worker reads them again (run_reads).
              CASE WHEN r.status = 'running' THEN (
                  SELECT CASE WHEN bool_and(u.status = 'completed' OR dn.id IS NOT NULL)
                              THEN jsonb_object_agg(coalesce(u.dag_node, u.id::text),
                                                    CASE WHEN dn.id IS NOT NULL THEN dn.result
                                                         ELSE u.result END) END
                  FROM job_runs u LEFT JOIN done dn ON dn.id = u.id
                  WHERE u.id = ANY(ARRAY(SELECT depends_on FROM job_run_deps d WHERE d.run_id = r.id))
              ) END AS upstream_results
), changed AS (
    SELECT id, 'completed' AS status, attempt, NULL AS handler, NULL AS args,
           NULL AS execution_model, NULL AS timeout_seconds, NULL AS idempotency_key,
           NULL AS fire_time, NULL AS priority, NULL AS run_at, NULL AS upstream_results
    FROM done
    UNION ALL
    SELECT * FROM released
)
SELECT changed.* FROM changed
LEFT JOIN (
    SELECT pg_notify('sundial_runs', '') WHERE EXISTS (SELECT FROM released WHERE status = 'pending')
) AS wake ON true
LEFT JOIN (SELECT pg_notify('sundial_events', 'runs') WHERE EXISTS (SELECT FROM done)) AS seen ON true;

-- name: run_complete_late
-- pending | failed -> completed: an attempt that completed but could not be recorded before
-- the reaper declared it dead (its lease expired, e.g. during a database outage) is still
-- accepted while no newer attempt exists: the run keeps that attempt number and the
-- reaper's error. The reaper's history row of the attempt becomes its completion.
WITH done AS (
    UPDATE job_runs r
    SET status = 'completed', finished_at = coalesce(%(now)s::timestamptz, now()), lease_owner = NULL, lease_until = NULL,
        result = %(result)s, last_error = NULL, traceback = NULL, quarantined = false
    WHERE r.id = %(id)s AND r.attempt = %(attempt)s AND r.status IN ('pending', 'failed')
      -- the reaper's words (run_reap): a crash, a quarantine or a hand-back
      AND (starts_with(r.last_error, 'lease expired') OR starts_with(r.last_error, 'quarantined after'))
    RETURNING r.id, r.attempt, r.dag_run_id IS NOT NULL AS in_dag
), history AS (
    UPDATE job_run_attempts a
    SET outcome = 'completed', worker = %(worker)s, finished_at = coalesce(%(now)s::timestamptz, now()), error = NULL,
        requeued = NULL
    FROM done
    WHERE a.run_id = done.id AND a.attempt = done.attempt AND a.outcome IN ('lost', 'released')
)
SELECT id, attempt, in_dag FROM done;

-- name: run_fail_many
-- running -> pending (a retry after its backoff delay) | failed | timed_out | cancelled.
-- A cancel request always wins; otherwise a retryable error retries while
-- attempt - retry_base <= max_retries, else the run ends with the attempt's outcome.
-- A retryable error of a run whose job calls a dependency with its circuit breaker not
-- closed (held: until it may close) puts the run back without spending the attempt
-- (retry_base + 1), due when the breaker's cool-off ends: no run fails because of it.
WITH ended AS (
    UPDATE job_runs r
    SET (status, run_at, finished_at, retry_base) = (
            SELECT next.status,
                   CASE WHEN next.status = 'pending'
                        THEN greatest(coalesce(%(now)s::timestamptz, now()) + make_interval(secs => f.delay),
                                      held.until)
                        ELSE r.run_at END,
                   CASE WHEN next.status = 'pending' THEN NULL ELSE coalesce(%(now)s::timestamptz, now()) END,
                   r.retry_base + CASE WHEN next.deferred THEN 1 ELSE 0 END
            FROM (SELECT CASE WHEN EXISTS (SELECT FROM dependencies WHERE state <> 'closed') THEN (
                      SELECT max(coalesce(d.reopen_at, coalesce(%(now)s::timestamptz, now())
                                                       + make_interval(secs => d.cool_off_seconds)))
                      FROM job_definitions j JOIN dependencies d ON d.name = ANY(j.dependencies)
                      WHERE j.id = r.job_id AND d.state <> 'closed'
                  ) END AS until) AS held,
                 LATERAL (SELECT CASE
                    WHEN r.cancel_requested OR f.outcome = 'cancelled' THEN 'cancelled'
                    WHEN f.retryable AND held.until IS NOT NULL THEN 'pending'
                    WHEN f.retryable AND r.attempt - r.retry_base <= r.max_retries THEN 'pending'
                    ELSE f.outcome
                 END AS status,
                 NOT r.cancel_requested AND f.outcome <> 'cancelled' AND f.retryable
                     AND held.until IS NOT NULL AS deferred) AS next
        ),
        lease_owner = NULL, lease_until = NULL,
        last_error = f.error, traceback = f.traceback, error_fingerprint = f.fingerprint
    FROM unnest(
        %(ids)s::bigint[], %(attempts)s::int[], %(outcomes)s::text[], %(errors)s::text[],
        %(tracebacks)s::text[], %(retryable)s::bool[], %(delays)s::float8[],
        %(fingerprints)s::text[]
    ) AS f(id, attempt, outcome, error, traceback, retryable, delay, fingerprint)
    -- `IS TRUE`: see the top of this file
    WHERE r.id = f.id AND r.attempt = f.attempt AND (r.status = 'running') IS TRUE
      AND f.outcome IN ('failed', 'timed_out', 'cancelled')
    RETURNING r.id, r.attempt, r.status, r.started_at, f.outcome, f.error, f.traceback,
              r.dag_run_id IS NOT NULL AS in_dag
), history AS (
    INSERT INTO job_run_attempts
        (run_id, attempt, worker, outcome, started_at, finished_at, error, traceback)
    SELECT id, attempt, %(worker)s, outcome, started_at, coalesce(%(now)s::timestamptz, now()), error, traceback FROM ended
)
SELECT id, attempt, status, in_dag FROM ended
LEFT JOIN (SELECT pg_notify('sundial_events', 'runs') WHERE EXISTS (SELECT FROM ended)) AS seen ON true;

-- name: run_crash_many
-- running -> pending | failed (quarantined) | cancelled: a suspect (it crashed before) ran
-- in a child process of its own, and that child died without answering, seen by its living
-- worker. Only this is evidence against the run itself (lone_crashes), since nothing else
-- ran in that process; at its job's max_crashes of those (default %(max_crashes)s) it is
-- quarantined, else re-queued with its old run_at. Spends no ordinary attempt (retry_base + 1).
WITH crashed AS (
    SELECT r.id, r.attempt, f.error,
           coalesce(j.max_crashes, %(max_crashes)s) AS max_crashes,
           NOT r.cancel_requested AND r.lone_crashes + 1 >= coalesce(j.max_crashes, %(max_crashes)s)
               AS quarantine
    FROM unnest(%(ids)s::bigint[], %(attempts)s::int[], %(errors)s::text[]) AS f(id, attempt, error)
    JOIN job_runs r ON r.id = f.id AND r.attempt = f.attempt
    LEFT JOIN job_definitions j ON j.id = r.job_id
), ended AS (
    UPDATE job_runs r
    SET status = CASE
            WHEN r.cancel_requested THEN 'cancelled'
            WHEN c.quarantine THEN 'failed'
            ELSE 'pending'
        END,
        finished_at = CASE
            WHEN r.cancel_requested OR c.quarantine THEN coalesce(%(now)s::timestamptz, now())
        END,
        retry_base = r.retry_base + 1,
        crash_count = r.crash_count + 1,
        lone_crashes = r.lone_crashes + 1,
        quarantined = c.quarantine AND NOT r.cancel_requested,  -- a cancel that came meanwhile wins
        lease_owner = NULL, lease_until = NULL,
        last_error = CASE WHEN c.quarantine
            THEN 'quarantined after ' || r.crash_count + 1 || ' crashes, ' || r.lone_crashes + 1
                 || ' of them in a process of its own: ' || c.error
            ELSE 'crashed in a process of its own (crash ' || r.crash_count + 1 || ', '
                 || r.lone_crashes + 1 || ' of ' || c.max_crashes || '): ' || c.error
        END,
        traceback = NULL,
        error_fingerprint = CASE WHEN c.quarantine THEN %(quarantine_fingerprint)s
                                 ELSE %(crash_fingerprint)s END
    FROM crashed c
    -- `IS TRUE`: see the top of this file
    WHERE r.id = c.id AND r.attempt = c.attempt AND (r.status = 'running') IS TRUE
    RETURNING r.id, r.attempt, r.status, r.started_at, r.last_error, r.quarantined, r.handler,
              r.dag_run_id IS NOT NULL AS in_dag
), history AS (
    INSERT INTO job_run_attempts
        (run_id, attempt, worker, outcome, started_at, finished_at, error, requeued)
    SELECT id, attempt, %(worker)s, 'failed', started_at, coalesce(%(now)s::timestamptz, now()),
           last_error, status = 'pending'
    FROM ended
)
SELECT ended.id, ended.attempt, ended.status, ended.in_dag, ended.quarantined, ended.last_error,
       ended.handler
FROM ended
LEFT JOIN (SELECT pg_notify('sundial_runs', '') WHERE EXISTS (SELECT FROM ended WHERE status = 'pending')) AS wake ON true
LEFT JOIN (SELECT pg_notify('sundial_events', 'runs') WHERE EXISTS (SELECT FROM ended)) AS seen ON true;

-- name: run_release_many
-- running -> pending (or cancelled if that was requested): a stopping worker hands back
-- attempts it did not finish. retry_base + 1 keeps the hand-back off the retry budget.
WITH released AS (
    UPDATE job_runs r
    SET status = CASE WHEN r.cancel_requested THEN 'cancelled' ELSE 'pending' END,
        finished_at = CASE WHEN r.cancel_requested THEN coalesce(%(now)s::timestamptz, now()) END,
        retry_base = r.retry_base + 1,
        lease_owner = NULL, lease_until = NULL
    FROM unnest(%(ids)s::bigint[], %(attempts)s::int[]) AS h(id, attempt)
    -- `IS TRUE`: see the top of this file
    WHERE r.id = h.id AND r.attempt = h.attempt AND (r.status = 'running') IS TRUE
    RETURNING r.id, r.attempt, r.status, r.started_at, r.dag_run_id IS NOT NULL AS in_dag
), history AS (
    INSERT INTO job_run_attempts (run_id, attempt, worker, outcome, started_at, finished_at, error)
    SELECT id, attempt, %(worker)s, 'released', started_at, coalesce(%(now)s::timestamptz, now()), 'handed back at worker shutdown'
    FROM released
)
SELECT released.id, released.attempt, released.status, released.in_dag FROM released
LEFT JOIN (SELECT pg_notify('sundial_runs', '')) AS wake ON true;

-- name: run_reap
-- running -> pending | failed | cancelled: runs whose lease expired (worker died, stalled
-- or partitioned). Three cases, none of which spends an ordinary attempt (retry_base + 1):
-- - a cancel was requested: cancelled;
-- - the attempt never began (claimed, waiting for a process child): handed back, pending;
-- - it began: a crash, counted in crash_count; the run is re-queued as a suspect, to run
--   alone in a process of its own next time (where a crash of its own is seen by its
--   living worker: run_crash_many). A dead worker is no evidence against the runs it held,
--   since it may have been killed from outside; only at %(deaths_per_crash)s times its job's
--   max_crashes (default %(max_crashes)s) is the run quarantined (failed) all the same.
-- A re-queued run keeps its run_at, so its place at the head of the queue. The UPDATE
-- re-checks status and lease under the row lock, so a run that completed or was cancelled
-- meanwhile is never touched, and a cancelled run never re-queued.
WITH expired AS (
    SELECT id, lease_owner, started_at FROM job_runs
    WHERE status = 'running' AND lease_until < coalesce(%(now)s::timestamptz, now())
    ORDER BY lease_until
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
), verdict AS (
    SELECT r.id, e.lease_owner, e.started_at,
           r.began_attempt >= r.attempt AS crashed,
           r.began_attempt >= r.attempt AND NOT r.cancel_requested
               AND r.crash_count + 1 >= %(deaths_per_crash)s * coalesce(j.max_crashes, %(max_crashes)s)
               AS quarantine
    FROM expired e JOIN job_runs r ON r.id = e.id
    LEFT JOIN job_definitions j ON j.id = r.job_id
), reaped AS (
    UPDATE job_runs r
    SET status = CASE
            WHEN r.cancel_requested THEN 'cancelled'
            WHEN g.quarantine THEN 'failed'
            ELSE 'pending'
        END,
        finished_at = CASE
            WHEN r.cancel_requested OR g.quarantine THEN coalesce(%(now)s::timestamptz, now())
        END,
        retry_base = r.retry_base + 1,
        crash_count = r.crash_count + CASE WHEN g.crashed THEN 1 ELSE 0 END,
        quarantined = g.quarantine,
        lease_owner = NULL, lease_until = NULL,
        last_error = CASE
            WHEN NOT g.crashed THEN
                'lease expired before attempt ' || r.attempt || ' began: worker '
                || coalesce(g.lease_owner, '?') || ' stopped; handed back without using an attempt'
            WHEN g.quarantine THEN
                'quarantined after ' || r.crash_count + 1 || ' crashes, each of them a worker death:'
                || ' worker ' || coalesce(g.lease_owner, '?')
                || ' stopped heartbeating during attempt ' || r.attempt
            ELSE
                'lease expired: worker ' || coalesce(g.lease_owner, '?')
                || ' stopped heartbeating during attempt ' || r.attempt
                || ' (crash ' || r.crash_count + 1 || ')'
        END,
        error_fingerprint = CASE WHEN g.quarantine THEN %(quarantine_fingerprint)s
                                 ELSE %(lease_fingerprint)s END
    FROM verdict g
    WHERE r.id = g.id AND r.status = 'running'
      AND r.lease_until < coalesce(%(now)s::timestamptz, now())
    RETURNING r.id, r.attempt, r.status, g.lease_owner, g.started_at, r.last_error,
              g.crashed, r.quarantined, r.crash_count, r.handler, r.job_id,
              r.dag_run_id IS NOT NULL AS in_dag
), history AS (
    INSERT INTO job_run_attempts (run_id, attempt, worker, outcome, started_at, finished_at, error,
                                  requeued)
    SELECT id, attempt, lease_owner, CASE WHEN crashed THEN 'lost' ELSE 'released' END,
           started_at, coalesce(%(now)s::timestamptz, now()), last_error, status = 'pending'
    FROM reaped
    ON CONFLICT (run_id, attempt) DO NOTHING
)
SELECT reaped.id, reaped.attempt, reaped.status, reaped.lease_owner, reaped.in_dag,
       reaped.crashed, reaped.quarantined, reaped.crash_count, reaped.handler,
       reaped.last_error
FROM reaped
LEFT JOIN (SELECT pg_notify('sundial_runs', '')) AS wake ON true;

-- name: run_progress_many
-- running -> running: the latest progress each attempt's handler reported (ctx.progress),
-- many runs in one statement, stamped with the database clock. An attempt that no longer
-- holds its run (finished, reaped, claimed again elsewhere) writes nothing. The reports
-- come as one JSON object keyed by run id: {"12": {"attempt": 3, "value": 40, "message": "..."}}.
-- The dashboard's run pages hear of it on their own topic, `progress`.
WITH reported AS (
    UPDATE job_runs r
    SET progress = (%(reports)s::jsonb -> r.id::text ->> 'value')::float8,
        progress_message = %(reports)s::jsonb -> r.id::text ->> 'message',
        progress_at = coalesce(%(now)s::timestamptz, now())
    -- by primary key, reports keyed by id: see the top of this file
    WHERE r.id = ANY(ARRAY(SELECT unnest(%(ids)s::bigint[])))
      AND r.attempt = (%(reports)s::jsonb -> r.id::text ->> 'attempt')::int
      AND (r.status = 'running') IS TRUE AND r.lease_owner = %(worker)s
    RETURNING r.id, r.attempt
)
SELECT reported.* FROM reported
LEFT JOIN (SELECT pg_notify('sundial_events', 'progress') WHERE EXISTS (SELECT FROM reported)) AS seen ON true;

-- name: run_snooze_many
-- running -> pending (due again after its delay) | failed | cancelled: attempts whose
-- handler snoozed (ctx.snooze), asking to run again later. A snooze spends no attempt
-- (retry_base + 1, as a hand-back) and counts in snooze_count; the run keeps its reason
-- and when it is due again (snoozed_until) until its next claim. One snooze more than
-- %(max_snoozes)s fails the run instead, so a job that snoozes for ever is seen. A cancel
-- requested meanwhile wins. Fenced by attempt and lease owner: an attempt that lost its
-- lease cannot put the run back. A run due again past its deadline is never claimed; the
-- reaper ends it (run_expire). Workers are woken to look again at when the next run is due.
WITH snoozed AS (
    UPDATE job_runs r
    SET (status, run_at, snoozed_until, finished_at, last_error, traceback, error_fingerprint) = (
            SELECT next.status,
                   CASE WHEN next.status = 'pending' THEN next.due ELSE r.run_at END,
                   CASE WHEN next.status = 'pending' THEN next.due END,
                   CASE WHEN next.status <> 'pending' THEN coalesce(%(now)s::timestamptz, now()) END,
                   CASE WHEN next.status = 'failed'
                        THEN 'snoozed ' || r.snooze_count + 1 || ' times, more than the '
                             || %(max_snoozes)s || ' allowed; last reason: ' || s.reason
                        ELSE r.last_error END,
                   CASE WHEN next.status = 'failed' THEN NULL ELSE r.traceback END,
                   CASE WHEN next.status = 'failed' THEN %(fingerprint)s ELSE r.error_fingerprint END
            FROM (SELECT CASE WHEN r.cancel_requested THEN 'cancelled'
                              WHEN r.snooze_count >= %(max_snoozes)s THEN 'failed'
                              ELSE 'pending' END AS status,
                         coalesce(%(now)s::timestamptz, now()) + make_interval(secs => s.delay) AS due
                 ) AS next
        ),
        snooze_reason = s.reason,
        snooze_count = r.snooze_count + 1,
        retry_base = r.retry_base + 1,
        lease_owner = NULL, lease_until = NULL
    FROM unnest(%(ids)s::bigint[], %(attempts)s::int[], %(delays)s::float8[], %(reasons)s::text[])
         AS s(id, attempt, delay, reason)
    -- `IS TRUE`: see the top of this file
    WHERE r.id = s.id AND r.attempt = s.attempt AND (r.status = 'running') IS TRUE
      AND r.lease_owner = %(worker)s
    RETURNING r.id, r.attempt, r.status, r.started_at, s.reason,
              r.dag_run_id IS NOT NULL AS in_dag
), history AS (
    INSERT INTO job_run_attempts
        (run_id, attempt, worker, outcome, started_at, finished_at, error, requeued)
    SELECT id, attempt, %(worker)s, 'snoozed', started_at, coalesce(%(now)s::timestamptz, now()),
           reason, status = 'pending'
    FROM snoozed
)
SELECT snoozed.id, snoozed.attempt, snoozed.status, snoozed.in_dag FROM snoozed
LEFT JOIN (SELECT pg_notify('sundial_runs', '') WHERE EXISTS (SELECT FROM snoozed WHERE status = 'pending')) AS wake ON true
LEFT JOIN (SELECT pg_notify('sundial_events', 'runs') WHERE EXISTS (SELECT FROM snoozed)) AS seen ON true;

-- name: run_mark_begun
-- running -> running: these attempts' handlers began (a process run, once a pool child
-- took it); an attempt the worker no longer holds is left alone.
UPDATE job_runs r
SET began_attempt = r.attempt
-- by primary key, attempts keyed by id: see the top of this file
WHERE r.id = ANY(ARRAY(SELECT unnest(%(ids)s::bigint[])))
  AND r.attempt = (%(attempts)s::jsonb ->> r.id::text)::int
  AND (r.status = 'running') IS TRUE AND r.lease_owner = %(worker)s;

-- name: run_cancel
-- pending | blocked -> cancelled at once; running -> running with cancel_requested, which
-- the worker sees on its next heartbeat and answers by stopping the job.
UPDATE job_runs
SET status = CASE WHEN status = 'running' THEN 'running' ELSE 'cancelled' END,
    finished_at = CASE WHEN status = 'running' THEN NULL ELSE coalesce(%(now)s::timestamptz, now()) END,
    cancel_requested = true
WHERE id = %(id)s AND status IN ('pending', 'blocked', 'running')
RETURNING id, status, dag_run_id IS NOT NULL AS in_dag, pg_notify('sundial_events', 'runs') IS NULL AS notified;

-- name: run_cancel_many
-- pending | blocked -> cancelled at once; running -> running with cancel_requested: a batch
-- of runs a person cancels together (a bulk action), locked in id order like the DAG
-- statements. Runs already ended are left alone: the caller counts them as skipped.
WITH locked AS (
    SELECT id FROM job_runs
    WHERE id = ANY(ARRAY(SELECT unnest(%(ids)s::bigint[]))) AND status IN ('pending', 'blocked', 'running')
    ORDER BY id
    FOR UPDATE
), cancelled AS (
    UPDATE job_runs r
    SET status = CASE WHEN r.status = 'running' THEN 'running' ELSE 'cancelled' END,
        finished_at = CASE WHEN r.status = 'running' THEN NULL ELSE coalesce(%(now)s::timestamptz, now()) END,
        cancel_requested = true
    WHERE r.id IN (SELECT id FROM locked) AND r.status IN ('pending', 'blocked', 'running')
    RETURNING r.id, r.status, r.dag_run_id IS NOT NULL AS in_dag
)
SELECT cancelled.id, cancelled.status, cancelled.in_dag FROM cancelled
LEFT JOIN (SELECT pg_notify('sundial_events', 'runs')) AS wake ON true;

-- name: run_retry
-- failed | timed_out | cancelled -> pending: a person retries a dead letter with a fresh
-- retry budget (and, when %(args)s is given, new args). attempt is kept: the next claim
-- still moves the fencing token forward. A quarantined run gets a fresh crash budget too.
WITH retried AS (
    UPDATE job_runs
    SET status = 'pending', run_at = coalesce(%(now)s::timestamptz, now()), finished_at = NULL, cancel_requested = false,
        retry_base = attempt, crash_count = 0, lone_crashes = 0, quarantined = false, priority = base_priority, lease_owner = NULL, lease_until = NULL,
        args = coalesce(%(args)s::jsonb, args)
    WHERE id = %(id)s AND status IN ('failed', 'timed_out', 'cancelled')
    RETURNING id, status, dag_run_id
)
SELECT retried.id, retried.status, retried.dag_run_id FROM retried
LEFT JOIN (SELECT pg_notify('sundial_runs', '')) AS wake ON true;

-- name: run_retry_many
-- failed | timed_out | cancelled -> pending: a batch of runs a person retries together (a
-- bulk action), each as run_retry does it, with its own args; locked in id order. Runs in
-- other states, and runs of handlers that run commands unless %(may_run_commands)s, are
-- left alone: the caller counts them as skipped.
WITH locked AS (
    SELECT id FROM job_runs
    WHERE id = ANY(ARRAY(SELECT unnest(%(ids)s::bigint[]))) AND status IN ('failed', 'timed_out', 'cancelled')
      AND (%(may_run_commands)s OR handler <> ALL(%(command_handlers)s::text[]))
    ORDER BY id
    FOR UPDATE
), retried AS (
    UPDATE job_runs
    SET status = 'pending', run_at = coalesce(%(now)s::timestamptz, now()), finished_at = NULL, cancel_requested = false,
        retry_base = attempt, crash_count = 0, lone_crashes = 0, quarantined = false, priority = base_priority, lease_owner = NULL, lease_until = NULL
    WHERE id IN (SELECT id FROM locked) AND status IN ('failed', 'timed_out', 'cancelled')
    RETURNING id, status, dag_run_id
)
SELECT retried.id, retried.status, retried.dag_run_id FROM retried
LEFT JOIN (SELECT pg_notify('sundial_runs', '')) AS wake ON true;

-- name: run_lock_skipped_downstream
-- The steps skipped because run %(id)s did not complete, transitively, locked; and every
-- upstream of theirs with its status, share-locked so none finishes before this retry
-- commits (its finish then sees them blocked again and releases them). NOWAIT: a step
-- finishing right now makes the caller try again rather than risk a deadlock.
WITH RECURSIVE downstream(id) AS (
    SELECT d.run_id FROM job_run_deps d
    JOIN job_runs r ON r.id = d.run_id
    WHERE d.depends_on = %(id)s AND r.status = 'skipped' AND r.skip_reason = 'upstream_failed'
    UNION
    SELECT d.run_id FROM job_run_deps d
    JOIN downstream ON d.depends_on = downstream.id
    JOIN job_runs r ON r.id = d.run_id
    WHERE r.status = 'skipped' AND r.skip_reason = 'upstream_failed'
), skipped AS (
    SELECT r.id FROM job_runs r
    WHERE r.id IN (SELECT id FROM downstream)
    ORDER BY r.id
    FOR UPDATE NOWAIT
)
SELECT d.run_id, d.depends_on, u.status AS upstream_status
FROM job_run_deps d
JOIN job_runs u ON u.id = d.depends_on
WHERE d.run_id IN (SELECT id FROM skipped)
ORDER BY u.id
FOR SHARE OF u NOWAIT;

-- name: run_unskip
-- skipped -> blocked: steps skipped for an upstream that is retried wait for it again, each
-- with the number of its upstreams not yet completed.
UPDATE job_runs r
SET status = 'blocked', upstream_remaining = w.remaining, finished_at = NULL,
    skip_reason = NULL, last_error = NULL
FROM jsonb_to_recordset(%(waiting)s::jsonb) AS w(id bigint, remaining int)
WHERE r.id = w.id AND r.status = 'skipped' AND r.skip_reason = 'upstream_failed'
RETURNING r.id;

-- name: run_age_priorities
-- pending -> pending: one priority level per %(age_seconds)s a run has waited past its
-- run_at, at most %(max_boost)s above its base and never past the highest priority
-- (32767, the top of smallint), so low-priority work cannot starve. Sums are int: in
-- smallint they overflow at the ends of the range.
WITH stale AS (
    SELECT id FROM job_runs
    WHERE status = 'pending'
      AND priority < least(base_priority::int + %(max_boost)s::int, 32767)
      AND run_at < coalesce(%(now)s::timestamptz, now())
                   - make_interval(secs => %(age_seconds)s * (priority::int - base_priority + 1))
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
)
UPDATE job_runs r SET priority = r.priority + 1
FROM stale WHERE r.id = stale.id AND r.status = 'pending'
RETURNING r.id, r.priority;

-- name: run_skip_downstream
-- blocked -> skipped: every transitive dependent of runs that ended without completing
-- (failed, timed out, cancelled), in the same transaction as that ending. This statement's
-- snapshot predates its wait for a dependent's row lock: a step the holder committed
-- meanwhile (a run submitted after that dependent, a step a retry made wait again) is not
-- seen, so the caller runs it again from the steps it skipped, until it skips none.
WITH RECURSIVE downstream(id) AS (
    SELECT d.run_id FROM job_run_deps d WHERE d.depends_on = ANY(%(ids)s::bigint[])
    UNION
    SELECT d.run_id FROM job_run_deps d JOIN downstream ON d.depends_on = downstream.id
), locked AS (
    SELECT r.id FROM job_runs r
    WHERE r.id IN (SELECT id FROM downstream) AND r.status = 'blocked'
    ORDER BY r.id
    FOR UPDATE
)
UPDATE job_runs r
SET status = 'skipped', skip_reason = 'upstream_failed', finished_at = coalesce(%(now)s::timestamptz, now()),
    last_error = 'not run: an upstream run did not complete'
WHERE r.id IN (SELECT id FROM locked) AND r.status = 'blocked'
RETURNING r.id;

-- name: run_cancel_dag
-- pending | blocked -> cancelled at once, running -> cancel requested: every unfinished run
-- of one DAG run (locked in id order, like the other DAG statements).
WITH locked AS (
    SELECT id FROM job_runs
    WHERE dag_run_id = %(dag_run_id)s AND status IN ('pending', 'blocked', 'running')
    ORDER BY id
    FOR UPDATE
)
UPDATE job_runs r
SET status = CASE WHEN r.status = 'running' THEN 'running' ELSE 'cancelled' END,
    finished_at = CASE WHEN r.status = 'running' THEN NULL ELSE coalesce(%(now)s::timestamptz, now()) END,
    cancel_requested = true
WHERE r.id IN (SELECT id FROM locked) AND r.status IN ('pending', 'blocked', 'running')
RETURNING r.id, r.status, pg_notify('sundial_events', 'runs') IS NULL AS notified;

-- name: run_dag_edges
-- (new) DAG edges between runs submitted in the same transaction.
INSERT INTO job_run_deps (run_id, depends_on)
SELECT * FROM unnest(%(run_ids)s::bigint[], %(depends_on)s::bigint[]);

-- name: run_lock_upstreams
-- (read, locking) the would-be upstreams of a new run, so none can finish unseen while
-- the run and its edges are inserted.
SELECT id, status, dag_run_id FROM job_runs
WHERE id = ANY(%(ids)s::bigint[])
ORDER BY id
FOR UPDATE;

-- name: run_join_dag
-- (no status change) an upstream that belonged to no DAG run joins the new run's.
UPDATE job_runs SET dag_run_id = %(dag_run_id)s
WHERE id = ANY(%(ids)s::bigint[]) AND dag_run_id IS NULL;
