fn main() {
    nanolog::info!("{0} {3}", 1, 2);
}
