//! A TCP proxy that injects network faults between sluice and a service, per connection:
//! added latency, a bandwidth cap, a stall (bytes held, the connection open), a black hole
//! (nothing in or out, not even a close, and new connections never answered), a slow close,
//! cuts (every open connection shut down both ways at once, as a server, a failover or a
//! middlebox dropping it does), and a cut armed on a request pattern (the request reaches the
//! server, its reply never reaches the client: an ambiguous commit).
//!
//! ```text
//!  sluice ──▶ 127.0.0.1:<proxy> ──(mode: pass · latency · throttle · stall · black hole)──▶ service
//!                 reset_all(): every open connection shut down, both ways
//!                 cut_after(pattern): the next request holding it goes through, the reply
//!                                     is dropped and the connection cut
//! ```
//!
//! Each connection is two threads copying bytes, one per direction; the mode is read for
//! every chunk, so a change applies to open connections at once.
//!
//! A Kafka broker tells its clients where to connect (Metadata and FindCoordinator answers
//! name its advertised host and port), so a client that reached it through the proxy would go
//! around the proxy from then on. [`FaultProxy::for_kafka`] rewrites the broker's address in
//! its answers to the proxy's, as proxies in front of Kafka do, so that every connection goes
//! through it.

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
    /// At most this many bytes per second in each direction of a connection.
    Throttle(u32),
    /// Bytes are held (not read from the sender) until the mode changes; a close goes through.
    Stall,
    /// A network that drops every packet: bytes are held, a peer's close is not passed on,
    /// and a new connection gets no answer (its upstream connection is made only when the
    /// mode changes). Connections still open afterwards go on where they stopped, as TCP
    /// connections do when a partition heals before their timeouts.
    BlackHole,
}

struct Shared {
    mode: Mutex<Fault>,
    /// Both ends of every open connection, to cut them.
    open: Mutex<Vec<(TcpStream, TcpStream)>>,
    stopped: AtomicBool,
    resets: AtomicU64,
    accepted: AtomicU64,
    /// The request pattern of an armed cut, and how many cuts remain armed.
    cut_after: Mutex<Option<(Vec<u8>, u32)>>,
    /// Cuts made by an armed pattern.
    pattern_cuts: AtomicU64,
    /// How long a close waits before it is passed on.
    slow_close: Mutex<Duration>,
    /// Kafka framing of the replies, and the bytes replaced in each (same length).
    rewrite: Option<(Vec<u8>, Vec<u8>)>,
}

impl Shared {
    fn mode(&self) -> Fault {
        *self.mode.lock().unwrap()
    }
}

pub struct FaultProxy {
    pub port: u16,
    shared: Arc<Shared>,
}

impl FaultProxy {
    /// Listens on a free port of 127.0.0.1, forwarding to `upstream`.
    pub fn start(upstream: SocketAddr) -> FaultProxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the fault proxy");
        Self::serve(listener, upstream)
    }

    /// Forwards `listener`'s connections to `upstream` (for a service that must be told the
    /// proxy's address before it starts, such as a broker advertising it).
    pub fn serve(listener: TcpListener, upstream: SocketAddr) -> FaultProxy {
        Self::serve_rewriting(listener, upstream, None)
    }

    /// A proxy in front of the Kafka broker at `broker` (127.0.0.1, advertising that address):
    /// each reply is read as a Kafka frame (4-byte length, then the frame) and forwarded whole,
    /// with the broker's host and port (`127.0.0.1` followed by the port as 4 bytes, as
    /// Metadata and FindCoordinator answers carry them) replaced by the proxy's.
    pub fn for_kafka(broker: SocketAddr) -> FaultProxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the fault proxy");
        let address = |port: u16| [b"127.0.0.1".as_slice(), &i32::from(port).to_be_bytes()].concat();
        let rewrite = (address(broker.port()), address(listener.local_addr().unwrap().port()));
        Self::serve_rewriting(listener, broker, Some(rewrite))
    }

    fn serve_rewriting(listener: TcpListener, upstream: SocketAddr, rewrite: Option<(Vec<u8>, Vec<u8>)>) -> FaultProxy {
        let port = listener.local_addr().unwrap().port();
        let shared = Arc::new(Shared {
            mode: Mutex::new(Fault::Pass),
            open: Mutex::new(Vec::new()),
            stopped: AtomicBool::new(false),
            resets: AtomicU64::new(0),
            accepted: AtomicU64::new(0),
            cut_after: Mutex::new(None),
            pattern_cuts: AtomicU64::new(0),
            slow_close: Mutex::new(Duration::ZERO),
            rewrite,
        });
        let s = shared.clone();
        std::thread::spawn(move || {
            for client in listener.incoming() {
                if s.stopped.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(client) = client else { continue };
                let s = s.clone();
                std::thread::spawn(move || connect(client, upstream, s));
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

    /// Arms `times` cuts: each time a client sends bytes holding `pattern`, they reach the
    /// server, whatever the server answers is dropped, and the connection is cut a moment
    /// later (the server has acted on the request; the client never learns it).
    pub fn cut_after(&self, pattern: &[u8], times: u32) {
        *self.shared.cut_after.lock().unwrap() = Some((pattern.to_vec(), times));
    }

    /// Cuts made by patterns armed with [`FaultProxy::cut_after`].
    pub fn pattern_cuts(&self) -> u64 {
        self.shared.pattern_cuts.load(Ordering::SeqCst)
    }

    /// Every close waits this long before it is passed to the other side.
    pub fn set_slow_close(&self, delay: Duration) {
        *self.shared.slow_close.lock().unwrap() = delay;
    }

    /// Connections accepted so far.
    pub fn accepted(&self) -> u64 {
        self.shared.accepted.load(Ordering::SeqCst)
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.shared.stopped.store(true, Ordering::SeqCst);
        self.set(Fault::Pass);
        self.reset_all();
        // Wakes the accept loop so that it sees `stopped`.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

/// Connects an accepted client upstream (after a black hole, if one is on) and starts its pumps.
fn connect(client: TcpStream, upstream: SocketAddr, s: Arc<Shared>) {
    while s.mode() == Fault::BlackHole && !s.stopped.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let Ok(server) = TcpStream::connect_timeout(&upstream, Duration::from_secs(5)) else {
        let _ = client.shutdown(Shutdown::Both);
        return;
    };
    let _ = (client.set_nodelay(true), server.set_nodelay(true));
    s.accepted.fetch_add(1, Ordering::SeqCst);
    if let (Ok(c), Ok(v)) = (client.try_clone(), server.try_clone()) {
        s.open.lock().unwrap().push((c, v));
    }
    // Set while an armed cut is under way: the server's answer is dropped.
    let mute = Arc::new(AtomicBool::new(false));
    for (from, to, upstream) in [(client.try_clone(), server.try_clone(), true), (server.try_clone(), client.try_clone(), false)] {
        let (Ok(from), Ok(to)) = (from, to) else { continue };
        let (s, mute) = (s.clone(), mute.clone());
        std::thread::spawn(move || pump(from, to, &s, &mute, upstream));
    }
}

/// Whether `chunk` holds an armed pattern; disarms one cut if so.
fn take_cut(s: &Shared, chunk: &[u8]) -> bool {
    let mut armed = s.cut_after.lock().unwrap();
    let Some((pattern, left)) = armed.as_mut() else { return false };
    if *left == 0 || !chunk.windows(pattern.len()).any(|w| w == pattern.as_slice()) {
        return false;
    }
    *left -= 1;
    true
}

/// Copies `from` to `to` under the current mode until either side ends. `upstream`: the
/// client-to-server direction, where armed cuts are looked for.
fn pump(mut from: TcpStream, mut to: TcpStream, s: &Shared, mute: &AtomicBool, upstream: bool) {
    let mut buf = vec![0u8; 64 * 1024];
    // Reply bytes not yet forming a whole Kafka frame (with a rewrite only).
    let mut frames = Vec::new();
    let _ = from.set_read_timeout(Some(Duration::from_millis(100)));
    loop {
        if s.stopped.load(Ordering::SeqCst) {
            break;
        }
        match s.mode() {
            Fault::Stall => {
                std::thread::sleep(Duration::from_millis(20));
                // A connection cut meanwhile ends the pump.
                if from.peek(&mut [0u8; 1]).is_ok_and(|n| n == 0) {
                    break;
                }
                continue;
            }
            Fault::BlackHole => {
                // Not even a close is seen through a black hole.
                std::thread::sleep(Duration::from_millis(20));
                continue;
            }
            _ => {}
        }
        let cap = match s.mode() {
            Fault::Throttle(rate) => (rate as usize / 10).clamp(1, buf.len()),
            _ => buf.len(),
        };
        let n = match from.read(&mut buf[..cap]) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => continue,
            Err(_) => break,
        };
        match s.mode() {
            Fault::Latency(d) => std::thread::sleep(d),
            Fault::Throttle(rate) => std::thread::sleep(Duration::from_secs_f64(n as f64 / f64::from(rate.max(1)))),
            _ => {}
        }
        if !upstream && mute.load(Ordering::SeqCst) {
            continue;
        }
        let cut = upstream && take_cut(s, &buf[..n]);
        if cut {
            mute.store(true, Ordering::SeqCst);
        }
        let written = match (&s.rewrite, upstream) {
            (Some((from, to_bytes)), false) => {
                frames.extend_from_slice(&buf[..n]);
                forward_frames(&mut frames, &mut to, from, to_bytes)
            }
            _ => to.write_all(&buf[..n]),
        };
        if written.is_err() {
            break;
        }
        if cut {
            // The server acts on the request; its answer is dropped, then both sides go.
            std::thread::sleep(Duration::from_millis(500));
            s.pattern_cuts.fetch_add(1, Ordering::SeqCst);
            break;
        }
    }
    let delay = *s.slow_close.lock().unwrap();
    if !delay.is_zero() {
        std::thread::sleep(delay);
    }
    let _ = from.shutdown(Shutdown::Both);
    let _ = to.shutdown(Shutdown::Both);
}

/// Writes the whole Kafka frames at the start of `pending` to `to`, each with every `from`
/// replaced by `to_bytes`, and keeps the rest in `pending`.
fn forward_frames(pending: &mut Vec<u8>, to: &mut TcpStream, from: &[u8], to_bytes: &[u8]) -> std::io::Result<()> {
    let mut start = 0;
    while pending.len() - start >= 4 {
        let size = i32::from_be_bytes(pending[start..start + 4].try_into().unwrap()).max(0) as usize;
        let end = start + 4 + size;
        if pending.len() < end {
            break;
        }
        let frame = &mut pending[start..end];
        let mut i = 0;
        while i + from.len() <= frame.len() {
            if &frame[i..i + from.len()] == from {
                frame[i..i + from.len()].copy_from_slice(to_bytes);
                i += from.len();
            } else {
                i += 1;
            }
        }
        to.write_all(&pending[start..end])?;
        start = end;
    }
    pending.drain(..start);
    Ok(())
}
