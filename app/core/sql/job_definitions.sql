-- Job definitions: a named handler with its args and run settings, which schedules and
-- workflow steps run. Written by people through `app.catalog.job_definitions` (CLI and web).

-- name: job_definition_insert
-- A new job definition (alone, or along with a schedule); nothing when the name is taken.
-- The dependencies it names get a circuit breaker (closed, default settings) if new.
WITH job AS (
    INSERT INTO job_definitions (
        name, handler, args, execution_model, priority, timeout_seconds, max_retries,
        max_crashes, queue, dependencies, id
    )
    VALUES (
        %(name)s, %(handler)s, %(args)s, %(execution_model)s, %(priority)s, %(timeout_seconds)s,
        %(max_retries)s, %(max_crashes)s, %(queue)s, %(dependencies)s::text[], %(id)s
    )
    ON CONFLICT (name) DO NOTHING
    RETURNING id, dependencies
), breakers AS (
    INSERT INTO dependencies (name)
    SELECT unnest(dependencies) FROM job
    ON CONFLICT (name) DO NOTHING
)
SELECT id FROM job;

-- name: job_definition_by_name
SELECT id, name, handler FROM job_definitions WHERE name = %(name)s;

-- name: job_definition_lock_by_name
-- One job definition, locked against concurrent edits, and against new schedules and
-- workflow steps naming it (their inserts key-share lock it) until this transaction ends.
SELECT j.id, j.name, j.handler, j.args, j.execution_model, j.priority, j.timeout_seconds,
       j.max_retries, j.max_crashes, j.queue, j.dependencies
FROM job_definitions j
WHERE j.name = %(name)s
FOR UPDATE;

-- name: job_definition_uses
-- (read) The schedules and workflows that use a job definition, by name. A statement of
-- its own, after the lock: the lock's snapshot predates its wait, so it would miss a
-- schedule whose insert held the row then.
SELECT ARRAY(SELECT s.name FROM schedules s WHERE s.job_id = %(id)s ORDER BY s.name)
           AS schedule_names,
       ARRAY(SELECT DISTINCT w.name FROM workflow_steps st JOIN workflows w ON w.id = st.workflow_id
             WHERE st.job_id = %(id)s ORDER BY w.name) AS workflow_names;

-- name: job_definition_page
-- One page of the jobs list, by name (its unique index), after the name %(after)s when
-- given; %(q)s (an ILIKE fragment, or null) picks jobs whose name or handler contains it.
-- `job_definition_count` counts what the same filter matches.
SELECT j.name, j.handler, j.args, j.execution_model, j.priority, j.timeout_seconds,
       j.max_retries, j.max_crashes, j.queue, j.dependencies, j.updated_at,
       (SELECT count(*) FROM schedules s WHERE s.job_id = j.id) AS schedules,
       (SELECT count(*) FROM workflow_steps w WHERE w.job_id = j.id) AS workflow_steps
FROM job_definitions j
WHERE (%(q)s::text IS NULL OR j.name ILIKE '%%' || %(q)s || '%%'
       OR j.handler ILIKE '%%' || %(q)s || '%%')
  AND j.name > coalesce(%(after)s::text, '')
ORDER BY j.name
LIMIT %(limit)s;

-- name: job_definition_count
SELECT count(*) AS n FROM job_definitions j
WHERE %(q)s::text IS NULL OR j.name ILIKE '%%' || %(q)s || '%%'
      OR j.handler ILIKE '%%' || %(q)s || '%%';

-- name: job_definition_names
-- The first %(limit)s jobs' names, for the forms that pick one from a list.
SELECT name FROM job_definitions ORDER BY name LIMIT %(limit)s;

-- name: job_definition_names_matching
-- Names holding the text %(pattern)s (a LIKE pattern), those starting with it first, for
-- the field that finds a job among too many to list.
SELECT name FROM job_definitions
WHERE name ILIKE %(pattern)s
ORDER BY name ILIKE %(prefix)s DESC, name
LIMIT %(limit)s;

-- name: job_definition_list
SELECT j.name, j.handler, j.args, j.execution_model, j.priority, j.timeout_seconds,
       j.max_retries, j.max_crashes, j.queue, j.dependencies, j.updated_at,
       (SELECT count(*) FROM schedules s WHERE s.job_id = j.id) AS schedules,
       (SELECT count(*) FROM workflow_steps w WHERE w.job_id = j.id) AS workflow_steps
FROM job_definitions j
ORDER BY j.name;

-- name: job_definition_update
-- (and a circuit breaker for each dependency it names that has none yet)
WITH job AS (
    UPDATE job_definitions
    SET name = %(name)s, handler = %(handler)s, args = %(args)s,
        execution_model = %(execution_model)s, priority = %(priority)s,
        timeout_seconds = %(timeout_seconds)s, max_retries = %(max_retries)s,
        max_crashes = %(max_crashes)s, queue = %(queue)s,
        dependencies = %(dependencies)s::text[],
        updated_at = coalesce(%(now)s::timestamptz, now())
    WHERE id = %(id)s
    RETURNING dependencies
)
INSERT INTO dependencies (name)
SELECT unnest(dependencies) FROM job
ON CONFLICT (name) DO NOTHING;

-- name: job_definition_delete
-- A job definition (its schedules go with it by cascade: the caller has named them; a
-- workflow step's reference refuses the delete).
DELETE FROM job_definitions WHERE id = %(id)s;

-- name: job_definition_delete_unused
-- The job definition a schedule created, once no schedule uses it.
DELETE FROM job_definitions j
WHERE j.id = %(id)s AND NOT EXISTS (SELECT 1 FROM schedules s WHERE s.job_id = j.id);

-- name: handler_args_schema
-- The args schema a handler declares, as the newest live worker that declares it published.
SELECT handler_args -> %(handler)s AS schema
FROM workers
WHERE handler_args::jsonb ? %(handler)s
  AND stopped_at IS NULL
  AND last_seen > coalesce(%(now)s::timestamptz, now()) - make_interval(secs => %(live_seconds)s)
ORDER BY started_at DESC
LIMIT 1;
