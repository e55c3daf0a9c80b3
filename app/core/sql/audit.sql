-- The audit log: every change a person makes, with who, when, what, before -> after.

-- name: audit_insert
INSERT INTO audit_log (at, actor, action, target_type, target_id, subject_id, details)
VALUES (
    coalesce(%(now)s::timestamptz, now()),
    %(actor)s, %(action)s, %(target_type)s, %(target_id)s, %(subject_id)s, %(details)s
)
RETURNING id;

-- name: audit_list
-- Newest first, each filter ignored when null; `before_id` pages back (index on at).
SELECT id, at, actor, action, target_type, target_id, details
FROM audit_log
WHERE (%(actor)s::text IS NULL OR actor = %(actor)s)
  AND (%(action)s::text IS NULL OR action = %(action)s)
  AND (%(since)s::timestamptz IS NULL OR at >= %(since)s)
  AND (%(until)s::timestamptz IS NULL OR at < %(until)s)
ORDER BY at DESC, id DESC
LIMIT %(limit)s;

-- name: audit_actions
-- The actions and actors seen, for the filter menus.
SELECT DISTINCT action, actor FROM audit_log ORDER BY action, actor;

-- name: audit_last_action_on_subject
-- The newest entry of one action on one subject (a job's last run started by hand), by
-- the index on (target_type, subject_id, id).
SELECT at, actor, details
FROM audit_log
WHERE target_type = %(target_type)s AND subject_id = %(subject_id)s AND action = %(action)s
ORDER BY id DESC
LIMIT 1;
