-- Tier 2: worktrees the snapshot service watches, so a restarted service
-- takes them up again.  One watch per worktree: watching it again for another
-- attempt replaces the row.
CREATE TABLE watches (
    worktree        TEXT PRIMARY KEY,
    run_id          TEXT NOT NULL,
    node_id         TEXT NOT NULL,
    iteration       INTEGER NOT NULL,
    attempt         INTEGER NOT NULL,
    settle_ms       INTEGER NOT NULL,
    max_delay_ms    INTEGER NOT NULL,
    created_at_ms   INTEGER NOT NULL
);
