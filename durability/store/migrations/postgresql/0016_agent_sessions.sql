-- Durable agent runs (docs/how-to/agents.md): the agent session a
-- checkpoint's tool call belongs to; the harness and session an agent
-- attempt ran (recorded the moment the stream names it, so a resume can
-- continue that session); and the harnesses a run found blocked by a
-- quota, with the reset time when known, remembered across resumes.
ALTER TABLE workspace_checkpoints ADD COLUMN session_id TEXT COLLATE "C";
ALTER TABLE attempts ADD COLUMN harness TEXT COLLATE "C";
ALTER TABLE attempts ADD COLUMN session_id TEXT COLLATE "C";
CREATE TABLE agent_blocks (
    run_id          TEXT COLLATE "C" NOT NULL,
    harness         TEXT COLLATE "C" NOT NULL,
    -- ms since the epoch; NULL: no known reset (a person resumes)
    reset_at_ms     BIGINT,
    message         TEXT COLLATE "C",
    -- the claim epoch that saw it: a later claim retries an unknown reset
    claim_epoch     BIGINT NOT NULL,
    blocked_at_ms   BIGINT NOT NULL,
    PRIMARY KEY (run_id, harness)
);
-- The tool calls an agent session completed, as its stream reported them
-- (the call's result seen): a resume restores the worktree to the newest
-- checkpoint of one of these, so tree and conversation agree.
CREATE TABLE agent_calls (
    run_id          TEXT COLLATE "C" NOT NULL,
    session_id      TEXT COLLATE "C" NOT NULL,
    tool_use_id     TEXT COLLATE "C" NOT NULL,
    node_id         TEXT COLLATE "C" NOT NULL,
    iteration       BIGINT NOT NULL,
    attempt         BIGINT NOT NULL,
    name            TEXT COLLATE "C",
    completed_at_ms BIGINT NOT NULL,
    PRIMARY KEY (run_id, session_id, tool_use_id)
);
