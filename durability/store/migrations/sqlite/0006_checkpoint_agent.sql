-- Who asked for a checkpoint, where the harness says: the harness (claude,
-- codex, gemini) and, for a Claude Code sub-agent, its agent_id and
-- agent_type, so a session's rows tell the main agent's calls from its
-- sub-agents' (which run in the background, interleaved).
ALTER TABLE workspace_checkpoints ADD COLUMN harness TEXT;
ALTER TABLE workspace_checkpoints ADD COLUMN agent_id TEXT;
ALTER TABLE workspace_checkpoints ADD COLUMN agent_type TEXT;
