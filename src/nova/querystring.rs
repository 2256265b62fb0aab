//! `GET /allocation_candidates` query string of a [`ResourceRequest`], written exactly as
//! Nova's `ResourceRequest.to_querystring` writes it: `limit`, `group_policy`,
//! `root_required`, one `same_subtree` per list, then each group's `resources<S>`,
//! `required<S>` (`!` for forbidden), `member_of<S>` (`in:` and `!in:`) and `in_tree<S>`;
//! the pairs sorted, every name and value `quote_plus`ed.

use super::request_group::RequestGroup;
use super::resource_request::ResourceRequest;
use std::collections::BTreeSet;

impl ResourceRequest {
    /// The query string of `GET /allocation_candidates`, exactly as Nova's
    /// `ResourceRequest.to_querystring` writes it (parameters sorted, `quote_plus`).
    pub fn to_querystring(&self) -> String {
        let mut q: Vec<(String, String)> = Vec::new();
        if let Some(limit) = self.limit {
            q.push(("limit".into(), limit.to_string()));
        }
        if let Some(p) = &self.group_policy {
            q.push(("group_policy".into(), p.clone()));
        }
        if !self.root_required.is_empty() || !self.root_forbidden.is_empty() {
            q.push((
                "root_required".into(),
                traits(&self.root_required, &self.root_forbidden),
            ));
        }
        for suffixes in &self.same_subtree {
            let mut sorted = suffixes.clone();
            sorted.sort();
            q.push(("same_subtree".into(), sorted.join(",")));
        }
        let unnumbered = RequestGroup {
            resources: self.resources.clone(),
            required_traits: self.required_traits.clone(),
            forbidden_traits: self.forbidden_traits.clone(),
            aggregates: self.member_of.clone(),
            forbidden_aggregates: self.forbidden_aggregates.clone(),
            in_tree: self.in_tree.clone(),
            ..RequestGroup::default()
        };
        if !unnumbered.is_empty() || unnumbered.in_tree.is_some() {
            group_params(&unnumbered, &mut q);
        }
        for g in &self.groups {
            group_params(g, &mut q);
        }
        q.sort();
        let pairs: Vec<String> = q
            .iter()
            .map(|(k, v)| format!("{}={}", quote_plus(k), quote_plus(v)))
            .collect();
        pairs.join("&")
    }
}

/// Nova's `RequestGroup.to_queryparams`.
fn group_params(g: &RequestGroup, q: &mut Vec<(String, String)>) {
    let suffix = g.suffix();
    let resources: Vec<String> = g
        .resources
        .iter()
        .map(|(c, n)| format!("{c}:{n}"))
        .collect();
    q.push((format!("resources{suffix}"), resources.join(",")));
    let required = traits(&g.required_traits, &g.forbidden_traits);
    if !required.is_empty() {
        q.push((format!("required{suffix}"), required));
    }
    for any_of in &g.aggregates {
        let mut sorted = any_of.clone();
        sorted.sort();
        q.push((
            format!("member_of{suffix}"),
            format!("in:{}", sorted.join(",")),
        ));
    }
    if let Some(tree) = &g.in_tree {
        q.push((format!("in_tree{suffix}"), tree.clone()));
    }
    if !g.forbidden_aggregates.is_empty() {
        let aggs: Vec<&str> = g.forbidden_aggregates.iter().map(String::as_str).collect();
        q.push((
            format!("member_of{suffix}"),
            format!("!in:{}", aggs.join(",")),
        ));
    }
}

fn traits(required: &BTreeSet<String>, forbidden: &BTreeSet<String>) -> String {
    let names: Vec<String> = required
        .iter()
        .cloned()
        .chain(forbidden.iter().map(|t| format!("!{t}")))
        .collect();
    names.join(",")
}

/// Python's `urllib.parse.quote_plus`.
fn quote_plus(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'_' | b'.' | b'-' | b'~' => {
                out.push(b as char)
            }
            b' ' => out.push('+'),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nova::GroupOrigin;

    #[test]
    fn the_query_string_quotes_as_python_does() {
        assert_eq!(quote_plus("in:a b,!c~_.-é"), "in%3Aa+b%2C%21c~_.-%C3%A9");
    }

    #[test]
    fn an_empty_group_writes_no_resources_parameter() {
        let r = ResourceRequest {
            limit: Some(3),
            ..ResourceRequest::default()
        };
        assert_eq!(r.to_querystring(), "limit=3");
        let member = ResourceRequest {
            member_of: vec![vec!["b".into(), "a".into()]],
            ..ResourceRequest::default()
        };
        assert_eq!(member.to_querystring(), "member_of=in%3Aa%2Cb&resources=");
    }

    #[test]
    fn suffixed_groups_and_same_subtree_carry_their_suffix() {
        let port = RequestGroup {
            requester_id: Some("p-1".into()),
            origin: GroupOrigin::NeutronPort,
            resources: [("NET_BW_EGR_KILOBIT_PER_SEC".to_string(), 10)].into(),
            required_traits: ["CUSTOM_PHYSNET_A".to_string()].into(),
            forbidden_traits: ["CUSTOM_X".to_string()].into(),
            aggregates: vec![vec!["b".into(), "a".into()]],
            forbidden_aggregates: ["c".to_string()].into(),
            in_tree: Some("t".into()),
        };
        let r = ResourceRequest {
            resources: [("VCPU".to_string(), 1)].into(),
            groups: vec![port],
            same_subtree: vec![vec!["p-1".into(), "1".into()]],
            group_policy: Some("none".into()),
            ..ResourceRequest::default()
        };
        assert_eq!(
            r.to_querystring(),
            "group_policy=none&in_treep-1=t&member_ofp-1=%21in%3Ac&member_ofp-1=in%3Aa%2Cb&\
             requiredp-1=CUSTOM_PHYSNET_A%2C%21CUSTOM_X&resources=VCPU%3A1&\
             resourcesp-1=NET_BW_EGR_KILOBIT_PER_SEC%3A10&same_subtree=1%2Cp-1"
        );
    }
}
