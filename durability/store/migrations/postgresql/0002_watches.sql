-- Tier 2: worktrees the snapshot service watches, so a restarted service
-- takes them up again.  One watch per worktree: watching it again for another
-- attempt replaces the row.
CREATE TABLE watches (
    worktree        TEXT COLLATE "C" PRIMARY KEY,
    run_id          TEXT COLLATE "C" NOT NULL,
    node_id         TEXT COLLATE "C" NOT NULL,
    iteration       BIGINT NOT NULL,
    attempt         BIGINT NOT NULL,
    settle_ms       BIGINT NOT NULL,
    max_delay_ms    BIGINT NOT NULL,
    created_at_ms   BIGINT NOT NULL
);
