//! Any string as a format string: the macro's parser accepts it or returns
//! an error, never panics.
#![no_main]

use libfuzzer_sys::fuzz_target;

// The parser is free of proc_macro types (so it can be included here; a
// proc-macro crate cannot be linked into a fuzz binary).
#[allow(dead_code)]
#[path = "../../nanolog-macros/src/format.rs"]
mod format;

fuzz_target!(|data: &[u8]| {
    if let Ok(s) = std::str::from_utf8(data) {
        let _ = format::parse(s);
    }
});
