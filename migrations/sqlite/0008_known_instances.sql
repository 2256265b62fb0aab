-- Consumers once held in the ledger as instances. Nova moves an instance's allocation to the
-- migration's uuid for a move and back when the move fails; in between the Placement sync
-- releases the instance's allocation, and the one it re-imports afterwards is an instance,
-- not a migration record. The trigger remembers every instance allocation that goes, so the
-- re-import counts it as one; instance.delete.end forgets it.
CREATE TABLE known_instances (
    instance_uuid TEXT PRIMARY KEY NOT NULL
);

CREATE TRIGGER allocations_remember_instances
AFTER DELETE ON allocations
FOR EACH ROW WHEN OLD.instance
BEGIN
    INSERT OR IGNORE INTO known_instances (instance_uuid) VALUES (OLD.instance_uuid);
END;
