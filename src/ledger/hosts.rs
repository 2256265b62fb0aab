//! Hosts in the ledger: registering a host (names, inventory of any resource class, traits,
//! aggregates, liveness) and loading host rows into the live table, at start and whenever
//! the ledger changed a host behind the table's back (a notification, another process).

use super::dialect::{
    INVENTORY_SELECT, POSTGRES_HOSTS_BY_ID, POSTGRES_HOST_SELECT, SQLITE_HOSTS_BY_ID,
    SQLITE_HOST_SELECT, SQLITE_INVENTORIES_BY_ID,
};
use super::{read_pool, write_tx, Ledger, LedgerError};
use crate::domain::{
    AggregateId, Aggregates, ClassId, HostId, HostProfile, HostState, Inventory, MarkSet,
    Resources, TraitId, Traits,
};
use sqlx::Row;
use std::collections::HashMap;
use std::sync::Arc;

/// Longest host, node, zone, trait or aggregate name accepted.
pub const MAX_NAME_BYTES: usize = 255;

/// A host's identity, state and inventory as a host-state event or Placement reports it.
#[derive(Clone, Debug, PartialEq)]
pub struct HostRegistration {
    pub host: String,
    pub node: String,
    pub uuid: String,
    pub availability_zone: String,
    pub up: bool,
    pub disabled: bool,
    /// Inventory by resource class name.
    pub inventories: Vec<(String, Inventory)>,
    pub traits: Vec<String>,
    /// Placement aggregate uuids.
    pub aggregates: Vec<String>,
}

impl HostRegistration {
    /// A host `name` (host = node) with the given VCPU, MEMORY_MB and DISK_GB totals.
    pub fn simple(name: &str, uuid: &str, vcpu: i64, memory_mb: i64, disk_gb: i64) -> Self {
        HostRegistration {
            host: name.into(),
            node: name.into(),
            uuid: uuid.into(),
            availability_zone: "nova".into(),
            up: true,
            disabled: false,
            inventories: vec![
                ("VCPU".into(), Inventory::of(vcpu)),
                ("MEMORY_MB".into(), Inventory::of(memory_mb)),
                ("DISK_GB".into(), Inventory::of(disk_gb)),
            ],
            traits: Vec::new(),
            aggregates: Vec::new(),
        }
    }

    /// Refuses empty or overlong names, unknown class names, and inventories Placement would
    /// refuse; every error names what is wrong.
    /// The inventories, a class reported twice taken once with its last report (what
    /// upserting each in turn would leave), in the order of those last reports.
    pub(crate) fn last_reports(&self) -> Vec<&(String, Inventory)> {
        let mut classes: Vec<&(String, Inventory)> = Vec::new();
        for inv in self.inventories.iter().rev() {
            if !classes.iter().any(|(c, _)| *c == inv.0) {
                classes.push(inv);
            }
        }
        classes.reverse();
        classes
    }

    pub fn validate(&self) -> Result<(), LedgerError> {
        let invalid = |m: String| Err(LedgerError::Invalid(m));
        for (what, value) in [
            ("host", &self.host),
            ("node", &self.node),
            ("compute_node_uuid", &self.uuid),
            ("availability_zone", &self.availability_zone),
        ] {
            if value.is_empty() {
                return invalid(format!("{what} must not be empty"));
            }
            if value.len() > MAX_NAME_BYTES {
                return invalid(format!("{what} is longer than {MAX_NAME_BYTES} bytes"));
            }
        }
        validate_inventories(&self.inventories)?;
        for name in self.traits.iter().chain(&self.aggregates) {
            if name.is_empty() || name.len() > MAX_NAME_BYTES {
                return invalid(format!(
                    "trait and aggregate names must be 1 to {MAX_NAME_BYTES} bytes: {:?}",
                    name.chars().take(40).collect::<String>()
                ));
            }
        }
        Ok(())
    }

    /// The profile this registration describes (classes, traits and aggregates interned).
    pub fn profile(&self) -> Result<HostProfile, LedgerError> {
        let mut inventories = Vec::with_capacity(self.inventories.len());
        for (class, inv) in &self.inventories {
            let id = ClassId::intern(class).map_err(|e| LedgerError::Invalid(e.to_string()))?;
            inventories.push((id, *inv));
        }
        let mut profile = HostProfile::new(
            &self.host,
            &self.node,
            &self.uuid,
            &self.availability_zone,
            inventories,
        );
        profile.traits = Traits::from_names(self.traits.iter().map(String::as_str));
        profile.aggregates = Aggregates::from_names(self.aggregates.iter().map(String::as_str));
        Ok(profile)
    }

    pub(crate) fn names_json(names: &[String]) -> String {
        let mut sorted: Vec<&String> = names.iter().collect();
        sorted.sort();
        sorted.dedup();
        // Strings only: written straight into the text (no `Value` tree, no copies).
        serde_json::to_string(&sorted).expect("a list of strings serializes")
    }

    pub(crate) fn traits_json(&self) -> String {
        Self::names_json(&self.traits)
    }

    pub(crate) fn aggregates_json(&self) -> String {
        Self::names_json(&self.aggregates)
    }

    pub(crate) fn classes_json(&self) -> String {
        super::json_list(self.inventories.iter().map(|(c, _)| c.clone()))
    }
}

/// Refuses an unknown class name or an inventory Placement would refuse, naming the class.
fn validate_inventories(inventories: &[(String, Inventory)]) -> Result<(), LedgerError> {
    for (class, inv) in inventories {
        ClassId::intern(class).map_err(|e| LedgerError::Invalid(e.to_string()))?;
        inv.validate()
            .map_err(|e| LedgerError::Invalid(format!("inventory {class}: {e}")))?;
    }
    Ok(())
}

pub(crate) const UPSERT_HOST: &str = "INSERT INTO hosts (host, node, uuid, availability_zone, \
    up, disabled, last_seen_ms, traits, aggregates) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) \
    ON CONFLICT (uuid) DO UPDATE SET host = excluded.host, node = excluded.node, \
    availability_zone = excluded.availability_zone, up = excluded.up, \
    disabled = excluded.disabled, last_seen_ms = excluded.last_seen_ms, \
    traits = excluded.traits, aggregates = excluded.aggregates RETURNING id";

pub(crate) const UPSERT_INVENTORY: &str = "INSERT INTO inventories (host_id, resource_class, \
    total, reserved, min_unit, max_unit, step_size, allocation_ratio, usable) \
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT (host_id, resource_class) DO UPDATE \
    SET total = excluded.total, reserved = excluded.reserved, min_unit = excluded.min_unit, \
    max_unit = excluded.max_unit, step_size = excluded.step_size, \
    allocation_ratio = excluded.allocation_ratio, usable = excluded.usable";

/// Inventory rows no longer reported and no longer in use go.
pub(crate) const DROP_UNUSED_EMPTY: &str =
    "DELETE FROM inventories WHERE host_id = $1 AND total = 0 AND used = 0";

/// Upserts `$inventories` (validated `(class name, Inventory)` pairs) of host id `$id` on
/// `$exec` (a connection or transaction), usage kept.
macro_rules! upsert_inventories {
    ($exec:expr, $id:expr, $inventories:expr) => {{
        for (class, inv) in $inventories {
            sqlx::query($crate::ledger::hosts::UPSERT_INVENTORY)
                .bind($id)
                .bind(class)
                .bind(inv.total)
                .bind(inv.reserved)
                .bind(inv.min_unit)
                .bind(inv.max_unit)
                .bind(inv.step_size)
                .bind(inv.allocation_ratio)
                .bind(inv.usable())
                .execute(&mut *$exec)
                .await?;
        }
    }};
}
pub(crate) use upsert_inventories;

/// Registers `$reg` (a validated [`HostRegistration`]) on `$exec` (a connection or transaction
/// of engine `$db`); evaluates to the host id. Usage already recorded is kept.
macro_rules! upsert_host {
    ($db:ty, $exec:expr, $reg:expr, $now_ms:expr) => {{
        let reg: &$crate::ledger::HostRegistration = $reg;
        let id: i64 = sqlx::query_scalar($crate::ledger::hosts::UPSERT_HOST)
            .bind(&reg.host)
            .bind(&reg.node)
            .bind(&reg.uuid)
            .bind(&reg.availability_zone)
            .bind(reg.up)
            .bind(reg.disabled)
            .bind($now_ms)
            .bind(reg.traits_json())
            .bind(reg.aggregates_json())
            .fetch_one(&mut *$exec)
            .await?;
        $crate::ledger::hosts::upsert_inventories!($exec, id, &reg.inventories);
        sqlx::query(<$db as $crate::ledger::dialect::Dialect>::ZERO_OTHER_CLASSES)
            .bind(id)
            .bind(reg.classes_json())
            .execute(&mut *$exec)
            .await?;
        sqlx::query($crate::ledger::hosts::DROP_UNUSED_EMPTY)
            .bind(id)
            .execute(&mut *$exec)
            .await?;
        $crate::domain::HostId(id)
    }};
}
pub(crate) use upsert_host;

/// What a registration found of its (host, node) held by another compute node (a node
/// re-created under a new uuid: the service deleted and created again, the host reinstalled).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Takeover {
    /// No other node holds the pair: the registration is written as it is.
    Free,
    /// The registration's own node was retired: it changes nothing.
    OwnRetired,
    /// Another node held the pair: `old` (with its uuid) now is the new node's row (`kept`
    /// false: it held no allocation, and the registration overwrites it), or was retired
    /// beside it with its allocations (`kept`: unschedulable, renamed, gone with its last
    /// allocation, migration 0014).
    Replaced {
        old: HostId,
        old_uuid: String,
        kept: bool,
    },
}

impl Takeover {
    /// The one log line of a replacement (once committed).
    pub(crate) fn log(&self, reg: &HostRegistration) {
        if let Takeover::Replaced {
            old,
            old_uuid,
            kept,
        } = self
        {
            if *kept {
                tracing::warn!(host = %reg.host, node = %reg.node, old_compute_node = %old_uuid, old_id = old.0, compute_node = %reg.uuid, "compute node re-created under a new uuid: the old node keeps its allocations, unschedulable, until they are released; the new one is registered beside it");
            } else {
                tracing::warn!(host = %reg.host, node = %reg.node, old_compute_node = %old_uuid, id = old.0, compute_node = %reg.uuid, "compute node re-created under a new uuid: it replaces the old node, which held no allocation");
            }
        }
    }
}

/// A host [`Ledger::remove_hosts_of_providers`] removed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RemovedHost {
    pub id: HostId,
    /// Its compute-node provider's uuid.
    pub uuid: String,
    pub host: String,
    pub node: String,
    /// Allocations it still held, released with it.
    pub released: u64,
}

/// Whether the (host, node) of `reg` may be held by another node than its own, as far as the
/// table can tell: any registration of a node the table does not hold under these names.
/// (One it holds so that another process changed meanwhile fails on `UNIQUE (host, node)`;
/// the batch's savepoint pass checks every registration.)
pub(crate) fn may_take_over(table: &crate::table::HostTable, reg: &HostRegistration) -> bool {
    table.by_uuid(&reg.uuid).is_none_or(|h| {
        h.profile.renamed || *h.profile.host != *reg.host || *h.profile.node != *reg.node
    })
}

/// Whether the node of uuid `$1` was retired.
pub(crate) const OWN_RETIRED: &str = "SELECT retired FROM hosts WHERE uuid = $1";
/// The node holding (host `$1`, node `$2`) other than uuid `$3`: id, uuid, whether it holds an
/// allocation.
pub(crate) const HOLDER_OF_NAMES: &str = "SELECT h.id, h.uuid, EXISTS (SELECT 1 FROM \
    allocations a WHERE a.host_id = h.id) FROM hosts h WHERE h.host = $1 AND h.node = $2 \
    AND h.uuid <> $3 AND NOT h.retired";
/// Row `$1` becomes the node of uuid `$2` (which has no row).
pub(crate) const TAKE_OVER: &str = "UPDATE hosts SET uuid = $2 WHERE id = $1";
/// Row `$1` is retired: unschedulable, its node renamed to leave (host, node) to the new one.
pub(crate) const RETIRE: &str = "UPDATE hosts SET retired = TRUE, \
    node = node || ' (retired ' || uuid || ')', up = FALSE, disabled = TRUE, \
    forced_down = TRUE WHERE id = $1";

/// Settles who holds the (host, node) of `$reg` before it is written, on `$exec` (a
/// connection or transaction); evaluates to the [`Takeover`].
macro_rules! takeover {
    ($exec:expr, $reg:expr) => {{
        use $crate::ledger::hosts::{Takeover, HOLDER_OF_NAMES, OWN_RETIRED, RETIRE, TAKE_OVER};
        let reg: &$crate::ledger::HostRegistration = $reg;
        let own: Option<bool> = sqlx::query_scalar(OWN_RETIRED)
            .bind(&reg.uuid)
            .fetch_optional(&mut *$exec)
            .await?;
        if own == Some(true) {
            Takeover::OwnRetired
        } else {
            let holder: Option<(i64, String, bool)> = sqlx::query_as(HOLDER_OF_NAMES)
                .bind(&reg.host)
                .bind(&reg.node)
                .bind(&reg.uuid)
                .fetch_optional(&mut *$exec)
                .await?;
            match holder {
                None => Takeover::Free,
                Some((id, old_uuid, held)) => {
                    // A node that has a row of its own (renamed onto the pair) cannot take
                    // another's over: that one is retired.
                    let kept = held || own.is_some();
                    if kept {
                        sqlx::query(RETIRE).bind(id).execute(&mut *$exec).await?;
                    } else {
                        sqlx::query(TAKE_OVER)
                            .bind(id)
                            .bind(&reg.uuid)
                            .execute(&mut *$exec)
                            .await?;
                    }
                    Takeover::Replaced {
                        old: $crate::domain::HostId(id),
                        old_uuid,
                        kept,
                    }
                }
            }
        }
    }};
}
pub(crate) use takeover;

/// [`takeover!`] on a connection of SQLite's hot writer.
pub(crate) fn takeover_rusqlite(
    db: &rusqlite::Connection,
    reg: &HostRegistration,
) -> rusqlite::Result<Takeover> {
    use rusqlite::OptionalExtension;
    // SQLite numbers `$N` parameters by where they first appear, not by N: its own `?N`.
    let own: Option<bool> = db
        .prepare_cached("SELECT retired FROM hosts WHERE uuid = ?1")?
        .query_row([&reg.uuid], |r| r.get(0))
        .optional()?;
    if own == Some(true) {
        return Ok(Takeover::OwnRetired);
    }
    let holder: Option<(i64, String, bool)> = db
        .prepare_cached(&HOLDER_OF_NAMES.replace('$', "?"))?
        .query_row([&reg.host, &reg.node, &reg.uuid], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?))
        })
        .optional()?;
    let Some((id, old_uuid, held)) = holder else {
        return Ok(Takeover::Free);
    };
    let kept = held || own.is_some();
    if kept {
        db.prepare_cached(&RETIRE.replace('$', "?"))?
            .execute([id])?;
    } else {
        db.prepare_cached("UPDATE hosts SET uuid = ?2 WHERE id = ?1")?
            .execute(rusqlite::params![id, reg.uuid])?;
    }
    Ok(Takeover::Replaced {
        old: HostId(id),
        old_uuid,
        kept,
    })
}

/// A host row as selected by [`SQLITE_HOST_SELECT`] or [`POSTGRES_HOST_SELECT`], before its
/// inventories are joined.
struct HostFields {
    id: i64,
    host: String,
    node: String,
    uuid: String,
    availability_zone: String,
    up: bool,
    disabled: bool,
    forced_down: bool,
    last_seen_ms: i64,
    traits: String,
    aggregates: String,
    instances: i64,
}

macro_rules! host_fields {
    ($row:expr) => {{
        let r = $row;
        HostFields {
            id: r.try_get(0)?,
            host: r.try_get(1)?,
            node: r.try_get(2)?,
            uuid: r.try_get(3)?,
            availability_zone: r.try_get(4)?,
            up: r.try_get(5)?,
            disabled: r.try_get(6)?,
            forced_down: r.try_get(7)?,
            last_seen_ms: r.try_get(8)?,
            traits: r.try_get(9)?,
            aggregates: r.try_get(10)?,
            instances: r.try_get(11)?,
        }
    }};
}

/// One inventory row: (host id, class, inventory, used).
type InventoryRow = (i64, String, Inventory, i64);

/// The inventory and its use from the columns after the class at column `$class`: total,
/// reserved, min_unit, max_unit, step_size, allocation_ratio, used.
macro_rules! inventory_after {
    ($row:expr, $class:expr) => {{
        let (r, c): (_, usize) = ($row, $class);
        let inv = Inventory {
            total: r.try_get(c + 1)?,
            reserved: r.try_get(c + 2)?,
            min_unit: r.try_get(c + 3)?,
            max_unit: r.try_get(c + 4)?,
            step_size: r.try_get(c + 5)?,
            allocation_ratio: r.try_get(c + 6)?,
        };
        (inv, r.try_get::<i64, _>(c + 7)?)
    }};
}

macro_rules! inventory_row {
    ($row:expr) => {{
        let r = $row;
        let (inv, used) = inventory_after!(r, 1);
        (r.try_get(0)?, r.try_get(1)?, inv, used)
    }};
}

fn names<M: crate::domain::Mark>(
    json: &str,
    what: &str,
    host: i64,
) -> Result<MarkSet<M>, LedgerError> {
    let list: Vec<String> = serde_json::from_str(json).map_err(|e| {
        LedgerError::Invalid(format!("host {host}: {what} are not a JSON list: {e}"))
    })?;
    Ok(MarkSet::from_names(list.iter().map(String::as_str)))
}

/// Joins host rows with their inventory rows into table rows.
fn join(
    hosts: Vec<HostFields>,
    inventories: Vec<InventoryRow>,
) -> Result<Vec<HostState>, LedgerError> {
    let mut by_host: HashMap<i64, Vec<(String, Inventory, i64)>> = HashMap::new();
    for (host, class, inv, used) in inventories {
        by_host.entry(host).or_default().push((class, inv, used));
    }
    let mut rows = Vec::with_capacity(hosts.len());
    for h in hosts {
        let mut inventories = Vec::new();
        let mut used = Resources::ZERO;
        for (class, inv, amount) in by_host.remove(&h.id).unwrap_or_default() {
            let id = ClassId::intern(&class)
                .map_err(|e| LedgerError::Invalid(format!("host {} inventory: {e}", h.id)))?;
            used.set(id, amount);
            if inv.total > 0 || inv.usable() > 0 {
                inventories.push((id, inv));
            }
        }
        let mut profile =
            HostProfile::new(&h.host, &h.node, &h.uuid, &h.availability_zone, inventories);
        profile.traits = names::<TraitId>(&h.traits, "traits", h.id)?;
        profile.aggregates = names::<AggregateId>(&h.aggregates, "aggregates", h.id)?;
        rows.push(HostState {
            id: HostId(h.id),
            profile: Arc::new(profile),
            used,
            num_instances: h.instances,
            num_io_ops: h.instances,
            up: h.up,
            disabled: h.disabled,
            forced_down: h.forced_down,
            last_seen_ms: h.last_seen_ms,
            // Soft state: never in the ledger; a reload keeps the table's.
            measured: None,
        });
    }
    rows.sort_by_key(|r| r.id);
    Ok(rows)
}

impl Ledger {
    /// Registers a host or updates its inventory, traits, aggregates and state; returns its id.
    pub async fn register_host(
        &self,
        reg: &HostRegistration,
        now_ms: i64,
    ) -> Result<HostId, LedgerError> {
        reg.validate()?;
        let (id, takeover) = write_tx!(self, Db, tx => {
            let takeover = takeover!(tx, reg);
            match takeover {
                // A retired node stays as it is (its row, when it still has one).
                Takeover::OwnRetired => {
                    let id: Option<i64> = sqlx::query_scalar("SELECT id FROM hosts WHERE uuid = $1")
                        .bind(&reg.uuid)
                        .fetch_optional(&mut *tx)
                        .await?;
                    (id.map(HostId), takeover)
                }
                _ => (Some(upsert_host!(Db, tx, reg, now_ms)), takeover),
            }
        });
        let mut ids: Vec<HostId> = id.into_iter().collect();
        if let Takeover::Replaced { old, .. } = &takeover {
            takeover.log(reg);
            self.table().host_counters().node_replaced.inc();
            ids.push(*old);
        }
        self.reload(&ids).await?;
        id.ok_or_else(|| {
            LedgerError::Invalid(format!(
                "compute node {} was retired and has no row any more",
                reg.uuid
            ))
        })
    }

    /// The ledger's rows of the given hosts (every host when `ids` is `None`), in id order.
    pub async fn load_hosts(&self, ids: Option<&[HostId]>) -> Result<Vec<HostState>, LedgerError> {
        macro_rules! decode {
            ($hosts:expr, $inventories:expr) => {{
                let mut h = Vec::with_capacity($hosts.len());
                for row in &$hosts {
                    h.push(host_fields!(row));
                }
                let mut inv = Vec::with_capacity($inventories.len());
                for row in &$inventories {
                    inv.push(inventory_row!(row));
                }
                join(h, inv)
            }};
        }
        match (&self.pools, ids) {
            (super::Pools::Sqlite { read, .. }, Some(ids)) => {
                let list = super::json_list(ids.iter().map(|id| id.0));
                let hosts = sqlx::query(SQLITE_HOSTS_BY_ID)
                    .bind(&list)
                    .fetch_all(read)
                    .await?;
                let inventories = sqlx::query(SQLITE_INVENTORIES_BY_ID)
                    .bind(&list)
                    .fetch_all(read)
                    .await?;
                decode!(hosts, inventories)
            }
            (super::Pools::Postgres(pool), Some(ids)) => {
                let ids: Vec<i64> = ids.iter().map(|id| id.0).collect();
                let rows = sqlx::query(POSTGRES_HOSTS_BY_ID)
                    .bind(ids)
                    .fetch_all(pool)
                    .await?;
                // A host's rows come together, one per inventory row (or one with no class).
                let mut hosts: Vec<HostFields> = Vec::new();
                let mut inventories: Vec<InventoryRow> = Vec::with_capacity(rows.len());
                for row in &rows {
                    let id: i64 = row.try_get(0)?;
                    if hosts.last().is_none_or(|h| h.id != id) {
                        hosts.push(host_fields!(row));
                    }
                    if let Some(class) = row.try_get::<Option<String>, _>(12)? {
                        let (inv, used) = inventory_after!(row, 12);
                        inventories.push((id, class, inv, used));
                    }
                }
                join(hosts, inventories)
            }
            (super::Pools::Sqlite { read, .. }, None) => {
                let hosts = sqlx::query(SQLITE_HOST_SELECT).fetch_all(read).await?;
                let inventories = sqlx::query(INVENTORY_SELECT).fetch_all(read).await?;
                decode!(hosts, inventories)
            }
            (super::Pools::Postgres(pool), None) => {
                let hosts = sqlx::query(POSTGRES_HOST_SELECT).fetch_all(pool).await?;
                let inventories = sqlx::query(INVENTORY_SELECT).fetch_all(pool).await?;
                decode!(hosts, inventories)
            }
        }
    }

    /// Replaces a host's traits (as Placement has them now) and loads it into the live table.
    pub async fn set_traits(&self, host: HostId, traits: &[String]) -> Result<(), LedgerError> {
        let json = HostRegistration::names_json(traits);
        write_tx!(self, Db, tx => {
            sqlx::query("UPDATE hosts SET traits = $1 WHERE id = $2")
                .bind(&json)
                .bind(host.0)
                .execute(&mut *tx)
                .await?;
        });
        self.reload(&[host]).await
    }

    /// Replaces some of a host's inventory records (as Placement has them now: after Flex
    /// moved an allocation ratio, `[flex] manage_allocation_ratio`) and loads it into the live
    /// table. Usage recorded is kept; other classes are left as they are.
    pub async fn set_inventories(
        &self,
        host: HostId,
        inventories: &[(String, Inventory)],
    ) -> Result<(), LedgerError> {
        validate_inventories(inventories)?;
        write_tx!(self, Db, tx => {
            upsert_inventories!(tx, host.0, inventories);
        });
        self.reload(&[host]).await
    }

    /// Removes the hosts of the compute-node providers `uuids` from the ledger, with every
    /// allocation still recorded on them, and from the live table: the providers left
    /// Placement. nova-api deletes a compute service's providers (`cascade`: with their
    /// allocations) before the service itself, and Nova's scheduler stops reading a node its
    /// cell no longer has; Parasol's sync sees it as a provider it read before and no longer
    /// listed (`placement::sync`). A uuid without a host is skipped. A node re-created later,
    /// under this uuid or another, registers as a new host.
    pub async fn remove_hosts_of_providers(
        &self,
        uuids: &[String],
    ) -> Result<Vec<RemovedHost>, LedgerError> {
        if uuids.is_empty() {
            return Ok(Vec::new());
        }
        let removed = write_tx!(self, Db, tx => {
            let mut removed = Vec::new();
            for uuid in uuids {
                let row: Option<(i64, String, String)> =
                    sqlx::query_as("SELECT id, host, node FROM hosts WHERE uuid = $1")
                        .bind(uuid)
                        .fetch_optional(&mut *tx)
                        .await?;
                let Some((id, host, node)) = row else {
                    continue;
                };
                // Held sources and claims included: Placement dropped them with the provider.
                let released = sqlx::query("DELETE FROM allocations WHERE host_id = $1")
                    .bind(id)
                    .execute(&mut *tx)
                    .await?
                    .rows_affected();
                // Its inventories go with it (`ON DELETE CASCADE`); a retired node's row may
                // have gone already with its last allocation (migration 0014).
                sqlx::query("DELETE FROM hosts WHERE id = $1")
                    .bind(id)
                    .execute(&mut *tx)
                    .await?;
                removed.push(RemovedHost {
                    id: HostId(id),
                    uuid: uuid.clone(),
                    host,
                    node,
                    released,
                });
            }
            removed
        });
        let ids: Vec<HostId> = removed.iter().map(|r| r.id).collect();
        self.reload(&ids).await?;
        Ok(removed)
    }

    /// Loads `ids` from the ledger into the live table; hosts the ledger no longer has (a
    /// retired compute node gone with its last allocation, migration 0014) leave it. Claims
    /// in flight keep their reservation (see [`crate::table`]).
    pub async fn reload(&self, ids: &[HostId]) -> Result<(), LedgerError> {
        if ids.is_empty() {
            return Ok(());
        }
        let _exclusive = self.gate.write().await;
        let rows = self.load_hosts(Some(ids)).await?;
        let gone: Vec<HostId> = ids
            .iter()
            .filter(|id| !rows.iter().any(|r| r.id == **id))
            .copied()
            .collect();
        self.table().load(rows);
        if !gone.is_empty() {
            self.table().forget(&gone);
        }
        Ok(())
    }

    /// Loads every host into the live table.
    pub async fn reload_all(&self) -> Result<(), LedgerError> {
        let _exclusive = self.gate.write().await;
        let rows = self.load_hosts(None).await?;
        self.table().load(rows);
        Ok(())
    }

    /// Every host's current state, in id order, from the live table (no database read).
    pub async fn read_hosts(&self) -> Result<Vec<HostState>, LedgerError> {
        let mut hosts = self.table().snapshot();
        hosts.sort_by_key(|h| h.id);
        Ok(hosts)
    }

    /// The ids of every host, in id order.
    pub async fn host_ids(&self) -> Result<Vec<HostId>, LedgerError> {
        let mut ids = self.table().ids();
        ids.sort();
        Ok(ids)
    }

    /// Whether the database answers (for `/healthz`).
    pub async fn ping(&self) -> Result<(), LedgerError> {
        read_pool!(self, pool => {
            sqlx::query("SELECT 1").execute(pool).await?;
            Ok(())
        })
    }

    pub async fn host_id_by_uuid(&self, uuid: &str) -> Result<Option<HostId>, LedgerError> {
        Ok(self.table().by_uuid(uuid).map(|h| h.id))
    }

    /// The id of the host with this service host name (and node, when given).
    pub async fn host_id_by_name(
        &self,
        host: &str,
        node: Option<&str>,
    ) -> Result<Option<HostId>, LedgerError> {
        Ok(self.table().by_name(host, node).map(|h| h.id))
    }
}
