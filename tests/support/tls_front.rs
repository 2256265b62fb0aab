//! A TLS front for the plugin tests: a throw-away CA (rcgen) signs a certificate for
//! 127.0.0.1 and `localhost`; a rustls listener on a loopback port terminates TLS with it and
//! passes the bytes to a plain-HTTP server behind (the plugin server). The handshake is real:
//! a client that does not trust the CA fails it; with [`TlsFront::start_mutual`], so does a
//! client without a certificate the same CA signed (mutual TLS). Stopped when dropped.
#![allow(dead_code)]

use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair, SanType};
use std::sync::Arc;
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio_rustls::rustls::server::WebPkiClientVerifier;
use tokio_rustls::rustls::{RootCertStore, ServerConfig};
use tokio_rustls::TlsAcceptor;

pub struct TlsFront {
    /// `https://127.0.0.1:<port>`.
    pub base: String,
    /// The CA's certificate, PEM: what a client must trust.
    pub ca_pem: String,
    /// A client certificate the CA signed and its key, PEM (what a mutual-TLS client presents).
    pub client_cert_pem: String,
    pub client_key_pem: String,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for TlsFront {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A CA, a server certificate it signed for 127.0.0.1 and `localhost`, and a client
/// certificate it signed.
pub struct Certificates {
    pub ca_pem: String,
    pub ca_der: CertificateDer<'static>,
    pub server: CertificateDer<'static>,
    pub server_key: PrivateKeyDer<'static>,
    /// The server's certificate and key, PEM (for a server configured by files).
    pub server_pem: String,
    pub server_key_pem: String,
    pub client_pem: String,
    pub client_key_pem: String,
}

/// A throw-away CA and the certificates it signed (see [`Certificates`]).
pub fn certificates() -> Certificates {
    let ca_key = KeyPair::generate().expect("a CA key");
    let mut ca = CertificateParams::new(Vec::<String>::new()).expect("CA parameters");
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(rcgen::DnType::CommonName, "parasol test plugin CA");
    let ca_cert = ca.self_signed(&ca_key).expect("the CA certificate");
    let key = KeyPair::generate().expect("a server key");
    let mut server = CertificateParams::new(vec!["localhost".to_string()]).expect("parameters");
    server
        .subject_alt_names
        .push(SanType::IpAddress(std::net::Ipv4Addr::LOCALHOST.into()));
    let cert = server
        .signed_by(&key, &ca_cert, &ca_key)
        .expect("the server certificate");
    let client_key = KeyPair::generate().expect("a client key");
    let mut client = CertificateParams::new(vec!["parasol".to_string()]).expect("parameters");
    client.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
    let client_cert = client
        .signed_by(&client_key, &ca_cert, &ca_key)
        .expect("the client certificate");
    Certificates {
        ca_pem: ca_cert.pem(),
        ca_der: ca_cert.der().clone(),
        server: cert.der().clone(),
        server_key: PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
        server_pem: cert.pem(),
        server_key_pem: key.serialize_pem(),
        client_pem: client_cert.pem(),
        client_key_pem: client_key.serialize_pem(),
    }
}

impl TlsFront {
    /// Terminates TLS on a loopback port and forwards each connection to `backend`
    /// (`host:port`, plain HTTP).
    pub async fn start(backend: String) -> TlsFront {
        TlsFront::serve(backend, false).await
    }

    /// As [`TlsFront::start`], and a client must present a certificate the CA signed.
    pub async fn start_mutual(backend: String) -> TlsFront {
        TlsFront::serve(backend, true).await
    }

    async fn serve(backend: String, mutual: bool) -> TlsFront {
        let c = certificates();
        let ring = Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
        let builder = ServerConfig::builder_with_provider(ring.clone())
            .with_safe_default_protocol_versions()
            .expect("TLS versions");
        let builder = if mutual {
            let mut roots = RootCertStore::empty();
            roots.add(c.ca_der.clone()).expect("the CA as a root");
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), ring)
                .build()
                .expect("the client verifier");
            builder.with_client_cert_verifier(verifier)
        } else {
            builder.with_no_client_auth()
        };
        let config = builder
            .with_single_cert(vec![c.server], c.server_key)
            .expect("the server's TLS configuration");
        let acceptor = TlsAcceptor::from(Arc::new(config));
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind a port");
        let port = listener.local_addr().expect("port").port();
        let task = tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                let acceptor = acceptor.clone();
                let backend = backend.clone();
                tokio::spawn(async move {
                    // A failed handshake (a client that does not trust the CA) just ends.
                    let Ok(mut tls) = acceptor.accept(socket).await else {
                        return;
                    };
                    let Ok(mut plain) = TcpStream::connect(&backend).await else {
                        return;
                    };
                    let _ = tokio::io::copy_bidirectional(&mut tls, &mut plain).await;
                });
            }
        });
        TlsFront {
            base: format!("https://127.0.0.1:{port}"),
            ca_pem: c.ca_pem,
            client_cert_pem: c.client_pem,
            client_key_pem: c.client_key_pem,
            task,
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }
}
