//! What Nova's hint-driven filters read from a request's `scheduler_hints`, resolved once per
//! call (`DifferentHostFilter`, `SameHostFilter`, `SimpleCIDRAffinityFilter`, `JsonFilter`).
//!
//! Nova reads a hint with `RequestSpec.get_scheduler_hint`: a one-element list becomes its
//! element, any other list stays a list, a missing hint is the default. [`hint`] does the same
//! over the hints as Parasol decodes them (lists of strings).

use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

/// One hint as Nova's `get_scheduler_hint` returns it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Hint<'a> {
    /// Not given.
    Missing,
    /// A one-element list, unwrapped.
    One(&'a str),
    /// Any other list (empty or several values).
    Many(&'a [String]),
}

impl Hint<'_> {
    /// Python's truthiness of the value (`if hint:`).
    pub fn is_truthy(&self) -> bool {
        match self {
            Hint::Missing => false,
            Hint::One(s) => !s.is_empty(),
            Hint::Many(v) => !v.is_empty(),
        }
    }
}

/// `name` from `hints`, as Nova's `get_scheduler_hint` reads it.
pub fn hint<'a>(hints: &'a BTreeMap<String, Vec<String>>, name: &str) -> Hint<'a> {
    match hints.get(name) {
        None => Hint::Missing,
        Some(v) if v.len() == 1 => Hint::One(&v[0]),
        Some(v) => Hint::Many(v),
    }
}

/// The instance uuids a `different_host` / `same_host` hint names; `None` when the hint is
/// absent or empty (the filter then passes every host, as Nova's `if affinity_uuids:`).
pub fn instance_uuids(h: &Hint<'_>) -> Option<Vec<String>> {
    if !h.is_truthy() {
        return None;
    }
    match h {
        Hint::One(s) => Some(vec![s.to_string()]),
        Hint::Many(v) => Some(v.to_vec()),
        Hint::Missing => None,
    }
}

/// An IP network, as `netaddr.IPNetwork` reads `"<address><cidr>"`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct IpNetwork {
    pub addr: IpAddr,
    pub prefix: u8,
}

impl IpNetwork {
    /// Parses `address/prefix` (no prefix: the whole address, /32 or /128).
    pub fn parse(text: &str) -> Result<IpNetwork, String> {
        let (addr, prefix) = match text.split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (text, None),
        };
        let addr: IpAddr = addr
            .parse()
            .map_err(|_| format!("`{text}` is not an IP network"))?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            None => max,
            Some(p) => p
                .parse::<u8>()
                .ok()
                .filter(|p| *p <= max)
                .ok_or_else(|| format!("`{text}` has an invalid prefix length"))?,
        };
        Ok(IpNetwork { addr, prefix })
    }

    /// True when `ip` is in the network (an address of the other IP version never is).
    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.addr, ip) {
            (IpAddr::V4(n), IpAddr::V4(a)) => {
                let mask = u32::MAX
                    .checked_shl(32 - u32::from(self.prefix))
                    .unwrap_or(0);
                u32::from(n) & mask == u32::from(a) & mask
            }
            (IpAddr::V6(n), IpAddr::V6(a)) => {
                let mask = u128::MAX
                    .checked_shl(128 - u32::from(self.prefix))
                    .unwrap_or(0);
                u128::from(n) & mask == u128::from(a) & mask
            }
            _ => false,
        }
    }
}

/// The hints of one call that Nova's hint filters read, resolved against the ledger.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct SchedulerHints {
    /// `different_host`: the service hosts running one of the named instances; `None`: no
    /// such hint.
    pub different_host: Option<BTreeSet<String>>,
    /// `same_host`: as above.
    pub same_host: Option<BTreeSet<String>>,
    /// `build_near_host_ip` with `cidr` (default `/24`): the network a host's IP must be in,
    /// or why the two do not make one (Nova raises then: no host passes).
    pub near: Option<Result<IpNetwork, String>>,
    /// `query`: the parsed JSON, or why it does not parse (no host passes).
    pub query: Option<Result<serde_json::Value, String>>,
}

impl SchedulerHints {
    /// The hints' network and query from a spec's `scheduler_hints`; the instance-naming
    /// hints' uuids are returned for the caller to resolve to hosts (`None` when no hint
    /// filter has anything to read).
    pub fn read(hints: &BTreeMap<String, Vec<String>>) -> (Option<Self>, Vec<String>, Vec<String>) {
        let different = instance_uuids(&hint(hints, "different_host"));
        let same = instance_uuids(&hint(hints, "same_host"));
        let near_ip = hint(hints, "build_near_host_ip");
        let near = near_ip.is_truthy().then(|| {
            let cidr = match hint(hints, "cidr") {
                Hint::Missing => "/24".to_string(),
                Hint::One(c) => c.to_string(),
                Hint::Many(_) => return Err("the cidr hint is not one string".to_string()),
            };
            match near_ip {
                Hint::One(ip) => IpNetwork::parse(&format!("{ip}{cidr}")),
                _ => Err("the build_near_host_ip hint is not one string".to_string()),
            }
        });
        let query_hint = hint(hints, "query");
        let query = query_hint.is_truthy().then(|| match query_hint {
            Hint::One(q) => serde_json::from_str(q).map_err(|e| format!("query hint: {e}")),
            _ => Err("the query hint is not one string".to_string()),
        });
        if different.is_none() && same.is_none() && near.is_none() && query.is_none() {
            return (None, Vec::new(), Vec::new());
        }
        let out = SchedulerHints {
            different_host: different.as_ref().map(|_| BTreeSet::new()),
            same_host: same.as_ref().map(|_| BTreeSet::new()),
            near,
            query,
        };
        (
            Some(out),
            different.unwrap_or_default(),
            same.unwrap_or_default(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hints(pairs: &[(&str, &[&str])]) -> BTreeMap<String, Vec<String>> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.iter().map(|s| s.to_string()).collect()))
            .collect()
    }

    #[test]
    fn hints_unwrap_one_element_lists_as_nova_does() {
        let h = hints(&[("a", &["x"]), ("b", &["x", "y"]), ("c", &[]), ("d", &[""])]);
        assert_eq!(hint(&h, "a"), Hint::One("x"));
        assert!(matches!(hint(&h, "b"), Hint::Many(v) if v.len() == 2));
        assert!(!hint(&h, "c").is_truthy());
        assert!(!hint(&h, "d").is_truthy());
        assert_eq!(hint(&h, "e"), Hint::Missing);
        assert_eq!(instance_uuids(&hint(&h, "a")), Some(vec!["x".to_string()]));
        assert_eq!(instance_uuids(&hint(&h, "d")), None);
    }

    #[test]
    fn networks_contain_their_addresses() {
        type Case<'a> = (&'a str, &'a str, Option<bool>);
        let cases: [Case; 9] = [
            ("10.8.1.100/24", "10.8.1.1", Some(true)),
            ("10.8.1.100/32", "10.8.1.1", Some(false)),
            ("10.8.1.100", "10.8.1.100", Some(true)),
            ("10.8.1.100/0", "192.168.0.1", Some(true)),
            ("10.8.1.100/16", "10.8.200.7", Some(true)),
            ("fd00::1/64", "fd00::ffff", Some(true)),
            ("fd00::1/64", "10.8.1.1", Some(false)),
            ("10.8.1.100/33", "10.8.1.1", None),
            ("10.8.1.10024", "10.8.1.1", None),
        ];
        for (net, ip, want) in cases {
            let got = IpNetwork::parse(net)
                .ok()
                .map(|n| n.contains(ip.parse().unwrap()));
            assert_eq!(got, want, "{net} ∋ {ip}");
        }
    }

    #[test]
    fn reads_only_the_hints_a_filter_reads() {
        assert_eq!(SchedulerHints::read(&hints(&[("group", &["g"])])).0, None);
        let (h, diff, same) = SchedulerHints::read(&hints(&[
            ("different_host", &["u1", "u2"]),
            ("build_near_host_ip", &["10.0.0.1"]),
            ("query", &["[\"=\", \"$host\", \"h1\"]"]),
        ]));
        let h = h.unwrap();
        assert_eq!(diff, ["u1", "u2"]);
        assert!(same.is_empty() && h.same_host.is_none());
        assert_eq!(h.near, Some(IpNetwork::parse("10.0.0.1/24")));
        assert!(matches!(h.query, Some(Ok(serde_json::Value::Array(_)))));
        let (h, _, _) = SchedulerHints::read(&hints(&[("query", &["[1"])]));
        assert!(matches!(h.unwrap().query, Some(Err(_))));
    }
}
