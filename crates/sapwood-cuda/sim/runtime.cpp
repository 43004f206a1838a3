// The simulator's runtime: every CUDA thread of a block is a fiber, and one scheduler per
// launch (on the launching OS thread) decides which fiber runs next, so one seed gives one
// interleaving. Fibers switch only at __syncthreads and warp collectives; see README.md.
//
// Everything is per launch or per OS thread: several OS threads may run launches at once.

#include "sim.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <new>
#include <vector>

#if defined(__x86_64__) && !defined(SAPWOOD_SIM_UCONTEXT)
#define SAPWOOD_SIM_ASM_SWITCH 1
#else
#include <ucontext.h>

#include <cfenv>
#endif

namespace sapwood_sim {

__thread const ThreadView* current_thread = nullptr;

namespace {

// Fiber stacks: the kernels' frames are small (a few hundred bytes), and a guard page below
// each stack turns an overflow into a fault instead of corrupting the neighbouring fiber.
constexpr size_t kStackBytes = 64 * 1024;
constexpr unsigned kWarp = 32;
constexpr unsigned kFullMask = 0xffffffffu;
constexpr unsigned char kPoison = 0xA5;
constexpr unsigned kMaxThreads = 1024;

// ---- Context switch -----------------------------------------------------------------------

#if SAPWOOD_SIM_ASM_SWITCH

// swapcontext makes a sigprocmask system call per switch; this switch saves only what the
// System V ABI says a callee keeps (rbx, rbp, r12-r15, rsp) plus the MXCSR and the x87
// control word, and swaps stacks. A fiber starts with the default MXCSR (round to nearest,
// no flush to zero or denormals-are-zero) whatever the host thread set, as the kernels'
// --ftz=false requires.
struct Context {
    void* sp = nullptr;
};

extern "C" void sapwood_sim_switch(void** save_sp, void* load_sp);
extern "C" void sapwood_sim_fiber_start();

asm(R"(
    .pushsection .text
    .p2align 4
    .globl sapwood_sim_switch
    .hidden sapwood_sim_switch
    .type sapwood_sim_switch, @function
sapwood_sim_switch:
    .cfi_startproc
    pushq %rbp
    .cfi_adjust_cfa_offset 8
    pushq %rbx
    .cfi_adjust_cfa_offset 8
    pushq %r12
    .cfi_adjust_cfa_offset 8
    pushq %r13
    .cfi_adjust_cfa_offset 8
    pushq %r14
    .cfi_adjust_cfa_offset 8
    pushq %r15
    .cfi_adjust_cfa_offset 8
    subq $16, %rsp
    .cfi_adjust_cfa_offset 16
    stmxcsr 8(%rsp)
    fnstcw (%rsp)
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    ldmxcsr 8(%rsp)
    fldcw (%rsp)
    addq $16, %rsp
    .cfi_adjust_cfa_offset -16
    popq %r15
    .cfi_adjust_cfa_offset -8
    popq %r14
    .cfi_adjust_cfa_offset -8
    popq %r13
    .cfi_adjust_cfa_offset -8
    popq %r12
    .cfi_adjust_cfa_offset -8
    popq %rbx
    .cfi_adjust_cfa_offset -8
    popq %rbp
    .cfi_adjust_cfa_offset -8
    ret
    .cfi_endproc
    .size sapwood_sim_switch, .-sapwood_sim_switch

    .p2align 4
    .globl sapwood_sim_fiber_start
    .hidden sapwood_sim_fiber_start
    .type sapwood_sim_fiber_start, @function
sapwood_sim_fiber_start:
    .cfi_startproc
    .cfi_undefined rip
    callq *%r12
    ud2
    .cfi_endproc
    .size sapwood_sim_fiber_start, .-sapwood_sim_fiber_start
    .popsection
)");

inline void context_switch(Context& from, Context& to) { sapwood_sim_switch(&from.sp, to.sp); }

// Lays out the frame sapwood_sim_switch pops (x87 control word, MXCSR, r15, r14, r13, r12,
// rbx, rbp, return address) so that its `ret` enters sapwood_sim_fiber_start, which calls
// `entry` (in r12) on a 16-byte aligned stack.
void context_start(Context& c, char* stack, size_t bytes, void (*entry)()) {
    uintptr_t top = (reinterpret_cast<uintptr_t>(stack) + bytes) & ~uintptr_t(15);
    auto* frame = reinterpret_cast<uint64_t*>(top - 88);
    frame[0] = 0x037f;  // x87: all exceptions masked, double precision, round to nearest
    frame[1] = 0x1f80;  // MXCSR: all exceptions masked, round to nearest, no FTZ/DAZ
    frame[2] = 0;       // r15
    frame[3] = 0;       // r14
    frame[4] = 0;       // r13
    frame[5] = reinterpret_cast<uint64_t>(entry);  // r12
    frame[6] = 0;                                  // rbx
    frame[7] = 0;                                  // rbp: ends frame-pointer walks
    frame[8] = reinterpret_cast<uint64_t>(&sapwood_sim_fiber_start);
    c.sp = frame;
}

#else

// Portable fallback: ucontext (slow: a system call per switch, but correct).
struct Context {
    ucontext_t uc;
};

inline void context_switch(Context& from, Context& to) { swapcontext(&from.uc, &to.uc); }

void context_start(Context& c, char* stack, size_t bytes, void (*entry)()) {
    getcontext(&c.uc);
    c.uc.uc_stack.ss_sp = stack;
    c.uc.uc_stack.ss_size = bytes;
    c.uc.uc_link = nullptr;
    makecontext(&c.uc, entry, 0);
}

#endif

// ---- Random choices -----------------------------------------------------------------------

struct SplitMix64 {
    uint64_t state;

    uint64_t next() {
        uint64_t z = (state += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
    }

    // Uniform enough in [0, n) for scheduling (n is at most 1024).
    uint32_t below(uint32_t n) {
        return static_cast<uint32_t>((static_cast<unsigned __int128>(next()) * n) >> 64);
    }

    template <typename T>
    void shuffle(std::vector<T>& v) {
        for (size_t i = v.size(); i > 1; --i) {
            size_t j = below(static_cast<uint32_t>(i));
            T t = v[i - 1];
            v[i - 1] = v[j];
            v[j] = t;
        }
    }
};

// A seeded permutation of [0, n) without storage (a grid may hold 2^31 blocks and more): a
// four-round Feistel network on the smallest even number of bits that covers n, walked
// until it lands below n.
class BlockOrder {
public:
    BlockOrder(uint64_t n, SplitMix64& rng) : n_(n) {
        unsigned bits = 64 - __builtin_clzll(n > 2 ? n - 1 : 1);
        half_ = (bits + 1) / 2;
        mask_ = (half_ == 64 ? ~0ull : (1ull << half_) - 1);
        for (auto& k : keys_) k = rng.next();
    }

    uint64_t operator()(uint64_t i) const {
        uint64_t x = i;
        do {
            x = encrypt(x);
        } while (x >= n_);
        return x;
    }

private:
    uint64_t encrypt(uint64_t x) const {
        uint64_t l = x >> half_;
        uint64_t r = x & mask_;
        for (uint64_t k : keys_) {
            uint64_t f = SplitMix64{r ^ k}.next() & mask_;
            uint64_t t = l ^ f;
            l = r;
            r = t;
        }
        return (l << half_) | r;
    }

    uint64_t n_;
    unsigned half_;
    uint64_t mask_;
    uint64_t keys_[4];
};

// ---- Fibers -------------------------------------------------------------------------------

enum class State : unsigned char { Runnable, Barrier, Warp, Done };

struct Fiber {
    ThreadView view;  // what threadIdx and friends read
    Context ctx;
    char* stack = nullptr;  // lowest usable byte (a guard page lies below)
    unsigned linear = 0;
    unsigned warp = 0;
    unsigned lane = 0;
    State state = State::Done;
    WarpRequest req{};
    unsigned long long result = 0;
};

// Fibers and their stacks, kept per OS thread and reused by every launch there; freed when
// the thread exits.
class Pool {
public:
    Pool() = default;
    Pool(const Pool&) = delete;
    Pool& operator=(const Pool&) = delete;

    ~Pool() {
        for (unsigned i = 0; i < count_; ++i) {
            munmap(fibers_[i].stack - page(), page() + kStackBytes);
        }
        delete[] fibers_;
    }

    // At least n fibers with stacks, or null when the stacks cannot be mapped.
    Fiber* get(unsigned n) {
        if (n > capacity_) {
            // Contexts are rebuilt before every block, so moving the fibers is harmless.
            Fiber* grown = new (std::nothrow) Fiber[kMaxThreads];
            if (grown == nullptr) return nullptr;
            for (unsigned i = 0; i < count_; ++i) grown[i].stack = fibers_[i].stack;
            delete[] fibers_;
            fibers_ = grown;
            capacity_ = kMaxThreads;
        }
        while (count_ < n) {
            void* m = mmap(nullptr, page() + kStackBytes, PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
            if (m == MAP_FAILED) return nullptr;
            if (mprotect(m, page(), PROT_NONE) != 0) {
                munmap(m, page() + kStackBytes);
                return nullptr;
            }
            fibers_[count_++].stack = static_cast<char*>(m) + page();
        }
        return fibers_;
    }

private:
    static size_t page() {
        static const size_t p = static_cast<size_t>(sysconf(_SC_PAGESIZE));
        return p;
    }

    Fiber* fibers_ = nullptr;
    unsigned capacity_ = 0;
    unsigned count_ = 0;
};

thread_local Pool pool;

const char* op_name(WarpOp op) {
    switch (op) {
        case WarpOp::ShflIdx: return "__shfl_sync";
        case WarpOp::ShflUp: return "__shfl_up_sync";
        case WarpOp::ShflDown: return "__shfl_down_sync";
        case WarpOp::ShflXor: return "__shfl_xor_sync";
        case WarpOp::Ballot: return "__ballot_sync";
        case WarpOp::Any: return "__any_sync";
        case WarpOp::All: return "__all_sync";
        case WarpOp::MatchAny: return "__match_any_sync";
        case WarpOp::ReduceAdd: return "__reduce_add_sync";
        case WarpOp::ReduceMin: return "__reduce_min_sync";
        case WarpOp::ReduceMax: return "__reduce_max_sync";
        case WarpOp::ReduceAnd: return "__reduce_and_sync";
        case WarpOp::ReduceOr: return "__reduce_or_sync";
        case WarpOp::ReduceXor: return "__reduce_xor_sync";
        case WarpOp::SyncWarp: return "__syncwarp";
    }
    return "a warp operation";
}

bool is_shuffle(WarpOp op) {
    return op == WarpOp::ShflIdx || op == WarpOp::ShflUp || op == WarpOp::ShflDown ||
           op == WarpOp::ShflXor;
}

struct Warp {
    unsigned first = 0;  // linear index of lane 0
    unsigned lanes = 0;  // 32 except in a partial last warp
    unsigned at_op = 0;  // lanes waiting at a collective
    std::vector<unsigned> runnable;  // schedule 1 only
};

// ---- The scheduler of one launch ----------------------------------------------------------

class Runner;
__thread Runner* active_runner = nullptr;

void fiber_main() noexcept;

class Runner {
public:
    Runner(const char* kernel, const SimLaunch& l, void (*body)(void*), void* ctx,
           unsigned char* dynamic, size_t capacity)
        : kernel_(kernel), launch_(l), body_(body), ctx_(ctx), dynamic_(dynamic),
          capacity_(capacity), rng_{l.seed} {}

    // Runs every block; false with message() set on the first error.
    bool run() {
        if (!validate()) return false;
        const uint32_t* b = launch_.block;
        n_ = b[0] * b[1] * b[2];
        fibers_ = pool.get(n_);
        if (fibers_ == nullptr) {
            return fail_launch("could not allocate %u fiber stacks", n_);
        }
        const unsigned n_warps = (n_ + kWarp - 1) / kWarp;
        warps_.resize(n_warps);
        for (unsigned w = 0; w < n_warps; ++w) {
            warps_[w].first = w * kWarp;
            warps_[w].lanes = n_ - w * kWarp < kWarp ? n_ - w * kWarp : kWarp;
            if (launch_.schedule == 1) warps_[w].runnable.reserve(kWarp);
        }
        order_.resize(n_warps);
        runnable_.reserve(n_);

        const uint32_t* g = launch_.grid;
        const uint64_t blocks = uint64_t(g[0]) * g[1] * g[2];
        BlockOrder order(blocks, rng_);
        Runner* outer = active_runner;
        active_runner = this;
        bool ok = true;
        for (uint64_t i = 0; i < blocks && ok; ++i) {
            uint64_t k = order(i);
            block_ = Dim3{unsigned(k % g[0]), unsigned(k / g[0] % g[1]),
                          unsigned(k / (uint64_t(g[0]) * g[1]))};
            ok = run_block();
        }
        active_runner = outer;
        current_thread = nullptr;
        return ok;
    }

    const char* message() const { return message_; }

    // ---- Called on a fiber --------------------------------------------------------------

    void start_thread() {
        body_(ctx_);
        Fiber& f = fibers_[running_];
        f.state = State::Done;
        ++done_;
        context_switch(f.ctx, sched_);
        __builtin_unreachable();  // a finished fiber is never picked again
    }

    void syncthreads() {
        Fiber& f = fibers_[running_];
        f.state = State::Barrier;
        if (++at_barrier_ == n_) {
            at_barrier_ = 0;
            for (unsigned i = 0; i < n_; ++i) make_runnable(i);
            new_phase();
        }
        context_switch(f.ctx, sched_);
    }

    unsigned long long warp_op(const WarpRequest& r) {
        Fiber& f = fibers_[running_];
        Warp& w = warps_[f.warp];
        if (r.mask != kFullMask) {
            fail_fiber("%s: lane %u (%s) passed mask 0x%08x; the simulator supports full-mask "
                       "warp operations only",
                       op_name(r.op), f.lane, thread_name(f).text, r.mask);
        }
        if (w.lanes != kWarp) {
            fail_fiber("%s: lane %u (%s) is in warp %u, which has only %u threads (blockDim "
                       "(%u,%u,%u)); a full-mask warp operation needs 32",
                       op_name(r.op), f.lane, thread_name(f).text, f.warp, w.lanes,
                       launch_.block[0], launch_.block[1], launch_.block[2]);
        }
        f.req = r;
        f.state = State::Warp;
        if (++w.at_op == kWarp) {
            w.at_op = 0;
            complete(w);
        }
        context_switch(f.ctx, sched_);
        return f.result;
    }

private:
    struct Name {
        char text[48];
    };

    bool validate() {
        const uint32_t* b = launch_.block;
        const uint32_t* g = launch_.grid;
        if (b[0] == 0 || b[1] == 0 || b[2] == 0 || b[0] > 1024 || b[1] > 1024 || b[2] > 64 ||
            uint64_t(b[0]) * b[1] * b[2] > kMaxThreads) {
            return fail_launch("invalid block dimensions (%u,%u,%u): each at least 1, x and y "
                               "at most 1024, z at most 64, at most 1024 threads",
                               b[0], b[1], b[2]);
        }
        if (g[0] == 0 || g[1] == 0 || g[2] == 0 || g[0] > 0x7fffffffu || g[1] > 65535 ||
            g[2] > 65535) {
            return fail_launch("invalid grid dimensions (%u,%u,%u): each at least 1, x at "
                               "most 2^31-1, y and z at most 65535",
                               g[0], g[1], g[2]);
        }
        if (launch_.dynamic_shared_bytes > SIM_MAX_DYNAMIC_SHARED) {
            return fail_launch("%u bytes of dynamic shared memory asked for, more than the "
                               "%u a block can have",
                               launch_.dynamic_shared_bytes, SIM_MAX_DYNAMIC_SHARED);
        }
        if (launch_.schedule > 1) {
            return fail_launch("unknown schedule %u (0 shuffled, 1 warp at a time)",
                               launch_.schedule);
        }
        return true;
    }

    bool run_block() {
        const uint32_t* b = launch_.block;
        for (unsigned i = 0; i < n_; ++i) {
            Fiber& f = fibers_[i];
            f.view.thread_idx = Dim3{i % b[0], i / b[0] % b[1], i / (b[0] * b[1])};
            f.view.block_idx = block_;
            f.view.block_dim = Dim3{b[0], b[1], b[2]};
            f.view.grid_dim = Dim3{launch_.grid[0], launch_.grid[1], launch_.grid[2]};
            f.linear = i;
            f.warp = i / kWarp;
            f.lane = i % kWarp;
            f.state = State::Runnable;
            context_start(f.ctx, f.stack, kStackBytes, &fiber_main);
        }
        for (Warp& w : warps_) {
            w.at_op = 0;
            w.runnable.clear();
        }
        runnable_.clear();
        for (unsigned i = 0; i < n_; ++i) make_runnable(i);
        at_barrier_ = 0;
        done_ = 0;
        new_phase();
        // Shared memory is not zeroed on a GPU: a kernel reading what it never wrote must
        // see garbage here too, not a convenient 0 (nor the previous block's values).
        if (dynamic_ != nullptr) std::memset(dynamic_, kPoison, capacity_);

        unsigned id;
        while (pick(id)) {
            running_ = id;
            current_thread = &fibers_[id].view;
            context_switch(sched_, fibers_[id].ctx);
            if (failed_) return false;
        }
        current_thread = nullptr;
        if (done_ != n_) return diagnose();
        return check_dynamic_tail();
    }

    void make_runnable(unsigned i) {
        Fiber& f = fibers_[i];
        f.state = State::Runnable;
        if (launch_.schedule == 0) {
            runnable_.push_back(i);
        } else {
            warps_[f.warp].runnable.push_back(i);
        }
    }

    // A new stretch between barriers: for the warp-at-a-time schedule, a new warp order.
    void new_phase() {
        if (launch_.schedule != 1) return;
        for (unsigned w = 0; w < order_.size(); ++w) order_[w] = w;
        rng_.shuffle(order_);
        cursor_ = 0;
    }

    static bool take_random(std::vector<unsigned>& v, SplitMix64& rng, unsigned& id) {
        if (v.empty()) return false;
        unsigned k = rng.below(static_cast<uint32_t>(v.size()));
        id = v[k];
        v[k] = v.back();
        v.pop_back();
        return true;
    }

    bool pick(unsigned& id) {
        if (launch_.schedule == 0) return take_random(runnable_, rng_, id);
        // A warp's lanes become runnable again only through its own collectives (while it is
        // the current warp) or a barrier (which starts a new phase), so a warp passed over
        // has nothing left to run in this phase.
        while (cursor_ < order_.size()) {
            if (take_random(warps_[order_[cursor_]].runnable, rng_, id)) return true;
            ++cursor_;
        }
        return false;
    }

    // All 32 lanes of w wait at a collective: check they agree, hand out the results.
    void complete(Warp& w) {
        Fiber* lanes = fibers_ + w.first;
        const WarpRequest& r0 = lanes[0].req;
        for (unsigned i = 1; i < kWarp; ++i) {
            const WarpRequest& r = lanes[i].req;
            if (r.op != r0.op) {
                fail_fiber("lanes of warp %u reached different warp operations: lane 0 (%s) "
                           "at %s, lane %u (%s) at %s",
                           warp_index(w), thread_name(lanes[0]).text, op_name(r0.op), i,
                           thread_name(lanes[i]).text, op_name(r.op));
            }
            if (r.size != r0.size || (is_shuffle(r.op) && r.width != r0.width)) {
                fail_fiber("lanes of warp %u disagree at %s: lane 0 (%s) passes a %u-byte "
                           "value (width %u), lane %u (%s) a %u-byte value (width %u)",
                           warp_index(w), op_name(r0.op), thread_name(lanes[0]).text, r0.size,
                           r0.width, i, thread_name(lanes[i]).text, r.size, r.width);
            }
        }
        const WarpOp op = r0.op;
        if (is_shuffle(op)) {
            const unsigned width = r0.width;
            if (width == 0 || width > kWarp || (width & (width - 1)) != 0) {
                fail_fiber("%s in warp %u: width %u is not a power of two from 1 to 32",
                           op_name(op), warp_index(w), width);
            }
            // PTX shfl.sync with c = ((32 - width) << 8) | (up ? 0 : 31), as CUDA encodes it
            const unsigned seg = (kWarp - width) & 31u;
            for (unsigned lane = 0; lane < kWarp; ++lane) {
                const unsigned b = lanes[lane].req.arg;
                const int64_t min_lane = lane & seg;
                const int64_t max_lane = min_lane | (op == WarpOp::ShflUp ? 0 : (31u & ~seg));
                int64_t j = lane;
                bool in = false;
                switch (op) {
                    case WarpOp::ShflIdx: j = min_lane | (b & 31u & ~seg); in = j <= max_lane; break;
                    case WarpOp::ShflUp: j = int64_t(lane) - b; in = j >= max_lane; break;
                    case WarpOp::ShflDown: j = int64_t(lane) + b; in = j <= max_lane; break;
                    default: j = lane ^ b; in = j <= max_lane; break;
                }
                lanes[lane].result = lanes[in ? j : lane].req.value;
            }
        } else {
            unsigned long long all = 0;
            switch (op) {
                case WarpOp::Ballot:
                case WarpOp::Any:
                case WarpOp::All: {
                    unsigned bits = 0;
                    for (unsigned i = 0; i < kWarp; ++i) bits |= unsigned(lanes[i].req.value != 0) << i;
                    all = op == WarpOp::Ballot ? bits : op == WarpOp::Any ? bits != 0 : bits == kFullMask;
                    break;
                }
                case WarpOp::ReduceAdd:
                case WarpOp::ReduceMin:
                case WarpOp::ReduceMax:
                case WarpOp::ReduceAnd:
                case WarpOp::ReduceOr:
                case WarpOp::ReduceXor: all = reduce(op, lanes); break;
                default: break;  // MatchAny is per lane, SyncWarp has no result
            }
            for (unsigned i = 0; i < kWarp; ++i) {
                if (op == WarpOp::MatchAny) {
                    unsigned m = 0;
                    for (unsigned j = 0; j < kWarp; ++j) {
                        m |= unsigned(lanes[j].req.value == lanes[i].req.value) << j;
                    }
                    lanes[i].result = m;
                } else {
                    lanes[i].result = all;
                }
            }
        }
        for (unsigned i = 0; i < kWarp; ++i) make_runnable(w.first + i);
    }

    static unsigned long long reduce(WarpOp op, const Fiber* lanes) {
        const bool sign = lanes[0].req.arg == 1;
        unsigned acc = unsigned(lanes[0].req.value);
        for (unsigned i = 1; i < kWarp; ++i) {
            unsigned v = unsigned(lanes[i].req.value);
            switch (op) {
                case WarpOp::ReduceAdd: acc += v; break;
                case WarpOp::ReduceAnd: acc &= v; break;
                case WarpOp::ReduceOr: acc |= v; break;
                case WarpOp::ReduceXor: acc ^= v; break;
                case WarpOp::ReduceMin:
                    acc = sign ? (int(v) < int(acc) ? v : acc) : (v < acc ? v : acc);
                    break;
                default:
                    acc = sign ? (int(v) > int(acc) ? v : acc) : (v > acc ? v : acc);
                    break;
            }
        }
        return acc;
    }

    unsigned warp_index(const Warp& w) const { return w.first / kWarp; }

    // No fiber can run but some have not finished: name a waiting thread and one that
    // keeps it waiting.
    bool diagnose() {
        for (const Warp& w : warps_) {
            if (w.at_op == 0) continue;
            const Fiber* lanes = fibers_ + w.first;
            unsigned a = 0, b = 0;
            while (lanes[a].state != State::Warp) ++a;
            while (lanes[b].state == State::Warp) ++b;
            return fail_block("warp %u: lane %u (%s) waits at %s, but lane %u (%s) %s; a "
                              "full-mask warp operation needs all 32 lanes",
                              warp_index(w), a, thread_name(lanes[a]).text, op_name(lanes[a].req.op),
                              b, thread_name(lanes[b]).text,
                              lanes[b].state == State::Done ? "finished without reaching it"
                                                            : "waits at __syncthreads");
        }
        unsigned a = n_, b = n_;
        for (unsigned i = 0; i < n_; ++i) {
            if (fibers_[i].state == State::Barrier && a == n_) a = i;
            if (fibers_[i].state == State::Done && b == n_) b = i;
        }
        if (a < n_ && b < n_) {
            return fail_block("divergent barrier: %s waits at __syncthreads, but %s finished "
                              "without reaching it; a barrier needs every thread of the block",
                              thread_name(fibers_[a]).text, thread_name(fibers_[b]).text);
        }
        return fail_block("deadlock: %u of %u threads have not finished but none can run",
                          n_ - done_, n_);
    }

    // Bytes past dynamic_shared_bytes must still hold the poison: a kernel that wrote there
    // overran the dynamic shared memory it was launched with.
    bool check_dynamic_tail() {
        if (dynamic_ == nullptr) return true;
        // whole poisoned words first, then the first changed byte, if any
        const uint64_t poison8 = 0x0101010101010101ull * kPoison;
        size_t i = launch_.dynamic_shared_bytes;
        for (uint64_t w; i + 8 <= capacity_; i += 8) {
            std::memcpy(&w, dynamic_ + i, 8);
            if (w != poison8) break;
        }
        while (i < capacity_ && dynamic_[i] == kPoison) ++i;
        if (i < capacity_) {
            return fail_block("wrote byte %zu of the dynamic shared area, past the %u bytes the "
                              "launch asked for",
                              i, launch_.dynamic_shared_bytes);
        }
        return true;
    }

    Name thread_name(const Fiber& f) const {
        Name n;
        const Dim3& t = f.view.thread_idx;
        if (launch_.block[1] == 1 && launch_.block[2] == 1) {
            std::snprintf(n.text, sizeof n.text, "thread %u", t.x);
        } else {
            std::snprintf(n.text, sizeof n.text, "thread (%u,%u,%u)", t.x, t.y, t.z);
        }
        return n;
    }

    __attribute__((format(printf, 2, 0))) void vformat(const char* fmt, va_list ap,
                                                       bool with_block) {
        int k = with_block ? std::snprintf(message_, sizeof message_, "%s, block (%u,%u,%u): ",
                                           kernel_, block_.x, block_.y, block_.z)
                           : std::snprintf(message_, sizeof message_, "%s: ", kernel_);
        if (k < 0) k = 0;
        if (size_t(k) < sizeof message_) {
            std::vsnprintf(message_ + k, sizeof message_ - k, fmt, ap);
        }
    }

    __attribute__((format(printf, 2, 3))) bool fail_launch(const char* fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        vformat(fmt, ap, false);
        va_end(ap);
        return false;
    }

    __attribute__((format(printf, 2, 3))) bool fail_block(const char* fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        vformat(fmt, ap, true);
        va_end(ap);
        return false;
    }

    // On a fiber: records the error and returns to the scheduler for good. The abandoned
    // fiber's frames hold only plain data (nothing to destroy); its stack is reused.
    __attribute__((format(printf, 2, 3), noreturn)) void fail_fiber(const char* fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        vformat(fmt, ap, true);
        va_end(ap);
        failed_ = true;
        context_switch(fibers_[running_].ctx, sched_);
        __builtin_unreachable();
    }

    const char* kernel_;
    SimLaunch launch_;
    void (*body_)(void*);
    void* ctx_;
    unsigned char* dynamic_;
    size_t capacity_;
    SplitMix64 rng_;

    Fiber* fibers_ = nullptr;
    unsigned n_ = 0;
    std::vector<Warp> warps_;
    std::vector<unsigned> runnable_;  // schedule 0
    std::vector<unsigned> order_;     // schedule 1: warp order of this phase
    size_t cursor_ = 0;               // schedule 1: position in order_
    Context sched_;
    Dim3 block_{0, 0, 0};
    unsigned running_ = 0;
    unsigned at_barrier_ = 0;
    unsigned done_ = 0;
    bool failed_ = false;
    char message_[512] = {0};
};

void fiber_main() noexcept {
#if !SAPWOOD_SIM_ASM_SWITCH
    std::fesetenv(FE_DFL_ENV);  // the asm switch starts fibers so; do the same here
#endif
    active_runner->start_thread();
}

void write_error(char* err, size_t err_len, const char* message) {
    if (err == nullptr || err_len == 0) return;
    size_t n = std::strlen(message);
    if (n >= err_len) n = err_len - 1;
    std::memcpy(err, message, n);
    err[n] = '\0';
}

}  // namespace

void syncthreads() { active_runner->syncthreads(); }

unsigned long long warp_op(const WarpRequest& request) { return active_runner->warp_op(request); }

int launch(const char* kernel, const SimLaunch* l, void (*body)(void*), void* ctx,
           void* dynamic, size_t capacity, char* err, size_t err_len) noexcept {
    if (l == nullptr) {
        write_error(err, err_len, "sapwood sim: null launch description");
        return 1;
    }
    try {
        Runner runner(kernel, *l, body, ctx, static_cast<unsigned char*>(dynamic), capacity);
        if (runner.run()) return 0;
        write_error(err, err_len, runner.message());
    } catch (const std::bad_alloc&) {
        char m[160];
        std::snprintf(m, sizeof m, "%s: out of memory setting up the launch", kernel);
        write_error(err, err_len, m);
    }
    return 1;
}

int null_argument(const char* kernel, size_t index, char* err, size_t err_len) noexcept {
    char m[200];
    std::snprintf(m, sizeof m, "%s: argument %zu is a null pointer (args[i] must point at the "
                  "i-th parameter's value)", kernel, index);
    write_error(err, err_len, m);
    return 1;
}

}  // namespace sapwood_sim
