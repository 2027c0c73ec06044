#!/usr/bin/env python3
"""make push-bench: `fanout push` against h2load, side by side, on the same servers (issue 21's measured criteria).

Throughput (the gate): both clients, one thread each, with the same connections and streams, at saturation against
nghttpd (nghttp2's C server answering an empty static file at every token path, one thread; and answering 404 to
every path) and against `fanout serve --workers 1` (h2c). Rounds alternate (h2load, push, h2load, …) so a noisy
neighbour hurts both; medians, their ratio and `uptime` load are printed and written to --out. Exit 1 when push's
median is below --min-ratio (0.9) of h2load's against any server.

- nghttpd rows: smoke's population (`--devices 1000`); h2load sends one body to its token paths in turn; fanout
  push sends smoke's schedule (`--rate-scale 1000`: far above what either side can do, so it runs saturated, exit 3
  expected), every request its own token, `apns-id` and encoded body.
- fanout serve row: both clients make serve do the same work per request, one token push applied to one activity.
  The scenario is scripts/push-bench.json (one app and one content-state schema, token pushes only, no faults; its
  200,000 activities on 50,000 devices), and each client run gets a fresh `fanout serve push-bench.json --workers 1
  --h2c --state none` (the same seed, devices and tokens, the same starting state). h2load sends each of the
  200,000 token paths once (`-n` = the token count, the `-i` list walked once, shuffled with a fixed seed: push's
  requests reach activities all over serve's store, an event's followers) a valid update of that schema, with one
  fixed `apns-id` (serve checks and echoes a request's id, as it does push's); fanout push sends the scenario's
  schedule saturated (`--rate-scale 1000 --duration 0.2`: ~200,000 pushes, 100 followers of each event), every
  update a newer timestamp than the last. Serve's summary must count every request answered 200 and every one
  applied (else the script stops: not the same work), and the report shows those counts per run. h2load with the
  token paths in population order (serve walks its arrays in sequence: cheaper) is run and shown, not gated.

Over TLS with several connections (--tls-connections 2,8): both clients with N connections × 100 streams, one
thread, TLS (ALPN h2) to nghttpd with TLS answering 404 to every path, for each N; rounds alternate; exit 1 when
push's median is below --min-ratio of h2load's at any N.

Latency under stalls (--stall): `fanout serve --faults stall-every=10s:1s --seed N` (no answer for 1 s out of every
10), then h2load `--rps R` (-c 1: R per connection is the total rate) and `fanout push --rate-scale X` at about the
same rate for --stall-seconds each, each against its own fresh server (so both see the same stall windows); the
percentiles of both (h2load's from its per-request log: send → answer; push's from the intended time). Also at the
same rate without the fault. Written to --out.

    scripts/push-bench.py [--binary .build/release/fanout] [--rounds 9] [--min-ratio 0.9]
    scripts/push-bench.py --stall --rate 100000 [--stall-seconds 40] [--out reports/benchmarks/push-stall.md]
"""
import argparse
import datetime
import json
import os
import random
import re
import shutil
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
# The fanout serve row's scenario: every request one applied token push, for both clients.
BENCH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "push-bench.json")
# fanout push's schedule against it at --rate-scale 1000: 10,000 events/s of 100 pushes each, ~200,000 in 0.2 s.
BENCH_PUSH_SECONDS = 0.2
# h2load's apns-id against fanout serve: one canonical id (serve checks and echoes it, as it does push's own ids).
BENCH_APNS_ID = "7d6a1e2c-3b4f-4a5e-8c9d-0e1f2a3b4c5d"
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
    """fanout serve smoke (or push-bench.json), h2c, one loop (optionally with faults), on a free port."""

    def __init__(self, binary, work, name, faults=None, bench=False):
        self.folder = f"{work}/serve-{name}"
        err = f"{work}/serve-{name}.err"
        scenario = [BENCH, "--state", "none"] if bench else [SCENARIO, "--devices", str(DEVICES)]
        command = [binary, "serve"] + scenario + ["--seed", str(SEED), "--workers", "1", "--h2c", "--listen",
                                                  "127.0.0.1:0", "--out", self.folder]
        if faults:
            command += ["--faults", faults]
        self.command = " ".join(command)
        with open(err, "w") as e:
            self.process = subprocess.Popen(command, stderr=e, stdout=subprocess.DEVNULL)
        self.port = wait_for_port(err, self.process)

    def tokens(self):
        with open(f"{self.folder}/population.jsonl") as f:
            return [json.loads(line)["token"] for line in f]

    def cpu_seconds(self):
        """The process's CPU time so far (user + system, /proc/PID/stat)."""
        with open(f"/proc/{self.process.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self):
        self.process.send_signal(signal.SIGTERM)
        self.process.wait(timeout=120)

    def counts(self):
        """What serve counted (after stop): requests, answered 200, updates applied, deliveries, bytes received."""
        with open(f"{self.folder}/summary.json") as f:
            s = json.load(f)
        a = s["accounting"]
        if not (s["requests"]["identitiesHold"] and a["identitiesHold"]):
            sys.exit(f"fanout serve: an identity broke in {self.folder}/summary.json")
        return {"requests": s["requests"]["total"], "ok": s["requests"]["byStatus"].get("200", 0),
                "applied": a["outcomes"]["applied"], "deliveries": a["deliveries"],
                "bytesIn": s["connections"]["bytesIn"]}


def h2load(uris, body, requests=None, rps=None, seconds=None, log=None, apns_id=None, connections=1):
    command = ["h2load", "-c", str(connections), "-m", str(STREAMS), "-t", "1", "-d", body,
               "-H", "apns-push-type: liveactivity", "-H", "apns-priority: 10",
               "-H", "apns-topic: com.example.scores.push-type.liveactivity", "-i", uris]
    command += ["-H", f"apns-id: {apns_id}"] if apns_id else []
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


def push(binary, port, scale, seconds, folder, bench=False, connections=1, tls=False):
    scenario = [BENCH] if bench else [SCENARIO, "--devices", str(DEVICES)]
    target = [f"https://127.0.0.1:{port}", "--insecure"] if tls else [f"http://127.0.0.1:{port}"]
    command = [binary, "push"] + target[:1] + scenario + target[1:] + ["--connections", str(connections)] + [
        "--seed", str(SEED), "--streams", str(STREAMS), "--rate-scale", str(scale), "--duration", str(seconds),
        "--drain", "300", "--out", folder,
        # The whole schedule is queued at once (saturated): no queue bound nor request deadline may cut it short.
        "--max-queued", "10000000", "--request-timeout", "3600"]
    run = subprocess.run(command, capture_output=True, text=True)
    if run.returncode not in (0, 3):
        sys.exit(f"fanout push exited {run.returncode}: {run.stderr[-2000:]}")
    with open(f"{folder}/summary.json") as f:
        s = json.load(f)
    r = s["requests"]
    if not s["identity"]["holds"] or r["answered"] != r["sent"]:
        sys.exit(f"fanout push: not every request was answered: {r}")
    return {"rate": r["answeredPerSecond"], "answered": r["answered"], "sent": r["sent"], "exit": run.returncode,
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


def write_bench_body(work):
    # An update of push-bench.json's one schema (GameAttributes, strings of its stringBytes 12), in the key order
    # and compact form of fanout's own encoder, so it is about the size of push's bodies; its timestamp is newer
    # than the activities' start (serve's population starts with none: the first update of each is applied).
    now = int(time.time())
    payload = json.dumps({"aps": {"timestamp": now + 60, "event": "update", "content-state": {
        "home": 2, "away": 1, "clock": "81:00 minute", "period": "2nd half end", "winProbability": 0.71,
        "final": False, "lastEvent": "Goal! header"}, "stale-date": now + 3600, "relevance-score": 75}},
        separators=(",", ":"))
    body = f"{work}/bench-payload.json"
    with open(body, "w") as f:
        f.write(payload)
    return body


def uri_file(path, port, tokens, scheme="http"):
    with open(path, "w") as f:
        for t in tokens:
            f.write(f"{scheme}://127.0.0.1:{port}/3/device/{t}\n")
    return path


def rate_table(column, rows, min_ratio, show):
    """The table of both clients' medians and rounds per row (label → results), push's median over h2load's, and
    whether a row is below `min_ratio`."""
    lines = [f"| {column} | h2load median req/s | rounds | fanout push median req/s | rounds | push / h2load |",
             "|---|---:|---|---:|---|---:|"]
    failed = False
    for label, results in rows:
        h = [r["rate"] for r in results["h2load"]]
        p = [r["rate"] for r in results["push"]]
        ratio = statistics.median(p) / statistics.median(h)
        failed = failed or ratio < min_ratio
        lines.append(f"| {label} | {statistics.median(h):,.0f} | {' · '.join(f'{x:,.0f}' for x in h)} | "
                     f"{statistics.median(p):,.0f} | {' · '.join(f'{x:,.0f}' for x in p)} | {show(ratio)} |")
    return lines, failed


def tls_throughput(args, work, body):
    """--tls-connections N,M: both clients over TLS (ALPN h2) with N connections × 100 streams each, one thread,
    against nghttpd with TLS answering 404 to every path (one thread): rounds alternate h2load and push."""
    counts = [int(x) for x in args.tls_connections.split(",")]
    cert, key = f"{work}/cert.pem", f"{work}/key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                    "-keyout", key, "-out", cert, "-days", "1", "-subj", "/CN=localhost"],
                   check=True, capture_output=True)
    probe = Serve(args.binary, work, "probe")
    tokens = probe.tokens()
    probe.stop()
    empty = f"{work}/empty"
    os.makedirs(empty)
    port = probe.port + 7 if probe.port < 65000 else probe.port - 7
    nghttpd = subprocess.Popen(["nghttpd", "-n", "1", "-d", empty, str(port), key, cert],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.5)
    uris = uri_file(f"{work}/uris-tls.txt", port, tokens, scheme="https")
    results, loads = {}, []
    try:
        for n in counts:
            results[n] = {"h2load": [], "push": []}
            for k in range(args.rounds):
                loads.append(load())
                results[n]["h2load"].append(h2load(uris, body, requests=args.requests, connections=n))
                loads.append(load())
                results[n]["push"].append(push(args.binary, port, 1000, args.push_seconds,
                                               f"{work}/push-tls-{n}-{k}", connections=n, tls=True))
                print(f"TLS × {n} connections, round {k + 1}: h2load {results[n]['h2load'][-1]['rate']:,.0f} "
                      f"req/s, push {results[n]['push'][-1]['rate']:,.0f} req/s (load {loads[-1]})", flush=True)
    finally:
        nghttpd.send_signal(signal.SIGTERM)
        nghttpd.wait()
    lines = [f"# fanout push against h2load over TLS — {datetime.date.today()}", "",
             f"Commit {revision()}, `scripts/push-bench.py --tls-connections {args.tls_connections}` ({args.rounds} "
             f"rounds per row, alternating h2load and push; {os.cpu_count()} cores; `uptime` load "
             f"{min(loads)}–{max(loads)} before the runs).", "",
             f"Both clients: N connections × {STREAMS} streams, one thread, TLS (ALPN h2) to `nghttpd -n 1` on "
             "127.0.0.1 with a self-signed P-256 certificate and an empty document root (every request answered "
             f"404, the same cost whatever its path). h2load: `-n {args.requests} -c N -m {STREAMS} -t 1`, one "
             f"{os.path.getsize(body)}-byte body with APNs headers to smoke's {len(tokens)} token paths in turn; "
             f"fanout push: `https://… {SCENARIO} --devices {DEVICES} --connections N --insecure --rate-scale 1000 "
             f"--duration {args.push_seconds}` (saturated: exit 3, as meant), every request its own token, `apns-id` "
             "and encoded body. requests/s: h2load's (its whole run), fanout push's answered / the run from its "
             "first request to its last answer.", ""]
    table, failed = rate_table("connections", [(n, results[n]) for n in counts], args.min_ratio, lambda r: f"{r:.2f}")
    lines += table
    lines += ["", f"Gate: push's median at least {args.min_ratio:.0%} of h2load's at every connection count: "
              + ("**failed**." if failed else "passed.")]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    return 1 if failed else 0


def revision():
    rev = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True,
                           text=True).stdout.strip()
    return rev + (" (uncommitted changes)" if dirty else "")


def ms(nanos):
    return f"{nanos / 1e6:,.2f}"


def serve_round(args, work, bench_body, k, loads):
    """One round of the fanout serve row: h2load, push, then h2load with the tokens in population order (not
    gated), each against a fresh serve of push-bench.json."""
    row = {}
    for client in ["h2load", "push", "h2load in order"]:
        serve = Serve(args.binary, work, f"bench-{client.replace(' ', '-')}-{k}", bench=True)
        tokens = serve.tokens()
        loads.append(load())
        cpu = serve.cpu_seconds()
        if client.startswith("h2load"):
            if client == "h2load":
                # Shuffled (a fixed seed): push's requests reach activities all over serve's store (an event's
                # followers), not in the order serve built them, which walks its arrays in sequence.
                tokens = list(tokens)
                random.Random(SEED).shuffle(tokens)
            uris = uri_file(f"{work}/uris-bench-{k}.txt", serve.port, tokens)
            r = h2load(uris, bench_body, requests=len(tokens), apns_id=BENCH_APNS_ID)
            r["sent"] = len(tokens)
            answered = r["succeeded"]
        else:
            r = push(args.binary, serve.port, 1000, args.serve_push_seconds, f"{work}/push-bench-{k}", bench=True)
            answered = r["answered"]
        cpu = serve.cpu_seconds() - cpu
        serve.stop()
        c = serve.counts()
        # The same work per request for both: every request answered 200 and applied, one delivery each.
        if not (c["requests"] == c["ok"] == c["applied"] == c["deliveries"] == answered == r["sent"]):
            sys.exit(f"fanout serve under {client}: not every request answered 200 and applied once: sent "
                     f"{r['sent']}, answered {answered}, serve counted {c} ({serve.folder}/summary.json)")
        r["serve"] = c
        r["serveCpuMicros"] = cpu * 1e6 / max(1, c["requests"])
        r["tokens"] = len(tokens)
        row[client] = r
    return row


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
    bench_body = write_bench_body(work)
    results, loads = {}, []
    servers = ["nghttpd", "nghttpd 404", "fanout serve"]
    for server in servers:
        results[server] = {"h2load": [], "push": [], "h2load one URL": []}
        if server == "fanout serve":
            for k in range(args.rounds):
                row = serve_round(args, work, bench_body, k, loads)
                for client in row:
                    results[server].setdefault(client, []).append(row[client])
                print(f"{server} round {k + 1}: h2load {row['h2load']['rate']:,.0f} req/s, "
                      f"push {row['push']['rate']:,.0f} req/s (load {loads[-1]})", flush=True)
            continue
        port = probe.port + 7 if probe.port < 65000 else probe.port - 7
        process = subprocess.Popen(["nghttpd", "--no-tls", "-n", "1", "-d",
                                    root if server == "nghttpd" else empty, str(port)],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.5)
        uris = uri_file(f"{work}/uris-{port}.txt", port, tokens)
        one = uri_file(f"{work}/one-{port}.txt", port, tokens[:1])
        for k in range(args.rounds):
            loads.append(load())
            results[server]["h2load"].append(h2load(uris, body, requests=args.requests))
            # h2load's best case: one path, so one file and one HPACK-indexed :path (not a distinct token each).
            results[server]["h2load one URL"].append(h2load(one, body, requests=args.requests))
            loads.append(load())
            results[server]["push"].append(
                push(args.binary, port, 1000, args.push_seconds, f"{work}/push-{server}-{k}"))
            print(f"{server} round {k + 1}: h2load {results[server]['h2load'][-1]['rate']:,.0f} req/s, "
                  f"push {results[server]['push'][-1]['rate']:,.0f} req/s (load {loads[-1]})", flush=True)
        process.send_signal(signal.SIGTERM)
        process.wait()

    served = results["fanout serve"]
    lines = [f"# fanout push against h2load — {datetime.date.today()}", "",
             f"Commit {revision()}, `scripts/push-bench.py` ({args.rounds} rounds, alternating h2load and push; "
             f"{os.cpu_count()} cores; `uptime` load {min(loads)}–{max(loads)} before the runs).", "",
             f"Both clients: 1 connection, {STREAMS} streams, one thread, h2c on 127.0.0.1; requests/s: h2load's "
             "(its whole run), fanout push's answered / the run from its first request to its last answer.", "",
             f"- **nghttpd** rows: h2load `-n {args.requests}` POSTs of one {os.path.getsize(body)}-byte body with "
             f"APNs headers to smoke's {len(tokens)} token paths (`--devices {DEVICES}`) in turn; fanout push "
             f"`{SCENARIO} --devices {DEVICES} --rate-scale 1000 --duration {args.push_seconds}` (about "
             f"{PUSH_PER_SCALE * 1000 * args.push_seconds:,.0f} requests offered far faster than either side "
             "answers: saturated, exit 3, as meant), every request its own token, `apns-id` and encoded body. "
             "nghttpd: `nghttpd --no-tls -n 1 -d HTDOCS` (an empty file at every token path); nghttpd 404: the "
             "same with an empty HTDOCS (every request answered 404, the same cost whatever its path).",
             f"- **fanout serve** row: every request of both clients is one token push that serve answers 200 and "
             "applies to one activity. Scenario `scripts/push-bench.json` (one app, one content-state schema, token "
             f"pushes only, no faults; {served['h2load'][0]['tokens']:,} activities on 50,000 devices, seed {SEED}); "
             "a fresh `fanout serve scripts/push-bench.json --seed 7 --workers 1 --h2c --state none` for each "
             f"client run. h2load: `-n {served['h2load'][0]['tokens']}` (each token path once, the `-i` list walked "
             f"once, shuffled with seed {SEED}: push's requests reach activities all over the store) of one "
             f"{os.path.getsize(bench_body)}-byte update of that schema (`aps.timestamp` newer than the "
             "activities' start, content-state with the schema's fields), with one fixed `apns-id`; fanout push: "
             f"`scripts/push-bench.json --rate-scale 1000 --duration {args.serve_push_seconds}` (10,000 events/s of "
             "100 followers each, far above what serve answers: saturated, exit 3), every request its own token, "
             "`apns-id` and encoded body, each a newer timestamp for its activity. The script stops unless serve "
             "counted every request answered 200 and applied (table below).", ""]
    table, failed = rate_table("server", [(s, results[s]) for s in servers], args.min_ratio, lambda r: f"{r:.0%}")
    lines += table
    lines += ["", "What fanout serve counted in each run (its summary.json: requests, answered 200, updates "
              "applied by the devices, deliveries; bytes received per request, headers and body as sent) and its CPU "
              "time per request (user + system from /proc while the client ran, 10 ms ticks):", "",
              "| round | client | requests sent | req/s | serve: requests | answered 200 | applied | deliveries | "
              "bytes in / request | serve CPU µs / request |", "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for k in range(args.rounds):
        for client in ["h2load", "push", "h2load in order"]:
            r = served[client][k]
            c = r["serve"]
            lines.append(f"| {k + 1} | {'fanout push' if client == 'push' else client} | {r['sent']:,} | "
                         f"{r['rate']:,.0f} | {c['requests']:,} | {c['ok']:,} | {c['applied']:,} | "
                         f"{c['deliveries']:,} | {c['bytesIn'] / max(1, c['requests']):.1f} | "
                         f"{r['serveCpuMicros']:.2f} |")
    for server in ["nghttpd", "nghttpd 404"]:
        h1 = [r["rate"] for r in results[server]["h2load one URL"]]
        p1 = statistics.median(r["rate"] for r in results[server]["push"])
        lines += ["", f"h2load against {server} with one URL (one token path for every request, its best case, "
                  f"not the same work): median {statistics.median(h1):,.0f} req/s "
                  f"({' · '.join(f'{x:,.0f}' for x in h1)}); "
                  f"push / that: {p1 / statistics.median(h1):.0%} (not gated)."]
    h0 = [r["rate"] for r in served["h2load in order"]]
    p0 = statistics.median(r["rate"] for r in served["push"])
    lines += ["", "h2load against fanout serve with the token paths in population order (the order serve built its "
              "activities, so it walks its arrays in sequence: cheaper for serve than push's followers all over the "
              f"store, not the same work): median {statistics.median(h0):,.0f} req/s "
              f"({' · '.join(f'{x:,.0f}' for x in h0)}); push / that: {p0 / statistics.median(h0):.0%} (not gated)."]
    lines += ["", f"Gate: push / h2load ≥ {args.min_ratio:.0%} against each server: "
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
    parser.add_argument("--rounds", type=int, default=9,
                        help="rounds per row; the gate reads their medians (rounds spread widely on a shared machine)")
    parser.add_argument("--requests", type=int, default=600000, help="h2load's requests per round")
    parser.add_argument("--push-seconds", type=float, default=2,
                        help="push's schedule per round against nghttpd, at --rate-scale 1000")
    parser.add_argument("--serve-push-seconds", type=float, default=BENCH_PUSH_SECONDS,
                        help="push's schedule per round against fanout serve (push-bench.json), at --rate-scale 1000")
    parser.add_argument("--min-ratio", type=float, default=0.9)
    parser.add_argument("--stall", action="store_true", help="latency at --rate with and without stalls instead")
    parser.add_argument("--rate", type=int, default=100000)
    parser.add_argument("--stall-seconds", type=int, default=40)
    parser.add_argument("--tls-connections", help="N[,M...]: over TLS with N connections each (instead of h2c)")
    parser.add_argument("--out")
    parser.add_argument("--keep-work", action="store_true", help="keep the temporary folder of run folders")
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="push-bench-")
    body = write_body(work)
    if args.stall:
        status = stall(args, work, body)
    elif args.tls_connections:
        status = tls_throughput(args, work, body)
    else:
        status = throughput(args, work, body)
    # Each fanout serve run writes its population.jsonl (67 MB for push-bench.json's 200,000 activities): ~650 MB
    # a default run. Kept with --keep-work (a run that stops on an error keeps it too, for its summaries).
    if args.keep_work:
        print(f"run folders kept in {work}")
    else:
        shutil.rmtree(work)
    sys.exit(status)


if __name__ == "__main__":
    main()
