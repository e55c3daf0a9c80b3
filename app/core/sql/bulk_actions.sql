-- Bulk actions (`app/runs/bulk_actions.py`): cancel, retry or re-run of many runs at once.
-- A row says what was asked and how far it got; each batch moves its runs (through
-- `app/runs/transitions.py`) and this row in one transaction. The process working on an
-- action holds its lease; a stale lease lets another process take it over.

-- name: bulk_action_insert
-- (new) -> running: an action a person asked for, leased to the process that starts it.
INSERT INTO bulk_actions (action, actor, filter, run_ids, described, total, cursor_id,
                          may_run_commands, owner, lease_until)
VALUES (%(action)s, %(actor)s, %(filter)s, %(run_ids)s, %(described)s, %(total)s,
        %(cursor_id)s, %(may_run_commands)s, %(owner)s,
        coalesce(%(now)s::timestamptz, now()) + make_interval(secs => %(lease_seconds)s))
RETURNING id;

-- name: bulk_action_lock
-- (read, locking) an unfinished action held by %(owner)s, renewing its lease: the start of
-- each batch's transaction. No row: it finished, or another process took it over.
UPDATE bulk_actions
SET lease_until = coalesce(%(now)s::timestamptz, now()) + make_interval(secs => %(lease_seconds)s)
WHERE id = %(id)s AND owner = %(owner)s AND status = 'running'
RETURNING id, action, filter, run_ids, cursor_id, may_run_commands, actor;

-- name: bulk_action_advance
-- running -> running | finished: a batch's runs moved; its counts and the keyset cursor
-- (the lowest run id handled) go forward in the same transaction. Tells the pages.
UPDATE bulk_actions
SET cursor_id = %(cursor_id)s, done = done + %(done)s, skipped = skipped + %(skipped)s,
    status = CASE WHEN %(finished)s THEN 'finished' ELSE status END,
    finished_at = CASE WHEN %(finished)s THEN coalesce(%(now)s::timestamptz, now()) END,
    lease_until = CASE WHEN %(finished)s THEN NULL ELSE lease_until END
WHERE id = %(id)s AND owner = %(owner)s
RETURNING id, pg_notify('sundial_events', 'runs') IS NULL AS notified;

-- name: bulk_action_release
-- running -> running: the process stops (shutting down) and lets go of its lease, so
-- another takes the action over at once.
UPDATE bulk_actions SET lease_until = coalesce(%(now)s::timestamptz, now())
WHERE id = %(id)s AND owner = %(owner)s AND status = 'running';

-- name: bulk_action_take_over
-- running -> running: unfinished actions whose lease ran out (their process died or
-- stopped), now leased to %(owner)s; it goes on from their cursor.
UPDATE bulk_actions
SET owner = %(owner)s, lease_until = coalesce(%(now)s::timestamptz, now()) + make_interval(secs => %(lease_seconds)s),
    resumed = resumed + 1
WHERE id IN (
    SELECT id FROM bulk_actions
    WHERE status = 'running' AND lease_until < coalesce(%(now)s::timestamptz, now())
    ORDER BY id
    FOR UPDATE SKIP LOCKED
)
RETURNING id;

-- name: bulk_action_by_id
-- (read) one action, and whether its process still holds it.
SELECT *, (status = 'running' AND lease_until < coalesce(%(now)s::timestamptz, now())) AS interrupted
FROM bulk_actions WHERE id = %(id)s;

-- name: bulk_action_recent
-- (read) the actions to show on the runs page: unfinished ones and those finished within
-- %(minutes)s minutes, newest first.
SELECT *, (status = 'running' AND lease_until < coalesce(%(now)s::timestamptz, now())) AS interrupted
FROM bulk_actions
WHERE status = 'running' OR finished_at > coalesce(%(now)s::timestamptz, now()) - make_interval(mins => %(minutes)s)
ORDER BY id DESC
LIMIT %(limit)s;

-- name: bulk_rerun_sources
-- (read) what a re-run copies from each run of a batch: its job, handler, args, queue and
-- settings. Only ended runs outside a DAG run, and, unless %(may_run_commands)s, no run of
-- a handler that runs commands. Hot or history (`all_runs`): a re-run is what is left for a
-- run that moved to the history.
SELECT id, handler, args, execution_model, base_priority AS priority, timeout_seconds,
       max_retries, job_id, queue
FROM all_runs
WHERE id = ANY(ARRAY(SELECT unnest(%(ids)s::bigint[])))
  AND status IN ('completed', 'failed', 'timed_out', 'cancelled', 'skipped')
  AND dag_run_id IS NULL
  AND (%(may_run_commands)s OR handler <> ALL(%(command_handlers)s::text[]))
ORDER BY id DESC;
