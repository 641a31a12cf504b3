"""Retention: which checkpoints may go (``policy``), ``durability gc`` (``gc``) and
``durability forget`` (``forget``: paths out of every checkpoint, docs/how-to/forget.md).

docs/how-to/retention.md documents the policy, its defaults and the config file.
"""
