-- Every tool call a hook reported is a boundary (issue 24, decision 0042):
-- the point a rewind goes back to.  A checkpoint row is one per tree
-- (contract 3 dedups an unchanged tree onto the attempt's latest row), so
-- a call that changed nothing, or whose tree a watch captured first, has
-- no row of its own; its boundary row names the checkpoint in effect after
-- it.  seq is numbered per session (run id) and machine, in call order;
-- a request recorded twice (a hook installed twice, a late service answer
-- and the hook's own capture) is one boundary (request_id is unique).
-- transcript_path and transcript_bytes: where the harness's transcript was
-- and how long it was when the hook ran (the tool call's own result line may
-- follow it: a rewind finds the call by its id).
CREATE TABLE IF NOT EXISTS boundaries (
    run_id           TEXT COLLATE "C" NOT NULL,
    host             TEXT COLLATE "C" NOT NULL,
    seq              BIGINT NOT NULL,
    node_id          TEXT COLLATE "C" NOT NULL,
    iteration        BIGINT NOT NULL,
    attempt          BIGINT NOT NULL,
    request_id       TEXT COLLATE "C" NOT NULL UNIQUE,
    harness          TEXT COLLATE "C",
    tool_use_id      TEXT COLLATE "C",
    tool_name        TEXT COLLATE "C",
    event            TEXT COLLATE "C",
    transcript_path  TEXT COLLATE "C",
    transcript_bytes BIGINT,
    checkpoint_seq   BIGINT NOT NULL,
    commit_id        TEXT COLLATE "C" NOT NULL,
    worktree         TEXT COLLATE "C" NOT NULL,
    created_at_ms    BIGINT NOT NULL,
    PRIMARY KEY (run_id, host, seq)
);
CREATE INDEX IF NOT EXISTS boundaries_call ON boundaries (run_id, tool_use_id);
