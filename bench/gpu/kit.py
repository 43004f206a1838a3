#!/usr/bin/env python3
"""The GPU run behind bench/gpu/run.sh: data, carried tests, CPU vs GPU trainings, report.

Every step has a timeout and the whole run a time budget (default 450 s, under the 8 minutes
a device call may take): steps that no longer fit are reported as skipped, never dropped
silently. Needs python3 with numpy and pyarrow (for the data generator) and nothing else.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

START = time.monotonic()
DATA = Path(os.environ.get("SAPWOOD_KIT_DATA", "/tmp/sapwood-kit-data"))


class Run:
    """The log, the budget and the report rows of one GPU run."""

    def __init__(self, out: Path, budget: float):
        self.out = out
        self.budget = budget
        self.log = open(out / "gpu-run.log", "a", buffering=1)
        self.sections: list[tuple[str, list[str]]] = []

    def left(self) -> float:
        return self.budget - (time.monotonic() - START)

    def say(self, text: str) -> None:
        print(text, flush=True)
        self.log.write(text + "\n")

    def sh(self, cmd: list[str], timeout: float, env: dict | None = None) -> tuple[int, str, float]:
        """Runs `cmd` with a timeout clipped to the budget; returns (status, output, seconds)."""
        timeout = max(1.0, min(timeout, self.left()))
        self.log.write(f"\n$ {' '.join(cmd)}   (timeout {timeout:.0f} s)\n")
        t0 = time.monotonic()
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                               env={**os.environ, **(env or {})})
            status, text = p.returncode, p.stdout + p.stderr
        except subprocess.TimeoutExpired as e:
            status = 124
            text = (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
            text += f"\n[timed out after {timeout:.0f} s]"
        seconds = time.monotonic() - t0
        self.log.write(text + f"\n[exit {status}, {seconds:.1f} s]\n")
        return status, text, seconds

    def section(self, title: str, lines: list[str]) -> None:
        self.sections.append((title, lines))

    def report(self) -> str:
        parts = ["# Sapwood on a GPU: kit report", ""]
        for title, lines in self.sections:
            parts += [f"## {title}", "", *lines, ""]
        parts.append(f"Total run time: {time.monotonic() - START:.0f} s.")
        return "\n".join(parts) + "\n"


def generate(run: Run, small: int, large: int) -> dict[str, Path]:
    """The datasets of the trainings (same arguments, same files)."""
    DATA.mkdir(parents=True, exist_ok=True)
    specs = {
        "binary-small": (small, []),
        "multiclass-small": (small, ["--classes", "4"]),
        "categorical-small": (small, ["--categorical", "500"]),
        "binary-large": (large, []),
    }
    files = {}
    lines = []
    for name, (rows, extra) in specs.items():
        path = DATA / f"{name}-{rows}.parquet"
        if not path.exists():
            status, text, secs = run.sh([sys.executable, "datasets/make_synthetic.py", "--rows",
                                        str(rows), "--out", str(path) + ".tmp", *extra], 300)
            if status != 0:
                run.say(f"run: could not generate {name}:\n{text[-2000:]}")
                sys.exit(1)
            os.replace(str(path) + ".tmp", path)
            lines.append(f"- {name}: {rows:,} rows x 28 features, generated in {secs:.1f} s")
        else:
            lines.append(f"- {name}: {rows:,} rows x 28 features (reused)")
        files[name] = path
    run.section("Data", lines)
    return files


def gpu_present(run: Run) -> bool:
    if shutil.which("nvidia-smi") is None:
        return False
    status, text, _ = run.sh(["nvidia-smi", "-L"], 30)
    return status == 0 and "GPU" in text


def run_tests(run: Run, kit: Path) -> None:
    lines = ["| binary | result | seconds |", "|---|---|---|"]
    env = {"SAPWOOD_REQUIRE_CUDA": "1", "SAPWOOD_REQUIRE_NVRTC": "1", "SAPWOOD_REQUIRE_ADAPTER": "1"}
    tests = sorted((kit / "tests").iterdir(), key=lambda p: (not p.name.startswith("sapwood-cuda"), p.name))
    nvdisasm = machine_tool("nvdisasm")
    notes = []
    for exe in tests:
        if run.left() < 60:
            lines.append(f"| {exe.name} | skipped (time) | |")
            continue
        args, extra = [str(exe), "--test-threads", "4"], dict(env)
        if exe.name == "sapwood-cuda-nvrtc":
            # reads shaders/ at the path it was built in, which is not here: CI runs it
            args += ["--skip", "every_kernel_file_is_in_shaders_cuda_and_named_like_its_wgsl_twin"]
            notes.append("sapwood-cuda-nvrtc skips the test that reads shaders/ from the build path (CI runs it)")
            if nvdisasm:
                extra.update(SAPWOOD_NVDISASM=nvdisasm, SAPWOOD_REQUIRE_NVDISASM="1")
                notes.append(f"the SASS inspection uses this machine's {nvdisasm}")
            else:
                args += ["--skip", "sass_has_no_shared_compare_and_swap"]
                notes.append("no nvdisasm here: the SASS inspection is skipped (CI runs it)")
        status, text, secs = run.sh(args, 200, extra)
        result = [l.strip() for l in text.splitlines() if l.startswith("test result:")]
        failed = [l.split()[1] for l in text.splitlines() if l.startswith("test ") and l.endswith("FAILED")]
        summary = result[-1].replace("test result: ", "") if result else f"exit {status}"
        if failed:
            summary += " — failed: " + ", ".join(failed)
        lines.append(f"| {exe.name} | {summary} | {secs:.1f} |")
    lines += [""] + [f"- {n}" for n in notes]
    run.section("Carried tests (SAPWOOD_REQUIRE_CUDA=1)", lines)


def machine_tool(name: str) -> str | None:
    """A CUDA tool installed on this machine (PATH, then the toolkit's usual places)."""
    import glob
    found = shutil.which(name)
    if found:
        return found
    for pattern in (f"/usr/local/cuda*/bin/{name}", f"/usr/local/cuda*/{name}/{name}",
                    f"/opt/nvidia/*/{name}"):
        hits = sorted(glob.glob(pattern))
        if hits:
            return hits[-1]
    return None


def encoders(run: Run, kit: Path) -> None:
    """The device histogram encoders' throughput and bytes, from the carried encode test."""
    exe = kit / "tests" / "sapwood-cuda-encode"
    if not exe.exists():
        run.section("Device histogram encoders", ["not in the kit"])
        return
    if run.left() < 60:
        run.section("Device histogram encoders", ["skipped (time)"])
        return
    env = {"SAPWOOD_REQUIRE_CUDA": "1", "SAPWOOD_REQUIRE_NVRTC": "1"}
    status, text, secs = run.sh([str(exe), "device_encoder_throughput", "--exact", "--nocapture"], 120, env)
    found = [l.strip() for l in text.splitlines() if l.startswith("device encoders")]
    lines = [f"- {l}" for l in found] or [f"- no figure (exit {status}): {text.strip()[-300:]}"]
    lines.append(f"- the group encoding and packed lanes of 2^24 values made on the GPU, checked byte for byte "
                 f"against sapwood-collective's codecs ({secs:.1f} s with the check)")
    run.section("Device histogram encoders", lines)


# compute-sanitizer's tools, and the carried tests each runs: every kernel among them, on
# small data (a tool slows a kernel 10-100 times)
SANITIZER_TOOLS = ["memcheck", "racecheck", "synccheck", "initcheck"]
SANITIZED = [
    ("sapwood-cuda-conformance", ["histograms_match_brute_force_and_subtraction_equals_direct_build",
                                  "categorical_splits_route_by_bin_set",
                                  "gradients_and_margins_match_the_objective_bit_for_bit"]),
    ("sapwood-cuda-encode", ["group_encoded_histograms_equal_the_codec", "a_width_per_node_is_required"]),
]


def sanitizer(run: Run, kit: Path, limit: float) -> None:
    """NVIDIA's compute-sanitizer (carried by pack.sh from PyPI's nvidia-cuda-sanitizer-api,
    13.0 like NVRTC) over carried CUDA tests: memcheck (out-of-bounds and misaligned accesses),
    racecheck (shared-memory hazards), synccheck (barriers and warp operations misused) and
    initcheck (global memory read before it is written), each tool's findings reported."""
    title = "compute-sanitizer"
    env = {"SAPWOOD_REQUIRE_CUDA": "1", "SAPWOOD_REQUIRE_NVRTC": "1"}
    installed = machine_tool("compute-sanitizer")
    archive = kit / "sanitizer.tar.xz"
    if installed:
        exe, origin = Path(installed), f"this machine's {installed}"
    elif archive.exists():
        import tarfile
        import tempfile
        # a fresh folder each run: a partial extraction of an earlier one is never reused
        dest = Path(tempfile.mkdtemp(prefix="sapwood-sanitizer-"))
        with tarfile.open(archive) as t:
            t.extractall(dest)
        root = dest / "nvidia" / "cu13"
        exe = root / "bin" / "compute-sanitizer"
        # the tool loads its injection libraries from its own folder, as the toolkit lays
        # them out; the wheel keeps them in lib/
        for lib in (root / "lib").glob("*.so*"):
            if not (exe.parent / lib.name).exists():
                shutil.copy2(lib, exe.parent / lib.name)
        exe.chmod(0o755)
        env["LD_LIBRARY_PATH"] = f"{root / 'bin'}:{root / 'lib'}:{os.environ.get('LD_LIBRARY_PATH', '')}"
        origin = "the kit's (PyPI nvidia-cuda-sanitizer-api)"
    else:
        run.section(title, ["none on this machine and none in the kit"])
        return
    lines = [f"Tool: {origin}.", "", "| tool | tests | result | findings | seconds |", "|---|---|---|---|---|"]
    end = time.monotonic() + limit
    for tool in SANITIZER_TOOLS:
        for binary, tests in SANITIZED:
            left = end - time.monotonic()
            if left < 20 or run.left() < 60:
                lines.append(f"| {tool} | {binary} | skipped (time) | | |")
                continue
            cmd = [str(exe), "--tool", tool, "--error-exitcode", "9", "--print-limit", "10",
                   str(kit / "tests" / binary), *tests, "--exact", "--test-threads", "1"]
            status, text, secs = run.sh(cmd, left, env)
            summary = [l.strip("= ").strip() for l in text.splitlines() if "SUMMARY" in l]
            findings = [l.strip("= ").strip() for l in text.splitlines()
                        if l.startswith("=========") and any(w in l for w in ("Error", "Hazard", "Warning", "Invalid", "Uninitialized"))]
            result = {0: "clean", 9: "**errors**", 124: "timed out"}.get(status, f"exit {status}")
            ran = [l for l in text.splitlines() if l.startswith("test result:")]
            if status == 0 and not any(" 0 passed" not in l for l in ran):
                # a filter that matched nothing passes without running a kernel
                result = "**no test ran**"
            tail = [l.strip("= ").strip() for l in text.splitlines() if l.strip()][-1:]
            what = "; ".join((summary + findings or (tail if status not in (0, 9) else []))[:4])
            what = what.replace("|", "/") or "none reported"
            lines.append(f"| {tool} | {binary} ({len(tests)} tests) | {result} | {what} | {secs:.0f} |")
    run.section(title, lines)


class GpuMemory:
    """Peak GPU memory in use while a command runs, sampled by nvidia-smi every 100 ms."""

    def __enter__(self):
        self.peak = 0
        self.base = self._now()
        self.proc = subprocess.Popen(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits",
                                      "-lms", "100"], stdout=subprocess.PIPE, text=True)
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()
        return self

    def _now(self) -> int:
        try:
            out = subprocess.run(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
                                 capture_output=True, text=True, timeout=10).stdout
            return int(out.split()[0])
        except Exception:
            return 0

    def _read(self):
        for line in self.proc.stdout:
            try:
                self.peak = max(self.peak, int(line.split()[0]))
            except (ValueError, IndexError):
                pass

    def __exit__(self, *exc):
        self.proc.terminate()
        self.thread.join(timeout=2)

    def used_mib(self) -> int:
        return max(0, self.peak - self.base)


def train(run: Run, kit: Path, data: Path, name: str, device: str, extra: list[str]) -> dict:
    model = DATA / f"{name}-{device}.json"
    summary = DATA / f"{name}-{device}.summary.json"
    cmd = [str(kit / "bin" / "sapwood"), "train", "--data", str(data), "--label", "y", "--quiet",
           "--model", str(model), "--summary", str(summary)] + extra
    if device.startswith("cuda-workers"):
        cmd += ["--device", "cuda", "--workers", device.rsplit("-", 1)[1]]
    else:
        cmd += ["--device", device]
    with GpuMemory() if device != "cpu" else _Nothing() as mem:
        status, text, secs = run.sh(cmd, 240)
    result = {"status": status, "wall": secs, "model": model, "error": text.strip()[-400:]}
    if status == 0:
        s = json.loads(summary.read_text())
        result.update(train_seconds=s["train_seconds"], load_seconds=s["data_loading_seconds"])
        result["gpu_mib"] = mem.used_mib() if mem else None
    return result


class _Nothing:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


def trainings(run: Run, kit: Path, files: dict[str, Path], small: int, large: int) -> None:
    base = ["--rounds", "100", "--learning-rate", "0.1", "--objective", "binary:logistic"]
    depth8 = base + ["--max-depth", "8"]
    leaves = base + ["--max-depth", "0", "--max-leaves", "255", "--set", "grow_policy=lossguide"]
    configs = [
        ("binary depth 8 exact", "binary-small", small, depth8, ["cuda", "wgpu", "cuda-workers-4"]),
        ("binary depth 8 grad_bits=8", "binary-small", small, depth8 + ["--set", "grad_bits=8"], ["cuda", "wgpu"]),
        ("binary 255 leaves", "binary-small", small, leaves, ["cuda", "wgpu"]),
        ("multiclass (4) depth 6", "multiclass-small", small,
         ["--rounds", "50", "--objective", "multi:softprob", "--max-depth", "6"], ["cuda", "wgpu"]),
        ("categorical (500 levels) and missing", "categorical-small", small, depth8, ["cuda", "wgpu"]),
        # the table exponential of the log-link kernels and the quantile leaf refit
        ("count:poisson depth 8", "binary-small", small,
         ["--rounds", "50", "--objective", "count:poisson", "--max-depth", "8"], ["cuda", "wgpu"]),
        ("reg:quantileerror alpha 0.9", "binary-small", small,
         ["--rounds", "30", "--objective", "reg:quantileerror", "--set", "quantile_alpha=0.9"], ["cuda"]),
        # several quantiles: gradients from the host (the kernels read one alpha)
        ("reg:quantileerror alphas 0.1,0.5,0.9", "binary-small", small,
         ["--rounds", "20", "--objective", "reg:quantileerror", "--set", "quantile_alpha=0.1,0.5,0.9"],
         ["cuda"]),
        ("binary depth 8 exact", "binary-large", large, depth8, ["cuda"]),
        ("binary 255 leaves", "binary-large", large, leaves, ["cuda"]),
    ]
    lines = ["| configuration | rows | device | train s | CPU train s | speed-up | GPU MiB | reference MiB "
             "| same bytes as CPU |", "|---|---|---|---|---|---|---|---|---|"]
    for title, data, rows, extra, devices in configs:
        groups = 4 if "multiclass" in data else 1
        # binned matrix (28 one-byte bins per row) and per-row gradients (f32 g, h per group)
        reference = rows * (28 + 8 * groups) / 2**20
        key = f"{data}-{title}".replace(" ", "_").replace("(", "").replace(")", "").replace("=", "")
        if run.left() < 90:
            lines.append(f"| {title} | {rows:,} | all | skipped (time) | | | | | |")
            continue
        cpu = train(run, kit, files[data], key, "cpu", extra)
        if cpu["status"] != 0:
            lines.append(f"| {title} | {rows:,} | cpu | failed: {cpu['error'][-150:]} | | | | | |")
            continue
        cpu_bytes = cpu["model"].read_bytes()
        for device in devices:
            if run.left() < 45:
                lines.append(f"| {title} | {rows:,} | {device} | skipped (time) | | | | | |")
                continue
            r = train(run, kit, files[data], key, device, extra)
            if r["status"] != 0:
                lines.append(f"| {title} | {rows:,} | {device} | failed: {r['error'][-150:].replace('|', '/')} "
                             "| | | | | |")
                continue
            same = r["model"].read_bytes() == cpu_bytes
            lines.append(f"| {title} | {rows:,} | {device} | {r['train_seconds']:.2f} | {cpu['train_seconds']:.2f} | "
                         f"{cpu['train_seconds'] / max(r['train_seconds'], 1e-9):.1f}x | {r['gpu_mib']} | "
                         f"{reference:.0f} | {'yes' if same else '**NO**'} |")
    lines += ["", "Train seconds are the CLI's `train_seconds` (binning excluded, upload to the device included); "
              "the CPU runs use every core of the machine. GPU MiB is the peak of `nvidia-smi` memory.used during the "
              "run minus its value before (so it includes the CUDA context); reference MiB is the binned matrix plus "
              "per-row gradients, the target being at most twice that."]
    run.section("Trainings: CPU against GPU", lines)


def bench(run: Run, kit: Path, parts: str, title: str, quick: bool, limit: float) -> None:
    """One cuda_bench run (its parts: identity, hist, skewed, train, nccl)."""
    if run.left() < 60:
        run.section(title, ["skipped (time)"])
        return
    cmd = [str(kit / "bin" / "cuda_bench"), "--parts", parts] + (["--quick"] if quick else [])
    status, text, secs = run.sh(cmd, min(limit, run.left() - 30))
    tail = text.strip().splitlines()[-40:]
    run.section(title, [f"`{' '.join(cmd[1:])}`: exit {status} after {secs:.0f} s", "", "```", *tail, "```"])


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--kit", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--small", type=int, default=int(os.environ.get("SAPWOOD_KIT_SMALL", 1_000_000)))
    ap.add_argument("--large", type=int, default=int(os.environ.get("SAPWOOD_KIT_LARGE", 10_000_000)))
    ap.add_argument("--budget", type=float, default=float(os.environ.get("SAPWOOD_KIT_BUDGET", 450)))
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    run = Run(a.out, a.budget)
    files = generate(run, a.small, a.large)
    if not gpu_present(run):
        run.say("no GPU: nvidia-smi finds none (kit and data are ready)")
        return 2
    _, smi, _ = run.sh(["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"], 30)
    run.section("Machine", [f"- GPU: {smi.strip()}", f"- CPU cores: {os.cpu_count()}"])
    run_tests(run, a.kit)
    encoders(run, a.kit)
    sanitizer(run, a.kit, 150)
    # kernel throughput, the skewed-feature case and the NCCL runs (one rank per GPU, then
    # two logical devices per GPU) first: they are short and answer the review's questions
    bench(run, a.kit, "identity,hist,skewed,nccl", "cuda_bench: kernels, skew, NCCL", True, 120)
    trainings(run, a.kit, files, a.small, a.large)
    bench(run, a.kit, "train", "cuda_bench: training with data on the device", False, 200)
    report = run.report()
    (a.out / "gpu-report.md").write_text(report)
    print("\n" + report, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
