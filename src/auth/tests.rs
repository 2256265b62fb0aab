//! [`Auth::check`] for the `none` and `token` strategies and the bind check (the `keystone`
//! strategy is tested against the real Keystone in `tests/keystone.rs`).

use super::*;
use crate::clock::ManualClock;

const SECRET: &str = "0123456789abcdef-secret";

/// A request (method, path, token) and the status of its denial, if denied.
type Case<'a> = (&'a Method, &'a str, Option<&'a [u8]>, Option<StatusCode>);

fn auth(settings: AuthSettings, bound: &str) -> Result<Auth, AuthError> {
    let bound: SocketAddr = bound.parse().expect("test address");
    Auth::new(&settings, Some(bound), Arc::new(ManualClock::default()))
}

fn token_settings() -> AuthSettings {
    AuthSettings {
        strategy: Strategy::Token,
        token: SECRET.into(),
        ..Default::default()
    }
}

#[tokio::test]
async fn the_token_strategy_lets_through_only_the_configured_secret() {
    let auth = auth(token_settings(), "0.0.0.0:8790").expect("token on any address");
    let cases: [Case; 9] = [
        (
            &Method::POST,
            "/v1/select_destinations",
            None,
            Some(StatusCode::UNAUTHORIZED),
        ),
        (
            &Method::POST,
            "/v1/select_destinations",
            Some(b"wrong"),
            Some(StatusCode::UNAUTHORIZED),
        ),
        (
            &Method::POST,
            "/v1/notifications",
            Some(b"0123456789abcdef-secreT"),
            Some(StatusCode::UNAUTHORIZED),
        ),
        (
            &Method::GET,
            "/v1/hosts",
            Some(b""),
            Some(StatusCode::UNAUTHORIZED),
        ),
        (
            &Method::GET,
            "/v1/stats",
            Some(b"\xff\xfe"),
            Some(StatusCode::UNAUTHORIZED),
        ),
        (
            &Method::POST,
            "/v1/select_destinations",
            Some(SECRET.as_bytes()),
            None,
        ),
        (&Method::GET, "/v1/hosts", Some(SECRET.as_bytes()), None),
        (&Method::GET, "/healthz", None, None),
        (&Method::GET, "/metrics", Some(b"wrong"), None),
    ];
    for (method, path, token, denied) in cases {
        let outcome = auth.check(method, path, token).await;
        assert_eq!(
            outcome.err().map(|d| d.status),
            denied,
            "{method} {path} {token:?}"
        );
    }
}

#[tokio::test]
async fn an_oversized_token_is_refused_without_comparing() {
    let auth = auth(token_settings(), "127.0.0.1:0").expect("token");
    let huge = vec![b'a'; MAX_TOKEN_BYTES + 1];
    let denial = auth
        .check(&Method::GET, "/v1/hosts", Some(&huge))
        .await
        .expect_err("refused");
    assert_eq!(denial.status, StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn no_strategy_lets_everything_through_on_loopback() {
    let auth = auth(AuthSettings::default(), "127.0.0.1:8790").expect("loopback");
    for path in ["/v1/select_destinations", "/v1/hosts", "/unknown"] {
        assert!(
            auth.check(&Method::POST, path, None).await.is_ok(),
            "{path}"
        );
    }
}

#[test]
fn no_strategy_on_a_public_address_is_refused_unless_allowed() {
    for bound in ["0.0.0.0:8790", "[::]:8790", "10.0.0.5:8790"] {
        let err = auth(AuthSettings::default(), bound).expect_err(bound);
        assert!(matches!(err, AuthError::Insecure(_)), "{bound}: {err}");
        assert!(err.to_string().contains("allow_insecure"), "{err}");
    }
    let allowed = AuthSettings {
        allow_insecure: true,
        ..Default::default()
    };
    assert!(auth(allowed, "0.0.0.0:8790").is_ok());
    assert!(Auth::new(
        &AuthSettings::default(),
        None,
        Arc::new(ManualClock::default())
    )
    .is_err());
}

#[test]
fn secrets_are_compared_whole() {
    let cases = [
        ("abc", "abc", true),
        ("abc", "abd", false),
        ("abc", "abcd", false),
        ("", "", true),
    ];
    for (a, b, equal) in cases {
        assert_eq!(
            constant_time_eq(a.as_bytes(), b.as_bytes()),
            equal,
            "{a} {b}"
        );
    }
}
