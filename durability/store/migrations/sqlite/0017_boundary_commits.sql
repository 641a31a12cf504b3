-- A boundary names its checkpoint's commit, or none (decision 0057).  Until
-- now a boundary kept the commit it was recorded with: gc rewriting a git
-- attempt's chain renamed the checkpoint rows and not their boundaries, so
-- they named commits gc had freed; forget renamed the rows of a checkpoint
-- that held a secret and left its boundaries naming the commit that held it;
-- and a boundary whose checkpoint gc dropped still named the dropped commit.
-- From here on the rows that rename or drop a checkpoint change its
-- boundaries in the same transaction; this brings the boundaries recorded
-- before in line: each names its checkpoint row's commit now, or '' (the
-- boundary is collected: its call keeps its seq, its files are gone).
UPDATE boundaries SET commit_id = COALESCE((
    SELECT c.commit_id FROM workspace_checkpoints c
     WHERE c.run_id = boundaries.run_id AND c.node_id = boundaries.node_id
       AND c.iteration = boundaries.iteration AND c.attempt = boundaries.attempt
       AND c.host = boundaries.host AND c.seq = boundaries.checkpoint_seq), '');
-- A rename (gc writing a git chain again, forget) finds a commit's
-- boundaries by this index, not by a scan of the table per commit.
CREATE INDEX IF NOT EXISTS boundaries_commit ON boundaries (commit_id);
