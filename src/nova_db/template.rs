//! Templated cell mappings: since Queens a `cell_mappings.database_connection` may read
//! `{scheme}://{username}:{password}@{hostname}/nova_cell1?{query}`, filled in by each
//! reader from its own `[database] connection` (Nova's `CellMapping.format_db_url`, which
//! splits that URL with Python's `urllib.parse.urlparse` and fills the template with
//! `str.format`: an absent part reads `None`, `{{` is a brace).

/// `stored` with its placeholders filled from `base` (`[nova_db] database_url`).
pub(super) fn format_db_url(stored: &str, base: &str) -> Result<String, String> {
    if !stored.contains(['{', '}']) {
        return Ok(stored.to_string());
    }
    if base.is_empty() {
        return Err(
            "database_connection is a template, but [nova_db] database_url \
                    (Nova's [database] connection) is not set"
                .into(),
        );
    }
    let subs = Substitutions::of(base)?;
    let mut out = String::with_capacity(stored.len() + base.len());
    let mut rest = stored;
    while let Some(i) = rest.find(['{', '}']) {
        out.push_str(&rest[..i]);
        let tail = &rest[i..];
        if let Some(after) = tail.strip_prefix("{{").or_else(|| tail.strip_prefix("}}")) {
            out.push_str(&tail[..1]);
            rest = after;
            continue;
        }
        let close = tail
            .strip_prefix('{')
            .and_then(|t| t.find('}'))
            .ok_or("database_connection template has an unmatched brace")?;
        let key = &tail[1..close + 1];
        out.push_str(&subs.get(key).ok_or_else(|| {
            format!("database_connection template uses `{{{key}}}`, which Nova does not fill")
        })?);
        rest = &tail[close + 2..];
    }
    out.push_str(rest);
    Ok(out)
}

/// The parts of `[database] connection` a template may use, as `urlparse` names them.
struct Substitutions {
    pairs: Vec<(&'static str, Option<String>)>,
}

impl Substitutions {
    fn of(base: &str) -> Result<Substitutions, String> {
        let (scheme, rest) = base
            .split_once("://")
            .ok_or("[nova_db] database_url is not a URL")?;
        let (rest, fragment) = split_off(rest, '#');
        let (rest, query) = split_off(rest, '?');
        let (netloc, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, ""),
        };
        let (userinfo, hostport) = match netloc.rsplit_once('@') {
            Some((u, h)) => (Some(u), h),
            None => (None, netloc),
        };
        let (username, password) = match userinfo.map(|u| u.split_once(':')) {
            Some(Some((u, p))) => (Some(u), Some(p)),
            Some(None) => (userinfo, None),
            None => (None, None),
        };
        let (hostname, port) = if let Some(v6) = hostport.strip_prefix('[') {
            let (host, after) = v6
                .split_once(']')
                .ok_or("[nova_db] database_url: bad IPv6 host")?;
            (host, after.strip_prefix(':'))
        } else {
            match hostport.split_once(':') {
                Some((h, p)) => (h, Some(p)),
                None => (hostport, None),
            }
        };
        let port = match port.filter(|p| !p.is_empty()) {
            Some(p) => Some(
                p.parse::<u16>()
                    .map_err(|_| "[nova_db] database_url: bad port")?,
            ),
            None => None,
        };
        let owned = |s: Option<&str>| s.map(str::to_string);
        Ok(Substitutions {
            pairs: vec![
                ("scheme", Some(scheme.to_ascii_lowercase())),
                ("username", owned(username)),
                ("password", owned(password)),
                (
                    "hostname",
                    Some(hostname.to_ascii_lowercase()).filter(|h| !h.is_empty()),
                ),
                ("port", port.map(|p| p.to_string())),
                ("path", Some(path.trim_start_matches('/').to_string())),
                ("query", Some(query.unwrap_or_default().to_string())),
                ("fragment", Some(fragment.unwrap_or_default().to_string())),
            ],
        })
    }

    fn get(&self, key: &str) -> Option<String> {
        self.pairs
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| v.clone().unwrap_or_else(|| "None".into()))
    }
}

fn split_off(text: &str, at: char) -> (&str, Option<&str>) {
    match text.split_once(at) {
        Some((a, b)) => (a, Some(b)),
        None => (text, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = "mysql+pymysql://nova:s3cret@Controller:3306/nova?charset=utf8";

    #[test]
    fn templates_are_filled_as_nova_s_format_db_url_fills_them() {
        let cases = [
            (
                "{scheme}://{username}:{password}@{hostname}/nova_cell1?{query}",
                "mysql+pymysql://nova:s3cret@controller/nova_cell1?charset=utf8",
            ),
            (
                "{scheme}://{username}@{hostname}:{port}/{path}_cell2",
                "mysql+pymysql://nova@controller:3306/nova_cell2",
            ),
            ("mysql://plain@db/nova", "mysql://plain@db/nova"),
            ("{scheme}://h/{{x}}{fragment}", "mysql+pymysql://h/{x}"),
        ];
        for (template, expected) in cases {
            assert_eq!(
                format_db_url(template, BASE).as_deref(),
                Ok(expected),
                "{template}"
            );
        }
        let no_port = "postgresql://nova@[::1]/nova";
        assert_eq!(
            format_db_url("{scheme}://{hostname}:{port}/{password}", no_port).as_deref(),
            Ok("postgresql://::1:None/None")
        );
    }

    #[test]
    fn unusable_templates_are_refused_naming_why() {
        let cases = [
            ("{scheme}://{user}@h/n", BASE, "`{user}`"),
            ("{scheme}://h/n}", BASE, "unmatched brace"),
            ("{scheme}://h/{n", BASE, "unmatched brace"),
            ("{scheme}://h/n", "", "database_url"),
        ];
        for (template, base, expected) in cases {
            let error = format_db_url(template, base).expect_err(template);
            assert!(error.contains(expected), "{template}: {error}");
        }
    }
}
