"""Sphinx directives that print Sapwood's reference from the binary itself, so that it cannot
drift from the code: ``sapwood-params`` renders ``sapwood params --json`` (the table the Rust
tests hold to the parameter names and defaults) and ``sapwood-cli`` renders the help of every
subcommand (clap's, from the doc comments a Rust test requires of every flag).
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.errors import ExtensionError
from sphinx.util.docutils import SphinxDirective


def _run(app: Sphinx, *args: str) -> str:
    cli = Path(app.config.sapwood_cli)
    if not cli.is_file():
        raise ExtensionError(f"no sapwood binary at {cli}: build it or set SAPWOOD_CLI")
    done = subprocess.run([str(cli), *args], capture_output=True, text=True)
    if done.returncode != 0:
        raise ExtensionError(f"`sapwood {' '.join(args)}` failed: {done.stderr.strip()}")
    return done.stdout


def _inline(text: str) -> list[nodes.Node]:
    """The table's prose, whose backticks quote values as Markdown does, as text and literals."""
    parts = text.split("`")
    return [nodes.literal(text=p) if i % 2 else nodes.Text(p) for i, p in enumerate(parts) if p]


class ParamsDirective(SphinxDirective):
    """Every parameter (``:run-options:`` for the run options instead), one section each."""

    option_spec = {"run-options": lambda x: True}

    def run(self) -> list[nodes.Node]:
        rows: list[dict[str, Any]] = json.loads(_run(self.env.app, "params", "--json"))
        want_run = "run-options" in self.options
        out: list[nodes.Node] = []
        for row in rows:
            if bool(row["run_option"]) != want_run:
                continue
            name = row["name"]
            section = nodes.section(ids=[nodes.make_id(f"param-{name}")], names=[name])
            section += nodes.title("", "", nodes.literal(text=name))
            section += nodes.paragraph("", "", *_inline(row["about"]))
            fields = nodes.field_list()
            values: list[tuple[str, list[nodes.Node]]] = []
            if row["aliases"]:
                aliases: list[nodes.Node] = []
                for i, a in enumerate(row["aliases"]):
                    aliases += ([nodes.Text(", ")] if i else []) + [nodes.literal(text=a)]
                values.append(("Aliases", aliases))
            default = [nodes.literal(text=row["default"])] if row["default"] else [
                nodes.Text("unset")]
            values += [
                ("Default", default),
                ("Type", [nodes.Text(row["kind"])]),
                ("Values", _inline(row["range"])),
                ("Applies to", _inline(row["applies"])),
            ]
            for key, body in values:
                fields += nodes.field(
                    "", nodes.field_name(text=key), nodes.field_body("", nodes.paragraph("", "", *body))
                )
            section += fields
            self.state.document.note_implicit_target(section)
            out.append(section)
        if not out:
            raise self.error("`sapwood params --json` listed nothing")
        return out


class CliDirective(SphinxDirective):
    """``sapwood --help`` and every subcommand's help, one section each."""

    def run(self) -> list[nodes.Node]:
        app = self.env.app
        top = _run(app, "--help")
        commands = []
        in_commands = False
        for line in top.splitlines():
            if line.startswith("Commands:"):
                in_commands = True
                continue
            if in_commands:
                m = re.match(r"^  (\S+)\s+(.*)$", line)
                if not m:
                    break
                if m.group(1) != "help":
                    commands.append((m.group(1), m.group(2)))
        if not commands:
            raise self.error("`sapwood --help` lists no subcommands")
        out: list[nodes.Node] = []
        for name, about, text in [("", "", top)] + [
            (n, a, _run(app, n, "--help")) for n, a in commands
        ]:
            title = f"sapwood {name}".strip()
            section = nodes.section(ids=[nodes.make_id(f"cli-{title}")], names=[title])
            section += nodes.title(text=title)
            if about:
                section += nodes.paragraph(text=about)
            section += nodes.literal_block(text=text.rstrip(), language="text")
            self.state.document.note_implicit_target(section)
            out.append(section)
        return out


def setup(app: Sphinx) -> dict[str, Any]:
    app.add_config_value("sapwood_cli", "", "env")
    app.add_directive("sapwood-params", ParamsDirective)
    app.add_directive("sapwood-cli", CliDirective)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
