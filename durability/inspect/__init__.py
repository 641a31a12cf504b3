"""Reading checkpoints: what one changed, how two differ, a worktree's timeline.

Nothing here writes: no checkpoint is recorded, no ref moved, and the user's
index and HEAD are never touched.  Both backends are read through pygit2 (jj
checkpoints are git commits in the git store behind jj), so ``show``,
``diff`` and ``log`` work the same for a jj working copy and a plain git
working tree.

- ``repository.py``: the git repository that holds a worktree's checkpoints.
- ``diff.py``: the changes between two trees, or a tree and the worktree.
- ``timeline.py``: a worktree's checkpoints and gaps across sessions, each
  checkpoint against its base (``base_of``).
"""
