-- The inventories stored in their key's order (WITHOUT ROWID): every read or write of a host's
-- class seeked the key index (host_id, resource_class) and then the rowid table. A claim
-- updates the rows of its host's classes and a re-registration reads and upserts them, so
-- each did twice the b-tree work it needs. Same columns, same key; PostgreSQL is unchanged.
CREATE TABLE inventories_by_key (
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
) WITHOUT ROWID;

INSERT INTO inventories_by_key (host_id, resource_class, total, reserved, min_unit, max_unit,
    step_size, allocation_ratio, usable, used)
SELECT host_id, resource_class, total, reserved, min_unit, max_unit, step_size,
    allocation_ratio, usable, used
FROM inventories;

DROP TABLE inventories;
ALTER TABLE inventories_by_key RENAME TO inventories;
