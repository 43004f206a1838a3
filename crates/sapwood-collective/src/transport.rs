//! Point-to-point byte messages between workers: what the ring algorithms run on.

use sapwood_core::Result;

/// Ordered, reliable byte messages between the workers of one job. Every receive is bounded
/// in time: a peer that died or went silent is an error, never a hang.
pub trait Transport: Send {
    /// This worker's index.
    fn rank(&self) -> usize;
    /// Workers in the job.
    fn size(&self) -> usize;
    /// Sends a message to `to` (may return before it is received).
    fn send(&mut self, to: usize, msg: Vec<u8>) -> Result<()>;
    /// Receives the next message from `from`.
    fn recv(&mut self, from: usize) -> Result<Vec<u8>>;
    /// Sends to `to` while receiving from `from` (a ring step); transports whose sends can
    /// block until received override it to avoid deadlock.
    fn exchange(&mut self, to: usize, msg: Vec<u8>, from: usize) -> Result<Vec<u8>> {
        self.send(to, msg)?;
        self.recv(from)
    }
    /// Sends each `(to, message)` of `sends` while receiving one message from each rank of
    /// `from` (as many as sends), returned in `from`'s order: the rounds of a pairwise
    /// exchange. One [`Transport::exchange`] after another unless a transport can have
    /// them all in flight at once.
    fn exchange_all(
        &mut self,
        sends: Vec<(usize, Vec<u8>)>,
        from: &[usize],
    ) -> Result<Vec<Vec<u8>>> {
        sends
            .into_iter()
            .zip(from)
            .map(|((to, msg), &f)| self.exchange(to, msg, f))
            .collect()
    }
    /// Sums i64 words element-wise over all workers with the transport's own reduction,
    /// when it has one (MPI); `None` means the ring algorithms do it.
    fn native_sum(&mut self, _words: &mut [i64]) -> Option<Result<()>> {
        None
    }
    /// Whether [`Transport::native_sum`] sums (rather than answering `None`).
    fn sums_natively(&self) -> bool {
        false
    }
}
