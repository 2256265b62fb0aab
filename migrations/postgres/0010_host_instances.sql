-- Each host's number of instances (allocations whose consumer is known to be an instance, see
-- 0007) is kept in its row instead of counted from its allocations by every load of the host:
-- each process reloads every host another process claimed on, and counting that host's
-- allocations was the largest part of the reload. Triggers on allocations keep it, whichever
-- statement inserts, deletes or flags an allocation.
--
-- A changed count is an update of the host row, so the hosts trigger announces it to the
-- other processes (0005): that covers an allocation that becomes an instance
-- (instance.create.end or sync_instance_info naming an imported consumer), which nothing
-- announced before. The allocations' own announcements go: what another process' table
-- holds of an allocation is its usage (announced by the inventories trigger) and this count.
--
-- Lock order: a count changes under the host row's lock, so every writer locks a host's row
-- before its inventory rows (a registration does; a claim round now does too).
ALTER TABLE hosts ADD COLUMN instances BIGINT NOT NULL DEFAULT 0;

UPDATE hosts h SET instances = c.n
FROM (SELECT host_id, COUNT(*) AS n FROM allocations WHERE instance GROUP BY host_id) c
WHERE h.id = c.host_id;

-- Inserted and deleted allocations, once per statement (a claim round inserts several). The
-- hosts are updated through their primary key: planned for a transition table of a few dozen
-- rows, the join hashed a sequential scan of every host instead (enable_seqscan, for this
-- function's statements only).
CREATE FUNCTION parasol_count_instances() RETURNS trigger LANGUAGE plpgsql
SET enable_seqscan = off AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        UPDATE hosts h SET instances = h.instances + c.n
        FROM (SELECT host_id, COUNT(*) AS n FROM changed_new WHERE instance GROUP BY host_id) c
        WHERE h.id = c.host_id;
    ELSE
        UPDATE hosts h SET instances = h.instances - c.n
        FROM (SELECT host_id, COUNT(*) AS n FROM changed_old WHERE instance GROUP BY host_id) c
        WHERE h.id = c.host_id;
    END IF;
    RETURN NULL;
END $$;

-- An allocation flagged as an instance, or no longer one, or moved to another host: row by
-- row, and only when one of those columns is set (confirming a claim sets neither).
CREATE FUNCTION parasol_recount_instance() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.instance THEN
        UPDATE hosts SET instances = instances - 1 WHERE id = OLD.host_id;
    END IF;
    IF NEW.instance THEN
        UPDATE hosts SET instances = instances + 1 WHERE id = NEW.host_id;
    END IF;
    RETURN NULL;
END $$;

DROP TRIGGER allocations_inserted ON allocations;
DROP TRIGGER allocations_deleted ON allocations;

CREATE TRIGGER allocations_counted_in AFTER INSERT ON allocations
    REFERENCING NEW TABLE AS changed_new
    FOR EACH STATEMENT EXECUTE FUNCTION parasol_count_instances();
CREATE TRIGGER allocations_counted_out AFTER DELETE ON allocations
    REFERENCING OLD TABLE AS changed_old
    FOR EACH STATEMENT EXECUTE FUNCTION parasol_count_instances();
CREATE TRIGGER allocations_recounted AFTER UPDATE OF instance, host_id ON allocations
    FOR EACH ROW WHEN (OLD.instance IS DISTINCT FROM NEW.instance
        OR OLD.host_id IS DISTINCT FROM NEW.host_id)
    EXECUTE FUNCTION parasol_recount_instance();
