//! The compile-time level cap (`max_level_*` features, as in the `log`
//! crate). CI runs this file twice: with default features, and with
//! `--features max_level_info`, where `debug!` and `trace!` are compiled out
//! whatever the runtime level.

use std::sync::atomic::{AtomicU32, Ordering};

use nanolog::reader::LogFile;

#[test]
fn calls_below_the_compile_time_cap_are_compiled_out() {
    let path = std::env::temp_dir().join(format!("nanolog-static-{}.nlog", std::process::id()));
    let logger = nanolog::Logger::builder()
        .path(&path)
        .level(nanolog::Level::Trace)
        .start()
        .unwrap();
    let evaluated = AtomicU32::new(0);
    let arg = || evaluated.fetch_add(1, Ordering::Relaxed);
    nanolog::trace!("trace {}", arg());
    nanolog::debug!("debug {}", arg());
    nanolog::info!("info {}", arg());
    drop(logger);
    let log = LogFile::open(&path).unwrap();
    let msgs: Vec<String> = log.records().map(|r| r.unwrap().message()).collect();
    let _ = std::fs::remove_file(&path);
    let _ = std::fs::remove_file(path.with_extension("nlog.lock"));
    if cfg!(feature = "max_level_info") {
        assert_eq!(msgs, ["info 0"]);
        assert_eq!(evaluated.load(Ordering::Relaxed), 1);
    } else {
        assert_eq!(msgs, ["trace 0", "debug 1", "info 2"]);
    }
}
