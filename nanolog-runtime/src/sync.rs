//! The std/loom seam for the atomics of the staging ring, so a
//! `RUSTFLAGS="--cfg loom"` build can swap in loom's model-checked types.

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicBool, AtomicU64};

#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicBool, AtomicU64};
