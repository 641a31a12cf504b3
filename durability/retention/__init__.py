"""Retention: which checkpoints may go (``policy``) and ``durability gc`` (``gc``).

docs/RETENTION.md documents the policy, its defaults and the config file.
"""
