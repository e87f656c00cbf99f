fn main() {
    nanolog::info!("{} and {}", 1);
}
