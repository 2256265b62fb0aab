-- Any resource class (Placement's standard classes and CUSTOM_*), with Placement's unit rules,
-- and the traits and aggregates of each host. A host's inventory moves from its row's fixed
-- VCPU/MEMORY_MB/DISK_GB columns to one row per class; an allocation keeps its amounts as a
-- JSON object {"CLASS": amount}. Instance counts are counted from the allocations.
CREATE TABLE inventories (
    host_id BIGINT NOT NULL REFERENCES hosts (id) ON DELETE CASCADE,
    resource_class TEXT NOT NULL,
    total BIGINT NOT NULL,
    reserved BIGINT NOT NULL DEFAULT 0,
    min_unit BIGINT NOT NULL DEFAULT 1,
    max_unit BIGINT NOT NULL DEFAULT 9223372036854775807,
    step_size BIGINT NOT NULL DEFAULT 1,
    allocation_ratio DOUBLE PRECISION NOT NULL DEFAULT 1.0,
    -- (total - reserved) * allocation_ratio, what a claim may use up to.
    usable BIGINT NOT NULL,
    used BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (host_id, resource_class)
);

INSERT INTO inventories (host_id, resource_class, total, reserved, allocation_ratio, usable, used)
SELECT id, 'VCPU', vcpu_total, vcpu_reserved, vcpu_ratio, vcpu_usable, vcpu_used FROM hosts
WHERE vcpu_total <> 0 OR vcpu_used <> 0;
INSERT INTO inventories (host_id, resource_class, total, reserved, allocation_ratio, usable, used)
SELECT id, 'MEMORY_MB', memory_mb_total, memory_mb_reserved, memory_mb_ratio, memory_mb_usable,
    memory_mb_used FROM hosts
WHERE memory_mb_total <> 0 OR memory_mb_used <> 0;
INSERT INTO inventories (host_id, resource_class, total, reserved, allocation_ratio, usable, used)
SELECT id, 'DISK_GB', disk_gb_total, disk_gb_reserved, disk_gb_ratio, disk_gb_usable, disk_gb_used
FROM hosts
WHERE disk_gb_total <> 0 OR disk_gb_used <> 0;

-- JSON arrays of names.
ALTER TABLE hosts ADD COLUMN traits TEXT NOT NULL DEFAULT '[]';
ALTER TABLE hosts ADD COLUMN aggregates TEXT NOT NULL DEFAULT '[]';

ALTER TABLE allocations ADD COLUMN resources TEXT NOT NULL DEFAULT '{}';
UPDATE allocations SET resources = json_build_object('VCPU', vcpu, 'MEMORY_MB', memory_mb, 'DISK_GB', disk_gb)::text;
-- The consumer's project and user, as Placement records them.
ALTER TABLE allocations ADD COLUMN project_id TEXT;
ALTER TABLE allocations ADD COLUMN user_id TEXT;

ALTER TABLE allocations DROP COLUMN vcpu;
ALTER TABLE allocations DROP COLUMN memory_mb;
ALTER TABLE allocations DROP COLUMN disk_gb;
ALTER TABLE hosts DROP COLUMN vcpu_total;
ALTER TABLE hosts DROP COLUMN vcpu_reserved;
ALTER TABLE hosts DROP COLUMN vcpu_ratio;
ALTER TABLE hosts DROP COLUMN vcpu_usable;
ALTER TABLE hosts DROP COLUMN vcpu_used;
ALTER TABLE hosts DROP COLUMN memory_mb_total;
ALTER TABLE hosts DROP COLUMN memory_mb_reserved;
ALTER TABLE hosts DROP COLUMN memory_mb_ratio;
ALTER TABLE hosts DROP COLUMN memory_mb_usable;
ALTER TABLE hosts DROP COLUMN memory_mb_used;
ALTER TABLE hosts DROP COLUMN disk_gb_total;
ALTER TABLE hosts DROP COLUMN disk_gb_reserved;
ALTER TABLE hosts DROP COLUMN disk_gb_ratio;
ALTER TABLE hosts DROP COLUMN disk_gb_usable;
ALTER TABLE hosts DROP COLUMN disk_gb_used;
ALTER TABLE hosts DROP COLUMN num_instances;
ALTER TABLE hosts DROP COLUMN num_io_ops;
ALTER TABLE hosts DROP COLUMN profile_rev;
