//! The `nanolog` binary's commands run as a user runs them, against logs the
//! real logger wrote: one test binary for the CLI's tests that can share a
//! process (one module each, as they were files before). A test that starts
//! a logger takes `common::serial()`: one logger runs per process.
//!
//! Tests that install a global `tracing` subscriber (`spans`, `span_cases`,
//! `tracing_oracle`) are binaries of their own, a global default being set
//! once per process; so are `ship` and `real_collector` (feature `ship`), and
//! `damage_memory` and `lazy_blocks`, which measure a child's peak memory:
//! the kernel counts it from this process's peak at the spawn, so the
//! process that measures must hold little, each alone.

#[path = "../common/mod.rs"]
mod common;

mod bridges;
mod cli;
mod export;
mod files;
mod follow_load;
mod index;
mod info_states;
mod layers;
mod map;
mod mirror;
mod new_user;
mod readme;
mod set_order;
mod templates;
