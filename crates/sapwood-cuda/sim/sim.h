// The CUDA dialect of the CPU simulator: included before the helpers and the body of one
// kernel of shaders/cuda/, it makes that unchanged text compile as C++17 with g++, every CUDA
// thread of a block a fiber of runtime.cpp. See README.md for what the simulator checks.
//
// The top of this header is the C ABI the Rust side calls; the rest is C++ only.

#ifndef SAPWOOD_SIM_H
#define SAPWOOD_SIM_H

#include <stddef.h>
#include <stdint.h>

// The most dynamic shared memory a launch may ask for: 227 KiB, the sm_90 opt-in maximum.
#define SIM_MAX_DYNAMIC_SHARED 232448u

// One launch, as cuLaunchKernel takes it, plus how to interleave the threads.
typedef struct {
    uint32_t grid[3];
    uint32_t block[3];
    uint32_t dynamic_shared_bytes;
    // 0: every pick of the next thread is a random runnable one; 1: one warp at a time, each
    // until all its lanes wait at a barrier or have finished (warps in a random order)
    uint32_t schedule;
    // drives the block order and every scheduling choice: same seed, same interleaving
    uint64_t seed;
} SimLaunch;

#ifdef __cplusplus

#include <cstring>
#include <tuple>
#include <type_traits>
#include <utility>

// Fast-math would break the bit-exact contract the kernels keep with the CPU backend; so would
// contracting a * b + c into an FMA, which no macro reveals: compile with -ffp-contract=off
// (NVRTC compiles the kernels with --fmad=false).
#if defined(__FAST_MATH__)
#error "the simulator must be compiled without -ffast-math"
#endif

// The runtime's own entry points are hidden: the library exports sapwood_sim_kernel_* only.
#define SAPWOOD_SIM_INTERNAL __attribute__((visibility("hidden")))

namespace sapwood_sim {

struct Dim3 {
    unsigned int x, y, z;
};

// What a CUDA thread reads about itself: the first member of its fiber.
struct ThreadView {
    Dim3 thread_idx;
    Dim3 block_idx;
    Dim3 block_dim;
    Dim3 grid_dim;
};

// The thread whose fiber runs on this OS thread (set by the scheduler before each switch).
// `__thread` rather than `thread_local`: no dynamic initialisation, so no TLS wrapper call.
extern __thread const ThreadView* current_thread SAPWOOD_SIM_INTERNAL;

// The collectives of a warp; the runtime checks that all 32 lanes reach the same one.
enum class WarpOp : unsigned char {
    ShflIdx,
    ShflUp,
    ShflDown,
    ShflXor,
    Ballot,
    Any,
    All,
    MatchAny,
    ReduceAdd,
    ReduceMin,
    ReduceMax,
    ReduceAnd,
    ReduceOr,
    ReduceXor,
    SyncWarp,
};

// One lane's request: `value` holds the operand's bytes (size 4 or 8), `arg` the source
// lane, delta or lane mask of a shuffle (or 1 for signed min/max), `width` a shuffle's
// segment width.
struct WarpRequest {
    WarpOp op;
    unsigned char size;
    unsigned char width;
    unsigned int mask;
    unsigned int arg;
    unsigned long long value;
};

// Blocks the calling thread until every thread of its block calls it.
SAPWOOD_SIM_INTERNAL void syncthreads();
// Blocks the calling lane until all 32 lanes of its warp make the same request; returns
// this lane's result (the operand's bytes for a shuffle, a mask or a flag otherwise).
SAPWOOD_SIM_INTERNAL unsigned long long warp_op(const WarpRequest& request);

// Runs `body(ctx)` as every thread of every block of `launch` (runtime.cpp). `dynamic` is the
// kernel's dynamic shared area (capacity bytes, on this OS thread), null if it has none.
SAPWOOD_SIM_INTERNAL int launch(const char* kernel, const SimLaunch* launch,
                                void (*body)(void*), void* ctx, void* dynamic,
                                size_t capacity, char* err, size_t err_len) noexcept;
// Reports a null argument array or argument pointer (`index`) as launch's errors are.
SAPWOOD_SIM_INTERNAL int null_argument(const char* kernel, size_t index, char* err,
                                       size_t err_len) noexcept;

// The kernel's parameters, copied once per launch as the driver does, and the kernel.
template <typename... A>
struct KernelCall {
    void (*kernel)(A...);
    std::tuple<A...> args;

    static void run(void* self) {
        auto* call = static_cast<KernelCall*>(self);
        std::apply(call->kernel, call->args);
    }
};

template <typename... A, size_t... I>
inline int launch_kernel(const char* name, void (*kernel)(A...), std::index_sequence<I...>,
                         const SimLaunch* l, void** args, void* dynamic, size_t capacity,
                         char* err, size_t err_len) noexcept {
    static_assert((std::is_trivially_copyable<A>::value && ...),
                  "kernel parameters are copied bytewise, as cuLaunchKernel does");
    // args[i] points at the i-th parameter's value (for a pointer parameter, at the pointer)
    if (sizeof...(A) > 0 && args == nullptr) return null_argument(name, 0, err, err_len);
    for (size_t i = 0; i < sizeof...(A); ++i) {
        if (args[i] == nullptr) return null_argument(name, i, err, err_len);
    }
    KernelCall<A...> call{kernel, std::tuple<A...>(*static_cast<A*>(args[I])...)};
    return launch(name, l, &KernelCall<A...>::run, &call, dynamic, capacity, err, err_len);
}

template <typename... A>
inline int launch_kernel(const char* name, void (*kernel)(A...), const SimLaunch* l,
                         void** args, void* dynamic, size_t capacity, char* err,
                         size_t err_len) noexcept {
    return launch_kernel(name, kernel, std::index_sequence_for<A...>{}, l, args, dynamic,
                         capacity, err, err_len);
}

// Compiler barrier around every switch: memory another fiber may write (shared variables
// above all) is reread after a barrier or a collective, never cached across it.
inline void compiler_fence() { asm volatile("" ::: "memory"); }

template <typename T>
inline unsigned long long to_bits(T v) {
    static_assert(std::is_trivially_copyable<T>::value && (sizeof(T) == 4 || sizeof(T) == 8),
                  "warp operands are 4- or 8-byte values");
    unsigned long long bits = 0;
    std::memcpy(&bits, &v, sizeof(T));
    return bits;
}

template <typename T>
inline T from_bits(unsigned long long bits) {
    T v;
    std::memcpy(&v, &bits, sizeof(T));
    return v;
}

template <typename T>
inline unsigned long long collective(WarpOp op, unsigned mask, T value, unsigned arg,
                                     unsigned width) {
    WarpRequest r{op, (unsigned char)sizeof(T), (unsigned char)width, mask, arg,
                  to_bits(value)};
    compiler_fence();
    unsigned long long out = warp_op(r);
    compiler_fence();
    return out;
}

// Round to nearest, ties to even, whatever the rounding mode (NaN and infinities unchanged).
inline float round_even_f32(float x) {
    if (!(x < 8388608.0f && x > -8388608.0f)) {
        return x;  // NaN, infinities and |x| >= 2^23, which are integers already
    }
    int i = (int)x;  // truncation
    float d = x - (float)i;  // exact
    if (d > 0.5f || (d == 0.5f && (i & 1))) {
        ++i;
    } else if (d < -0.5f || (d == -0.5f && (i & 1))) {
        --i;
    }
    return (float)i;
}

// fminf/fmaxf as CUDA has them (and C99): a NaN operand loses to the other one. Zeros compare
// by sign (-0 below +0), as IEEE 754-2019 minimumNumber/maximumNumber.
inline float fmin_f32(float a, float b) {
    if (a != a) return b;
    if (b != b) return a;
    if (a == b) return __builtin_signbitf(a) ? a : b;
    return a < b ? a : b;
}

inline float fmax_f32(float a, float b) {
    if (a != a) return b;
    if (b != b) return a;
    if (a == b) return __builtin_signbitf(a) ? b : a;
    return a > b ? a : b;
}

}  // namespace sapwood_sim

// ---- Declaration specifiers ---------------------------------------------------------------

// Each kernel is its own NVRTC program, so its helpers are its own: internal linkage gives
// every translation unit its copy, and helpers of different kernels that happen to share a
// name (identical or not) never merge at link time. (Not for member functions, which no
// kernel declares __device__: static would change their meaning.)
#define __device__ static inline
#define __forceinline__ __attribute__((always_inline))
// Kernels keep their extern "C" names, hidden so that only sapwood_sim_kernel_* is exported.
#define __global__ __attribute__((visibility("hidden")))
#define __launch_bounds__(...)
// At block scope thread_local implies static: one variable per OS thread, so shared by every
// fiber of the block running there (and `extern __shared__ T a[];` names the dynamic area
// that SIM_KERNEL_DYNAMIC defines after the kernel).
#define __shared__ thread_local

// ---- Built-in variables -------------------------------------------------------------------

#define threadIdx (::sapwood_sim::current_thread->thread_idx)
#define blockIdx (::sapwood_sim::current_thread->block_idx)
#define blockDim (::sapwood_sim::current_thread->block_dim)
#define gridDim (::sapwood_sim::current_thread->grid_dim)

// ---- Synchronisation ----------------------------------------------------------------------

inline void __syncthreads() {
    ::sapwood_sim::compiler_fence();
    ::sapwood_sim::syncthreads();
    ::sapwood_sim::compiler_fence();
}

inline void __syncwarp(unsigned mask = 0xffffffffu) {
    ::sapwood_sim::collective(::sapwood_sim::WarpOp::SyncWarp, mask, 0u, 0u, 32u);
}

// ---- Warp collectives (full mask only; the runtime reports any other mask) ----------------

template <typename T>
inline T __shfl_sync(unsigned mask, T var, int srcLane, int width = 32) {
    return ::sapwood_sim::from_bits<T>(::sapwood_sim::collective(
        ::sapwood_sim::WarpOp::ShflIdx, mask, var, (unsigned)srcLane, (unsigned)width));
}

template <typename T>
inline T __shfl_up_sync(unsigned mask, T var, unsigned delta, int width = 32) {
    return ::sapwood_sim::from_bits<T>(::sapwood_sim::collective(
        ::sapwood_sim::WarpOp::ShflUp, mask, var, delta, (unsigned)width));
}

template <typename T>
inline T __shfl_down_sync(unsigned mask, T var, unsigned delta, int width = 32) {
    return ::sapwood_sim::from_bits<T>(::sapwood_sim::collective(
        ::sapwood_sim::WarpOp::ShflDown, mask, var, delta, (unsigned)width));
}

template <typename T>
inline T __shfl_xor_sync(unsigned mask, T var, int laneMask, int width = 32) {
    return ::sapwood_sim::from_bits<T>(::sapwood_sim::collective(
        ::sapwood_sim::WarpOp::ShflXor, mask, var, (unsigned)laneMask, (unsigned)width));
}

inline unsigned __ballot_sync(unsigned mask, int predicate) {
    return (unsigned)::sapwood_sim::collective(::sapwood_sim::WarpOp::Ballot, mask,
                                               predicate != 0 ? 1u : 0u, 0u, 32u);
}

inline int __any_sync(unsigned mask, int predicate) {
    return (int)::sapwood_sim::collective(::sapwood_sim::WarpOp::Any, mask,
                                          predicate != 0 ? 1u : 0u, 0u, 32u);
}

inline int __all_sync(unsigned mask, int predicate) {
    return (int)::sapwood_sim::collective(::sapwood_sim::WarpOp::All, mask,
                                          predicate != 0 ? 1u : 0u, 0u, 32u);
}

template <typename T>
inline unsigned __match_any_sync(unsigned mask, T value) {
    static_assert(std::is_integral<T>::value || std::is_floating_point<T>::value,
                  "__match_any_sync takes a 32- or 64-bit number");
    return (unsigned)::sapwood_sim::collective(::sapwood_sim::WarpOp::MatchAny, mask, value,
                                               0u, 32u);
}

inline unsigned __reduce_add_sync(unsigned mask, unsigned value) {
    return (unsigned)::sapwood_sim::collective(::sapwood_sim::WarpOp::ReduceAdd, mask, value,
                                               0u, 32u);
}
inline unsigned __reduce_min_sync(unsigned mask, unsigned value) {
    return (unsigned)::sapwood_sim::collective(::sapwood_sim::WarpOp::ReduceMin, mask, value,
                                               0u, 32u);
}
inline int __reduce_min_sync(unsigned mask, int value) {
    return (int)::sapwood_sim::collective(::sapwood_sim::WarpOp::ReduceMin, mask, value, 1u,
                                          32u);
}
inline unsigned __reduce_max_sync(unsigned mask, unsigned value) {
    return (unsigned)::sapwood_sim::collective(::sapwood_sim::WarpOp::ReduceMax, mask, value,
                                               0u, 32u);
}
inline int __reduce_max_sync(unsigned mask, int value) {
    return (int)::sapwood_sim::collective(::sapwood_sim::WarpOp::ReduceMax, mask, value, 1u,
                                          32u);
}
inline unsigned __reduce_and_sync(unsigned mask, unsigned value) {
    return (unsigned)::sapwood_sim::collective(::sapwood_sim::WarpOp::ReduceAnd, mask, value,
                                               0u, 32u);
}
inline unsigned __reduce_or_sync(unsigned mask, unsigned value) {
    return (unsigned)::sapwood_sim::collective(::sapwood_sim::WarpOp::ReduceOr, mask, value,
                                               0u, 32u);
}
inline unsigned __reduce_xor_sync(unsigned mask, unsigned value) {
    return (unsigned)::sapwood_sim::collective(::sapwood_sim::WarpOp::ReduceXor, mask, value,
                                               0u, 32u);
}

// ---- Atomics (return the old value) -------------------------------------------------------

// Fibers of a block switch only at barriers and collectives, and blocks run one at a time,
// so a plain read-modify-write is atomic with respect to every other CUDA thread.
#define SAPWOOD_SIM_ATOMIC(name, T, expr) \
    inline T name(T* address, T b) {      \
        const T a = *address;             \
        *address = (expr);                \
        return a;                         \
    }

SAPWOOD_SIM_ATOMIC(atomicAdd, int, (int)((unsigned)a + (unsigned)b))
SAPWOOD_SIM_ATOMIC(atomicAdd, unsigned, a + b)
SAPWOOD_SIM_ATOMIC(atomicAdd, unsigned long long, a + b)
SAPWOOD_SIM_ATOMIC(atomicSub, int, (int)((unsigned)a - (unsigned)b))
SAPWOOD_SIM_ATOMIC(atomicSub, unsigned, a - b)
SAPWOOD_SIM_ATOMIC(atomicMax, int, a > b ? a : b)
SAPWOOD_SIM_ATOMIC(atomicMax, unsigned, a > b ? a : b)
SAPWOOD_SIM_ATOMIC(atomicMax, long long, a > b ? a : b)
SAPWOOD_SIM_ATOMIC(atomicMax, unsigned long long, a > b ? a : b)
SAPWOOD_SIM_ATOMIC(atomicMin, int, a < b ? a : b)
SAPWOOD_SIM_ATOMIC(atomicMin, unsigned, a < b ? a : b)
SAPWOOD_SIM_ATOMIC(atomicMin, long long, a < b ? a : b)
SAPWOOD_SIM_ATOMIC(atomicMin, unsigned long long, a < b ? a : b)
SAPWOOD_SIM_ATOMIC(atomicOr, int, a | b)
SAPWOOD_SIM_ATOMIC(atomicOr, unsigned, a | b)
SAPWOOD_SIM_ATOMIC(atomicOr, unsigned long long, a | b)
SAPWOOD_SIM_ATOMIC(atomicAnd, int, a & b)
SAPWOOD_SIM_ATOMIC(atomicAnd, unsigned, a & b)
SAPWOOD_SIM_ATOMIC(atomicAnd, unsigned long long, a & b)
SAPWOOD_SIM_ATOMIC(atomicXor, int, a ^ b)
SAPWOOD_SIM_ATOMIC(atomicXor, unsigned, a ^ b)
SAPWOOD_SIM_ATOMIC(atomicXor, unsigned long long, a ^ b)
SAPWOOD_SIM_ATOMIC(atomicExch, int, ((void)a, b))
SAPWOOD_SIM_ATOMIC(atomicExch, unsigned, ((void)a, b))
SAPWOOD_SIM_ATOMIC(atomicExch, unsigned long long, ((void)a, b))

#undef SAPWOOD_SIM_ATOMIC

inline unsigned atomicCAS(unsigned* address, unsigned compare, unsigned val) {
    unsigned old = *address;
    *address = old == compare ? val : old;
    return old;
}

inline unsigned long long atomicCAS(unsigned long long* address, unsigned long long compare,
                                    unsigned long long val) {
    unsigned long long old = *address;
    *address = old == compare ? val : old;
    return old;
}

// ---- Intrinsics ---------------------------------------------------------------------------

inline unsigned __float_as_uint(float x) { return ::sapwood_sim::from_bits<unsigned>(::sapwood_sim::to_bits(x)); }
inline float __uint_as_float(unsigned x) { return ::sapwood_sim::from_bits<float>(::sapwood_sim::to_bits(x)); }
inline int __float_as_int(float x) { return ::sapwood_sim::from_bits<int>(::sapwood_sim::to_bits(x)); }
inline float __int_as_float(int x) { return ::sapwood_sim::from_bits<float>(::sapwood_sim::to_bits(x)); }
inline long long __double_as_longlong(double x) {
    return ::sapwood_sim::from_bits<long long>(::sapwood_sim::to_bits(x));
}
inline double __longlong_as_double(long long x) {
    return ::sapwood_sim::from_bits<double>(::sapwood_sim::to_bits(x));
}

inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
inline int __ffs(int x) { return __builtin_ffs(x); }
inline int __ffsll(long long x) { return __builtin_ffsll(x); }
inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz((unsigned)x); }
inline int __clzll(long long x) { return x == 0 ? 64 : __builtin_clzll((unsigned long long)x); }
inline unsigned __brev(unsigned x) {
    x = ((x >> 1) & 0x55555555u) | ((x & 0x55555555u) << 1);
    x = ((x >> 2) & 0x33333333u) | ((x & 0x33333333u) << 2);
    x = ((x >> 4) & 0x0f0f0f0fu) | ((x & 0x0f0f0f0fu) << 4);
    return __builtin_bswap32(x);
}

// Single IEEE operations in round-to-nearest-even: the fibers run with the default MXCSR (no
// flush to zero), and -ffp-contract=off keeps them from fusing.
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline double __dadd_rn(double a, double b) { return a + b; }
inline double __dsub_rn(double a, double b) { return a - b; }
inline double __dmul_rn(double a, double b) { return a * b; }
inline double __ddiv_rn(double a, double b) { return a / b; }

// Float-to-integer conversions as PTX cvt does them for f32: saturating, NaN to 0.
inline unsigned __float2uint_rz(float x) {
    if (!(x > 0.0f)) return 0u;  // NaN, zeros and negatives (which truncate to 0 or saturate)
    if (x >= 4294967296.0f) return 0xffffffffu;
    return (unsigned)x;
}
inline unsigned __float2uint_rn(float x) {
    float r = ::sapwood_sim::round_even_f32(x);
    if (!(r > 0.0f)) return 0u;
    if (r >= 4294967296.0f) return 0xffffffffu;
    return (unsigned)r;
}
inline int __float2int_rz(float x) {
    if (x != x) return 0;
    if (x >= 2147483648.0f) return 0x7fffffff;
    if (x <= -2147483648.0f) return (int)0x80000000u;
    return (int)x;
}
inline int __float2int_rn(float x) {
    float r = ::sapwood_sim::round_even_f32(x);
    if (r != r) return 0;
    if (r >= 2147483648.0f) return 0x7fffffff;
    if (r <= -2147483648.0f) return (int)0x80000000u;
    return (int)r;
}
// Exact integer-to-float conversions round to nearest even (the default rounding mode).
inline float __uint2float_rn(unsigned x) { return (float)x; }
inline float __int2float_rn(int x) { return (float)x; }
inline float __ull2float_rn(unsigned long long x) { return (float)x; }
inline float __ll2float_rn(long long x) { return (float)x; }
inline double __ull2double_rn(unsigned long long x) { return (double)x; }
inline double __ll2double_rn(long long x) { return (double)x; }

// Macros rather than functions: <math.h>, if any standard header pulled it in, declares C
// functions of these names, which a C++ overload could not coexist with.
#define fminf(a, b) ::sapwood_sim::fmin_f32((a), (b))
#define fmaxf(a, b) ::sapwood_sim::fmax_f32((a), (b))

// CUDA's integer min/max overloads (mixed signedness goes unsigned, as there).
inline int min(int a, int b) { return a < b ? a : b; }
inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
inline unsigned min(int a, unsigned b) { return min((unsigned)a, b); }
inline unsigned min(unsigned a, int b) { return min(a, (unsigned)b); }
inline long long min(long long a, long long b) { return a < b ? a : b; }
inline unsigned long long min(unsigned long long a, unsigned long long b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
inline unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }
inline unsigned max(int a, unsigned b) { return max((unsigned)a, b); }
inline unsigned max(unsigned a, int b) { return max(a, (unsigned)b); }
inline long long max(long long a, long long b) { return a > b ? a : b; }
inline unsigned long long max(unsigned long long a, unsigned long long b) { return a > b ? a : b; }

// ---- Entry points -------------------------------------------------------------------------

// The exported launcher of kernel `entry`, placed after the kernel in its translation unit.
#define SIM_KERNEL(entry) SAPWOOD_SIM_ENTRY_(entry, nullptr, 0)

// The same for a kernel whose body declares `extern __shared__ T name[];`: also defines that
// array (SIM_MAX_DYNAMIC_SHARED bytes per OS thread). Taken inside the exported function, its
// address is the calling OS thread's copy, the one the block's fibers see. Weak, so that
// kernels naming their areas alike share one array instead of clashing at link time: the
// launches of one OS thread never overlap, and every block poisons the area afresh.
#define SIM_KERNEL_DYNAMIC(entry, T, name)                                                  \
    alignas(16) __attribute__((weak, visibility("hidden"))) thread_local T                \
        name[SIM_MAX_DYNAMIC_SHARED / sizeof(T)];                                           \
    SAPWOOD_SIM_ENTRY_(entry, name, sizeof(name))

#define SAPWOOD_SIM_ENTRY_(entry, area, bytes)                                              \
    extern "C" __attribute__((visibility("default"))) int sapwood_sim_kernel_##entry(       \
        const SimLaunch* launch, void** args, char* err, size_t err_len) {                  \
        return ::sapwood_sim::launch_kernel(#entry, &entry, launch, args, (void*)(area),    \
                                            (size_t)(bytes), err, err_len);                 \
    }

#endif  // __cplusplus

#endif  // SAPWOOD_SIM_H
