"""Runs the shell and Python blocks of the guide, so that what a page shows keeps working.

Every block fenced as ```bash or ```python in docs/*.md and docs/guide/*.md runs, in page
order, in a scratch directory of its own per page where `datasets/` is the repository's
bundled datasets and `sapwood` is on PATH (the binary in $SAPWOOD_CLI). A bash block runs with
`set -euo pipefail`; a Python block runs by itself (its own imports) with the interpreter
running this script. Blocks that cannot run here (GPUs, several hosts, installs) are fenced
```console or ```text, which are shown and not run.

    python docs/run_blocks.py [PAGE.md ...]
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
FENCE = re.compile(r"^(`{3,})(bash|python)\s*$")
TIMEOUT_S = 300


def blocks(page: Path) -> list[tuple[int, str, str]]:
    """(line, language, code) of every runnable block of a page."""
    found = []
    lines = page.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i].strip())
        if m:
            fence, lang, start = m.group(1), m.group(2), i + 1
            body = []
            i += 1
            while i < len(lines) and lines[i].strip() != fence:
                body.append(lines[i])
                i += 1
            if i == len(lines):
                raise SystemExit(f"{page}:{start}: unclosed ``` block")
            found.append((start, lang, "\n".join(body) + "\n"))
        i += 1
    return found


def main(argv: list[str]) -> int:
    cli = Path(os.environ.get("SAPWOOD_CLI", ROOT / "target" / "release" / "sapwood"))
    if not cli.is_file():
        print(f"run_blocks: no sapwood binary at {cli} (set SAPWOOD_CLI)", file=sys.stderr)
        return 1
    pages = [Path(p).resolve() for p in argv] or sorted(
        [*DOCS.glob("*.md"), *DOCS.glob("guide/*.md")]
    )
    bindir = Path(tempfile.mkdtemp(prefix="sapwood-docs-bin-"))
    (bindir / "sapwood").symlink_to(cli.resolve())
    env = dict(os.environ)
    env["PATH"] = f"{bindir}{os.pathsep}{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    env["MPLBACKEND"] = "Agg"
    failures, ran = [], 0
    for page in pages:
        todo = blocks(page)
        if not todo:
            continue
        scratch = Path(tempfile.mkdtemp(prefix=f"sapwood-docs-{page.stem}-"))
        (scratch / "datasets").symlink_to(ROOT / "datasets")
        for line, lang, code in todo:
            where = f"{page.relative_to(ROOT)}:{line}"
            cmd = (["bash", "-c", "set -euo pipefail\n" + code] if lang == "bash"
                   else [sys.executable, "-c", code])
            began = time.monotonic()
            try:
                done = subprocess.run(cmd, cwd=scratch, env=env, capture_output=True,
                                      text=True, timeout=TIMEOUT_S)
                ok, out = done.returncode == 0, done.stdout + done.stderr
            except subprocess.TimeoutExpired as e:
                ok, out = False, f"timed out after {TIMEOUT_S} s\n{e.stdout or ''}{e.stderr or ''}"
            ran += 1
            took = time.monotonic() - began
            print(f"{'ok  ' if ok else 'FAIL'} {where} ({lang}, {took:.1f} s)", flush=True)
            if not ok:
                failures.append(where)
                print(out[-4000:], flush=True)
        shutil.rmtree(scratch, ignore_errors=True)
    shutil.rmtree(bindir, ignore_errors=True)
    if ran == 0:
        print("run_blocks: no runnable blocks found", file=sys.stderr)
        return 1
    if failures:
        print(f"run_blocks: {len(failures)} of {ran} blocks failed: {', '.join(failures)}",
              file=sys.stderr)
        return 1
    print(f"run_blocks: all {ran} blocks ran")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
