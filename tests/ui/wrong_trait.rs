struct NoDisplay;

fn main() {
    nanolog::info!("{:x}", 1.5f64);
    nanolog::info!("{}", NoDisplay);
    nanolog::info!("{:1$}", 1, 2i32);
}
