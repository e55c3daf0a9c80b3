-- Lag SLO per schedule (`app/observability/lag_slo.py`): the threshold people set, each schedule's lag
-- broken down over the last 24 hours, and schedules whose expected fire produced no run.

-- name: slo_schedule_by_name
-- (read, locking) one schedule and its threshold, before a person changes it.
SELECT id, name, lag_slo_seconds FROM schedules WHERE name = %(name)s FOR UPDATE;

-- name: slo_set_threshold
-- (no run change) a person sets or clears a schedule's lag threshold.
UPDATE schedules SET lag_slo_seconds = %(seconds)s
WHERE id = %(id)s
RETURNING id, name, lag_slo_seconds;

-- name: slo_breakdown
-- (read) for every schedule with a threshold: its job runs of the last %(hours)s hours, hot
-- and history (those hours reach past the hot window; the tables themselves, not the
-- all_* views, so that history is read by day), through job_runs_schedule_fire_time and
-- ix_run_history_schedule_fire (schedule_id, fire_time), each run's lag split into
-- fire -> enqueue (its ledger row's recorded_at, else the run's created_at), enqueue ->
-- claim (first attempt), claim -> start (of the
-- attempt that ran last: retries), start -> finish; p50/p95 of each, and how many fires
-- started later than the threshold (a run not started yet counts with its lag so far).
SELECT s.id, s.name, s.lag_slo_seconds, s.next_fire_time, s.paused_at IS NOT NULL AS paused,
       b.fires, b.breaches, b.latest_fire, b.latest_lag,
       b.enqueue_p50, b.enqueue_p95, b.claim_p50, b.claim_p95,
       b.start_p50, b.start_p95, b.finish_p50, b.finish_p95, b.lag_p50, b.lag_p95
FROM schedules s
CROSS JOIN LATERAL (
    SELECT count(*)::int AS fires,
           count(*) FILTER (WHERE x.lag > s.lag_slo_seconds)::int AS breaches,
           max(x.fire_time) AS latest_fire,
           (array_agg(x.lag ORDER BY x.fire_time DESC))[1] AS latest_lag,
           percentile_cont(0.5) WITHIN GROUP (ORDER BY x.enqueue) AS enqueue_p50,
           percentile_cont(0.95) WITHIN GROUP (ORDER BY x.enqueue) AS enqueue_p95,
           percentile_cont(0.5) WITHIN GROUP (ORDER BY x.claim) AS claim_p50,
           percentile_cont(0.95) WITHIN GROUP (ORDER BY x.claim) AS claim_p95,
           percentile_cont(0.5) WITHIN GROUP (ORDER BY x.start) AS start_p50,
           percentile_cont(0.95) WITHIN GROUP (ORDER BY x.start) AS start_p95,
           percentile_cont(0.5) WITHIN GROUP (ORDER BY x.finish) AS finish_p50,
           percentile_cont(0.95) WITHIN GROUP (ORDER BY x.finish) AS finish_p95,
           percentile_cont(0.5) WITHIN GROUP (ORDER BY x.lag) AS lag_p50,
           percentile_cont(0.95) WITHIN GROUP (ORDER BY x.lag) AS lag_p95
    FROM (
        SELECT r.fire_time,
               extract(epoch FROM coalesce(f.recorded_at, r.created_at) - r.fire_time) AS enqueue,
               extract(epoch FROM coalesce(a.first_claim, r.started_at)
                                  - coalesce(f.recorded_at, r.created_at)) AS claim,
               extract(epoch FROM r.started_at - coalesce(a.first_claim, r.started_at)) AS start,
               extract(epoch FROM r.finished_at - r.started_at) AS finish,
               extract(epoch FROM coalesce(a.first_claim, r.started_at,
                                           coalesce(%(now)s::timestamptz, now())) - r.fire_time) AS lag
        FROM (
            SELECT id, schedule_id, fire_time, created_at, started_at, finished_at,
                   NULL::timestamptz AS history_at
            FROM job_runs
            WHERE schedule_id = s.id AND dag_run_id IS NULL
              AND fire_time > coalesce(%(now)s::timestamptz, now()) - make_interval(hours => %(hours)s)
              AND fire_time <= coalesce(%(now)s::timestamptz, now())
            UNION ALL
            -- a run outside a DAG run is in history by its end, which comes after its fire:
            -- only the days since the window's start (and one before, for a run that ended
            -- before its fire time, cancelled while it waited ahead of it) are read
            SELECT id, schedule_id, fire_time, created_at, started_at, finished_at, history_at
            FROM run_history
            WHERE schedule_id = s.id AND dag_run_id IS NULL
              AND fire_time > coalesce(%(now)s::timestamptz, now()) - make_interval(hours => %(hours)s)
              AND fire_time <= coalesce(%(now)s::timestamptz, now())
              AND history_at > coalesce(%(now)s::timestamptz, now())
                               - make_interval(hours => %(hours)s) - interval '1 day'
        ) r
        LEFT JOIN schedule_fires f ON f.schedule_id = r.schedule_id AND f.fire_time = r.fire_time
        -- its attempts are where it is: by the primary key, or in its own day's partition
        LEFT JOIN LATERAL (
            SELECT min(started_at) AS first_claim FROM (
                SELECT started_at FROM job_run_attempts
                WHERE run_id = r.id AND r.history_at IS NULL
                UNION ALL
                SELECT started_at FROM run_attempt_history
                WHERE run_id = r.id AND history_at = r.history_at
            ) both_sides
        ) a ON true
    ) x
) b
WHERE s.lag_slo_seconds IS NOT NULL
ORDER BY s.name
LIMIT %(limit)s;

-- name: slo_overdue_schedules
-- (read) the dead man's switch for every schedule: its next fire is well past (the
-- trigger has not fired it: no leader, or the trigger is down), through ix_schedules_due.
SELECT id, name, next_fire_time
FROM schedules
WHERE next_fire_time < coalesce(%(now)s::timestamptz, now()) - make_interval(secs => %(grace)s)
  AND next_fire_time < coalesce(%(now)s::timestamptz, now()) - make_interval(secs => %(grace)s)
      - make_interval(secs => CASE WHEN exact_minute THEN 0 ELSE spread_seconds END)
ORDER BY next_fire_time
LIMIT %(limit)s;

-- name: slo_schedules_watched
-- (read) the schedules with a threshold, whole, to compute their expected fires.
SELECT * FROM schedules WHERE lag_slo_seconds IS NOT NULL ORDER BY name LIMIT %(limit)s;

-- name: slo_ledger_since
-- (read) the fire times the ledgers of these schedules account for since %(since)s: each
-- made a run, waits to, or was deliberately not run (paused, overlap). Fires missed while
-- no trigger ran (coalesced into a later run, or missed) do not count.
SELECT schedule_id, fire_time FROM schedule_fires
WHERE schedule_id = ANY(%(ids)s::uuid[]) AND fire_time >= %(since)s AND fire_time < %(until)s
  AND outcome NOT IN ('coalesced', 'missed');
