"""Where the toolkit meets other code: the in-process wrapper, the Agent SDK,
install-hook, the engine bridge.
"""
