"""Agent harnesses driven headless: one adapter per CLI (Claude Code, Codex,
Gemini) behind the small protocol in ``protocol``.  Pure knowledge of each
CLI (its argv, its private hook settings, its stream's events, its quota
messages): this room starts no process and touches no store; the runner
(``durability.runs``) does both."""
