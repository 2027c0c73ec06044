#!/usr/bin/env python3
"""make serve-bench: h2load against `fanout serve` and against nghttpd (nghttp2's own C server), side by side.

Both servers run one event loop on one core; h2load runs one thread with the same connections, streams and
request shape (POST, APNs headers, the same payload). fanout serve judges every request by APNs's rules and
applies it on the devices of the `default` scenario (10,000 devices, ~30,000 activities: each URI is another
activity's token); nghttpd answers 200 with an empty file. Rounds alternate (fanout, nghttpd, fanout, …) so
a noisy neighbour hurts both; the medians and their ratio are printed and written to
reports/benchmarks/serve-<date>.md. Exit 1 when fanout's median is below --min-ratio of nghttpd's.

    scripts/serve-bench.py [--binary .build/release/fanout] [--rounds 3] [--requests 200000] [--min-ratio 0.5]
"""
import argparse
import datetime
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time


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


def h2load(uri_file, body, connections, streams, requests, tls, log):
    command = ["h2load", "-n", str(requests), "-c", str(connections), "-m", str(streams), "-t", "1",
               "--log-file", log,
               "-d", body, "-H", "apns-push-type: liveactivity", "-H", "apns-priority: 10",
               "-H", "apns-topic: com.example.scores.push-type.liveactivity", "-i", uri_file]
    out = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    rate = float(re.search(r"finished in [^,]+, ([0-9.]+) req/s", out).group(1))
    done = re.search(r"requests: .* (\d+) succeeded, (\d+) failed, (\d+) errored", out)
    statuses = re.search(r"status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx", out)
    # h2load's per-request log: start (µs since the epoch), status, µs until the end of the response.
    latencies = sorted(int(line.split("\t")[2]) for line in open(log) if line.strip())
    p50 = latencies[len(latencies) // 2]
    p99 = latencies[min(len(latencies) - 1, (len(latencies) * 99) // 100)]
    return {"rate": rate, "p50": p50, "p99": p99, "succeeded": int(done.group(1)), "failed": int(done.group(2)),
            "errored": int(done.group(3)), "2xx": int(statuses.group(1)), "4xx": int(statuses.group(3)),
            "command": " ".join(command)}


def cpu_seconds(pid):
    """The process's user and system CPU time so far (every thread), from /proc/PID/stat."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--binary", default=".build/release/fanout")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--requests", type=int, default=200000)
    parser.add_argument("--connections", type=int, default=8)
    parser.add_argument("--streams", type=int, default=64)
    parser.add_argument("--min-ratio", type=float, default=0.5)
    parser.add_argument("--out", default=f"reports/benchmarks/serve-{datetime.date.today()}.md")
    args = parser.parse_args()

    work = tempfile.mkdtemp(prefix="serve-bench-")
    cert, key = f"{work}/cert.pem", f"{work}/key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                    "-keyout", key, "-out", cert, "-days", "1", "-subj", "/CN=localhost"],
                   check=True, capture_output=True)
    root = f"{work}/root"
    os.makedirs(root)
    open(f"{root}/ok", "w").close()
    # A ~250-byte Live Activity update, as a score push is.
    now = int(time.time())
    payload = json.dumps({"aps": {"event": "update", "timestamp": now + 60, "relevance-score": 75,
                                  "stale-date": now + 3600, "content-state": {
        "home": 2, "away": 1, "clock": "81:00", "period": "2nd half", "winProbability": 0.71, "final": False,
        "lastEvent": "Goal! 81' header from a corner, assisted by the captain"}}})
    body = f"{work}/payload.json"
    with open(body, "w") as f:
        f.write(payload)

    # (transport, event loops): one loop each, h2c and TLS (the gate), then one loop per core on both sides.
    cores = os.cpu_count() or 1
    configs = [("h2c", 1), ("TLS", 1)] + ([("h2c", cores)] if cores > 1 else [])
    results = {}
    served = {}
    for transport, loops in configs:
        tls = transport == "TLS"
        scheme = "https" if tls else "http"
        label = f"{transport} ×{loops}"
        folder = f"{work}/run-{transport}-{loops}"
        err = f"{work}/serve-{transport}-{loops}.err"
        flags = ["--tls-cert", cert, "--tls-key", key] if tls else ["--h2c"]
        with open(err, "w") as e:
            fanout = subprocess.Popen([args.binary, "serve", "default", "--workers", str(loops), "--listen",
                                       "127.0.0.1:0", "--out", folder] + flags, stderr=e, stdout=subprocess.DEVNULL)
        port = wait_for_port(err, fanout)
        with open(f"{folder}/population.jsonl") as f:
            tokens = [json.loads(line)["token"] for line in f
                      if json.loads(line)["app"] == "com.example.scores"]
        fanout_uris = f"{work}/fanout-{transport}.txt"
        with open(fanout_uris, "w") as f:
            for t in tokens:
                f.write(f"{scheme}://127.0.0.1:{port}/3/device/{t}\n")
        nport = port + 1 if port < 65000 else port - 1
        ncommand = ["nghttpd", "-n", str(loops), "-d", root, str(nport)] + ([key, cert] if tls else ["--no-tls"])
        nghttpd = subprocess.Popen(ncommand, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.5)
        nghttpd_uris = f"{work}/nghttpd-{transport}.txt"
        with open(nghttpd_uris, "w") as f:
            for _ in tokens[:1000]:
                f.write(f"{scheme}://127.0.0.1:{nport}/ok\n")
        results[f"fanout {label}"], results[f"nghttpd {label}"] = [], []
        for _ in range(args.rounds):
            for name, uris, pid in [(f"fanout {label}", fanout_uris, fanout.pid),
                                    (f"nghttpd {label}", nghttpd_uris, nghttpd.pid)]:
                user, system = cpu_seconds(pid)
                r = h2load(uris, body, args.connections, args.streams, args.requests, tls, f"{work}/h2load.log")
                # The server's own CPU per answered request (its every thread; the round's requests only).
                user2, system2 = cpu_seconds(pid)
                r["userMicros"] = (user2 - user) * 1e6 / args.requests
                r["systemMicros"] = (system2 - system) * 1e6 / args.requests
                r["cpuMicros"] = r["userMicros"] + r["systemMicros"]
                if r["succeeded"] + r["4xx"] != args.requests or r["errored"]:
                    sys.exit(f"{name}: not every request was answered: {r}")
                results[name].append(r)
        nghttpd.send_signal(signal.SIGTERM)
        nghttpd.wait()
        fanout.send_signal(signal.SIGTERM)
        if fanout.wait(timeout=60) != 0:
            sys.exit(f"fanout serve exited {fanout.returncode}")
        with open(f"{folder}/summary.json") as f:
            served[label] = json.load(f)

    revision = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True,
                           text=True).stdout.strip()
    lines = [f"# fanout serve against nghttpd — {datetime.date.today()}", "",
             f"Commit {revision}{' (uncommitted changes)' if dirty else ''}, `make serve-bench` "
             f"({args.rounds} rounds, alternating; {os.cpu_count()} cores; load "
             f"{open('/proc/loadavg').read().split()[0]} at the end).", "",
             f"Each round: `h2load -n {args.requests} -c {args.connections} -m {args.streams} -t 1` POSTing a "
             f"{len(payload)}-byte Live Activity update with APNs headers (one body, so one `aps.timestamp`). fanout "
             f"serve: the `default` scenario ({len(tokens)} `com.example.scores` tokens in turn); every request is "
             "checked, routed and judged by its activity: the first push to each activity is applied, every later "
             "one carries the same timestamp and is ignored as stale, as a device ignores it (the applied share is in "
             "the second table). nghttpd (nghttp2's C server): 200 with an empty file. ×N: event loops (fanout "
             "`--workers N`) and threads (nghttpd `-n N`); the gate is on ×1.", "",
             "CPU µs/request: the server's own CPU time (user + system, every thread, /proc/PID/stat) over the round's "
             "requests, the median of the rounds (the clock ticks are 10 ms: about ±0.1 µs at 200,000 requests).", "",
             "| server | transport × loops | median req/s | rounds (req/s) | response p50 / p99 (µs, median round) | "
             "CPU µs/request | fanout / nghttpd |",
             "|---|---|---:|---|---:|---:|---:|"]
    failed = False
    for transport, loops in configs:
        label = f"{transport} ×{loops}"
        f = statistics.median(r["rate"] for r in results[f"fanout {label}"])
        n = statistics.median(r["rate"] for r in results[f"nghttpd {label}"])
        ratio = f / n
        failed = failed or (loops == 1 and ratio < args.min_ratio)
        for name, median in [("fanout serve", f), ("nghttpd", n)]:
            key = f"{'fanout' if name == 'fanout serve' else 'nghttpd'} {label}"
            rounds = ", ".join(f"{r['rate']:,.0f}" for r in results[key])
            middle = sorted(results[key], key=lambda r: r["rate"])[len(results[key]) // 2]
            cpu = statistics.median(r["cpuMicros"] for r in results[key])
            lines.append(f"| {name} | {label} | {median:,.0f} | {rounds} | {middle['p50']:,} / {middle['p99']:,} | "
                         f"{cpu:.2f} | {f'{ratio:.2f}' if name == 'fanout serve' else ''} |")
    if cores > 1:
        one, many = results["fanout h2c ×1"], results[f"fanout h2c ×{cores}"]
        rate = statistics.median(r["rate"] for r in many) / statistics.median(r["rate"] for r in one)
        cpu = (statistics.median(r["cpuMicros"] for r in many) / statistics.median(r["cpuMicros"] for r in one))
        split = "; ".join(
            f"{n} loop{'s' if n > 1 else ''} {statistics.median(r['userMicros'] for r in rs):.2f} µs user + "
            f"{statistics.median(r['systemMicros'] for r in rs):.2f} µs system" for n, rs in [(1, one), (cores, many)])
        peer = (statistics.median(r["rate"] for r in results[f"nghttpd h2c ×{cores}"])
                / statistics.median(r["rate"] for r in results["nghttpd h2c ×1"]))
        lines += ["", f"fanout serve h2c, {cores} loops against 1 (the same h2load load over {args.connections} "
                  f"connections, h2load on the same cores): **{rate:.2f}×** the requests/s, **{cpu:.2f}×** the CPU "
                  f"per request (medians; {split}). nghttpd with {cores} threads against 1 in the same rounds: "
                  f"{peer:.2f}× the requests/s."]
    lines += ["", "What fanout serve measured itself in those runs (all rounds of one transport together):", "",
              "| transport × loops | requests | 200 | deliveries | applied (share) | ignored as stale | "
              "service p50 / p99 (µs) | delivery p99 (µs) |",
              "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for transport, s in served.items():
        lat = s["latency"]
        outcomes = s["accounting"]["outcomes"]
        applied, total = outcomes["applied"], s["requests"]["total"]
        stale = sum(v for k, v in outcomes.items() if "stale" in k.lower())
        lines.append(f"| {transport} | {s['requests']['total']:,} | {s['requests']['byStatus'].get('200', 0):,} | "
                     f"{s['accounting']['deliveries']:,} | {applied:,} ({applied / max(1, total):.1%}) | "
                     f"{stale:,} | "
                     f"{lat['service']['p50Nanos'] / 1000:.1f} / {lat['service']['p99Nanos'] / 1000:.1f} | "
                     f"{lat['delivery']['p99Nanos'] / 1000:.1f} |")
    lines += ["", f"Gate: fanout serve at least {args.min_ratio:.0%} of nghttpd's rate on each transport, one loop: "
              + ("**failed**." if failed else "passed.")]
    text = "\n".join(lines) + "\n"
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        f.write(text)
    print(text)
    shutil.rmtree(work, ignore_errors=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
