fn main() {
    nanolog::warn!("{}", 1, extra = 2);
}
