-- A move's source held until the move ends (issue 40, item 2). While an instance moves it
-- holds two allocations, as in Placement: its own row (the destination's claim, keyed by the
-- instance) and the source's amounts, kept on the source host under the key
-- `<instance>#source` (or the migration's consumer once Placement's sync imports it), with
-- `move_of` naming the instance. `move_started` is set once the destination took the instance
-- (`instance.resize_finish.end`, `instance.live_migration_pre.end`): from then on no TTL
-- frees the source, which only the move's end (confirm, post) or its undoing (revert,
-- rollback) releases.
ALTER TABLE allocations ADD COLUMN move_of TEXT;
ALTER TABLE allocations ADD COLUMN move_started BOOLEAN NOT NULL DEFAULT FALSE;
CREATE INDEX allocations_move_of ON allocations (move_of) WHERE move_of IS NOT NULL;

-- A held source is not the instance's own row: its deletion does not make its key a known
-- instance (migration 0008).
DROP TRIGGER allocations_remember_instances ON allocations;
CREATE TRIGGER allocations_remember_instances
AFTER DELETE ON allocations
FOR EACH ROW WHEN (OLD.instance AND OLD.move_of IS NULL)
EXECUTE FUNCTION allocations_remember_instance();
