-- A worktree is its machine and its path: two machines sharing one store
-- whose repositories sit at one path (containers at /workspace) are two
-- worktrees.  Every table keyed by a worktree's path gets the machine's
-- id (engine.host.host_id: DURABILITY_HOST_ID, else the one kept in the
-- state folder, never the live host name), and the rows already there are
-- the migrating machine's (:this_host, bound by the migration runner).  Seqs are
-- numbered per attempt and machine, so the checkpoints' key takes it too.
CREATE TABLE workspace_checkpoints_new (
    run_id          TEXT NOT NULL,
    node_id         TEXT NOT NULL,
    iteration       INTEGER NOT NULL,
    attempt         INTEGER NOT NULL,
    host            TEXT NOT NULL,
    seq             INTEGER NOT NULL,
    commit_id       TEXT NOT NULL,
    change_id       TEXT,
    operation_id    TEXT,
    worktree        TEXT NOT NULL,
    source          TEXT NOT NULL,
    tool_use_id     TEXT,
    label           TEXT,
    request_id      TEXT NOT NULL UNIQUE,
    created_at_ms   INTEGER NOT NULL,
    harness         TEXT,
    agent_id        TEXT,
    agent_type      TEXT,
    PRIMARY KEY (run_id, node_id, iteration, attempt, host, seq),
    FOREIGN KEY (run_id, node_id, iteration, attempt)
        REFERENCES attempts(run_id, node_id, iteration, attempt)
);
INSERT INTO workspace_checkpoints_new (run_id, node_id, iteration, attempt, host, seq,
    commit_id, change_id, operation_id, worktree, source, tool_use_id, label, request_id,
    created_at_ms, harness, agent_id, agent_type)
SELECT run_id, node_id, iteration, attempt, :this_host, seq, commit_id, change_id,
       operation_id, worktree, source, tool_use_id, label, request_id, created_at_ms,
       harness, agent_id, agent_type
  FROM workspace_checkpoints;
DROP TABLE workspace_checkpoints;
ALTER TABLE workspace_checkpoints_new RENAME TO workspace_checkpoints;
CREATE INDEX checkpoints_by_worktree ON workspace_checkpoints(host, worktree, created_at_ms);

ALTER TABLE gaps ADD COLUMN host TEXT NOT NULL DEFAULT '';
UPDATE gaps SET host = :this_host;
CREATE INDEX gaps_by_worktree ON gaps(host, worktree, ts_ms);

CREATE TABLE watches_new (
    host            TEXT NOT NULL,
    worktree        TEXT NOT NULL,
    run_id          TEXT NOT NULL,
    node_id         TEXT NOT NULL,
    iteration       INTEGER NOT NULL,
    attempt         INTEGER NOT NULL,
    settle_ms       INTEGER NOT NULL,
    max_delay_ms    INTEGER NOT NULL,
    created_at_ms   INTEGER NOT NULL,
    poll            INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (host, worktree)
);
INSERT INTO watches_new (host, worktree, run_id, node_id, iteration, attempt, settle_ms,
    max_delay_ms, created_at_ms, poll)
SELECT :this_host, worktree, run_id, node_id, iteration, attempt, settle_ms, max_delay_ms,
       created_at_ms, poll
  FROM watches;
DROP TABLE watches;
ALTER TABLE watches_new RENAME TO watches;

CREATE TABLE remotes_new (
    host            TEXT NOT NULL,
    worktree        TEXT NOT NULL,
    name            TEXT NOT NULL,
    url             TEXT NOT NULL,
    created_at_ms   INTEGER NOT NULL,
    PRIMARY KEY (host, worktree, name)
);
INSERT INTO remotes_new (host, worktree, name, url, created_at_ms)
SELECT :this_host, worktree, name, url, created_at_ms FROM remotes;
DROP TABLE remotes;
ALTER TABLE remotes_new RENAME TO remotes;

ALTER TABLE replication ADD COLUMN host TEXT NOT NULL DEFAULT '';
UPDATE replication SET host = :this_host;
DROP INDEX replication_by_worktree;
CREATE INDEX replication_by_worktree ON replication(host, worktree, remote);

ALTER TABLE replication_outbox ADD COLUMN host TEXT NOT NULL DEFAULT '';
UPDATE replication_outbox SET host = :this_host;
DROP INDEX replication_outbox_by_remote;
CREATE INDEX replication_outbox_by_remote ON replication_outbox(host, worktree, remote);
