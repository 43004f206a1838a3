//! The histogram encoders on the GPU: packed lanes (`codec::pack` of sapwood-collective) and
//! the group encoding (what the `auto` codec sends), run on messages already on the device,
//! so a node's histogram reaches the host only encoded. The WGSL twins are in
//! sapwood-wgpu's `encode.rs`.
//!
//! Messages are `count` blocks of `len` i64 values one after another from the start of a
//! buffer: a batch of node histograms (`len` = 2 · total bins: g, h of every bin) is that.
#![allow(unsafe_code)]

use cudarc::driver::{CudaSlice, LaunchConfig, PushKernelArg};
use sapwood_core::error::{Error, Result};

use crate::backend::{upload, zeroed};
use crate::device::{driver_error, Gpu};
use crate::kernels::{CodecKernel, CudaSource};

/// Most bytes the group encoding takes for 32 values: 6 header bytes and 64 bits a value.
pub(crate) const MAX_GROUP_BYTES: usize = 6 + 4 * 64;
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
    // an exclusive scan of the sizes: every group's byte offset in the batch's output
    let mut offsets: Vec<u32> = Vec::with_capacity(n_groups);
    let mut total = 0usize;
    for size in read(gpu, &sizes, n_groups)? {
        offsets.push(total as u32);
        total += size as usize;
        if total > u32::MAX as usize {
            return Err(too_large("the encoded groups of a batch", total));
        }
    }
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
    let start = |i: usize| offsets.get(i * per_message).map_or(total, |&o| o as usize);
    Ok((0..count)
        .map(|i| bytes[start(i)..start(i + 1)].to_vec())
        .collect())
}

/// Checks that `values` holds whole messages of `len` values; returns how many.
fn message_count(values: &[i64], len: usize) -> Result<usize> {
    if len == 0 || !values.len().is_multiple_of(len) {
        return Err(Error::Backend(format!(
            "{} values are not whole messages of {len}",
            values.len()
        )));
    }
    Ok(values.len() / len)
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
        let count = message_count(values, len)?;
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
        message_count(values, len)?;
        let mut out = Vec::new();
        for chunk in values.chunks(per_upload(len) * len) {
            let src = upload_values(self, chunk)?;
            out.extend(groups(self, &src, len, chunk.len() / len)?);
        }
        Ok(out)
    }
}
