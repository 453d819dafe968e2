//! The `imagegate` binary: the HTTP gateway for `gpt-image-2`.
//!
//! `imagegate serve` and `imagegate demo` arrive with the gateway issue; until then the binary only
//! reports its version.

fn main() {
    println!("imagegate {} (the gateway arrives with the next issue)", env!("CARGO_PKG_VERSION"));
}
