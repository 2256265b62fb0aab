//! Issue 40, item 4: what HTTP clients may make `parasol serve` hold. 40 connections each
//! pipelining 10,000 `GET /` without reading the answers (token auth on; `/` needs none) grew
//! the process by over 400 MB, still held after they closed. Now a connection that pipelines
//! past `[server] max_pipelined_requests` is closed, its socket's small receive buffer bounds
//! what the server reads ahead meanwhile, and a body that never finishes gets 408 after
//! `[server] body_timeout_s`. These run the real binary and read its RSS from /proc.

use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::process::Stdio;
use std::time::{Duration, Instant};

const TOKEN: &str = "0123456789abcdef0123";

#[path = "support/service.rs"]
mod service;
use service::{free_port, ServiceProcess};

/// The service and the folder of its ledger (removed after the process is gone).
struct Service {
    process: ServiceProcess,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Service {
    fn rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.process.child.id()))
            .expect("the service's /proc status");
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("VmRSS")
    }

    fn connect(&self) -> std::net::TcpStream {
        std::net::TcpStream::connect(("127.0.0.1", self.port)).expect("connect")
    }
}

/// `parasol serve` with token auth and `extra` in `[server]`, once it answers.
async fn start(extra: &str) -> Service {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let file = dir.path().join("parasol.toml");
    std::fs::write(
        &file,
        format!(
            "[server]\nport = {port}\nhttp_workers = 1\n{extra}\n[ledger]\nurl = \"sqlite://{}/ledger.db\"\n\
             wal_prewrite_mib = 0\n[amqp]\nurl = \"\"\n[auth]\nstrategy = \"token\"\ntoken = \"{TOKEN}\"\n",
            dir.path().display()
        ),
    )
    .unwrap();
    let process = ServiceProcess::spawn(&file, port, "warn", Stdio::null(), &[])
        .answering("/")
        .await;
    Service {
        process,
        port,
        _dir: dir,
    }
}

/// A small receive buffer on the client's side, so that unread answers back up at once.
fn small_receive_buffer(stream: &std::net::TcpStream) {
    let bytes: libc::c_int = 4096;
    // SAFETY: setsockopt on the stream's open descriptor with a c_int of the size passed.
    let done = unsafe {
        libc::setsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVBUF,
            (&bytes as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    assert_eq!(done, 0);
}

/// Waits (at most `ms`) until `stream` can be written to or has failed.
fn wait_writable(stream: &std::net::TcpStream, ms: i32) {
    let mut poll = libc::pollfd {
        fd: stream.as_raw_fd(),
        events: libc::POLLOUT,
        revents: 0,
    };
    // SAFETY: one pollfd, valid for the call.
    unsafe { libc::poll(&mut poll, 1, ms) };
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipelining_without_reading_the_answers_is_cut_off_and_bounded() {
    const CONNECTIONS: usize = 40;
    const REQUESTS: usize = 10_000;
    let service = start("").await;
    let before = service.rss_kib();
    let request = b"GET / HTTP/1.1\r\nHost: parasol\r\n\r\n";
    let pipeline: Vec<u8> = request.repeat(REQUESTS);
    let mut connections: Vec<(std::net::TcpStream, usize)> = (0..CONNECTIONS)
        .map(|_| {
            let stream = service.connect();
            small_receive_buffer(&stream);
            stream.set_nonblocking(true).unwrap();
            (stream, 0)
        })
        .collect();
    // Each connection writes its 10,000 requests, and then more, until the service cuts it
    // off (a write fails); never reads. The deadline only stops a service that never does.
    let mut cut = vec![false; CONNECTIONS];
    let mut peak = before;
    let deadline = Instant::now() + Duration::from_secs(60);
    while cut.iter().any(|c| !c) {
        assert!(
            Instant::now() < deadline,
            "{} of {CONNECTIONS} connections pipelining without reading were never cut off \
             (RSS {before} KiB before, {peak} KiB at most)",
            cut.iter().filter(|c| !**c).count()
        );
        for (i, (stream, sent)) in connections.iter_mut().enumerate() {
            if cut[i] {
                continue;
            }
            let at = *sent % pipeline.len();
            match stream.write(&pipeline[at..]) {
                Ok(0) => cut[i] = true,
                Ok(n) => *sent += n,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(_) => cut[i] = true,
            }
        }
        peak = peak.max(service.rss_kib());
        if let Some((stream, _)) = connections.iter().zip(&cut).find(|(_, c)| !**c) {
            wait_writable(&stream.0, 20);
        }
    }
    peak = peak.max(service.rss_kib());
    drop(connections);
    let growth_mib = (peak.saturating_sub(before)) / 1024;
    // 3 MiB a connection; without the limits it was over 10 MiB each.
    assert!(
        growth_mib < 3 * CONNECTIONS as u64,
        "RSS grew by {growth_mib} MiB ({before} KiB before, {peak} KiB at most)"
    );
    // A client that reads its answers is served as ever.
    let mut plain = service.connect();
    plain
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    for _ in 0..3 {
        plain
            .write_all(b"GET /healthz HTTP/1.1\r\nHost: parasol\r\n\r\n")
            .unwrap();
        let mut head = [0u8; 12];
        plain.read_exact(&mut head).unwrap();
        assert_eq!(&head, b"HTTP/1.1 200");
        // The rest of the answer (no pipelining: read it before the next request).
        let mut rest = vec![0u8; 4096];
        let mut text = String::new();
        while !text.contains("\"status\"") || !text.ends_with('}') {
            let n = plain.read(&mut rest).unwrap();
            assert!(n > 0, "closed mid-answer");
            text.push_str(&String::from_utf8_lossy(&rest[..n]));
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_that_never_finishes_gets_408_after_the_configured_timeout() {
    let service = start("body_timeout_s = 1").await;
    let mut stream = service.connect();
    // A guard against a service that never answers, not a bound on its speed.
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    write!(
        stream,
        "POST /v1/notifications HTTP/1.1\r\nHost: parasol\r\nX-Auth-Token: {TOKEN}\r\n\
         Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{{\"message_id\""
    )
    .unwrap();
    let mut answer = Vec::new();
    // Until the service closes the connection: the body was never read in full.
    match stream.read_to_end(&mut answer) {
        Ok(_) => {}
        Err(e) => panic!(
            "no answer and the connection still open: {e} ({:?})",
            String::from_utf8_lossy(&answer)
        ),
    }
    let text = String::from_utf8_lossy(&answer);
    assert!(text.starts_with("HTTP/1.1 408"), "{text}");
    assert!(text.contains("server.body_timeout_s"), "{text}");
}

/// `THP_enabled` of `/proc/<pid>/status`: 0 once the process has opted out of transparent
/// huge pages (`prctl(PR_SET_THP_DISABLE)`), else 1.
fn thp_enabled(pid: u32) -> u8 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("THP_enabled:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("THP_enabled (Linux ≥ 5.0)")
}

/// Issue 40's soak: the allocator asks for huge pages on its whole arena, and a 2 MiB page
/// stays resident while any byte of it is used, so the service's RSS (half of it in huge
/// pages at 10,000 hosts) grew in 2 MiB steps after every burst. By default the service opts
/// out; `[server] huge_pages = true` leaves the process as it was started.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_service_opts_out_of_transparent_huge_pages_unless_configured() {
    let default = start("").await;
    assert_eq!(
        thp_enabled(default.process.child.id()),
        0,
        "by default the service opts out of transparent huge pages"
    );
    let allowed = start("huge_pages = true").await;
    assert_eq!(
        thp_enabled(allowed.process.child.id()),
        thp_enabled(std::process::id()),
        "with huge_pages = true the service keeps what it inherited"
    );
}
