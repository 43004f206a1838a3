#!/usr/bin/env python3
"""Bytes on the wire of data-parallel training, per codec, beside XGBoost's baseline.

Trains the synthetic binary task with 4 workers (depth 8, 100 rounds by default), once per
codec (`none`, `packed`, `sparse`, `auto`) in `exact` and `grad_bits=8` mode, and prints
bytes sent per tree by one worker, the ratio to the uncompressed i64 (sum g, sum h)
baseline of a ring allreduce (16 bytes per bin of every histogram built, times 2(P-1)/P:
what XGBoost sends), and the wall-time cost against `none`. The models of all runs must be
byte-identical (checked). Each codec runs --repeat times (default 3), interleaved with the
others so that a slow spell of a shared machine hits all of them. Times are the fastest run
of each codec (other load on a shared machine only ever adds time), with the medians beside.

With --netem RATE (e.g. 1gbit), the runs are MPI ranks over TCP inside a network namespace
of their own whose loopback (MTU 1500) is rate-limited with tc netem (and 0.1 ms delay), or
with tc tbf at the same rate where the kernel has no netem: there the compression shows as
speed. All ranks share the one limited loopback, like hosts behind one 1 Gbit/s link. Needs root, iproute2 and an MPI build of the CLI
(cargo build --release -p sapwood-cli --features mpi).

    python3 bench/comm.py --rows 1000000 [--netem 1gbit]
requires: numpy, pyarrow (the generator)
"""
import argparse
import hashlib
import json
import os
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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=100)
    ap.add_argument("--depth", type=int, default=8)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--netem", help="rate for MPI over a rate-limited loopback, e.g. 1gbit")
    ap.add_argument("--mpi", action="store_true", help="MPI ranks over TCP on the plain loopback")
    ap.add_argument("--repeat", type=int, default=3, help="runs per codec; the fastest and the median are shown")
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
    print(f"{'mode':<12}{'codec':<8}{'KiB/tree':>10}{'baseline KiB/tree':>19}{'vs baseline':>13}{'train s':>9}{'vs none':>9}"
          f"{'median vs none':>16}")
    codecs = ["none", "packed", "sparse", "auto"]
    try:
        for bits in ["0", "8"]:
            digests, times, sent, base = set(), {c: [] for c in codecs}, {}, {}
            for _ in range(a.repeat):
                for codec in codecs:
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
                        run(cmd)
                        s = json.load(open(summary))
                        digests.add(hashlib.sha256(open(model, "rb").read()).hexdigest())
                        base[codec], _ = baseline_bytes_per_tree(model, a.workers)
                        sent[codec] = s["communication"]["bytes_sent"] / s["rounds"]
                        times[codec].append(s["train_seconds"])
            best = {c: min(v) for c, v in times.items()}
            median = {c: statistics.median(v) for c, v in times.items()}
            mode = "exact" if bits == "0" else "grad_bits=8"
            for codec in codecs:
                per_tree = sent[codec]
                print(f"{mode:<12}{codec:<8}{per_tree / 1024:>10.0f}{base[codec] / 1024:>19.0f}{base[codec] / per_tree:>12.1f}x"
                      f"{best[codec]:>9.2f}{best[codec] / best['none']:>8.2f}x{median[codec] / median['none']:>15.2f}x")
            print(f"{'':<20}all times (s): " + "; ".join(f"{c} " + " ".join(f"{t:.2f}" for t in times[c]) for c in codecs))
            assert len(digests) == 1, "models differ between codecs"
        print("every codec saved the same model bytes")
    finally:
        if ns:
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)


if __name__ == "__main__":
    main()
