fn main() {
    nanolog::info!("value {nope}");
}
