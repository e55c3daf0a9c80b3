-- Circuit breakers and retry budgets per dependency (`app.runs.breakers`): the services job
-- definitions name as called by their runs. The claims hold runs back through
-- sundial_breaker_holds (migration 0025); run_fail_many defers the failures of runs whose
-- breaker is not closed.

-- name: breaker_any
-- (read) whether any dependency is named: only then are calls recorded.
SELECT EXISTS (SELECT FROM dependencies) AS any;

-- name: breaker_record_calls
-- (no run status change) how these runs' attempts just ended, once per dependency their
-- job calls: ok or not, and whether the attempt was a retry (an ordinary attempt after
-- the first).
INSERT INTO dependency_calls (dependency, at, ok, retry)
SELECT d.name, coalesce(%(now)s::timestamptz, now()), c.ok, r.attempt - r.retry_base > 1
FROM unnest(%(ids)s::bigint[], %(ok)s::bool[]) AS c(id, ok)
JOIN job_runs r ON r.id = c.id
JOIN job_definitions j ON j.id = r.job_id
CROSS JOIN unnest(j.dependencies) AS d(name);

-- name: breaker_seen
-- (read) every dependency with what its breaker rules read: its calls and failures (in
-- its window while closed or open, since it went half-open while half-open), its trial
-- runs still waiting or running, and its retries and first attempts in the retry window.
SELECT d.*, c.calls, c.failures, r.retries, r.first_calls,
       (SELECT count(*) FROM job_runs t
        WHERE t.id = ANY(d.probe_runs) AND t.status IN ('pending', 'running', 'blocked'))::int
           AS trials_left,
       coalesce(%(now)s::timestamptz, now()) AS clock
FROM dependencies d
CROSS JOIN LATERAL (
    SELECT count(*)::int AS calls, count(*) FILTER (WHERE NOT ok)::int AS failures
    FROM dependency_calls
    WHERE dependency = d.name
      AND at >= CASE WHEN d.state = 'half_open' THEN d.state_since
                    ELSE greatest(d.state_since, coalesce(%(now)s::timestamptz, now())
                                                 - make_interval(secs => d.window_seconds)) END
) c
CROSS JOIN LATERAL (
    SELECT count(*) FILTER (WHERE retry)::int AS retries,
           count(*) FILTER (WHERE NOT retry)::int AS first_calls
    FROM dependency_calls
    WHERE dependency = d.name
      AND at > coalesce(%(now)s::timestamptz, now()) - make_interval(secs => d.retry_window_seconds)
) r
ORDER BY d.name;

-- name: breaker_change
-- (no run status change) a breaker from state %(from)s to %(to)s, if still in %(from)s
-- (two reapers never both change it): open until its cool-off ends (by hand: until closed
-- by hand); half-open with its trial runs, up to `probes` of the runs waiting for it, due
-- ones first, by priority, then oldest; closed with a fresh window. Wakes the workers.
WITH changed AS (
    UPDATE dependencies d
    SET state = %(to)s,
        state_since = coalesce(%(now)s::timestamptz, now()),
        manual = %(manual)s,
        reopen_at = CASE WHEN %(to)s = 'open' AND NOT %(manual)s
                         THEN coalesce(%(now)s::timestamptz, now()) + make_interval(secs => d.cool_off_seconds)
                    END,
        probe_runs = CASE WHEN %(to)s = 'half_open' THEN ARRAY(
            SELECT r.id FROM job_runs r
            WHERE r.status = 'pending'
              AND r.job_id IN (SELECT j.id FROM job_definitions j WHERE d.name = ANY(j.dependencies))
            ORDER BY r.run_at <= coalesce(%(now)s::timestamptz, now()) DESC, r.priority DESC, r.run_at
            LIMIT d.probes
        ) ELSE '{}' END,
        changed_by = %(actor)s, note = %(note)s
    WHERE d.name = %(name)s AND d.state = %(from)s
    RETURNING d.name, d.state, d.reopen_at, d.probe_runs
)
SELECT changed.* FROM changed
LEFT JOIN (SELECT pg_notify('sundial_runs', '') WHERE EXISTS (SELECT FROM changed)) AS wake ON true;

-- name: breaker_hold_retries
-- (no run status change) whether a dependency's retries wait (its retry budget is spent).
UPDATE dependencies SET retries_held = %(held)s WHERE name = %(name)s AND retries_held <> %(held)s
RETURNING name;

-- name: breaker_set
-- (no run status change) a dependency's breaker settings, its row made if it has none.
INSERT INTO dependencies (name, failure_threshold, min_calls, window_seconds, cool_off_seconds,
                          probes, retry_budget, retry_window_seconds, settings_by, settings_at)
VALUES (%(name)s, %(failure_threshold)s, %(min_calls)s, %(window_seconds)s,
        %(cool_off_seconds)s, %(probes)s, %(retry_budget)s, %(retry_window_seconds)s,
        %(actor)s, coalesce(%(now)s::timestamptz, now()))
ON CONFLICT (name) DO UPDATE
SET failure_threshold = EXCLUDED.failure_threshold, min_calls = EXCLUDED.min_calls,
    window_seconds = EXCLUDED.window_seconds, cool_off_seconds = EXCLUDED.cool_off_seconds,
    probes = EXCLUDED.probes, retry_budget = EXCLUDED.retry_budget,
    retry_window_seconds = EXCLUDED.retry_window_seconds,
    settings_by = EXCLUDED.settings_by, settings_at = EXCLUDED.settings_at;

-- name: breaker_one
-- (read) one dependency's breaker, locked against a concurrent change.
SELECT * FROM dependencies WHERE name = %(name)s FOR UPDATE;

-- name: breaker_prune_calls
-- (no run status change) the calls older than their dependency's longest window (all of
-- a dependency no longer named).
DELETE FROM dependency_calls c
WHERE c.at < coalesce(%(now)s::timestamptz, now()) - coalesce(
    (SELECT make_interval(secs => greatest(d.window_seconds, d.retry_window_seconds))
     FROM dependencies d WHERE d.name = c.dependency),
    interval '0');
