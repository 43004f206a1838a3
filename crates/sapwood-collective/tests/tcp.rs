//! The TCP transport on loopback: exact sums for 1–4 ranks and every codec, strays refused
//! without harm, and a dead, silent or absent rank ends the others with an error naming it
//! within the timeout.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use sapwood_collective::tcp::{coordinator_listener, TcpConfig, TcpTransport};
use sapwood_collective::{RingCollective, Transport};
use sapwood_core::collective::Collective;
use sapwood_core::params::CommCodec;

/// Rank 0's listener and the loopback coordinator address it announces: bound first, so no
/// other socket can take the port before rank 0 listens (one merely found free can be).
fn listening() -> (TcpListener, String) {
    let l = coordinator_listener("127.0.0.1", None).unwrap();
    let c = format!("127.0.0.1:{}", l.local_addr().unwrap().port());
    (l, c)
}

/// A loopback address with a port free right now (where nobody is to listen).
fn free_coordinator() -> String {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    format!("127.0.0.1:{}", l.local_addr().unwrap().port())
}

fn config(rank: usize, world: usize, coordinator: &str, timeout: Duration) -> TcpConfig {
    TcpConfig {
        rank,
        world,
        coordinator: coordinator.to_string(),
        token: "test-token-0123".into(),
        bind: None,
        ports: None,
        timeout,
    }
}

/// Runs `f` on `n` ranks (threads of this process, each with its own sockets); rank 0
/// joins on a listener bound before the others are told its port.
fn on_ranks<T: Send>(
    n: usize,
    codec: CommCodec,
    f: impl Fn(&mut dyn Collective) -> T + Sync,
) -> Vec<T> {
    let listener = coordinator_listener("127.0.0.1", None).unwrap();
    let coordinator = format!("127.0.0.1:{}", listener.local_addr().unwrap().port());
    let mut listener = Some(listener);
    let f = &f;
    let coordinator = &coordinator;
    std::thread::scope(|s| {
        let hs: Vec<_> = (0..n)
            .map(|r| {
                let listening = if r == 0 { listener.take() } else { None };
                s.spawn(move || {
                    let cfg = config(r, n, coordinator, Duration::from_secs(30));
                    let t = match listening {
                        Some(l) => TcpTransport::connect_listening(&cfg, l),
                        None => TcpTransport::connect(&cfg),
                    }
                    .unwrap();
                    f(&mut RingCollective::new(t, codec))
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

#[test]
fn one_to_four_ranks_sum_exactly_with_every_codec() {
    for n in 1..=4 {
        for codec in [
            CommCodec::None,
            CommCodec::Packed,
            CommCodec::Sparse,
            CommCodec::Auto,
        ] {
            let len = 10_007;
            let value = |r: usize, i: usize| -> i64 {
                let h = sapwood_core::hash::hash64(
                    7,
                    sapwood_core::hash::Stream::RowSample,
                    r as u32,
                    i as u64,
                );
                if h.is_multiple_of(4) {
                    0
                } else {
                    (h % 2001) as i64 - 1000
                }
            };
            let want: Vec<i64> = (0..len)
                .map(|i| (0..n).map(|r| value(r, i)).sum())
                .collect();
            let got = on_ranks(n, codec, |c| {
                let mut v: Vec<i64> = (0..len).map(|i| value(c.rank(), i)).collect();
                c.allreduce_sum(&mut v, 1000 * n as u64).unwrap();
                let blocks = sapwood_collective::ring::even_blocks(len, n);
                let mut w: Vec<i64> = (0..len).map(|i| value(c.rank(), i)).collect();
                c.reduce_scatter(&mut w, &blocks, 1000 * n as u64).unwrap();
                let mine = w[blocks[c.rank()].clone()].to_vec();
                let gathered = c.allgather(&[c.rank() as u8; 5]).unwrap();
                // to the last rank only, then from it to all
                let to_last = c.gather(&[c.rank() as u8; 3], n - 1).unwrap();
                let mut back = to_last.map(|g| g.concat()).unwrap_or_default();
                c.broadcast(&mut back, n - 1).unwrap();
                (c.rank(), v, mine, blocks[c.rank()].clone(), gathered, back)
            });
            for (r, v, mine, block, gathered, back) in got {
                let concat: Vec<u8> = (0..n).flat_map(|q| [q as u8; 3]).collect();
                assert_eq!(back, concat, "{n} ranks, rank {r}");
                assert_eq!(v, want, "{n} ranks, {codec:?}, rank {r}");
                assert_eq!(mine, want[block].to_vec(), "{n} ranks, {codec:?}, rank {r}");
                let expect: Vec<Vec<u8>> = (0..n).map(|q| vec![q as u8; 5]).collect();
                assert_eq!(gathered, expect);
            }
        }
    }
}

/// Connects to `coordinator` until it listens, then sends `bytes` and returns what comes
/// back before the connection closes.
fn stray(coordinator: &str, bytes: &[u8]) -> Vec<u8> {
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut s = loop {
        match TcpStream::connect(coordinator) {
            Ok(s) => break s,
            Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(10)),
            Err(e) => panic!("the coordinator never listened: {e}"),
        }
    };
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s.write_all(bytes).unwrap();
    let mut back = Vec::new();
    let _ = s.read_to_end(&mut back);
    back
}

fn hello(rank: u32, world: u32, token: &str, version: u32) -> Vec<u8> {
    let mut b = b"SAPWOOD\0".to_vec();
    b.extend(version.to_le_bytes());
    b.extend(rank.to_le_bytes());
    b.extend(world.to_le_bytes());
    b.extend(0u16.to_le_bytes());
    b.extend(token.as_bytes());
    let mut f = (b.len() as u64).to_le_bytes().to_vec();
    f.extend(b);
    f
}

#[test]
fn strays_with_a_wrong_token_version_or_garbage_are_refused_and_the_job_goes_on() {
    let (listener, coordinator) = listening();
    let c = coordinator.as_str();
    std::thread::scope(|s| {
        let rank0 = s.spawn(move || {
            let cfg = config(0, 2, c, Duration::from_secs(30));
            let t = TcpTransport::connect_listening(&cfg, listener).unwrap();
            let mut coll = RingCollective::new(t, CommCodec::Auto);
            let mut v = [5i64, 6];
            coll.allreduce_sum(&mut v, 100).unwrap();
            v
        });
        // the strays arrive before the real rank 1
        let wrong_token = stray(c, &hello(1, 2, "not-the-token", 1));
        assert!(
            String::from_utf8_lossy(&wrong_token).contains("wrong token"),
            "{wrong_token:?}"
        );
        let old = stray(c, &hello(1, 2, "test-token-0123", 99));
        assert!(String::from_utf8_lossy(&old).contains("protocol version 99"));
        let garbage = stray(c, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n");
        assert!(!String::from_utf8_lossy(&garbage).is_empty());
        let out_of_range = stray(c, &hello(7, 2, "test-token-0123", 1));
        assert!(String::from_utf8_lossy(&out_of_range).contains("rank 7"));
        let rank1 = s.spawn(|| {
            let t = TcpTransport::connect(&config(1, 2, c, Duration::from_secs(30))).unwrap();
            let mut coll = RingCollective::new(t, CommCodec::Auto);
            let mut v = [1i64, -1];
            coll.allreduce_sum(&mut v, 100).unwrap();
            v
        });
        assert_eq!(rank0.join().unwrap(), [6, 5]);
        assert_eq!(rank1.join().unwrap(), [6, 5]);
    });
}

#[test]
fn a_rank_that_never_arrives_is_named_within_the_timeout() {
    let (listener, coordinator) = listening();
    let start = Instant::now();
    let cfg = config(0, 3, &coordinator, Duration::from_secs(2));
    let err = TcpTransport::connect_listening(&cfg, listener)
        .err()
        .expect("ranks 1 and 2 never come")
        .to_string();
    assert!(start.elapsed() < Duration::from_secs(10));
    assert!(
        err.contains("rank(s) 1, 2") && err.contains("comm_timeout"),
        "{err}"
    );
    // a rank whose coordinator never listens
    let err = TcpTransport::connect(&config(1, 2, &free_coordinator(), Duration::from_secs(2)))
        .err()
        .expect("no rank 0")
        .to_string();
    assert!(err.contains("could not join the coordinator"), "{err}");
}

#[test]
fn a_rank_that_dies_or_falls_silent_stops_the_others_within_the_timeout() {
    // dies: its sockets close, so the others fail at once, naming it
    let out = on_ranks(3, CommCodec::Auto, |c| {
        let mut v = vec![1i64; 1000];
        c.allreduce_sum(&mut v, 10).unwrap();
        if c.rank() == 2 {
            return Ok(Duration::ZERO);
        }
        let start = Instant::now();
        let r = c.allreduce_sum(&mut v, 10);
        r.map(|_| start.elapsed()).map_err(|e| e.to_string())
    });
    for (rank, r) in out.iter().enumerate().take(2) {
        let err = r.as_ref().expect_err("rank 2 left");
        // rank 2 left; a rank may see the other survivor close first, once that one failed:
        // either way the message names a rank that closed
        assert!(
            (0..3).any(|k| k != rank && err.contains(&format!("rank {k} closed its connection"))),
            "rank {rank}: {err}"
        );
    }
    // silent: alive but never sending; the others time out naming whom they waited for
    let (listener, coordinator) = listening();
    let c = coordinator.as_str();
    let (done, wait) = std::sync::mpsc::channel::<()>();
    std::thread::scope(|s| {
        let silent = s.spawn(move || {
            let t = TcpTransport::connect(&config(1, 2, c, Duration::from_secs(2))).unwrap();
            // silent until rank 0 has timed out (a fixed sleep would race a loaded machine)
            let _ = wait.recv_timeout(Duration::from_secs(60));
            drop(t);
        });
        let cfg = config(0, 2, c, Duration::from_secs(2));
        let t = TcpTransport::connect_listening(&cfg, listener).unwrap();
        let mut coll = RingCollective::new(t, CommCodec::None);
        let start = Instant::now();
        let mut v = vec![1i64; 100];
        let err = coll.allreduce_sum(&mut v, 10).unwrap_err().to_string();
        let took = start.elapsed();
        done.send(()).unwrap();
        // never before the timeout; well within a generous bound after it
        assert!(
            took >= Duration::from_secs(2) && took < Duration::from_secs(30),
            "{took:?}"
        );
        assert!(
            err.contains("waited 2 s (comm_timeout) for a message from rank 1"),
            "{err}"
        );
        silent.join().unwrap();
    });
}

#[test]
fn a_peer_that_stops_reading_fails_the_sender_within_the_timeout() {
    // rank 1 is played by hand: a correct hello, then it neither reads nor sends
    let (rank0_listener, coordinator) = listening();
    let c = coordinator.as_str();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::scope(|s| {
        let fake = s.spawn(move || {
            let deadline = Instant::now() + Duration::from_secs(20);
            let mut st = loop {
                match TcpStream::connect(c) {
                    Ok(st) => break st,
                    Err(_) if Instant::now() < deadline => {
                        std::thread::sleep(Duration::from_millis(10))
                    }
                    Err(e) => panic!("{e}"),
                }
            };
            let mut h = hello(1, 2, "test-token-0123", 1);
            // the listener port field
            let at = 8 + 8 + 12;
            h[at..at + 2].copy_from_slice(&port.to_le_bytes());
            st.write_all(&h).unwrap();
            std::thread::sleep(Duration::from_secs(8));
            drop(listener);
        });
        let cfg = config(0, 2, c, Duration::from_secs(2));
        let mut t = TcpTransport::connect_listening(&cfg, rank0_listener).unwrap();
        let start = Instant::now();
        // far more than the socket buffers hold: the writer blocks, then times out
        let err = loop {
            if let Err(e) = t.send(1, vec![7u8; 1 << 22]) {
                break e.to_string();
            }
            assert!(
                start.elapsed() < Duration::from_secs(5),
                "sends never failed"
            );
            std::thread::sleep(Duration::from_millis(50));
        };
        assert!(
            err.contains("rank 1") && err.contains("stopped reading"),
            "{err}"
        );
        fake.join().unwrap();
    });
}

#[test]
fn configuration_errors_name_the_setting() {
    let bad = |cfg: TcpConfig| TcpTransport::connect(&cfg).err().unwrap().to_string();
    let c = free_coordinator();
    assert!(bad(config(3, 3, &c, Duration::from_secs(1))).contains("rank 3 is out of range"));
    let mut no_token = config(0, 2, &c, Duration::from_secs(1));
    no_token.token.clear();
    assert!(bad(no_token).contains("token is empty"));
    assert!(bad(config(
        1,
        2,
        "no-such-host.invalid:1",
        Duration::from_secs(1)
    ))
    .contains("coordinator `no-such-host.invalid:1`"));
}

/// Connects to `coordinator` until it listens.
fn connect_when_listening(coordinator: &str) -> TcpStream {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match TcpStream::connect(coordinator) {
            Ok(s) => return s,
            Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(10)),
            Err(e) => panic!("the coordinator never listened: {e}"),
        }
    }
}

/// A hostile client that announces a 100-byte hello and then sends one byte every 0.7 s;
/// returns how long the coordinator let it go on (until it answered or closed).
fn trickle(coordinator: &str) -> Duration {
    let mut s = connect_when_listening(coordinator);
    let start = Instant::now();
    s.set_read_timeout(Some(Duration::from_millis(700)))
        .unwrap();
    let _ = s.write_all(&100u64.to_le_bytes());
    while start.elapsed() < Duration::from_secs(20) {
        if s.write_all(b"x").is_err() {
            break;
        }
        let mut b = [0u8; 64];
        match s.read(&mut b) {
            // an answer (the refusal) or the close: the coordinator is done with it
            Ok(_) => break,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => break,
        }
    }
    start.elapsed()
}

/// Strays that connect first and send nothing (six) or trickle a byte at a time (two) hold
/// no one up: handshakes are served at once, each bounded as a whole (5 s), so the real
/// rank joins at once and the trickling ones are cut off within the bound. Served one at a
/// time with a per-read limit, the six idle ones cost 30 s (past the 8 s timeout, the job
/// failed) and a trickle held the rendezvous for as long as it liked.
#[test]
fn idle_and_trickling_strays_never_hold_up_the_rendezvous() {
    let (listener, coordinator) = listening();
    let c = coordinator.as_str();
    let timeout = Duration::from_secs(8);
    std::thread::scope(|s| {
        let rank0 = s.spawn(move || {
            let t = TcpTransport::connect_listening(&config(0, 2, c, timeout), listener).unwrap();
            let mut coll = RingCollective::new(t, CommCodec::Auto);
            let mut v = [5i64, 6];
            coll.allreduce_sum(&mut v, 100).unwrap();
            v
        });
        let idle: Vec<TcpStream> = (0..6).map(|_| connect_when_listening(c)).collect();
        let trickles: Vec<_> = (0..2).map(|_| s.spawn(|| trickle(c))).collect();
        std::thread::sleep(Duration::from_millis(300));
        let joined = Instant::now();
        let rank1 = s.spawn(|| {
            let t = TcpTransport::connect(&config(1, 2, c, timeout)).unwrap();
            let mut coll = RingCollective::new(t, CommCodec::Auto);
            let mut v = [1i64, -1];
            coll.allreduce_sum(&mut v, 100).unwrap();
            v
        });
        assert_eq!(rank1.join().unwrap(), [6, 5]);
        assert!(
            // generous for a loaded machine; served one at a time the six idle strays alone
            // cost 30 s
            joined.elapsed() < Duration::from_secs(6),
            "rank 1 waited {:?} behind the strays",
            joined.elapsed()
        );
        assert_eq!(rank0.join().unwrap(), [6, 5]);
        for t in trickles {
            let held = t.join().unwrap();
            assert!(
                held < Duration::from_secs(7),
                "a trickling stray was served {held:?}"
            );
        }
        drop(idle);
    });
}

/// A joining rank whose coordinator closes the connection without answering (it ended, or
/// gave up waiting) says so, instead of "a broken hello (Connection reset by peer)".
#[test]
fn a_coordinator_that_closes_without_answering_is_reported_as_such() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    std::thread::scope(|s| {
        s.spawn(|| {
            // reads the hello, then closes without a word
            let (mut conn, _) = listener.accept().unwrap();
            let mut b = [0u8; 16];
            let _ = conn.read(&mut b);
        });
        let err = TcpTransport::connect(&config(1, 2, &addr, Duration::from_secs(10)))
            .err()
            .expect("no job to join")
            .to_string();
        assert!(
            err.contains("closed the connection without answering") && err.contains("rank 0"),
            "{err}"
        );
    });
}

#[test]
fn only_rank_0_joins_on_a_listener_and_only_on_the_coordinators_port() {
    let listener = coordinator_listener("127.0.0.1", None).unwrap();
    let port = listener.local_addr().unwrap().port();
    assert!(listener.local_addr().unwrap().ip().is_loopback());
    let coordinator = format!("127.0.0.1:{port}");
    let err = TcpTransport::connect_listening(
        &config(1, 2, &coordinator, Duration::from_secs(1)),
        listener.try_clone().unwrap(),
    )
    .err()
    .unwrap()
    .to_string();
    assert!(
        err.contains("rank 1 was given the coordinator's listener"),
        "{err}"
    );
    let elsewhere = format!("127.0.0.1:{}", if port == 65535 { 1 } else { port + 1 });
    let err = TcpTransport::connect_listening(
        &config(0, 2, &elsewhere, Duration::from_secs(1)),
        listener,
    )
    .err()
    .unwrap()
    .to_string();
    assert!(
        err.contains(&format!("listener is on port {port}")),
        "{err}"
    );
    // every interface for a coordinator that is not loopback
    let wide = coordinator_listener("192.0.2.1", None).unwrap();
    assert!(wide.local_addr().unwrap().ip().is_unspecified());
    let err = coordinator_listener("no such host.invalid", None)
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("cannot resolve its host `no such host.invalid`"),
        "{err}"
    );
}
