-- Inserting new runs. `app/runs/run_inserts.py` runs them, for `app/runs/transitions.py`'s submits: a new
-- run is not a transition of an existing one, so none of these UPDATEs job_runs; each
-- writes the first status `app.runs.transitions` chose (pending, blocked or skipped).
-- `coalesce(%(now)s, now())` lets tests move time; production uses the database clock.
-- One pg_notify per statement (never per row, never with job args) wakes workers.

-- name: run_submit_many
-- (new) -> pending | blocked (waits for DAG upstreams) | skipped (an upstream already failed):
-- insert runs in one statement; an idempotency key already used is left alone.
-- The batch arrives as one JSON array: parsing it server-side is far cheaper than
-- adapting ten parallel arrays in Python.
WITH new AS (
    INSERT INTO job_runs (
        handler, args, execution_model, priority, base_priority, run_at,
        max_retries, timeout_seconds, idempotency_key, job_id, status,
        dag_run_id, dag_node, upstream_remaining, finished_at, skip_reason, last_error,
        schedule_id, fire_time, queue, deadline
    )
    SELECT
        s.handler, s.args, s.execution_model, s.priority, s.priority,
        coalesce(s.run_at, coalesce(%(now)s::timestamptz, now())
                           + make_interval(secs => coalesce(s.delay, 0))),
        s.max_retries, s.timeout_seconds, s.idempotency_key, s.job_id,
        coalesce(s.status, 'pending'), s.dag_run_id, s.dag_node,
        coalesce(s.upstream_remaining, 0),
        CASE WHEN s.status = 'skipped' THEN coalesce(%(now)s::timestamptz, now()) END, s.skip_reason,
        CASE WHEN s.status = 'skipped' THEN 'not run: an upstream run did not complete' END,
        s.schedule_id, s.fire_time, coalesce(s.queue, 'default'), s.deadline
    FROM ROWS FROM (jsonb_to_recordset(%(runs)s::jsonb) AS (
        handler text, args jsonb, execution_model text, priority smallint, run_at timestamptz,
        delay float8, max_retries int, timeout_seconds int, idempotency_key text, job_id uuid,
        status text, dag_run_id uuid, dag_node text, upstream_remaining int, skip_reason text,
        schedule_id uuid, fire_time timestamptz, queue text, deadline timestamptz
    )) WITH ORDINALITY AS s
    ORDER BY s.ordinality
    ON CONFLICT (idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
    RETURNING id, idempotency_key
)
SELECT new.id, new.idempotency_key FROM new
LEFT JOIN (SELECT pg_notify('sundial_runs', '')) AS wake ON true
ORDER BY new.id;

-- name: run_submit_one
-- (new) -> pending: one run, its values as parameters. A single submit's own statement:
-- parsing a one-row JSON batch (run_submit_many) costs about a quarter of its time.
WITH new AS (
    INSERT INTO job_runs (
        handler, args, execution_model, priority, base_priority, run_at,
        max_retries, timeout_seconds, idempotency_key, job_id, queue, deadline, status
    )
    VALUES (
        %(handler)s, %(args)s::jsonb, %(execution_model)s, %(priority)s, %(priority)s,
        coalesce(%(run_at)s::timestamptz, coalesce(%(now)s::timestamptz, now())
                 + make_interval(secs => coalesce(%(delay)s::float8, 0))),
        %(max_retries)s, %(timeout_seconds)s, %(idempotency_key)s, %(job_id)s::uuid, %(queue)s,
        %(deadline)s::timestamptz, 'pending'
    )
    ON CONFLICT (idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
    RETURNING id, idempotency_key
)
SELECT new.id, new.idempotency_key FROM new
LEFT JOIN (SELECT pg_notify('sundial_runs', '')) AS wake ON true;

-- name: run_submit_fires
-- (new) -> pending: one run per schedule fire that asks for one (a row with a `run_at` and
-- the schedule's `job_id`: the trigger's batch of fire rows also holds rows that only move
-- a schedule), and one per schedule of each shared fire (`%(shared)s`, the trigger's fires
-- that a group of schedules makes alike: at its `run_at` plus each schedule's own spread
-- offset), from the job definition as it is now, with a deadline when the schedule has
-- `expire_after_seconds`; a fire that already has a run is left alone.
WITH new AS (
    INSERT INTO job_runs (
        schedule_id, job_id, fire_time, run_at, handler, args, execution_model,
        priority, base_priority, timeout_seconds, max_retries, queue, deadline, status
    )
    SELECT
        f.schedule_id, j.id, f.fire_time, f.run_at, j.handler, j.args, j.execution_model,
        j.priority, j.priority, j.timeout_seconds, j.max_retries, j.queue,
        f.run_at + make_interval(secs => s.expire_after_seconds), 'pending'
    FROM (
        SELECT f.schedule_id, f.job_id, f.fire_time, f.run_at
        FROM jsonb_to_recordset(%(fires)s::jsonb)
            AS f(schedule_id uuid, job_id uuid, fire_time timestamptz, run_at timestamptz)
        UNION ALL
        SELECT m.schedule_id, m.job_id, g.fire_time,
               g.run_at + m.offset_ms * interval '1 millisecond'
        FROM jsonb_to_recordset(%(shared)s::jsonb) AS g(
            schedule_ids uuid[], job_ids uuid[], offsets_ms bigint[], fire_time timestamptz,
            run_at timestamptz
        )
        CROSS JOIN LATERAL unnest(g.schedule_ids, g.job_ids, g.offsets_ms)
            AS m(schedule_id, job_id, offset_ms)
    ) AS f
    -- Each fire's job looked up by key, whatever the planner guesses of the batch's size
    -- (OFFSET 0 keeps the lookup a subquery; as a join, a guess of a thousand fires hashed
    -- the whole job_definitions table for every batch).
    CROSS JOIN LATERAL (
        SELECT j.* FROM job_definitions j WHERE j.id = f.job_id OFFSET 0
    ) AS j
    -- and its schedule's expiry, the same way (none: the run waits as long as it takes)
    LEFT JOIN LATERAL (
        SELECT s.expire_after_seconds FROM schedules s WHERE s.id = f.schedule_id OFFSET 0
    ) AS s ON true
    WHERE f.run_at IS NOT NULL
    ON CONFLICT (schedule_id, fire_time) WHERE schedule_id IS NOT NULL AND dag_run_id IS NULL
    DO NOTHING
    RETURNING id, schedule_id, fire_time
)
SELECT new.id, new.schedule_id, new.fire_time FROM new
LEFT JOIN (SELECT pg_notify('sundial_runs', '')) AS wake ON true;

-- name: run_stage_prepare
-- (no status change) this session's staging table for large bulk submits: created on first
-- use, emptied at each commit. COPY into it is several times cheaper per row than
-- parsing the batch from JSON. (Named for its columns: a session an earlier release
-- staged runs in may hold that release's table.)
DO $$
BEGIN
    IF to_regclass('pg_temp.run_stage_deadlines') IS NULL THEN
        CREATE TEMP TABLE run_stage_deadlines (
            n int, handler text, args jsonb, execution_model text, priority smallint,
            run_at timestamptz, delay float8, max_retries int, timeout_seconds int, job_id uuid,
            queue text, deadline timestamptz
        ) ON COMMIT DELETE ROWS;
    END IF;
    DELETE FROM run_stage_deadlines;  -- empty already, unless a transaction submits twice
END
$$;

-- name: run_stage_copy
-- (no status change) the staged runs, in input order.
COPY run_stage_deadlines (
    n, handler, args, execution_model, priority, run_at, delay, max_retries, timeout_seconds,
    job_id, queue, deadline
) FROM STDIN;

-- name: run_submit_staged
-- (new) -> pending: a large bulk submit of runs without idempotency keys, from the
-- staging table, ids in input order.
WITH new AS (
    INSERT INTO job_runs (
        handler, args, execution_model, priority, base_priority, run_at,
        max_retries, timeout_seconds, job_id, queue, deadline, status
    )
    SELECT
        s.handler, s.args, s.execution_model, s.priority, s.priority,
        coalesce(s.run_at, coalesce(%(now)s::timestamptz, now())
                           + make_interval(secs => coalesce(s.delay, 0))),
        s.max_retries, s.timeout_seconds, s.job_id, s.queue, s.deadline, 'pending'
    FROM run_stage_deadlines s
    ORDER BY s.n
    RETURNING id
)
SELECT new.id FROM new
LEFT JOIN (SELECT pg_notify('sundial_runs', '')) AS wake ON true
ORDER BY new.id;
