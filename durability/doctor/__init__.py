"""`durability doctor`: proves the path from a tool call to a checkpoint
(checks.py: backend, state, spool, service; hooks.py: every installed hook,
run as its harness runs it)."""
