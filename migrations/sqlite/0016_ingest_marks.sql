-- How far each process sharing this ledger has applied the notification queue, for the claim
-- sweep (on SQLite one process holds the file: the table has its one row; the code is one for
-- both engines), `ledger/expiry.rs`, `IngestMark`. With several processes consuming one queue, a
-- claim's confirmation may be in another process's hands or behind its backlog, so a claim
-- expires only once every process's mark has passed its deadline (issue 40: in a soak of two
-- overloaded processes, 23 boots found their host given away before their confirmation was
-- applied). A process's word holds until `holds_until_ms` (its own clock): one killed stops
-- holding the others back then; one stopped cleanly withdraws its row.
CREATE TABLE ingest_marks (
    process        TEXT PRIMARY KEY,
    caught_up_ms   BIGINT NOT NULL,
    holds_until_ms BIGINT NOT NULL
);
