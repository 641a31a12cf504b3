"""Tier 2: the settle watcher (watchdog/inotify, polling fallback, debounce,
ignore rules, changed paths).
"""
