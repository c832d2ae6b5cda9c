//! The accept loop shared by the RESP and peer listeners.
//!
//! Connection tasks live in a [`JoinSet`] owned by the loop, so aborting the loop's task (node shutdown)
//! closes the listener and aborts every connection it accepted, with nothing left behind.

use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;
use tracing::warn;

/// A failed accept is usually resource exhaustion (too many open files); pausing lets connections
/// close instead of spinning on the error.
const ACCEPT_ERROR_PAUSE: Duration = Duration::from_millis(50);

/// Accepts connections forever, running `serve` for each on its own task.
pub(crate) async fn accept_loop<F, Fut>(listener: TcpListener, what: &'static str, serve: F)
where
    F: Fn(TcpStream, SocketAddr) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let mut connections = JoinSet::new();
    loop {
        match listener.accept().await {
            Ok((stream, addr)) => {
                connections.spawn(serve(stream, addr));
            }
            Err(e) => {
                warn!("cannot accept a {what} connection: {e}");
                tokio::time::sleep(ACCEPT_ERROR_PAUSE).await;
            }
        }
        // Reap finished connections so the set only holds live ones.
        while connections.try_join_next().is_some() {}
    }
}
