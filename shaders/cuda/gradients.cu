// Gradients and hessians of every row and group from the margins (core: Objective::gradient),
// and the largest |g| and h per group, reduced as u32 bit patterns (both are >= 0, where the
// order of f32 bits is the order of values). maxes holds 2 words per group, zeroed first.

// The core's objective constants; a test checks them against sapwood-core.
#define MARGIN_FRAC_BITS 24u
#define SIGMOID_RANGE 20
#define SIGMOID_STEP_BITS 8u
#define EXP_RANGE 20
#define EXP_STEP_BITS 10u
#define PROB_SHIFT 24u
#define ONE 16777216u
// 1e-16f
#define MIN_HESSIAN_BITS 0x24e69595u
// 2^-24 exactly: probabilities are integers times this
#define INV_ONE 5.9604644775390625e-8f
#define EXP2_STEP_BITS 10u
#define EXP2_VALUE_BITS 23
#define EXP2_LIMIT 100.0f
// log2(e) rounded to f32 (the core's LOG2_E)
#define LOG2_E_BITS 0x3fb8aa3bu
// groups whose maxima are reduced in shared memory; the rest go to global atomics
#define LOCAL_GROUPS 64u

// The core's `margin_fixed`: clamp, then round ties to even.
__device__ __forceinline__ i32 margin_fixed(float m, float limit) {
    float x = 0.0f;
    if (!is_nan_f32(m)) {
        x = fminf(fmaxf(ftz(m), -limit), limit);
    }
    return __float2int_rn(__fmul_rn(x, (float)(1u << MARGIN_FRAC_BITS)));
}

// The core's `sigmoid_fixed`.
__device__ __forceinline__ u32 sigmoid_fixed(const GradParams& p, const u32* __restrict__ t, float m) {
    const u32 shift = MARGIN_FRAC_BITS - SIGMOID_STEP_BITS;
    u32 u = (u32)(margin_fixed(m, (float)SIGMOID_RANGE) + (SIGMOID_RANGE << MARGIN_FRAC_BITS));
    u32 i = u >> shift;
    u32 f = u & ((1u << shift) - 1u);
    u32 q;
    if (i + 1u >= p.sigmoid_len) {
        q = t[p.sigmoid_len - 1u];
    } else {
        q = t[i] + (((t[i + 1u] - t[i]) * f) >> shift);
    }
    return min(max(q, 1u), ONE - 1u);
}

// The core's `exp_neg_fixed`.
__device__ __forceinline__ u32 exp_neg_fixed(const GradParams& p, const u32* __restrict__ t, float d0) {
    float d = ftz(d0);
    if (is_nan_f32(d) || d >= (float)EXP_RANGE) {
        return 0u;
    }
    u32 fixed = __float2uint_rn(__fmul_rn(fmaxf(d, 0.0f), (float)(1u << MARGIN_FRAC_BITS)));
    const u32 shift = MARGIN_FRAC_BITS - EXP_STEP_BITS;
    u32 i = fixed >> shift;
    if (i + 1u >= p.exp_len) {
        return 0u;
    }
    u32 f = fixed & ((1u << shift) - 1u);
    return t[i] - (((t[i] - t[i + 1u]) * f) >> shift);
}

// The core's `exp_parts`: e^x = q * s, q an integer below 2^24 + 1 and s a power of two. The
// base-2 table follows the exponential table in the same buffer.
__device__ __forceinline__ void exp_parts(const GradParams& p, const u32* __restrict__ t, float x0,
                                          float* q_out, float* s_out) {
    float x = ftz(x0);
    if (is_nan_f32(x)) {
        x = 0.0f;
    }
    float tt = fminf(fmaxf(ftz(__fmul_rn(x, __uint_as_float(LOG2_E_BITS))), -EXP2_LIMIT), EXP2_LIMIT);
    i32 fixed = __float2int_rn(__fmul_rn(tt, (float)(1u << MARGIN_FRAC_BITS)));
    i32 k = fixed >> MARGIN_FRAC_BITS;
    u32 frac = ((u32)fixed) & ((1u << MARGIN_FRAC_BITS) - 1u);
    const u32 shift = MARGIN_FRAC_BITS - EXP2_STEP_BITS;
    u32 i = p.exp_len + (frac >> shift);
    u32 f = frac & ((1u << shift) - 1u);
    u32 a = t[i];
    u32 q = a + (((t[i + 1u] - a) * f) >> shift);
    *q_out = (float)q;
    *s_out = __uint_as_float(((u32)(k - EXP2_VALUE_BITS + 127)) << 23);
}

__device__ __forceinline__ void record(u32* local_max, u32* maxes, u32 c, float g, float h) {
    // NaN never wins a max on the CPU (f32::max ignores it)
    u32 gb = is_nan_f32(g) ? 0u : (__float_as_uint(g) & 0x7fffffffu);
    u32 hb = (is_nan_f32(h) || (__float_as_uint(h) >> 31) != 0u) ? 0u : __float_as_uint(h);
    u32* dst = c < LOCAL_GROUPS ? local_max : maxes;
    atomicMax(&dst[2u * c], gb);
    atomicMax(&dst[2u * c + 1u], hb);
}

extern "C" __global__ void __launch_bounds__(256) gradients(
    GradParams p,
    const float* __restrict__ labels,
    const float* __restrict__ weights,
    const float* __restrict__ margins,
    float* __restrict__ grad,
    u32* __restrict__ maxes,
    const u32* __restrict__ sigmoid_table,
    const u32* __restrict__ exp_table)
{
    __shared__ u32 local_max[2u * LOCAL_GROUPS];
    for (u32 i = threadIdx.x; i < 2u * LOCAL_GROUPS; i += blockDim.x) {
        local_max[i] = 0u;
    }
    __syncthreads();
    const float min_hessian = __uint_as_float(MIN_HESSIAN_BITS);
    const u32 k = p.k;
    for (u32 i = blockIdx.x * blockDim.x + threadIdx.x; i < p.n; i += gridDim.x * blockDim.x) {
        float y = ftz(labels[i]);
        float w = p.has_weights != 0u ? ftz(weights[i]) : 1.0f;
        u64 base = (u64)i * k;
        if (p.kind == 0u) {
            float g = ftz(__fmul_rn(ftz(__fsub_rn(ftz(margins[base]), y)), w));
            grad[2u * base] = g;
            grad[2u * base + 1u] = w;
            record(local_max, maxes, 0u, g, w);
        } else if (p.kind == 1u) {
            float pr = __fmul_rn((float)sigmoid_fixed(p, sigmoid_table, margins[base]), INV_ONE);
            float g = ftz(__fmul_rn(ftz(__fsub_rn(pr, y)), w));
            float h = ftz(__fmul_rn(fmaxf(__fmul_rn(pr, __fsub_rn(1.0f, pr)), min_hessian), w));
            grad[2u * base] = g;
            grad[2u * base + 1u] = h;
            record(local_max, maxes, 0u, g, h);
        } else if (p.kind >= 3u) {
            // the core's Objective::gradient for kinds 3 to 8
            const float c0 = __uint_as_float(p.c0);
            const float c1 = __uint_as_float(p.c1);
            const float m = ftz(margins[base]);
            float g, h = w;
            if (p.kind == 3u) {
                float d = ftz(__fsub_rn(m, y));
                g = d > 0.0f ? w : (d < 0.0f ? -w : 0.0f);
            } else if (p.kind == 4u) {
                float d = ftz(__fsub_rn(m, y));
                g = ftz(__fmul_rn(d >= 0.0f ? c1 : -c0, w));
            } else if (p.kind == 5u) {
                float d = ftz(__fsub_rn(m, y));
                g = ftz(__fmul_rn(fmaxf(fminf(d, c0), -c0), w));
            } else if (p.kind == 6u) {
                float q, sc, qh, sh;
                exp_parts(p, exp_table, m, &q, &sc);
                exp_parts(p, exp_table, ftz(__fadd_rn(m, c0)), &qh, &sh);
                g = ftz(__fmul_rn(ftz(__fsub_rn(__fmul_rn(q, sc), y)), w));
                h = ftz(__fmul_rn(fmaxf(__fmul_rn(qh, sh), min_hessian), w));
            } else if (p.kind == 7u) {
                float q, sc;
                exp_parts(p, exp_table, -m, &q, &sc);
                float pr = ftz(__fmul_rn(ftz(__fmul_rn(y, q)), sc));
                g = ftz(__fmul_rn(ftz(__fsub_rn(1.0f, pr)), w));
                h = ftz(__fmul_rn(fmaxf(pr, min_hessian), w));
            } else {
                float qa, sa, qb, sb;
                exp_parts(p, exp_table, ftz(__fmul_rn(c0, m)), &qa, &sa);
                exp_parts(p, exp_table, ftz(__fmul_rn(c1, m)), &qb, &sb);
                float a = ftz(__fmul_rn(ftz(__fmul_rn(y, qa)), sa));
                float b = ftz(__fmul_rn(qb, sb));
                g = ftz(__fmul_rn(ftz(__fsub_rn(b, a)), w));
                float hb = ftz(__fmul_rn(ftz(__fmul_rn(c1, qb)), sb));
                float ha = ftz(__fmul_rn(ftz(__fmul_rn(ftz(__fmul_rn(y, c0)), qa)), sa));
                h = ftz(__fmul_rn(fmaxf(ftz(__fsub_rn(hb, ha)), min_hessian), w));
            }
            grad[2u * base] = g;
            grad[2u * base + 1u] = h;
            record(local_max, maxes, 0u, g, h);
        } else {
            // -inf: the fold's start; a NaN margin never wins the comparison
            float mx = __uint_as_float(0xff800000u);
            for (u32 c = 0u; c < k; ++c) {
                float m = ftz(margins[base + c]);
                if (!is_nan_f32(m) && m > mx) {
                    mx = m;
                }
            }
            u64 sum = 0ull;
            for (u32 c = 0u; c < k; ++c) {
                sum += (u64)exp_neg_fixed(p, exp_table, __fsub_rn(mx, ftz(margins[base + c])));
            }
            sum = sum > 1ull ? sum : 1ull;
            // `label as usize`: truncation toward zero, negatives and NaN to 0; from 2^32 up
            // u32::MAX, which like Rust's larger integer matches no class (c < k <= u32::MAX)
            u32 label_class = f32_to_u32_rz(y);
            for (u32 c = 0u; c < k; ++c) {
                u64 e = (u64)exp_neg_fixed(p, exp_table, __fsub_rn(mx, ftz(margins[base + c])));
                u64 pk = (e << PROB_SHIFT) / sum;
                float pr = __fmul_rn(__ull2float_rn(pk), INV_ONE);
                float t = c == label_class ? 1.0f : 0.0f;
                float g = ftz(__fmul_rn(ftz(__fsub_rn(pr, t)), w));
                // c0: the hessian's factor, 2 or K/(K - 1) (multiclass_hessian)
                float h = ftz(__fmul_rn(fmaxf(__fmul_rn(__uint_as_float(p.c0),
                    __fmul_rn(pr, __fsub_rn(1.0f, pr))), min_hessian), w));
                grad[2u * (base + c)] = g;
                grad[2u * (base + c) + 1u] = h;
                record(local_max, maxes, c, g, h);
            }
        }
    }
    __syncthreads();
    u32 local = 2u * min(k, LOCAL_GROUPS);
    for (u32 i = threadIdx.x; i < local; i += blockDim.x) {
        if (local_max[i] != 0u) {
            atomicMax(&maxes[i], local_max[i]);
        }
    }
}
