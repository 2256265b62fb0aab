-- Facts about the ledger itself: its id (names its own notification queue, so that two
-- Parasol processes on two SQLite ledgers never split one queue's events) and the row that
-- /readyz writes to prove the ledger takes writes.
CREATE TABLE ledger_meta (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
INSERT INTO ledger_meta (key, value) VALUES ('ledger_id', lower(hex(randomblob(16))));
INSERT INTO ledger_meta (key, value) VALUES ('probe', '0');
