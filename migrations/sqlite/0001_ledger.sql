-- Parasol's ledger: hosts with their inventory per resource class, allocations per instance,
-- and the ids of messages already applied (exactly-once notifications).
-- Inventory lives in the host row, one column group per class (total, reserved,
-- allocation_ratio, usable, used), so that a claim is a single-row conditional UPDATE.
CREATE TABLE hosts (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    host TEXT NOT NULL,
    node TEXT NOT NULL,
    uuid TEXT NOT NULL UNIQUE,
    availability_zone TEXT NOT NULL DEFAULT 'nova',
    up BOOLEAN NOT NULL DEFAULT 1,
    disabled BOOLEAN NOT NULL DEFAULT 0,
    forced_down BOOLEAN NOT NULL DEFAULT 0,
    last_seen_ms BIGINT NOT NULL DEFAULT 0,
    vcpu_total BIGINT NOT NULL DEFAULT 0,
    vcpu_reserved BIGINT NOT NULL DEFAULT 0,
    vcpu_ratio DOUBLE PRECISION NOT NULL DEFAULT 1.0,
    vcpu_usable BIGINT NOT NULL DEFAULT 0,
    vcpu_used BIGINT NOT NULL DEFAULT 0,
    memory_mb_total BIGINT NOT NULL DEFAULT 0,
    memory_mb_reserved BIGINT NOT NULL DEFAULT 0,
    memory_mb_ratio DOUBLE PRECISION NOT NULL DEFAULT 1.0,
    memory_mb_usable BIGINT NOT NULL DEFAULT 0,
    memory_mb_used BIGINT NOT NULL DEFAULT 0,
    disk_gb_total BIGINT NOT NULL DEFAULT 0,
    disk_gb_reserved BIGINT NOT NULL DEFAULT 0,
    disk_gb_ratio DOUBLE PRECISION NOT NULL DEFAULT 1.0,
    disk_gb_usable BIGINT NOT NULL DEFAULT 0,
    disk_gb_used BIGINT NOT NULL DEFAULT 0,
    num_instances BIGINT NOT NULL DEFAULT 0,
    num_io_ops BIGINT NOT NULL DEFAULT 0,
    UNIQUE (host, node)
);

CREATE TABLE allocations (
    instance_uuid TEXT PRIMARY KEY,
    host_id BIGINT NOT NULL REFERENCES hosts (id),
    vcpu BIGINT NOT NULL,
    memory_mb BIGINT NOT NULL,
    disk_gb BIGINT NOT NULL,
    confirmed BOOLEAN NOT NULL DEFAULT 0,
    created_ms BIGINT NOT NULL
);
CREATE INDEX allocations_host ON allocations (host_id);

CREATE TABLE processed_messages (
    message_id TEXT PRIMARY KEY,
    processed_ms BIGINT NOT NULL
);

CREATE TABLE dead_letters (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    source TEXT NOT NULL,
    reason TEXT NOT NULL,
    body TEXT NOT NULL,
    received_ms BIGINT NOT NULL
);
