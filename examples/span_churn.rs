//! Spans that outrun the flusher (issue #66): threads make `tracing` spans
//! flat out for a while, with nanolog's layer (or tracing-subscriber's fmt
//! layer into a sink, or no layer) in the registry, then the logger
//! stops. Prints what was made, the peak RSS, how long the stop took and
//! the logger's counters.
//!
//! ```text
//! cargo run --release --example span_churn --features tracing -- \
//!     [nanolog|fmt|none] [THREADS] [SECONDS] [events|spans] [block|drop]
//! ```

#[path = "span_churn/work.rs"]
mod work;

use std::time::{Duration, Instant};

use tracing_subscriber::layer::SubscriberExt;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize, default: &str| args.get(i).cloned().unwrap_or_else(|| default.into());
    let layer = arg(0, "nanolog");
    let threads: usize = arg(1, "2").parse()?;
    let secs: f64 = arg(2, "10").parse()?;
    let events = arg(3, "spans") == "events";
    let on_full = match arg(4, "block").as_str() {
        "drop" => nanolog::OnFull::Drop,
        _ => nanolog::OnFull::Block,
    };
    let path = std::env::temp_dir().join(format!("span-churn-{}.nlog", std::process::id()));
    let run = Duration::from_secs_f64(secs);

    let (made, stop, stats) = match layer.as_str() {
        "nanolog" => {
            tracing::subscriber::set_global_default(
                tracing_subscriber::registry().with(nanolog::tracing_layer()),
            )?;
            let logger = nanolog::Logger::builder()
                .path(&path)
                .on_full(on_full)
                .start()?;
            let made = work::churn(threads, run, events);
            let t = Instant::now();
            logger.flush()?;
            let stats = logger.stats();
            drop(logger);
            (made, t.elapsed(), Some(stats))
        }
        "fmt" => {
            // (Text: the facade's dev-dependency has tracing-subscriber at
            // its default features, without `json`.)
            let fmt = tracing_subscriber::fmt::layer().with_writer(std::io::sink);
            tracing::subscriber::set_global_default(tracing_subscriber::registry().with(fmt))?;
            (work::churn(threads, run, events), Duration::ZERO, None)
        }
        _ => {
            tracing::subscriber::set_global_default(tracing_subscriber::registry())?;
            (work::churn(threads, run, events), Duration::ZERO, None)
        }
    };
    println!(
        "layer {layer}, {threads} threads, {secs} s, {}: {} requests ({:.2} M/s), {} events; \
         peak RSS {:.1} MB, RSS after {:.1} MB; flush and stop {:.3} s",
        if events { "events" } else { "spans only" },
        made.requests,
        made.requests as f64 / secs / 1e6,
        made.events,
        work::peak_rss() as f64 / 1e6,
        work::rss() as f64 / 1e6,
        stop.as_secs_f64(),
    );
    if let Some(s) = stats {
        println!("stats: {s:?}");
    }
    let _ = std::fs::remove_file(&path);
    Ok(())
}
