-- Bumped whenever a host re-registers under another name, node or availability zone or with
-- another usable capacity, so that readers may keep those between reads and fetch only the
-- integers that change with every claim and heartbeat.
ALTER TABLE hosts ADD COLUMN profile_rev BIGINT NOT NULL DEFAULT 0;
