-- Each host's number of instances (allocations whose consumer is known to be an instance, see
-- 0007) is kept in its row instead of counted from its allocations by every load of the host
-- (as PostgreSQL's, whose processes reload every host another process claimed on). Triggers
-- on allocations keep it, whichever statement inserts, deletes or flags an allocation.
ALTER TABLE hosts ADD COLUMN instances INTEGER NOT NULL DEFAULT 0;

UPDATE hosts SET instances = (SELECT COUNT(*) FROM allocations a
    WHERE a.host_id = hosts.id AND a.instance);

CREATE TRIGGER allocations_counted_in
AFTER INSERT ON allocations
FOR EACH ROW WHEN NEW.instance
BEGIN
    UPDATE hosts SET instances = instances + 1 WHERE id = NEW.host_id;
END;

CREATE TRIGGER allocations_counted_out
AFTER DELETE ON allocations
FOR EACH ROW WHEN OLD.instance
BEGIN
    UPDATE hosts SET instances = instances - 1 WHERE id = OLD.host_id;
END;

-- Flagged as an instance, or no longer one, or moved: only when one of those columns is set
-- (confirming a claim sets neither).
CREATE TRIGGER allocations_recounted
AFTER UPDATE OF instance, host_id ON allocations
FOR EACH ROW WHEN OLD.instance IS NOT NEW.instance OR OLD.host_id IS NOT NEW.host_id
BEGIN
    UPDATE hosts SET instances = instances - 1 WHERE id = OLD.host_id AND OLD.instance;
    UPDATE hosts SET instances = instances + 1 WHERE id = NEW.host_id AND NEW.instance;
END;
