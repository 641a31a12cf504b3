-- The replication outbox as a table (docs/REMOTE.md, "The outbox"): one row
-- per checkpoint and remote of its worktree that the remote does not hold
-- yet.  A checkpoint recorded in a worktree with remotes writes its rows in
-- the same transaction; naming a remote writes the rows of the earlier
-- checkpoints of the worktree; a push deletes the rows it carried.  The replicator
-- reads only this table, so its idle look costs the same at 100 checkpoints
-- as at 100,000 (0010 derived the outbox by joining every checkpoint of
-- every worktree with a remote against `replication`, every 2 s).
CREATE TABLE replication_outbox (
    request_id      TEXT COLLATE "C" NOT NULL,
    worktree        TEXT COLLATE "C" NOT NULL,
    remote          TEXT COLLATE "C" NOT NULL,
    PRIMARY KEY (request_id, remote)
);
-- Removing a remote drops its rows.
CREATE INDEX replication_outbox_by_remote ON replication_outbox(worktree, remote);

-- What the derived outbox of 0010 held: every checkpoint of a worktree
-- with a remote and no pushed row for it.
INSERT INTO replication_outbox (request_id, worktree, remote)
SELECT c.request_id, c.worktree, r.name
  FROM remotes r JOIN workspace_checkpoints c ON c.worktree = r.worktree
 WHERE NOT EXISTS (SELECT 1 FROM replication p WHERE p.request_id = c.request_id
                      AND p.remote = r.name AND p.state = 'pushed');
