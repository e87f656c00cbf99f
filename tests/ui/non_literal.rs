fn main() {
    let fmt = "{}";
    nanolog::info!(fmt, 1);
}
