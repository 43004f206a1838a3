//! Workers as threads of one process, joined by channels.
//!
//! A worker that stops (an error, a panic) drops its channels, so its peers' next receive
//! fails at once; a worker that hangs is caught by the receive timeout.

use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender};
use std::time::Duration;

use sapwood_core::{Error, Result};

use crate::transport::Transport;

/// One worker's end of an in-process job.
pub struct InProcessTransport {
    rank: usize,
    to: Vec<Sender<Vec<u8>>>,
    from: Vec<Receiver<Vec<u8>>>,
    timeout: Duration,
}

/// The transports of a job of `n` workers; receives wait at most `timeout`.
pub fn in_process(n: usize, timeout: Duration) -> Vec<InProcessTransport> {
    // channel[i][j] carries messages from i to j
    let mut senders: Vec<Vec<Option<Sender<Vec<u8>>>>> =
        (0..n).map(|_| (0..n).map(|_| None).collect()).collect();
    let mut receivers: Vec<Vec<Option<Receiver<Vec<u8>>>>> =
        (0..n).map(|_| (0..n).map(|_| None).collect()).collect();
    for (i, row) in senders.iter_mut().enumerate() {
        for (j, slot) in row.iter_mut().enumerate() {
            let (s, r) = channel();
            *slot = Some(s);
            receivers[j][i] = Some(r);
        }
    }
    senders
        .into_iter()
        .zip(receivers)
        .enumerate()
        .map(|(rank, (to, from))| InProcessTransport {
            rank,
            to: to.into_iter().map(Option::unwrap).collect(),
            from: from.into_iter().map(Option::unwrap).collect(),
            timeout,
        })
        .collect()
}

impl Transport for InProcessTransport {
    fn rank(&self) -> usize {
        self.rank
    }

    fn size(&self) -> usize {
        self.to.len()
    }

    fn send(&mut self, to: usize, msg: Vec<u8>) -> Result<()> {
        self.to[to]
            .send(msg)
            .map_err(|_| Error::Collective(format!("worker {to} has stopped")))
    }

    fn recv(&mut self, from: usize) -> Result<Vec<u8>> {
        self.from[from]
            .recv_timeout(self.timeout)
            .map_err(|e| match e {
                RecvTimeoutError::Timeout => Error::Collective(format!(
                    "worker {from} sent nothing for {} s",
                    self.timeout.as_secs_f64()
                )),
                RecvTimeoutError::Disconnected => {
                    Error::Collective(format!("worker {from} has stopped"))
                }
            })
    }
}
