//! Output formats of the CLI: text lines and JSON.

mod json;
pub mod print;
mod text;

#[cfg(feature = "parquet")]
pub use json::{json_args, json_fields, json_spans};
pub use json::{json_gap, json_record, json_record_direct, json_string, Json};
#[cfg(feature = "ship")]
pub use text::gap_message;
pub use text::{text_gap, text_record, text_record_direct, Text};

use nanolog_runtime::reader::Record;

/// (file address, site id, thread id, text).
type Slot = (usize, u32, u32, Box<str>);

/// Text that is the same for every record of a call site on a thread (a
/// text line's prefix, a JSON line's keys), built once and cached per
/// (file, site, thread) in a small direct-mapped table.
#[derive(Default)]
pub struct SiteThreadCache {
    slots: Vec<Option<Slot>>,
}

impl SiteThreadCache {
    const SLOTS: usize = 1024;

    fn get(&mut self, rec: &Record<'_>, build: impl FnOnce(&Record<'_>, &mut String)) -> &str {
        if self.slots.is_empty() {
            self.slots = vec![None; Self::SLOTS];
        }
        let file = rec.file() as *const _ as usize;
        let (site, thread) = (rec.site().id, rec.thread());
        let h = (u64::from(site) << 32 | u64::from(thread)) ^ file as u64;
        let ix = (h.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 54) as usize % Self::SLOTS;
        let hit = matches!(&self.slots[ix], Some((f, s, t, _)) if *f == file && *s == site && *t == thread);
        if !hit {
            let mut p = String::new();
            build(rec, &mut p);
            self.slots[ix] = Some((file, site, thread, p.into_boxed_str()));
        }
        match &self.slots[ix] {
            Some((.., p)) => p,
            None => "",
        }
    }
}

/// `n` and the noun, singular for one: "1 record", "2 records".
pub(crate) fn count(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}
