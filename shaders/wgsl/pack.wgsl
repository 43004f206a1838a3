// Packed lanes of whole messages (codec::pack in sapwood-collective): word t of message m
// holds its values t·L .. t·L + L - 1 (L = 64 / w), value j weighted by 2^(w·j), summed with
// wrapping 64-bit adds, so a plain integer sum of packed words is the packed lane-wise sum.
// Workgroup (x, m) packs a slice of message m's words, one word per thread.

@group(0) @binding(0) var<uniform> cp: CodecParams;
@group(0) @binding(1) var<storage, read> values: array<u32>;
// per message: lane width (clamped to 1..=64 here, as the codec does), first output word
@group(0) @binding(2) var<storage, read> plan: array<u32>;
@group(0) @binding(3) var<storage, read_write> words: array<u32>;

@compute @workgroup_size(256)
fn main(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let m = wg.y;
    let w = clamp(plan[2u * m], 1u, 64u);
    let at = plan[2u * m + 1u];
    let lanes = 64u / w;
    let n = (cp.values + lanes - 1u) / lanes;
    let base = m * cp.values;
    for (var t = wg.x * WG + lid; t < n; t = t + nwg.x * WG) {
        let first = t * lanes;
        let count = min(lanes, cp.values - first);
        var acc = vec2<u32>(0u, 0u);
        for (var j = 0u; j < count; j = j + 1u) {
            let k = base + first + j;
            acc = add64(acc, shl64(vec2<u32>(values[2u * k], values[2u * k + 1u]), w * j));
        }
        words[2u * (at + t)] = acc.x;
        words[2u * (at + t) + 1u] = acc.y;
    }
}
