-- Event ids from a sequence (docs/decisions/0059-narrow-writers-lock-on-postgresql.md):
-- a checkpoint's write no longer holds the whole schema's lock, so two runs'
-- events may be appended at once, and "the largest id plus one" could be
-- taken twice.  The sequence starts after the largest id on record.  Each
-- statement may run again (a test's store rewound to an older version).
CREATE SEQUENCE IF NOT EXISTS events_id_seq AS BIGINT OWNED BY events.id;
SELECT setval('events_id_seq', COALESCE((SELECT MAX(id) FROM events), 0) + 1, false);
ALTER TABLE events ALTER COLUMN id SET DEFAULT nextval('events_id_seq');
-- A row written with its own id (a toolkit older than this migration, which
-- still writes the largest id plus one under the whole schema's lock, or
-- `durability migrate --to`, which copies ids) moves the sequence past it,
-- so the next id taken from it is free.  Race-free: such a write holds the
-- whole schema's lock, so no write takes an id from the sequence meanwhile;
-- an id taken from the sequence is never past it, and changes nothing.
CREATE OR REPLACE FUNCTION events_id_follows() RETURNS trigger LANGUAGE plpgsql AS '
DECLARE
    last BIGINT;
    called BOOLEAN;
BEGIN
    SELECT last_value, is_called INTO last, called FROM events_id_seq;
    IF NEW.id > last OR (NEW.id = last AND NOT called) THEN
        PERFORM setval(''events_id_seq'', NEW.id);
    END IF;
    RETURN NULL;
END;
';
-- In a DO block: the migrations are split into statements by SQLite's
-- reading of them (`db.statements`), which takes a CREATE TRIGGER to end at
-- an END.
DO '
BEGIN
    DROP TRIGGER IF EXISTS events_id_follows ON events;
    CREATE TRIGGER events_id_follows AFTER INSERT ON events
        FOR EACH ROW EXECUTE FUNCTION events_id_follows();
END;
';
