#!/usr/bin/env python3
"""Bytes on the wire of data-parallel training, per codec, beside XGBoost's baseline.

Trains the synthetic binary task with 4 workers (depth 8, 100 rounds by default), once per
codec (`none`, `packed`, `sparse`, `auto`) in `exact` and `grad_bits=8` mode, and prints
bytes sent per tree by one worker, the ratio to the uncompressed i64 (sum g, sum h)
baseline of a ring allreduce (16 bytes per bin of every histogram built, times 2(P-1)/P:
what XGBoost sends), and the wall-time cost against `none`. The models of all runs must be
byte-identical (checked). Each codec runs --repeat times (default 3), interleaved with the
others (in reverse order every other repeat) so that a slow spell of a shared machine hits all
of them. Times are the fastest run of each codec (other load on a shared machine only ever
adds time), with the medians beside, the median of each repeat's ratio to the `none` run of
the same repeat ("paired") with a 90% bootstrap interval of that median, and the ratio of CPU
seconds (user + system) over all repeats.
--codecs and --bits choose fewer runs, e.g. `--codecs none,auto --bits 8 --repeat 10` to
time one codec's cost closely.

With --netem RATE (e.g. 1gbit), the runs are MPI ranks over TCP inside a network namespace
of their own whose loopback (MTU 1500) is rate-limited with tc netem (and 0.1 ms delay), or
with tc tbf at the same rate where the kernel has no netem: there the compression shows as
speed. All ranks share the one limited loopback, like hosts behind one 1 Gbit/s link. Needs root, iproute2 and an MPI build of the CLI
(cargo build --release -p sapwood-cli --features mpi).

    python3 bench/comm.py --rows 1000000 [--netem 1gbit]
    python3 bench/comm.py --rows 1000000 --codecs none,auto --bits 8 --repeat 10
    python3 bench/comm.py --rows 300000 --rounds 30 --netem 1gbit --overlap
requires: numpy, pyarrow (the generator)
"""
import argparse
import hashlib
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(ROOT, "target", "release", "sapwood")


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw)


def baseline_bytes_per_tree(model, workers):
    m = json.load(open(model))
    bins = sum(len(f["thresholds"]) + 2 if f["kind"] == "numeric" else f["n_bins"] for f in m["features"])
    trees = m["trees"]
    built = sum(1 + sum(1 for l in t["left"] if l != -1) for t in trees)
    return 16 * bins * built * 2 * (workers - 1) / workers / len(trees), bins


def train(a, data, ns, codec, overlap, transport, bits="0"):
    """One training run with `transport` (in-process, mpi or tcp); returns (train s, rank 0's
    seconds inside collective calls, model digest, rank 0's bytes sent)."""
    with tempfile.TemporaryDirectory() as t:
        model, summary = os.path.join(t, "m.json"), os.path.join(t, "s.json")
        args = ["train", "--quiet", "--data", data, "--label", "y", "--objective", "binary:logistic",
                "--rounds", str(a.rounds), "--max-depth", str(a.depth), "--learning-rate", "0.1",
                "--set", f"grad_bits={bits}", "--set", f"comm_codec={codec}",
                "--set", f"comm_overlap={'true' if overlap else 'false'}", "--summary", summary]
        netns = ["ip", "netns", "exec", ns] if ns else []
        if transport == "mpi":
            run(netns + ["mpirun", "--allow-run-as-root", "--oversubscribe", "--mca", "btl", "tcp,self",
                         "--mca", "btl_tcp_if_include", "lo", "-np", str(a.workers), BIN] + args
                + ["--model", model, "--collective", "mpi", "--threads", "1"])
        elif transport == "tcp":
            coordinator = f"127.0.0.1:{29400 + os.getpid() % 500}"
            env = dict(os.environ, SAPWOOD_TOKEN="bench")
            ranks = [subprocess.Popen(netns + [BIN] + [x if x != summary else (summary if r == 0 else summary + str(r))
                                                     for x in args]
                                      + ["--model", model if r == 0 else model + str(r), "--collective", "tcp",
                                         "--coordinator", coordinator, "--rank", str(r), "--world", str(a.workers),
                                         "--threads", "1"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
                     for r in range(a.workers)]
            for r, p in enumerate(ranks):
                _, err = p.communicate()
                assert p.returncode == 0, f"tcp rank {r}: {err.decode()}"
        else:
            run([BIN] + args + ["--model", model, "--workers", str(a.workers), "--threads", str(min(a.workers, os.cpu_count()))])
        s = json.load(open(summary))
        digest = hashlib.sha256(open(model, "rb").read()).hexdigest()
        return s["train_seconds"], s["communication"]["seconds"], digest, s["communication"]["bytes_sent"]


def median_interval(xs, level=0.9, draws=2000):
    """A bootstrap interval (percentile, `level`) of the median of `xs`: how far the paired
    ratio's median may move on a shared machine's noise."""
    rng = random.Random(7)
    ms = sorted(statistics.median(rng.choices(xs, k=len(xs))) for _ in range(draws))
    return ms[int((1 - level) / 2 * draws)], ms[int((1 + level) / 2 * draws) - 1]


def link_rate(text):
    """Bytes per second of a tc rate such as 1gbit or 500mbit."""
    units = {"kbit": 1e3, "mbit": 1e6, "gbit": 1e9}
    for u, f in units.items():
        if text.endswith(u):
            return float(text[: -len(u)]) * f / 8
    raise SystemExit(f"--netem {text}: give the rate in kbit, mbit or gbit")


def overlap_table(a, data, ns):
    """Compute-only (the same workers in one process, exchanging through memory), then ranks
    over the (limited) loopback, MPI and Sapwood's TCP, with the exchange behind the builds
    and without. comm s is rank 0's wall time inside collective calls (waits for slower
    peers included); wire s is the time the shared link needs for every rank's bytes (rank
    0's times the ranks): the least any run can take, where the link is the limit."""
    rate = link_rate(a.netem) if a.netem else None
    print(f"{'transport':<10}{'codec':<8}{'compute-only s':>15}{'wire s':>8}{'serial s':>10}{'comm s':>8}"
          f"{'overlap s':>11}{'comm s':>8}{'ovl/serial':>12}{'ovl/max(c,w)':>14}{'ovl/compute':>13}")
    for transport in ["mpi", "tcp"]:
        for codec in ["none", "auto"]:
            runs = {"compute": [], "serial": [], "overlap": []}
            digests = set()
            for _ in range(a.repeat):
                for name, overlap, how in [("compute", False, "in-process"), ("serial", False, transport),
                                           ("overlap", True, transport)]:
                    secs, comm, digest, sent = train(a, data, ns, codec, overlap, how, str(a.grad_bits))
                    runs[name].append((secs, comm))
                    digests.add(digest)
            assert len(digests) == 1, f"{transport} {codec}: models differ between runs"
            best = {k: min(v) for k, v in runs.items()}
            compute, serial, ovl = best["compute"][0], best["serial"][0], best["overlap"][0]
            comm = best["serial"][1]
            # without a limited link, the exchange's own wall time stands for it
            wire = a.workers * sent / rate if rate else comm
            print(f"{transport:<10}{codec:<8}{compute:>15.2f}{wire:>8.2f}{serial:>10.2f}{comm:>8.2f}{ovl:>11.2f}"
                  f"{best['overlap'][1]:>8.2f}{ovl / serial:>11.2f}x{ovl / max(compute, wire):>13.2f}x"
                  f"{ovl / compute:>12.2f}x")
            print(f"{'':<18}all (train s, comm s): " + "; ".join(
                f"{k} " + " ".join(f"({t:.2f}, {c:.2f})" for t, c in v) for k, v in runs.items()))
    print("every run saved the same model bytes")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=100)
    ap.add_argument("--depth", type=int, default=8)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--netem", help="rate for MPI over a rate-limited loopback, e.g. 1gbit")
    ap.add_argument("--mpi", action="store_true", help="MPI ranks over TCP on the plain loopback")
    ap.add_argument("--repeat", type=int, default=3, help="runs per codec; the fastest and the median are shown")
    ap.add_argument("--overlap", action="store_true",
                    help="the overlap table instead: compute-only (in-process) time, and MPI ranks with and without "
                         "the exchange behind the builds (codecs none and auto; exact mode unless --grad-bits)")
    ap.add_argument("--codecs", default="none,packed,sparse,auto",
                    help="codecs to time, comma-separated (none is always among them: the others are compared to it)")
    ap.add_argument("--bits", default="0,8", help="gradient bits of the modes to time, comma-separated (0: exact)")
    ap.add_argument("--grad-bits", type=int, default=0,
                    help="with --overlap: gradient bits of the runs (0, the default, is exact mode)")
    a = ap.parse_args()
    data = os.path.join(tempfile.gettempdir(), f"sapwood-synthetic-{a.rows}.parquet")
    if not os.path.exists(data):
        run([sys.executable, os.path.join(ROOT, "datasets", "make_synthetic.py"), "--rows", str(a.rows), "--out", data])
    ns = None
    mpi = a.mpi or bool(a.netem)
    if a.netem:
        ns = "sapwood-bench"
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        run(["ip", "netns", "add", ns])
        # ethernet-sized frames, so the rate limiter meters packets as a real link would
        run(["ip", "netns", "exec", ns, "ip", "link", "set", "lo", "mtu", "1500"])
        run(["ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up"])
        tc = ["ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", "lo", "root"]
        if subprocess.run(tc + ["netem", "rate", a.netem, "delay", "0.1ms"], capture_output=True).returncode == 0:
            limiter = f"netem rate {a.netem} delay 0.1ms"
        else:
            # kernels without sch_netem (this sandbox's) still have the token bucket filter:
            # the same rate, without the added delay
            run(tc + ["tbf", "rate", a.netem, "burst", "256kb", "latency", "50ms"])
            limiter = f"tbf rate {a.netem} (no sch_netem in this kernel: no added delay)"
        print(f"loopback of namespace {ns}: mtu 1500, {limiter}; all ranks share it")
    print(f"synthetic binary task: {a.rows} rows x 28 features, {a.rounds} rounds, depth {a.depth}, "
          f"{a.workers} " + ("MPI ranks over TCP loopback" + (" limited to " + a.netem if ns else "") if mpi else "in-process workers"))
    codecs = ["none"] + [c for c in a.codecs.split(",") if c and c != "none"]
    for c in codecs:
        if c not in ("none", "packed", "sparse", "auto"):
            raise SystemExit(f"--codecs: unknown codec {c!r} (none, packed, sparse or auto)")
    try:
        if a.overlap:
            overlap_table(a, data, ns)
            return
        print(f"{'mode':<12}{'codec':<8}{'KiB/tree':>10}{'baseline KiB/tree':>19}{'vs baseline':>13}{'train s':>9}"
              f"{'vs none':>9}{'median vs none':>16}{'paired vs none':>16}{'90% interval':>14}{'CPU vs none':>13}")
        for bits in a.bits.split(","):
            digests, times, sent, base = set(), {c: [] for c in codecs}, {}, {}
            cpu = {c: 0.0 for c in codecs}
            for r in range(a.repeat):
                for codec in codecs if r % 2 == 0 else codecs[::-1]:
                    with tempfile.TemporaryDirectory() as t:
                        model, summary = os.path.join(t, "m.json"), os.path.join(t, "s.json")
                        args = [BIN, "train", "--quiet", "--data", data, "--label", "y", "--objective", "binary:logistic",
                                "--rounds", str(a.rounds), "--max-depth", str(a.depth), "--learning-rate", "0.1",
                                "--set", f"grad_bits={bits}", "--set", f"comm_codec={codec}",
                                "--model", model, "--summary", summary]
                        if mpi:
                            cmd = (["ip", "netns", "exec", ns] if ns else []) + ["mpirun", "--allow-run-as-root", "--oversubscribe",
                                   "--mca", "btl", "tcp,self", "--mca", "btl_tcp_if_include", "lo",
                                   "-np", str(a.workers)] + args + ["--collective", "mpi", "--threads", "1"]
                        else:
                            cmd = args + ["--workers", str(a.workers), "--threads", "2"]
                        before = os.times()
                        run(cmd)
                        after = os.times()
                        cpu[codec] += (after.children_user - before.children_user
                                       + after.children_system - before.children_system)
                        s = json.load(open(summary))
                        digests.add(hashlib.sha256(open(model, "rb").read()).hexdigest())
                        base[codec], _ = baseline_bytes_per_tree(model, a.workers)
                        sent[codec] = s["communication"]["bytes_sent"] / s["rounds"]
                        times[codec].append(s["train_seconds"])
            best = {c: min(v) for c, v in times.items()}
            median = {c: statistics.median(v) for c, v in times.items()}
            ratios = {c: [t / n for t, n in zip(v, times["none"])] for c, v in times.items()}
            paired = {c: statistics.median(v) for c, v in ratios.items()}
            interval = {c: median_interval(v) for c, v in ratios.items()}
            mode = "exact" if bits == "0" else f"grad_bits={bits}"
            for codec in codecs:
                per_tree = sent[codec]
                print(f"{mode:<12}{codec:<8}{per_tree / 1024:>10.0f}{base[codec] / 1024:>19.0f}{base[codec] / per_tree:>12.1f}x"
                      f"{best[codec]:>9.2f}{best[codec] / best['none']:>8.2f}x{median[codec] / median['none']:>15.2f}x"
                      f"{paired[codec]:>15.2f}x{f'{interval[codec][0]:.2f}-{interval[codec][1]:.2f}':>14}"
                      f"{cpu[codec] / cpu['none']:>12.2f}x")
            print(f"{'':<20}all times (s): " + "; ".join(f"{c} " + " ".join(f"{t:.2f}" for t in times[c]) for c in codecs))
            assert len(digests) == 1, "models differ between codecs"
        print("every codec saved the same model bytes")
    finally:
        if ns:
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)


if __name__ == "__main__":
    main()
