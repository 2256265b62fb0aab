//! The JSON a plugin is sent and answers (docs/plugins.md §5; the JSON Schema is
//! `etc/plugin-schema.json`), and the checks an answer must pass before it counts.

use crate::domain::{AggregateId, Encoded, HostState, Mark, RequestContext, TraitId};
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;

/// The version of the request and response schema, sent as `api_version`.
pub const API_VERSION: u32 = 1;

/// The keys of a `select` request a plugin may change, and only by adding to them.
pub const ADDITIVE_KEYS: [&str; 4] = [
    "required_traits",
    "forbidden_traits",
    "member_of",
    "ignore_hosts",
];

/// What a `select` plugin is shown: the call as Nova asked it (built by `scheduling`, the
/// layer that reads Nova's RequestSpec), a JSON object whose [`ADDITIVE_KEYS`] are lists.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SelectRequest(pub Map<String, Value>);

/// The constraints a `select` chain added to a call (plugins may only add).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Additions {
    pub required_traits: Vec<String>,
    pub forbidden_traits: Vec<String>,
    /// Each a group of aggregate uuids of which the host must be in at least one.
    pub member_of: Vec<Vec<String>>,
    pub ignore_hosts: Vec<String>,
}

impl Additions {
    pub fn is_empty(&self) -> bool {
        self.required_traits.is_empty()
            && self.forbidden_traits.is_empty()
            && self.member_of.is_empty()
            && self.ignore_hosts.is_empty()
    }

    /// Adds these constraints to every instance of the call.
    pub fn apply(&self, requests: &mut [RequestContext]) {
        if self.is_empty() {
            return;
        }
        for req in requests {
            let q = &mut req.query;
            q.required_traits
                .extend(self.required_traits.iter().map(|t| TraitId::intern(t)));
            q.required_traits.sort();
            q.required_traits.dedup();
            q.forbidden_traits
                .extend(self.forbidden_traits.iter().map(|t| TraitId::intern(t)));
            q.forbidden_traits.sort();
            q.forbidden_traits.dedup();
            for any in &self.member_of {
                let group: Vec<AggregateId> = any.iter().map(|a| AggregateId::intern(a)).collect();
                if !q.member_of.contains(&group) {
                    q.member_of.push(group);
                }
            }
            for host in &self.ignore_hosts {
                if !req.ignore_hosts.contains(host) {
                    req.ignore_hosts.push(host.clone());
                }
            }
        }
    }
}

/// The [`ADDITIVE_KEYS`] of a request's first instance, as a `select` plugin sees them.
pub fn additive_view(req: &RequestContext) -> Map<String, Value> {
    let names =
        |ids: &[TraitId]| -> Vec<String> { ids.iter().map(|t| t.name().to_string()).collect() };
    let mut m = Map::new();
    m.insert(
        "required_traits".into(),
        json!(names(&req.query.required_traits)),
    );
    m.insert(
        "forbidden_traits".into(),
        json!(names(&req.query.forbidden_traits)),
    );
    let member_of: Vec<Vec<String>> = req
        .query
        .member_of
        .iter()
        .map(|any| any.iter().map(|a| a.name().to_string()).collect())
        .collect();
    m.insert("member_of".into(), json!(member_of));
    m.insert("ignore_hosts".into(), json!(req.ignore_hosts));
    m
}

/// What a `filter` or `weigh` plugin is shown of the instance being placed.
pub fn instance_view(req: &RequestContext) -> Value {
    let mut m = additive_view(req);
    m.insert("instance_uuid".into(), json!(req.instance_uuid));
    m.insert("project_id".into(), json!(req.project_id));
    m.insert("flavor_name".into(), json!(req.flavor_name));
    m.insert("resources".into(), json!(req.demand.to_map()));
    m.insert("availability_zone".into(), json!(req.availability_zone));
    Value::Object(m)
}

/// One candidate host as a plugin sees it; `rank` is its place in Parasol's ranking (0 best).
pub fn candidate_view(host: &HostState, rank: usize) -> Value {
    let mut out = Vec::new();
    write_candidate(&mut out, &mut [0; TAIL], host, rank);
    serde_json::from_slice(&out).unwrap_or(Value::Null)
}

/// The body of a `filter` or `weigh` call, written straight from the hosts: building a
/// `Value` per candidate cost ~4 µs each, most of a call at K = 64 (docs/plugins.md §8). Each
/// host's unchanging part (names, zone, usable amounts, traits, aggregates) is encoded once
/// per profile ([`crate::domain::Encoded`]); a call writes only the rank and the amounts
/// that move.
pub fn offer_body(
    event: &str,
    plugin: &str,
    instance: &Value,
    candidates: &[HostState],
) -> Vec<u8> {
    #[derive(Serialize)]
    struct Head<'a> {
        api_version: u32,
        event: &'a str,
        plugin: &'a str,
        request: &'a Value,
    }
    let head = Head {
        api_version: API_VERSION,
        event,
        plugin,
        request: instance,
    };
    let mut out = Vec::with_capacity(1024 + 384 * candidates.len());
    if serde_json::to_writer(&mut out, &head).is_err() || out.pop() != Some(b'}') {
        return Vec::new();
    }
    out.extend_from_slice(b",\"candidates\":[");
    let mut tail = [0; TAIL];
    for (rank, h) in candidates.iter().enumerate() {
        if rank > 0 {
            out.push(b',');
        }
        write_candidate(&mut out, &mut tail, h, rank);
    }
    out.extend_from_slice(b"]}");
    out
}

/// A class's record in [`Encoded::bytes`]: its usable amount (8 bytes, little-endian), its
/// index, its key's length, and its key (`"VCPU":`) in [`KEY_WIDTH`] bytes, so that it is
/// copied in one fixed-size move rather than a call to `memcpy`.
const RECORD: usize = 10 + KEY_WIDTH;
const KEY_WIDTH: usize = 30;
/// A profile with more classes than this is written the long way.
const MOST_RECORDS: usize = 8;
/// Room for a candidate's changing part written from records: its rank, then `used` and
/// `free` of at most [`MOST_RECORDS`] classes each, then `num_instances` (numbers of at most 20
/// characters).
const TAIL: usize = 1024;

/// One candidate as `etc/plugin-schema.json`'s `Candidate`. Its changing part (rank, `used`,
/// `free`, `num_instances`) is written into `tail` first, with fixed-size moves, then copied
/// once: writing it into `out` piece by piece cost ~850 instructions a candidate, mostly
/// `Vec` bookkeeping and `memcpy` calls around a dozen small copies.
fn write_candidate(out: &mut Vec<u8>, tail: &mut [u8; TAIL], h: &HostState, rank: usize) {
    let encoded = h.profile.encoded.get_or_init(|| profile_part(h));
    let (head, records) = encoded.bytes.split_at(encoded.head as usize);
    out.extend_from_slice(head);
    match encoded.mask {
        // Every class it uses has usable capacity, so the classes of `used` and `free` that
        // are not zero are among the records.
        Some(mask) if used_mask(&h.used) & !mask == 0 => {
            let len = write_tail(tail, records, h, rank);
            out.extend_from_slice(&tail[..len]);
        }
        _ => {
            let mut number = itoa::Buffer::new();
            out.extend_from_slice(number.format(rank).as_bytes());
            out.extend_from_slice(b",\"used\":");
            write_amounts(out, &h.used);
            out.extend_from_slice(b",\"free\":");
            write_amounts(out, &h.free());
            out.extend_from_slice(b",\"num_instances\":");
            out.extend_from_slice(number.format(h.num_instances).as_bytes());
            out.push(b'}');
        }
    }
}

/// A candidate's changing part, from the rank on, written from its profile's `records`
/// into `tail`: its length.
fn write_tail(tail: &mut [u8; TAIL], records: &[u8], h: &HostState, rank: usize) -> usize {
    let used = &h.used.0;
    let mut pos = put_int(tail, 0, rank as i64);
    pos = put(tail, pos, b",\"used\":{");
    let open = pos;
    for record in records.chunks_exact(RECORD) {
        let (class, _, key) = read_record(record);
        pos = put_amount(tail, pos, key, used[class]);
    }
    pos = close(tail, open, pos);
    pos = put(tail, pos, b",\"free\":{");
    let open = pos;
    for record in records.chunks_exact(RECORD) {
        let (class, usable, key) = read_record(record);
        pos = put_amount(tail, pos, key, usable.saturating_sub(used[class]));
    }
    pos = close(tail, open, pos);
    pos = put(tail, pos, b",\"num_instances\":");
    pos = put_int(tail, pos, h.num_instances);
    put(tail, pos, b"}")
}

/// A record's class index, usable amount and key (padded to [`KEY_WIDTH`]: its length is
/// the record's tenth byte).
fn read_record(record: &[u8]) -> (usize, i64, (&[u8], usize)) {
    let mut usable = [0; 8];
    usable.copy_from_slice(&record[..8]);
    let key = (&record[10..RECORD], usize::from(record[9]));
    (usize::from(record[8]), i64::from_le_bytes(usable), key)
}

/// `"KEY":v,` at `pos` when `v` is not zero: where it ends.
fn put_amount(tail: &mut [u8; TAIL], pos: usize, (key, len): (&[u8], usize), v: i64) -> usize {
    if v == 0 {
        return pos;
    }
    tail[pos..pos + KEY_WIDTH].copy_from_slice(key);
    let pos = put_int(tail, pos + len, v);
    put(tail, pos, b",")
}

/// `bytes` at `pos`: where they end.
fn put(tail: &mut [u8; TAIL], pos: usize, bytes: &[u8]) -> usize {
    tail[pos..pos + bytes.len()].copy_from_slice(bytes);
    pos + bytes.len()
}

/// `v` in decimal at `pos`: where it ends. Two digits at a time, as `itoa` does (`itoa`
/// into its own buffer and then a copy of the digits counted more instructions than this).
fn put_int(tail: &mut [u8; TAIL], mut pos: usize, v: i64) -> usize {
    const PAIRS: &[u8; 200] = b"0001020304050607080910111213141516171819\
        2021222324252627282930313233343536373839\
        4041424344454647484950515253545556575859\
        6061626364656667686970717273747576777879\
        8081828384858687888990919293949596979899";
    if v < 0 {
        tail[pos] = b'-';
        pos += 1;
    }
    let mut n = v.unsigned_abs();
    let end = pos + n.checked_ilog10().map_or(1, |d| d as usize + 1);
    let mut at = end;
    while n >= 10 {
        let pair = (n % 100) as usize * 2;
        at -= 2;
        tail[at..at + 2].copy_from_slice(&PAIRS[pair..pair + 2]);
        n /= 100;
    }
    if at > pos {
        tail[pos] = b'0' + n as u8;
    }
    end
}

/// Ends an object of amounts opened at `open` (just after its `{`) whose last amount ends
/// at `pos`: the last comma becomes the closing brace.
fn close(tail: &mut [u8; TAIL], open: usize, pos: usize) -> usize {
    let pos = if pos > open { pos - 1 } else { pos };
    put(tail, pos, b"}")
}

/// Bit `i` set: class `i` of `amounts` is not zero.
fn used_mask(amounts: &crate::domain::Resources) -> u32 {
    amounts.0[..crate::domain::ClassId::count()]
        .iter()
        .enumerate()
        .fold(0, |mask, (i, v)| mask | (u32::from(*v != 0) << i))
}

/// Ends an object of amounts opened at `open` (just after its `{`): the last comma becomes
/// the closing brace.
fn close_amounts(out: &mut Vec<u8>, open: usize) {
    if out.len() > open {
        out.pop();
    }
    out.push(b'}');
}

/// A candidate's part that comes from its host's profile: `{`, the keys up to `"rank":`,
/// then a record ([`RECORD`]) for each class with usable capacity, unless there are more
/// than [`MOST_RECORDS`] or a key longer than [`KEY_WIDTH`].
fn profile_part(h: &HostState) -> Encoded {
    let mut out = Vec::with_capacity(512);
    let p = &h.profile;
    let names = [
        ("{\"uuid\":", &*p.uuid),
        (",\"host\":", &*p.host),
        (",\"node\":", &*p.node),
        (",\"availability_zone\":", &*p.availability_zone),
    ];
    // Writing strings and lists of strings into a Vec cannot fail.
    for (key, name) in names {
        out.extend_from_slice(key.as_bytes());
        let _ = serde_json::to_writer(&mut out, name);
    }
    out.extend_from_slice(b",\"usable\":");
    write_amounts(&mut out, &p.usable);
    out.extend_from_slice(b",\"traits\":");
    let _ = serde_json::to_writer(&mut out, &p.traits.names());
    out.extend_from_slice(b",\"aggregates\":");
    let _ = serde_json::to_writer(&mut out, &p.aggregates.names());
    out.extend_from_slice(b",\"rank\":");
    let head = out.len() as u32;
    let mut mask = Some(0u32);
    let mut key = Vec::new();
    for (records, (class, v)) in p.usable.nonzero().enumerate() {
        key.clear();
        write_key(&mut key, class);
        if records == MOST_RECORDS || key.len() > KEY_WIDTH {
            // No records: its amounts are written the long way.
            mask = None;
            out.truncate(head as usize);
            break;
        }
        mask = mask.map(|m| m | 1 << class.index());
        out.extend_from_slice(&v.to_le_bytes());
        out.extend_from_slice(&[class.index() as u8, key.len() as u8]);
        key.resize(KEY_WIDTH, b' ');
        out.extend_from_slice(&key);
    }
    Encoded {
        bytes: out.into(),
        head,
        mask,
    }
}

/// A class's key and colon: `"VCPU":`.
fn write_key(out: &mut Vec<u8>, class: crate::domain::ClassId) {
    match class.fixed_name() {
        // Capital letters and underscores: nothing to escape.
        Some(name) => {
            out.push(b'"');
            out.extend_from_slice(name.as_bytes());
            out.push(b'"');
        }
        None => {
            let _ = serde_json::to_writer(&mut *out, &*class.name());
        }
    }
    out.push(b':');
}

/// Resources as `{"VCPU": 4, …}`, the classes that are not zero.
fn write_amounts(out: &mut Vec<u8>, amounts: &crate::domain::Resources) {
    let mut number = itoa::Buffer::new();
    out.push(b'{');
    let open = out.len();
    for (class, v) in amounts.nonzero() {
        write_key(out, class);
        out.extend_from_slice(number.format(v).as_bytes());
        out.push(b',');
    }
    close_amounts(out, open);
}

/// A `select` plugin's answer.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SelectAnswer {
    decision: Decision,
    #[serde(default)]
    reason: Option<String>,
    #[serde(default)]
    request: Option<Map<String, Value>>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Decision {
    Approve,
    Modify,
    Deny,
}

/// What a plugin's answer came to, once checked.
#[derive(Debug, PartialEq)]
pub enum Verdict<T> {
    Approved,
    Modified(T),
    Denied(String),
}

/// Why an answer does not count: it is not the schema (`Malformed`), or it makes a change
/// the plugin may not make (`Refused`).
#[derive(Debug, PartialEq, thiserror::Error)]
pub enum AnswerError {
    #[error("answered a body that is not the plugin schema: {0}")]
    Malformed(String),
    #[error("answered a change it may not make: {0}")]
    Refused(String),
}

/// Checks a `select` answer against the request it was sent (`sent`): a modification may
/// only add to [`ADDITIVE_KEYS`]; a key it leaves out is unchanged. The modified request
/// is returned whole, for the next plugin of the chain.
pub fn read_select(
    sent: &SelectRequest,
    answer: Value,
) -> Result<Verdict<SelectRequest>, AnswerError> {
    let answer: SelectAnswer =
        serde_json::from_value(answer).map_err(|e| AnswerError::Malformed(e.to_string()))?;
    match answer.decision {
        Decision::Approve => Ok(Verdict::Approved),
        Decision::Deny => Ok(denial(answer.reason)),
        Decision::Modify => {
            let changed = answer.request.ok_or_else(|| {
                AnswerError::Malformed("decision \"modify\" without \"request\"".into())
            })?;
            let mut next = sent.clone();
            let mut grew = false;
            for (key, value) in changed {
                let Some(before) = sent.0.get(&key) else {
                    return Err(AnswerError::Refused(format!(
                        "\"{key}\" is not a key of the request"
                    )));
                };
                if *before == value {
                    continue;
                }
                if !ADDITIVE_KEYS.contains(&key.as_str()) {
                    return Err(AnswerError::Refused(format!(
                        "\"{key}\" may not be changed (only {} may be added to)",
                        ADDITIVE_KEYS.join(", ")
                    )));
                }
                check_addition(&key, before, &value)?;
                grew = true;
                next.0.insert(key, value);
            }
            Ok(if grew {
                Verdict::Modified(next)
            } else {
                Verdict::Approved
            })
        }
    }
}

/// A `deny` answer's verdict: its reason, or that it gave none.
fn denial<T>(reason: Option<String>) -> Verdict<T> {
    Verdict::Denied(
        reason
            .filter(|r| !r.trim().is_empty())
            .unwrap_or_else(|| "no reason given".into()),
    )
}

/// `after` keeps every item of `before` and each added item is well-formed for `key`.
fn check_addition(key: &str, before: &Value, after: &Value) -> Result<(), AnswerError> {
    let list = |v: &Value| v.as_array().cloned().unwrap_or_default();
    let (before, after) = (
        list(before),
        after
            .as_array()
            .cloned()
            .ok_or_else(|| AnswerError::Malformed(format!("\"{key}\" must be a list")))?,
    );
    if let Some(gone) = before.iter().find(|b| !after.contains(b)) {
        return Err(AnswerError::Refused(format!(
            "\"{key}\" lost {gone}: constraints may be added, not removed"
        )));
    }
    for item in after.iter().filter(|a| !before.contains(a)) {
        let ok = match key {
            "required_traits" | "forbidden_traits" => item.as_str().is_some_and(is_trait_name),
            "member_of" => item.as_array().is_some_and(|any| {
                !any.is_empty()
                    && any
                        .iter()
                        .all(|a| a.as_str().is_some_and(|s| uuid::Uuid::parse_str(s).is_ok()))
            }),
            _ => item.as_str().is_some_and(|h| !h.trim().is_empty()),
        };
        if !ok {
            let what = match key {
                "required_traits" | "forbidden_traits" => {
                    "a trait name (A-Z, 0-9 and _, as Placement's)"
                }
                "member_of" => "a non-empty list of aggregate uuids",
                _ => "a host name",
            };
            return Err(AnswerError::Malformed(format!(
                "\"{key}\" item {item} is not {what}"
            )));
        }
    }
    Ok(())
}

/// Placement's trait names: 1 to 255 of A-Z, 0-9 and `_`.
fn is_trait_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 255
        && name
            .bytes()
            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_')
}

/// The [`Additions`] between the request first sent and the one the chain ended with.
pub fn additions(first: &SelectRequest, last: &SelectRequest) -> Additions {
    let added = |key: &str| -> Vec<Value> {
        let before = first.0.get(key).and_then(Value::as_array);
        last.0
            .get(key)
            .and_then(Value::as_array)
            .map(|after| {
                after
                    .iter()
                    .filter(|a| !before.is_some_and(|b| b.contains(a)))
                    .cloned()
                    .collect()
            })
            .unwrap_or_default()
    };
    let strings = |items: Vec<Value>| -> Vec<String> {
        items
            .into_iter()
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect()
    };
    Additions {
        required_traits: strings(added("required_traits")),
        forbidden_traits: strings(added("forbidden_traits")),
        member_of: added("member_of")
            .into_iter()
            .map(|any| strings(any.as_array().cloned().unwrap_or_default()))
            .collect(),
        ignore_hosts: strings(added("ignore_hosts")),
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FilterAnswer {
    /// Candidate uuid → why it is removed (Kubernetes' `FailedNodes`).
    #[serde(default)]
    remove: BTreeMap<String, String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct WeighAnswer {
    /// Candidate uuid → weight; a candidate left out weighs 0.
    #[serde(default)]
    weights: BTreeMap<String, f64>,
}

/// The candidates a `filter` answer removes, with their reasons; a uuid that was not offered
/// is refused. Removing every candidate is `Denied`.
pub fn read_filter(
    offered: &[HostState],
    answer: Value,
) -> Result<Verdict<BTreeMap<String, String>>, AnswerError> {
    let answer: FilterAnswer =
        serde_json::from_value(answer).map_err(|e| AnswerError::Malformed(e.to_string()))?;
    if let Some(unknown) = answer
        .remove
        .keys()
        .find(|u| !offered.iter().any(|h| *h.profile.uuid == ***u))
    {
        return Err(AnswerError::Refused(format!(
            "removed host {unknown:?}, which it was not offered"
        )));
    }
    Ok(if answer.remove.is_empty() {
        Verdict::Approved
    } else if answer.remove.len() == offered.len() {
        let reasons: Vec<String> = answer.remove.values().cloned().collect();
        Verdict::Denied(reasons.join("; "))
    } else {
        Verdict::Modified(answer.remove)
    })
}

/// The weight a `weigh` answer gives each offered candidate (0 when left out); a uuid that
/// was not offered is refused.
pub fn read_weigh(offered: &[HostState], answer: Value) -> Result<Verdict<Vec<f64>>, AnswerError> {
    let answer: WeighAnswer =
        serde_json::from_value(answer).map_err(|e| AnswerError::Malformed(e.to_string()))?;
    if let Some(unknown) = answer
        .weights
        .keys()
        .find(|u| !offered.iter().any(|h| *h.profile.uuid == ***u))
    {
        return Err(AnswerError::Refused(format!(
            "weighed host {unknown:?}, which it was not offered"
        )));
    }
    if answer.weights.is_empty() {
        return Ok(Verdict::Approved);
    }
    Ok(Verdict::Modified(
        offered
            .iter()
            .map(|h| answer.weights.get(&*h.profile.uuid).copied().unwrap_or(0.0))
            .collect(),
    ))
}

/// A `move` plugin's answer: `modify` may change only the destination.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct MoveAnswer {
    decision: Decision,
    #[serde(default)]
    reason: Option<String>,
    #[serde(rename = "move", default)]
    changed: Option<MoveChange>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct MoveChange {
    destination: String,
}

/// Checks a `move` answer against the move sent (`sent`, its `destination` a service host)
/// and the hosts the plan may move to (`hosts`): a modification names another of them. The
/// new destination is returned; whether the instance fits there the planner decides.
pub fn read_move(
    sent: &Value,
    hosts: &[String],
    answer: Value,
) -> Result<Verdict<String>, AnswerError> {
    let answer: MoveAnswer =
        serde_json::from_value(answer).map_err(|e| AnswerError::Malformed(e.to_string()))?;
    match answer.decision {
        Decision::Approve => Ok(Verdict::Approved),
        Decision::Deny => Ok(denial(answer.reason)),
        Decision::Modify => {
            let change = answer.changed.ok_or_else(|| {
                AnswerError::Malformed("decision \"modify\" without \"move\"".into())
            })?;
            if sent.get("destination").and_then(Value::as_str) == Some(&change.destination) {
                return Ok(Verdict::Approved);
            }
            if !hosts.contains(&change.destination) {
                return Err(AnswerError::Refused(format!(
                    "destination {:?} is not a host the plan may move to",
                    change.destination
                )));
            }
            Ok(Verdict::Modified(change.destination))
        }
    }
}

#[cfg(test)]
mod tests;
