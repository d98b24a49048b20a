//! A `redis-server` of the test's own: on a free loopback port, with no
//! persistence, stopped (killed) on drop. Nothing assumes a running server.
//!
//! Shared by the tests, the unit tests of the scripts (`#[path]`) and the
//! benchmark.
#![allow(dead_code, unreachable_pub)]

use std::io::{Read, Write};
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// How to get the server when it is missing.
pub const INSTALL_HINT: &str = "redis-server not found on PATH: the adaptx-redis tests run a real Redis. \
     Install it with `apt-get install -y redis-server` (Debian/Ubuntu; .ci/run does this), \
     or put a redis-server binary on PATH";

/// Installs Debian's `redis-server` package once per test process when the
/// binary is missing and the process may install packages (root, or
/// password-less sudo): the README's test command needs nothing else on a
/// fresh machine. Returns why it could not, for the panic's message.
fn ensure_installed() -> Result<(), String> {
    static INSTALLED: OnceLock<Result<(), String>> = OnceLock::new();
    INSTALLED
        .get_or_init(|| {
            let present = |cmd: &str| {
                Command::new(cmd)
                    .arg("--version")
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .status()
                    .is_ok_and(|s| s.success())
            };
            if present("redis-server") {
                return Ok(());
            }
            let root = Command::new("id")
                .arg("-u")
                .output()
                .is_ok_and(|o| o.stdout.trim_ascii() == b"0");
            let prefix: &[&str] = if root { &[] } else { &["sudo", "-n"] };
            let run = |args: &[&str]| {
                let all: Vec<&str> = prefix.iter().chain(args).copied().collect();
                Command::new(all[0])
                    .args(&all[1..])
                    .env("DEBIAN_FRONTEND", "noninteractive")
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .status()
                    .is_ok_and(|s| s.success())
            };
            if run(&["apt-get", "update", "-qq"])
                && run(&["apt-get", "install", "-y", "-qq", "redis-server"])
                && present("redis-server")
            {
                Ok(())
            } else {
                Err(format!(
                    "{INSTALL_HINT} (installing it with apt-get failed)"
                ))
            }
        })
        .clone()
}

/// A running `redis-server`, killed on drop.
#[derive(Debug)]
pub struct RedisServer {
    child: Option<Child>,
    port: u16,
}

/// A port nobody listens on now.
pub fn free_port() -> u16 {
    let l = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).expect("bind an ephemeral port");
    l.local_addr().expect("local addr").port()
}

impl RedisServer {
    /// Starts a server on a free port, installing Debian's package first
    /// when `redis-server` is missing. Panics (failing the test) with the
    /// install hint if it cannot.
    pub fn start() -> Self {
        Self::start_on(free_port())
    }

    /// Starts a server on `port` (to restart one where a dead one was).
    pub fn start_on(port: u16) -> Self {
        if let Err(why) = ensure_installed() {
            panic!("{why}");
        }
        let child = Command::new("redis-server")
            .args([
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--enable-debug-command",
                "yes",
                "--loglevel",
                "warning",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn();
        let child = match child {
            Ok(c) => c,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => panic!("{INSTALL_HINT}"),
            Err(e) => panic!("cannot start redis-server: {e}"),
        };
        let server = Self {
            child: Some(child),
            port,
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while !server.ping() {
            assert!(
                Instant::now() < deadline,
                "redis-server on port {port} did not answer PING within 10 s"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        server
    }

    /// The server's port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The URL to connect to.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    /// Whether the server answers PING (raw RESP, no client needed).
    pub fn ping(&self) -> bool {
        let Ok(mut s) = TcpStream::connect((Ipv4Addr::LOCALHOST, self.port)) else {
            return false;
        };
        let _ = s.set_read_timeout(Some(Duration::from_millis(500)));
        if s.write_all(b"PING\r\n").is_err() {
            return false;
        }
        let mut buf = [0u8; 7];
        s.read_exact(&mut buf).is_ok() && &buf == b"+PONG\r\n"
    }

    /// Sends a signal to the server (`kill -s SIG PID`).
    pub fn signal(&self, sig: &str) {
        let ok = Command::new("kill")
            .args(["-s", sig, &self.pid().to_string()])
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
        assert!(ok, "kill -s {sig} {} failed", self.pid());
    }

    /// `kill -9` and reap.
    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        // A stopped server must be continued to die cleanly on SIGKILL too;
        // SIGKILL works on a stopped process, so one kill suffices.
        self.kill9();
    }
}
