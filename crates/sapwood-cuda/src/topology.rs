//! Where the ranks of a job sit, for the NCCL collective (feature `nccl`): which GPU each
//! rank gets, and whether NCCL can join them. Kept apart from the feature so that the
//! decision is tested on every build.
//!
//! NCCL runs one rank per GPU: `ncclCommInitRank` refuses two ranks on one device
//! ("Duplicate GPU detected"). Every rank sends what it found (whether libnccl loads, its
//! GPU's UUID) to every other through the host collective, and every rank takes the same
//! decision from the same list: NCCL when each rank has a GPU of its own, the host collective
//! when two ranks share one (several logical devices per GPU), and a clear error when a
//! rank cannot load libnccl.

/// What one rank reports about itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RankDevice {
    /// Whether libnccl could be loaded on the rank.
    pub has_nccl: bool,
    /// The UUID of the rank's GPU (the same physical GPU has the same UUID in every
    /// process).
    pub uuid: [u8; 16],
}

impl RankDevice {
    /// Bytes on the wire: a version-free flag byte and the UUID.
    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(17);
        v.push(self.has_nccl as u8);
        v.extend_from_slice(&self.uuid);
        v
    }

    /// The inverse of [`RankDevice::encode`]; `None` for malformed bytes.
    pub fn decode(bytes: &[u8]) -> Option<Self> {
        if bytes.len() != 17 || bytes[0] > 1 {
            return None;
        }
        let mut uuid = [0u8; 16];
        uuid.copy_from_slice(&bytes[1..]);
        Some(RankDevice {
            has_nccl: bytes[0] == 1,
            uuid,
        })
    }
}

/// How the job sums histograms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NcclPlan {
    /// Every rank on a GPU of its own: NCCL.
    Nccl,
    /// Ranks share a GPU: the host collective, for the reason given.
    Host(String),
    /// NCCL was asked for but cannot run: the error every rank reports.
    Fail(String),
}

/// A UUID as NVIDIA prints it (GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx).
pub fn uuid_string(u: &[u8; 16]) -> String {
    let h: Vec<String> = u.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "GPU-{}-{}-{}-{}-{}",
        h[0..4].concat(),
        h[4..6].concat(),
        h[6..8].concat(),
        h[8..10].concat(),
        h[10..16].concat()
    )
}

/// The decision every rank takes from the list of all ranks' reports (index = rank).
pub fn plan(ranks: &[RankDevice]) -> NcclPlan {
    let missing: Vec<usize> = (0..ranks.len()).filter(|&r| !ranks[r].has_nccl).collect();
    if !missing.is_empty() {
        return NcclPlan::Fail(format!(
            "feature `nccl` needs libnccl.so on the library path, which rank(s) {missing:?} \
             could not load (PyPI's nvidia-nccl-cu13 ships libnccl.so.2 only: add a \
             libnccl.so link next to it)"
        ));
    }
    for (b, rb) in ranks.iter().enumerate() {
        if let Some(a) = ranks[..b].iter().position(|ra| ra.uuid == rb.uuid) {
            let sharing = ranks.iter().filter(|r| r.uuid == rb.uuid).count();
            return NcclPlan::Host(format!(
                "ranks {a} and {b} ({sharing} in all) share GPU {}: NCCL runs one rank per \
                 GPU, so histograms are summed by the host collective",
                uuid_string(&rb.uuid)
            ));
        }
    }
    NcclPlan::Nccl
}

#[cfg(test)]
mod tests {
    use super::*;

    fn on(gpu: u8) -> RankDevice {
        RankDevice {
            has_nccl: true,
            uuid: [gpu; 16],
        }
    }

    #[test]
    fn one_rank_per_gpu_uses_nccl() {
        assert_eq!(plan(&[on(1)]), NcclPlan::Nccl);
        assert_eq!(plan(&[on(1), on(2), on(3), on(4)]), NcclPlan::Nccl);
    }

    #[test]
    fn ranks_sharing_a_gpu_fall_back_to_the_host_collective() {
        // two logical devices per GPU on two GPUs
        match plan(&[on(1), on(2), on(1), on(2)]) {
            NcclPlan::Host(why) => {
                assert!(why.contains("ranks 0 and 2"), "{why}");
                assert!(why.contains("host collective"), "{why}");
                assert!(why.contains("GPU-01010101-0101-"), "{why}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_rank_without_libnccl_is_an_error_on_every_rank() {
        let mut ranks = [on(1), on(2), on(3)];
        ranks[1].has_nccl = false;
        match plan(&ranks) {
            NcclPlan::Fail(why) => assert!(why.contains("[1]") && why.contains("libnccl"), "{why}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn reports_round_trip_and_malformed_ones_are_refused() {
        let r = RankDevice {
            has_nccl: true,
            uuid: *b"0123456789abcdef",
        };
        assert_eq!(RankDevice::decode(&r.encode()), Some(r));
        assert_eq!(RankDevice::decode(&[]), None);
        assert_eq!(RankDevice::decode(&[2; 17]), None);
        assert_eq!(RankDevice::decode(&[1; 16]), None);
    }
}
