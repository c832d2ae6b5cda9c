//! End-to-end tests of the node over real loopback TCP: RESP clients, two nodes forwarding to each
//! other, the handshake, the after-sync ordering, the durability modes and HTTP. Every listener binds
//! port 0 (or a port just found free) and every wait is bounded.

mod after_sync;
mod durability;
mod http;
mod kv_process;
mod peers;
mod resp;
mod resp_client;
mod start;
mod support;
