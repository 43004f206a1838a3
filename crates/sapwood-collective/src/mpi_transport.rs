//! One worker per MPI rank (feature `mpi`): the ring algorithms over MPI point-to-point
//! messages, and packed-lane words summed by `MPI_Allreduce` itself.

use mpi::collective::SystemOperation;
use mpi::environment::Universe;
use mpi::topology::SimpleCommunicator;
use mpi::traits::{Communicator, CommunicatorCollectives, Destination, Source};
use mpi::Threading;
use sapwood_core::{Error, Result};

use crate::transport::Transport;

/// The world communicator of an MPI job; MPI is finalised when it is dropped.
pub struct MpiTransport {
    world: SimpleCommunicator,
    _universe: Universe,
}

impl MpiTransport {
    /// Initialises MPI (once per process) and joins the world communicator.
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
            _universe: universe,
        })
    }
}

impl MpiTransport {
    /// Ends every rank of the job with `code` (after an error on this rank, so no peer
    /// waits forever in a collective).
    pub fn abort(&self, code: i32) -> ! {
        self.world.abort(code)
    }
}

// SAFETY: MPI was initialised at the Serialized thread level (checked in `init`), which
// allows calls from any thread as long as no two are concurrent; the transport is only used
// through `&mut self`, so calls never overlap.
#[allow(unsafe_code)]
unsafe impl Send for MpiTransport {}

impl Transport for MpiTransport {
    fn rank(&self) -> usize {
        self.world.rank() as usize
    }

    fn size(&self) -> usize {
        self.world.size() as usize
    }

    fn send(&mut self, to: usize, msg: Vec<u8>) -> Result<()> {
        self.world.process_at_rank(to as i32).send(&msg[..]);
        Ok(())
    }

    fn recv(&mut self, from: usize) -> Result<Vec<u8>> {
        Ok(self
            .world
            .process_at_rank(from as i32)
            .receive_vec::<u8>()
            .0)
    }

    fn exchange(&mut self, to: usize, msg: Vec<u8>, from: usize) -> Result<Vec<u8>> {
        // a blocking send could wait for a receive that waits for it: send asynchronously
        let world = &self.world;
        Ok(mpi::request::scope(|scope| {
            let sent = world
                .process_at_rank(to as i32)
                .immediate_send(scope, &msg[..]);
            let (got, _) = world.process_at_rank(from as i32).receive_vec::<u8>();
            sent.wait();
            got
        }))
    }

    fn native_sum(&mut self, words: &mut [i64]) -> Option<Result<()>> {
        let input = words.to_vec();
        self.world
            .all_reduce_into(&input[..], words, SystemOperation::sum());
        Some(Ok(()))
    }
}
