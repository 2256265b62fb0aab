-- A compute node re-created under a new uuid (the service deleted and created again, the host
-- reinstalled) reports the same (host, node) as the node it replaces, which `UNIQUE (host,
-- node)` refused. The registration takes the old node's row over when it holds no allocation;
-- when it still holds some, the old node is retired beside the new one (`ledger/hosts.rs`,
-- `takeover`): unschedulable (down, disabled, forced down), its `node` renamed
-- "<node> (retired <uuid>)" to leave the pair to the new node, its allocations kept until they
-- are released or the Placement repair drops them. Then its row goes (the trigger below).
ALTER TABLE hosts ADD COLUMN retired BOOLEAN NOT NULL DEFAULT 0;

CREATE TRIGGER hosts_drop_emptied_retired
AFTER DELETE ON allocations
FOR EACH ROW WHEN (SELECT retired FROM hosts WHERE id = OLD.host_id)
BEGIN
    DELETE FROM hosts WHERE id = OLD.host_id
        AND NOT EXISTS (SELECT 1 FROM allocations WHERE host_id = OLD.host_id);
END;
