"""Fails when the built reference leaves out a parameter, an alias, a subcommand or a flag.

The pages are generated from the binary, so this guards the build itself: a reference page
rewritten by hand, a directive dropped, or a binary older than the code.

    python docs/check_reference.py docs/_build/html
"""

from __future__ import annotations

import html
import json
import os
import re
import subprocess
import sys
from pathlib import Path


def text_of(page: Path) -> str:
    raw = page.read_text(encoding="utf-8")
    return html.unescape(re.sub(r"<[^>]+>", " ", raw))


def main(built: Path) -> int:
    cli = os.environ.get("SAPWOOD_CLI", str(Path(__file__).resolve().parents[1] / "target/release/sapwood"))
    run = lambda *a: subprocess.run([cli, *a], check=True, capture_output=True, text=True).stdout
    missing = []
    params = text_of(built / "reference" / "parameters.html")
    rows = json.loads(run("params", "--json"))
    for row in rows:
        for word in [row["name"], *row["aliases"]]:
            if not re.search(rf"(?<![\w-]){re.escape(word)}(?![\w-])", params):
                missing.append(f"parameters.html lacks `{word}`")
        if row["about"].split(".")[0][:40] not in " ".join(params.split()):
            missing.append(f"parameters.html lacks the description of `{row['name']}`")
    cli_page = text_of(built / "reference" / "cli.html")
    top = run("--help")
    commands = re.findall(r"^  (\w+)\s", top.split("Commands:")[1].split("\n\n")[0], re.M)
    for cmd in [c for c in commands if c != "help"]:
        if f"sapwood {cmd}" not in cli_page:
            missing.append(f"cli.html lacks `sapwood {cmd}`")
        for flag in re.findall(r"^\s+(?:-\w, )?(--[\w-]+)", run(cmd, "--help"), re.M):
            section = cli_page.split(f"sapwood {cmd}", 1)[-1]
            if flag not in section:
                missing.append(f"cli.html lacks `{flag}` of `sapwood {cmd}`")
    if missing:
        print("check_reference: the built reference is incomplete:\n  " + "\n  ".join(missing),
              file=sys.stderr)
        return 1
    print(f"check_reference: {len(rows)} parameters and {len(commands) - 1} subcommands, "
          "every flag, in the built reference")
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
