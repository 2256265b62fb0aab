-- The ids of applied messages are kept for `[ledger] message_retention_s` (a redelivered
-- duplicate comes within seconds or minutes of the first delivery), then forgotten oldest
-- first: without this the table grew by one row per notification forever. The ids are
-- recorded in time order, so this index only ever appends at its right edge.
CREATE INDEX processed_messages_age ON processed_messages (processed_ms);
