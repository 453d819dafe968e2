//! The `imagegate-sim` binary: prints its address first, serves, and exits cleanly on SIGTERM.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn http(address: &str, request: &str) -> String {
    let mut stream = TcpStream::connect(address).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    stream.write_all(request.as_bytes()).unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    answer
}

#[cfg(unix)]
#[test]
fn prints_its_address_serves_and_stops_on_sigterm() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_imagegate-sim"))
        .args(["--listen", "127.0.0.1:0", "--latency-ms", "0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut first_line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first_line)
        .unwrap();
    let address = first_line
        .trim()
        .strip_prefix("listening on http://")
        .unwrap()
        .to_owned();
    assert!(!address.ends_with(":0"), "the real port is printed: {address}");

    let models = http(
        &address,
        "GET /v1/models HTTP/1.1\r\nHost: sim\r\nAuthorization: Bearer sk-bin\r\nConnection: close\r\n\r\n",
    );
    assert!(models.starts_with("HTTP/1.1 200"), "{models}");
    assert!(models.contains("\"gpt-image-2\""));
    let stats = http(
        &address,
        "GET /sim/stats HTTP/1.1\r\nHost: sim\r\nConnection: close\r\n\r\n",
    );
    assert!(stats.contains("\"sk-bin\""), "{stats}");

    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let deadline = Instant::now() + Duration::from_secs(20);
    let exit = loop {
        if let Some(exit) = child.try_wait().unwrap() {
            break exit;
        }
        if Instant::now() > deadline {
            child.kill().unwrap();
            panic!("imagegate-sim did not stop on SIGTERM");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(exit.success(), "{exit:?}");
}
