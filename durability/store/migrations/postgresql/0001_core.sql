-- Layer 2 core: runs, attempts, workspace checkpoints and gaps.
CREATE TABLE runs (
    run_id          TEXT COLLATE "C" PRIMARY KEY,
    created_at_ms   BIGINT NOT NULL
);

CREATE TABLE attempts (
    run_id          TEXT COLLATE "C" NOT NULL REFERENCES runs(run_id),
    node_id         TEXT COLLATE "C" NOT NULL,
    iteration       BIGINT NOT NULL,
    attempt         BIGINT NOT NULL,
    state           TEXT COLLATE "C" NOT NULL DEFAULT 'running',
    started_at_ms   BIGINT NOT NULL,
    finished_at_ms  BIGINT,
    heartbeat_at_ms BIGINT,
    worktree        TEXT COLLATE "C",
    jj_pointer      TEXT COLLATE "C",
    error_json      TEXT COLLATE "C",
    PRIMARY KEY (run_id, node_id, iteration, attempt)
);

CREATE TABLE workspace_checkpoints (
    run_id          TEXT COLLATE "C" NOT NULL,
    node_id         TEXT COLLATE "C" NOT NULL,
    iteration       BIGINT NOT NULL,
    attempt         BIGINT NOT NULL,
    seq             BIGINT NOT NULL,
    commit_id       TEXT COLLATE "C" NOT NULL,
    change_id       TEXT COLLATE "C",
    operation_id    TEXT COLLATE "C",
    worktree        TEXT COLLATE "C" NOT NULL,
    source          TEXT COLLATE "C" NOT NULL,
    tool_use_id     TEXT COLLATE "C",
    label           TEXT COLLATE "C",
    -- A retried request (same id) finds its row instead of adding another.
    request_id      TEXT COLLATE "C" NOT NULL UNIQUE,
    created_at_ms   BIGINT NOT NULL,
    PRIMARY KEY (run_id, node_id, iteration, attempt, seq),
    FOREIGN KEY (run_id, node_id, iteration, attempt)
        REFERENCES attempts(run_id, node_id, iteration, attempt)
);

CREATE TABLE gaps (
    -- Ingesting a spool twice adds nothing: one row per failed request.
    request_id      TEXT COLLATE "C" PRIMARY KEY,
    ts_ms           BIGINT NOT NULL,
    run_id          TEXT COLLATE "C" NOT NULL,
    node_id         TEXT COLLATE "C",
    iteration       BIGINT,
    attempt         BIGINT,
    worktree        TEXT COLLATE "C",
    source          TEXT COLLATE "C",
    tool_use_id     TEXT COLLATE "C",
    reason          TEXT COLLATE "C" NOT NULL,
    detail          TEXT COLLATE "C"
);
CREATE INDEX gaps_by_run ON gaps(run_id, ts_ms);
