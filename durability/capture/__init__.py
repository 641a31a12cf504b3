"""Capturing a worktree and recording it: the Capturer, coalescing, in-process
capture, manual snapshots, restore.
"""
