//! Benchmark placeholder (replaced by the real validate + render of a 100-node file).

fn main() {}
