-- A compute node re-created under a new uuid (the service deleted and created again, the host
-- reinstalled) reports the same (host, node) as the node it replaces, which `UNIQUE (host,
-- node)` refused. The registration takes the old node's row over when it holds no allocation;
-- when it still holds some, the old node is retired beside the new one (`ledger/hosts.rs`,
-- `takeover`): unschedulable (down, disabled, forced down), its `node` renamed
-- "<node> (retired <uuid>)" to leave the pair to the new node, its allocations kept until they
-- are released or the Placement repair drops them. Then its row goes (the trigger below).
-- (Migration 0013 was SQLite's alone.)
ALTER TABLE hosts ADD COLUMN retired BOOLEAN NOT NULL DEFAULT FALSE;

CREATE FUNCTION parasol_drop_emptied_retired() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM hosts h WHERE h.id = OLD.host_id AND h.retired
        AND NOT EXISTS (SELECT 1 FROM allocations a WHERE a.host_id = OLD.host_id);
    RETURN NULL;
END $$;

CREATE TRIGGER hosts_drop_emptied_retired AFTER DELETE ON allocations
    FOR EACH ROW EXECUTE FUNCTION parasol_drop_emptied_retired();
