-- Allocations recorded from Placement (instances Parasol did not place): a Placement sync
-- releases them again when Placement no longer has them on that host.
ALTER TABLE allocations ADD COLUMN imported BOOLEAN NOT NULL DEFAULT 0;
