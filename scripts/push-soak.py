#!/usr/bin/env python3
"""make push-soak: `fanout push` against `fanout serve SCENARIO --workers 1 --h2c` at a steady rate below saturation for
a long run, sampling both processes' resident memory, then a verdict.

The scenario (--scenario) is scripts/push-soak.json: a steady schedule, so that "80% of saturation" holds every
second and not only on average. Constant arrival, 500 token sources of ~5 followers each (zipfExponent 0, no
broadcast), no burst, no lifecycle end, no fault: each event is a few pushes and requests/s is nearly the same every
second (~470 per unit of --rate-scale with 1,000 devices). smoke, the soak's first scenario, failed at 80% (b5e21ac,
reports/benchmarks/push-perf-2026-11-26.md): a token source's event sends to all its followers at one instant, Zipf
fan-outs reach hundreds, broadcasts cost serve many deliveries and its schedule ramps (its first ~6 minutes offer
more than the rest), so at 80% of the average it still queued behind serve in bursts (peak 52,042 queued, scheduleLag
p99 915 ms, push exit 3). `--scenario smoke` still runs it.

1. The rate: --rate REQ/S when given; else a short saturated push run of the same scenario (`--rate-scale 1000
   --duration --saturation-seconds`, exit 3 expected) against a fresh server measures push's answered requests/s, and
   the soak runs at --fraction (0.8) of it. The rate becomes a --rate-scale by calibration: two runs of the soak's own
   schedule (its scale and duration), stopped after --calibration-seconds (12), correct a first guess (--per-scale)
   by what they offered from their 5th second on (push's progress lines). (smoke's requests/s depend on --rate-scale
   and --duration together and ramp up over the first seconds; the steady scenario's do not, but the calibration
   costs ~30 s and keeps --scenario smoke honest.)
2. The soak: a fresh `fanout serve SCENARIO --devices D --seed S --workers 1 --h2c`, and `fanout push` against it at
   that rate-scale for --duration seconds (600). Every --interval (10) seconds both processes' VmRSS
   (/proc/PID/status) and the 1-minute load go to a TSV (--tsv; default in the work folder), from the schedule's
   start (push's first progress line; its population build before that is not sampled).
3. The checks (all must hold for PASS; exit 0, else 1):
   - push exits 0: not saturated (its scheduleLag p99 ≤ --max-schedule-lag-ms, 100, and nothing queued at the end;
     exit 3 otherwise), no error. Not push's default of 10 ms: an event's pushes are sent at one instant, so the
     last of them wait a round trip or more on 100 streams, and on this shared 2-core machine a loop turn can take
     tens of ms (smoke's per-second p99 passed 10 ms in most seconds at 40% of the saturation rate);
   - no failure: push's requests.failed is 0 and every request sent was answered;
   - the identities hold: push's (sent = answered + failed + unansweredAtEnd) and every identity in serve's
     summary.json (each key named …holds / …Holds / …AddUp / addsUp with a boolean value);
   - RSS flat, per process (`rss_flat`): the largest sample of the last third of the run ≤ the largest of the first
     third × 1.1 + --slack-mib (4) MiB. The first third holds the warm-up (population, histograms, buffers grown to
     their working size). At the soak's ~40,000 requests/s, a leak of 1 byte per request grows ~15 MiB between the
     two thirds' ends, past the ~7.5 MiB the rule allows a ~35 MiB process; `--self-test` checks the rule on
     synthetic samples (make test runs it). A growth of a few KiB a second stays within it over 600 s (push's
     per-second intervals held in memory until e184ded, 7 KiB/s: +2.7 MiB between the thirds' ends, it passed at
     40%): FanoutPushTests' PushIntervalsTests is what catches that one.

    scripts/push-soak.py [--binary .build/release/fanout] [--scenario FILE|NAME] [--duration 600]
                         [--rate N | --fraction 0.8] [--tsv FILE]
    scripts/push-soak.py --self-test
"""
import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

STEADY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "push-soak.json")
STREAMS = 100


def load():
    return open("/proc/loadavg").read().split()[0]


def rss_kib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            m = re.search(r"^VmRSS:\s+(\d+) kB", f.read(), re.M)
        return int(m.group(1)) if m else None
    except OSError:
        return None


class Serve:
    def __init__(self, args, work, name):
        self.folder = f"{work}/serve-{name}"
        err = f"{work}/serve-{name}.err"
        self.command = [args.binary, "serve", args.scenario, "--devices", str(args.devices), "--seed", str(args.seed),
                        "--workers", "1", "--h2c", "--listen", "127.0.0.1:0", "--out", self.folder]
        with open(err, "w") as e:
            self.process = subprocess.Popen(self.command, stderr=e, stdout=subprocess.DEVNULL)
        deadline = time.time() + 120
        while time.time() < deadline:
            m = re.search(r"listening on 127\.0\.0\.1:(\d+)", open(err).read())
            if m:
                self.port = int(m.group(1))
                return
            if self.process.poll() is not None:
                break
            time.sleep(0.05)
        sys.exit("fanout serve did not start: " + open(err).read())

    def stop(self):
        self.process.send_signal(signal.SIGTERM)
        self.process.wait(timeout=300)
        with open(f"{self.folder}/summary.json") as f:
            return json.load(f)


def push_command(args, port, scale, seconds, folder, drain, saturated=False):
    # A saturated run queues the whole schedule at once: no queue bound nor request deadline may cut it short.
    unbounded = ["--max-queued", "10000000", "--request-timeout", "3600"] if saturated else []
    return [args.binary, "push", f"http://127.0.0.1:{port}", args.scenario, "--devices", str(args.devices), "--seed",
            str(args.seed), "--streams", str(STREAMS), "--rate-scale", f"{scale:g}", "--duration", f"{seconds:g}",
            "--drain", str(drain), "--max-schedule-lag", f"{args.max_schedule_lag_ms:g}", "--out", folder] + unbounded


def saturated_rate(args, serve, folder):
    """A saturated push run (`--rate-scale 1000`): its answered requests/s."""
    run = subprocess.run(push_command(args, serve.port, 1000, args.saturation_seconds, folder, 300, saturated=True),
                         capture_output=True, text=True)
    if run.returncode not in (0, 3):
        sys.exit(f"the push run in {folder} exited {run.returncode}: {run.stderr[-2000:]}")
    return json.load(open(f"{folder}/summary.json"))["requests"]["answeredPerSecond"]


def offered(args, serve, scale, folder):
    """The requests/s the soak's schedule (this scale, the soak's --duration: smoke's density depends on both)
    offers from its 5th to its --calibration-seconds-th second (push's progress lines), stopped there (SIGINT)."""
    with open(f"{folder}.err", "w") as err:
        push = subprocess.Popen(push_command(args, serve.port, scale, args.duration, folder, 1),
                                stdout=subprocess.DEVNULL, stderr=err)
    pattern = re.compile(r"^\s+(\d+)s\s+sent (\d+)", re.M)
    points = []
    while push.poll() is None and (not points or points[-1][0] < args.calibration_seconds):
        time.sleep(0.2)
        points = [(int(m.group(1)), int(m.group(2))) for m in pattern.finditer(open(f"{folder}.err").read())]
    push.send_signal(signal.SIGINT)
    push.wait(timeout=120)
    steady = [p for p in points if p[0] >= 5]
    if len(steady) < 2:
        sys.exit(f"no progress lines from the calibration run: {open(f'{folder}.err').read()[-2000:]}")
    return (steady[-1][1] - steady[0][1]) / (steady[-1][0] - steady[0][0])


def calibrate(args, work, rate):
    """The --rate-scale at which the soak's schedule offers `rate` requests/s: a first guess from --per-scale, run
    for --calibration-seconds and corrected by what it offered, twice. Returns (the saturation measured or None,
    the rate, the scale)."""
    serve = Serve(args, work, "calibration")
    measured = None
    if rate is None:
        measured = saturated_rate(args, serve, f"{work}/push-saturation")
        rate = measured * args.fraction
        print(f"saturation: {measured:,.0f} answered requests/s; soak at {args.fraction:.0%}: {rate:,.0f} "
              f"requests/s (load {load()})", flush=True)
    scale = rate / args.per_scale
    for k in range(2):
        sent = offered(args, serve, round(scale, 2), f"{work}/push-calibration-{k}")
        print(f"calibration {k + 1}: --rate-scale {scale:.2f} offered {sent:,.0f} requests/s", flush=True)
        scale *= rate / sent
    serve.stop()
    return measured, rate, round(scale, 2)


def identities(node, path=""):
    """Every boolean identity in a summary: keys named …holds, …Holds, …AddUp, addsUp."""
    found = []
    if isinstance(node, dict):
        for k, v in node.items():
            if isinstance(v, bool) and re.search(r"(holds|Holds|AddUp|addsUp|Hold)$", k):
                found.append((f"{path}{k}", v))
            else:
                found += identities(v, f"{path}{k}.")
    elif isinstance(node, list):
        for i, v in enumerate(node):
            found += identities(v, f"{path}{i}.")
    return found


def rss_flat(samples, slack_mib):
    """The RSS rule on one process's samples (KiB, in time order): (flat, first third's max, last third's max, limit).
    Needs 3 samples or more."""
    third = max(1, len(samples) // 3)
    first = max(samples[:third]) if samples else 0
    last = max(samples[-third:]) if samples else 0
    limit = first * 1.1 + slack_mib * 1024
    return len(samples) >= 3 and last <= limit, first, last, limit


def self_test():
    """The RSS rule on synthetic samples: 60 samples 10 s apart (a 600-s soak), ~35 MiB, ±0.5 MiB of noise."""
    rate = 40_000  # requests/s: the soak at 80% of saturation on this machine
    noise = [(k * 7919) % 1024 - 512 for k in range(60)]  # KiB, deterministic

    def samples(f):
        return [35 * 1024 + noise[k] + f((k + 1) * 10) for k in range(60)]

    cases = [
        ("flat", samples(lambda t: 0), True),
        ("a warm-up step of 8 MiB in the first third", samples(lambda t: 8 * 1024 if t >= 100 else 0), True),
        ("a leak of 1 byte per request", samples(lambda t: rate * t // 1024), False),
        ("a leak of 4 bytes per request", samples(lambda t: 4 * rate * t // 1024), False),
        ("a step of 8 MiB in the last third", samples(lambda t: 8 * 1024 if t >= 450 else 0), False),
        ("too few samples", [35 * 1024] * 2, False),
    ]
    failed = 0
    for name, s, expected in cases:
        flat, first, last, limit = rss_flat(s, 4)
        ok = flat == expected
        failed += not ok
        print(f"  {'ok  ' if ok else 'FAIL'} {name}: {'flat' if flat else 'not flat'} (first third's max "
              f"{first / 1024:.1f} MiB, last third's {last / 1024:.1f}, limit {limit / 1024:.1f})")
    sys.exit(1 if failed else 0)


def main():
    if sys.argv[1:] == ["--self-test"]:
        self_test()
    parser = argparse.ArgumentParser()
    parser.add_argument("--binary", default=".build/release/fanout")
    parser.add_argument("--scenario", default=STEADY, help="a scenario file or built-in name (default: push-soak.json)")
    parser.add_argument("--duration", type=float, default=600)
    parser.add_argument("--rate", type=float, help="requests/s (default: --fraction of a measured saturation)")
    parser.add_argument("--fraction", type=float, default=0.8)
    parser.add_argument("--saturation-seconds", type=float, default=1)
    parser.add_argument("--per-scale", type=float, default=470,
                        help="requests/s per unit of --rate-scale, the calibration's first guess")
    parser.add_argument("--calibration-seconds", type=float, default=12)
    parser.add_argument("--devices", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--max-schedule-lag-ms", type=float, default=100,
                        help="push's saturation threshold (scheduleLag p99; push's own default is 10 ms)")
    parser.add_argument("--interval", type=float, default=10)
    parser.add_argument("--slack-mib", type=float, default=4)
    parser.add_argument("--tsv")
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="push-soak-")
    tsv = args.tsv or f"{work}/rss.tsv"

    measured, rate, scale = calibrate(args, work, args.rate)

    serve = Serve(args, work, "soak")
    folder = f"{work}/push-soak"
    command = push_command(args, serve.port, scale, args.duration, folder, 30)
    print("serve: " + " ".join(serve.command).replace(work, "WORK"), flush=True)
    print("push:  " + " ".join(command).replace(work, "WORK"), flush=True)
    loads = [load()]
    with open(f"{work}/push-soak.err", "w") as err:
        push = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=err)
    # The samples start with the schedule (push's first progress line), not with its population build.
    while push.poll() is None and not re.search(r"^\s+1s\s", open(f"{work}/push-soak.err").read(), re.M):
        time.sleep(0.1)
    t0 = time.time() - 1
    samples = []
    with open(tsv, "w") as out:
        out.write("seconds\tserve_rss_kib\tpush_rss_kib\tload1\n")
        while push.poll() is None:
            time.sleep(max(0.0, t0 + args.interval * (len(samples) + 1) - time.time()))
            p, s = rss_kib(push.pid), rss_kib(serve.process.pid)
            if p is None or push.poll() is not None:
                break
            samples.append((round(time.time() - t0), s, p))
            loads.append(load())
            out.write(f"{samples[-1][0]}\t{s}\t{p}\t{loads[-1]}\n")
            out.flush()
    code = push.wait()
    served = serve.stop()
    pushed = json.load(open(f"{folder}/summary.json")) if os.path.exists(f"{folder}/summary.json") else None

    checks = [(f"push exit 0 (not saturated, no error): {code}", code == 0)]
    if pushed:
        r = pushed["requests"]
        checks.append((f"no failure: failed {r['failed']}, sent {r['sent']:,}, answered {r['answered']:,}",
                       r["failed"] == 0 and r["answered"] == r["sent"] and not r["failures"]))
        checks.append((f"push identity ({pushed['identity']['rule']})", pushed["identity"]["holds"]))
    else:
        checks.append(("push wrote summary.json", False))
    held = identities(served)
    broken = [k for k, v in held if not v]
    checks.append((f"serve identities: {len(held)} checked" + (f", broken: {', '.join(broken)}" if broken else ""),
                   bool(held) and not broken))
    for name, column in [("serve", 1), ("push", 2)]:
        flat, first, last, limit = rss_flat([x[column] for x in samples], args.slack_mib)
        checks.append((f"{name} RSS flat: last third's max {last / 1024:,.1f} MiB ≤ first third's max "
                       f"{first / 1024:,.1f} MiB × 1.1 + {args.slack_mib:g} MiB = {limit / 1024:,.1f} MiB", flat))
    answered = pushed["requests"]["answeredPerSecond"] if pushed else 0
    sent = pushed["requests"]["sent"] / max(pushed["scheduleSeconds"], 1e-9) if pushed else 0
    print(f"soak: {len(samples)} samples over {time.time() - t0:,.0f} s, rate-scale {scale:g} (aimed at {rate:,.0f} "
          f"requests/s; offered {sent:,.0f} sent / schedule second), {answered:,.0f} answered/s; load "
          f"{min(loads)}–{max(loads)}; TSV {tsv}")
    for text, ok in checks:
        print(f"  {'ok  ' if ok else 'FAIL'} {text}")
    passed = all(ok for _, ok in checks)
    print(f"verdict: {'PASS' if passed else 'FAIL'}")
    sys.exit(0 if passed else 1)


if __name__ == "__main__":
    main()
