#!/usr/bin/env bash
# Builds the user guide with Sphinx, warnings as errors, running the gallery's examples and
# every shell and Python block of the guide, then checks that the built reference names every
# parameter and command-line flag.
#
#   bash docs/build.sh        # venv in $SAPWOOD_PY_VENV (default /tmp/sapwood-pyvenv), with
#                             # the sapwood package installed (python/run_tests.sh does that)
#
# Output: docs/_build/html (the Rust API under docs/_build/html/rust).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"
venv="${SAPWOOD_PY_VENV:-/tmp/sapwood-pyvenv}"
export SAPWOOD_CLI="${SAPWOOD_CLI:-$root/${CARGO_TARGET_DIR:-target}/release/sapwood}"
export MPLBACKEND=Agg

"$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
    "sphinx==9.0.4" "pydata-sphinx-theme==0.24.0" "numpydoc==1.11.0" "sphinx-gallery==0.22.1" \
    "myst-parser==5.2.0"

rm -rf "$here/_build" "$here/auto_examples"
# the Rust API reference: every public item documented (the crates deny missing_docs), no
# broken links, no stray HTML (warnings are errors)
target="${CARGO_TARGET_DIR:-$root/target}"
(cd "$root" && RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --locked --quiet \
    -p sapwood -p sapwood-core -p sapwood-io -p sapwood-collective)
mkdir -p "$here/_build/rustdoc"
cp -r "$target/doc" "$here/_build/rustdoc/rust"
"$venv/bin/python" -m sphinx -W --keep-going -b html -q "$here" "$here/_build/html"
"$venv/bin/python" "$here/check_reference.py" "$here/_build/html"
"$venv/bin/python" "$here/run_blocks.py"
echo "docs/build.sh: the guide built, its reference is complete and its blocks ran"
