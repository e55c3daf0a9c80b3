-- Version history: a target's after-snapshots in the audit log (app.people.versions).

-- name: version_list
-- The newest %(limit)s audit rows of one target, by its stable id (whatever its name was
-- then), whose action makes a version, newest first (index ix_audit_log_subject).
SELECT id, at, actor, action, details
FROM audit_log
WHERE target_type = %(target_type)s AND subject_id = %(subject_id)s
  AND (action = ANY(%(actions)s) OR action = %(rollback)s)
  AND details -> 'after' IS NOT NULL AND jsonb_typeof(details -> 'after') = 'object'
ORDER BY id DESC
LIMIT %(limit)s;
