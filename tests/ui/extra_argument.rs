fn main() {
    nanolog::info!("only {}", 1, 2);
}
