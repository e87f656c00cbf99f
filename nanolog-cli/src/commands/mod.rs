//! The commands, a room each: each reads through the shared rooms above
//! it (`inputs`, `window`, `follow`, `live`, `read_plan`, `time_args`,
//! `grep`) and writes through `output`; no command imports another.

pub mod decode;
pub mod export;
pub mod info;
pub mod recover;
#[cfg(feature = "ship")]
pub mod ship;
pub mod stats;
