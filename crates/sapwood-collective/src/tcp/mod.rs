//! One worker per process, over TCP: the ring algorithms on a full mesh of connections,
//! without `mpirun`.
//!
//! Rank 0 listens on the coordinator address; every other rank connects to it and
//! presents the job's token, its rank, the world size and the port of its own listener.
//! Once all have arrived, rank 0 answers each with the table of addresses, and every pair
//! of ranks above 0 connects (the higher to the lower, presenting the token again). A
//! connection with a wrong token, another protocol version, a rank out of range or taken,
//! or bytes that are no handshake at all is refused, logged on stderr and closed; the job
//! goes on waiting for the real worker. Every wait is bounded by the timeout: a rank that
//! never arrives, dies or goes silent is an error naming it, never a hang.

pub mod frame;
mod link;

use std::io::Write;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use sapwood_core::{Error, Result};

pub use frame::PROTOCOL;
use frame::{
    decode_answer, encode_answer, read_frame, write_frame, Hello, ReadFrame, MAX_HANDSHAKE,
};
use link::{Link, LinkError};

use crate::transport::Transport;

/// How long a connection may take to present its hello before it is dropped (so one stray
/// client cannot hold up the rendezvous).
const HANDSHAKE_READ: Duration = Duration::from_secs(5);

/// How often a rank retries the coordinator while it is not listening yet.
const RETRY: Duration = Duration::from_millis(50);

/// Where and how one worker joins a TCP job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TcpConfig {
    /// This worker's rank, 0 ≤ rank < world; rank 0 is the coordinator.
    pub rank: usize,
    /// Workers in the job.
    pub world: usize,
    /// `host:port` rank 0 listens on and the others connect to.
    pub coordinator: String,
    /// The job's shared secret (a random string given to every rank).
    pub token: String,
    /// Address the listeners bind (default: loopback when the coordinator is a loopback
    /// address, else every interface).
    pub bind: Option<IpAddr>,
    /// Ports the peer listeners may use, inclusive (default: any free port).
    pub ports: Option<(u16, u16)>,
    /// The longest wait for any peer: to arrive, to send, to take a message.
    pub timeout: Duration,
}

/// One worker's connections to every other worker of a TCP job.
pub struct TcpTransport {
    rank: usize,
    /// links[r] is the connection to rank r (None for this rank)
    links: Vec<Option<Link>>,
    /// messages a rank sent to itself
    own: std::collections::VecDeque<Vec<u8>>,
    timeout: Duration,
}

fn config_error(what: impl std::fmt::Display) -> Error {
    Error::Collective(format!("tcp collective: {what}"))
}

impl TcpConfig {
    fn check(&self) -> Result<()> {
        if self.world == 0 {
            return Err(config_error("world must be at least 1"));
        }
        if self.rank >= self.world {
            return Err(config_error(format!(
                "rank {} is out of range for a world of {} (ranks are 0..{})",
                self.rank,
                self.world,
                self.world - 1
            )));
        }
        if self.world > u32::MAX as usize {
            return Err(config_error(format!("world {} is too large", self.world)));
        }
        if self.token.is_empty() {
            return Err(config_error(
                "the token is empty: give every rank the same random string",
            ));
        }
        if self.token.len() > 1024 {
            return Err(config_error("the token is longer than 1024 bytes"));
        }
        if let Some((lo, hi)) = self.ports {
            if lo > hi {
                return Err(config_error(format!("port range {lo}-{hi} is empty")));
            }
        }
        Ok(())
    }

    /// The coordinator's socket address.
    fn coordinator_addr(&self) -> Result<SocketAddr> {
        self.coordinator
            .to_socket_addrs()
            .map_err(|e| config_error(format!("coordinator `{}`: {e}", self.coordinator)))?
            .next()
            .ok_or_else(|| {
                config_error(format!(
                    "coordinator `{}` resolves to no address",
                    self.coordinator
                ))
            })
    }

    /// The address listeners bind when none is given.
    fn bind_ip(&self, coordinator: SocketAddr) -> IpAddr {
        self.bind.unwrap_or(match coordinator.ip() {
            ip if ip.is_loopback() => ip,
            IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
        })
    }
}

/// A listener for rank 0 of a job whose coordinator is `host`, on a port the system
/// chooses, bound where [`TcpTransport::connect`] would bind it (`bind`, else loopback for a
/// loopback host, else every interface). Give it to [`TcpTransport::connect_listening`]
/// with the coordinator `host:port` of its port: choosing a free port and binding it later
/// races every socket opened in between.
pub fn coordinator_listener(host: &str, bind: Option<IpAddr>) -> Result<TcpListener> {
    let target = if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]:0")
    } else {
        format!("{host}:0")
    };
    let resolved = target
        .to_socket_addrs()
        .map_err(|e| config_error(format!("rank 0 cannot resolve its host `{host}`: {e}")))?
        .next()
        .ok_or_else(|| config_error(format!("rank 0's host `{host}` resolves to no address")))?;
    let cfg = TcpConfig {
        rank: 0,
        world: 1,
        coordinator: target,
        token: String::new(),
        bind,
        ports: None,
        timeout: Duration::ZERO,
    };
    let ip = cfg.bind_ip(resolved);
    TcpListener::bind(SocketAddr::new(ip, 0))
        .map_err(|e| config_error(format!("rank 0 cannot listen on {ip} (host `{host}`): {e}")))
}

/// A refused connection: logged so an operator sees strays and misconfigured workers.
fn log_refusal(me: usize, from: Option<SocketAddr>, why: &str) {
    let from = from.map_or("an unknown address".to_string(), |a| a.to_string());
    eprintln!("sapwood tcp: rank {me} refused a connection from {from}: {why}");
}

/// Reads from a stream until a deadline for the whole exchange, however the bytes trickle
/// in: a peer sending one byte a second cannot stretch its handshake past the deadline.
struct Until<'a> {
    stream: &'a TcpStream,
    deadline: Instant,
}

impl std::io::Read for Until<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let left = self.deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(std::io::ErrorKind::TimedOut.into());
        }
        self.stream.set_read_timeout(Some(left))?;
        (&mut &*self.stream).read(buf)
    }
}

/// Why a handshake frame did not arrive.
#[derive(Debug)]
enum Unheard {
    /// The peer closed the connection (or reset it) before its frame.
    Closed,
    /// The whole frame did not arrive within the wait.
    Late(Duration),
    /// A first frame longer than any handshake.
    TooLong(u64),
    /// Another transport error.
    Broken(std::io::Error),
}

impl std::fmt::Display for Unheard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unheard::Closed => write!(f, "it closed the connection before its hello"),
            Unheard::Late(w) => write!(f, "no whole hello within {} s", w.as_secs_f64()),
            Unheard::TooLong(n) => {
                write!(f, "not a Sapwood worker (a first frame of {n} bytes)")
            }
            Unheard::Broken(e) => write!(f, "a broken hello ({e})"),
        }
    }
}

/// Reads a handshake frame, all of it within `wait`.
fn read_handshake(stream: &mut TcpStream, wait: Duration) -> std::result::Result<Vec<u8>, Unheard> {
    let mut until = Until {
        stream,
        deadline: Instant::now() + wait.max(Duration::from_millis(1)),
    };
    // unbuffered: a buffer could swallow the start of the first message behind the answer
    match read_frame(&mut until, MAX_HANDSHAKE) {
        Ok(ReadFrame::Frame(f)) => Ok(f),
        Ok(ReadFrame::Closed) => Err(Unheard::Closed),
        Ok(ReadFrame::TooLong(n)) => Err(Unheard::TooLong(n)),
        Err(e) => Err(match e.kind() {
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => Unheard::Late(wait),
            std::io::ErrorKind::ConnectionReset
            | std::io::ErrorKind::ConnectionAborted
            | std::io::ErrorKind::UnexpectedEof => Unheard::Closed,
            _ => Unheard::Broken(e),
        }),
    }
}

/// Handshakes served at once; connections beyond are refused at once (a flood of strays
/// cannot make threads without bound).
const MAX_PENDING_HANDSHAKES: usize = 64;

fn send_handshake(stream: &mut TcpStream, payload: &[u8]) -> std::io::Result<()> {
    write_frame(stream, payload)?;
    stream.flush()
}

/// Accepts connections on `listener` until `expected` ranks have presented a valid hello,
/// refusing and logging the others; `accept(hello)` says whether a hello is one of them.
fn accept_ranks(
    me: usize,
    listener: &TcpListener,
    deadline: Instant,
    cfg: &TcpConfig,
    mut missing: Vec<usize>,
    what: &str,
) -> Result<Vec<(usize, TcpStream, Hello)>> {
    listener
        .set_nonblocking(true)
        .map_err(|e| Error::Collective(format!("rank {me}: listener: {e}")))?;
    let mut got = Vec::new();
    // every handshake is read on a thread of its own, bounded as a whole: strays that send
    // nothing, or a byte a second, never hold up a real worker behind them
    let (done, heard) = std::sync::mpsc::channel();
    let mut pending = 0usize;
    while !missing.is_empty() {
        while let Ok((mut stream, addr, hello)) = heard.try_recv() {
            pending -= 1;
            let hello: std::result::Result<Hello, String> = hello;
            let verdict = hello.and_then(|h| {
                if h.token != cfg.token {
                    Err("a wrong token (it belongs to another job)".to_string())
                } else if h.world as usize != cfg.world {
                    Err(format!(
                        "a world of {} where this job has {}",
                        h.world, cfg.world
                    ))
                } else if !missing.contains(&(h.rank as usize)) {
                    Err(
                        if (h.rank as usize) < cfg.world
                            && got.iter().any(|(r, _, _)| *r == h.rank as usize)
                        {
                            format!("rank {} is already connected", h.rank)
                        } else {
                            format!("rank {} is not one this rank waits for", h.rank)
                        },
                    )
                } else {
                    Ok(h)
                }
            });
            match verdict {
                Ok(h) => {
                    missing.retain(|&r| r != h.rank as usize);
                    got.push((h.rank as usize, stream, h));
                }
                Err(why) => {
                    log_refusal(me, Some(addr), &why);
                    let _ = send_handshake(&mut stream, &encode_answer(Err(&why)));
                }
            }
        }
        if missing.is_empty() {
            break;
        }
        let now = Instant::now();
        if now >= deadline {
            let list: Vec<String> = missing.iter().map(|r| r.to_string()).collect();
            return Err(Error::Collective(format!(
                "rank {me} waited {} s (comm_timeout) for {what} rank(s) {}: they never \
                 connected (not started, a wrong coordinator address or token, or a firewall)",
                cfg.timeout.as_secs_f64(),
                list.join(", ")
            )));
        }
        let (mut stream, addr) = match listener.accept() {
            Ok(s) => s,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(5));
                continue;
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                log_refusal(me, None, &format!("accept failed: {e}"));
                continue;
            }
        };
        if pending >= MAX_PENDING_HANDSHAKES {
            log_refusal(
                me,
                Some(addr),
                &format!("{MAX_PENDING_HANDSHAKES} handshakes are already under way"),
            );
            continue;
        }
        let _ = stream.set_nonblocking(false);
        let wait = HANDSHAKE_READ.min(deadline.saturating_duration_since(now));
        let done = done.clone();
        pending += 1;
        let spawned = std::thread::Builder::new()
            .name("sapwood-handshake".into())
            .spawn(move || {
                let hello = read_handshake(&mut stream, wait)
                    .map_err(|e| e.to_string())
                    .and_then(|b| Hello::decode(&b));
                // the rendezvous may be over (it no longer listens): the stray is dropped
                let _ = done.send((stream, addr, hello));
            });
        if let Err(e) = spawned {
            pending -= 1;
            log_refusal(me, Some(addr), &format!("no thread for its handshake: {e}"));
        }
    }
    Ok(got)
}

/// Connects to `addr` (retrying while nothing listens) and presents `hello`; returns the
/// stream and the accepted answer's payload.
fn join(
    me: usize,
    addr: SocketAddr,
    hello: &Hello,
    deadline: Instant,
    cfg: &TcpConfig,
    whom: &str,
) -> Result<(TcpStream, Vec<u8>)> {
    let timed_out = || {
        Error::Collective(format!(
            "rank {me} could not join {whom} at {addr} within {} s (comm_timeout): it is not \
             running, not reachable, or did not answer",
            cfg.timeout.as_secs_f64()
        ))
    };
    let mut stream = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(timed_out());
        }
        match TcpStream::connect_timeout(&addr, left.min(Duration::from_secs(5))) {
            Ok(s) => break s,
            Err(_) => std::thread::sleep(RETRY.min(left)),
        }
    };
    let io = |e: std::io::Error| Error::Collective(format!("rank {me}: {whom} at {addr}: {e}"));
    send_handshake(&mut stream, &hello.encode()).map_err(io)?;
    let left = deadline.saturating_duration_since(Instant::now());
    let answer = read_handshake(&mut stream, left).map_err(|why| match why {
        Unheard::Late(_) => timed_out(),
        Unheard::Closed => Error::Collective(format!(
            "rank {me}: {whom} at {addr} closed the connection without answering this \
             worker's hello: it ended or gave up waiting (its own error says why)"
        )),
        why => Error::Collective(format!("rank {me}: {whom} at {addr} answered with {why}")),
    })?;
    match decode_answer(&answer) {
        Ok(Ok(payload)) => Ok((stream, payload)),
        Ok(Err(reason)) => Err(Error::Collective(format!(
            "rank {me}: {whom} at {addr} refused this worker: {reason}"
        ))),
        Err(m) => Err(Error::Collective(format!(
            "rank {me}: {whom} at {addr} sent {m}"
        ))),
    }
}

/// Binds a listener on `ip` at a port of `ports` (any free port when None).
fn bind_listener(me: usize, ip: IpAddr, ports: Option<(u16, u16)>) -> Result<TcpListener> {
    let (lo, hi) = ports.unwrap_or((0, 0));
    let mut last = None;
    for port in lo..=hi {
        match TcpListener::bind(SocketAddr::new(ip, port)) {
            Ok(l) => return Ok(l),
            Err(e) => last = Some(e),
        }
    }
    Err(Error::Collective(format!(
        "rank {me}: no port to listen on at {ip} in {lo}-{hi}: {}",
        last.map_or("empty range".into(), |e| e.to_string())
    )))
}

/// The address table rank 0 sends: one `ip port` line per rank.
fn encode_table(addrs: &[SocketAddr]) -> Vec<u8> {
    addrs
        .iter()
        .map(|a| format!("{} {}\n", a.ip(), a.port()))
        .collect::<String>()
        .into_bytes()
}

/// The address table of rank 0's answer (one `ip port` line per rank of `world`), or None
/// when it is not one.
pub fn decode_table(b: &[u8], world: usize) -> Option<Vec<SocketAddr>> {
    let text = std::str::from_utf8(b).ok()?;
    let addrs: Vec<SocketAddr> = text
        .lines()
        .map(|l| {
            let (ip, port) = l.split_once(' ')?;
            Some(SocketAddr::new(ip.parse().ok()?, port.parse().ok()?))
        })
        .collect::<Option<_>>()?;
    (addrs.len() == world).then_some(addrs)
}

impl TcpTransport {
    /// Joins the job `cfg` describes: returns once this rank is connected to every other,
    /// or with an error naming the ranks that did not arrive within `cfg.timeout`.
    pub fn connect(cfg: &TcpConfig) -> Result<TcpTransport> {
        Self::join_job(cfg, None)
    }

    /// Joins the job as rank 0 on `listener`, already bound to the coordinator's port (see
    /// [`coordinator_listener`]): a port the system chose cannot be taken by another socket
    /// between choosing it and listening on it.
    pub fn connect_listening(cfg: &TcpConfig, listener: TcpListener) -> Result<TcpTransport> {
        if cfg.rank != 0 {
            return Err(config_error(format!(
                "rank {} was given the coordinator's listener: only rank 0 listens there",
                cfg.rank
            )));
        }
        let port = listener
            .local_addr()
            .map_err(|e| config_error(format!("rank 0: listener: {e}")))?
            .port();
        let wanted = cfg.coordinator_addr()?.port();
        if port != wanted {
            return Err(config_error(format!(
                "rank 0's listener is on port {port}, not the coordinator's port {wanted} \
                 (coordinator `{}`)",
                cfg.coordinator
            )));
        }
        Self::join_job(cfg, Some(listener))
    }

    fn join_job(cfg: &TcpConfig, listening: Option<TcpListener>) -> Result<TcpTransport> {
        cfg.check()?;
        let me = cfg.rank;
        let deadline = Instant::now() + cfg.timeout;
        let coordinator = cfg.coordinator_addr()?;
        let ip = cfg.bind_ip(coordinator);
        let mut streams: Vec<Option<TcpStream>> = (0..cfg.world).map(|_| None).collect();
        let hello = |port| Hello {
            rank: me as u32,
            world: cfg.world as u32,
            token: cfg.token.clone(),
            port,
        };
        if me == 0 {
            let listener = match listening {
                Some(l) => l,
                None => {
                    TcpListener::bind(SocketAddr::new(ip, coordinator.port())).map_err(|e| {
                        config_error(format!(
                            "rank 0 cannot listen on {} (coordinator `{}`): {e}",
                            SocketAddr::new(ip, coordinator.port()),
                            cfg.coordinator
                        ))
                    })?
                }
            };
            let arrived = accept_ranks(
                me,
                &listener,
                deadline,
                cfg,
                (1..cfg.world).collect(),
                "the coordinator",
            )?;
            let mut table = vec![coordinator; cfg.world];
            for (r, s, h) in &arrived {
                let seen = s
                    .peer_addr()
                    .map_err(|e| Error::Collective(format!("rank 0: rank {r}: {e}")))?;
                table[*r] = SocketAddr::new(seen.ip(), h.port);
            }
            let answer = encode_answer(Ok(&encode_table(&table)));
            for (r, mut s, _) in arrived {
                send_handshake(&mut s, &answer).map_err(|e| {
                    Error::Collective(format!("rank 0: rank {r} left during the rendezvous: {e}"))
                })?;
                streams[r] = Some(s);
            }
        } else {
            let listener = bind_listener(me, ip, cfg.ports)?;
            let port = listener
                .local_addr()
                .map_err(|e| Error::Collective(format!("rank {me}: listener: {e}")))?
                .port();
            let (s0, payload) = join(
                me,
                coordinator,
                &hello(port),
                deadline,
                cfg,
                "the coordinator (rank 0)",
            )?;
            let table = decode_table(&payload, cfg.world).ok_or_else(|| {
                Error::Collective(format!(
                    "rank {me}: the coordinator sent a malformed address table"
                ))
            })?;
            streams[0] = Some(s0);
            // the higher rank connects to the lower: each rank waits only on lower ranks,
            // which wait on lower ones still, so the mesh forms without a cycle
            for (r, &addr) in table.iter().enumerate().take(me).skip(1) {
                let (s, _) = join(me, addr, &hello(0), deadline, cfg, &format!("rank {r}"))?;
                streams[r] = Some(s);
            }
            let arrived = accept_ranks(
                me,
                &listener,
                deadline,
                cfg,
                (me + 1..cfg.world).collect(),
                "peer",
            )?;
            for (r, mut s, _) in arrived {
                send_handshake(&mut s, &encode_answer(Ok(&[]))).map_err(|e| {
                    Error::Collective(format!(
                        "rank {me}: rank {r} left during the rendezvous: {e}"
                    ))
                })?;
                streams[r] = Some(s);
            }
        }
        let links = streams
            .into_iter()
            .enumerate()
            .map(|(r, s)| {
                s.map(|s| {
                    Link::start(s, cfg.timeout)
                        .map_err(|e| Error::Collective(format!("rank {me}: link to rank {r}: {e}")))
                })
                .transpose()
            })
            .collect::<Result<_>>()?;
        Ok(TcpTransport {
            rank: me,
            links,
            own: Default::default(),
            timeout: cfg.timeout,
        })
    }

    /// The error of a link to `peer` that failed.
    fn failed(&self, peer: usize, e: LinkError) -> Error {
        let me = self.rank;
        Error::Collective(match e {
            LinkError::Closed => format!(
                "rank {me}: rank {peer} closed its connection: it stopped (an error, a crash \
                 or a kill)"
            ),
            LinkError::Io(m) => format!("rank {me}: the connection to rank {peer} failed: {m}"),
            LinkError::Malformed(m) => format!("rank {me}: rank {peer} sent {m}"),
        })
    }

    fn link(&mut self, peer: usize) -> Result<&mut Link> {
        let me = self.rank;
        let size = self.links.len();
        self.links
            .get_mut(peer)
            .and_then(Option::as_mut)
            .ok_or_else(|| {
                Error::Collective(format!("rank {me}: no rank {peer} in a world of {size}"))
            })
    }
}

impl Transport for TcpTransport {
    fn rank(&self) -> usize {
        self.rank
    }

    fn size(&self) -> usize {
        self.links.len()
    }

    fn send(&mut self, to: usize, msg: Vec<u8>) -> Result<()> {
        if to == self.rank {
            self.own.push_back(msg);
            return Ok(());
        }
        let sent = self.link(to)?.send(msg);
        sent.map_err(|e| self.failed(to, e))
    }

    fn recv(&mut self, from: usize) -> Result<Vec<u8>> {
        if from == self.rank {
            return self.own.pop_front().ok_or_else(|| {
                Error::Collective(format!("rank {from} waits for a message to itself"))
            });
        }
        let timeout = self.timeout;
        let got = self.link(from)?.recv(timeout);
        match got {
            Ok(Some(msg)) => Ok(msg),
            Ok(None) => Err(Error::Collective(format!(
                "rank {} waited {} s (comm_timeout) for a message from rank {from}: it died, \
                 stopped responding, or waits on a rank that did",
                self.rank,
                timeout.as_secs_f64()
            ))),
            Err(e) => Err(self.failed(from, e)),
        }
    }
}
