//! Secrets out of what Parasol prints: the password of any `scheme://user:password@host` URL
//! (ledger, broker, Placement, Keystone) and a `password=` query parameter, in a URL alone or
//! anywhere in an error message.

/// `url` with its user information and any `password=` parameter replaced by `***`.
pub fn redact_url(url: &str) -> String {
    redact_urls(url)
}

/// `url` with the bytes of `span` (its password, where a parser that knows the URL's grammar
/// found it) replaced by `***`; unchanged without a span.
pub fn redact_span(url: &str, span: Option<(usize, usize)>) -> String {
    match span {
        Some((a, b)) if a <= b && url.get(a..b).is_some() => {
            format!("{}***{}", &url[..a], &url[b..])
        }
        // A span not on character boundaries: hide everything after the scheme.
        Some(_) => match url.split_once("://") {
            Some((scheme, _)) => format!("{scheme}://***"),
            None => "***".into(),
        },
        None => url.to_string(),
    }
}

/// The innermost cause of `e` (a refused certificate, a refused connection), which an HTTP
/// client's own message ("error sending request for url …") leaves out; `None` without one.
pub fn innermost_cause(e: &dyn std::error::Error) -> Option<String> {
    let mut source = e.source();
    let mut detail = None;
    while let Some(s) = source {
        detail = Some(s.to_string());
        source = s.source();
    }
    detail
}

/// `e`'s message, URLs redacted, followed by its innermost cause.
pub fn with_cause(e: &dyn std::error::Error) -> String {
    let message = redact_urls(&e.to_string());
    match innermost_cause(e) {
        Some(cause) if !message.contains(&cause) => format!("{message}: {}", redact_urls(&cause)),
        _ => message,
    }
}

/// `text` with every URL in it redacted as [`redact_url`] does.
pub fn redact_urls(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("://") {
        let (before, after) = rest.split_at(at + 3);
        out.push_str(before);
        // The URL's authority runs to the first '/', '?', '#' or white space; its user
        // information to the last '@' in it (a password may hold an unencoded '@').
        let end = after
            .find(|c: char| c.is_whitespace() || matches!(c, '/' | '?' | '#' | '"' | '\'' | ')'))
            .unwrap_or(after.len());
        let authority = &after[..end];
        match authority.rfind('@') {
            Some(i) => {
                out.push_str("***@");
                out.push_str(&authority[i + 1..]);
            }
            None => out.push_str(authority),
        }
        rest = &after[end..];
        let url_end = rest
            .find(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | ')'))
            .unwrap_or(rest.len());
        out.push_str(&redact_query(&rest[..url_end]));
        rest = &rest[url_end..];
    }
    out.push_str(rest);
    out
}

/// A path and query with the value of every `password=` parameter replaced by `***`.
fn redact_query(path_and_query: &str) -> String {
    let Some((path, query)) = path_and_query.split_once('?') else {
        return path_and_query.to_string();
    };
    let params: Vec<String> = query
        .split('&')
        .map(|param| match param.split_once('=') {
            Some((name, _)) if name.eq_ignore_ascii_case("password") => format!("{name}=***"),
            _ => param.to_string(),
        })
        .collect();
    format!("{path}?{}", params.join("&"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_in_urls_are_replaced() {
        let cases = [
            ("mysql://nova:s3cret@db/nova", "mysql://***@db/nova"),
            ("postgres://u:p@ss@h:5432/d", "postgres://***@h:5432/d"),
            (
                "amqp://guest:guest@127.0.0.1:5672/%2f",
                "amqp://***@127.0.0.1:5672/%2f",
            ),
            (
                "postgres://h/d?user=u&password=pw&sslmode=off",
                "postgres://h/d?user=u&password=***&sslmode=off",
            ),
            ("sqlite://data/parasol.db", "sqlite://data/parasol.db"),
            ("http://placement/", "http://placement/"),
            ("", ""),
        ];
        for (url, redacted) in cases {
            assert_eq!(redact_url(url), redacted, "{url}");
        }
    }

    #[test]
    fn urls_inside_messages_are_redacted_and_the_rest_kept() {
        let text = "error sending request for url (http://admin:pw@10.0.0.1/placement/x): \
                    refused; also \"amqp://a:b@r/\" and user@example";
        assert_eq!(
            redact_urls(text),
            "error sending request for url (http://***@10.0.0.1/placement/x): refused; \
             also \"amqp://***@r/\" and user@example"
        );
    }
}
