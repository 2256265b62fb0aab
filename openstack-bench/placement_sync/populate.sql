-- Fills an empty Placement database (its schema made by `placement-manage db sync`) with
-- :providers root compute-node providers of 64 VCPU (ratio 4), 256 GiB and 2,000 GB, each with
-- :consumers instances of 2 VCPU / 4 GiB / 20 GB, written straight into Placement's tables
-- (registering 100,000 providers through its API takes hours). Generations are 1 (a provider
-- created, then its inventory set). The instance uuids are derived from the provider's id and
-- a counter, so a run is repeatable.
--
-- psql -h 127.0.0.1 -U postgres -d placement_bench -v providers=100000 -v consumers=3 -f populate.sql
\set ON_ERROR_STOP on
BEGIN;
INSERT INTO resource_providers (uuid, name, generation, created_at)
    SELECT md5('rp' || g)::uuid::text, 'bench-' || g, 1, now()
    FROM generate_series(1, :providers) g;
UPDATE resource_providers SET root_provider_id = id;
INSERT INTO inventories (resource_provider_id, resource_class_id, total, reserved, min_unit,
                         max_unit, step_size, allocation_ratio, created_at)
    SELECT rp.id, c.cls, c.total, 0, 1, c.total, 1, c.ratio, now()
    FROM resource_providers rp,
         (VALUES (0, 64, 4.0), (1, 262144, 1.0), (2, 2000, 1.0)) AS c(cls, total, ratio);
INSERT INTO projects (external_id, created_at) VALUES ('bench-project', now());
INSERT INTO users (external_id, created_at) VALUES ('bench-user', now());
INSERT INTO consumers (uuid, project_id, user_id, generation, created_at)
    SELECT md5('c' || rp.id || '-' || k)::uuid::text,
           (SELECT id FROM projects WHERE external_id = 'bench-project'),
           (SELECT id FROM users WHERE external_id = 'bench-user'), 1, now()
    FROM resource_providers rp, generate_series(1, :consumers) k;
INSERT INTO allocations (resource_provider_id, consumer_id, resource_class_id, used, created_at)
    SELECT rp.id, md5('c' || rp.id || '-' || k)::uuid::text, c.cls, c.used, now()
    FROM resource_providers rp, generate_series(1, :consumers) k,
         (VALUES (0, 2), (1, 4096), (2, 20)) AS c(cls, used);
COMMIT;
ANALYZE;
