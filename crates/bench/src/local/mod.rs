//! A local cluster of real `meridian server` processes on 127.0.0.x, and the ways the benches talk to it:
//! starting, killing and restarting nodes, each optionally in its own CPU cgroup (`cluster`, `cgroup`); what
//! `/proc` says of a node process (`procfs`); JSON over HTTP (`http`) and the cluster map it gives (`map`);
//! SETs and GETs over RESP (`resp`); and the run's own data directory (`workdir`). `meridian bench join` and
//! `meridian bench keyspaces` are built on it.

pub(crate) mod cgroup;
mod cluster;
pub(crate) mod http;
pub(crate) mod map;
mod procfs;
pub(crate) mod resp;
mod workdir;

pub(crate) use cluster::{Cluster, Setup};
pub(crate) use map::{Chain, Change, MapView};
pub(crate) use workdir::WorkDir;
