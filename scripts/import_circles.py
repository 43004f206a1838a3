#!/usr/bin/env python3
"""Finds import circles between the files of each Rust crate and of the Python package.

A circle is a set of files (modules) that reach each other through `use` paths (Rust:
`crate::`, `super::` and `self::` paths, mapped to the longest module they name; Python:
relative and `sapwood.` imports). Circles make a layer impossible to read, test or move on
its own, so any is reported and the exit status is 1.

    python3 scripts/import_circles.py            # from the repository root
"""
from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# a path of identifiers after `crate::`, `super::` or `self::` (in `use` items and in code)
RUST_PATH = re.compile(r"\b(crate|super|self)((?:::[A-Za-z_][A-Za-z0-9_]*)+)")
RUST_GROUP = re.compile(r"\b(crate|super|self)((?:::[A-Za-z_][A-Za-z0-9_]*)*)::\{([^{}]*)\}")
COMMENT = re.compile(r"//[^\n]*")


def rust_modules(src: Path) -> dict[tuple[str, ...], Path]:
    """Each file's module path within its crate (`lib.rs` and `main.rs` are the root, ())."""
    modules = {}
    for f in src.rglob("*.rs"):
        parts = list(f.relative_to(src).with_suffix("").parts)
        if parts[-1] == "mod" or parts == ["lib"] or parts == ["main"]:
            parts = parts[:-1]
        modules[tuple(parts)] = f
    return modules


def resolve(full: list[str], known: dict[tuple[str, ...], Path]) -> tuple[str, ...] | None:
    """The module (file) an absolute path names: the longest known prefix."""
    for n in range(len(full), -1, -1):
        if tuple(full[:n]) in known:
            return tuple(full[:n])
    return None


def rust_edges(src: Path) -> dict[tuple[str, ...], set[tuple[str, ...]]]:
    known = rust_modules(src)
    edges: dict[tuple[str, ...], set[tuple[str, ...]]] = {m: set() for m in known}
    for module, f in known.items():
        text = COMMENT.sub("", f.read_text())
        # inline test modules may use anything of their file's parents
        text = text.split("#[cfg(test)]\nmod tests")[0]
        paths = []
        for m in RUST_GROUP.finditer(text):
            for item in m.group(3).split(","):
                item = item.strip().split(" as ")[0].strip()
                if item and item != "self":
                    paths.append((m.group(1), m.group(2) + "::" + item))
                elif item == "self":
                    paths.append((m.group(1), m.group(2)))
        for m in RUST_PATH.finditer(text):
            paths.append((m.group(1), m.group(2)))
        for head, tail in paths:
            rest = [p for p in tail.split("::") if p]
            if head == "crate":
                full = rest
            else:
                # `self` is the file's own module; `super` its parent
                base = list(module)
                if head == "super":
                    base = base[:-1]
                while rest and rest[0] == "super":
                    rest = rest[1:]
                    base = base[:-1]
                full = base + rest
            target = resolve(full, known)
            # the crate root (lib.rs) is the facade that re-exports: not a layer
            if target not in (None, module, ()) and module != ():
                edges[module].add(target)
    return edges


def python_edges(pkg: Path) -> dict[str, set[str]]:
    files = {f.stem: f for f in pkg.glob("*.py")}
    edges: dict[str, set[str]] = {m: set() for m in files}
    for name, f in files.items():
        for node in ast.walk(ast.parse(f.read_text())):
            targets = []
            if isinstance(node, ast.ImportFrom):
                if node.level == 1:
                    if node.module:
                        targets.append(node.module.split(".")[0])
                    else:
                        targets += [a.name for a in node.names]
                elif node.module and node.module.startswith(pkg.name + "."):
                    targets.append(node.module.split(".")[1])
            elif isinstance(node, ast.Import):
                targets += [a.name.split(".")[1] for a in node.names
                            if a.name.startswith(pkg.name + ".")]
            for t in targets:
                if t in files and t != name:
                    edges[name].add(t)
    return edges


def circles(edges: dict) -> list[list]:
    """Strongly connected components of more than one node (Tarjan)."""
    index: dict = {}
    low: dict = {}
    stack: list = []
    on: set = set()
    found = []
    counter = [0]

    def visit(v) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def main() -> int:
    bad = 0
    crates = sorted(p for p in (ROOT / "crates").iterdir() if (p / "src").is_dir())
    crates.append(ROOT / "python")
    for crate in crates:
        for comp in circles(rust_edges(crate / "src")):
            names = ", ".join("::".join(m) or "(root)" for m in comp)
            print(f"{crate.name}: import circle between {names}")
            bad += 1
    for comp in circles(python_edges(ROOT / "python" / "sapwood")):
        print(f"python/sapwood: import circle between {', '.join(comp)}")
        bad += 1
    n = len(crates)
    if bad:
        print(f"import_circles: {bad} circle(s)", file=sys.stderr)
        return 1
    print(f"import_circles: no circles among the files of {n} Rust crates and the Python package")
    return 0


if __name__ == "__main__":
    sys.exit(main())
