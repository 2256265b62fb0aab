-- Whether an allocation's consumer is known to be an instance. A host's instance count (Nova's
-- num_instances) counts only those: a consumer imported from Placement may be a migration
-- record holding a move's source (Nova moves the source allocation to the migration's uuid),
-- and counts once an instance message names it (update_instance_info, sync_instance_info,
-- instance.*.end). Rows from before stay counted, as they were.
ALTER TABLE allocations ADD COLUMN instance BOOLEAN NOT NULL DEFAULT TRUE;
