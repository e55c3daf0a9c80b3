-- Per-job statistics over the last hours (`app/observability/job_stats.py`), from a roll-up of run
-- endings instead of the runs: `job_stat_hours` (counts per job and clock hour, by
-- finished_at) and `job_stat_durations` (their log-scale duration histograms) are filled
-- minute by minute once a minute has closed; `job_stat_window` holds each job's sums over
-- the window, so the page reads one row per job however many runs ended. Filling reads
-- the runs of the closed minutes only, through the two indexes of ended runs; nothing is
-- written when a run finishes. A job is its definition's id, or the nil UUID for runs
-- submitted without one (`job_key`), with the run's handler.

-- name: job_stats_state_create
-- (roll-up) the one row saying how far the roll-up is filled, if it is missing.
INSERT INTO job_stat_state (id) VALUES (1) ON CONFLICT (id) DO NOTHING;

-- name: job_stats_state_due
-- (read) how far the roll-up is filled, and the minute boundary up to which endings are
-- now closed: a reader checks this without locking anything.
SELECT through,
       date_trunc('minute', coalesce(%(now)s::timestamptz, now())
                            - make_interval(secs => %(grace)s)) AS closed
FROM job_stat_state
WHERE id = 1;

-- name: job_stats_state_lock
-- (roll-up) lock the fill state, unless another filler holds it (then no row: it fills),
-- and the minute boundary up to which endings are now closed (`grace` after the minute).
SELECT through, window_start,
       date_trunc('minute', coalesce(%(now)s::timestamptz, now())
                            - make_interval(secs => %(grace)s)) AS closed
FROM job_stat_state
WHERE id = 1
FOR UPDATE SKIP LOCKED;

-- name: job_stats_reset
-- (roll-up) start again from the window's first hour (first fill, or filled too long ago).
WITH hours AS (DELETE FROM job_stat_hours), durations AS (DELETE FROM job_stat_durations)
DELETE FROM job_stat_window;

-- name: job_stats_fill_hours
-- (roll-up) add the runs that ended in [%(since)s, %(until)s) to their jobs' hours.
INSERT INTO job_stat_hours AS h
    (job_key, handler, hour, runs, completed, failures, retries, shortest, longest)
SELECT coalesce(job_id, '00000000-0000-0000-0000-000000000000'::uuid), handler,
       date_trunc('hour', finished_at),
       count(*),
       count(*) FILTER (WHERE status = 'completed'),
       count(*) FILTER (WHERE status IN ('failed', 'timed_out')),
       sum(greatest(attempt - 1, 0)),
       min(extract(epoch FROM finished_at - started_at)::float8),
       max(extract(epoch FROM finished_at - started_at)::float8)
FROM job_runs
WHERE finished_at >= %(since)s AND finished_at < %(until)s
  -- an ending is in one of the two indexes of ended runs (BitmapOr of both)
  AND (status IN ('completed', 'cancelled', 'skipped') OR status IN ('failed', 'timed_out'))
GROUP BY 1, 2, 3
ON CONFLICT (job_key, handler, hour) DO UPDATE SET
    runs = h.runs + excluded.runs,
    completed = h.completed + excluded.completed,
    failures = h.failures + excluded.failures,
    retries = h.retries + excluded.retries,
    shortest = least(h.shortest, excluded.shortest),
    longest = greatest(h.longest, excluded.longest);

-- name: job_stats_fill_durations
-- (roll-up) add the durations of the same runs to their hours' histograms: bucket b holds
-- durations in [2^(b/16), 2^((b+1)/16)) seconds (under 1 ms counts as 1 ms).
INSERT INTO job_stat_durations AS d (job_key, handler, hour, bucket, n)
SELECT coalesce(job_id, '00000000-0000-0000-0000-000000000000'::uuid), handler,
       date_trunc('hour', finished_at),
       floor(%(per_octave)s * ln(greatest(
           extract(epoch FROM finished_at - started_at)::float8, 0.001)) / ln(2.0::float8)
       )::smallint,
       count(*)
FROM job_runs
WHERE finished_at >= %(since)s AND finished_at < %(until)s AND started_at IS NOT NULL
  -- an ending is in one of the two indexes of ended runs (BitmapOr of both)
  AND (status IN ('completed', 'cancelled', 'skipped') OR status IN ('failed', 'timed_out'))
GROUP BY 1, 2, 3, 4
ON CONFLICT (job_key, handler, hour, bucket) DO UPDATE SET n = d.n + excluded.n;

-- name: job_stats_window_refresh
-- (roll-up) recompute the window's sums and percentiles of the jobs whose hours changed:
-- those with endings in [%(since)s, %(until)s) and those with hours leaving the window
-- (in [%(left_since)s, %(window_start)s): older hours stay for the week's trend).
-- The percentile at rank q*(n-1) interpolates, like percentile_cont, between the
-- representative durations 2^((b+0.5)/16) of the buckets holding the ranks around it,
-- clamped to the shortest and longest duration.
WITH changed AS (
    SELECT DISTINCT coalesce(job_id, '00000000-0000-0000-0000-000000000000'::uuid) AS job_key,
           handler
    FROM job_runs
    WHERE finished_at >= %(since)s AND finished_at < %(until)s
      AND (status IN ('completed', 'cancelled', 'skipped') OR status IN ('failed', 'timed_out'))
    UNION
    SELECT job_key, handler FROM job_stat_hours
    WHERE hour >= %(left_since)s AND hour < %(window_start)s
), sums AS (
    SELECT h.job_key, h.handler, min(coalesce(j.name, h.handler)) AS name,
           sum(h.runs)::int AS runs, sum(h.completed)::int AS completed,
           sum(h.failures)::int AS failures, sum(h.retries)::int AS retries,
           min(h.shortest) AS shortest, max(h.longest) AS longest
    FROM job_stat_hours h JOIN changed c USING (job_key, handler)
    LEFT JOIN job_definitions j ON j.id = h.job_key
    WHERE h.hour >= %(window_start)s
    GROUP BY h.job_key, h.handler
), buckets AS (
    SELECT d.job_key, d.handler, d.bucket, sum(d.n) AS n
    FROM job_stat_durations d JOIN changed c USING (job_key, handler)
    WHERE d.hour >= %(window_start)s
    GROUP BY d.job_key, d.handler, d.bucket
), cumulative AS (
    SELECT job_key, handler, bucket,
           sum(n) OVER (PARTITION BY job_key, handler ORDER BY bucket) AS upto,
           sum(n) OVER (PARTITION BY job_key, handler) AS total
    FROM buckets
), ranks AS (
    SELECT job_key, handler, q,
           min(bucket) FILTER (WHERE upto > floor(q * (total - 1))) AS low,
           min(bucket) FILTER (WHERE upto > ceil(q * (total - 1))) AS high,
           q * (total - 1) - floor(q * (total - 1)) AS fraction
    FROM cumulative CROSS JOIN (VALUES (0.5), (0.95)) AS quantiles (q)
    GROUP BY job_key, handler, q, total
), percentiles AS (
    SELECT job_key, handler,
           max(value) FILTER (WHERE q = 0.5) AS p50, max(value) FILTER (WHERE q = 0.95) AS p95
    FROM (
        SELECT job_key, handler, q,
               power(2.0::float8, (low + 0.5) / %(per_octave)s)
               + fraction * (power(2.0::float8, (high + 0.5) / %(per_octave)s)
                             - power(2.0::float8, (low + 0.5) / %(per_octave)s)) AS value
        FROM ranks
    ) v
    GROUP BY job_key, handler
)
INSERT INTO job_stat_window
    (job_key, handler, name, runs, completed, failures, retries, failure_rate, p50, p95)
SELECT s.job_key, s.handler, s.name, s.runs, s.completed, s.failures, s.retries,
       s.failures::float8 / greatest(s.completed + s.failures, 1),
       least(greatest(p.p50, s.shortest), s.longest),
       least(greatest(p.p95, s.shortest), s.longest)
FROM sums s LEFT JOIN percentiles p USING (job_key, handler)
ON CONFLICT (job_key, handler) DO UPDATE SET
    name = excluded.name, runs = excluded.runs, completed = excluded.completed, failures = excluded.failures,
    retries = excluded.retries, failure_rate = excluded.failure_rate,
    p50 = excluded.p50, p95 = excluded.p95;

-- name: job_stats_window_drop
-- (roll-up) the jobs with no ending left in the window (after its first hour moved).
DELETE FROM job_stat_window w
WHERE NOT EXISTS (
    SELECT FROM job_stat_hours h
    WHERE h.job_key = w.job_key AND h.handler = w.handler AND h.hour >= %(window_start)s
);

-- name: job_stats_prune
-- (roll-up) the hours older than the duration trend's week (`app.observability.job_durations`);
-- the window's sums leave out the hours before it anyway.
WITH durations AS (DELETE FROM job_stat_durations WHERE hour < %(keep_since)s)
DELETE FROM job_stat_hours WHERE hour < %(keep_since)s;

-- name: job_stats_state_save
-- (roll-up) endings before %(through)s are now in the roll-up.
UPDATE job_stat_state SET through = %(through)s, window_start = %(window_start)s WHERE id = 1;

-- name: job_stats_summary
-- (read) the window's jobs, the first %(limit)s in %(sort)s order: most failing (failure
-- rate, failures), slowest (p95) or busiest (runs), then by name (as of the job's last
-- fill); each with its hours (hours after the
-- window's first, runs, failures) and how far the roll-up is filled. One statement, so
-- one snapshot: a fill committing meanwhile cannot shift the hours under the sums.
WITH state AS (
    SELECT through, window_start FROM job_stat_state WHERE id = 1 AND through IS NOT NULL
), top AS (
    -- one branch runs (the sort asked for), down its index: no sort of every job
    (SELECT * FROM job_stat_window WHERE %(sort)s = 'failing'
     ORDER BY failure_rate DESC, failures DESC, name LIMIT %(limit)s)
    UNION ALL
    (SELECT * FROM job_stat_window WHERE %(sort)s = 'slowest'
     ORDER BY p95 DESC NULLS LAST, failure_rate DESC, failures DESC, name LIMIT %(limit)s)
    UNION ALL
    (SELECT * FROM job_stat_window WHERE %(sort)s = 'busiest'
     ORDER BY runs DESC, failure_rate DESC, failures DESC, name LIMIT %(limit)s)
)
SELECT nullif(t.job_key, '00000000-0000-0000-0000-000000000000'::uuid) AS job_id,
       (SELECT name FROM job_definitions WHERE id = t.job_key) AS job_name, t.handler, t.runs, t.completed, t.failures, t.retries, t.p50, t.p95,
       s.through, s.window_start, h.hour_index, h.hour_runs, h.hour_failures
FROM state s
CROSS JOIN top t
CROSS JOIN LATERAL (
    SELECT array_agg((extract(epoch FROM x.hour - s.window_start) / 3600)::int) AS hour_index,
           array_agg(x.runs) AS hour_runs, array_agg(x.failures) AS hour_failures
    FROM job_stat_hours x
    WHERE x.job_key = t.job_key AND x.handler = t.handler AND x.hour >= s.window_start
) h
ORDER BY
    CASE WHEN %(sort)s = 'slowest' THEN t.p95 END DESC NULLS LAST,
    CASE WHEN %(sort)s = 'busiest' THEN t.runs END DESC NULLS LAST,
    t.failure_rate DESC, t.failures DESC, t.name;

-- name: job_stats_filled
-- (read) how far the roll-up is filled, and the window's first hour.
SELECT through, window_start FROM job_stat_state WHERE id = 1;

-- name: job_durations_hourly
-- (read) one job's runs, p50 and p95 duration per clock hour from %(since)s, read from its
-- hours' histograms down their primary keys (job_key first) with the interpolation of
-- job_stats_window_refresh, clamped to each hour's shortest and longest duration.
WITH hours AS (
    SELECT hour, sum(runs)::int AS runs, min(shortest) AS shortest, max(longest) AS longest
    FROM job_stat_hours
    WHERE job_key = %(job_key)s AND hour >= %(since)s
    GROUP BY hour
), buckets AS (
    SELECT hour, bucket, sum(n) AS n
    FROM job_stat_durations
    WHERE job_key = %(job_key)s AND hour >= %(since)s
    GROUP BY hour, bucket
), cumulative AS (
    SELECT hour, bucket,
           sum(n) OVER (PARTITION BY hour ORDER BY bucket) AS upto,
           sum(n) OVER (PARTITION BY hour) AS total
    FROM buckets
), ranks AS (
    SELECT hour, q,
           min(bucket) FILTER (WHERE upto > floor(q * (total - 1))) AS low,
           min(bucket) FILTER (WHERE upto > ceil(q * (total - 1))) AS high,
           q * (total - 1) - floor(q * (total - 1)) AS fraction
    FROM cumulative CROSS JOIN (VALUES (0.5), (0.95)) AS quantiles (q)
    GROUP BY hour, q, total
), percentiles AS (
    SELECT hour,
           max(value) FILTER (WHERE q = 0.5) AS p50, max(value) FILTER (WHERE q = 0.95) AS p95
    FROM (
        SELECT hour, q,
               power(2.0::float8, (low + 0.5) / %(per_octave)s)
               + fraction * (power(2.0::float8, (high + 0.5) / %(per_octave)s)
                             - power(2.0::float8, (low + 0.5) / %(per_octave)s)) AS value
        FROM ranks
    ) v
    GROUP BY hour
)
SELECT h.hour, h.runs,
       least(greatest(p.p50, h.shortest), h.longest) AS p50,
       least(greatest(p.p95, h.shortest), h.longest) AS p95
FROM hours h LEFT JOIN percentiles p USING (hour)
ORDER BY h.hour;

-- name: job_durations_slowest
-- (read) one job's %(limit)s slowest runs that ended from %(since)s. They are in the
-- %(limit)s hours with the longest runs (each of those hours holds a run at least as slow
-- as any run of another hour), so only those hours' endings are read, through the two
-- indexes of ended runs (ix_run_history_job_finished in history), each hour's slowest first.
WITH slow_hours AS (
    SELECT hour, max(longest) AS longest
    FROM job_stat_hours
    WHERE job_key = %(job_key)s AND hour >= %(since)s AND longest IS NOT NULL
    GROUP BY hour
    ORDER BY max(longest) DESC
    LIMIT %(limit)s
)
SELECT r.id, r.status, r.attempt, r.started_at, r.finished_at, r.seconds
FROM slow_hours h
CROSS JOIN LATERAL (
    SELECT x.id, x.status, x.attempt, x.started_at, x.finished_at,
           extract(epoch FROM x.finished_at - x.started_at)::float8 AS seconds
    FROM all_runs x
    WHERE x.finished_at >= h.hour AND x.finished_at < h.hour + interval '1 hour'
      AND (x.status IN ('completed', 'cancelled', 'skipped') OR x.status IN ('failed', 'timed_out'))
      AND x.job_id = %(job_key)s AND x.started_at IS NOT NULL
    ORDER BY x.finished_at - x.started_at DESC, x.id
    LIMIT %(limit)s
) r
ORDER BY r.seconds DESC, r.id
LIMIT %(limit)s;
