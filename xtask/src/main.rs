//! Project tasks: `cargo xtask schemas [--check]`, `cargo xtask fixtures`, `cargo xtask test`.
fn main() {}
