"""Tier 0: the gap spool (NDJSON) and its ingest into the store.
"""
