#!/usr/bin/env python3
"""The trigger against several instances (`fanout serve --trigger A,B`) beside the same events to one: is the
schedule kept, do the per-URL counts add up to the totals.

`fanout serve scripts/trigger-bench.json --workers 1 --h2c --trigger URL[,URL...] --duration S` (2,000 events a
second, Poisson) against trigger-bench.py's python responders (asyncio, 204 over HTTP/1.1 keep-alive), one URL and
N URLs in turn, --runs times each. Prints, and writes to --out as markdown, each run's events sent, scheduleLag and
response p50/p99, the events each URL got and whether `byURLAddsUp` held, and the load average around it.

    scripts/trigger-instances-bench.py [--binary .build/release/fanout] [--instances 2] [--runs 2] [--duration 20]
                                       [--spread hash|round-robin] [--out FILE]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SCENARIO = os.path.join(HERE, "trigger-bench.json")


def load():
    return open("/proc/loadavg").read().split()[0]


def responder(work, k):
    port_file = f"{work}/responder-{k}.port"
    process = subprocess.Popen([sys.executable, os.path.join(HERE, "trigger-bench.py"), "--serve-responder",
                                port_file], stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    for _ in range(200):
        if os.path.exists(port_file):
            return process, f"http://127.0.0.1:{int(open(port_file).read())}/events"
        time.sleep(0.05)
    sys.exit("a responder did not start")


def run(binary, urls, spread, duration, out):
    before = load()
    command = [binary, "serve", SCENARIO, "--workers", "1", "--h2c", "--listen", "127.0.0.1:0", "--trigger",
               ",".join(urls), "--trigger-spread", spread, "--duration", str(duration), "--state", "none",
               "--out", out]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode not in (0, 3):
        sys.exit(f"fanout serve exited {done.returncode}: {done.stderr[-2000:]}")
    t = json.load(open(f"{out}/summary.json"))["trigger"]
    ms = lambda p, key: t[p][key] / 1e6
    return {
        "urls": len(urls), "sent": t["sent"], "lagP50": ms("scheduleLag", "p50Nanos"),
        "lagP99": ms("scheduleLag", "p99Nanos"), "responseP50": ms("response", "p50Nanos"),
        "responseP99": ms("response", "p99Nanos"), "waited": t["waitedForSlot"],
        "byURL": [u["sent"] for u in t["byURL"]], "addsUp": t["byURLAddsUp"], "load": f"{before} → {load()}",
    }


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--binary", default=".build/release/fanout")
    parser.add_argument("--instances", type=int, default=2)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--duration", type=int, default=20)
    parser.add_argument("--spread", default="hash")
    parser.add_argument("--out")
    args = parser.parse_args()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True,
                           text=True).stdout.strip() != ""
    work = tempfile.mkdtemp(prefix="trigger-instances-")
    started = [responder(work, k) for k in range(args.instances)]
    urls = [u for _, u in started]
    rows = []
    try:
        for i in range(args.runs):
            for n in (1, args.instances):
                r = run(args.binary, urls[:n], args.spread, args.duration, f"{work}/run-{i}-{n}")
                rows.append(r)
                print(json.dumps(r), flush=True)
    finally:
        for p, _ in started:
            p.terminate()
    text = (f"# The trigger against {args.instances} instances\n\n"
            f"`scripts/trigger-instances-bench.py --binary {args.binary} --instances {args.instances} --runs "
            f"{args.runs} --duration {args.duration} --spread {args.spread}` at {commit}"
            f"{' (uncommitted changes)' if dirty else ''}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}: "
            f"`fanout serve scripts/trigger-bench.json --workers 1 --h2c --trigger URL[,URL...] --trigger-spread "
            f"{args.spread} --duration {args.duration}` (2,000 events/s) against trigger-bench.py's python "
            "responders (204 over HTTP/1.1 keep-alive), one URL and all of them in turn.\n\n"
            "| URLs | events sent | scheduleLag p50 ms | p99 ms | response p50 ms | p99 ms | waited for a slot | "
            "events per URL | per-URL counts add up | load before → after |\n"
            "|---:|---:|---:|---:|---:|---:|---:|---|---|---|\n")
    for r in rows:
        text += (f"| {r['urls']} | {r['sent']:,} | {r['lagP50']:.3f} | {r['lagP99']:.3f} | {r['responseP50']:.3f} | "
                 f"{r['responseP99']:.3f} | {r['waited']} | {' + '.join(f'{n:,}' for n in r['byURL'])} | "
                 f"{'yes' if r['addsUp'] else 'NO'} | {r['load']} |\n")
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    return 0 if all(r["addsUp"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
