//! Database URLs as nova.conf writes them (SQLAlchemy's form, e.g.
//! `mysql+pymysql://nova:secret@db/nova?charset=utf8`), parsed with SQLAlchemy's own grammar
//! (`sqlalchemy.engine.url._parse_url`) and translated to the sqlx URL that opens the same
//! database. Every `Display` and `Debug` of a URL hides its password.

use super::NovaDbError;
use std::fmt;

/// The database engines Nova runs on and sqlx can read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dialect {
    MySql,
    Postgres,
    Sqlite,
}

/// A database URL in SQLAlchemy's form, with its sqlx translation.
#[derive(Clone, PartialEq, Eq)]
pub struct DbUrl {
    original: String,
    /// Byte range of the password in `original`, for redaction.
    password_span: Option<(usize, usize)>,
    password: Option<String>,
    dialect: Dialect,
    sqlx: String,
}

/// The parts of a URL, as SQLAlchemy's regular expression splits them (raw, still quoted).
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Parts<'a> {
    pub scheme: &'a str,
    pub username: Option<&'a str>,
    pub password: Option<(usize, &'a str)>,
    pub host: Option<&'a str>,
    pub port: Option<&'a str>,
    pub database: Option<&'a str>,
    pub query: Option<&'a str>,
}

impl DbUrl {
    /// Parses and translates `url`; the error names the (redacted) URL and what is wrong.
    pub fn parse(url: &str) -> Result<DbUrl, NovaDbError> {
        let parts = split(url).map_err(|reason| bad(url, None, reason))?;
        let password_span = parts.password.map(|(at, p)| (at, at + p.len()));
        let bad = |reason: String| bad(url, password_span, reason);
        let password = parts.password.map(|(_, p)| unquote(p)).transpose();
        let password = password.map_err(bad)?;
        let driver = parts.scheme.split('+').next().unwrap_or_default();
        let dialect = match driver {
            "mysql" | "mariadb" => Dialect::MySql,
            "postgresql" | "postgres" => Dialect::Postgres,
            "sqlite" => Dialect::Sqlite,
            other => {
                return Err(bad(format!(
                    "unsupported database `{other}` (use mysql, postgresql or sqlite)"
                )))
            }
        };
        let sqlx = match dialect {
            Dialect::Sqlite => sqlite_url(&parts),
            _ => server_url(dialect, &parts),
        }
        .map_err(bad)?;
        Ok(DbUrl {
            original: url.to_string(),
            password_span,
            password,
            dialect,
            sqlx,
        })
    }

    pub fn dialect(&self) -> Dialect {
        self.dialect
    }

    /// The URL sqlx connects with (it holds the password: never log it).
    pub fn sqlx_url(&self) -> &str {
        &self.sqlx
    }

    /// The URL as given, its password replaced by `***`.
    pub fn redacted(&self) -> String {
        redact(&self.original, self.password_span)
    }

    /// `text` with every occurrence of this URL's password hidden (for driver messages).
    pub fn scrub(&self, text: &str) -> String {
        match &self.password {
            Some(p) if p.len() >= 4 => text.replace(p.as_str(), "***"),
            _ => text.to_string(),
        }
    }
}

impl fmt::Display for DbUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.redacted())
    }
}

impl fmt::Debug for DbUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "DbUrl({})", self.redacted())
    }
}

fn bad(url: &str, span: Option<(usize, usize)>, reason: String) -> NovaDbError {
    let span = span.or_else(|| {
        split(url)
            .ok()
            .and_then(|p| p.password.map(|(a, p)| (a, a + p.len())))
    });
    NovaDbError::Url {
        url: redact(url, span),
        reason,
    }
}

/// `url` with its password (at `span`, where the parser found it) hidden by
/// [`crate::redact::redact_span`]; a URL that does not parse is hidden whole after its
/// scheme, since its password cannot be located (SQLAlchemy's passwords may hold the `/` and
/// `?` that end a URL's authority for [`crate::redact::redact_url`]).
pub(super) fn redact(url: &str, span: Option<(usize, usize)>) -> String {
    match span {
        None if split(url).is_err() => match url.split_once("://") {
            Some((scheme, _)) => format!("{scheme}://***"),
            None => "***".into(),
        },
        span => crate::redact::redact_span(url, span),
    }
}

/// Splits `url` as SQLAlchemy's `_parse_url` does:
/// `name://[username[:password]@][host|[ipv6]][:port][/database][?query]`, where the
/// username stops at `:` or `/` and the password at the first `@`.
pub(super) fn split(url: &str) -> Result<Parts<'_>, String> {
    let (scheme, mut rest) = url
        .split_once("://")
        .ok_or_else(|| "is not a URL (expected `dialect+driver://…`)".to_string())?;
    let valid_scheme = |c: char| c.is_alphanumeric() || c == '_' || c == '+';
    if scheme.is_empty() || !scheme.chars().all(valid_scheme) {
        return Err(format!("`{scheme}` is not a database scheme"));
    }
    let mut parts = Parts {
        scheme,
        ..Parts::default()
    };
    let base = scheme.len() + 3;
    let user_end = rest.find([':', '/']).unwrap_or(rest.len());
    let with_password = rest[user_end..]
        .strip_prefix(':')
        .and_then(|after| after.find('@').map(|at| (user_end + 1, user_end + 1 + at)));
    if let Some((p0, p1)) = with_password {
        parts.username = Some(&rest[..user_end]);
        parts.password = Some((base + p0, &rest[p0..p1]));
        rest = &rest[p1 + 1..];
    } else if let Some(at) = rest[..user_end].rfind('@') {
        parts.username = Some(&rest[..at]);
        rest = &rest[at + 1..];
    }
    let host_end = if let Some(v6) = rest.strip_prefix('[') {
        let close = v6.find(']').ok_or("an IPv6 host lacks its `]`")?;
        close + 2
    } else {
        rest.find([':', '/', '?']).unwrap_or(rest.len())
    };
    parts.host = Some(&rest[..host_end]).filter(|h| !h.is_empty());
    rest = &rest[host_end..];
    if let Some(after) = rest.strip_prefix(':') {
        let end = after.find(['/', '?']).unwrap_or(after.len());
        parts.port = Some(&after[..end]);
        rest = &after[end..];
    }
    if let Some(after) = rest.strip_prefix('/') {
        let end = after.find('?').unwrap_or(after.len());
        parts.database = Some(&after[..end]);
        rest = &after[end..];
    }
    if let Some(after) = rest.strip_prefix('?') {
        parts.query = Some(after);
        rest = "";
    }
    if !rest.is_empty() {
        return Err(format!("unexpected `{rest}`"));
    }
    Ok(parts)
}

/// `mysql://` or `postgres://` with the query translated from the Python driver's keys.
fn server_url(dialect: Dialect, p: &Parts<'_>) -> Result<String, String> {
    let mut url = String::from(match dialect {
        Dialect::MySql => "mysql://",
        _ => "postgres://",
    });
    if let Some(user) = p.username {
        url.push_str(&quote(&unquote(user)?));
        if let Some((_, password)) = p.password {
            url.push(':');
            url.push_str(&quote(&unquote(password)?));
        }
        url.push('@');
    }
    url.push_str(p.host.unwrap_or_default());
    if let Some(port) = p.port.filter(|port| !port.is_empty()) {
        port.parse::<u16>()
            .map_err(|_| format!("port `{port}` is not a number"))?;
        url.push(':');
        url.push_str(port);
    }
    url.push('/');
    url.push_str(&quote(p.database.unwrap_or_default()));
    let query = translate_query(dialect, p.query.unwrap_or_default())?;
    if !query.is_empty() {
        url.push('?');
        url.push_str(&query.join("&"));
    }
    Ok(url)
}

/// `sqlite:////abs/path` (SQLAlchemy: four slashes for an absolute path, three for a relative
/// one) → `sqlite:///abs/path?mode=ro`; an in-memory database is refused.
fn sqlite_url(p: &Parts<'_>) -> Result<String, String> {
    if p.host.is_some() || p.username.is_some() || p.port.is_some() {
        return Err("a sqlite URL has no host: write sqlite:////absolute/path.db".into());
    }
    let path = p.database.unwrap_or_default();
    if path.is_empty() || path == ":memory:" {
        return Err("an in-memory sqlite database belongs to the process that made it".into());
    }
    translate_query(Dialect::Sqlite, p.query.unwrap_or_default())?;
    // sqlx percent-decodes the path, SQLAlchemy takes it as written.
    let path = path.replace('%', "%25").replace('#', "%23");
    Ok(format!("sqlite://{path}?mode=ro"))
}

/// The query of a SQLAlchemy URL as sqlx keys. Keys that only tune the Python side are
/// dropped; a key Parasol cannot honour is an error naming it.
fn translate_query(dialect: Dialect, query: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    for pair in query.split('&').filter(|pair| !pair.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        let renamed = match (dialect, key) {
            (_, "plugin") => None, // SQLAlchemy engine plugins (DevStack's `dbcounter`)
            (Dialect::MySql, "charset") => Some("charset"),
            (Dialect::MySql, "unix_socket") => Some("socket"),
            (Dialect::MySql, "ssl_ca") => Some("ssl-ca"),
            (Dialect::MySql, "ssl_cert") => Some("ssl-cert"),
            (Dialect::MySql, "ssl_key") => Some("ssl-key"),
            (Dialect::Postgres, "client_encoding") if value.eq_ignore_ascii_case("utf8") => None,
            (Dialect::Postgres, "connect_timeout") => None, // `[nova_db] timeout_s` applies
            (
                Dialect::Postgres,
                k @ ("sslmode" | "sslrootcert" | "sslcert" | "sslkey" | "host" | "port"
                | "application_name" | "options"),
            ) => Some(k),
            (Dialect::Sqlite, "timeout" | "check_same_thread") => None,
            _ => return Err(format!("query parameter `{key}` is not supported")),
        };
        if let Some(k) = renamed {
            out.push(format!("{k}={value}"));
        }
    }
    Ok(out)
}

/// Python's `urllib.parse.unquote` for the user and password (what SQLAlchemy applies).
fn unquote(text: &str) -> Result<String, String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = (bytes[i] == b'%')
            .then(|| text.get(i + 1..i + 3))
            .flatten()
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match hex {
            Some(b) => {
                out.push(b);
                i += 3;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8(out).map_err(|_| "the user or password is not UTF-8 once unquoted".into())
}

/// Percent-encodes all but RFC 3986's unreserved characters, for sqlx's URL parser.
fn quote(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests;
