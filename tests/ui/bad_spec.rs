fn main() {
    nanolog::info!("{:q}", 1);
    nanolog::info!("{:x?}", 1);
}
