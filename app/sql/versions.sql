-- Version history: a target's after-snapshots in the audit log (app.versions).

-- name: version_list
-- The newest %(limit)s audit rows of one target whose action makes a version, newest
-- first. (A scan of the audit log per page; an index on
-- (target_type, target_id, id) would serve it when the log grows large.)
SELECT id, at, actor, action, details
FROM audit_log
WHERE target_type = %(target_type)s AND target_id = %(target_id)s
  AND (action = ANY(%(actions)s) OR action = %(rollback)s)
  AND details -> 'after' IS NOT NULL AND jsonb_typeof(details -> 'after') = 'object'
ORDER BY id DESC
LIMIT %(limit)s;
