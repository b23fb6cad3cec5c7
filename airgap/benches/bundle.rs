//! Bundle benchmark (filled in below as the bundle writer lands).
fn main() {}
