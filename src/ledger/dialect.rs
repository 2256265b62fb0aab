//! The statements whose text differs between SQLite and PostgreSQL (JSON functions, list
//! parameters, `max`/`GREATEST`), named once per engine so that code written once for both
//! picks its engine's text with `<DB as Dialect>::NAME`.

/// SQL text per engine. JSON parameters are bound as text on both engines.
pub(crate) trait Dialect: sqlx::Database {
    /// Adds `$3` (±1) times the amounts of the JSON object `$2` (`{"CLASS": n}`) to host `$1`'s
    /// inventories, never below 0.
    const ADD_USAGE: &'static str;
    /// Hosts whose id is in the JSON array `$1`, with their instance counts (see [`HOST_SELECT`]).
    const HOSTS_BY_ID: &'static str;
    /// Inventories of the hosts whose id is in the JSON array `$1`.
    const INVENTORIES_BY_ID: &'static str;
    /// Inventory rows of host `$1` for classes not in the JSON array `$2`: set to no capacity
    /// (rows still in use stay until their allocations are gone).
    const ZERO_OTHER_CLASSES: &'static str;
    /// Updates liveness from a JSON array `$1` of `[id, up, disabled, last_seen_ms]`.
    const HEARTBEATS: &'static str;
}

/// The columns of a host row as [`super::hosts`] decodes them, with the number of
/// instances on it (allocations whose consumer is known to be an instance: not a migration
/// record imported from Placement); `{where}` is replaced by a filter or nothing.
pub(crate) const HOST_SELECT: &str = "SELECT h.id, h.host, h.node, h.uuid, h.availability_zone, \
    h.up, h.disabled, h.forced_down, h.last_seen_ms, h.traits, h.aggregates, \
    (SELECT COUNT(*) FROM allocations a WHERE a.host_id = h.id AND a.instance) FROM hosts h";

pub(crate) const INVENTORY_SELECT: &str = "SELECT host_id, resource_class, total, reserved, \
    min_unit, max_unit, step_size, allocation_ratio, used FROM inventories";

impl Dialect for sqlx::Sqlite {
    const ADD_USAGE: &'static str = "UPDATE inventories SET used = max(0, used + $3 * \
        (SELECT d.value FROM json_each($2) d WHERE d.key = inventories.resource_class)) \
        WHERE host_id = $1 AND resource_class IN (SELECT key FROM json_each($2))";
    const HOSTS_BY_ID: &'static str = "SELECT h.id, h.host, h.node, h.uuid, \
        h.availability_zone, h.up, h.disabled, h.forced_down, h.last_seen_ms, h.traits, \
        h.aggregates, (SELECT COUNT(*) FROM allocations a WHERE a.host_id = h.id AND a.instance) FROM hosts h \
        WHERE h.id IN (SELECT value FROM json_each($1))";
    const INVENTORIES_BY_ID: &'static str = "SELECT host_id, resource_class, total, reserved, \
        min_unit, max_unit, step_size, allocation_ratio, used FROM inventories \
        WHERE host_id IN (SELECT value FROM json_each($1))";
    const ZERO_OTHER_CLASSES: &'static str = "UPDATE inventories SET total = 0, reserved = 0, \
        usable = 0 WHERE host_id = $1 AND resource_class NOT IN (SELECT value FROM json_each($2))";
    const HEARTBEATS: &'static str = "UPDATE hosts SET up = b.up, disabled = b.disabled, \
        last_seen_ms = b.seen FROM (SELECT json_extract(value, '$[0]') AS id, \
        json_extract(value, '$[1]') AS up, json_extract(value, '$[2]') AS disabled, \
        json_extract(value, '$[3]') AS seen FROM json_each($1)) b WHERE hosts.id = b.id";
}

impl Dialect for sqlx::Postgres {
    const ADD_USAGE: &'static str = "UPDATE inventories SET used = GREATEST(0, used + $3 * \
        (($2::jsonb ->> resource_class)::bigint)) \
        WHERE host_id = $1 AND ($2::jsonb) ? resource_class";
    const HOSTS_BY_ID: &'static str = "SELECT h.id, h.host, h.node, h.uuid, \
        h.availability_zone, h.up, h.disabled, h.forced_down, h.last_seen_ms, h.traits, \
        h.aggregates, (SELECT COUNT(*) FROM allocations a WHERE a.host_id = h.id AND a.instance) FROM hosts h \
        WHERE h.id IN (SELECT jsonb_array_elements_text($1::jsonb)::bigint)";
    const INVENTORIES_BY_ID: &'static str = "SELECT host_id, resource_class, total, reserved, \
        min_unit, max_unit, step_size, allocation_ratio, used FROM inventories \
        WHERE host_id IN (SELECT jsonb_array_elements_text($1::jsonb)::bigint)";
    const ZERO_OTHER_CLASSES: &'static str = "UPDATE inventories SET total = 0, reserved = 0, \
        usable = 0 WHERE host_id = $1 \
        AND resource_class NOT IN (SELECT jsonb_array_elements_text($2::jsonb))";
    const HEARTBEATS: &'static str = "UPDATE hosts SET up = (b.v->>1)::boolean, \
        disabled = (b.v->>2)::boolean, last_seen_ms = (b.v->>3)::bigint \
        FROM (SELECT jsonb_array_elements($1::jsonb) AS v) b WHERE hosts.id = (b.v->>0)::bigint";
}
