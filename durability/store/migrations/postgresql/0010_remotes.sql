-- Checkpoints that survive the machine (docs/REMOTE.md): the git remotes a
-- worktree's checkpoints are replicated to, named by the user per worktree,
-- and what has been pushed.  The outbox is derived, not written by a capture:
-- a checkpoint of a worktree with a remote and no 'pushed' row here is
-- pending, so a capture costs nothing more and a restart loses nothing.
CREATE TABLE remotes (
    worktree        TEXT COLLATE "C" NOT NULL,
    name            TEXT COLLATE "C" NOT NULL,
    url             TEXT COLLATE "C" NOT NULL,
    created_at_ms   BIGINT NOT NULL,
    PRIMARY KEY (worktree, name)
);

-- One row per checkpoint (by its request id) and remote: 'pushed' once its
-- refs are on the remote; 'failed' once it stayed unpushed past the bound
-- (its replication-failed gap is filed then, once; a later push turns the
-- row to 'pushed').
CREATE TABLE replication (
    request_id      TEXT COLLATE "C" NOT NULL,
    worktree        TEXT COLLATE "C" NOT NULL,
    remote          TEXT COLLATE "C" NOT NULL,
    state           TEXT COLLATE "C" NOT NULL CHECK (state IN ('pushed', 'failed')),
    updated_at_ms   BIGINT NOT NULL,
    error           TEXT COLLATE "C",
    PRIMARY KEY (request_id, remote)
);
CREATE INDEX replication_by_worktree ON replication(worktree, remote);
-- The replicator looks up the checkpoints of the worktrees with a remote.
CREATE INDEX checkpoints_by_worktree ON workspace_checkpoints(worktree, created_at_ms);
