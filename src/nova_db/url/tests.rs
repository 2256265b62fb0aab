//! The URL forms nova.conf and `nova-manage cell_v2` write, and what each becomes.

use super::*;
use sqlx::mysql::MySqlConnectOptions;
use sqlx::postgres::PgConnectOptions;
use std::str::FromStr;

#[test]
fn sqlalchemy_urls_become_the_sqlx_urls_of_the_same_database() {
    let cases = [
        (
            "mysql+pymysql://nova:secret@controller/nova?charset=utf8",
            "mysql://nova:secret@controller/nova?charset=utf8",
        ),
        (
            "mysql+pymysql://root:pw@127.0.0.1/nova_cell1?charset=utf8&plugin=dbcounter",
            "mysql://root:pw@127.0.0.1/nova_cell1?charset=utf8",
        ),
        ("mysql://nova@db:3307/nova", "mysql://nova@db:3307/nova"),
        (
            "mariadb+pymysql://nova:x@db/nova?unix_socket=/run/mysqld/mysqld.sock",
            "mysql://nova:x@db/nova?socket=/run/mysqld/mysqld.sock",
        ),
        (
            "postgresql+psycopg2://nova:secret@pg:5433/nova?client_encoding=utf8",
            "postgres://nova:secret@pg:5433/nova",
        ),
        (
            "postgresql://nova@/nova?host=/var/run/postgresql",
            "postgres://nova@/nova?host=/var/run/postgresql",
        ),
        (
            "sqlite:////var/lib/nova/nova.sqlite",
            "sqlite:///var/lib/nova/nova.sqlite?mode=ro",
        ),
        ("sqlite:///nova.sqlite", "sqlite://nova.sqlite?mode=ro"),
        (
            "sqlite:////tmp/50%/n#1.db",
            "sqlite:///tmp/50%25/n%231.db?mode=ro",
        ),
        ("mysql://nova@db/nova#2", "mysql://nova@db/nova%232"),
        (
            "mysql+pymysql://nova:p%40ss%2Fw:rd@[::1]:3306/nova",
            "mysql://nova:p%40ss%2Fw%3Ard@[::1]:3306/nova",
        ),
    ];
    for (sqlalchemy, sqlx) in cases {
        let url = DbUrl::parse(sqlalchemy).unwrap_or_else(|e| panic!("{sqlalchemy}: {e}"));
        assert_eq!(url.sqlx_url(), sqlx, "{sqlalchemy}");
    }
}

#[test]
fn users_and_passwords_reach_sqlx_as_sqlalchemy_unquotes_them() {
    let url = DbUrl::parse("mysql+pymysql://no%20va:p%40ss/w?rd#@db/nova").expect("parses");
    let opts = MySqlConnectOptions::from_str(url.sqlx_url()).expect("sqlx parses");
    assert_eq!(opts.get_username(), "no va");
    assert_eq!(opts.get_host(), "db");
    assert_eq!(opts.get_database(), Some("nova"));
    let url = DbUrl::parse("postgresql+psycopg2://nova:a%3Ab%25c@pg/nova_cell1").expect("parses");
    let opts = PgConnectOptions::from_str(url.sqlx_url()).expect("sqlx parses");
    assert_eq!(opts.get_username(), "nova");
    assert_eq!(opts.get_database(), Some("nova_cell1"));
    assert_eq!(url.scrub("password a:b%c refused"), "password *** refused");
}

#[test]
fn urls_split_as_sqlalchemy_splits_them() {
    let p = split("mysql+pymysql://user@x:pass@host/db").expect("splits");
    assert_eq!(p.username, Some("user@x"));
    assert_eq!(p.password.map(|(_, p)| p), Some("pass"));
    assert_eq!(p.host, Some("host"));
    let p = split("mysql://a@b@host:1/db?x=1").expect("splits");
    assert_eq!((p.username, p.password), (Some("a@b"), None));
    assert_eq!(
        (p.host, p.port, p.query),
        (Some("host"), Some("1"), Some("x=1"))
    );
    let p = split("mysql://host:3306/db").expect("splits");
    assert_eq!(
        (p.username, p.host, p.port),
        (None, Some("host"), Some("3306"))
    );
}

#[test]
fn passwords_never_show_in_display_debug_or_errors() {
    let url = DbUrl::parse("mysql+pymysql://nova:s3cr3t@db/nova?charset=utf8").expect("parses");
    assert_eq!(
        url.to_string(),
        "mysql+pymysql://nova:***@db/nova?charset=utf8"
    );
    assert!(!format!("{url:?}").contains("s3cr3t"));
    let bad_inputs = [
        "mysql+pymysql://nova:s3cr3t@db/nova?read_default_file=/etc/my.cnf",
        "oracle://nova:s3cr3t@db/nova",
        "mysql://nova:s3cr3t@db:port/nova",
        "s3cr3t",
        "mysql://nova:s3cr3t@[::1/nova",
    ];
    for input in bad_inputs {
        let error = DbUrl::parse(input).expect_err(input).to_string();
        assert!(!error.contains("s3cr3t"), "{input}: {error}");
    }
}

#[test]
fn unusable_urls_are_refused_naming_what_is_wrong() {
    let cases = [
        (
            "mysql+pymysql://nova:pw@db/nova?read_default_file=/etc/my.cnf",
            "`read_default_file`",
        ),
        (
            "oracle+cx_oracle://nova:pw@db/nova",
            "unsupported database `oracle`",
        ),
        ("mysql://nova@db:33o6/nova", "port `33o6`"),
        ("sqlite://", "in-memory"),
        ("sqlite:///:memory:", "in-memory"),
        ("sqlite://host/nova.db", "no host"),
        ("nova.sqlite", "is not a URL"),
        (
            "postgresql://nova@pg/nova?client_encoding=latin1",
            "`client_encoding`",
        ),
    ];
    for (input, expected) in cases {
        let error = DbUrl::parse(input).expect_err(input).to_string();
        assert!(error.contains(expected), "{input}: {error}");
    }
}

#[test]
fn dialects_come_from_the_scheme_before_the_driver() {
    let cases = [
        ("mysql+pymysql://h/d", Dialect::MySql),
        ("mysql+mysqldb://h/d", Dialect::MySql),
        ("postgresql+psycopg://h/d", Dialect::Postgres),
        ("sqlite:////d.db", Dialect::Sqlite),
    ];
    for (input, dialect) in cases {
        assert_eq!(
            DbUrl::parse(input).expect(input).dialect(),
            dialect,
            "{input}"
        );
    }
}
