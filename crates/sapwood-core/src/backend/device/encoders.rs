//! The histogram encoders on a device: packed lanes (`codec::pack` of sapwood-collective)
//! and the group encoding (what the `auto` codec sends), run on messages already on the
//! device, so a node's histogram reaches the host only encoded. The host's part is here,
//! once for every device: the pack plan, the two passes of the group encoder with the
//! exclusive scan of group sizes between them, and the cutting of the output into messages.
//!
//! Messages are `count` blocks of `len` i64 values one after another from the start of a
//! buffer: a batch of node histograms (`len` = 2 · total bins: g, h of every bin) is that.

use std::ops::Range;

use super::{bytes_i64, bytes_u32, u32_bytes, Call, CodecScalars, Launch, Scalars, ShardDevice};
use crate::backend::shard::kernels::CodecKernel;
use crate::backend::shard::{group_offsets, message_count, split_messages};
use crate::error::{Error, Result};

/// Most bytes the group encoding takes for 32 values: 6 header bytes and 64 bits a value.
const MAX_GROUP_BYTES: usize = 6 + 4 * 64;
/// Values per group of the group encoding (a warp of groups.cu, a subgroup of groups.wgsl).
const GROUP: usize = 32;
/// Messages per launch along y (the grid limit).
pub(crate) const MAX_MESSAGES: usize = 65_535;

/// Most bytes the group encoding of `values` values takes (every group at its widest).
pub fn group_bytes_bound(values: usize) -> usize {
    values.div_ceil(GROUP) * MAX_GROUP_BYTES
}

fn too_large<D: ShardDevice>(dev: &D, what: &str, n: usize) -> Error {
    Error::Backend(format!(
        "{}: {what} of {n} bytes do not fit a 32-bit offset",
        dev.name()
    ))
}

/// Fails unless a buffer of `bytes` can be bound by a kernel of `dev`.
pub(crate) fn check_binding<D: ShardDevice>(dev: &D, bytes: u64, what: &str) -> Result<()> {
    let limit = dev.limits().binding_bytes;
    if bytes > limit {
        return Err(Error::Backend(format!(
            "{what} needs a buffer of {bytes} bytes, more than the storage binding limit of \
             {limit} bytes of {}; split the data over more workers",
            dev.name()
        )));
    }
    Ok(())
}

/// Words per message of `len` values packed at width `w` (clamped as the codec clamps it).
fn packed_words(len: usize, w: u32) -> usize {
    len.div_ceil((64 / w.clamp(1, 64)) as usize)
}

/// `rows` runs of `run` bytes: run i at `src_at + i * src_pitch` of the source, at
/// `dst_at + i * run` of the destination.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Runs {
    /// Byte offset of the first run in the source.
    pub src_at: usize,
    /// Bytes from one run to the next in the source.
    pub src_pitch: usize,
    /// Byte offset of the first run in the destination (runs follow one another there).
    pub dst_at: usize,
    /// Bytes a run.
    pub run: usize,
    /// Runs.
    pub rows: usize,
}

impl Runs {
    /// The runs of bins `block` of the `nodes` histograms of `width` bins at the start of
    /// a batch's buffer, to their place in a buffer of that block of every node, after the
    /// `first` nodes of earlier batches (16 bytes a bin).
    pub fn of_block(block: &Range<usize>, width: usize, first: usize, nodes: usize) -> Self {
        Runs {
            src_at: 16 * block.start,
            src_pitch: 16 * width,
            dst_at: 16 * first * block.len(),
            run: 16 * block.len(),
            rows: nodes,
        }
    }

    /// The (source, destination) byte ranges of each run.
    pub fn each(self) -> impl Iterator<Item = (Range<usize>, Range<usize>)> {
        (0..self.rows).map(move |i| {
            let (s, d) = (self.src_at + i * self.src_pitch, self.dst_at + i * self.run);
            (s..s + self.run, d..d + self.run)
        })
    }

    /// Whether every run lies inside a source of `src` bytes and a destination of `dst`,
    /// and no run overlaps the next in the source.
    pub fn inside(self, src: usize, dst: usize) -> bool {
        let last = self.each().last();
        self.run <= self.src_pitch && last.is_none_or(|(s, d)| s.end <= src && d.end <= dst)
    }
}

/// Packs the `widths.len()` messages of `len` values at the start of `src`, message i at
/// width `widths[i]`, after the work queued; returns their words.
pub(crate) fn pack<D: ShardDevice>(
    dev: &D,
    src: &D::Buffer,
    len: usize,
    widths: &[u32],
) -> Result<Vec<i64>> {
    debug_assert!(widths.len() <= MAX_MESSAGES);
    let mut plan = Vec::with_capacity(2 * widths.len());
    let mut total = 0usize;
    for &w in widths {
        plan.extend([w, total as u32]);
        total += packed_words(len, w);
        if total > u32::MAX as usize {
            return Err(too_large(dev, "packed words", 8 * total));
        }
    }
    if total == 0 {
        return Ok(Vec::new());
    }
    check_binding(dev, 8 * total as u64, "the packed words of a batch")?;
    let plan_buf = dev.upload(&u32_bytes(&plan), "pack plan")?;
    let out = dev.zeroed(8 * total, "packed words")?;
    let widest = widths.iter().map(|&w| packed_words(len, w)).max();
    dev.launch(&Call {
        kernel: Launch::Codec(CodecKernel::Pack),
        scalars: Scalars::Codec(CodecScalars {
            values: len as u32,
            messages: widths.len() as u32,
            ..Default::default()
        }),
        buffers: &[src, &plan_buf, &out],
        items: widest.unwrap_or(0),
        y: widths.len() as u32,
        z: 1,
        shared_bytes: 0,
    })?;
    Ok(bytes_i64(&dev.read(&[(&out, 0, 8 * total)])?.remove(0)))
}

/// A launch of the group encoder over `n_groups` groups.
fn groups_call<'a, B>(scalars: Scalars, buffers: &'a [&'a B], n_groups: usize) -> Call<'a, B> {
    Call {
        kernel: Launch::Codec(CodecKernel::Groups),
        scalars,
        buffers,
        items: n_groups * GROUP,
        y: 1,
        z: 1,
        shared_bytes: 0,
    }
}

/// Group-encodes the `count` messages of `len` values at the start of `src`, after the work
/// queued; one message of bytes each (the bytes after the GROUPS tag, as
/// `codec::encode_groups` gives them).
pub(crate) fn groups<D: ShardDevice>(
    dev: &D,
    src: &D::Buffer,
    len: usize,
    count: usize,
) -> Result<Vec<Vec<u8>>> {
    let per_message = len.div_ceil(GROUP);
    let n_groups = per_message * count;
    if n_groups == 0 {
        dev.flush()?;
        return Ok(vec![Vec::new(); count]);
    }
    if n_groups > u32::MAX as usize / 4 {
        return Err(too_large(dev, "the group sizes of a batch", 4 * n_groups));
    }
    let sizes = dev.zeroed(4 * n_groups, "group sizes")?;
    let unused = dev.zeroed(16, "no output")?;
    let scalars = |write| {
        Scalars::Codec(CodecScalars {
            values: len as u32,
            messages: count as u32,
            groups: n_groups as u32,
            write,
        })
    };
    dev.launch(&groups_call(scalars(0), &[src, &sizes, &unused], n_groups))?;
    let read = dev.read(&[(&sizes, 0, 4 * n_groups)])?.remove(0);
    let Some((offsets, total)) = group_offsets(bytes_u32(&read)) else {
        return Err(too_large(dev, "the encoded groups of a batch", 1 << 32));
    };
    check_binding(dev, total as u64, "the encoded groups of a batch")?;
    dev.write(&sizes, &u32_bytes(&offsets), "group offsets")?;
    // groups share boundary words and are ORed in: the buffer starts at zero
    let out = dev.zeroed(total.next_multiple_of(4), "encoded groups")?;
    dev.launch(&groups_call(scalars(1), &[src, &sizes, &out], n_groups))?;
    let bytes = dev.read(&[(&out, 0, total.next_multiple_of(4))])?.remove(0);
    Ok(split_messages(&bytes, &offsets, per_message, count, total))
}

/// Messages of `len` values each that fit one binding, `bytes_per_value` a value, and one
/// launch.
fn per_upload<D: ShardDevice>(dev: &D, len: usize, bytes_per_value: u64) -> Result<usize> {
    let message = bytes_per_value * len as u64;
    check_binding(dev, message, "one message")?;
    let limits = dev.limits();
    let room = limits.binding_bytes.min(limits.batch_bytes);
    Ok(((room / message.max(1)) as usize).clamp(1, MAX_MESSAGES))
}

fn upload_values<D: ShardDevice>(dev: &D, values: &[i64]) -> Result<D::Buffer> {
    let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    dev.upload(&bytes, "values")
}

/// Packs `values`, messages of `len` values each, message i at lane width `widths[i]`,
/// with the device's packing kernel (uploaded first: the path the backend runs on its
/// histogram buffer, for values chosen by a test or a benchmark).
pub fn pack_values<D: ShardDevice>(
    dev: &D,
    values: &[i64],
    len: usize,
    widths: &[u32],
) -> Result<Vec<i64>> {
    let count = message_count(values, len)?;
    if widths.len() != count {
        return Err(Error::Backend(format!(
            "{} lane widths for {count} messages",
            widths.len()
        )));
    }
    let per = per_upload(dev, len, 8)?;
    let mut out = Vec::new();
    for (chunk, widths) in values.chunks(per * len).zip(widths.chunks(per)) {
        out.extend(pack(dev, &upload_values(dev, chunk)?, len, widths)?);
    }
    Ok(out)
}

/// Group-encodes `values`, messages of `len` values each, with the device's encoder
/// (uploaded first, as [`pack_values`]); one message of bytes each.
pub fn encode_groups<D: ShardDevice>(dev: &D, values: &[i64], len: usize) -> Result<Vec<Vec<u8>>> {
    message_count(values, len)?;
    // the output must fit a binding too: a group may take a little more than its values
    let per = per_upload(dev, len, MAX_GROUP_BYTES.div_ceil(GROUP) as u64)?;
    let mut out = Vec::new();
    for chunk in values.chunks(per * len) {
        let src = upload_values(dev, chunk)?;
        out.extend(groups(dev, &src, len, chunk.len() / len)?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_runs_of_every_batch_gather_a_block_node_after_node() {
        // 7 bins a node (16 bytes a bin), 5 nodes in batches of 2, block 2..5: the runs of
        // each batch, applied to its buffer, give the block of every node in node order
        let (width, nodes, per_batch, block) = (7, 5, 2, 2..5);
        let byte = |node: usize, b: usize| (31 * node + b) as u8;
        let mut gathered = vec![0u8; 16 * nodes * block.len()];
        for first in (0..nodes).step_by(per_batch) {
            let batch = per_batch.min(nodes - first);
            let hist: Vec<u8> = (first..first + batch)
                .flat_map(|n| (0..16 * width).map(move |b| byte(n, b)))
                .collect();
            let runs = Runs::of_block(&block, width, first, batch);
            assert!(runs.inside(hist.len(), gathered.len()));
            for (s, d) in runs.each() {
                gathered[d].copy_from_slice(&hist[s]);
            }
        }
        let want: Vec<u8> = (0..nodes)
            .flat_map(|n| (16 * block.start..16 * block.end).map(move |b| byte(n, b)))
            .collect();
        assert_eq!(gathered, want);
    }

    #[test]
    fn runs_outside_their_buffers_are_refused() {
        let r = Runs::of_block(&(3..7), 7, 1, 2);
        // after 1 node of 4 bins, 2 nodes' runs of 64 bytes: the source's last ends at byte
        // 48 + 112 + 64 = 224, the destination's at 64 + 2 * 64 = 192
        assert!(r.inside(224, 192));
        assert!(!r.inside(223, 192));
        assert!(!r.inside(224, 191));
        // runs wider than the pitch would overlap
        let wide = Runs { run: 120, ..r };
        assert!(!wide.inside(1000, 1000));
        // no run at all lies anywhere
        assert!(Runs { rows: 0, ..r }.inside(0, 0));
    }
}
