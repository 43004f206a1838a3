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
                float h = ftz(__fmul_rn(
                    fmaxf(__fmul_rn(2.0f, __fmul_rn(pr, __fsub_rn(1.0f, pr))), min_hessian), w));
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
