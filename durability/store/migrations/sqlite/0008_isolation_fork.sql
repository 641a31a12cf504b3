-- Isolated worktrees (a task's own jj workspace or git worktree) and forks.
-- One isolated worktree per task iteration, made before its first attempt
-- and reused by the later ones; state: active, conflict, merged, removed.
CREATE TABLE task_worktrees (
    run_id          TEXT NOT NULL,
    node_id         TEXT NOT NULL,
    iteration       INTEGER NOT NULL,
    path            TEXT NOT NULL,
    kind            TEXT NOT NULL,
    shared          TEXT NOT NULL,
    -- The shared worktree's tree it started from: the merge base.
    base_commit     TEXT NOT NULL,
    name            TEXT NOT NULL,
    state           TEXT NOT NULL,
    created_at_ms   BIGINT NOT NULL,
    updated_at_ms   BIGINT NOT NULL,
    PRIMARY KEY (run_id, node_id, iteration)
);

-- A run made by `durability fork`: where it was forked from.
CREATE TABLE run_forks (
    run_id          TEXT PRIMARY KEY,
    parent_run_id   TEXT NOT NULL,
    node_id         TEXT NOT NULL,
    iteration       INTEGER NOT NULL,
    attempt         INTEGER NOT NULL,
    seq             INTEGER NOT NULL,
    commit_id       TEXT NOT NULL,
    -- Task outputs copied from the parent run (not re-run).
    copied          INTEGER NOT NULL,
    created_at_ms   BIGINT NOT NULL
);
