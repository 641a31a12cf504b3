"""Tier 1: the agent-harness hook (fast path, payload parsing, the gap guard).
"""
