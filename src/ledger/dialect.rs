//! The statements whose text differs between SQLite and PostgreSQL (JSON functions, list
//! parameters, `max`/`GREATEST`), named once per engine so that code written once for both
//! picks its engine's text with `<DB as Dialect>::NAME`.

/// SQLite's conflict clause of an inventory row's upsert: every value taken, and a row the
/// registration repeats left unwritten (no page dirtied for it).
macro_rules! sqlite_inventory_upsert {
    () => {
        "ON CONFLICT (host_id, resource_class) DO UPDATE \
        SET total = excluded.total, reserved = excluded.reserved, min_unit = excluded.min_unit, \
        max_unit = excluded.max_unit, step_size = excluded.step_size, \
        allocation_ratio = excluded.allocation_ratio, usable = excluded.usable \
        WHERE total IS NOT excluded.total OR reserved IS NOT excluded.reserved \
        OR min_unit IS NOT excluded.min_unit OR max_unit IS NOT excluded.max_unit \
        OR step_size IS NOT excluded.step_size \
        OR allocation_ratio IS NOT excluded.allocation_ratio OR usable IS NOT excluded.usable"
    };
}
pub(crate) use sqlite_inventory_upsert;

/// SQL text per engine. JSON parameters are bound as text on both engines. PostgreSQL reads the
/// rows of a list of hosts host by host through the primary key (`LATERAL … OFFSET 0`, which
/// the planner cannot turn into a join): `IN (SELECT …)` planned a hash join over a sequential
/// scan of the whole table, on every reload of the hosts another process changed.
pub(crate) trait Dialect: sqlx::Database {
    /// Adds `$3` (±1) times the amounts of the JSON object `$2` (`{"CLASS": n}`) to host `$1`'s
    /// inventories, never below 0.
    const ADD_USAGE: &'static str;
    /// Inventory rows of host `$1` for classes not in the JSON array `$2`: set to no capacity
    /// (rows still in use stay until their allocations are gone).
    const ZERO_OTHER_CLASSES: &'static str;
    /// Updates liveness from a JSON array `$1` of `[id, up, disabled, last_seen_ms]`.
    const HEARTBEATS: &'static str;
    /// Registers many hosts at once (see `hosts::UPSERT_HOST`), in the order of the JSON array
    /// `$1` of `[host, node, uuid, availability_zone, up, disabled, traits, aggregates]`
    /// (traits and aggregates as JSON text), seen at `$2`. PostgreSQL's returns `id, uuid` of
    /// each; SQLite's returns nothing (see [`HOST_IDS_SQLITE`]).
    const UPSERT_HOSTS: &'static str;
    /// Upserts many inventory rows (see `hosts::UPSERT_INVENTORY`) from a JSON array `$1` of
    /// `[host_id, class, total, reserved, min_unit, max_unit, step_size, ratio, usable]`
    /// (SQLite's leaves a row that would not change unwritten: a re-registration mostly
    /// repeats most of its classes).
    const UPSERT_INVENTORIES: &'static str;
    /// Inventory rows of the hosts in the JSON array `$1` whose `[host_id, class, …]` is not in
    /// the JSON array `$2` (the rows of [`Self::UPSERT_INVENTORIES`]): set to no capacity.
    const ZERO_UNREPORTED_CLASSES: &'static str;
    /// Inventory rows of the hosts in the JSON array `$1` with no capacity and no use go.
    const DROP_UNUSED_EMPTY_OF: &'static str;
}

/// After SQLite's [`Dialect::UPSERT_HOSTS`] of the same JSON array `$1`: one row, a JSON
/// array of `[id, uuid]` of its hosts. (A `RETURNING` row per host would each cross sqlx's
/// channel from the connection's worker thread.)
pub(crate) const HOST_IDS_SQLITE: &str = "SELECT json_group_array(json_array(id, uuid)) \
    FROM hosts WHERE uuid IN (SELECT json_extract(value, '$[2]') FROM json_each($1))";

/// The columns of a host row as [`super::hosts`] decodes them, before its instance count (a
/// macro, so that the statements below are built from it at compile time).
macro_rules! host_columns {
    () => {
        "SELECT h.id, h.host, h.node, h.uuid, h.availability_zone, h.up, h.disabled, \
         h.forced_down, h.last_seen_ms, h.traits, h.aggregates"
    };
}

/// SQLite's instance count of host `h`, counted from its allocations.
macro_rules! sqlite_instances {
    () => {
        "(SELECT COUNT(*) FROM allocations a WHERE a.host_id = h.id AND a.instance)"
    };
}

/// The columns of an inventory row as [`super::hosts`] decodes them.
macro_rules! inventory_select {
    () => {
        "SELECT host_id, resource_class, total, reserved, min_unit, max_unit, step_size, \
         allocation_ratio, used FROM inventories"
    };
}

/// The columns of a host row as [`super::hosts`] decodes them, with the number of
/// instances on it (allocations whose consumer is known to be an instance: not a migration
/// record imported from Placement). PostgreSQL keeps it in the host's row by triggers on
/// allocations (migration 0010): its processes reload every host another process claimed on,
/// and the row's change announces the count to them. SQLite, one process a ledger, loads a
/// host only at start or after a notification, and counts then instead of writing the host's
/// row with every claim.
pub(crate) const POSTGRES_HOST_SELECT: &str =
    concat!(host_columns!(), ", h.instances FROM hosts h");

/// SQLite's [`POSTGRES_HOST_SELECT`].
pub(crate) const SQLITE_HOST_SELECT: &str =
    concat!(host_columns!(), ", ", sqlite_instances!(), " FROM hosts h");

pub(crate) const INVENTORY_SELECT: &str = inventory_select!();

/// SQLite: the hosts whose id is in the JSON array `$1`, as [`SQLITE_HOST_SELECT`] reads them.
pub(crate) const SQLITE_HOSTS_BY_ID: &str = concat!(
    host_columns!(),
    ", ",
    sqlite_instances!(),
    " FROM hosts h WHERE h.id IN (SELECT value FROM json_each($1))"
);

/// SQLite: the inventories of the hosts whose id is in the JSON array `$1`.
pub(crate) const SQLITE_INVENTORIES_BY_ID: &str = concat!(
    inventory_select!(),
    " WHERE host_id IN (SELECT value FROM json_each($1))"
);

/// PostgreSQL: the hosts whose id is in the array `$1`, as [`POSTGRES_HOST_SELECT`] reads
/// them, each with its inventory rows (one row per host and class, the class columns NULL for
/// a host without inventory), in one statement: a reload of the hosts another process changed
/// was two statements, each with a JSON list to parse, and their fixed cost was most of the
/// reload.
pub(crate) const POSTGRES_HOSTS_BY_ID: &str = concat!(
    host_columns!(),
    ", h.instances, i.resource_class, i.total, i.reserved, i.min_unit, i.max_unit, \
     i.step_size, i.allocation_ratio, i.used \
     FROM (SELECT DISTINCT unnest($1::bigint[]) AS id) x \
     CROSS JOIN LATERAL (SELECT * FROM hosts WHERE hosts.id = x.id OFFSET 0) h \
     LEFT JOIN LATERAL (SELECT * FROM inventories WHERE inventories.host_id = h.id OFFSET 0) i \
     ON TRUE"
);

impl Dialect for sqlx::Sqlite {
    const ADD_USAGE: &'static str = "UPDATE inventories SET used = max(0, used + $3 * \
        (SELECT d.value FROM json_each($2) d WHERE d.key = inventories.resource_class)) \
        WHERE host_id = $1 AND resource_class IN (SELECT key FROM json_each($2))";
    const ZERO_OTHER_CLASSES: &'static str = "UPDATE inventories SET total = 0, reserved = 0, \
        usable = 0 WHERE host_id = $1 AND resource_class NOT IN (SELECT value FROM json_each($2))";
    const HEARTBEATS: &'static str = "UPDATE hosts SET up = b.up, disabled = b.disabled, \
        last_seen_ms = b.seen FROM (SELECT json_extract(value, '$[0]') AS id, \
        json_extract(value, '$[1]') AS up, json_extract(value, '$[2]') AS disabled, \
        json_extract(value, '$[3]') AS seen FROM json_each($1)) b WHERE hosts.id = b.id";
    // `WHERE true`: SQLite's upsert after a SELECT needs it to parse; `ORDER BY key` inserts
    // new hosts (and so numbers them) in the order of the array.
    const UPSERT_HOSTS: &'static str = "INSERT INTO hosts (host, node, uuid, \
        availability_zone, up, disabled, last_seen_ms, traits, aggregates) \
        SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]'), \
        json_extract(value, '$[2]'), json_extract(value, '$[3]'), json_extract(value, '$[4]'), \
        json_extract(value, '$[5]'), $2, json_extract(value, '$[6]'), \
        json_extract(value, '$[7]') FROM json_each($1) WHERE true ORDER BY key \
        ON CONFLICT (uuid) DO UPDATE SET host = excluded.host, node = excluded.node, \
        availability_zone = excluded.availability_zone, up = excluded.up, \
        disabled = excluded.disabled, last_seen_ms = excluded.last_seen_ms, \
        traits = excluded.traits, aggregates = excluded.aggregates";
    const UPSERT_INVENTORIES: &'static str = concat!(
        "INSERT INTO inventories (host_id, \
        resource_class, total, reserved, min_unit, max_unit, step_size, allocation_ratio, \
        usable) SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]'), \
        json_extract(value, '$[2]'), json_extract(value, '$[3]'), json_extract(value, '$[4]'), \
        json_extract(value, '$[5]'), json_extract(value, '$[6]'), json_extract(value, '$[7]'), \
        json_extract(value, '$[8]') FROM json_each($1) WHERE true ORDER BY key \
        ",
        sqlite_inventory_upsert!()
    );
    const ZERO_UNREPORTED_CLASSES: &'static str = "UPDATE inventories SET total = 0, \
        reserved = 0, usable = 0 WHERE host_id IN (SELECT value FROM json_each($1)) \
        AND (total != 0 OR reserved != 0 OR usable != 0) \
        AND (host_id, resource_class) NOT IN (SELECT json_extract(value, '$[0]'), \
        json_extract(value, '$[1]') FROM json_each($2))";
    const DROP_UNUSED_EMPTY_OF: &'static str = "DELETE FROM inventories \
        WHERE host_id IN (SELECT value FROM json_each($1)) AND total = 0 AND used = 0";
}

impl Dialect for sqlx::Postgres {
    const ADD_USAGE: &'static str = "UPDATE inventories SET used = GREATEST(0, used + $3 * \
        (($2::jsonb ->> resource_class)::bigint)) \
        WHERE host_id = $1 AND ($2::jsonb) ? resource_class";
    const ZERO_OTHER_CLASSES: &'static str = "UPDATE inventories SET total = 0, reserved = 0, \
        usable = 0 WHERE host_id = $1 \
        AND resource_class NOT IN (SELECT jsonb_array_elements_text($2::jsonb))";
    const HEARTBEATS: &'static str = "UPDATE hosts SET up = (b.v->>1)::boolean, \
        disabled = (b.v->>2)::boolean, last_seen_ms = (b.v->>3)::bigint \
        FROM (SELECT jsonb_array_elements($1::jsonb) AS v) b WHERE hosts.id = (b.v->>0)::bigint";
    const UPSERT_HOSTS: &'static str = "INSERT INTO hosts (host, node, uuid, \
        availability_zone, up, disabled, last_seen_ms, traits, aggregates) \
        SELECT r->>0, r->>1, r->>2, r->>3, (r->>4)::boolean, (r->>5)::boolean, $2, r->>6, \
        r->>7 FROM jsonb_array_elements($1::jsonb) WITH ORDINALITY AS t(r, n) ORDER BY n \
        ON CONFLICT (uuid) DO UPDATE SET host = excluded.host, node = excluded.node, \
        availability_zone = excluded.availability_zone, up = excluded.up, \
        disabled = excluded.disabled, last_seen_ms = excluded.last_seen_ms, \
        traits = excluded.traits, aggregates = excluded.aggregates RETURNING id, uuid";
    const UPSERT_INVENTORIES: &'static str = "INSERT INTO inventories (host_id, \
        resource_class, total, reserved, min_unit, max_unit, step_size, allocation_ratio, \
        usable) SELECT (r->>0)::bigint, r->>1, (r->>2)::bigint, (r->>3)::bigint, \
        (r->>4)::bigint, (r->>5)::bigint, (r->>6)::bigint, (r->>7)::double precision, \
        (r->>8)::bigint FROM jsonb_array_elements($1::jsonb) WITH ORDINALITY AS t(r, n) \
        ORDER BY n ON CONFLICT (host_id, resource_class) DO UPDATE \
        SET total = excluded.total, reserved = excluded.reserved, min_unit = excluded.min_unit, \
        max_unit = excluded.max_unit, step_size = excluded.step_size, \
        allocation_ratio = excluded.allocation_ratio, usable = excluded.usable";
    const ZERO_UNREPORTED_CLASSES: &'static str = "UPDATE inventories SET total = 0, \
        reserved = 0, usable = 0 \
        WHERE host_id IN (SELECT jsonb_array_elements_text($1::jsonb)::bigint) \
        AND (host_id, resource_class) NOT IN (SELECT (r->>0)::bigint, r->>1 \
        FROM jsonb_array_elements($2::jsonb) AS r)";
    const DROP_UNUSED_EMPTY_OF: &'static str = "DELETE FROM inventories \
        WHERE host_id IN (SELECT jsonb_array_elements_text($1::jsonb)::bigint) \
        AND total = 0 AND used = 0";
}
