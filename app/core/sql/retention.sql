-- Deleting sign-ins that can no longer be used. `app/runs/retention.py` runs them (for the
-- reaper). The history of runs goes a day at a time instead (history.sql).

-- name: session_prune
-- Up to %(limit)s web sessions that have expired: a browser that never signed out leaves
-- its session behind, and `session_user` no longer accepts it (index on expires_at).
WITH doomed AS (
    SELECT id FROM web_sessions
    WHERE expires_at <= coalesce(%(now)s::timestamptz, now())
    ORDER BY expires_at
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
), gone AS (
    DELETE FROM web_sessions s USING doomed WHERE s.id = doomed.id RETURNING s.id
)
SELECT count(*) AS sessions FROM gone;

-- name: sign_in_link_prune
-- Up to %(limit)s sign-in links that have expired unused (a used link is deleted as it is
-- used). The table holds the few links of the last minutes: no index needed.
WITH doomed AS (
    SELECT id FROM sign_in_links
    WHERE expires_at <= coalesce(%(now)s::timestamptz, now())
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
), gone AS (
    DELETE FROM sign_in_links l USING doomed WHERE l.id = doomed.id RETURNING l.id
)
SELECT count(*) AS links FROM gone;
