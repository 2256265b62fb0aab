//! What one HTTP connection may hold. The HTTP server reads a connection's pipelined requests
//! ahead (up to 128 KiB of them, thousands of small ones, each decoded and queued) and answers
//! each into that connection's write buffer whether or not the client reads the answers: 40
//! connections pipelining 10,000 `GET /` each without reading (no token needed: `/` is open)
//! grew the process by over half a gigabyte (issue 40, item 4). The HTTP server has no setting
//! for either, so:
//!
//! - every connection's socket gets a small receive buffer
//!   (`[server] socket_receive_buffer_bytes`), which bounds what the server reads ahead in one
//!   go, and with it the requests it decodes before answering any;
//! - a request that arrives while earlier answers on its connection are still unacknowledged
//!   is pipelined (a client that waits for each answer has received — and acknowledged — the
//!   last one by the time its next request arrives); after `[server] max_pipelined_requests`
//!   such requests in a row the connection is closed, and with it everything it held.

use actix_web::body::MessageBody;
use actix_web::dev::{Extensions, ServiceRequest, ServiceResponse};
use actix_web::http::StatusCode;
use actix_web::middleware::Next;
use std::any::Any;
use std::cell::Cell;
use std::os::fd::{AsRawFd, RawFd};
use std::rc::Rc;

/// A connection's socket and its run of pipelined requests.
#[derive(Clone, Debug)]
struct ConnectionSocket {
    fd: RawFd,
    max_pipelined: u32,
    pipelined: Rc<Cell<u32>>,
}

/// The HTTP server's `on_connect` callback: notes each plain TCP connection's socket.
pub fn on_connect(max_pipelined: u32) -> impl Fn(&dyn Any, &mut Extensions) + Send + Sync {
    move |io, extensions| {
        if let Some(tcp) = io.downcast_ref::<actix_web::rt::net::TcpStream>() {
            extensions.insert(ConnectionSocket {
                fd: tcp.as_raw_fd(),
                max_pipelined,
                pipelined: Rc::default(),
            });
        }
    }
}

/// Sets the receive buffer of the sockets `listener` accepts (they inherit it).
pub fn set_receive_buffer(listener: &std::net::TcpListener, bytes: usize) -> std::io::Result<()> {
    let bytes = libc::c_int::try_from(bytes).unwrap_or(libc::c_int::MAX);
    // SAFETY: setsockopt on the listener's open descriptor with a c_int of the size passed.
    let done = unsafe {
        libc::setsockopt(
            listener.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVBUF,
            (&bytes as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if done == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Bytes sent on the socket that its peer has not acknowledged yet, plus those not sent yet.
fn unacknowledged(fd: RawFd) -> usize {
    let mut queued: libc::c_int = 0;
    // SAFETY: TIOCOUTQ writes one c_int; the descriptor is the connection's, open while its
    // requests run.
    let done = unsafe { libc::ioctl(fd, libc::TIOCOUTQ, &mut queued) };
    if done == 0 {
        usize::try_from(queued).unwrap_or(0)
    } else {
        0
    }
}

/// Middleware: counts a connection's pipelined requests in a row and closes the connection
/// past `[server] max_pipelined_requests`.
pub async fn limit_pipelining(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<actix_web::body::BoxBody>, actix_web::Error> {
    if let Some(socket) = req.conn_data::<ConnectionSocket>().cloned() {
        // The server runs a connection's queued requests one after the other within one turn
        // of its task when each is answered at once, and writes their answers out only after
        // the last: one turn here lets it write the last answer out first, so that what the
        // client has not acknowledged shows below.
        tokio::task::yield_now().await;
        if unacknowledged(socket.fd) == 0 {
            socket.pipelined.set(0);
        } else {
            let run = socket.pipelined.get().saturating_add(1);
            socket.pipelined.set(run);
            if run > socket.max_pipelined {
                // Both ways: the server's reads end and its writes fail, so the connection
                // and what it queued go now. Not close: the server still owns the descriptor.
                // SAFETY: shutdown on the connection's open descriptor.
                unsafe { libc::shutdown(socket.fd, libc::SHUT_RDWR) };
                tracing::info!(
                    peer = ?req.peer_addr(),
                    "closed an HTTP connection that pipelined more than [server] \
                     max_pipelined_requests requests without reading the answers"
                );
                return Err(actix_web::error::InternalError::new(
                    "too many requests pipelined without reading the answers \
                     ([server] max_pipelined_requests)",
                    StatusCode::TOO_MANY_REQUESTS,
                )
                .into());
            }
        }
    }
    next.call(req)
        .await
        .map(ServiceResponse::map_into_boxed_body)
}
