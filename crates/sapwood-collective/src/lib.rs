//! Collectives for data-parallel training: histograms summed exactly across workers through
//! codecs that shrink integers losslessly.
//!
//! - [`codec`]: exact encodings of i64 blocks: plain, packed lanes (narrowed to the width the
//!   bound proves, several lanes per 64-bit word so a plain integer sum of packed words is the
//!   packed sum), and zero-suppressing ones: groups of 32 values each at its own shift and
//!   width (what `auto` sends), bitmap plus bit stream, varint pairs.
//! - [`ring`]: ring reduce-scatter and all-gather carrying encoded blocks over any
//!   [`Transport`].
//! - [`pairwise`]: reduce-scatter by direct exchange, for the large per-feature-block sums.
//! - [`inprocess`]: workers as threads in one process (also how several GPUs are driven).
//! - `mpi` (feature `mpi`): one worker per MPI rank.
//! - [`tcp`]: one worker per process over TCP, joined through a coordinator address.
#![deny(missing_docs)]

pub mod codec;
pub mod collective;
pub mod inprocess;
#[cfg(feature = "mpi")]
pub mod mpi_transport;
pub mod pairwise;
pub mod ring;
pub mod tcp;
pub mod transport;

pub use collective::RingCollective;
pub use inprocess::in_process;
pub use transport::Transport;
