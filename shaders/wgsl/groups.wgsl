// The group encoding of whole messages (codec/groups.rs in sapwood-collective): every 32
// values of a message (fewer at its end) at their own shift and width, as a header byte
// (width, 0x80 when sparse), a shift byte, for a sparse group a 32-bit bitmap of its nonzero
// values, then the zigzagged shifted values (all, or only the marked ones) as a
// little-endian bit stream. A group's size is known only from its values, so it runs twice:
// `write` 0 stores each group's size in `sizes`; the host turns them into byte offsets
// (an exclusive scan) and `write` 1 writes each group at its offset in `out`, zeroed first.
// Groups start on any byte, so neighbours may share a word: every write is an atomicOr.
//
// A workgroup takes 8 groups at a time, one value per thread; the group's OR of values, OR
// of zigzagged values and bitmap are workgroup atomics (portable WGSL has no subgroups).

@group(0) @binding(0) var<uniform> cp: CodecParams;
@group(0) @binding(1) var<storage, read> values: array<u32>;
// sizes in bytes (write 0) or byte offsets (write 1), one per group
@group(0) @binding(2) var<storage, read_write> sizes: array<u32>;
@group(0) @binding(3) var<storage, read_write> out: array<atomic<u32>>;

// Groups per workgroup (WG / 32).
const GROUPS_PER_WG: u32 = 8u;

// per group: OR of the values (lo, hi), OR of their zigzags (lo, hi), the bitmap
var<workgroup> stats: array<atomic<u32>, 40>;

// ORs the (up to 64) bits of v into the stream at bit `bit` of word `word` (bit < 2^16).
fn or_bits(word: u32, bit: u32, v: vec2<u32>) {
    let i = word + bit / 32u;
    let s = bit % 32u;
    let w0 = v.x << s;
    var w1 = v.y << s;
    var w2 = 0u;
    if (s != 0u) {
        w1 = w1 | (v.x >> (32u - s));
        w2 = v.y >> (32u - s);
    }
    if (w0 != 0u) {
        atomicOr(&out[i], w0);
    }
    if (w1 != 0u) {
        atomicOr(&out[i + 1u], w1);
    }
    if (w2 != 0u) {
        atomicOr(&out[i + 2u], w2);
    }
}

@compute @workgroup_size(256)
fn main(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let per_message = (cp.values + 31u) / 32u;
    let blocks = (cp.groups + GROUPS_PER_WG - 1u) / GROUPS_PER_WG;
    let slot = lid / 32u;
    let j = lid % 32u;
    for (var blk = wg.x; blk < blocks; blk = blk + nwg.x) {
        if (lid < 5u * GROUPS_PER_WG) {
            atomicStore(&stats[lid], 0u);
        }
        workgroupBarrier();
        let g = blk * GROUPS_PER_WG + slot;
        var v = vec2<u32>(0u, 0u);
        var len = 0u;
        if (g < cp.groups) {
            let m = g / per_message;
            let first = (g % per_message) * 32u;
            len = min(32u, cp.values - first);
            if (j < len) {
                let k = m * cp.values + first + j;
                v = vec2<u32>(values[2u * k], values[2u * k + 1u]);
            }
        }
        let z = zigzag64(v);
        let at = 5u * slot;
        if ((v.x | v.y) != 0u) {
            atomicOr(&stats[at], v.x);
            atomicOr(&stats[at + 1u], v.y);
            atomicOr(&stats[at + 2u], z.x);
            atomicOr(&stats[at + 3u], z.y);
            atomicOr(&stats[at + 4u], 1u << j);
        }
        workgroupBarrier();
        let or_v = vec2<u32>(atomicLoad(&stats[at]), atomicLoad(&stats[at + 1u]));
        let or_z = vec2<u32>(atomicLoad(&stats[at + 2u]), atomicLoad(&stats[at + 3u]));
        let mask = atomicLoad(&stats[at + 4u]);
        var shift = 0u;
        var w = 0u;
        if ((or_v.x | or_v.y) != 0u) {
            shift = ctz64(or_v);
            // with the low `shift` bits of every value zero, zigzag(v) >> shift is
            // zigzag(v >> shift)
            w = bit_len64(shr64(or_z, shift));
        }
        let k = countOneBits(mask);
        let sparse = w != 0u && 5u * (32u + k * w) <= 4u * len * w;
        if (g < cp.groups) {
            if (cp.write == 0u) {
                if (j == 0u) {
                    var size = 1u;
                    if (sparse) {
                        size = 6u + (k * w + 7u) / 8u;
                    } else if (w != 0u) {
                        size = 2u + (len * w + 7u) / 8u;
                    }
                    sizes[g] = size;
                }
            } else if (w != 0u) {
                let off = sizes[g];
                let word = off / 4u;
                let bit = 8u * (off % 4u);
                if (j == 0u) {
                    let head = w | select(0u, 0x80u, sparse);
                    or_bits(word, bit, vec2<u32>(head | (shift << 8u), 0u));
                    if (sparse) {
                        or_bits(word, bit + 16u, vec2<u32>(mask, 0u));
                    }
                }
                // a sparse group writes only its marked values, each at its rank
                var rank = j;
                if (sparse) {
                    rank = countOneBits(mask & ((1u << j) - 1u));
                }
                if ((v.x | v.y) != 0u) {
                    let data = bit + select(16u, 48u, sparse);
                    or_bits(word, data + rank * w, shr64(z, shift));
                }
            }
        }
        workgroupBarrier();
    }
}
