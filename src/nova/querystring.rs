//! `GET /allocation_candidates` query string of a [`ResourceRequest`], written exactly as
//! Nova's `ResourceRequest.to_querystring` writes it.

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
        let group_exists = !self.resources.is_empty()
            || !self.required_traits.is_empty()
            || !self.forbidden_traits.is_empty()
            || !self.member_of.is_empty()
            || !self.forbidden_aggregates.is_empty()
            || self.in_tree.is_some();
        if group_exists {
            let resources: Vec<String> = self
                .resources
                .iter()
                .map(|(c, n)| format!("{c}:{n}"))
                .collect();
            q.push(("resources".into(), resources.join(",")));
            let required = traits(&self.required_traits, &self.forbidden_traits);
            if !required.is_empty() {
                q.push(("required".into(), required));
            }
            for any_of in &self.member_of {
                let mut sorted = any_of.clone();
                sorted.sort();
                q.push(("member_of".into(), format!("in:{}", sorted.join(","))));
            }
            if let Some(tree) = &self.in_tree {
                q.push(("in_tree".into(), tree.clone()));
            }
            if !self.forbidden_aggregates.is_empty() {
                let aggs: Vec<&str> = self
                    .forbidden_aggregates
                    .iter()
                    .map(String::as_str)
                    .collect();
                q.push(("member_of".into(), format!("!in:{}", aggs.join(","))));
            }
        }
        q.sort();
        let pairs: Vec<String> = q
            .iter()
            .map(|(k, v)| format!("{}={}", quote_plus(k), quote_plus(v)))
            .collect();
        pairs.join("&")
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
}
