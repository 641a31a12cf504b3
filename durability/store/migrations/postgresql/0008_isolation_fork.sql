-- Isolated worktrees (a task's own jj workspace or git worktree) and forks.
-- One isolated worktree per task iteration, made before its first attempt
-- and reused by the later ones; state: active, conflict, merged, removed.
CREATE TABLE task_worktrees (
    run_id          TEXT COLLATE "C" NOT NULL,
    node_id         TEXT COLLATE "C" NOT NULL,
    iteration       BIGINT NOT NULL,
    path            TEXT COLLATE "C" NOT NULL,
    kind            TEXT COLLATE "C" NOT NULL,
    shared          TEXT COLLATE "C" NOT NULL,
    -- The shared worktree's tree it started from: the merge base.
    base_commit     TEXT COLLATE "C" NOT NULL,
    name            TEXT COLLATE "C" NOT NULL,
    state           TEXT COLLATE "C" NOT NULL,
    created_at_ms   BIGINT NOT NULL,
    updated_at_ms   BIGINT NOT NULL,
    PRIMARY KEY (run_id, node_id, iteration)
);

-- A run made by `durability fork`: where it was forked from.
CREATE TABLE run_forks (
    run_id          TEXT COLLATE "C" PRIMARY KEY,
    parent_run_id   TEXT COLLATE "C" NOT NULL,
    node_id         TEXT COLLATE "C" NOT NULL,
    iteration       BIGINT NOT NULL,
    attempt         BIGINT NOT NULL,
    seq             BIGINT NOT NULL,
    commit_id       TEXT COLLATE "C" NOT NULL,
    -- Task outputs copied from the parent run (not re-run).
    copied          BIGINT NOT NULL,
    created_at_ms   BIGINT NOT NULL
);
