-- Instances Nova deleted (`instance.delete.end`), each remembered for `[ledger]
-- message_retention_s`: a notification of the instance applied after its deletion must not
-- bring its allocation back. It happens when the deletion overtakes the instance's
-- `instance.create.end`: a quorum queue gives unacknowledged messages back out of order when a
-- consumer goes, and two processes sharing a queue apply its messages side by side.
CREATE TABLE gone_instances (
    instance_uuid TEXT PRIMARY KEY NOT NULL,
    gone_ms BIGINT NOT NULL
);

CREATE INDEX gone_instances_age ON gone_instances (gone_ms);
