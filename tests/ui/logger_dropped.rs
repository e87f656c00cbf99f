// A `Logger` started and not kept stops logging at once: rustc says so.
#![deny(unused_must_use)]

fn main() -> Result<(), nanolog::Error> {
    nanolog::Logger::builder().path("app.nlog").start()?;
    nanolog::info!("never written");
    Ok(())
}
