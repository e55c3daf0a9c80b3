-- DAG runs: the groups of runs one DAG submit or one workflow fire creates.

-- name: dag_run_create_many
-- New DAG runs; a workflow fire whose DAG run already exists (a second trigger, a retried
-- tick) is left alone, which makes each fire happen once.
INSERT INTO dag_runs (id, name, workflow_id, schedule_id, fire_time)
SELECT d.id, coalesce(d.name, ''), d.workflow_id, d.schedule_id, d.fire_time
FROM jsonb_to_recordset(%(dag_runs)s::jsonb) AS d(
    id uuid, name text, workflow_id uuid, schedule_id uuid, fire_time timestamptz
)
ON CONFLICT (schedule_id, fire_time) WHERE schedule_id IS NOT NULL DO NOTHING
RETURNING id;
