-- Resuming a failed run gives its unfinished tasks their whole retry budget
-- again: the failures that used it up are kept (run-status still shows
-- them, their checkpoints still join them) but marked forgiven, and only
-- unforgiven failures count against a task's retries.
ALTER TABLE attempts ADD COLUMN forgiven BIGINT NOT NULL DEFAULT 0;
