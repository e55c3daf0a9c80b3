-- Per-job statistics over the last hours (`app/job_stats.py`). Both statements read the
-- runs that finished in the window through ix_job_runs_finished_handler (finished_at,
-- handler), newest first and at most %(scan_limit)s of them, so a busy day costs a
-- bounded scan however many runs the table holds.

-- name: job_stats_summary
-- (read) per job (definition, or handler for runs without one): runs, failures, retries,
-- duration percentiles of the attempts that ended; the first %(limit)s in %(sort)s order.
WITH recent AS (
    SELECT job_id, handler, status, attempt, started_at, finished_at
    FROM job_runs
    WHERE finished_at IS NOT NULL
      AND finished_at > coalesce(%(now)s::timestamptz, now()) - make_interval(hours => %(hours)s)
    ORDER BY finished_at DESC
    LIMIT %(scan_limit)s
)
SELECT r.job_id, j.name AS job_name, r.handler,
       count(*)::int AS runs,
       count(*) FILTER (WHERE r.status = 'completed')::int AS completed,
       count(*) FILTER (WHERE r.status IN ('failed', 'timed_out'))::int AS failures,
       sum(greatest(r.attempt - 1, 0))::int AS retries,
       (sum(count(*)) OVER ())::int AS scanned,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM r.finished_at - r.started_at))
           FILTER (WHERE r.started_at IS NOT NULL) AS p50,
       percentile_cont(0.95) WITHIN GROUP (ORDER BY extract(epoch FROM r.finished_at - r.started_at))
           FILTER (WHERE r.started_at IS NOT NULL) AS p95
FROM recent r
LEFT JOIN job_definitions j ON j.id = r.job_id
GROUP BY r.job_id, j.name, r.handler
-- most failing (failure rate, failures, p95), slowest (p95) or busiest (runs) first
ORDER BY
    CASE WHEN %(sort)s = 'slowest' THEN percentile_cont(0.95) WITHIN GROUP (
        ORDER BY extract(epoch FROM r.finished_at - r.started_at)) END DESC NULLS LAST,
    CASE WHEN %(sort)s = 'busiest' THEN count(*) END DESC NULLS LAST,
    count(*) FILTER (WHERE r.status IN ('failed', 'timed_out'))::float8
        / greatest(count(*) FILTER (WHERE r.status IN ('completed', 'failed', 'timed_out')), 1) DESC,
    count(*) FILTER (WHERE r.status IN ('failed', 'timed_out')) DESC,
    coalesce(j.name, r.handler)
LIMIT %(limit)s;

-- name: job_stats_hourly
-- (read) the same runs per hour (hours_ago 0 is the hour ending now) of the jobs shown.
WITH recent AS (
    SELECT job_id, handler, status, finished_at
    FROM job_runs
    WHERE finished_at IS NOT NULL
      AND finished_at > coalesce(%(now)s::timestamptz, now()) - make_interval(hours => %(hours)s)
    ORDER BY finished_at DESC
    LIMIT %(scan_limit)s
)
SELECT job_id, handler,
       floor(extract(epoch FROM coalesce(%(now)s::timestamptz, now()) - finished_at) / 3600)::int AS hours_ago,
       count(*)::int AS runs,
       count(*) FILTER (WHERE status IN ('failed', 'timed_out'))::int AS failures
FROM recent
-- only the jobs the page shows (job id '' for runs without a job)
WHERE (coalesce(job_id::text, ''), handler) IN (
    SELECT * FROM unnest(%(job_ids)s::text[], %(handlers)s::text[])
)
GROUP BY 1, 2, 3;
