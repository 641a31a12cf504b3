"""``durability rewind``: back to the moment after one tool call, the code
and the conversation together (issue 24, docs/how-to/rewind.md).  The code
half is a restore (``durability.restore``); the conversation half writes a
new session of the same harness from the original's transcript
(``durability.agents.transcripts``), never changing the original."""
