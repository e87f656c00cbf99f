//! Text made from records: the message as `format!` would make it, the
//! line `nanolog decode` prints (and the text mirror writes), UTC times, and
//! the number writers they use. One home for the reader, the mirror and the
//! `nanolog` command; not part of the documented API.

pub mod line;
pub mod render;
pub mod utc;
