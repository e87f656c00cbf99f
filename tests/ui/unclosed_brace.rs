fn main() {
    nanolog::error!("open { brace", 1);
    nanolog::error!("close } brace");
}
