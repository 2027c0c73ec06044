#!/usr/bin/env python3
"""make trigger-bench: how punctually `fanout serve --trigger` sends a scenario's events, at 2,000 events/s.

`fanout serve scripts/trigger-bench.json --workers 1 --h2c --trigger URL --duration 30` POSTs each of the scenario's
source events (Poisson, 2,000 a second, every one pushed by `fanout run`) to a trivial local responder at its
intended time, from the trigger's own event loop. The figure is summary.json `trigger.scheduleLag` (intended time
→ the request leaving); the issue's criterion is p99 ≤ 1 ms on one loop, so the script exits 1 when the p99 (the median of the
runs' p99s with --runs > 1) is above --max-p99-ms.

The responder answers every request at once: `python` (default) is an asyncio raw-socket server (a Protocol, not
http.server) answering `204 No Content` over HTTP/1.1 keep-alive; `nghttpd` is nghttp2's C server over TLS with
ALPN h2 (`--trigger-http 2`), answering 200 with an empty file. Before the runs it is measured on its own with
h2load at the same rate on one connection (its answer time) and flat out (its capacity), so that it is shown not
to be the bottleneck. The load average is read before and after each run; --quiet-load waits (up to
--quiet-wait seconds) for the 1-minute load to fall below it first. Writes reports/benchmarks/trigger-bench-<date>.md.

    scripts/trigger-bench.py [--binary .build/release/fanout] [--responder python|nghttpd] [--runs 1]
                             [--duration 30] [--quiet-load 1.2] [--quiet-wait 300] [--max-p99-ms 1] [--out FILE]
                             [--push-load RATE]   # h2load pushes at the same serve meanwhile
    scripts/trigger-bench.py --serve-responder PORTFILE      # the python responder alone (used by the above)
"""
import argparse
import asyncio
import datetime
import json
import os
import re
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

RESPONDERS = {"python": "python asyncio raw-socket server, 204 over HTTP/1.1 keep-alive",
              "nghttpd": "nghttpd (one thread), h2 over TLS, 200 with an empty file"}
SCENARIO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "trigger-bench.json")


# ---- The python responder: HTTP/1.1 keep-alive, 204 at once ----------------------------------------------------

class Responder(asyncio.Protocol):
    """Reads requests (headers, then Content-Length bytes of body) and answers each with 204 as soon as it is
    complete. No pipelining is needed (libcurl sends one request at a time per connection) but it is handled."""
    ANSWER = b"HTTP/1.1 204 No Content\r\nConnection: keep-alive\r\n\r\n"
    stats = {"connections": 0, "requests": 0}

    def connection_made(self, transport):
        self.transport = transport
        self.buffer = bytearray()
        self.need = None  # bytes of the current request (headers + body) once its headers are complete
        Responder.stats["connections"] += 1

    def data_received(self, data):
        self.buffer += data
        answers = 0
        while True:
            if self.need is None:
                end = self.buffer.find(b"\r\n\r\n")
                if end < 0:
                    break
                m = re.search(rb"\r\ncontent-length:\s*(\d+)", bytes(self.buffer[:end + 2]), re.IGNORECASE)
                self.need = end + 4 + (int(m.group(1)) if m else 0)
            if len(self.buffer) < self.need:
                break
            del self.buffer[:self.need]
            self.need = None
            answers += 1
        if answers:
            Responder.stats["requests"] += answers
            self.transport.write(Responder.ANSWER * answers)


def serve_responder(port_file):
    async def main():
        loop = asyncio.get_running_loop()
        server = await loop.create_server(Responder, "127.0.0.1", 0, backlog=1024)
        port = server.sockets[0].getsockname()[1]
        with open(port_file + ".tmp", "w") as f:
            f.write(str(port))
        os.rename(port_file + ".tmp", port_file)
        stop = asyncio.Event()
        loop.add_signal_handler(signal.SIGTERM, stop.set)
        # The counts so far, on demand (the bench reads them before and after each run).
        loop.add_signal_handler(signal.SIGUSR1, lambda: print(json.dumps(Responder.stats), flush=True))
        await stop.wait()
        server.close()
        print(json.dumps(Responder.stats), flush=True)
    asyncio.run(main())


# ---- The bench -------------------------------------------------------------------------------------------------

def load():
    return open("/proc/loadavg").read().split()[:3]


def wait_quiet(threshold, seconds):
    """Waits until the 1-minute load is below threshold (at most `seconds`); returns the load then."""
    deadline = time.time() + seconds
    while float(load()[0]) >= threshold and time.time() < deadline:
        time.sleep(5)
    return load()


def start_responder(kind, work):
    if kind == "python":
        port_file = f"{work}/responder.port"
        process = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--serve-responder", port_file],
                                   stdout=open(f"{work}/responder.out", "w"), stderr=subprocess.STDOUT)
        for _ in range(200):
            if os.path.exists(port_file):
                port = int(open(port_file).read())
                return process, {"url": f"http://127.0.0.1:{port}/events", "flags": [], "probe":
                                 f"http://127.0.0.1:{port}/events", "h1": True}
            time.sleep(0.05)
        sys.exit("the python responder did not start: " + open(f"{work}/responder.out").read())
    cert, key = f"{work}/cert.pem", f"{work}/key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                    "-keyout", key, "-out", cert, "-days", "1", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1"], check=True, capture_output=True)
    root = f"{work}/root"
    os.makedirs(root, exist_ok=True)
    open(f"{root}/events", "w").close()
    port = free_port()
    process = subprocess.Popen(["nghttpd", "--htdocs", root, "-n", "1", str(port), key, cert],
                               stdout=open(f"{work}/responder.out", "w"), stderr=subprocess.STDOUT)
    for _ in range(200):
        if subprocess.run(["curl", "-s", "-o", "/dev/null", "--cacert", cert, f"https://127.0.0.1:{port}/events"],
                          capture_output=True).returncode == 0:
            return process, {"url": f"https://127.0.0.1:{port}/events",
                             "flags": ["--trigger-http", "2", "--trigger-ca", cert],
                             "probe": f"https://127.0.0.1:{port}/events", "h1": False}
        time.sleep(0.05)
    sys.exit("nghttpd did not start: " + open(f"{work}/responder.out").read())


def free_port():
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def probe(responder, body_file, work, rate, requests, connections):
    """h2load against the responder alone: rate > 0 paces one client at that many requests/s (its answer time at
    the bench's rate), rate 0 runs flat out (its capacity). Returns req/s and the answer time's percentiles (µs)."""
    log = f"{work}/h2load.log"
    command = ["h2load", "-n", str(requests), "-c", str(connections), "-m", "1", "-t", "1", "-d", body_file,
               "-H", "content-type: application/json", "--log-file", log]
    if responder["h1"]:
        command.append("--h1")
    if rate:
        command += ["--rps", str(rate)]
    command.append(responder["probe"])
    out = subprocess.run(command, capture_output=True, text=True).stdout
    m = re.search(r"finished in [^,]+, ([0-9.]+) req/s", out)
    done = re.search(r"requests: .* (\d+) succeeded, (\d+) failed, (\d+) errored", out)
    lat = sorted(int(line.split("\t")[2]) for line in open(log) if line.strip())
    if not m or not done or not lat:
        sys.exit("h2load failed against the responder:\n" + out)

    def pct(p):
        return lat[min(len(lat) - 1, int(len(lat) * p / 100))]
    return {"rate": float(m.group(1)), "succeeded": int(done.group(1)), "failed": int(done.group(2)),
            "p50": pct(50), "p99": pct(99), "p999": pct(99.9), "max": lat[-1],
            "command": " ".join(c if not c.startswith(work) else os.path.basename(c) for c in command)}


def responder_counts(kind, process, work):
    """The python responder's connections and requests so far (it prints them on SIGUSR1); None for nghttpd."""
    if kind != "python":
        return None
    path = f"{work}/responder.out"
    seen = len(open(path).read().splitlines())
    process.send_signal(signal.SIGUSR1)
    for _ in range(100):
        lines = open(path).read().splitlines()
        if len(lines) > seen:
            return json.loads(lines[-1])
        time.sleep(0.02)
    return None


def cpu_seconds(pid):
    """User + system CPU seconds of a process so far (/proc/PID/stat)."""
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def push_load(port, out, rate, duration, work):
    """h2load against fanout serve itself while the trigger runs: token pushes of the scenario's first app at
    `rate` requests/s over 4 connections (`--rps` is per connection), for the run's length; returns its summary."""
    rows = [json.loads(line) for line in open(f"{out}/population.jsonl")]
    rows = [r for r in rows if r.get("token")]
    app = rows[0]["app"]
    with open(f"{work}/push-uris.txt", "w") as f:
        for r in rows:
            if r["app"] == app:
                f.write(f"http://127.0.0.1:{port}/3/device/{r['token']}\n")
    now = int(time.time())
    with open(f"{work}/push-body.json", "w") as f:
        json.dump({"aps": {"event": "update", "timestamp": now, "content-state": {}}}, f)
    command = ["h2load", "-c", "4", "-m", "16", "-t", "1", "--rps", str(max(1, rate // 4)), "-D", str(duration),
               "-d", f"{work}/push-body.json", "-H", "apns-push-type: liveactivity", "-H",
               f"apns-topic: {app}.push-type.liveactivity", "-H", "apns-priority: 5", "-i", f"{work}/push-uris.txt"]
    result = subprocess.run(command, capture_output=True, text=True)
    done = re.search(r"requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded", result.stdout)
    return {"command": " ".join(c for c in command if not c.startswith(work)) + " -i URIS",
            "done": int(done.group(3)) if done else 0, "status": result.returncode}


def run_serve(binary, responder, duration, work, index, responder_pid, push_rate=0):
    out = f"{work}/run{index}"
    command = [binary, "serve", SCENARIO, "--workers", "1", "--h2c", "--listen", "127.0.0.1:0",
               "--trigger", responder["url"], *responder["flags"], "--duration", str(duration), "--state", "none",
               "--out", out]
    before = load()
    started = time.time()
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    responder_cpu = cpu_seconds(responder_pid)
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    pushed = None
    stderr_head = ""
    if push_rate > 0:
        # The listening line names the port; the population is written by then.
        for line in process.stderr:
            stderr_head += line
            found = re.search(r"listening on 127\.0\.0\.1:(\d+)", line)
            if found:
                pushed = push_load(int(found.group(1)), out, push_rate, max(1, duration - 2), work)
                break
    stdout, stderr = process.communicate()
    result = subprocess.CompletedProcess(command, process.returncode, stdout, stderr_head + stderr)
    elapsed = time.time() - started
    responder_cpu = cpu_seconds(responder_pid) - responder_cpu
    now = resource.getrusage(resource.RUSAGE_CHILDREN)
    serve_cpu = now.ru_utime + now.ru_stime - children.ru_utime - children.ru_stime
    after = load()
    if result.returncode != 0 or not os.path.exists(f"{out}/summary.json"):
        sys.exit(f"fanout serve exited {result.returncode}:\n{result.stderr[-3000:]}")
    summary = json.load(open(f"{out}/summary.json"))
    t = summary["trigger"]
    return {"trigger": t, "loadBefore": before, "loadAfter": after, "elapsed": elapsed, "pushed": pushed,
            "serveCPU": serve_cpu / elapsed, "responderCPU": responder_cpu / elapsed,
            "rate": t["sent"] / duration,
            "command": " ".join(os.path.relpath(c) if c == SCENARIO else c for c in command
                                if not c.startswith(work)).replace("--out", "--out DIR")}


def ms(nanos):
    return f"{nanos / 1e6:.3f}"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--serve-responder", metavar="PORTFILE")
    parser.add_argument("--binary", default=".build/release/fanout")
    parser.add_argument("--responder", choices=["python", "nghttpd"], default="python")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--duration", type=int, default=30)
    parser.add_argument("--quiet-load", type=float, default=1.2)
    parser.add_argument("--quiet-wait", type=float, default=300)
    parser.add_argument("--max-p99-ms", type=float, default=1.0)
    parser.add_argument("--push-load", type=int, default=0, metavar="RATE",
                        help="h2load pushes at RATE requests/s to the same fanout serve while the trigger runs")
    parser.add_argument("--out", default=f"reports/benchmarks/trigger-bench-{datetime.date.today()}.md")
    args = parser.parse_args()
    if args.serve_responder:
        serve_responder(args.serve_responder)
        return
    for tool in ("h2load", "curl") + (("nghttpd", "openssl") if args.responder == "nghttpd" else ()):
        if not shutil.which(tool):
            sys.exit(f"trigger-bench needs {tool} (make deps)")

    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True,
                           text=True).stdout.strip()
    work = tempfile.mkdtemp(prefix="trigger-bench-")
    # A body of the trigger's size (INGEST §5: ~400 bytes).
    body_file = f"{work}/body.json"
    with open(body_file, "w") as f:
        json.dump({"source": "source-000017", "app": "com.example.scores", "event": "update",
                   "timestamp": 1795000000, "content-state": {"home": 3, "away": 1, "clock": "x" * 12,
                   "period": "y" * 12, "winProbability": 0.61, "final": False, "lastEvent": "z" * 12},
                   "stale-date": 1795003600, "relevance-score": 42.0, "dismissal-date": None,
                   "channel": "c291cmNlLTAwMDAxNw==", "intendedAt": "2026-11-26T09:00:00.000Z"}, f)
    process, responder = start_responder(args.responder, work)
    runs = []
    try:
        paced = probe(responder, body_file, work, 2000, 10000, 1)
        flat = probe(responder, body_file, work, 0, 40000, 4)
        print(f"responder {args.responder}: at 2,000 req/s on 1 connection answer p50 {paced['p50']} µs, "
              f"p99 {paced['p99']} µs, max {paced['max']} µs; flat out {flat['rate']:,.0f} req/s", flush=True)
        for i in range(args.runs):
            quiet = wait_quiet(args.quiet_load, args.quiet_wait)
            counted = responder_counts(args.responder, process, work)
            run = run_serve(args.binary, responder, args.duration, work, i, process.pid, args.push_load)
            after = responder_counts(args.responder, process, work)
            run["connections"] = after["connections"] - counted["connections"] if counted and after else None
            runs.append(run)
            t = run["trigger"]
            lag = t["scheduleLag"]
            print(f"run {i + 1}: sent {t['sent']:,} ({run['rate']:,.0f}/s), scheduleLag p50 {ms(lag['p50Nanos'])} "
                  f"p90 {ms(lag['p90Nanos'])} p99 {ms(lag['p99Nanos'])} p99.9 {ms(lag['p999Nanos'])} max "
                  f"{ms(lag['maxNanos'])} ms; response p50 {ms(t['response']['p50Nanos'])} p99 "
                  f"{ms(t['response']['p99Nanos'])} ms; waitedForSlot {t['waitedForSlot']}; connections "
                  f"{run['connections'] if run['connections'] is not None else '?'}; CPU serve "
                  f"{run['serveCPU']:.0%} responder {run['responderCPU']:.0%}; load "
                  f"{' '.join(run['loadBefore'])} → {' '.join(run['loadAfter'])}"
                  + (f"; push load: {run['pushed']['done']:,} requests answered by serve" if run["pushed"] else "")
                  + ("" if float(quiet[0]) < args.quiet_load else f" (not quiet after {args.quiet_wait:.0f} s)"),
                  flush=True)
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()

    p99s = [r["trigger"]["scheduleLag"]["p99Nanos"] for r in runs]
    gate = statistics.median(p99s)
    passed = gate <= args.max_p99_ms * 1e6
    lines = [
        f"# Trigger scheduling at 2,000 events/s — {datetime.date.today()}",
        "",
        f"`make trigger-bench` (`scripts/trigger-bench.py --responder {args.responder} --runs {args.runs}`) at "
        f"{commit}{' (uncommitted changes)' if dirty else ''}, binary `{args.binary}`, "
        f"{datetime.datetime.now(datetime.timezone.utc).strftime('%H:%M UTC')}, {os.cpu_count()} cores.",
        "",
        f"`{runs[0]['command']}`: the scenario's {args.duration} s of Poisson source events at 2,000/s, each POSTed "
        "from the trigger's own event loop at its intended time. scheduleLag is intended time → the request leaving "
        "(libcurl about to send it on its connection; summary.json `trigger.scheduleLag`); response is intended "
        "time → answer."
        + (f" Meanwhile h2load pushed at serve itself, {args.push_load:,} requests/s (`{runs[0]['pushed']['command']}`"
           f"; answered: " + ", ".join(f"{r['pushed']['done']:,}" for r in runs) + ")."
           if args.push_load else ""),
        "",
        f"Responder: {RESPONDERS[args.responder]}. On its own, with h2load: "
        f"at 2,000 req/s on one connection its answer time was p50 {paced['p50']} µs, p99 {paced['p99']} µs, "
        f"p99.9 {paced['p999']} µs, max {paced['max']} µs (`{paced['command']}`); flat out on 4 connections "
        f"{flat['rate']:,.0f} req/s (`{flat['command']}`).",
        "",
        "| run | sent | events/s | lag p50 | p90 | p99 | p99.9 | max | response p50 | p99 | p99.9 | waitedForSlot "
        "| peak in flight | connections | answers | CPU serve | CPU responder | load before | load after |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for i, r in enumerate(runs):
        t, lag, resp = r["trigger"], r["trigger"]["scheduleLag"], r["trigger"]["response"]
        answers = ", ".join(f"{n:,} × {s}" for s, n in sorted(t["byStatus"].items()))
        lines.append(
            f"| {i + 1} | {t['sent']:,} | {r['rate']:,.0f} | {ms(lag['p50Nanos'])} | {ms(lag['p90Nanos'])} | "
            f"{ms(lag['p99Nanos'])} | {ms(lag['p999Nanos'])} | {ms(lag['maxNanos'])} | {ms(resp['p50Nanos'])} | "
            f"{ms(resp['p99Nanos'])} | {ms(resp['p999Nanos'])} | {t['waitedForSlot']} | {t['peakInFlight']} | "
            f"{r['connections'] if r['connections'] is not None else '–'} | "
            f"{answers} | {r['serveCPU']:.0%} | {r['responderCPU']:.0%} | "
            f"{' '.join(r['loadBefore'])} | {' '.join(r['loadAfter'])} |")
    lines += [
        "",
        "Times in ms; connections: opened to the responder during the run (libcurl reuses kept-alive ones); CPU: "
        "user + system time over the run's wall time (fanout serve's includes its start). "
        + (f"Gate: the median of the runs' scheduleLag p99, {ms(gate)} ms, " if len(runs) > 1 else
           f"Gate: scheduleLag p99 {ms(gate)} ms ")
        + f"{'≤' if passed else '>'} {args.max_p99_ms:g} ms: **{'pass' if passed else 'FAIL'}**.",
        "",
    ]
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    with open(args.out, "w") as f:
        f.write("\n".join(lines))
    print(f"wrote {args.out}: scheduleLag p99 {ms(gate)} ms, {'pass' if passed else 'FAIL'} "
          f"(≤ {args.max_p99_ms:g} ms)")
    shutil.rmtree(work, ignore_errors=True)
    sys.exit(0 if passed else 1)


if __name__ == "__main__":
    main()
