-- Per-run logs (`app/runs/run_logs.py`): the worker appends a batch of lines per statement;
-- the run page reads them back by the primary key (run_id, attempt, seq), or, once the run
-- moved to the history, by ix_run_log_history_run (the `all_run_logs` view reads both).

-- name: run_logs_append
-- (new) a batch of captured lines; a batch the worker re-sends after a reconnect is a no-op.
INSERT INTO run_logs (run_id, attempt, seq, at, stream, line)
SELECT * FROM unnest(
    %(run_ids)s::bigint[], %(attempts)s::int[], %(seqs)s::int[], %(ats)s::timestamptz[],
    %(streams)s::text[], %(lines)s::text[]
)
ON CONFLICT (run_id, attempt, seq) DO NOTHING;

-- name: run_logs_of_run
-- (read) one run's lines, attempt by attempt, in the order they were written.
SELECT attempt, seq, at, stream, line
FROM all_run_logs
WHERE run_id = %(run_id)s
ORDER BY attempt, seq
LIMIT %(limit)s;

-- name: run_logs_run
-- (read) what the log page says about the run itself.
SELECT id, handler, status, attempt, execution_model FROM all_runs WHERE id = %(run_id)s;
