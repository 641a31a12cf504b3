-- A watch started with --poll (a filesystem inotify cannot see, such as a
-- network mount) must poll again when a restarted service takes it up.
ALTER TABLE watches ADD COLUMN poll INTEGER NOT NULL DEFAULT 0;
