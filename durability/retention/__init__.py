"""Retention: which checkpoints may go (``policy``), ``durability gc`` (``gc``) and
``durability forget`` (``forget``: paths out of every checkpoint, docs/FORGET.md).

docs/RETENTION.md documents the policy, its defaults and the config file.
"""
