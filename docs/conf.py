"""Sphinx configuration of Sapwood's user guide (built by docs/build.sh, warnings as errors)."""

import os
import sys
from pathlib import Path

here = Path(__file__).resolve().parent
sys.path.insert(0, str(here / "_ext"))

project = "Sapwood"
author = "The Sapwood developers"
copyright = "2026, the Sapwood developers"

extensions = [
    "myst_parser",
    "numpydoc",
    "sphinx.ext.autodoc",
    "sphinx.ext.intersphinx",
    "sphinx_gallery.gen_gallery",
    "sapwood_reference",
]
# SAPWOOD_DOCS_LIGHT=1: a quick build of the prose pages alone (no gallery, no generated
# reference), for writing; docs/build.sh never sets it
if os.environ.get("SAPWOOD_DOCS_LIGHT") == "1":
    extensions = [e for e in extensions if e not in ("sphinx_gallery.gen_gallery", "sapwood_reference")]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "auto_examples/*.ipynb", "auto_examples/*.py", "auto_examples/*.zip",
                    "auto_examples/*.md5", "auto_examples/*.json", "examples/README.txt"]

myst_enable_extensions = ["colon_fence", "deflist", "tasklist"]
myst_heading_anchors = 3

# the Python API reference comes from the docstrings; numpydoc's own tables would list every
# inherited scikit-learn member
numpydoc_show_class_members = False
numpydoc_validation_checks = set()
autodoc_default_options = {"members": True}
autodoc_typehints = "none"

intersphinx_mapping = {}

sphinx_gallery_conf = {
    "examples_dirs": "examples",
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"/plot_",
    # an example that raises fails the build
    "abort_on_example_error": True,
    "download_all_examples": False,
    "remove_config_comments": True,
    "within_subsection_order": "FileNameSortKey",
    "matplotlib_animations": False,
}

# command lines keep their `--flags` (no en dashes)
smartquotes = False

html_theme = "pydata_sphinx_theme"
html_title = "Sapwood"
html_static_path = ["_static"]
html_theme_options = {
    "navbar_align": "left",
    "show_toc_level": 2,
    "navigation_with_keys": False,
    "footer_start": ["copyright"],
    "footer_end": [],
}
html_sidebars = {"index": [], "getting-started": [], "measurements": []}
html_show_sourcelink = False
# the Rust API, built by rustdoc (docs/build.sh) and copied in as html/rust
rustdoc = here / "_build" / "rustdoc"
html_extra_path = [str(rustdoc)] if rustdoc.is_dir() else []

# the command-line binary whose parameter table and help texts the reference pages print
sapwood_cli = os.environ.get("SAPWOOD_CLI", str(here.parent / "target" / "release" / "sapwood"))


def _skip_inherited_sklearn(app, what, name, obj, skip, options):
    # scikit-learn's metadata-routing methods (set_fit_request, ...) are generated on every
    # estimator and documented by scikit-learn itself
    if name == "get_metadata_routing" or (name.startswith("set_") and name.endswith("_request")):
        return True
    # scikit-learn's own mixin methods (score, get_params, ...) are documented there
    if str(getattr(obj, "__module__", "")).startswith("sklearn."):
        return True
    return None


def setup(app):
    app.connect("autodoc-skip-member", _skip_inherited_sklearn)
