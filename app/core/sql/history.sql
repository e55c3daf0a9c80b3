-- Moving ended runs out of the hot tables into the day partitions of their history
-- (`app/runs/history.py`, for the reaper), and what the partitions hold. Not transitions:
-- no run changes status; a run that ended long enough ago changes table, whole (attempts,
-- log lines, DAG edges with it), in one statement.

-- name: history_lock_lone
-- Up to %(limit)s runs outside any DAG that are due to move, oldest first, locked (never
-- waiting: a row someone holds moves next pass), each with its history day's start. Due: it
-- ended before hot_before (well, cancelled or skipped) or dead_before (a dead letter, kept
-- hot longer so it can be retried in place), and its idempotency key, if any, is older than
-- key_before (a key is unique only among the hot runs). A NULL cutoff keeps that kind hot.
SELECT id, finished_at AS history_at
FROM job_runs
WHERE dag_run_id IS NULL
  AND ((status IN ('completed', 'cancelled', 'skipped')
        AND finished_at < coalesce(%(hot_before)s::timestamptz, '-infinity'))
    OR (status IN ('failed', 'timed_out')
        AND finished_at < coalesce(%(dead_before)s::timestamptz, '-infinity')))
  AND (idempotency_key IS NULL
       OR finished_at < coalesce(%(key_before)s::timestamptz, '-infinity'))
LIMIT %(limit)s
FOR UPDATE SKIP LOCKED;

-- name: history_lock_dags
-- Up to %(limit)s DAG runs whose every step is due to move (as in history_lock_lone),
-- locked with their steps, each with how many steps were locked and its history day: its
-- last step's end, so a DAG run lives in one day. Neither lock waits; a DAG run or step
-- someone holds (a person retrying a step) is passed over, and history_move_dags keeps it.
WITH due AS (
    SELECT d.id FROM dag_runs d
    WHERE d.created_at < coalesce(%(hot_before)s::timestamptz, '-infinity')
      AND NOT EXISTS (
          SELECT 1 FROM job_runs r
          WHERE r.dag_run_id = d.id
            AND NOT coalesce(
                ((r.status IN ('completed', 'cancelled', 'skipped')
                  AND r.finished_at < coalesce(%(hot_before)s::timestamptz, '-infinity'))
                 OR (r.status IN ('failed', 'timed_out')
                  AND r.finished_at < coalesce(%(dead_before)s::timestamptz, '-infinity')))
                AND (r.idempotency_key IS NULL
                  OR r.finished_at < coalesce(%(key_before)s::timestamptz, '-infinity')),
                false
            )
      )
    ORDER BY d.created_at
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
), steps AS (
    SELECT r.dag_run_id, r.finished_at FROM job_runs r
    WHERE r.dag_run_id = ANY(ARRAY(SELECT id FROM due))
    FOR UPDATE SKIP LOCKED
)
SELECT d.id, coalesce(s.steps, 0) AS steps,
       coalesce(s.history_at, %(hot_before)s::timestamptz) AS history_at
FROM due d
LEFT JOIN (
    SELECT dag_run_id, count(*)::int AS steps, max(finished_at) AS history_at
    FROM steps GROUP BY dag_run_id
) s ON s.dag_run_id = d.id;

-- name: history_move_lone
-- The runs history_lock_lone locked (ids with their history day), moved with their
-- attempts, log lines and edges. Each DELETE returns the hot row's columns in order and
-- then history_at, which is the history table's shape.
WITH moving AS (
    SELECT * FROM unnest(%(ids)s::bigint[], %(at)s::timestamptz[]) AS m(id, history_at)
), runs AS (
    DELETE FROM job_runs r USING moving m WHERE r.id = m.id RETURNING r.*, m.history_at
), run_rows AS (
    INSERT INTO run_history SELECT * FROM runs RETURNING 1
), attempts AS (
    DELETE FROM job_run_attempts a USING moving m WHERE a.run_id = m.id
    RETURNING a.*, m.history_at
), attempt_rows AS (
    INSERT INTO run_attempt_history SELECT * FROM attempts
), logs AS (
    DELETE FROM run_logs l USING moving m WHERE l.run_id = m.id RETURNING l.*, m.history_at
), log_rows AS (
    INSERT INTO run_log_history SELECT * FROM logs
), deps AS (
    DELETE FROM job_run_deps e USING moving m WHERE e.run_id = m.id
    RETURNING e.*, m.history_at
), dep_rows AS (
    INSERT INTO run_dep_history SELECT * FROM deps
)
SELECT count(*) AS runs FROM run_rows;

-- name: history_move_dags
-- The DAG runs history_lock_dags locked, whole: the DAG run, every step, their attempts,
-- log lines and edges, into the DAG run's history day. Checked again in this statement's
-- snapshot, taken once that one's locks were held: a DAG run moves only if its steps are
-- still all due and all locked (none passed over, none added since).
WITH moving AS (
    SELECT l.id, l.history_at
    FROM unnest(%(ids)s::uuid[], %(steps)s::int[], %(at)s::timestamptz[])
        AS l(id, steps, history_at)
    WHERE (SELECT count(*) FROM job_runs r WHERE r.dag_run_id = l.id) = l.steps
      AND NOT EXISTS (
          SELECT 1 FROM job_runs r
          WHERE r.dag_run_id = l.id
            AND NOT coalesce(
                ((r.status IN ('completed', 'cancelled', 'skipped')
                  AND r.finished_at < coalesce(%(hot_before)s::timestamptz, '-infinity'))
                 OR (r.status IN ('failed', 'timed_out')
                  AND r.finished_at < coalesce(%(dead_before)s::timestamptz, '-infinity')))
                AND (r.idempotency_key IS NULL
                  OR r.finished_at < coalesce(%(key_before)s::timestamptz, '-infinity')),
                false
            )
      )
), step_ids AS (
    SELECT r.id, m.history_at FROM job_runs r JOIN moving m ON r.dag_run_id = m.id
), dags AS (
    DELETE FROM dag_runs d USING moving m WHERE d.id = m.id RETURNING d.*, m.history_at
), dag_rows AS (
    INSERT INTO dag_run_history SELECT * FROM dags RETURNING 1
), runs AS (
    DELETE FROM job_runs r USING step_ids s WHERE r.id = s.id RETURNING r.*, s.history_at
), run_rows AS (
    INSERT INTO run_history SELECT * FROM runs RETURNING 1
), attempts AS (
    DELETE FROM job_run_attempts a USING step_ids s WHERE a.run_id = s.id
    RETURNING a.*, s.history_at
), attempt_rows AS (
    INSERT INTO run_attempt_history SELECT * FROM attempts
), logs AS (
    DELETE FROM run_logs l USING step_ids s WHERE l.run_id = s.id RETURNING l.*, s.history_at
), log_rows AS (
    INSERT INTO run_log_history SELECT * FROM logs
), deps AS (
    DELETE FROM job_run_deps e USING step_ids s WHERE e.run_id = s.id
    RETURNING e.*, s.history_at
), dep_rows AS (
    INSERT INTO run_dep_history SELECT * FROM deps
)
SELECT (SELECT count(*) FROM dag_rows) AS dag_runs, (SELECT count(*) FROM run_rows) AS runs;

-- name: history_partitions
-- Every day partition of the history tables, oldest first, with its bounds and size on
-- disk (table, indexes and TOAST).
SELECT parent.relname AS parent, child.relname AS name,
       pg_get_expr(child.relpartbound, child.oid) AS bounds,
       pg_total_relation_size(child.oid) AS bytes
FROM pg_inherits i
JOIN pg_class parent ON parent.oid = i.inhparent
JOIN pg_class child ON child.oid = i.inhrelid
JOIN pg_namespace n ON n.oid = parent.relnamespace
WHERE n.nspname = current_schema() AND parent.relname = ANY(%(parents)s)
ORDER BY child.relname;

-- name: history_partition_lock
-- Serialises the making and dropping of partitions among reapers (a transaction lock:
-- it ends with the transaction, also behind a transaction-mode pooler).
SELECT pg_advisory_xact_lock(%(key)s);

-- name: history_active_relatives
-- How many active runs (waiting, blocked or running, in the hot table) belong to a DAG run
-- that has steps in the given day: dropping the day would take the results they read.
SELECT count(*) AS runs
FROM job_runs r
WHERE r.dag_run_id IS NOT NULL
  AND r.status IN ('pending', 'blocked', 'running')
  AND EXISTS (
      SELECT 1 FROM run_history h
      WHERE h.dag_run_id = r.dag_run_id
        AND h.history_at >= %(day)s::timestamptz AND h.history_at < %(next_day)s::timestamptz
  );

-- The statements below name a partition: `app.runs.history` fills the braces in with
-- psycopg's sql.Identifier and sql.Literal.

-- name: history_make_partition
-- One day's partition of a history table.
CREATE TABLE {name} PARTITION OF {parent} FOR VALUES FROM ({start}) TO ({end});

-- name: history_drop_partition
-- One day's partition, gone with its files: retention, never a row-by-row DELETE.
DROP TABLE {name};

-- name: history_unsettled_partitions
-- Of these partitions, those never vacuumed by hand (`history_settle_partition`); one no
-- longer in the statistics (after a crash) counts as never, and is settled again, cheaply.
SELECT c.relname AS name
FROM pg_class c LEFT JOIN pg_stat_user_tables s ON s.relid = c.oid
WHERE c.oid = ANY(%(names)s::regclass[]) AND s.last_vacuum IS NULL
ORDER BY c.relname;

-- name: history_settle_partition
-- A day's partition once the mover has written the whole day: every page frozen and
-- all-visible (index-only scans of history never read the heap, and no anti-wraparound
-- vacuum ever walks the day again) and its statistics fresh. Autovacuum alone would not:
-- after a day's last inserts, too few rows are new to trigger it again.
VACUUM (FREEZE, ANALYZE) {name};

-- name: history_count_partition
-- Exact rows of one partition (`sundial history`).
SELECT count(*) AS n FROM {name};

-- name: history_copy_partition
-- One partition's rows as CSV with a header line, for the archive.
COPY {name} TO STDOUT WITH (FORMAT csv, HEADER);
