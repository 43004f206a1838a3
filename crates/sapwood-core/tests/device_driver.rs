//! What the shard driver refuses before it asks a device for anything: checked on a device
//! that fails every request, so a refusal that came too late would panic.

use sapwood_core::backend::device::{predict_binned, Call, DeviceLimits, Region, ShardDevice};
use sapwood_core::backend::shard::ShardLimits;
use sapwood_core::backend::CpuFactory;
use sapwood_core::data::binned::Bins;
use sapwood_core::data::BinnedMatrix;
use sapwood_core::params::Params;
use sapwood_core::Result;

/// A device that holds at most 10 rows and must never be asked to do anything.
struct TenRows;

impl ShardDevice for TenRows {
    type Buffer = ();
    fn name(&self) -> String {
        "a ten-row device".into()
    }
    fn limits(&self) -> DeviceLimits {
        DeviceLimits {
            shard: ShardLimits {
                max_rows: 10,
                max_groups: 1,
            },
            binding_bytes: u64::MAX,
            batch_bytes: u64::MAX,
            chunk_bytes: u64::MAX,
            tile_bins: 16,
        }
    }
    fn upload(&self, _: &[u8], what: &str) -> Result<()> {
        panic!("uploaded {what}")
    }
    fn zeroed(&self, _: usize, what: &str) -> Result<()> {
        panic!("allocated {what}")
    }
    fn write(&self, _: &(), _: &[u8], _: &str) -> Result<()> {
        panic!("wrote")
    }
    fn launch(&self, call: &Call<'_, ()>) -> Result<()> {
        panic!("launched {}", call.kernel.stem())
    }
    fn copy(&self, _: &(), _: usize, _: &(), _: usize, _: usize) -> Result<()> {
        panic!("copied")
    }
    fn clear(&self, _: &(), _: usize) -> Result<()> {
        panic!("cleared")
    }
    fn read(&self, _: &[Region<'_, ()>]) -> Result<Vec<Vec<u8>>> {
        panic!("read")
    }
}

#[test]
fn rows_past_the_devices_row_indices_are_refused_before_any_work() {
    let params = Params {
        num_rounds: 1,
        ..Default::default()
    };
    let model = sapwood_testkit::train::train_model(
        &params,
        &CpuFactory,
        sapwood_testkit::train::Job::rows(50),
    );
    let binned = BinnedMatrix::from_bins(11, 1, Bins::U8(vec![1; 11])).unwrap();
    let e = predict_binned(&TenRows, &model, &binned, 1)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("cannot predict 11 rows") && e.contains("at most 10"),
        "{e}"
    );
}
