-- Exclusion calendars: their holidays setting, blackout windows, and which schedules name
-- them. The trigger loads the calendars of a batch of due schedules in one statement.

-- name: calendar_list
-- Every calendar with how many blackout windows it has and how many schedules name it.
SELECT c.id, c.name, c.country, c.subdivision, c.updated_at,
       (SELECT count(*) FROM blackout_windows w WHERE w.calendar_id = c.id) AS windows,
       (SELECT count(*) FROM schedules s WHERE s.calendar_id = c.id) AS schedules
FROM exclusion_calendars c
ORDER BY c.name;

-- name: calendar_names
-- Calendar names, for the menu that applies one to a schedule.
SELECT id, name FROM exclusion_calendars ORDER BY name;

-- name: calendar_by_name
SELECT id, name, country, subdivision, created_at, updated_at
FROM exclusion_calendars
WHERE name = %(name)s;

-- name: calendar_lock_by_name
-- One calendar, locked against other people changing it at the same time.
SELECT id, name, country, subdivision, created_at, updated_at
FROM exclusion_calendars
WHERE name = %(name)s
FOR UPDATE;

-- name: calendar_insert
INSERT INTO exclusion_calendars (id, name, country, subdivision, created_at, updated_at)
VALUES (%(id)s, %(name)s, %(country)s, %(subdivision)s,
        coalesce(%(now)s::timestamptz, now()), coalesce(%(now)s::timestamptz, now()))
ON CONFLICT (name) DO NOTHING
RETURNING id;

-- name: calendar_update
UPDATE exclusion_calendars
SET name = %(name)s, country = %(country)s, subdivision = %(subdivision)s,
    updated_at = coalesce(%(now)s::timestamptz, now())
WHERE id = %(id)s;

-- name: calendar_delete
-- The calendar and its windows; schedules that named it no longer exclude anything
-- (their `calendar_id` is set to NULL by the foreign key).
DELETE FROM exclusion_calendars WHERE id = %(id)s;

-- name: calendar_windows
-- A calendar's blackout windows, earliest first.
SELECT id, name, starts_at, ends_at, timezone
FROM blackout_windows
WHERE calendar_id = %(calendar_id)s
ORDER BY starts_at, id;

-- name: calendar_schedules
-- The schedules that name a calendar (id and name).
SELECT id, name FROM schedules WHERE calendar_id = %(calendar_id)s ORDER BY name;

-- name: window_insert
INSERT INTO blackout_windows (calendar_id, name, starts_at, ends_at, timezone)
VALUES (%(calendar_id)s, %(name)s, %(starts_at)s, %(ends_at)s, %(timezone)s)
RETURNING id;

-- name: window_delete
-- One blackout window of a calendar, returned for the audit log.
DELETE FROM blackout_windows
WHERE id = %(id)s AND calendar_id = %(calendar_id)s
RETURNING id, name, starts_at, ends_at, timezone;

-- name: calendar_touch
-- A calendar's windows changed: it was updated now.
UPDATE exclusion_calendars SET updated_at = coalesce(%(now)s::timestamptz, now())
WHERE id = %(id)s;

-- name: schedule_calendar_lock
-- A schedule and the name of the calendar it names, locked against the trigger and others.
SELECT s.id, s.name, s.calendar_id, c.name AS calendar_name
FROM schedules s
LEFT JOIN exclusion_calendars c ON c.id = s.calendar_id
WHERE s.name = %(name)s
FOR UPDATE OF s;

-- name: schedule_set_calendar
-- The exclusion calendar a schedule names (NULL: none).
UPDATE schedules
SET calendar_id = %(calendar_id)s, updated_at = coalesce(%(now)s::timestamptz, now())
WHERE id = %(id)s;

-- name: calendar_load_many
-- The calendars of a batch of due schedules with their blackout windows, in one statement
-- (the trigger checks every fire of the batch against them in memory).
SELECT c.id, c.name, c.country, c.subdivision,
       coalesce(array_agg(w.name ORDER BY w.starts_at) FILTER (WHERE w.id IS NOT NULL), '{}')
           AS window_names,
       coalesce(array_agg(w.starts_at ORDER BY w.starts_at) FILTER (WHERE w.id IS NOT NULL), '{}')
           AS window_starts,
       coalesce(array_agg(w.ends_at ORDER BY w.starts_at) FILTER (WHERE w.id IS NOT NULL), '{}')
           AS window_ends
FROM exclusion_calendars c
LEFT JOIN blackout_windows w ON w.calendar_id = c.id
WHERE c.id = ANY(%(ids)s::uuid[])
GROUP BY c.id;
