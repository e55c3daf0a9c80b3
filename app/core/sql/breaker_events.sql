-- Reads of the audit log's circuit-breaker changes, for the pages (app.runs.breaker_events).

-- name: breaker_events_of_run
-- (read) The breaker changes (state, retries held or resumed) of the services a run's job
-- calls, made between the run's creation and its finish (or now), newest first, at most
-- %(limit)s: the audit log's time index bounds the scan to the run's life.
SELECT a.id, a.at, a.actor, a.action, a.target_id AS dependency, a.details
FROM all_runs r
JOIN job_definitions j ON j.id = r.job_id AND cardinality(j.dependencies) > 0
JOIN audit_log a
  ON a.at >= r.created_at
 AND a.at <= coalesce(r.finished_at, coalesce(%(now)s::timestamptz, now()))
 AND a.target_type = 'dependency'
 AND a.target_id = ANY (j.dependencies)
 AND a.action = ANY (%(actions)s::text[])
WHERE r.id = %(id)s
ORDER BY a.at DESC, a.id DESC
LIMIT %(limit)s;
