-- Every process keeps a live table of hosts in memory: after each statement that changes a
-- host, its inventories or its allocations, tell the other processes which hosts changed
-- (channel parasol_hosts, payload "<process>|<id>,<id>,…", or "<process>|*" when the list
-- would not fit a notification). <process> is the writer's `parasol.process` setting, so a
-- process can skip its own changes, which its table already holds.
CREATE FUNCTION parasol_notify_hosts() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    ids text;
BEGIN
    IF TG_OP = 'DELETE' THEN
        IF TG_TABLE_NAME = 'hosts' THEN
            SELECT string_agg(DISTINCT id::text, ',') INTO ids FROM changed_old;
        ELSE
            SELECT string_agg(DISTINCT host_id::text, ',') INTO ids FROM changed_old;
        END IF;
    ELSE
        IF TG_TABLE_NAME = 'hosts' THEN
            SELECT string_agg(DISTINCT id::text, ',') INTO ids FROM changed_new;
        ELSE
            SELECT string_agg(DISTINCT host_id::text, ',') INTO ids FROM changed_new;
        END IF;
    END IF;
    IF ids IS NULL THEN
        RETURN NULL;
    END IF;
    IF length(ids) > 7000 THEN
        ids := '*';
    END IF;
    PERFORM pg_notify('parasol_hosts',
        coalesce(current_setting('parasol.process', true), '') || '|' || ids);
    RETURN NULL;
END $$;

CREATE TRIGGER hosts_inserted AFTER INSERT ON hosts REFERENCING NEW TABLE AS changed_new
    FOR EACH STATEMENT EXECUTE FUNCTION parasol_notify_hosts();
CREATE TRIGGER hosts_updated AFTER UPDATE ON hosts REFERENCING NEW TABLE AS changed_new
    FOR EACH STATEMENT EXECUTE FUNCTION parasol_notify_hosts();
CREATE TRIGGER inventories_inserted AFTER INSERT ON inventories
    REFERENCING NEW TABLE AS changed_new
    FOR EACH STATEMENT EXECUTE FUNCTION parasol_notify_hosts();
CREATE TRIGGER inventories_updated AFTER UPDATE ON inventories
    REFERENCING NEW TABLE AS changed_new
    FOR EACH STATEMENT EXECUTE FUNCTION parasol_notify_hosts();
CREATE TRIGGER inventories_deleted AFTER DELETE ON inventories
    REFERENCING OLD TABLE AS changed_old
    FOR EACH STATEMENT EXECUTE FUNCTION parasol_notify_hosts();
CREATE TRIGGER allocations_inserted AFTER INSERT ON allocations
    REFERENCING NEW TABLE AS changed_new
    FOR EACH STATEMENT EXECUTE FUNCTION parasol_notify_hosts();
CREATE TRIGGER allocations_deleted AFTER DELETE ON allocations
    REFERENCING OLD TABLE AS changed_old
    FOR EACH STATEMENT EXECUTE FUNCTION parasol_notify_hosts();
