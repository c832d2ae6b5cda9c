//! One module per subcommand; `node` holds what `demo` and `server` share.

pub mod bench;
pub mod cert;
pub mod client_ports;
pub mod config;
pub mod ctl;
pub mod demo;
pub mod http;
pub mod http_port;
pub mod node;
pub mod protocol_args;
pub mod server;
pub mod sim;
pub mod topology;
