fn main() -> Result<(), nanolog::Error> {
    let logger = nanolog::Logger::builder().path("/tmp/smoke.nlog").start()?;
    let name = "x";
    nanolog::info!("hello {} {:>5} {name:?} {:.2}", 42, -7i8, 3.14159);
    nanolog::warn!("static");
    #[derive(Debug)]
    struct P(u8);
    nanolog::error!("p={:?} {0:#?}", P(3));
    nanolog::log!(nanolog::Level::Warn, "dyn {}", "s".to_string());
    logger.flush()?;
    println!("{:?}", logger.stats());
    Ok(())
}
