//! One worker per MPI rank (feature `mpi`): the ring algorithms over MPI point-to-point
//! messages, and packed-lane words summed by `MPI_Allreduce` itself.
//!
//! Every call is non-blocking (`MPI_Isend`, `MPI_Improbe`/`MPI_Imrecv`, `MPI_Iallreduce`)
//! and polled against a deadline, so a rank that died or went silent is Sapwood's error,
//! naming the rank and the timeout, instead of a wait that only OpenMPI's runtime (or
//! nothing, for a rank that hangs) would end. MPI's blocking calls have no timeout.

use std::time::{Duration, Instant};

use mpi::collective::SystemOperation;
use mpi::datatype::Equivalence;
use mpi::environment::Universe;
use mpi::request::{Request, StaticScope};
use mpi::topology::SimpleCommunicator;
use mpi::traits::{Communicator, CommunicatorCollectives, Destination, Source};
use mpi::Threading;
use sapwood_core::{Error, Result};

use crate::transport::Transport;

/// How long a rank waits for a peer when no timeout is given (`comm_timeout`'s default).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// How long a wait spins (yielding) before it sleeps between polls. MPI moves a message's
/// fragments only inside these test calls, so a rank that sleeps also stalls what it sends:
/// with 4 ranks sharing a 1 Gbit/s link, a 2 ms spin trained in 6.2 s and this one in 4.0 s
/// (`bench/comm.py --overlap`). Only long waits (a peer evaluating, a dead peer) sleep.
const SPIN: Duration = Duration::from_millis(50);

/// The longest sleep between two polls (the extra latency of a long wait).
const MAX_PAUSE: Duration = Duration::from_millis(1);

/// The world communicator of an MPI job; MPI is finalised when it is dropped.
pub struct MpiTransport {
    world: SimpleCommunicator,
    timeout: Duration,
    _universe: Universe,
}

impl MpiTransport {
    /// Initialises MPI (once per process) and joins the world communicator; waits for a
    /// peer last at most [`DEFAULT_TIMEOUT`] (see [`MpiTransport::with_timeout`]).
    pub fn init() -> Result<Self> {
        let (universe, level) =
            mpi::initialize_with_threading(Threading::Serialized).ok_or_else(|| {
                Error::Collective("MPI is already initialised in this process".into())
            })?;
        if level < Threading::Serialized {
            return Err(Error::Collective(format!(
                "this MPI offers thread level {level:?}; Sapwood needs Serialized (calls from one thread at a time)"
            )));
        }
        let world = universe.world();
        Ok(MpiTransport {
            world,
            timeout: DEFAULT_TIMEOUT,
            _universe: universe,
        })
    }

    /// The same transport, waiting at most `timeout` for any peer (the `comm_timeout`
    /// run option): past it, a send, receive or sum is an error naming the rank.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// How long a call waits for a peer before it fails.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Ends every rank of the job with `code` (after an error on this rank, so no peer
    /// waits in a collective until its own timeout).
    pub fn abort(&self, code: i32) -> ! {
        self.world.abort(code)
    }
}

// SAFETY: MPI was initialised at the Serialized thread level (checked in `init`), which
// allows calls from any thread as long as no two are concurrent; the transport is only used
// through `&mut self`, so calls never overlap.
#[allow(unsafe_code)]
unsafe impl Send for MpiTransport {}

/// A buffer lent to MPI for a non-blocking call. MPI may read or write it until the call's
/// request completes, so it is freed only by [`Lent::take`] after that; a call abandoned at
/// its deadline leaves its buffer leaked on purpose (the job is ending).
struct Lent<T: 'static> {
    ptr: *mut [T],
}

#[allow(unsafe_code)]
impl<T: 'static> Lent<T> {
    fn new(v: Vec<T>) -> Self {
        Lent {
            ptr: Box::into_raw(v.into_boxed_slice()),
        }
    }

    /// The buffer for a call that reads it.
    fn shared(&self) -> &'static [T] {
        // SAFETY: `ptr` comes from a live Box that is freed only in `take`, after every
        // request using the reference has completed
        unsafe { &*self.ptr }
    }

    /// The buffer for a call that writes it (one call at a time).
    fn exclusive(&mut self) -> &'static mut [T] {
        // SAFETY: as in `shared`; the only reference made from `&mut self` is handed to
        // one request, and no other reference is made until `take`
        unsafe { &mut *self.ptr }
    }

    /// The buffer back, once the request that used it has completed.
    fn take(self) -> Vec<T> {
        // SAFETY: callers take a buffer only after its request completed (MPI no longer
        // touches it), and `self` is consumed, so this is the only owner
        unsafe { Box::from_raw(self.ptr) }.into_vec()
    }
}

/// What a call was waiting for when its deadline passed.
enum Waiting {
    /// A message from this rank.
    Message(usize),
    /// This rank to take a message.
    Delivery(usize),
    /// Every rank to join a sum.
    Sum,
}

impl MpiTransport {
    /// The error of a call that waited `self.timeout` for `what`.
    fn silent(&self, what: Waiting) -> Error {
        let me = self.world.rank();
        let secs = self.timeout.as_secs_f64();
        let cause = "it died, stopped responding, or waits on a rank that did";
        Error::Collective(match what {
            Waiting::Message(peer) => format!(
                "rank {me} waited {secs} s (comm_timeout) for a message from rank {peer}: {cause}"
            ),
            Waiting::Delivery(peer) => format!(
                "rank {me} waited {secs} s (comm_timeout) for rank {peer} to take a message: {cause}"
            ),
            Waiting::Sum => format!(
                "rank {me} waited {secs} s (comm_timeout) for every rank to join a sum: one died, \
                 stopped responding, or waits on a rank that did"
            ),
        })
    }

    /// Polls `poll` until it yields or `self.timeout` has passed since `start`.
    fn poll_until<T>(
        &self,
        start: Instant,
        what: Waiting,
        mut poll: impl FnMut() -> Option<T>,
    ) -> Result<T> {
        let mut pause = Duration::from_micros(20);
        loop {
            // MPI progresses its transfers inside these test calls
            if let Some(v) = poll() {
                return Ok(v);
            }
            let waited = start.elapsed();
            if waited >= self.timeout {
                return Err(self.silent(what));
            }
            if waited < SPIN {
                std::thread::yield_now();
            } else {
                std::thread::sleep(pause.min(self.timeout - waited));
                pause = (pause * 2).min(MAX_PAUSE);
            }
        }
    }

    /// Waits for `request` to complete until `self.timeout` has passed since `start`; an
    /// abandoned request is forgotten (its buffers stay leaked, see [`Lent`]).
    fn complete<D: ?Sized>(
        &self,
        start: Instant,
        what: Waiting,
        request: Request<'static, D, StaticScope>,
    ) -> Result<()> {
        let mut pending = Some(request);
        let done = self.poll_until(start, what, || {
            match pending.take().expect("polled until done").test() {
                Ok(_) => Some(()),
                Err(r) => {
                    pending = Some(r);
                    None
                }
            }
        });
        if let Some(r) = pending {
            // dropping an incomplete request panics; MPI still owns its buffers
            std::mem::forget(r);
        }
        done
    }

    /// Receives the next message from `from`, the deadline counted from `start`.
    fn receive(&self, start: Instant, from: usize) -> Result<Vec<u8>> {
        let process = self.world.process_at_rank(from as i32);
        let (message, status) = self.poll_until(start, Waiting::Message(from), || {
            process.immediate_matched_probe()
        })?;
        let n = usize::try_from(status.count(u8::equivalent_datatype())).map_err(|_| {
            Error::Collective(format!("rank {from} sent a message of negative length"))
        })?;
        let mut buf = Lent::new(vec![0u8; n]);
        let request = message.immediate_matched_receive_into(StaticScope, buf.exclusive());
        self.complete(start, Waiting::Message(from), request)?;
        Ok(buf.take())
    }
}

impl Transport for MpiTransport {
    fn rank(&self) -> usize {
        self.world.rank() as usize
    }

    fn size(&self) -> usize {
        self.world.size() as usize
    }

    fn send(&mut self, to: usize, msg: Vec<u8>) -> Result<()> {
        let start = Instant::now();
        let buf = Lent::new(msg);
        let request = self
            .world
            .process_at_rank(to as i32)
            .immediate_send(StaticScope, buf.shared());
        self.complete(start, Waiting::Delivery(to), request)?;
        buf.take();
        Ok(())
    }

    fn recv(&mut self, from: usize) -> Result<Vec<u8>> {
        self.receive(Instant::now(), from)
    }

    fn exchange(&mut self, to: usize, msg: Vec<u8>, from: usize) -> Result<Vec<u8>> {
        // the send runs while this rank receives, so two ranks sending to each other
        // never wait for one another
        let start = Instant::now();
        let out = Lent::new(msg);
        let sent = self
            .world
            .process_at_rank(to as i32)
            .immediate_send(StaticScope, out.shared());
        let got = match self.receive(start, from) {
            Ok(got) => got,
            Err(e) => {
                // the job is ending: leave the send (and its buffer) to MPI
                std::mem::forget(sent);
                return Err(e);
            }
        };
        self.complete(start, Waiting::Delivery(to), sent)?;
        out.take();
        Ok(got)
    }

    fn exchange_all(
        &mut self,
        sends: Vec<(usize, Vec<u8>)>,
        from: &[usize],
    ) -> Result<Vec<Vec<u8>>> {
        // every send in flight before the first receive: the rounds of a pairwise exchange
        // share the link instead of each waiting for the slowest pair of the one before
        let start = Instant::now();
        let mut sent = Vec::with_capacity(sends.len());
        for (to, msg) in sends {
            let out = Lent::new(msg);
            let request = self
                .world
                .process_at_rank(to as i32)
                .immediate_send(StaticScope, out.shared());
            sent.push((to, out, request));
        }
        let mut got = Vec::with_capacity(from.len());
        for &f in from {
            match self.receive(start, f) {
                Ok(m) => got.push(m),
                Err(e) => {
                    // the job is ending: leave the sends (and their buffers) to MPI
                    for (_, _, request) in sent {
                        std::mem::forget(request);
                    }
                    return Err(e);
                }
            }
        }
        let mut pending = sent.into_iter();
        while let Some((to, out, request)) = pending.next() {
            if let Err(e) = self.complete(start, Waiting::Delivery(to), request) {
                for (_, _, request) in pending {
                    std::mem::forget(request);
                }
                return Err(e);
            }
            out.take();
        }
        Ok(got)
    }

    fn sums_natively(&self) -> bool {
        true
    }

    fn native_sum(&mut self, words: &mut [i64]) -> Option<Result<()>> {
        let start = Instant::now();
        let input = Lent::new(words.to_vec());
        let mut output = Lent::new(vec![0i64; words.len()]);
        let request = self.world.immediate_all_reduce_into(
            StaticScope,
            input.shared(),
            output.exclusive(),
            SystemOperation::sum(),
        );
        if let Err(e) = self.complete(start, Waiting::Sum, request) {
            return Some(Err(e));
        }
        input.take();
        words.copy_from_slice(&output.take());
        Some(Ok(()))
    }
}
