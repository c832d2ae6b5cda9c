//! One module per subcommand; `node` holds what `demo` and `server` share.

pub mod bench;
pub mod demo;
pub mod node;
pub mod server;
pub mod sim;
