"""What the callgrind gates share (scripts/callgrind-token.py, scripts/callgrind-engine.py,
scripts/callgrind-wire.py): running commands, reading callgrind_annotate's table with Swift names demangled, the
committed figure (written, read, judged), git."""
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


def write_figure(figure, first_line, comments, targets, tolerance):
    """Writes a committed figure file: `first_line` (its number first), `comments`, then how it was recorded and
    which make targets check and re-record it (`targets`: (check, update))."""
    valgrind, swift = versions()
    with open(figure + ".tmp", "w", encoding="utf-8") as f:
        f.write(first_line + "\n")
        for comment in comments:
            f.write(f"# {comment}\n")
        f.write(f"# callgrind ({valgrind}); recorded at {git('rev-parse', '--short', 'HEAD')} with {swift}.\n")
        f.write(f"# `make {targets[0]}` fails beyond ±{tolerance:g}%; `make {targets[1]}` re-records it.\n")
    os.replace(figure + ".tmp", figure)
    print(f"wrote {os.path.relpath(figure, ROOT)}")


def judge_figure(value, figure, what, unit, targets, tolerance):
    """Prints whether `value` is within `tolerance` percent of the committed figure; returns False if not."""
    reference = committed(figure, targets[0], targets[1])
    change = (value - reference) / reference * 100
    verdict = f"{value:,.1f} vs committed {reference:,.1f} ({change:+.2f}%, allowed ±{tolerance:g}%)"
    if abs(change) <= tolerance:
        print(f"{targets[0]} passed: {what}: {verdict}")
        return True
    direction = "more" if change > 0 else "fewer"
    print(f"{targets[0]} FAILED: {what} takes {direction} instructions per {unit}: {verdict}.")
    print(f"If the change is intended, re-record with `make {targets[1]}` and commit "
          f"{os.path.relpath(figure, ROOT)}.")
    return False
