"""``record_hook.py LOG -- COMMAND...``: append the hook payload on stdin to LOG (one
JSON line), then run COMMAND through the shell with the same payload on its stdin;
its stdout, stderr and exit status are passed on unchanged."""

from __future__ import annotations

import fcntl
import json
import shlex
import subprocess
import sys


def main() -> int:
    log, rest = sys.argv[1], sys.argv[sys.argv.index("--") + 1 :]
    raw = sys.stdin.read()
    try:
        line = json.dumps(json.loads(raw))
    except ValueError:
        line = json.dumps({"unparsed": raw})
    with open(log, "a") as out:
        fcntl.flock(out, fcntl.LOCK_EX)
        out.write(line + "\n")
    # Quoted again: the hook's own arguments (``--check 'test=python -m pytest -q'``)
    # must reach it as the shell that ran this recorder gave them.
    proc = subprocess.run(shlex.join(rest), shell=True, input=raw, text=True)
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
