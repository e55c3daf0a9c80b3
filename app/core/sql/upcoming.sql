-- What the load forecast and the week calendar read: the rules of the schedules that will
-- fire. Paused schedules and schedules that have ended are left out.

-- name: upcoming_schedules
-- Active schedules whose next fire comes before %(until)s, with their rule and what they
-- run, optionally only those whose name or target contains %(search)s and not %(excluding)s
-- (the schedule being edited, which the editor shows apart).
SELECT s.id, s.name, s.cron, s.interval_seconds, s.timezone, s.start_at, s.end_at,
       s.created_at, s.dst_skipped, s.dst_repeated, s.calendar_id,
       coalesce(j.name, w.name) AS target
FROM schedules s
LEFT JOIN job_definitions j ON j.id = s.job_id
LEFT JOIN workflows w ON w.id = s.workflow_id
WHERE s.active AND s.next_fire_time < %(until)s
  AND (%(excluding)s::text IS NULL OR s.name <> %(excluding)s::text)
  AND (%(search)s::text IS NULL
       OR strpos(lower(s.name), lower(%(search)s::text)) > 0
       OR strpos(lower(coalesce(j.name, w.name, '')), lower(%(search)s::text)) > 0)
ORDER BY s.name;

-- name: upcoming_edit_mark
-- (read) what changes when schedules or exclusion calendars are added, edited or removed:
-- the key under which a forecast or week read from them is kept for a few seconds.
SELECT (SELECT count(*) FROM schedules) AS schedules,
       (SELECT max(updated_at) FROM schedules) AS schedule_edit,
       (SELECT count(*) FROM exclusion_calendars) AS calendars,
       (SELECT max(updated_at) FROM exclusion_calendars) AS calendar_edit,
       (SELECT count(*) FROM blackout_windows) AS windows;
