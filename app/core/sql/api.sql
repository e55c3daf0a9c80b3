-- Reads of the JSON API that no other door makes. They change nothing; runs are read through
-- `all_runs`, hot and history as one (app.runs.history).

-- name: api_run_page
-- (read) runs newest first, filtered, one keyset page: ids below `before`. The primary key
-- walks backwards; `status` pending/running use their partial indexes' order anyway.
SELECT r.* FROM all_runs r
WHERE (%(before)s::bigint IS NULL OR r.id < %(before)s::bigint)
  AND (%(status)s::text IS NULL OR r.status = %(status)s::text)
  AND (%(handler)s::text IS NULL OR r.handler = %(handler)s::text)
  AND (%(schedule_id)s::uuid IS NULL OR r.schedule_id = %(schedule_id)s::uuid)
  -- what it carried, as in web.run_list (app.runs.run_search)
  AND (%(args_any)s::jsonb[] IS NULL
       OR (r.status IN ('completed', 'failed', 'timed_out', 'cancelled', 'skipped')
           AND r.args @> ANY(%(args_any)s::jsonb[]))
       OR (r.status = 'pending' AND r.args @> ANY(%(args_any)s::jsonb[]))
       OR (r.status = 'running' AND r.args @> ANY(%(args_any)s::jsonb[]))
       OR (r.status = 'blocked' AND r.args @> ANY(%(args_any)s::jsonb[])))
  AND (%(result_any)s::jsonb[] IS NULL OR r.result @> ANY(%(result_any)s::jsonb[]))
ORDER BY r.id DESC
LIMIT %(limit)s;

-- name: api_schedule_by_name
-- (read) one schedule with the names of what it runs.
SELECT s.*, j.name AS job_name, w.name AS workflow_name
FROM schedules s
LEFT JOIN job_definitions j ON j.id = s.job_id
LEFT JOIN workflows w ON w.id = s.workflow_id
WHERE s.name = %(name)s;

-- name: api_run_by_key
-- (read) the run holding an idempotency key (job_runs_idempotency_key), every column. Hot
-- only: a key is unique among the hot runs, which keep it for its window.
SELECT * FROM job_runs WHERE idempotency_key = %(key)s;
