-- Named queues: their fleet-wide pause, and what the Queues page and /metrics show of them.
-- A queue exists as soon as a run names it; `queues` holds the ones with settings.

-- name: queue_pause
-- (no run status change) pause a queue: the claim takes nothing from it while paused.
INSERT INTO queues (name, paused, paused_by, paused_note, paused_at, updated_at)
VALUES (%(name)s, true, %(actor)s, %(note)s, coalesce(%(now)s::timestamptz, now()),
        coalesce(%(now)s::timestamptz, now()))
ON CONFLICT (name) DO UPDATE
SET paused = true, paused_by = EXCLUDED.paused_by, paused_note = EXCLUDED.paused_note,
    paused_at = EXCLUDED.paused_at, updated_at = EXCLUDED.updated_at;

-- name: queue_resume
-- (no run status change) resume a queue, and wake the workers (they sleep while it is
-- paused).
WITH resumed AS (
    UPDATE queues
    SET paused = false, paused_by = NULL, paused_note = NULL, paused_at = NULL,
        updated_at = coalesce(%(now)s::timestamptz, now())
    WHERE name = %(name)s
    RETURNING name
)
SELECT resumed.name FROM resumed
LEFT JOIN (SELECT pg_notify('sundial_runs', '')) AS wake ON true;

-- name: queue_setting
-- (read) one queue's settings, if it has any, with its rate limit's starts available now
-- (the bucket refilled by the time passed, up to its burst) and the clock that says so.
SELECT name, paused, paused_by, paused_note, paused_at, max_running, key_field, key_max_running,
       rate_limit, rate_period_seconds, rate_burst, rate_per_key, fair_share, key_weights,
       least(rate_burst::float8,
             coalesce(rate_tokens, rate_burst)
             + greatest(0, extract(epoch FROM coalesce(%(now)s::timestamptz, statement_timestamp())
                                              - rate_tokens_at))
               * rate_limit / rate_period_seconds) AS rate_tokens_now,
       coalesce(%(now)s::timestamptz, statement_timestamp()) AS clock
FROM queues WHERE name = %(name)s;

-- name: queue_spend_tokens
-- (no run status change) what is left of a queue's rate-limit bucket after a claim, at
-- the clock queue_setting read (in the same claim turn).
UPDATE queues SET rate_tokens = %(tokens)s, rate_tokens_at = %(clock)s WHERE name = %(name)s;

-- name: queue_set_limits
-- (no run status change) a queue's concurrency and rate limits (NULL: none) and fair share, its rate
-- bucket full (its burst), and wake the workers:
-- runs held back by a limit raised or removed may start now.
WITH set AS (
    INSERT INTO queues (name, max_running, key_field, key_max_running, rate_limit,
                        rate_period_seconds, rate_burst, rate_per_key, fair_share, key_weights,
                        rate_tokens, rate_tokens_at, limits_by, limits_at, updated_at)
    VALUES (%(name)s, %(max_running)s, %(key_field)s, %(key_max_running)s, %(rate_limit)s,
            %(rate_period_seconds)s, %(rate_burst)s, %(rate_per_key)s, %(fair_share)s,
            %(key_weights)s, %(rate_tokens)s,
            coalesce(%(now)s::timestamptz, now()), %(actor)s,
            coalesce(%(now)s::timestamptz, now()), coalesce(%(now)s::timestamptz, now()))
    ON CONFLICT (name) DO UPDATE
    SET max_running = EXCLUDED.max_running, key_field = EXCLUDED.key_field,
        key_max_running = EXCLUDED.key_max_running, rate_limit = EXCLUDED.rate_limit,
        rate_period_seconds = EXCLUDED.rate_period_seconds, rate_burst = EXCLUDED.rate_burst,
        rate_per_key = EXCLUDED.rate_per_key, fair_share = EXCLUDED.fair_share,
        key_weights = EXCLUDED.key_weights,
        rate_tokens = EXCLUDED.rate_tokens, rate_tokens_at = EXCLUDED.rate_tokens_at,
        limits_by = EXCLUDED.limits_by, limits_at = EXCLUDED.limits_at,
        updated_at = EXCLUDED.updated_at
    RETURNING name
), turns_forgotten AS (  -- read afresh, with the new weights
    DELETE FROM queue_fair_turns WHERE queue = %(name)s
)
SELECT set.name FROM set
LEFT JOIN (SELECT pg_notify('sundial_runs', '')) AS wake ON true;

-- name: queue_limited
-- (read) whether a queue has a concurrency or rate limit or shares fairly: its workers then claim through
-- run_claim_limited, one claim at a time.
SELECT limited FROM queues WHERE name = %(name)s;

-- name: queue_key_rates_starved
-- (read) the keys of a queue whose rate buckets hold less than one start now: the read of
-- due runs passes over theirs. (A refilled key's row is dropped by the reaper, so these
-- are the keys that started runs lately.)
SELECT b.key
FROM queue_key_rates b JOIN queues q ON q.name = b.queue
WHERE b.queue = %(queue)s
  AND b.tokens + greatest(0, extract(epoch FROM %(clock)s::timestamptz - b.at))
                 * q.rate_limit / q.rate_period_seconds < 1;

-- name: queue_key_rates_of
-- (read) these keys' starts available now (their buckets refilled by the time passed, up
-- to the burst); a key without a row has a full bucket.
SELECT b.key,
       least(q.rate_burst::float8,
             b.tokens + greatest(0, extract(epoch FROM %(clock)s::timestamptz - b.at))
                        * q.rate_limit / q.rate_period_seconds) AS tokens
FROM queue_key_rates b JOIN queues q ON q.name = b.queue
WHERE b.queue = %(queue)s AND b.key = ANY(%(keys)s::text[]);

-- name: queue_key_rates_spend
-- (no run status change) what the keys that started runs have left, at the claim's clock.
INSERT INTO queue_key_rates (queue, key, tokens, at)
SELECT %(queue)s, k.key, k.tokens, %(clock)s
FROM unnest(%(keys)s::text[], %(tokens)s::float8[]) AS k(key, tokens)
ON CONFLICT (queue, key) DO UPDATE SET tokens = EXCLUDED.tokens, at = EXCLUDED.at;

-- name: queue_key_rates_prune
-- (no run status change) the key buckets refilled to their burst (a key without a row has
-- a full one), and those of queues whose rate no longer applies per key.
DELETE FROM queue_key_rates b
USING queues q
WHERE q.name = b.queue
  AND (NOT q.rate_per_key
       OR b.tokens + extract(epoch FROM coalesce(%(now)s::timestamptz, now()) - b.at)
                     * q.rate_limit / q.rate_period_seconds >= q.rate_burst);

-- name: queue_claim_turn
-- (no run status change) wait for this queue's claim turn, held to the end of the
-- transaction: claims of a limited queue count its running runs one after another, each
-- seeing the runs the one before started (the next statement's snapshot is taken after).
-- The claim's reads walk their indexes for the rest of the transaction, never as a bitmap:
-- a bitmap scan leaves the index entries of runs that ended since the last vacuum as they
-- are, so during a drain each count of the running runs read tens of thousands of them
-- (8 ms); a walk marks them dead as it passes, and the next count skips them (1 ms).
SELECT pg_advisory_xact_lock(hashtextextended('sundial.queue:' || %(queue)s, 0)),
       set_config('enable_bitmapscan', 'off', true);

-- name: queue_overview
-- (read) every queue that has settings, waiting or running runs, or ended runs in the last
-- %(minutes)s minutes: depth (pending), due now, running, the oldest due run's wait, and
-- runs ended per minute (oldest minute first). Pending runs through ix_job_runs_dispatch,
-- running ones through ix_job_runs_lease, ended ones through the two indexes of ended runs.
WITH live AS (
    SELECT queue,
           count(*) FILTER (WHERE status = 'pending') AS pending,
           count(*) FILTER (WHERE status = 'pending'
                            AND run_at <= coalesce(%(now)s::timestamptz, now())) AS due,
           count(*) FILTER (WHERE status = 'running') AS running,
           min(run_at) FILTER (WHERE status = 'pending'
                               AND run_at <= coalesce(%(now)s::timestamptz, now())) AS oldest_due
    FROM job_runs WHERE status IN ('pending', 'running')
    GROUP BY queue
), ended AS (
    SELECT queue, finished_at FROM job_runs
    WHERE status IN ('completed', 'cancelled', 'skipped')
      AND finished_at > coalesce(%(now)s::timestamptz, now()) - make_interval(mins => %(minutes)s)
    UNION ALL
    SELECT queue, finished_at FROM job_runs
    WHERE status IN ('failed', 'timed_out')
      AND finished_at > coalesce(%(now)s::timestamptz, now()) - make_interval(mins => %(minutes)s)
), counted AS (
    -- each ended run counted once, in its minute: minute i (oldest first) holds the ends in
    -- (now - (%(minutes)s - i) min, now - (%(minutes)s - i - 1) min]. (Matching every run
    -- against every minute took 0.9 s with 100,000 runs ended in the hour.)
    SELECT queue,
           %(minutes)s - 1 - floor(extract(epoch FROM coalesce(%(now)s::timestamptz, now())
                                                      - finished_at) / 60)::int AS minute,
           count(*) AS n
    FROM ended
    GROUP BY 1, 2
), per_minute AS (
    SELECT q.queue, array_agg(coalesce(c.n, 0) ORDER BY m.minute) AS minutes
    FROM (SELECT DISTINCT queue FROM counted) q
    CROSS JOIN generate_series(0, %(minutes)s - 1) AS m(minute)
    LEFT JOIN counted c ON c.queue = q.queue AND c.minute = m.minute
    GROUP BY q.queue
), names AS (
    SELECT queue AS name FROM live
    UNION SELECT queue FROM per_minute
    UNION SELECT name FROM queues
    UNION SELECT 'default'
)
SELECT n.name,
       coalesce(l.pending, 0) AS pending, coalesce(l.due, 0) AS due,
       coalesce(l.running, 0) AS running,
       extract(epoch FROM coalesce(%(now)s::timestamptz, now()) - l.oldest_due)::float8
           AS oldest_wait_seconds,
       coalesce(p.minutes, array_fill(0, ARRAY[%(minutes)s])) AS ended_per_minute,
       coalesce(s.paused, false) AS paused, s.paused_by, s.paused_note, s.paused_at,
       s.max_running, s.key_field, s.key_max_running, s.rate_limit, s.rate_period_seconds,
       s.rate_burst, coalesce(s.rate_per_key, false) AS rate_per_key,
       coalesce(s.fair_share, false) AS fair_share, coalesce(s.key_weights, '{}') AS key_weights,
       s.limits_by, s.limits_at
FROM names n
LEFT JOIN live l ON l.queue = n.name
LEFT JOIN per_minute p ON p.queue = n.name
LEFT JOIN queues s ON s.name = n.name
ORDER BY n.name;

-- name: queue_fair_turns_read
-- (read) a fairly shared queue's turns as its claims last kept them, and whether they were
-- read less than %(fresh_seconds)s before the claim's clock.
SELECT ids, keys, suspects, read_at,
       read_at > %(clock)s::timestamptz - make_interval(secs => %(fresh_seconds)s) AS fresh
FROM queue_fair_turns WHERE queue = %(queue)s;

-- name: queue_fair_turns_keep
-- (no run status change) a fairly shared queue's turns left after a claim; `read_at` says
-- when they were read from the runs (a claim that took from them keeps theirs).
INSERT INTO queue_fair_turns (queue, ids, keys, suspects, read_at)
VALUES (%(queue)s, %(ids)s, %(keys)s, %(suspects)s, %(read_at)s)
ON CONFLICT (queue) DO UPDATE
SET ids = EXCLUDED.ids, keys = EXCLUDED.keys, suspects = EXCLUDED.suspects,
    read_at = EXCLUDED.read_at;
