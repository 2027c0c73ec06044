"""What the callgrind gates share (scripts/callgrind-token.py, scripts/callgrind-engine.py): running
commands, reading callgrind_annotate's table with Swift names demangled, the committed figure, git."""
import os
import re
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, text=True, **kw)


def annotate(out_file, inclusive=False):
    """(instructions, function) rows of callgrind_annotate, busiest first, Swift names demangled."""
    text = run(["callgrind_annotate", f"--inclusive={'yes' if inclusive else 'no'}", "--threshold=100", out_file],
               capture_output=True).stdout
    swift = os.environ.get("SWIFT", "swift")
    try:
        text = run([swift, "demangle", "--simplified"], input=text, capture_output=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pass
    rows = []
    for line in text.splitlines():
        m = re.match(r"\s*([\d,]+)\s+\(\s*[\d.]+%\)\s+(.*)$", line)
        if not m or "PROGRAM TOTALS" in line:
            continue
        # "file:function [object]" → function.
        where = re.sub(r"\s*\[[^\]]*\]\s*$", "", m.group(2))
        function = where.split(":", 1)[1] if ":" in where and not where.startswith("???") else where
        rows.append((int(m.group(1).replace(",", "")), function.replace("???:", "").strip()))
    return rows


def committed(figure, name, update_target):
    """The committed figure: the first number of the file's first line."""
    try:
        with open(figure, encoding="utf-8") as f:
            return float(f.readline().split()[0])
    except (OSError, ValueError, IndexError):
        raise SystemExit(f"{name}: no committed figure at {os.path.relpath(figure, ROOT)}; "
                         f"run `make {update_target}` to record one")


def git(*args):
    try:
        return run(["git", *args], capture_output=True, cwd=ROOT).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "?"


def versions():
    """valgrind's and swift's version lines, for the figure file's comment."""
    valgrind = run(["valgrind", "--version"], capture_output=True).stdout.strip()
    swift = run([os.environ.get("SWIFT", "swift"), "--version"], stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT).stdout.splitlines()[0]
    return valgrind, swift
