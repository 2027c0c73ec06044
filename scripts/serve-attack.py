#!/usr/bin/env python3
"""make serve-attack: hostile clients against `fanout serve default` on 2 loops, all at once, and what it did.

The attacks (each its own process, bounded in count and time, on 127.0.0.1 only):
  reset     rounds of pipelined requests (> 64 KiB, never read), each ended by a reset (SO_LINGER 0)
  noread    connections that pipeline requests answered with bodies and never read a byte
  flood     10,000 connections at once, each sending the HTTP/2 preface, held open
  churn     channel create/delete cycles for --churn-seconds (default 60)
  iat       provider tokens with an `iat` in the future and at the extremes, and one bad token repeated
  stall     5,000 streams opened (HEADERS without END_STREAM) and never finished
Meanwhile a prober (its own process) sends a valid token push every 200 ms on its own connection and times
its 200. Then SIGTERM. Checks: the server never dies, peak resident memory (VmHWM) under --budget-mib, every
probe answered 200 within --probe-ms, the run folder written within drain + 1 s of SIGTERM; the summary's
connection counts (refusals, resets, end reasons) are printed. Exit 1 when a check fails.

    scripts/serve-attack.py [--binary .build/release/fanout] [--workers 2] [--churn-seconds 60] [--out FILE]
"""
import argparse
import base64
import datetime
import json
import multiprocessing
import os
import re
import resource
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time

import h2.config
import h2.connection
import h2.events
import h2.exceptions
import h2.settings
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

KID, TEAM = "ATTACK1234", "TEAM123456"
TOPIC = "com.example.scores.push-type.liveactivity"


def b64(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def jwt(key, iat, kid=KID):
    """An ES256 provider token; `iat` is put in the claims as given (int, float or string)."""
    header = b64(json.dumps({"alg": "ES256", "kid": kid}).encode())
    claims = b64(json.dumps({"iss": TEAM, "iat": iat}).encode())
    r, s = decode_dss_signature(key.sign(f"{header}.{claims}".encode(), ec.ECDSA(hashes.SHA256())))
    return f"{header}.{claims}.{b64(r.to_bytes(32, 'big') + s.to_bytes(32, 'big'))}"


def payload(timestamp):
    return json.dumps({"aps": {"event": "update", "timestamp": timestamp, "content-state": {
        "home": 2, "away": 1, "clock": "81:00", "winProbability": 0.71, "final": False,
        "lastEvent": "goal"}}}).encode()


def push_headers(token, path):
    return [(":method", "POST"), (":path", path), (":scheme", "http"), (":authority", "localhost"),
            ("authorization", f"bearer {token}"), ("apns-push-type", "liveactivity"), ("apns-topic", TOPIC)]


class Conn:
    """One HTTP/2 connection driven by hand (python-hyper's h2), so that it can misbehave."""

    def __init__(self, port, timeout=10, receive_buffer=None):
        if receive_buffer:
            # A small kernel receive buffer: what the client does not read waits on the server's side.
            self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
            self.sock.settimeout(timeout)
            self.sock.connect(("127.0.0.1", port))
        else:
            self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.h2 = h2.connection.H2Connection(config=h2.config.H2Configuration(client_side=True))
        self.h2.initiate_connection()
        self.sock.sendall(self.h2.data_to_send())
        self.done, self.status, self.headers, self.resets, self.closed = set(), {}, {}, set(), False

    def send(self, headers, body=b"", end=True):
        sid = self.h2.get_next_available_stream_id()
        self.h2.send_headers(sid, headers, end_stream=end and not body)
        if body:
            self.h2.send_data(sid, body, end_stream=end)
        return sid

    def flush(self):
        data = self.h2.data_to_send()
        if data:
            self.sock.sendall(data)

    def read(self, until, seconds):
        deadline = time.time() + seconds
        while not until() and not self.closed and time.time() < deadline:
            try:
                data = self.sock.recv(65536)
            except socket.timeout:
                continue
            if not data:
                self.closed = True
                break
            try:
                events = self.h2.receive_data(data)
            except h2.exceptions.ProtocolError:
                self.closed = True
                break
            for e in events:
                if isinstance(e, h2.events.ResponseReceived):
                    self.headers[e.stream_id] = {k.decode(): v.decode() for k, v in e.headers}
                    self.status[e.stream_id] = int(self.headers[e.stream_id][":status"])
                elif isinstance(e, h2.events.DataReceived):
                    self.h2.acknowledge_received_data(e.flow_controlled_length, e.stream_id)
                elif isinstance(e, h2.events.StreamEnded):
                    self.done.add(e.stream_id)
                elif isinstance(e, h2.events.StreamReset):
                    self.resets.add(e.stream_id)
                elif isinstance(e, h2.events.ConnectionTerminated):
                    self.closed = True
            self.flush()
        return until()

    def request(self, headers, body=b"", seconds=10):
        sid = self.send(headers, body)
        self.flush()
        self.read(lambda: sid in self.done or sid in self.resets, seconds)
        return self.status.get(sid)

    def reset_close(self):
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.sock.close()


def key_from(path):
    with open(path, "rb") as f:
        return serialization.load_pem_private_key(f.read(), password=None)


def attacker(target):
    """An attack process at a lower CPU priority than the prober: on a 2-core machine the attackers' own Python
    would otherwise delay the prober's reads and count as the server's latency."""
    def run(*args):
        os.nice(10)
        target(*args)
    return run


def probe(port, key_path, token, seconds, results):
    """A valid push every 200 ms on one connection: (status, milliseconds) for each."""
    key, out = key_from(key_path), []
    bearer = jwt(key, int(time.time()))
    conn, stamp, end = Conn(port), int(time.time()) + 100_000, time.time() + seconds
    while time.time() < end:
        stamp += 1
        started = time.perf_counter()
        try:
            status = conn.request(push_headers(bearer, f"/3/device/{token}"), payload(stamp), seconds=5)
        except OSError:
            status = None
        out.append((status, (time.perf_counter() - started) * 1000))
        if status is None:
            conn = Conn(port)
        time.sleep(max(0.0, 0.2 - (time.perf_counter() - started)))
    results.put(("probe", out))


def authed(port, key, token, receive_buffer=None):
    """A connection past its first valid token (so its stream limit is raised)."""
    conn = Conn(port, receive_buffer=receive_buffer)
    bearer = jwt(key, int(time.time()))
    conn.request(push_headers(bearer, f"/3/device/{token}"), payload(int(time.time()) + 1))
    return conn, bearer


def reset_attack(port, key_path, token, results, rounds=10, streams=900):
    key, sent = key_from(key_path), 0
    for _ in range(rounds):
        conn, bearer = authed(port, key, token)
        for i in range(streams):
            conn.send(push_headers(bearer, f"/3/device/{token}"), payload(2_000_000_000 + i))
        data = conn.h2.data_to_send()
        try:
            conn.sock.settimeout(5)
            conn.sock.sendall(data)
            sent += len(data)
        except OSError:
            pass
        time.sleep(0.2)  # the answers queue up unread
        conn.reset_close()
    results.put(("reset", {"rounds": rounds, "bytesPipelined": sent}))


def noread_attack(port, key_path, token, seconds, results, connections=20, streams=900, channels=1000):
    """Clients that open their flow-control windows wide, ask for the largest answers there are (`all-channels`
    lists of an app with `channels` live channels) and then never read a byte."""
    key = key_from(key_path)
    setup, bearer = authed(port, key, token)
    base = [(":scheme", "http"), (":authority", "localhost"), ("authorization", f"bearer {bearer}"),
            ("apns-push-type", "liveactivity")]
    body = json.dumps({"message-storage-policy": 0, "push-type": "LiveActivity"}).encode()
    created = 0
    for _ in range(channels):
        status = setup.request([(":method", "POST"), (":path", "/1/apps/com.example.news/channels")] + base, body)
        created += status == 201
    setup.sock.close()
    held = []
    for _ in range(connections):
        conn, bearer = authed(port, key, token, receive_buffer=4096)
        conn.h2.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 2**31 - 1})
        conn.h2.increment_flow_control_window(2**31 - 1 - 65535)
        headers = [(":method", "GET"), (":path", "/1/apps/com.example.news/all-channels"), (":scheme", "http"),
                   (":authority", "localhost"), ("authorization", f"bearer {bearer}")]
        for _ in range(streams):
            conn.send(headers)
        try:
            conn.sock.settimeout(5)
            conn.sock.sendall(conn.h2.data_to_send())
        except OSError:
            pass
        held.append(conn)
    time.sleep(seconds)
    for conn in held:
        conn.reset_close()
    results.put(("noread", {"connections": connections, "streamsEach": streams, "channelsListed": created}))


def flood_attack(port, results, count=10_000, hold=10):
    preface = h2.connection.H2Connection(config=h2.config.H2Configuration(client_side=True))
    preface.initiate_connection()
    hello = preface.data_to_send()
    socks, failed = [], 0
    for _ in range(count):
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=2)
            s.sendall(hello)
            socks.append(s)
        except OSError:
            failed += 1
    time.sleep(hold)
    closed_by_server = 0
    for s in socks:
        s.setblocking(False)
        try:
            if s.recv(65536) == b"":
                closed_by_server += 1
        except BlockingIOError:
            pass
        except OSError:
            closed_by_server += 1
        s.close()
    results.put(("flood", {"opened": len(socks), "connectFailed": failed, "closedByServer": closed_by_server}))


def churn_attack(port, key_path, token, seconds, results):
    key, cycles, statuses = key_from(key_path), 0, {}
    conn, bearer = authed(port, key, token)
    base = [(":scheme", "http"), (":authority", "localhost"), ("authorization", f"bearer {bearer}"),
            ("apns-push-type", "liveactivity")]
    body = json.dumps({"message-storage-policy": 0, "push-type": "LiveActivity"}).encode()
    end = time.time() + seconds
    while time.time() < end and not conn.closed:
        sid = conn.send([(":method", "POST"), (":path", "/1/apps/com.example.scores/channels")] + base, body)
        conn.flush()
        conn.read(lambda: sid in conn.done or sid in conn.resets, 5)
        status = conn.status.get(sid)
        statuses[str(status)] = statuses.get(str(status), 0) + 1
        channel = conn.headers.get(sid, {}).get("apns-channel-id")
        if not channel:
            continue
        status = conn.request([(":method", "DELETE"), (":path", "/1/apps/com.example.scores/channels")] + base
                              + [("apns-channel-id", channel)])
        statuses[str(status)] = statuses.get(str(status), 0) + 1
        cycles += 1
    results.put(("churn", {"cycles": cycles, "seconds": seconds, "statuses": statuses}))


def iat_attack(port, key_path, token, results):
    key, seen = key_from(key_path), {}
    now = int(time.time())
    cases = {"future +1 day": now + 86_400, "future +10 min": now + 600, "Int64.min as string": "-9223372036854775808",
             "9e18": 9_000_000_000_000_000_000, "1e300": 1e300, "negative": -1}
    for name, iat in cases.items():
        conn = Conn(port)
        status = conn.request(push_headers(jwt(key, iat), f"/3/device/{token}"), payload(now + 5))
        seen[name] = status
        conn.sock.close()
    # One bad token, repeated on one connection (answered, never re-verified at cost).
    conn, bad = Conn(port), jwt(key, now + 86_400)
    statuses = {}
    for i in range(1000):
        status = conn.request(push_headers(bad, f"/3/device/{token}"), payload(now + 5), seconds=5)
        statuses[str(status)] = statuses.get(str(status), 0) + 1
        if conn.closed:
            break
    seen["same bad token x1000"] = statuses
    conn.sock.close()
    results.put(("iat", seen))


def stall_attack(port, key_path, token, seconds, results, streams=5000, per_connection=900):
    key, conns, opened = key_from(key_path), [], 0
    while opened < streams:
        conn, bearer = authed(port, key, token)
        n = min(per_connection, streams - opened)
        for _ in range(n):
            conn.send(push_headers(bearer, f"/3/device/{token}"), end=False)
        try:
            conn.flush()
        except OSError:
            pass
        opened += n
        conns.append(conn)
    resets = 0
    end = time.time() + seconds
    for conn in conns:
        conn.sock.settimeout(0.5)
        conn.read(lambda: False, max(0.1, (end - time.time()) / max(1, len(conns))))
        resets += len(conn.resets)
    for conn in conns:
        conn.reset_close()
    results.put(("stall", {"streamsOpened": opened, "connections": len(conns), "resetByServer": resets}))


def peak_rss_kib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            return int(re.search(r"VmHWM:\s+(\d+) kB", f.read()).group(1))
    except (OSError, AttributeError):
        return None


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--binary", default=".build/release/fanout")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--churn-seconds", type=float, default=60)
    parser.add_argument("--budget-mib", type=int, default=512)
    parser.add_argument("--probe-ms", type=float, default=100)
    parser.add_argument("--drain", type=float, default=2)
    parser.add_argument("--extra", default="", help="more serve flags, space-separated")
    parser.add_argument("--only", default="reset,noread,flood,churn,iat,stall",
                        help="the attacks to run, comma-separated (the prober always runs)")
    parser.add_argument("--memcheck", metavar="LOG",
                        help="run the server under valgrind memcheck (a debug build is best), its log to LOG: the "
                             "checks become the process's survival, its folder and memcheck's verdict (no error, "
                             "nothing definitely lost); time and memory are valgrind's, not judged")
    parser.add_argument("--out")
    args = parser.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))

    work = tempfile.mkdtemp(prefix="serve-attack-")
    key = ec.generate_private_key(ec.SECP256R1())
    key_path = f"{work}/key.pem"
    with open(key_path, "wb") as f:
        f.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                  serialization.NoEncryption()))
    folder, err = f"{work}/run", f"{work}/serve.err"
    help_text = subprocess.run([args.binary, "serve", "--help"], capture_output=True, text=True).stdout
    drain = ["--drain-timeout", str(args.drain)] if "--drain-timeout" in help_text else []
    drain_seconds = args.drain if drain else 5.0
    command = [args.binary, "serve", "default", "--workers", str(args.workers), "--h2c", "--auth", "jwt",
               "--auth-key", f"{KID}={key_path}", "--team", TEAM, "--listen", "127.0.0.1:0", "--out", folder]
    command += drain + args.extra.split()
    if args.memcheck:
        suppressions = os.path.join(os.path.dirname(os.path.abspath(__file__)), "valgrind.supp")
        command = ["valgrind", "--leak-check=full", "--errors-for-leak-kinds=definite", "--error-exitcode=99",
                   f"--suppressions={suppressions}", f"--log-file={os.path.abspath(args.memcheck)}"] + command
    with open(err, "w") as e:
        server = subprocess.Popen(command, stderr=e, stdout=subprocess.DEVNULL)
    port = None
    for _ in range(6000 if args.memcheck else 1200):
        m = re.search(r"listening on 127\.0\.0\.1:(\d+)", open(err).read())
        if m:
            port = int(m.group(1))
            break
        if server.poll() is not None:
            break
        time.sleep(0.1)
    if port is None:
        sys.exit("fanout serve did not start: " + open(err).read())
    with open(f"{folder}/population.jsonl") as f:
        tokens = [json.loads(line)["token"] for line in f if json.loads(line)["app"] == "com.example.scores"]
    rss_start = peak_rss_kib(server.pid)

    results = multiprocessing.Queue()
    span = args.churn_seconds
    jobs = [
        multiprocessing.Process(target=probe, args=(port, key_path, tokens[0], span + 5, results)),
        multiprocessing.Process(target=attacker(churn_attack), args=(port, key_path, tokens[1], span, results)),
        multiprocessing.Process(target=attacker(reset_attack), args=(port, key_path, tokens[2], results)),
        multiprocessing.Process(target=attacker(noread_attack), args=(port, key_path, tokens[3], span / 2, results)),
        multiprocessing.Process(target=attacker(iat_attack), args=(port, key_path, tokens[4], results)),
        multiprocessing.Process(target=attacker(stall_attack), args=(port, key_path, tokens[5], span / 2, results)),
        multiprocessing.Process(target=attacker(flood_attack), args=(port, results)),
    ]
    only = set(args.only.split(","))
    jobs = [jobs[0]] + [j for j, name in zip(jobs[1:], ["churn", "reset", "noread", "iat", "stall", "flood"])
                        if name in only]
    started = time.time()
    for job in jobs:
        job.start()
        time.sleep(0.5)
    seen, alive = {}, True
    while len(seen) < len(jobs) and time.time() - started < span + 120:
        try:
            name, value = results.get(timeout=1)
            seen[name] = value
        except Exception:
            pass
        alive = alive and server.poll() is None
    for job in jobs:
        job.join(timeout=5)
        if job.is_alive():
            job.kill()
    alive = alive and server.poll() is None
    rss_attack = peak_rss_kib(server.pid)

    sigterm = time.time()
    server.send_signal(signal.SIGTERM)
    peak = rss_attack
    while server.poll() is None and time.time() - sigterm < (600 if args.memcheck else 60):
        peak = peak_rss_kib(server.pid) or peak
        time.sleep(0.02)
    shutdown = time.time() - sigterm
    status = server.poll()
    summary = json.load(open(f"{folder}/summary.json")) if os.path.exists(f"{folder}/summary.json") else None

    probes = seen.get("probe", [])
    ok = [ms for s, ms in probes if s == 200]
    worst = max((ms for _, ms in probes), default=float("inf"))
    checks = {
        "server alive through the attack": alive,
        f"exit status 0 after SIGTERM": status == 0,
        f"run folder written within drain + 1 s ({drain_seconds + 1:.0f} s)": summary is not None
        and shutdown <= drain_seconds + 1,
        f"peak RSS <= {args.budget_mib} MiB": peak is not None and peak <= args.budget_mib * 1024,
        f"every probe answered 200 within {args.probe_ms:.0f} ms": bool(probes) and len(ok) == len(probes)
        and worst <= args.probe_ms,
        "every attack ran to its end": all(name in seen for name in only),
    }
    if args.memcheck:
        log = open(args.memcheck).read()
        lost = re.search(r"definitely lost: ([0-9,]+) bytes", log)
        errors = re.search(r"ERROR SUMMARY: ([0-9,]+) errors", log)
        checks = {
            "server alive through the attack": alive,
            "exit status 0 after SIGTERM (memcheck: no error, nothing definitely lost)": status == 0,
            "run folder written": summary is not None,
            f"memcheck: {errors.group(1) if errors else '?'} errors, definitely lost "
            f"{lost.group(1) if lost else '0'} bytes": bool(errors) and errors.group(1) == "0"
            and (lost is None or lost.group(1) == "0"),
        }
    revision = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True).stdout.strip()
    lines = [f"# fanout serve under attack — {datetime.date.today()}", "",
             f"Commit {revision}, `scripts/serve-attack.py` ({args.workers} loops, churn {span:.0f} s; "
             f"{os.cpu_count()} cores). Server: `{' '.join(os.path.basename(c) if c == args.binary else c for c in command).replace(work, '$TMP').replace(os.getcwd() + '/', '')}`.",
             "", "| check | result |", "|---|---|"]
    for name, passed in checks.items():
        lines.append(f"| {name} | {'pass' if passed else '**FAIL**'} |")
    probes_sorted = sorted(ms for _, ms in probes)
    lines += ["", f"Probes: {len(probes)} valid pushes, {len(ok)} answered 200; latency p50 "
              f"{probes_sorted[len(probes_sorted) // 2] if probes else 0:.1f} ms, max {worst:.1f} ms.",
              f"Resident memory: {rss_start / 1024 if rss_start else 0:.0f} MiB peak after start, "
              f"{(rss_attack or 0) / 1024:.0f} MiB peak through the attack, {(peak or 0) / 1024:.0f} MiB peak "
              f"including shutdown. SIGTERM → exit {status} in {shutdown:.2f} s.", "", "Attacks:", ""]
    for name in ["reset", "noread", "flood", "churn", "iat", "stall"]:
        lines.append(f"- {name}: `{json.dumps(seen.get(name, 'did not report'))}`")
    if summary:
        lines += ["", "The server's summary.json, `connections` (every refusal counted):", "", "```",
                  json.dumps(summary.get("connections", {}), indent=1, sort_keys=True), "```",
                  f"", f"Requests: `{json.dumps(summary.get('requests', {}).get('byReason', {}), sort_keys=True)}`"]
    if not alive or status != 0:
        lines += ["", "The server's last words (stderr):", "", "```"] + open(err).read().splitlines()[-15:] + ["```"]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    sys.exit(0 if all(checks.values()) else 1)


if __name__ == "__main__":
    main()
