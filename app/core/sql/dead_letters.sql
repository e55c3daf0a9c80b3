-- Dead letters triage (`app/runs/dead_letters.py`): failed and timed-out runs grouped by the
-- error fingerprint their failing transition stored. Every read goes through `all_runs`
-- (hot and history, merged) and uses the partial indexes ix_job_runs_dead_letter_groups and
-- ix_run_history_dead_letters (fingerprint, finished_at); runs of a group up to its latest
-- resolution's `through` are hidden. Status changes go through `app/runs/transitions.py`.

-- name: dead_letter_groups
-- (read) open groups, most recently failing first, each with a sample (its newest run).
-- Walks the distinct fingerprints (one index probe each, not every dead letter), then for
-- the groups shown: first failure (one probe) and the count of open runs, counted up to
-- %(count_cap)s + 1 (a bigger group shows as "N+": counting 40,000 entries cost most of the
-- page).
WITH RECURSIVE prints AS (
    SELECT min(error_fingerprint) AS fingerprint FROM all_runs
    WHERE status IN ('failed', 'timed_out') AND error_fingerprint IS NOT NULL
    UNION ALL
    SELECT (SELECT min(error_fingerprint) FROM all_runs
            WHERE status IN ('failed', 'timed_out') AND error_fingerprint > p.fingerprint)
    FROM prints p
    WHERE p.fingerprint IS NOT NULL
), open AS (
    SELECT p.fingerprint, c.through, l.last_seen
    FROM prints p
    CROSS JOIN LATERAL (
        SELECT coalesce(max(through), '-infinity') AS through
        FROM dead_letter_resolutions WHERE fingerprint = p.fingerprint
    ) c
    CROSS JOIN LATERAL (
        SELECT max(finished_at) AS last_seen FROM all_runs
        WHERE status IN ('failed', 'timed_out') AND error_fingerprint = p.fingerprint
    ) l
    WHERE p.fingerprint IS NOT NULL AND l.last_seen > c.through
    ORDER BY l.last_seen DESC
    LIMIT %(limit)s
)
SELECT o.fingerprint, n.runs, f.first_seen, o.last_seen,
       s.id AS sample_run_id, s.handler, s.status, s.last_error, s.traceback
FROM open o
CROSS JOIN LATERAL (
    SELECT count(*)::int AS runs FROM (
        SELECT FROM all_runs
        WHERE status IN ('failed', 'timed_out') AND error_fingerprint = o.fingerprint
          AND finished_at > o.through
        LIMIT %(count_cap)s + 1
    ) capped
) n
CROSS JOIN LATERAL (
    SELECT min(finished_at) AS first_seen FROM all_runs
    WHERE status IN ('failed', 'timed_out') AND error_fingerprint = o.fingerprint
      AND finished_at > o.through
) f
CROSS JOIN LATERAL (
    SELECT id, handler, status, last_error, traceback FROM all_runs
    WHERE status IN ('failed', 'timed_out') AND error_fingerprint = o.fingerprint
    ORDER BY finished_at DESC
    LIMIT 1
) s
ORDER BY o.last_seen DESC;

-- name: dead_letter_hourly
-- (read) failures per hour over the last 24 hours of these groups, for their sparklines;
-- hours_ago 0 is the hour ending now. Binned by date_bin on timestamps, then the 24 bins
-- turned into hours: no per-row arithmetic on the index entries it counts.
SELECT fingerprint,
       greatest(floor(extract(epoch FROM coalesce(%(now)s::timestamptz, now()) - bin) / 3600)::int - 1,
                0) AS hours_ago,
       n
FROM (
    SELECT error_fingerprint AS fingerprint,
           date_bin('1 hour', finished_at, coalesce(%(now)s::timestamptz, now())) AS bin,
           count(*)::int AS n
    FROM all_runs
    WHERE status IN ('failed', 'timed_out') AND error_fingerprint = ANY(%(fingerprints)s::text[])
      AND finished_at > coalesce(%(now)s::timestamptz, now()) - interval '24 hours'
    GROUP BY 1, 2
) bins;

-- name: dead_letter_group_count
-- (read) the dry run of "retry group": how many open runs the group holds now, the newest
-- one's finish (what a resolution covers), and how many of them a retry reaches: those
-- still hot (a dead letter in the history no longer changes).
WITH resolved AS (
    SELECT coalesce(max(through), '-infinity') AS through
    FROM dead_letter_resolutions WHERE fingerprint = %(fingerprint)s
)
SELECT count(*)::int AS runs, max(a.finished_at) AS through,
       (SELECT count(*)::int FROM job_runs h, resolved r
        WHERE h.status IN ('failed', 'timed_out') AND h.error_fingerprint = %(fingerprint)s
          AND h.finished_at > r.through) AS hot
FROM all_runs a, resolved r
WHERE a.status IN ('failed', 'timed_out') AND a.error_fingerprint = %(fingerprint)s
  AND a.finished_at > r.through;

-- name: dead_letter_group_runs
-- (read) the open runs of one group, newest first (not their args: the page does not
-- show them, and decoding 200 of them cost more than the query).
SELECT id, handler, status, attempt, last_error, finished_at, dag_run_id, dag_node,
       quarantined, crash_count
FROM all_runs
WHERE status IN ('failed', 'timed_out') AND error_fingerprint = %(fingerprint)s
  AND finished_at > coalesce(
      (SELECT max(through) FROM dead_letter_resolutions WHERE fingerprint = %(fingerprint)s),
      '-infinity')
ORDER BY finished_at DESC
LIMIT %(limit)s;

-- name: dead_letter_run
-- (read) one run, for "edit args and retry".
SELECT id, handler, status, attempt, args, last_error, traceback, error_fingerprint, finished_at
FROM all_runs WHERE id = %(id)s;

-- name: dead_letter_resolution_insert
-- (new) a person resolved or discarded a group: its runs up to `through` leave triage.
INSERT INTO dead_letter_resolutions (fingerprint, action, reason, actor, runs, through)
VALUES (%(fingerprint)s, %(action)s, %(reason)s, %(actor)s, %(runs)s, %(through)s)
RETURNING id, fingerprint, action, reason, actor, runs, through, at;

-- name: dead_letter_resolutions_recent
-- (read) the latest resolutions, who and why.
SELECT id, fingerprint, action, reason, actor, runs, through, at
FROM dead_letter_resolutions
ORDER BY at DESC
LIMIT %(limit)s;

-- name: dead_letter_group
-- (read) one open group: its count (up to %(count_cap)s + 1), first and last failure (one
-- index probe each) and its newest run as sample.
WITH cut AS (
    SELECT coalesce(max(through), '-infinity') AS through
    FROM dead_letter_resolutions WHERE fingerprint = %(fingerprint)s
)
SELECT %(fingerprint)s AS fingerprint, n.runs, f.first_seen, s.finished_at AS last_seen,
       s.id AS sample_run_id, s.handler, s.status, s.last_error, s.traceback
FROM (
    SELECT count(*)::int AS runs FROM (
        SELECT FROM all_runs
        WHERE status IN ('failed', 'timed_out') AND error_fingerprint = %(fingerprint)s
          AND finished_at > (SELECT through FROM cut)
        LIMIT %(count_cap)s + 1
    ) capped
) n
CROSS JOIN (
    SELECT min(finished_at) AS first_seen FROM all_runs
    WHERE status IN ('failed', 'timed_out') AND error_fingerprint = %(fingerprint)s
      AND finished_at > (SELECT through FROM cut)
) f
CROSS JOIN LATERAL (
    SELECT id, handler, status, last_error, traceback, finished_at FROM all_runs
    WHERE status IN ('failed', 'timed_out') AND error_fingerprint = %(fingerprint)s
      AND finished_at > (SELECT through FROM cut)
    ORDER BY finished_at DESC
    LIMIT 1
) s;
