#!/usr/bin/env python3
"""make scale-serve: `fanout serve million --workers 2` against `fanout run million`, side by side, in one session.

1. `fanout run million --clock virtual --duration 1 --workers 2`, before and after serve (the mean of the two): when
   its population is built (the first progress line's time minus the run time it shows), its peak resident memory
   (`/usr/bin/time -v`), its wall time.
2. `fanout serve million --workers 2 --h2c --state full`: when it listens (the "listening on" line), resident memory
   while serving (sampled each second from /proc), h2load pushing to the population's tokens for --seconds
   (tokens read from both loops' parts of population.jsonl), then SIGTERM: the time until it has exited with every
   file written (state.jsonl in full), its peak resident memory over the whole life, the files' sizes.

The ratios are of the same session (the machine is shared: figures from different sessions do not compare). The
report goes to reports/benchmarks/scale-serve-<date>.md; exit 1 when a target is missed (listening within 1.5× the
run's build, peak RSS within 1.25× the run's, shutdown within 30 s). The run folders (GBs) go under --work and are
removed unless --keep.

    scripts/scale-serve.py [--binary .build/release/fanout] [--seconds 60] [--work .build/scale-serve] [--keep]
"""
import argparse
import datetime
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time


class Timed:
    """A process under /usr/bin/time -v whose stderr lines are timestamped as they arrive."""

    def __init__(self, command, err_path):
        self.started = time.monotonic()
        self.lines = []  # (seconds since start, text)
        self.err_path = err_path
        self.process = subprocess.Popen(["/usr/bin/time", "-v"] + command, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.PIPE, text=True, bufsize=1)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        with open(self.err_path, "w") as log:
            for line in self.process.stderr:
                t = time.monotonic() - self.started
                self.lines.append((t, line.rstrip("\n")))
                log.write(f"{t:9.3f} {line}")

    def first(self, pattern, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for t, text in list(self.lines):
                m = re.search(pattern, text)
                if m:
                    return t, m
            if self.process.poll() is not None:
                break
            time.sleep(0.05)
        sys.exit(f"no line matching {pattern!r}; see {self.err_path}")

    def child_pid(self):
        """The fanout process under /usr/bin/time."""
        for _ in range(100):
            try:
                with open(f"/proc/{self.process.pid}/task/{self.process.pid}/children") as f:
                    children = f.read().split()
                if children:
                    return int(children[0])
            except OSError:
                pass
            time.sleep(0.05)
        sys.exit("fanout did not start under /usr/bin/time")

    def wait(self, timeout):
        code = self.process.wait(timeout=timeout)
        self.reader.join(timeout=10)
        return code, time.monotonic() - self.started

    def peak_rss_bytes(self):
        for _, text in self.lines:
            m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", text)
            if m:
                return int(m.group(1)) * 1024
        sys.exit(f"no peak resident memory in {self.err_path}")


def rss_bytes(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            m = re.search(r"VmRSS:\s+(\d+) kB", f.read())
        return int(m.group(1)) * 1024 if m else 0
    except OSError:
        return 0


def tokens_from(population, count):
    """`count` com.example.scores update tokens: half from the start of population.jsonl (loop 0's part), half
    from its middle on (loop 1's), without reading the whole file."""
    pattern = re.compile(r'"app": "com\.example\.scores".*?"token": "([0-9a-f]+)"')
    tokens = []
    size = os.path.getsize(population)
    with open(population) as f:
        for offset in (0, size // 2):
            f.seek(offset)
            if offset:
                f.readline()
            found = 0
            for line in f:
                m = pattern.search(line)
                if m:
                    tokens.append(m.group(1))
                    found += 1
                    if found == count // 2:
                        break
    return tokens


def gib(n):
    return f"{n / 2**30:.2f} GiB"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--binary", default=".build/release/fanout")
    parser.add_argument("--scenario", default="million")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seconds", type=int, default=60, help="h2load's pushes")
    parser.add_argument("--connections", type=int, default=8)
    parser.add_argument("--streams", type=int, default=64)
    parser.add_argument("--tokens", type=int, default=200000)
    parser.add_argument("--work", default=".build/scale-serve")
    parser.add_argument("--keep", action="store_true", help="keep the run folders")
    parser.add_argument("--out", default=f"reports/benchmarks/scale-serve-{datetime.date.today()}.md")
    args = parser.parse_args()
    if not os.path.exists("/usr/bin/time"):
        sys.exit("needs /usr/bin/time (apt-get install time)")
    shutil.rmtree(args.work, ignore_errors=True)
    os.makedirs(args.work)
    work = os.path.abspath(args.work)

    # 1. The run engine's population: build time and peak memory (again after serve: the mean of the two brackets
    # serve's figures on a machine whose load changes from minute to minute).
    run_command = [args.binary, "run", args.scenario, "--clock", "virtual", "--duration", "1", "--workers",
                   str(args.workers), "--out", f"{work}/run"]

    def run_once(label):
        print(label, " ".join(run_command), flush=True)
        run = Timed(run_command, f"{work}/run.err")
        t, m = run.first(r"^\s*([0-9.]+)s\s", timeout=600)
        ready = t - float(m.group(1))
        code, wall = run.wait(timeout=600)
        if code != 0:
            sys.exit(f"fanout run exited {code}: see {work}/run.err")
        shutil.rmtree(f"{work}/run", ignore_errors=True)
        return ready, run.peak_rss_bytes(), wall

    runs = [run_once("1/3")]

    # 2. serve: listening, serving under h2load, shutdown.
    serve_command = [args.binary, "serve", args.scenario, "--workers", str(args.workers), "--h2c", "--listen",
                     "127.0.0.1:0", "--state", "full", "--out", f"{work}/serve"]
    print("2/3", " ".join(serve_command), flush=True)
    serve = Timed(serve_command, f"{work}/serve.err")
    pid = serve.child_pid()
    building_peak = 0
    while not any("listening on" in text for _, text in serve.lines):
        building_peak = max(building_peak, rss_bytes(pid))
        if serve.process.poll() is not None:
            sys.exit(f"fanout serve exited: see {work}/serve.err")
        time.sleep(0.2)
    listening, m = serve.first(r"listening on 127\.0\.0\.1:(\d+)", timeout=1)
    port = int(m.group(1))
    tokens = tokens_from(f"{work}/serve/population.jsonl", args.tokens)
    uris = f"{work}/uris.txt"
    with open(uris, "w") as f:
        for token in tokens:
            f.write(f"http://127.0.0.1:{port}/3/device/{token}\n")
    now = int(time.time())
    payload = json.dumps({"aps": {"event": "update", "timestamp": now + 60, "relevance-score": 75,
                                  "stale-date": now + 3600, "content-state": {
        "home": 2, "away": 1, "clock": "81:00", "period": "2nd half", "winProbability": 0.71, "final": False,
        "lastEvent": "Goal! 81' header from a corner, assisted by the captain"}}})
    body = f"{work}/payload.json"
    with open(body, "w") as f:
        f.write(payload)
    h2load_command = ["h2load", "-D", str(args.seconds), "-c", str(args.connections), "-m", str(args.streams),
                      "-t", "1", "-d", body, "-H", "apns-push-type: liveactivity", "-H", "apns-priority: 10",
                      "-H", "apns-topic: com.example.scores.push-type.liveactivity", "-i", uris]
    print("   ", " ".join(h2load_command[:12]), "...", flush=True)
    load = subprocess.Popen(h2load_command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    serving_peak = 0
    while load.poll() is None:
        serving_peak = max(serving_peak, rss_bytes(pid))
        time.sleep(1)
    h2out = load.stdout.read()
    serving_peak = max(serving_peak, rss_bytes(pid))
    requests = re.search(r"requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded", h2out)
    rate = re.search(r"finished in [^,]+, ([0-9.]+) req/s", h2out)
    statuses = re.search(r"status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx", h2out)
    if not (requests and rate and statuses):
        sys.exit("h2load: " + h2out)
    stop = time.monotonic()
    os.kill(pid, signal.SIGTERM)
    shutdown_peak = 0
    while serve.process.poll() is None and time.monotonic() - stop < 600:
        shutdown_peak = max(shutdown_peak, rss_bytes(pid))
        time.sleep(0.2)
    code, serve_wall = serve.wait(timeout=600)
    shutdown = time.monotonic() - stop
    if code != 0:
        sys.exit(f"fanout serve exited {code}: see {work}/serve.err")
    serve_peak = serve.peak_rss_bytes()
    sizes = {name: os.path.getsize(f"{work}/serve/{name}") for name in
             ["population.jsonl", "rotated-tokens.jsonl", "state.jsonl"]}
    with open(f"{work}/serve/summary.json") as f:
        summary = json.load(f)
    with open(f"{work}/serve/state.jsonl", "rb") as f:
        f.seek(-4096, os.SEEK_END)
        totals = json.loads(f.read().splitlines()[-1])["totals"]
    if not args.keep:
        shutil.rmtree(f"{work}/serve", ignore_errors=True)

    runs.append(run_once("3/3"))
    run_ready = sum(r[0] for r in runs) / len(runs)
    run_peak = sum(r[1] for r in runs) / len(runs)
    run_wall = sum(r[2] for r in runs) / len(runs)
    ready_ratio = listening / run_ready
    peak_ratio = serve_peak / run_peak
    targets = [("listening ≤ 1.5× the run's build", ready_ratio <= 1.5), ("peak RSS ≤ 1.25× the run's",
               peak_ratio <= 1.25), ("shutdown ≤ 30 s", shutdown <= 30)]
    revision = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True,
                           text=True).stdout.strip()
    lines = [
        f"# fanout serve {args.scenario} against fanout run {args.scenario} — {datetime.date.today()}", "",
        f"Commit {revision}{' (uncommitted changes)' if dirty else ''}, `make scale-serve` "
        f"(`scripts/scale-serve.py --seconds {args.seconds}`); {os.cpu_count()} cores, load "
        f"{open('/proc/loadavg').read().split()[0]} at the end (a shared machine: compare the ratios, measured "
        "in one session).", "",
        f"- run: `{' '.join(run_command).replace(work, '$WORK')}`",
        f"- serve: `{' '.join(serve_command).replace(work, '$WORK')}`, then "
        f"`h2load -D {args.seconds} -c {args.connections} -m {args.streams} -t 1` POSTing a {len(payload)}-byte "
        f"update to {len(tokens):,} com.example.scores tokens of population.jsonl (both loops'), then SIGTERM.", "",
        "fanout run ran before and after serve; its column is the mean of the two (each in brackets).", "",
        "| | fanout run (virtual, 1 s) | fanout serve | serve / run | target |",
        "|---|---:|---:|---:|---|",
        f"| population built / listening | {run_ready:.1f} s ({runs[0][0]:.1f}, {runs[1][0]:.1f}) | "
        f"{listening:.1f} s | {ready_ratio:.2f} | ≤ 1.5 |",
        f"| peak resident memory (`time -v`) | {gib(run_peak)} ({gib(runs[0][1])}, {gib(runs[1][1])}) | "
        f"{gib(serve_peak)} | {peak_ratio:.2f} | ≤ 1.25 |",
        f"| resident: building / serving / shutting down (max of /proc samples) | | {gib(building_peak)} / "
        f"{gib(serving_peak)} / {gib(shutdown_peak)} | | |",
        f"| SIGTERM → exit, every file written | | {shutdown:.1f} s | | ≤ 30 s |",
        f"| wall time | {run_wall:.1f} s | {serve_wall:.1f} s | | |",
        f"| population.jsonl / rotated-tokens.jsonl / state.jsonl | | {sizes['population.jsonl'] / 1e9:.2f} GB / "
        f"{sizes['rotated-tokens.jsonl'] / 1e6:.1f} MB / {sizes['state.jsonl'] / 1e9:.2f} GB | | |", "",
        f"h2load: {int(requests.group(1)):,} requests, {int(requests.group(4)):,} succeeded, "
        f"{float(rate.group(1)):,.0f} req/s; {int(statuses.group(1)):,} 2xx, {int(statuses.group(3)):,} 4xx (h2load "
        f"counts what completed within its {args.seconds} s; the up to {args.connections * args.streams} requests in "
        "flight at its end are answered too, and counted by serve). "
        f"fanout serve counted {summary['requests']['total']:,} requests ({summary['requests']['acceptedPushes']:,} "
        f"pushes accepted), {summary['accounting']['deliveries']:,} deliveries; state.jsonl's totals: "
        f"{totals['pushes']:,} pushes, {totals['deliveries']:,} deliveries.", "",
        "Targets: " + "; ".join(f"{name}: {'met' if ok else '**missed**'}" for name, ok in targets) + ".",
    ]
    text = "\n".join(lines) + "\n"
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        f.write(text)
    print(text)
    sys.exit(0 if all(ok for _, ok in targets) else 1)


if __name__ == "__main__":
    main()
