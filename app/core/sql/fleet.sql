-- Fleet-wide settings an admin decides once for every process, and the handlers a job
-- definition or workflow would run (to check them against those settings).

-- name: fleet_setting_get
-- One setting's value; no row means its default.
SELECT value FROM fleet_settings WHERE name = %(name)s;

-- name: fleet_setting_put
-- Set one setting and write who changed it, and how, to the audit log.
WITH saved AS (
    INSERT INTO fleet_settings (name, value, updated_at)
    VALUES (%(name)s, %(value)s, coalesce(%(now)s::timestamptz, now()))
    ON CONFLICT (name) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at
    RETURNING name, value
)
INSERT INTO audit_log (at, actor, action, target_type, target_id, details)
SELECT coalesce(%(now)s::timestamptz, now()), %(actor)s, 'fleet_setting_put', 'fleet_setting', name,
       jsonb_build_object('value', value)
FROM saved;

-- name: handlers_of_targets
-- The handlers a job definition, or each step of a workflow, runs.
SELECT j.handler FROM job_definitions j WHERE j.id = %(job_id)s
UNION
SELECT j.handler
FROM workflow_steps s JOIN job_definitions j ON j.id = s.job_id
WHERE s.workflow_id = %(workflow_id)s;

-- name: handler_of_run
SELECT handler FROM all_runs WHERE id = %(id)s;
