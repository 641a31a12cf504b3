-- Layer 2 core: runs, attempts, workspace checkpoints and gaps.
CREATE TABLE runs (
    run_id          TEXT PRIMARY KEY,
    created_at_ms   INTEGER NOT NULL
);

CREATE TABLE attempts (
    run_id          TEXT NOT NULL REFERENCES runs(run_id),
    node_id         TEXT NOT NULL,
    iteration       INTEGER NOT NULL,
    attempt         INTEGER NOT NULL,
    state           TEXT NOT NULL DEFAULT 'running',
    started_at_ms   INTEGER NOT NULL,
    finished_at_ms  INTEGER,
    heartbeat_at_ms INTEGER,
    worktree        TEXT,
    jj_pointer      TEXT,
    error_json      TEXT,
    PRIMARY KEY (run_id, node_id, iteration, attempt)
);

CREATE TABLE workspace_checkpoints (
    run_id          TEXT NOT NULL,
    node_id         TEXT NOT NULL,
    iteration       INTEGER NOT NULL,
    attempt         INTEGER NOT NULL,
    seq             INTEGER NOT NULL,
    commit_id       TEXT NOT NULL,
    change_id       TEXT,
    operation_id    TEXT,
    worktree        TEXT NOT NULL,
    source          TEXT NOT NULL,
    tool_use_id     TEXT,
    label           TEXT,
    -- A retried request (same id) finds its row instead of adding another.
    request_id      TEXT NOT NULL UNIQUE,
    created_at_ms   INTEGER NOT NULL,
    PRIMARY KEY (run_id, node_id, iteration, attempt, seq),
    FOREIGN KEY (run_id, node_id, iteration, attempt)
        REFERENCES attempts(run_id, node_id, iteration, attempt)
);

CREATE TABLE gaps (
    -- Ingesting a spool twice adds nothing: one row per failed request.
    request_id      TEXT PRIMARY KEY,
    ts_ms           INTEGER NOT NULL,
    run_id          TEXT NOT NULL,
    node_id         TEXT,
    iteration       INTEGER,
    attempt         INTEGER,
    worktree        TEXT,
    source          TEXT,
    tool_use_id     TEXT,
    reason          TEXT NOT NULL,
    detail          TEXT
);
CREATE INDEX gaps_by_run ON gaps(run_id, ts_ms);
