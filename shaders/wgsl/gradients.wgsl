// Gradients and hessians of every row and group from the margins (core: Objective::gradient),
// and the largest |g| and h per group, reduced as u32 bit patterns (both are >= 0, where the
// order of f32 bits is the order of values).

// The core's objective constants; a unit test checks them against sapwood-core.
const MARGIN_FRAC_BITS: u32 = 24u;
const SIGMOID_RANGE: i32 = 20;
const SIGMOID_STEP_BITS: u32 = 8u;
const EXP_RANGE: i32 = 20;
const EXP_STEP_BITS: u32 = 10u;
const MIN_HESSIAN: f32 = 1e-16f;
const ONE: u32 = 16777216u;
// 2^-24 exactly: probabilities are integers times this
const INV_ONE: f32 = 5.9604644775390625e-8f;
const EXP2_STEP_BITS: u32 = 10u;
const EXP2_VALUE_BITS: i32 = 23;
const EXP2_LIMIT: f32 = 100.0;
// log2(e) rounded to f32 (the core's LOG2_E)
const LOG2_E_BITS: u32 = 0x3fb8aa3bu;
// groups whose maxima are reduced in workgroup memory; the rest go to global atomics
const LOCAL_GROUPS: u32 = 64u;

@group(0) @binding(0) var<uniform> p: GradParams;
@group(0) @binding(1) var<storage, read> labels: array<f32>;
@group(0) @binding(2) var<storage, read> weights: array<f32>;
@group(0) @binding(3) var<storage, read> margins: array<f32>;
@group(0) @binding(4) var<storage, read_write> grad: array<f32>;
@group(0) @binding(5) var<storage, read_write> maxes: array<atomic<u32>>;
@group(0) @binding(6) var<storage, read> sigmoid_table: array<u32>;
@group(0) @binding(7) var<storage, read> exp_table: array<u32>;

var<workgroup> local_max: array<atomic<u32>, 128>;

// The core's `margin_fixed`: clamp, then round ties to even (WGSL `round` does).
fn margin_fixed(m: f32, limit: f32) -> i32 {
    var x = 0.0;
    if (!is_nan_f32(m)) {
        x = clamp(ftz(m), -limit, limit);
    }
    return i32(round(x * f32(1u << MARGIN_FRAC_BITS)));
}

// The core's `sigmoid_fixed`.
fn sigmoid_fixed(m: f32) -> u32 {
    let shift = MARGIN_FRAC_BITS - SIGMOID_STEP_BITS;
    let u = u32(margin_fixed(m, f32(SIGMOID_RANGE)) + (SIGMOID_RANGE << MARGIN_FRAC_BITS));
    let i = u >> shift;
    let f = u & ((1u << shift) - 1u);
    var q: u32;
    if (i + 1u >= p.sigmoid_len) {
        q = sigmoid_table[p.sigmoid_len - 1u];
    } else {
        let a = sigmoid_table[i];
        q = a + (((sigmoid_table[i + 1u] - a) * f) >> shift);
    }
    return clamp(q, 1u, ONE - 1u);
}

// The core's `exp_neg_fixed`.
fn exp_neg_fixed(d0: f32) -> u32 {
    let d = ftz(d0);
    if (is_nan_f32(d) || d >= f32(EXP_RANGE)) {
        return 0u;
    }
    let fixed = u32(round(max(d, 0.0) * f32(1u << MARGIN_FRAC_BITS)));
    let shift = MARGIN_FRAC_BITS - EXP_STEP_BITS;
    let i = fixed >> shift;
    if (i + 1u >= p.exp_len) {
        return 0u;
    }
    let f = fixed & ((1u << shift) - 1u);
    let a = exp_table[i];
    return a - (((a - exp_table[i + 1u]) * f) >> shift);
}

// The core's `exp_parts`: e^x = q * s, q an integer below 2^24 + 1 and s a power of two, so
// that the last product of every use is exact (fusing it into an add changes nothing). The
// base-2 table follows the exponential table in the same buffer.
fn exp_parts(x0: f32) -> vec2<f32> {
    var x = ftz(x0);
    if (is_nan_f32(x)) {
        x = 0.0;
    }
    let t = clamp(ftz(x * bitcast<f32>(LOG2_E_BITS)), -EXP2_LIMIT, EXP2_LIMIT);
    let fixed = i32(round(t * f32(1u << MARGIN_FRAC_BITS)));
    let k = fixed >> MARGIN_FRAC_BITS;
    let frac = bitcast<u32>(fixed) & ((1u << MARGIN_FRAC_BITS) - 1u);
    let shift = MARGIN_FRAC_BITS - EXP2_STEP_BITS;
    let i = p.exp_len + (frac >> shift);
    let f = frac & ((1u << shift) - 1u);
    let a = exp_table[i];
    let q = a + (((exp_table[i + 1u] - a) * f) >> shift);
    let s = bitcast<f32>(u32(k - EXP2_VALUE_BITS + 127) << 23u);
    return vec2<f32>(f32(q), s);
}

fn store(base: u32, g: f32, h: f32) {
    grad[2u * base] = g;
    grad[2u * base + 1u] = h;
    record(0u, g, h);
}

// The core's `Objective::gradient` for the one-group losses beyond squared error and
// logistic (kinds 3 to 8).
fn one_group(base: u32, m0: f32, y: f32, w: f32) {
    let c0 = bitcast<f32>(p.c0);
    let c1 = bitcast<f32>(p.c1);
    let m = ftz(m0);
    if (p.kind == 3u) {
        let d = ftz(m - y);
        var g = 0.0;
        if (d > 0.0) {
            g = w;
        } else if (d < 0.0) {
            g = -w;
        }
        store(base, g, w);
    } else if (p.kind == 4u) {
        let d = ftz(m - y);
        store(base, ftz(select(-c0, c1, d >= 0.0) * w), w);
    } else if (p.kind == 5u) {
        let d = ftz(m - y);
        store(base, ftz(max(min(d, c0), -c0) * w), w);
    } else if (p.kind == 6u) {
        let e = exp_parts(m);
        let eh = exp_parts(ftz(m + c0));
        let g = ftz(ftz(e.x * e.y - y) * w);
        let h = ftz(max(eh.x * eh.y, MIN_HESSIAN) * w);
        store(base, g, h);
    } else if (p.kind == 7u) {
        let e = exp_parts(-m);
        let pr = ftz(ftz(y * e.x) * e.y);
        store(base, ftz(ftz(1.0 - pr) * w), ftz(max(pr, MIN_HESSIAN) * w));
    } else {
        let ea = exp_parts(ftz(c0 * m));
        let eb = exp_parts(ftz(c1 * m));
        let a = ftz(ftz(y * ea.x) * ea.y);
        let b = ftz(eb.x * eb.y);
        let g = ftz(ftz(b - a) * w);
        let hb = ftz(ftz(c1 * eb.x) * eb.y);
        let ha = ftz(ftz(ftz(y * c0) * ea.x) * ea.y);
        store(base, g, ftz(max(ftz(hb - ha), MIN_HESSIAN) * w));
    }
}

// floor((e << 24) / sum) for e <= 2^24 and sum >= 1: the core's u64 division, by restoring
// long division on u32 (the remainder's doubling may pass 2^32; the wrap is undone by the
// subtraction because the true value is below 2 * sum).
fn div_shifted(e: u32, sum: u32) -> u32 {
    var q = e / sum;
    var r = e - q * sum;
    for (var b = 0u; b < PROB_SHIFT; b = b + 1u) {
        let top = r >> 31u;
        r = r << 1u;
        q = q << 1u;
        if (top == 1u || r >= sum) {
            r = r - sum;
            q = q | 1u;
        }
    }
    return q;
}

const PROB_SHIFT: u32 = 24u;

// `label as usize` for the softmax class, decided on bits: truncation toward zero; NaN, -0 and
// negatives give 0; from 2^32 up u32::MAX, which like Rust's larger integer matches no class
// (c < k <= u32::MAX). WGSL's u32() saturates, but naga's clamp (FClamp) leaves a NaN to the
// driver, which may give either end of the range.
fn label_class_of(y: f32) -> u32 {
    let b = bitcast<u32>(y);
    if ((b >> 31u) != 0u || (b & 0x7fffffffu) > 0x7f800000u) {
        return 0u;
    }
    if (b >= 0x4f800000u) {
        return 0xffffffffu;
    }
    return u32(y);
}

fn record(c: u32, g: f32, h: f32) {
    // NaN never wins a max on the CPU (f32::max ignores it)
    let gb = select(bitcast<u32>(g) & 0x7fffffffu, 0u, is_nan_f32(g));
    let hb = select(bitcast<u32>(h), 0u, is_nan_f32(h) || (bitcast<u32>(h) >> 31u) != 0u);
    if (c < LOCAL_GROUPS) {
        atomicMax(&local_max[2u * c], gb);
        atomicMax(&local_max[2u * c + 1u], hb);
    } else {
        atomicMax(&maxes[2u * c], gb);
        atomicMax(&maxes[2u * c + 1u], hb);
    }
}

@compute @workgroup_size(256)
fn main(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    if (lid < 128u) {
        atomicStore(&local_max[lid], 0u);
    }
    workgroupBarrier();
    let k = p.k;
    for (var i = wg.x * WG + lid; i < p.n; i = i + nwg.x * WG) {
        let y = ftz(labels[i]);
        var w = 1.0;
        if (p.has_weights != 0u) {
            w = ftz(weights[i]);
        }
        let base = i * k;
        if (p.kind == 0u) {
            let g = ftz(ftz(ftz(margins[base]) - y) * w);
            grad[2u * base] = g;
            grad[2u * base + 1u] = w;
            record(0u, g, w);
        } else if (p.kind == 1u) {
            let pr = f32(sigmoid_fixed(margins[base])) * INV_ONE;
            let g = ftz(ftz(pr - y) * w);
            let h = ftz(max(pr * (1.0 - pr), MIN_HESSIAN) * w);
            grad[2u * base] = g;
            grad[2u * base + 1u] = h;
            record(0u, g, h);
        } else if (p.kind >= 3u) {
            one_group(base, margins[base], y, w);
        } else {
            // -inf: the fold's start; a NaN margin never wins the comparison
            var mx = bitcast<f32>(0xff800000u);
            for (var c = 0u; c < k; c = c + 1u) {
                let m = ftz(margins[base + c]);
                if (!is_nan_f32(m) && m > mx) {
                    mx = m;
                }
            }
            var sum = 0u;
            for (var c = 0u; c < k; c = c + 1u) {
                sum = sum + exp_neg_fixed(mx - ftz(margins[base + c]));
            }
            sum = max(sum, 1u);
            let label_class = label_class_of(y);
            for (var c = 0u; c < k; c = c + 1u) {
                let e = exp_neg_fixed(mx - ftz(margins[base + c]));
                let pr = f32(div_shifted(e, sum)) * INV_ONE;
                let t = select(0.0, 1.0, c == label_class);
                let g = ftz(ftz(pr - t) * w);
                // c0: the hessian's factor, 2 or K/(K - 1) (multiclass_hessian)
                let h = ftz(max(bitcast<f32>(p.c0) * (pr * (1.0 - pr)), MIN_HESSIAN) * w);
                grad[2u * (base + c)] = g;
                grad[2u * (base + c) + 1u] = h;
                record(c, g, h);
            }
        }
    }
    workgroupBarrier();
    if (lid < 2u * min(k, LOCAL_GROUPS)) {
        let v = atomicLoad(&local_max[lid]);
        if (v != 0u) {
            atomicMax(&maxes[lid], v);
        }
    }
}
