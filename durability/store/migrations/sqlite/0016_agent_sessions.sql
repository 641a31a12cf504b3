-- Durable agent runs (docs/how-to/agents.md): the agent session a
-- checkpoint's tool call belongs to; the harness and session an agent
-- attempt ran (recorded the moment the stream names it, so a resume can
-- continue that session); and the harnesses a run found blocked by a
-- quota, with the reset time when known, remembered across resumes.
ALTER TABLE workspace_checkpoints ADD COLUMN session_id TEXT;
ALTER TABLE attempts ADD COLUMN harness TEXT;
ALTER TABLE attempts ADD COLUMN session_id TEXT;
CREATE TABLE agent_blocks (
    run_id          TEXT NOT NULL,
    harness         TEXT NOT NULL,
    -- ms since the epoch; NULL: no known reset (a person resumes)
    reset_at_ms     INTEGER,
    message         TEXT,
    -- the claim epoch that saw it: a later claim retries an unknown reset
    claim_epoch     INTEGER NOT NULL,
    blocked_at_ms   INTEGER NOT NULL,
    PRIMARY KEY (run_id, harness)
);
-- The tool calls an agent session completed, as its stream reported them
-- (the call's result seen): a resume restores the worktree to the newest
-- checkpoint of one of these, so tree and conversation agree.
CREATE TABLE agent_calls (
    run_id          TEXT NOT NULL,
    session_id      TEXT NOT NULL,
    tool_use_id     TEXT NOT NULL,
    node_id         TEXT NOT NULL,
    iteration       INTEGER NOT NULL,
    attempt         INTEGER NOT NULL,
    name            TEXT,
    completed_at_ms INTEGER NOT NULL,
    PRIMARY KEY (run_id, session_id, tool_use_id)
);
