//! The histogram encoders on the device: packed lanes (`codec::pack` of sapwood-collective)
//! and the group encoding (what the `auto` codec sends), run on a buffer of messages that
//! are already there, so a node's histogram reaches the host only encoded.
//!
//! Messages are `count` blocks of `len` i64 values, one after another from the start of a
//! buffer, each value a (lo, hi) pair of u32 words: a batch of node histograms (`len` = 2 ·
//! total bins: g, h of every bin) is exactly that.

use sapwood_core::backend::shard;
use sapwood_core::error::{Error, Result};

use crate::gpu::{device_error, Gpu, WG};
use crate::layout::CodecParams;
use crate::shaders::CodecKernel;

/// Most bytes the group encoding takes for 32 values: 6 header bytes and 64 bits a value.
const MAX_GROUP_BYTES: u64 = 6 + 4 * 64;
/// Values per group of the group encoding.
const GROUP: usize = 32;
/// Groups one workgroup of groups.wgsl encodes at a time.
const GROUPS_PER_WG: usize = WG / GROUP;
/// Messages per dispatch along y (the portable workgroup-count limit).
pub(crate) const MAX_MESSAGES: usize = 65_535;

/// `count` messages of `len` values at the start of `src`.
#[derive(Clone, Copy)]
pub(crate) struct Messages<'a> {
    pub src: &'a wgpu::Buffer,
    pub len: usize,
    pub count: usize,
}

/// Words per message of `len` values packed at width `w` (clamped as the codec clamps it).
fn packed_words(len: usize, w: u32) -> usize {
    len.div_ceil((64 / w.clamp(1, 64)) as usize)
}

/// Most bytes the group encoding of `values` values takes (every group at its widest).
pub(crate) fn group_bytes_bound(values: usize) -> u64 {
    values.div_ceil(GROUP) as u64 * MAX_GROUP_BYTES
}

fn too_large(what: &str, n: u64) -> Error {
    device_error(format!("{what} of {n} bytes do not fit a 32-bit offset"))
}

/// Packs every message of `m` at its width in `widths` after what `enc` holds (the
/// dispatches that fill `m.src`); returns the messages' words one after another.
pub(crate) fn pack(
    gpu: &Gpu,
    mut enc: wgpu::CommandEncoder,
    m: Messages<'_>,
    widths: &[u32],
) -> Result<Vec<i64>> {
    debug_assert!(widths.len() == m.count && m.count <= MAX_MESSAGES);
    let mut plan = Vec::with_capacity(2 * m.count);
    let mut total = 0usize;
    for &w in widths {
        plan.extend([w, total as u32]);
        total += packed_words(m.len, w);
        if total > u32::MAX as usize {
            return Err(too_large("packed words", 8 * total as u64));
        }
    }
    if total == 0 {
        return Ok(Vec::new());
    }
    gpu.check_binding(8 * total as u64, "the packed words of a batch")?;
    let out = gpu.zeroed("packed words", 8 * total as u64);
    let plan_buf = gpu.storage("pack plan", bytemuck::cast_slice(&plan));
    let p = gpu.uniform(&CodecParams {
        values: m.len as u32,
        messages: m.count as u32,
        ..Default::default()
    });
    let widest = widths.iter().map(|&w| packed_words(m.len, w)).max();
    let x = gpu.row_groups(widest.unwrap_or(0), WG);
    gpu.dispatch(
        &mut enc,
        CodecKernel::Pack,
        &[&p, m.src, &plan_buf, &out],
        [x, m.count as u32, 1],
    );
    let b = gpu.read(enc, &[(&out, 0, 8 * total as u64)])?;
    Ok(bytemuck::pod_collect_to_vec(&b[0]))
}

/// Group-encodes every message of `m` after what `enc` holds; returns one message of bytes
/// each (the bytes after the GROUPS tag, as `codec::encode_groups` gives them).
pub(crate) fn groups(
    gpu: &Gpu,
    mut enc: wgpu::CommandEncoder,
    m: Messages<'_>,
) -> Result<Vec<Vec<u8>>> {
    let per_message = m.len.div_ceil(GROUP);
    let groups = per_message * m.count;
    if groups == 0 {
        gpu.submit(enc)?;
        return Ok(vec![Vec::new(); m.count]);
    }
    if groups > u32::MAX as usize / 4 {
        return Err(too_large("the group sizes of a batch", 4 * groups as u64));
    }
    let sizes = gpu.zeroed("group sizes", 4 * groups as u64);
    let unused = gpu.zeroed("no output", 16);
    let params = |write| {
        gpu.uniform(&CodecParams {
            values: m.len as u32,
            messages: m.count as u32,
            groups: groups as u32,
            write,
        })
    };
    let cap = gpu.limits.max_compute_workgroups_per_dimension.max(1) as usize;
    let x = groups.div_ceil(GROUPS_PER_WG).clamp(1, cap) as u32;
    let measure = params(0);
    gpu.dispatch(
        &mut enc,
        CodecKernel::Groups,
        &[&measure, m.src, &sizes, &unused],
        [x, 1, 1],
    );
    let b = gpu.read(enc, &[(&sizes, 0, 4 * groups as u64)])?;
    let sizes_read = bytemuck::cast_slice::<u8, u32>(&b[0]).iter().copied();
    let Some((offsets, total)) = shard::group_offsets(sizes_read) else {
        return Err(too_large("the encoded groups of a batch", 1 << 32));
    };
    let total = total as u64;
    gpu.check_binding(total, "the encoded groups of a batch")?;
    gpu.write(&sizes, bytemuck::cast_slice(&offsets))?;
    let out = gpu.zeroed("encoded groups", total);
    let mut enc = gpu.encoder();
    // groups share boundary words and are ORed in: the buffer must start at zero
    enc.clear_buffer(&out, 0, None);
    let write = params(1);
    gpu.dispatch(
        &mut enc,
        CodecKernel::Groups,
        &[&write, m.src, &sizes, &out],
        [x, 1, 1],
    );
    let bytes = gpu
        .read(enc, &[(&out, 0, total.next_multiple_of(4))])?
        .remove(0);
    Ok(shard::split_messages(
        &bytes,
        &offsets,
        per_message,
        m.count,
        total as usize,
    ))
}

/// Messages of `len` values each that fit one storage binding and one dispatch.
fn per_upload(gpu: &Gpu, len: usize, bytes_per_value: u64) -> Result<usize> {
    let message = bytes_per_value * len as u64;
    gpu.check_binding(message, "one message")?;
    Ok(((gpu.max_binding() / message.max(1)) as usize).clamp(1, MAX_MESSAGES))
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
        let per = per_upload(self, len, 8)?;
        let mut out = Vec::new();
        for (chunk, widths) in values.chunks(per * len).zip(widths.chunks(per)) {
            let src = self.storage("values", bytemuck::cast_slice(chunk));
            let m = Messages {
                src: &src,
                len,
                count: widths.len(),
            };
            out.extend(pack(self, self.encoder(), m, widths)?);
        }
        Ok(out)
    }

    /// Group-encodes `values`, messages of `len` values each, with the device's encoder
    /// (uploaded first, as [`Gpu::pack_values`]); one message of bytes each.
    pub fn encode_groups(&self, values: &[i64], len: usize) -> Result<Vec<Vec<u8>>> {
        shard::message_count(values, len)?;
        // the output must fit a binding too: a group may take a little more than its values
        let per = per_upload(self, len, MAX_GROUP_BYTES.div_ceil(GROUP as u64))?;
        let mut out = Vec::new();
        for chunk in values.chunks(per * len) {
            let src = self.storage("values", bytemuck::cast_slice(chunk));
            let m = Messages {
                src: &src,
                len,
                count: chunk.len() / len,
            };
            out.extend(groups(self, self.encoder(), m)?);
        }
        Ok(out)
    }
}
