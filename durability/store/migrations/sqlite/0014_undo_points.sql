-- The undo points restores named (docs/RETENTION.md): a restore's
-- pre-restore capture may deduplicate onto an existing checkpoint (the tree
-- had not changed since), whose source is then not 'pre-restore'; gc keeps
-- what a restore named as its undo for the pre-restore window, counted from
-- the last restore that named it.  One row per checkpoint named (seqs are
-- numbered per attempt and machine, so the machine is in the key).  Every
-- pre-restore checkpoint recorded before this migration was named by its
-- restore, at the time it was recorded.
CREATE TABLE IF NOT EXISTS undo_points (
    run_id          TEXT NOT NULL,
    node_id         TEXT NOT NULL,
    iteration       INTEGER NOT NULL,
    attempt         INTEGER NOT NULL,
    host            TEXT NOT NULL,
    seq             INTEGER NOT NULL,
    named_at_ms     INTEGER NOT NULL,
    PRIMARY KEY (run_id, node_id, iteration, attempt, host, seq)
);
INSERT OR IGNORE INTO undo_points (run_id, node_id, iteration, attempt, host, seq, named_at_ms)
SELECT run_id, node_id, iteration, attempt, host, seq, created_at_ms
  FROM workspace_checkpoints WHERE source = 'pre-restore';
