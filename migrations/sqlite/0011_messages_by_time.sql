-- The ids of applied messages, clustered by the time they were sent: keyed by the oslo
-- envelope's `timestamp` then the message id, in a WITHOUT ROWID table, so that recording an
-- id appends at the right edge of one b-tree (keyed by the random uuid alone, each insert
-- dirtied three pages: the rowid table, the key index at a random place, and the age index of
-- 0009; and split pages in the middle of the key index).
--
-- `sent_at` is the envelope's timestamp as sent ("2026-11-27 18:00:00.123456", oslo's
-- `str(utcnow())`), not parsed into milliseconds: a redelivery repeats the envelope exactly,
-- the string sorts as the time it writes, and nothing has to be parsed (or refused) on the
-- way in. It is "" for a message without one (a fanout cast) or with one not of that shape
-- (`Notification::sent_at`), and for the ids recorded before this migration: "" sorts before
-- every time. Duplicates are the pair (sent_at, message_id), or ("", message_id): an id
-- recorded before this migration still stops its redelivery, which carries its timestamp
-- (`ledger/messages.rs`).
--
-- Retention (`[ledger] message_retention_s`): a timestamped id is forgotten once it was both
-- sent and applied longer ago than that, walking the key from its left edge; the ""-keyed
-- ones (in uuid order) by the time they were applied, through the partial index below, as
-- before. `processed_ms` is kept for both.
CREATE TABLE processed_messages_by_time (
    sent_at TEXT NOT NULL,
    message_id TEXT NOT NULL,
    processed_ms BIGINT NOT NULL,
    PRIMARY KEY (sent_at, message_id)
) WITHOUT ROWID;

INSERT INTO processed_messages_by_time (sent_at, message_id, processed_ms)
SELECT '', message_id, processed_ms FROM processed_messages;

DROP INDEX processed_messages_age;
DROP TABLE processed_messages;
ALTER TABLE processed_messages_by_time RENAME TO processed_messages;

CREATE INDEX processed_messages_untimed_age ON processed_messages (processed_ms)
    WHERE sent_at = '';
