-- Leader leases: one row per singleton role (the trigger). `term` only grows; it fences a
-- leader that lost the lease without noticing.

-- name: lease_acquire
-- Take the lease when nobody holds it or the holder's lease has expired, at term + 1;
-- a new leader notifies the dashboard (`sundial_events`, 'trigger').
INSERT INTO leader_leases AS l (name, holder, term, acquired_at, lease_until)
VALUES (
    %(name)s, %(holder)s, 1, coalesce(%(now)s::timestamptz, now()),
    coalesce(%(now)s::timestamptz, now()) + make_interval(secs => %(seconds)s)
)
ON CONFLICT (name) DO UPDATE
SET holder = excluded.holder, term = l.term + 1, acquired_at = excluded.acquired_at,
    lease_until = excluded.lease_until
WHERE l.lease_until < excluded.acquired_at
RETURNING term, pg_notify('sundial_events', 'trigger') IS NULL AS notified;

-- name: lease_renew
-- Extend our own unexpired lease, matching holder and term; no row means: step down.
UPDATE leader_leases
SET lease_until = coalesce(%(now)s::timestamptz, now()) + make_interval(secs => %(seconds)s)
WHERE name = %(name)s AND holder = %(holder)s AND term = %(term)s
  AND lease_until >= coalesce(%(now)s::timestamptz, now())
RETURNING term;

-- name: lease_check
-- Whether we still hold the lease at this transaction's now.
SELECT 1 AS held FROM leader_leases
WHERE name = %(name)s AND holder = %(holder)s AND term = %(term)s
  AND lease_until >= coalesce(%(now)s::timestamptz, now());

-- name: lease_resign
-- Give the lease up at once (a clean stop), so a standby takes over on its next tick.
UPDATE leader_leases
SET lease_until = coalesce(%(now)s::timestamptz, now()) - interval '1 microsecond'
WHERE name = %(name)s AND holder = %(holder)s AND term = %(term)s
RETURNING term;
