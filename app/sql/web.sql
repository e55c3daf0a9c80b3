-- Read queries of the dashboard's pages (writes go through the domain modules).

-- name: home_run_counts
-- Runs by status for the overview.
SELECT status, count(*) AS n FROM job_runs GROUP BY status;

-- name: home_live_workers
SELECT count(*) AS n FROM workers
WHERE stopped_at IS NULL
  AND last_seen > coalesce(%(now)s::timestamptz, now()) - interval '1 minute';

-- name: health_check
SELECT 1 AS ok;
