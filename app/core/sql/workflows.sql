-- Workflows: reusable DAGs over job definitions (steps and edges).

-- name: workflow_lock_by_name
SELECT id FROM workflows WHERE name = %(name)s FOR UPDATE;

-- name: workflow_upsert
INSERT INTO workflows (id, name, description) VALUES (%(id)s, %(name)s, %(description)s)
ON CONFLICT (id) DO UPDATE
SET description = EXCLUDED.description, updated_at = coalesce(%(now)s::timestamptz, now());

-- name: workflow_steps_clear
-- Redefining a workflow replaces its steps (edges go with them).
DELETE FROM workflow_steps WHERE workflow_id = %(id)s;

-- name: workflow_steps_insert
INSERT INTO workflow_steps (workflow_id, name, job_id, args)
SELECT %(id)s, s.name, s.job_id, s.args
FROM unnest(%(names)s::text[], %(job_ids)s::uuid[], %(args)s::jsonb[]) AS s(name, job_id, args);

-- name: workflow_edges_insert
INSERT INTO workflow_edges (workflow_id, upstream, downstream)
SELECT %(id)s, e.upstream, e.downstream
FROM unnest(%(ups)s::text[], %(downs)s::text[]) AS e(upstream, downstream);

-- name: job_definitions_by_names
SELECT id, name, handler FROM job_definitions WHERE name = ANY(%(names)s::text[]);

-- name: workflow_schedule_names
-- The schedules that run a workflow: deleting it deletes them (and their fire ledger).
SELECT name FROM schedules WHERE workflow_id = %(id)s ORDER BY name;

-- name: workflow_delete
-- A workflow with its steps, edges and (by cascade) schedules; DAG runs keep their history.
DELETE FROM workflows WHERE id = %(id)s;

-- name: workflow_by_name
SELECT id, name, description FROM workflows WHERE name = %(name)s;

-- name: workflow_list
SELECT w.name, w.description, w.updated_at,
       (SELECT count(*) FROM workflow_steps s WHERE s.workflow_id = w.id) AS steps,
       (SELECT count(*) FROM schedules sc WHERE sc.workflow_id = w.id) AS schedules,
       ARRAY(SELECT sc.name FROM schedules sc WHERE sc.workflow_id = w.id ORDER BY sc.name)
         AS schedule_names
FROM workflows w
ORDER BY w.name;

-- name: workflow_steps_with_jobs
-- Each step of these workflows with the job definition it runs.
SELECT s.workflow_id, w.name AS workflow_name, s.name AS step, s.args AS step_args,
       j.id AS job_id, j.name AS job_name, j.handler, j.args AS job_args, j.execution_model,
       j.priority, j.timeout_seconds, j.max_retries, j.queue
FROM workflow_steps s
JOIN workflows w ON w.id = s.workflow_id
JOIN job_definitions j ON j.id = s.job_id
WHERE s.workflow_id = ANY(%(ids)s::uuid[])
ORDER BY s.workflow_id, s.name;

-- name: workflow_edges_of
SELECT workflow_id, upstream, downstream FROM workflow_edges
WHERE workflow_id = ANY(%(ids)s::uuid[])
ORDER BY workflow_id, upstream, downstream;


-- name: workflow_by_id
SELECT id, name, description FROM workflows WHERE id = %(id)s;

-- name: workflow_last_dag_run
-- The newest DAG run of a workflow (ix_dag_runs_workflow, ix_dag_run_history_workflow), for
-- its page's picture.
SELECT id, created_at, fire_time, schedule_id FROM all_dag_runs
WHERE workflow_id = %(id)s
ORDER BY created_at DESC
LIMIT 1;

-- name: workflow_dag_run_steps
-- Each step of one DAG run with its run's status and id.
SELECT dag_node AS step, id AS run_id, status FROM all_runs
WHERE dag_run_id = %(dag_run_id)s
ORDER BY id;
