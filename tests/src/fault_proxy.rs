//! A TCP proxy that injects network faults between sluice and a service, per connection:
//! added latency, a stall (bytes held, the connection open), a black hole (bytes dropped),
//! and cuts (every open connection shut down both ways at once, as a server, a failover or a
//! middlebox dropping it does).
//!
//! ```text
//!  sluice ──▶ 127.0.0.1:<proxy> ──(mode: pass · latency · stall · black hole)──▶ service
//!                 reset_all(): every open connection shut down, both ways
//! ```
//!
//! Each connection is two threads copying bytes, one per direction; the mode is read for
//! every chunk, so a change applies to open connections at once. New connections are
//! accepted in every mode (a black-holed service looks up but never answers).

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What the proxy does to the bytes it carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Bytes go through as they come.
    Pass,
    /// Each chunk waits this long before it is forwarded.
    Latency(Duration),
    /// Bytes are held (not read from the sender) until the mode changes.
    Stall,
    /// Bytes are read and dropped: the peer never hears back.
    BlackHole,
}

struct Shared {
    mode: Mutex<Fault>,
    /// Both ends of every open connection, to cut them.
    open: Mutex<Vec<(TcpStream, TcpStream)>>,
    stopped: AtomicBool,
    resets: AtomicU64,
    accepted: AtomicU64,
}

pub struct FaultProxy {
    pub port: u16,
    shared: Arc<Shared>,
}

impl FaultProxy {
    /// Listens on a free port of 127.0.0.1, forwarding to `upstream`.
    pub fn start(upstream: SocketAddr) -> FaultProxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the fault proxy");
        let port = listener.local_addr().unwrap().port();
        let shared = Arc::new(Shared {
            mode: Mutex::new(Fault::Pass),
            open: Mutex::new(Vec::new()),
            stopped: AtomicBool::new(false),
            resets: AtomicU64::new(0),
            accepted: AtomicU64::new(0),
        });
        let s = shared.clone();
        std::thread::spawn(move || {
            for client in listener.incoming() {
                if s.stopped.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(client) = client else { continue };
                let Ok(server) = TcpStream::connect_timeout(&upstream, Duration::from_secs(5)) else {
                    let _ = client.shutdown(Shutdown::Both);
                    continue;
                };
                let _ = (client.set_nodelay(true), server.set_nodelay(true));
                s.accepted.fetch_add(1, Ordering::SeqCst);
                if let (Ok(c), Ok(v)) = (client.try_clone(), server.try_clone()) {
                    s.open.lock().unwrap().push((c, v));
                }
                for (from, to) in [(client.try_clone(), server.try_clone()), (server.try_clone(), client.try_clone())] {
                    let (Ok(from), Ok(to)) = (from, to) else { continue };
                    let s = s.clone();
                    std::thread::spawn(move || pump(from, to, &s));
                }
            }
        });
        FaultProxy { port, shared }
    }

    pub fn set(&self, fault: Fault) {
        *self.shared.mode.lock().unwrap() = fault;
    }

    /// Cuts every open connection: both ends are shut down, so each side sees its peer go.
    pub fn reset_all(&self) {
        let open = std::mem::take(&mut *self.shared.open.lock().unwrap());
        for (client, server) in open {
            for s in [&client, &server] {
                let _ = s.shutdown(Shutdown::Both);
            }
        }
        self.shared.resets.fetch_add(1, Ordering::SeqCst);
    }

    /// Connections accepted so far.
    pub fn accepted(&self) -> u64 {
        self.shared.accepted.load(Ordering::SeqCst)
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.shared.stopped.store(true, Ordering::SeqCst);
        self.reset_all();
        // Wakes the accept loop so that it sees `stopped`.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

/// Copies `from` to `to` under the current mode until either side ends.
fn pump(mut from: TcpStream, mut to: TcpStream, s: &Shared) {
    let mut buf = vec![0u8; 64 * 1024];
    let _ = from.set_read_timeout(Some(Duration::from_millis(100)));
    loop {
        if s.stopped.load(Ordering::SeqCst) {
            break;
        }
        let mode = *s.mode.lock().unwrap();
        if mode == Fault::Stall {
            std::thread::sleep(Duration::from_millis(20));
            // A connection cut meanwhile ends the pump.
            if from.peek(&mut [0u8; 1]).is_ok_and(|n| n == 0) {
                break;
            }
            continue;
        }
        let n = match from.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => continue,
            Err(_) => break,
        };
        match *s.mode.lock().unwrap() {
            Fault::BlackHole => continue,
            Fault::Latency(d) => std::thread::sleep(d),
            Fault::Pass | Fault::Stall => {}
        }
        if to.write_all(&buf[..n]).is_err() {
            break;
        }
    }
    let _ = from.shutdown(Shutdown::Both);
    let _ = to.shutdown(Shutdown::Both);
}
