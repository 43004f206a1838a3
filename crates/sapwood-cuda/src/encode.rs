//! The histogram encoders on the GPU: packed lanes (`codec::pack` of sapwood-collective) and
//! the group encoding (what the `auto` codec sends), run on messages already on the device,
//! so a node's histogram reaches the host only encoded. The WGSL twins are in
//! sapwood-wgpu's `encode.rs`.
//!
//! Messages are `count` blocks of `len` i64 values one after another from the start of a
//! buffer: a batch of node histograms (`len` = 2 · total bins: g, h of every bin) is that.
#![allow(unsafe_code)]

use std::ops::Range;

use cudarc::driver::{sys, CudaSlice, DevicePtr, DevicePtrMut, LaunchConfig, PushKernelArg};
use sapwood_core::backend::shard;
use sapwood_core::error::{Error, Result};

use crate::backend::{upload, zeroed};
use crate::device::{driver_error, Gpu};
use crate::kernels::{CodecKernel, CudaSource};

/// Most bytes the group encoding takes for 32 values: 6 header bytes and 64 bits a value.
const MAX_GROUP_BYTES: usize = 6 + 4 * 64;
/// Values per group of the group encoding (a warp of groups.cu).
const GROUP: usize = 32;
/// Messages per launch along y (the grid limit).
pub(crate) const MAX_MESSAGES: usize = 65_535;
/// Largest buffer of uploaded values encoded at once.
const MAX_UPLOAD_BYTES: usize = 1 << 30;

fn launch(grid: (u32, u32, u32)) -> LaunchConfig {
    LaunchConfig {
        grid_dim: grid,
        block_dim: (256, 1, 1),
        shared_mem_bytes: 0,
    }
}

fn launch_error(k: CodecKernel) -> impl FnOnce(cudarc::driver::DriverError) -> Error {
    move |e| driver_error(&format!("launch of {}", k.file()), e)
}

fn read<T: cudarc::driver::DeviceRepr + Default + Clone>(
    gpu: &Gpu,
    s: &CudaSlice<T>,
    len: usize,
) -> Result<Vec<T>> {
    gpu.stream
        .clone_dtoh(&s.slice(0..len))
        .map_err(|e| driver_error("read-back", e))
}

/// Most bytes the group encoding of `values` values takes (every group at its widest).
pub(crate) fn group_bytes_bound(values: usize) -> usize {
    values.div_ceil(GROUP) * MAX_GROUP_BYTES
}

/// Largest pitch a 2D copy is sure to take (the driver's limit is at least this).
const MAX_PITCH_BYTES: usize = i32::MAX as usize;

/// `rows` runs of `run` words: run i at `src_at + i * src_pitch` of the source, at
/// `dst_at + i * run` of the destination.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Runs {
    pub src_at: usize,
    pub src_pitch: usize,
    pub dst_at: usize,
    pub run: usize,
    pub rows: usize,
}

impl Runs {
    /// The runs of bins `block` of the `nodes` histograms of `width` bins at the start of
    /// a batch's buffer, to their place in a buffer of that block of every node, after the
    /// `first` nodes of earlier batches.
    pub(crate) fn of_block(block: &Range<usize>, width: usize, first: usize, nodes: usize) -> Self {
        Runs {
            src_at: 2 * block.start,
            src_pitch: 2 * width,
            dst_at: 2 * first * block.len(),
            run: 2 * block.len(),
            rows: nodes,
        }
    }

    /// The (source, destination) words of each run.
    fn each(self) -> impl Iterator<Item = (Range<usize>, Range<usize>)> {
        (0..self.rows).map(move |i| {
            let (s, d) = (self.src_at + i * self.src_pitch, self.dst_at + i * self.run);
            (s..s + self.run, d..d + self.run)
        })
    }

    /// Whether every run lies inside a source of `src` words and a destination of `dst`,
    /// and no run overlaps the next in the source.
    fn inside(self, src: usize, dst: usize) -> bool {
        let last = self.each().last();
        self.run <= self.src_pitch && last.is_none_or(|(s, d)| s.end <= src && d.end <= dst)
    }
}

/// Queues the copy of the runs `r` from `src` to `dst` (no wait): one block of every node
/// of a batch, gathered after the nodes before them, in one driver call rather than one a
/// node.
pub(crate) fn copy_runs(
    gpu: &Gpu,
    src: &CudaSlice<u64>,
    dst: &mut CudaSlice<u64>,
    r: Runs,
) -> Result<()> {
    if r.run == 0 || r.rows == 0 {
        return Ok(());
    }
    // the driver copies whatever it is told: every run must lie inside both buffers
    if !r.inside(src.len(), dst.len()) {
        return Err(Error::Backend(format!(
            "CUDA: the runs {r:?} leave buffers of {} and {} words",
            src.len(),
            dst.len()
        )));
    }
    let stream = &gpu.stream;
    if 8 * r.src_pitch > MAX_PITCH_BYTES {
        // a pitch a 2D copy may refuse: one copy a run
        for (from, to) in r.each() {
            stream
                .memcpy_dtod(&src.slice(from), &mut dst.slice_mut(to))
                .map_err(|e| driver_error("copy", e))?;
        }
        return Ok(());
    }
    stream
        .context()
        .bind_to_thread()
        .map_err(|e| driver_error("context", e))?;
    // the guards make the stream wait for earlier writes, and record this copy's use
    let (from, _read) = src.device_ptr(stream);
    let (to, _write) = dst.device_ptr_mut(stream);
    let copy = sys::CUDA_MEMCPY2D {
        srcXInBytes: 0,
        srcY: 0,
        srcMemoryType: sys::CUmemorytype::CU_MEMORYTYPE_DEVICE,
        srcHost: std::ptr::null(),
        srcDevice: from + 8 * r.src_at as u64,
        srcArray: std::ptr::null_mut(),
        srcPitch: 8 * r.src_pitch,
        dstXInBytes: 0,
        dstY: 0,
        dstMemoryType: sys::CUmemorytype::CU_MEMORYTYPE_DEVICE,
        dstHost: std::ptr::null_mut(),
        dstDevice: to + 8 * r.dst_at as u64,
        dstArray: std::ptr::null_mut(),
        dstPitch: 8 * r.run,
        WidthInBytes: 8 * r.run,
        Height: r.rows,
    };
    // SAFETY: both are device buffers of this stream's context; every run read lies
    // inside `src` and every run written inside `dst` (checked above), and the buffers
    // are distinct (one borrowed shared, one exclusive).
    unsafe { sys::cuMemcpy2DAsync_v2(&copy, stream.cu_stream()) }
        .result()
        .map_err(|e| driver_error("strided copy", e))
}

fn too_large(what: &str, n: usize) -> Error {
    Error::Backend(format!(
        "CUDA: {what} of {n} bytes do not fit a 32-bit offset"
    ))
}

/// Words per message of `len` values packed at width `w` (clamped as the codec clamps it).
fn packed_words(len: usize, w: u32) -> usize {
    len.div_ceil((64 / w.clamp(1, 64)) as usize)
}

/// Packs the `widths.len()` messages of `len` values at the start of `src`, message i at
/// width `widths[i]`, after the work queued on the stream; returns their words.
pub(crate) fn pack(
    gpu: &Gpu,
    src: &CudaSlice<u64>,
    len: usize,
    widths: &[u32],
) -> Result<Vec<i64>> {
    debug_assert!(widths.len() <= MAX_MESSAGES && src.len() >= len * widths.len());
    let mut plan = Vec::with_capacity(2 * widths.len());
    let mut total = 0usize;
    for &w in widths {
        plan.extend([w, total as u32]);
        total += packed_words(len, w);
        if total > u32::MAX as usize {
            return Err(too_large("packed words", 8 * total));
        }
    }
    if total == 0 {
        return Ok(Vec::new());
    }
    let plan_buf = upload(gpu, &plan, "pack plan")?;
    let mut out = zeroed::<u64>(gpu, total, "packed words")?;
    let widest = widths.iter().map(|&w| packed_words(len, w)).max();
    let x = gpu.blocks(widest.unwrap_or(0), 1);
    let len32 = len as u32;
    let f = gpu.shared.codec_function(CodecKernel::Pack);
    let mut b = gpu.stream.launch_builder(f);
    b.arg(&len32).arg(src).arg(&plan_buf).arg(&mut out);
    // SAFETY: matches pack.cu; src holds widths.len() messages of len values, plan two
    // words per message, out every message's words at the offsets of plan.
    unsafe { b.launch(launch((x, widths.len() as u32, 1))) }
        .map_err(launch_error(CodecKernel::Pack))?;
    let words = read(gpu, &out, total)?;
    Ok(words.into_iter().map(|w| w as i64).collect())
}

/// Group-encodes the `count` messages of `len` values at the start of `src`, after the work
/// queued on the stream; one message of bytes each (the bytes after the GROUPS tag, as
/// `codec::encode_groups` gives them).
pub(crate) fn groups(
    gpu: &Gpu,
    src: &CudaSlice<u64>,
    len: usize,
    count: usize,
) -> Result<Vec<Vec<u8>>> {
    debug_assert!(src.len() >= len * count);
    let per_message = len.div_ceil(GROUP);
    let n_groups = per_message * count;
    if n_groups == 0 {
        return Ok(vec![Vec::new(); count]);
    }
    if n_groups > u32::MAX as usize {
        return Err(too_large("the group sizes of a batch", 4 * n_groups));
    }
    let mut sizes = zeroed::<u32>(gpu, n_groups, "group sizes")?;
    let mut unused = zeroed::<u32>(gpu, 1, "no output")?;
    let x = gpu.blocks(n_groups * GROUP, 1);
    let (len32, groups32) = (len as u32, n_groups as u32);
    let f = gpu.shared.codec_function(CodecKernel::Groups);
    let measure = 0u32;
    let mut b = gpu.stream.launch_builder(f);
    b.arg(&len32)
        .arg(&groups32)
        .arg(&measure)
        .arg(src)
        .arg(&mut sizes)
        .arg(&mut unused);
    // SAFETY: matches groups.cu; src holds count messages of len values, sizes one word per
    // group; the measuring pass writes nothing to `unused`.
    unsafe { b.launch(launch((x, 1, 1))) }.map_err(launch_error(CodecKernel::Groups))?;
    let Some((offsets, total)) = shard::group_offsets(read(gpu, &sizes, n_groups)?) else {
        return Err(too_large("the encoded groups of a batch", 1 << 32));
    };
    gpu.stream
        .memcpy_htod(&offsets, &mut sizes)
        .map_err(|e| driver_error("upload of group offsets", e))?;
    // groups share boundary words and are ORed in: the buffer starts at zero
    let mut out = zeroed::<u32>(gpu, total.div_ceil(4), "encoded groups")?;
    let write = 1u32;
    let mut b = gpu.stream.launch_builder(f);
    b.arg(&len32)
        .arg(&groups32)
        .arg(&write)
        .arg(src)
        .arg(&mut sizes)
        .arg(&mut out);
    // SAFETY: as above; every group's bytes lie inside `total` from its offset, and out
    // holds total bytes rounded up to whole words.
    unsafe { b.launch(launch((x, 1, 1))) }.map_err(launch_error(CodecKernel::Groups))?;
    let words = read(gpu, &out, total.div_ceil(4))?;
    let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    Ok(shard::split_messages(
        &bytes,
        &offsets,
        per_message,
        count,
        total,
    ))
}

/// Messages of `len` values uploaded and encoded at once.
fn per_upload(len: usize) -> usize {
    (MAX_UPLOAD_BYTES / (8 * len).max(1)).clamp(1, MAX_MESSAGES)
}

fn upload_values(gpu: &Gpu, values: &[i64]) -> Result<CudaSlice<u64>> {
    let raw: Vec<u64> = values.iter().map(|&v| v as u64).collect();
    upload(gpu, &raw, "values")
}

impl Gpu {
    /// Packs `values`, messages of `len` values each, message i at lane width `widths[i]`,
    /// with the device's packing kernel (uploaded first: the path the backend runs on its
    /// histogram buffer, for values chosen by a test or a benchmark).
    pub fn pack_values(&self, values: &[i64], len: usize, widths: &[u32]) -> Result<Vec<i64>> {
        let count = shard::message_count(values, len)?;
        if widths.len() != count {
            return Err(Error::Backend(format!(
                "{} lane widths for {count} messages",
                widths.len()
            )));
        }
        let per = per_upload(len);
        let mut out = Vec::new();
        for (chunk, widths) in values.chunks(per * len).zip(widths.chunks(per)) {
            out.extend(pack(self, &upload_values(self, chunk)?, len, widths)?);
        }
        Ok(out)
    }

    /// Group-encodes `values`, messages of `len` values each, with the device's encoder
    /// (uploaded first, as [`Gpu::pack_values`]); one message of bytes each.
    pub fn encode_groups(&self, values: &[i64], len: usize) -> Result<Vec<Vec<u8>>> {
        shard::message_count(values, len)?;
        let mut out = Vec::new();
        for chunk in values.chunks(per_upload(len) * len) {
            let src = upload_values(self, chunk)?;
            out.extend(groups(self, &src, len, chunk.len() / len)?);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_runs_of_every_batch_gather_a_block_node_after_node() {
        // 7 bins a node (2 words a bin), 5 nodes in batches of 2, block 2..5: the runs of
        // each batch, applied to its buffer, give the block of every node in node order
        let (width, nodes, per_batch, block) = (7, 5, 2, 2..5);
        let word = |node: usize, w: usize| (1000 * node + w) as u64;
        let mut gathered = vec![0u64; 2 * nodes * block.len()];
        for first in (0..nodes).step_by(per_batch) {
            let batch = per_batch.min(nodes - first);
            let hist: Vec<u64> = (first..first + batch)
                .flat_map(|n| (0..2 * width).map(move |w| word(n, w)))
                .collect();
            let runs = Runs::of_block(&block, width, first, batch);
            assert!(runs.inside(hist.len(), gathered.len()));
            for (s, d) in runs.each() {
                gathered[d].copy_from_slice(&hist[s]);
            }
        }
        let want: Vec<u64> = (0..nodes)
            .flat_map(|n| (2 * block.start..2 * block.end).map(move |w| word(n, w)))
            .collect();
        assert_eq!(gathered, want);
    }

    #[test]
    fn runs_outside_their_buffers_are_refused() {
        let r = Runs::of_block(&(3..7), 7, 1, 2);
        // after 1 node of 4 bins, 2 nodes' runs of 8 words: the source's last ends at word
        // 6 + 14 + 8 = 28, the destination's at 8 + 2 * 8 = 24
        assert!(r.inside(28, 24));
        assert!(!r.inside(27, 24));
        assert!(!r.inside(28, 23));
        // runs wider than the pitch would overlap
        let wide = Runs { run: 15, ..r };
        assert!(!wide.inside(1000, 1000));
        // no run at all lies anywhere
        assert!(Runs { rows: 0, ..r }.inside(0, 0));
    }
}
