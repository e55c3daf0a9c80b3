-- Notifications (`app/notify/`): channels, rules, and the outbox of messages owed to a
-- channel, one per (channel, event) by uq_notification_outbox_event.

-- name: channel_insert
-- (write) a new channel; its secret is already encrypted.
INSERT INTO notification_channels (id, name, kind, secret, hint, per_minute, created_by)
VALUES (gen_random_uuid(), %(name)s, %(kind)s, %(secret)s, %(hint)s, %(per_minute)s, %(actor)s)
ON CONFLICT (name) DO NOTHING
RETURNING id, name, kind, hint, per_minute, created_at;

-- name: channel_update
-- (write) rename a channel, change its rate, and (when a new one is given) its secret.
UPDATE notification_channels
SET name = %(name)s, per_minute = %(per_minute)s,
    secret = coalesce(%(secret)s, secret), hint = coalesce(%(hint)s, hint),
    kind = coalesce(%(kind)s, kind), updated_at = coalesce(%(now)s::timestamptz, now())
WHERE id = %(id)s
RETURNING id, name, kind, hint, per_minute, created_at;

-- name: channel_delete
-- (write) a channel, its rules and its delivery log (cascade).
DELETE FROM notification_channels WHERE id = %(id)s RETURNING id, name, kind, hint, per_minute;

-- name: channel_by_name
-- (read) one channel, without its secret.
SELECT id, name, kind, hint, per_minute, created_at FROM notification_channels
WHERE name = %(name)s;

-- name: channel_by_id
-- (read) one channel, without its secret.
SELECT id, name, kind, hint, per_minute, created_at FROM notification_channels
WHERE id = %(id)s;

-- name: channels_list
-- (read) every channel by name, without secrets, with the outcome of its latest message.
SELECT c.id, c.name, c.kind, c.hint, c.per_minute, c.created_at
FROM notification_channels c
ORDER BY c.name;

-- name: channel_secrets
-- (read, delivery pass) the encrypted secrets and rates of these channels.
SELECT id, name, kind, secret, per_minute FROM notification_channels WHERE id = ANY(%(ids)s);

-- name: rule_insert
-- (write) a rule: tell a channel about one kind of event, optionally only one job's.
INSERT INTO notification_rules (id, channel_id, event, job_id, schedule_id, created_by)
VALUES (gen_random_uuid(), %(channel_id)s, %(event)s, %(job_id)s, %(schedule_id)s, %(actor)s)
RETURNING id, channel_id, event, job_id, schedule_id, created_at;

-- name: rule_delete
-- (write) one rule; messages it already queued stay in the log.
DELETE FROM notification_rules WHERE id = %(id)s
RETURNING id, channel_id, event, job_id, schedule_id;

-- name: rules_list
-- (read) every rule with its channel's, job's and schedule's names, for the page and the
-- detection pass.
SELECT r.id, r.channel_id, c.name AS channel, r.event, r.job_id, j.name AS job,
       r.schedule_id, s.name AS schedule, r.created_at
FROM notification_rules r
JOIN notification_channels c ON c.id = r.channel_id
LEFT JOIN job_definitions j ON j.id = r.job_id
LEFT JOIN schedules s ON s.id = r.schedule_id
ORDER BY c.name, r.event, j.name NULLS FIRST, s.name NULLS FIRST, r.created_at;

-- name: outbox_insert
-- (write) a message owed to a channel; an event already queued for it is a no-op.
INSERT INTO notification_outbox (channel_id, rule_id, event, event_key, title, body,
                                 next_try_at, created_at)
VALUES (%(channel_id)s, %(rule_id)s, %(event)s, %(event_key)s, %(title)s, %(body)s,
        coalesce(%(now)s::timestamptz, now()), coalesce(%(now)s::timestamptz, now()))
ON CONFLICT (channel_id, event_key) DO NOTHING
RETURNING id;

-- name: outbox_claim_due
-- (write, in the delivery transaction) pending messages due now, locked; another reaper
-- skips them (index ix_notification_outbox_due).
SELECT id, channel_id, event, event_key, title, body, tries
FROM notification_outbox
WHERE status = 'pending' AND next_try_at <= coalesce(%(now)s::timestamptz, now())
ORDER BY next_try_at, id
LIMIT %(limit)s
FOR UPDATE SKIP LOCKED;

-- name: outbox_sent_recently
-- (read) messages each of these channels sent in the minute before now (grouped ones
-- counted once), for the rate limit (ix_notification_outbox_sent).
SELECT channel_id, count(*)::int AS sent
FROM notification_outbox
WHERE channel_id = ANY(%(ids)s) AND status = 'sent' AND sent_with IS NULL
  AND sent_at > coalesce(%(now)s::timestamptz, now()) - interval '1 minute'
GROUP BY channel_id;

-- name: outbox_mark_sent
-- pending -> sent: these messages went out (in the message of `sent_with`, when grouped).
UPDATE notification_outbox
SET status = 'sent', sent_at = coalesce(%(now)s::timestamptz, now()), tries = tries + 1,
    last_error = NULL, sent_with = %(sent_with)s
WHERE id = ANY(%(ids)s) AND status = 'pending';

-- name: outbox_mark_retry
-- pending -> pending later (or failed when the tries are spent): the send failed.
UPDATE notification_outbox
SET tries = tries + 1, last_error = %(error)s,
    status = CASE WHEN tries + 1 >= %(max_tries)s THEN 'failed' ELSE 'pending' END,
    next_try_at = coalesce(%(now)s::timestamptz, now()) + make_interval(secs => %(delay)s)
WHERE id = ANY(%(ids)s) AND status = 'pending';

-- name: outbox_postpone
-- pending -> pending later, no try spent: the channel's rate is used up this minute.
UPDATE notification_outbox
SET next_try_at = coalesce(%(now)s::timestamptz, now()) + make_interval(secs => %(delay)s)
WHERE id = ANY(%(ids)s) AND status = 'pending';

-- name: outbox_of_channel
-- (read) a channel's delivery log, newest first (ix_notification_outbox_channel).
SELECT id, event, title, status, tries, next_try_at, last_error, created_at, sent_at, sent_with
FROM notification_outbox
WHERE channel_id = %(channel_id)s
ORDER BY id DESC
LIMIT %(limit)s;

-- name: outbox_by_id
-- (read) one message, for the test button's result.
SELECT id, channel_id, event, title, status, tries, last_error, created_at, sent_at
FROM notification_outbox WHERE id = %(id)s;

-- name: breaker_opened_since
-- (read, detection pass) circuit breakers that opened at or after an instant, newest
-- first, from the audit log (its index on at).
SELECT id, at, target_id AS service, details
FROM audit_log
WHERE at >= %(since)s AND action = 'dependency.open'
ORDER BY at DESC
LIMIT %(limit)s;

-- name: runs_jobs
-- (read, detection pass) the job of each of these runs (a dead-letter group's sample).
SELECT id, job_id FROM all_runs WHERE id = ANY(%(ids)s);

-- name: schedule_id_by_name
-- (read) a schedule's id, for a rule narrowed to it.
SELECT id FROM schedules WHERE name = %(name)s;

-- name: outbox_prune
-- (write, the reaper's prune pass) delete a batch of sent or failed messages made before
-- an instant; pending ones are kept whatever their age.
DELETE FROM notification_outbox
WHERE id IN (
    SELECT id FROM notification_outbox
    WHERE status <> 'pending' AND created_at < %(before)s
    ORDER BY id
    LIMIT %(limit)s
);
