"""Checkpoints that survive the machine (docs/how-to/remote.md): the git remotes a
worktree's checkpoints are pushed to (``transport``), the manifest that lists
them on the remote (``manifest``), the service's background replicator
(``replicator``) and the fetch behind ``restore --from-remote`` (``fetch``)."""
