#!/usr/bin/env python3
"""make push-bench: `fanout push` against h2load, side by side, on the same servers (issue 21's measured criteria).

Throughput (the gate): both clients, one thread each, with the same connections and streams, at saturation against
nghttpd (nghttp2's C server answering an empty static file at every token path, one thread) and against `fanout
serve --workers 1` (h2c, the same scenario, seed and devices as push, so every token exists). Rounds alternate
(h2load, push, h2load, …) so a noisy neighbour hurts both; medians, their ratio and `uptime` load are printed and
written to reports/benchmarks/push-bench-<date>.md. h2load sends one body to the scenario's token paths in turn;
fanout push sends the scenario's schedule (`--rate-scale 1000`: far above what either side can do, so it runs
saturated, exit 3 expected), every request its own token, `apns-id` and encoded body. Exit 1 when push's median
is below --min-ratio (0.9) of h2load's against either server.

Latency under stalls (--stall): `fanout serve --faults stall-every=10s:1s --seed N` (no answer for 1 s out of every
10), then h2load `--rps R` (-c 1: R per connection is the total rate) and `fanout push --rate-scale X` at about the
same rate for --stall-seconds each, each against its own fresh server (so both see the same stall windows); the
percentiles of both (h2load's from its per-request log: send → answer; push's from the intended time). Also at the
same rate without the fault. Written to --out.

    scripts/push-bench.py [--binary .build/release/fanout] [--rounds 3] [--min-ratio 0.9]
    scripts/push-bench.py --stall --rate 100000 [--stall-seconds 40] [--out reports/benchmarks/push-stall.md]
"""
import argparse
import datetime
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time

SCENARIO = "smoke"
DEVICES = 1000
SEED = 7
STREAMS = 100
# smoke with --devices 1000 offers about 335 requests/s per unit of --rate-scale (670,397 in 2 s at 1000).
PUSH_PER_SCALE = 335.2


def load():
    return open("/proc/loadavg").read().split()[0]


def wait_for_port(err_path, process):
    deadline = time.time() + 120
    while time.time() < deadline:
        with open(err_path) as f:
            m = re.search(r"listening on 127\.0\.0\.1:(\d+)", f.read())
        if m:
            return int(m.group(1))
        if process.poll() is not None:
            break
        time.sleep(0.05)
    sys.exit("fanout serve did not start: " + open(err_path).read())


class Serve:
    """fanout serve smoke, h2c, one loop (optionally with faults), on a free port."""

    def __init__(self, binary, work, name, faults=None):
        self.folder = f"{work}/serve-{name}"
        err = f"{work}/serve-{name}.err"
        command = [binary, "serve", SCENARIO, "--devices", str(DEVICES), "--seed", str(SEED), "--workers", "1",
                   "--h2c", "--listen", "127.0.0.1:0", "--out", self.folder]
        if faults:
            command += ["--faults", faults]
        self.command = " ".join(command)
        with open(err, "w") as e:
            self.process = subprocess.Popen(command, stderr=e, stdout=subprocess.DEVNULL)
        self.port = wait_for_port(err, self.process)

    def tokens(self):
        with open(f"{self.folder}/population.jsonl") as f:
            return [json.loads(line)["token"] for line in f]

    def stop(self):
        self.process.send_signal(signal.SIGTERM)
        self.process.wait(timeout=120)


def h2load(uris, body, requests=None, rps=None, seconds=None, log=None):
    command = ["h2load", "-c", "1", "-m", str(STREAMS), "-t", "1", "-d", body,
               "-H", "apns-push-type: liveactivity", "-H", "apns-priority: 10",
               "-H", "apns-topic: com.example.scores.push-type.liveactivity", "-i", uris]
    command += ["-n", str(requests)] if requests else []
    command += ["--rps", str(rps), "-D", str(seconds)] if rps else []
    command += ["--log-file", log] if log else []
    out = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    rate = float(re.search(r"finished in [^,]+, ([0-9.]+) req/s", out).group(1))
    done = re.search(r"requests: .* (\d+) succeeded, (\d+) failed, (\d+) errored", out)
    result = {"rate": rate, "succeeded": int(done.group(1)), "failed": int(done.group(2)),
              "errored": int(done.group(3)), "command": " ".join(command)}
    if log:
        # h2load's per-request log: start (µs since the epoch), status, µs from the request's send to its answer.
        latencies = sorted(int(line.split("\t")[2]) * 1000 for line in open(log) if line.strip())
        result["latency"] = percentiles(latencies)
    return result


def percentiles(sorted_nanos):
    n = len(sorted_nanos)

    def at(p):
        return sorted_nanos[min(n - 1, max(0, int(-(-p * n // 100)) - 1))]
    return {"count": n, "p50Nanos": at(50), "p90Nanos": at(90), "p99Nanos": at(99), "p999Nanos": at(99.9),
            "maxNanos": sorted_nanos[-1]}


def push(binary, port, scale, seconds, folder):
    command = [binary, "push", f"http://127.0.0.1:{port}", SCENARIO, "--devices", str(DEVICES), "--seed", str(SEED),
               "--streams", str(STREAMS), "--rate-scale", str(scale), "--duration", str(seconds), "--drain", "300",
               "--out", folder]
    run = subprocess.run(command, capture_output=True, text=True)
    if run.returncode not in (0, 3):
        sys.exit(f"fanout push exited {run.returncode}: {run.stderr[-2000:]}")
    with open(f"{folder}/summary.json") as f:
        s = json.load(f)
    r = s["requests"]
    if not s["identity"]["holds"] or r["answered"] != r["sent"]:
        sys.exit(f"fanout push: not every request was answered: {r}")
    return {"rate": r["answeredPerSecond"], "answered": r["answered"], "exit": run.returncode,
            "latency": s["latency"], "scheduleLag": s["scheduleLag"], "command": " ".join(command)}


def write_body(work):
    # A ~250-byte Live Activity update, as a score push is (h2load sends this one body every time).
    now = int(time.time())
    payload = json.dumps({"aps": {"event": "update", "timestamp": now + 60, "relevance-score": 75,
                                  "stale-date": now + 3600, "content-state": {
        "home": 2, "away": 1, "clock": "81:00", "period": "2nd half", "winProbability": 0.71, "final": False,
        "lastEvent": "Goal! 81' header from a corner, assisted by the captain"}}})
    body = f"{work}/payload.json"
    with open(body, "w") as f:
        f.write(payload)
    return body


def uri_file(path, port, tokens):
    with open(path, "w") as f:
        for t in tokens:
            f.write(f"http://127.0.0.1:{port}/3/device/{t}\n")
    return path


def revision():
    rev = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True,
                           text=True).stdout.strip()
    return rev + (" (uncommitted changes)" if dirty else "")


def ms(nanos):
    return f"{nanos / 1e6:,.2f}"


def throughput(args, work, body):
    # nghttpd answers every token path with an empty file: one file per token of the population.
    probe = Serve(args.binary, work, "probe")
    tokens = probe.tokens()
    probe.stop()
    root = f"{work}/htdocs"
    os.makedirs(f"{root}/3/device")
    for t in tokens:
        open(f"{root}/3/device/{t}", "w").close()
    # nghttpd answering 404 to every path (no file): the same cost whatever the path, so neither client's path
    # order makes the server cheaper or dearer, the closest to client against client on one machine.
    empty = f"{work}/empty"
    os.makedirs(empty)
    results, loads = {}, []
    servers = ["nghttpd", "nghttpd 404", "fanout serve"]
    for server in servers:
        if server.startswith("nghttpd"):
            port = probe.port + 7 if probe.port < 65000 else probe.port - 7
            process = subprocess.Popen(["nghttpd", "--no-tls", "-n", "1", "-d",
                                        root if server == "nghttpd" else empty, str(port)],
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(0.5)
            stop = lambda: (process.send_signal(signal.SIGTERM), process.wait())  # noqa: E731
        else:
            serve = Serve(args.binary, work, "bench")
            port = serve.port
            stop = serve.stop
        uris = uri_file(f"{work}/uris-{port}.txt", port, tokens)
        one = uri_file(f"{work}/one-{port}.txt", port, tokens[:1])
        results[server] = {"h2load": [], "push": [], "h2load one URL": []}
        for k in range(args.rounds):
            loads.append(load())
            # fanout serve applies every push on its devices: fewer requests against it (~200,000 each).
            share = 1 if server.startswith("nghttpd") else 1 / 3
            results[server]["h2load"].append(h2load(uris, body, requests=int(args.requests * share)))
            if server.startswith("nghttpd"):
                # h2load's best case: one path, so one file and one HPACK-indexed :path (not a distinct token each).
                results[server]["h2load one URL"].append(h2load(one, body, requests=args.requests))
            loads.append(load())
            results[server]["push"].append(
                push(args.binary, port, 1000, round(args.push_seconds * share, 2), f"{work}/push-{server}-{k}"))
            print(f"{server} round {k + 1}: h2load {results[server]['h2load'][-1]['rate']:,.0f} req/s, "
                  f"push {results[server]['push'][-1]['rate']:,.0f} req/s (load {loads[-1]})", flush=True)
        stop()

    lines = [f"# fanout push against h2load — {datetime.date.today()}", "",
             f"Commit {revision()}, `make push-bench` ({args.rounds} rounds, alternating h2load and push; "
             f"{os.cpu_count()} cores; `uptime` load {min(loads)}–{max(loads)} before the runs).", "",
             f"Both clients: 1 connection, {STREAMS} streams, one thread, h2c on 127.0.0.1. h2load: `-n "
             f"{args.requests}` (a third of that against fanout serve) POSTs of one {os.path.getsize(body)}-byte "
             f"body with APNs headers to the {len(tokens)} token paths in turn. fanout push: `{SCENARIO} --devices "
             f"{DEVICES} --rate-scale 1000 --duration {args.push_seconds}` (a third of that against fanout serve; "
             f"about {PUSH_PER_SCALE * 1000 * args.push_seconds:,.0f} requests offered far faster than either side "
             "answers: saturated, exit 3, as meant), every request its own token, `apns-id` and encoded body; "
             "requests/s = answered / the run from its first request to its last answer. nghttpd: `nghttpd --no-tls "
             "-n 1 -d HTDOCS` (an empty file at every token path); nghttpd 404: the same with an empty HTDOCS "
             "(every request answered 404, the same cost whatever its path); fanout serve: "
             "`fanout serve smoke --devices "
             f"{DEVICES} --seed {SEED} --workers 1 --h2c`.", "",
             "| server | h2load median req/s | rounds | fanout push median req/s | rounds | push / h2load |",
             "|---|---:|---|---:|---|---:|"]
    failed = False
    for server in servers:
        h = [r["rate"] for r in results[server]["h2load"]]
        p = [r["rate"] for r in results[server]["push"]]
        ratio = statistics.median(p) / statistics.median(h)
        failed = failed or ratio < args.min_ratio
        lines.append(f"| {server} | {statistics.median(h):,.0f} | {' · '.join(f'{x:,.0f}' for x in h)} | "
                     f"{statistics.median(p):,.0f} | {' · '.join(f'{x:,.0f}' for x in p)} | {ratio:.0%} |")
    for server in ["nghttpd", "nghttpd 404"]:
        h1 = [r["rate"] for r in results[server]["h2load one URL"]]
        p1 = statistics.median(r["rate"] for r in results[server]["push"])
        lines += ["", f"h2load against {server} with one URL (one token path for every request, its best case, "
                  f"not the same work): median {statistics.median(h1):,.0f} req/s "
                  f"({' · '.join(f'{x:,.0f}' for x in h1)}); "
                  f"push / that: {p1 / statistics.median(h1):.0%} (not gated)."]
    lines += ["", f"Gate: push / h2load (the same token paths) ≥ {args.min_ratio:.0%} against each server: "
              f"{'**not met**' if failed else 'met'}.", ""]
    text = "\n".join(lines)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    return 1 if failed else 0


def stall(args, work, body):
    scale = round(args.rate / PUSH_PER_SCALE, 1)
    rows, loads, commands = [], [], []
    for faults in [None, "stall-every=10s:1s"]:
        for tool in ["h2load", "push"]:
            serve = Serve(args.binary, work, f"{tool}-{'stall' if faults else 'plain'}", faults)
            commands.append(serve.command.replace(work, "WORK"))
            loads.append(load())
            if tool == "h2load":
                uris = uri_file(f"{work}/uris-{serve.port}.txt", serve.port, serve.tokens())
                r = h2load(uris, body, rps=args.rate, seconds=args.stall_seconds, log=f"{work}/h2load-{faults}.log")
            else:
                r = push(args.binary, serve.port, scale, args.stall_seconds, f"{work}/push-stall-{faults}")
            serve.stop()
            with open(f"{serve.folder}/summary.json") as f:
                served = json.load(f)
            stalled = served.get("faults", {}).get("injected", {}).get("stall", 0)
            commands.append(r["command"].replace(work, "WORK"))
            rows.append((faults or "none", tool, r, stalled))
            lat = r["latency"]
            print(f"{faults or 'none'} {tool}: {r['rate']:,.0f} req/s, p50 {ms(lat['p50Nanos'])} ms, "
                  f"p99 {ms(lat['p99Nanos'])} ms, max {ms(lat['maxNanos'])} ms (load {loads[-1]})", flush=True)
    lines = [f"## Latency at {args.rate:,} requests/s, with and without stalls", "",
             f"Commit {revision()}, `scripts/push-bench.py --stall --rate {args.rate} --stall-seconds "
             f"{args.stall_seconds}`; `uptime` load {min(loads)}–{max(loads)} before the runs. Each run against its "
             "own fresh `fanout serve` (so each sees the stall windows [10 s·k, 10 s·k + 1 s) from the same start); "
             f"1 connection, {STREAMS} streams, h2c. h2load `--rps {args.rate} -c 1` (per connection: with one, the "
             f"total); fanout push `--rate-scale {scale}` (smoke's schedule: about {args.rate:,} requests/s in bursts "
             "of one event's followers). h2load's latency: its log, the request's send → its answer; push's: the "
             "intended time → the answer.", "",
             "| faults | client | answered req/s | answers held by the stall | p50 ms | p90 ms | p99 ms | p99.9 ms | "
             "max ms |", "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for faults, tool, r, stalled in rows:
        lat = r["latency"]
        lines.append(f"| {faults} | {'h2load' if tool == 'h2load' else 'fanout push'} | {r['rate']:,.0f} | "
                     f"{stalled:,} | {ms(lat['p50Nanos'])} | {ms(lat['p90Nanos'])} | {ms(lat['p99Nanos'])} | "
                     f"{ms(lat['p999Nanos'])} | {ms(lat['maxNanos'])} |")
    lines += ["", "Commands (WORK: the script's temporary folder):", "", "```"] + commands + ["```", ""]
    text = "\n".join(lines)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    return 0


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--binary", default=".build/release/fanout")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--requests", type=int, default=600000, help="h2load's requests per round")
    parser.add_argument("--push-seconds", type=float, default=2, help="push's schedule per round, at --rate-scale 1000")
    parser.add_argument("--min-ratio", type=float, default=0.9)
    parser.add_argument("--stall", action="store_true", help="latency at --rate with and without stalls instead")
    parser.add_argument("--rate", type=int, default=100000)
    parser.add_argument("--stall-seconds", type=int, default=40)
    parser.add_argument("--out")
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="push-bench-")
    body = write_body(work)
    sys.exit(stall(args, work, body) if args.stall else throughput(args, work, body))


if __name__ == "__main__":
    main()
