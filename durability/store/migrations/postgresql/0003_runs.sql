-- Layer 1 runs: lifecycle, ownership, workflow metadata, task outputs,
-- approvals and budget usage.  A run created by a hook (a Claude Code
-- session) keeps state NULL: only the engine's runs have a workflow.
ALTER TABLE runs ADD COLUMN state TEXT COLLATE "C";
ALTER TABLE runs ADD COLUMN workflow_path TEXT COLLATE "C";
ALTER TABLE runs ADD COLUMN repo_root TEXT COLLATE "C";
ALTER TABLE runs ADD COLUMN worktree TEXT COLLATE "C";
-- {"files": {relative path: sha256}} of the workflow file and the project
-- modules it imports; a resume recomputes and compares it.
ALTER TABLE runs ADD COLUMN metadata_json TEXT COLLATE "C";
-- [{"id", "deps", "loop"}]: the tasks, so run-status needs no import.
ALTER TABLE runs ADD COLUMN plan_json TEXT COLLATE "C";
ALTER TABLE runs ADD COLUMN limits_json TEXT COLLATE "C";
-- Ownership: every claim bumps claim_epoch (the compare-and-swap token) and
-- every write of the owner is fenced on it, so a displaced owner can never
-- record anything after losing its claim.
ALTER TABLE runs ADD COLUMN owner TEXT COLLATE "C";
ALTER TABLE runs ADD COLUMN owner_pid BIGINT;
ALTER TABLE runs ADD COLUMN owner_host TEXT COLLATE "C";
ALTER TABLE runs ADD COLUMN claim_epoch BIGINT NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN claimed_at_ms BIGINT;
ALTER TABLE runs ADD COLUMN heartbeat_at_ms BIGINT;
-- 'pause' or 'cancel' asked of a live owner, which acts on it and clears it.
ALTER TABLE runs ADD COLUMN requested TEXT COLLATE "C";
-- waiting-quota: when the provider's quota resets (NULL: wait for a person).
ALTER TABLE runs ADD COLUMN wake_at_ms BIGINT;
-- waiting-approval: the node waited on; failed: {"code", "message", "node_id"}.
ALTER TABLE runs ADD COLUMN waiting_on TEXT COLLATE "C";
ALTER TABLE runs ADD COLUMN error_json TEXT COLLATE "C";
ALTER TABLE runs ADD COLUMN updated_at_ms BIGINT;
CREATE INDEX runs_by_state ON runs(state, heartbeat_at_ms);

-- A completed task: its validated output.  One row per (node, iteration),
-- so a retried write of the same completion adds nothing.
CREATE TABLE task_outputs (
    run_id          TEXT COLLATE "C" NOT NULL REFERENCES runs(run_id),
    node_id         TEXT COLLATE "C" NOT NULL,
    iteration       BIGINT NOT NULL,
    attempt         BIGINT NOT NULL,
    output_json     TEXT COLLATE "C" NOT NULL,
    created_at_ms   BIGINT NOT NULL,
    PRIMARY KEY (run_id, node_id, iteration)
);

-- A person's decision on a gated node; a later decision replaces it.
CREATE TABLE approvals (
    run_id          TEXT COLLATE "C" NOT NULL REFERENCES runs(run_id),
    node_id         TEXT COLLATE "C" NOT NULL,
    decision        TEXT COLLATE "C" NOT NULL CHECK (decision IN ('approved', 'denied')),
    reason          TEXT COLLATE "C",
    decided_at_ms   BIGINT NOT NULL,
    PRIMARY KEY (run_id, node_id)
);

-- What a run has spent so far, counted as progress events arrive.
CREATE TABLE run_usage (
    run_id          TEXT COLLATE "C" PRIMARY KEY REFERENCES runs(run_id),
    turns           BIGINT NOT NULL DEFAULT 0,
    tokens          BIGINT NOT NULL DEFAULT 0,
    cost            DOUBLE PRECISION NOT NULL DEFAULT 0
);
