-- The event log: what happened to a run, in order, for people and tools
-- (`durability logs`).  Append-only; the engine never reads it to decide
-- anything (state stays in the other tables).  The id is assigned by the
-- writing transaction (the largest id plus one, under the write lock), so it
-- is the order the events were recorded in, on SQLite and PostgreSQL alike.
CREATE TABLE events (
    id              BIGINT PRIMARY KEY,
    ts_ms           BIGINT NOT NULL,
    run_id          TEXT COLLATE "C" NOT NULL,
    kind            TEXT COLLATE "C" NOT NULL,
    node_id         TEXT COLLATE "C",
    iteration       BIGINT,
    attempt         BIGINT,
    seq             BIGINT,
    detail_json     TEXT COLLATE "C"
);
CREATE INDEX events_by_run ON events(run_id, id);
