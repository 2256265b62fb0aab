-- Facts about the ledger itself: its id and the row that /readyz writes to prove the ledger
-- takes writes. (PostgreSQL processes share one ledger and one notification queue.)
CREATE TABLE ledger_meta (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
INSERT INTO ledger_meta (key, value) VALUES ('ledger_id', replace(gen_random_uuid()::text, '-', ''));
INSERT INTO ledger_meta (key, value) VALUES ('probe', '0');
