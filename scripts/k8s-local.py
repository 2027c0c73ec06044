#!/usr/bin/env python3
"""Run deploy/kubernetes/push-shards.yaml's own command on this machine, N times, as the Indexed Job's N pods would
run it, against serve.yaml's own command run M times (its M serve pods), then push-merge.yaml's command, and compare
the merged folder's counts with one unsharded `fanout push` of the same scenario and seed against M fresh serve pods:
exact equality, or exit 1.

What a pod gets, and what is replaced here (each replacement is printed when the script starts):
  - the container's command and args, exactly as the manifest writes them (`/bin/sh -c '...'`), run by /bin/sh;
  - an environment of only: the container's `env` entries as written, JOB_COMPLETION_INDEX=K (what Kubernetes sets
    in an Indexed Job's pod), HOSTNAME=<job>-K (the pod's hostname) and PATH with the directory of --fanout first (the
    image's fanout is on its PATH); nothing of this shell's environment but the sanitizer options (ASAN_OPTIONS,
    LSAN_OPTIONS, TSAN_OPTIONS) when set;
  - REPLACED: the volume's mountPath (/results) by a local folder, wherever it occurs in the args and env values (the
    push pods' barrier directory, /results/<RUN_ID>/barrier, is there too: every local pod sees it, as every pod
    sees the shared volume);
  - REPLACED: serve's listen address 0.0.0.0:2197 by 127.0.0.1:0 (M pods on one machine cannot share a port), and
    TARGETS, the M serve pods' URLs (http://fanout-serve-K.fanout-serve:2197,...), by the ports they print;
  - REPLACED when given: SHARDS and serve's PUSH_SHARDS by --shards N (the manifest's completions otherwise),
    SERVE_SHARDS by --serve-shards M (serve.yaml's completions otherwise), and any env entry by --set NAME=VALUE
    (e.g. a short DURATION and SCENARIO=smoke on one machine).
The serve pods end by themselves, as on a cluster, once the N push folders hold a summary.json. The reference run is
the push command as the shell expands it for index 0 (read through a stand-in `fanout` that records its
arguments), without --shard, --barrier, --barrier-margin, --barrier-timeout and --out, against M fresh serve pods
(PUSH_SHARDS=1, a results folder of their own). --late K=SECONDS launches push pod K that long after the others (a
pod scheduled late): the barrier holds (every shard starts at one instant) or the late pod refuses (exit 7, named by
the merge); which one is printed, with each shard's start and the spread.

  scripts/k8s-local.py --fanout .build/release/fanout --shards 4 --set SCENARIO=smoke --set DURATION=10
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

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MANIFESTS = os.path.join(ROOT, "deploy", "kubernetes")
SERVE_LISTEN = ("0.0.0.0:2197", "127.0.0.1:0")
SHARD_EXIT_OK = {0: "fine", 3: "generator saturated (folder written, counts still compared)"}
SHARD_EXIT_REFUSED = {7: "refused to start: too late for the barrier's start", 8: "barrier not met"}


def fail(text):
    print(f"k8s-local: {text}", file=sys.stderr)
    sys.exit(1)


def job(path, name):
    """The Job `name` of the manifest file `path`, and its one container."""
    with open(path, encoding="utf-8") as f:
        for doc in yaml.safe_load_all(f):
            if doc and doc.get("kind") == "Job" and doc["metadata"]["name"] == name:
                containers = doc["spec"]["template"]["spec"]["containers"]
                if len(containers) != 1:
                    fail(f"{path}: job {name} has {len(containers)} containers, not 1")
                return doc, containers[0]
    fail(f"{path}: no Job named {name}")


def mount_path(container):
    mounts = container.get("volumeMounts", [])
    if len(mounts) != 1:
        fail(f"container {container['name']}: {len(mounts)} volume mounts, not 1")
    return mounts[0]["mountPath"]


def replace_mount(text, mount, local):
    """`mount` (e.g. /results) as a path prefix in `text` → `local`."""
    return re.sub(re.escape(mount) + r"(?=/|$|\s|\")", local.replace("\\", "\\\\"), text)


def pod_env(container, mount, local, overrides):
    """The container's env entries as written, with the replacements this script makes (see the module's doc)."""
    env = {}
    for entry in container.get("env", []):
        name = entry["name"]
        if "value" not in entry:
            fail(f"env {name}: not a value (this script makes no ConfigMap nor Secret): {entry}")
        env[name] = replace_mount(str(entry["value"]), mount, local)
    for name, value in overrides.items():
        if name in env:
            env[name] = value
    return env


def pod_process_env(env, job_name, index, fanout_dir):
    full = dict(env)
    full["JOB_COMPLETION_INDEX"] = str(index)
    full["HOSTNAME"] = f"{job_name}-{index}"
    full["PATH"] = fanout_dir + os.pathsep + "/usr/local/bin:/usr/bin:/bin"
    # Not the pod's, but this machine's test harness's: a sanitizer build's options (LeakSanitizer's suppressions
    # of the toolchain's own leaks) reach the fanout it runs (`make test-sanitizers`).
    for name in ("ASAN_OPTIONS", "LSAN_OPTIONS", "TSAN_OPTIONS"):
        if name in os.environ:
            full[name] = os.environ[name]
    return full


def container_argv(container, mount, local):
    """command + args as written, the mount path replaced."""
    return [replace_mount(a, mount, local) for a in container.get("command", []) + container.get("args", [])]


def expanded_arguments(argv, env, workdir, tag):
    """The arguments `fanout` gets when the shell runs `argv` with `env`: run once with a stand-in `fanout` first
    on PATH that writes them (NUL-separated) to a file and exits 0."""
    shim_dir = os.path.join(workdir, f"argv-{tag}")
    os.makedirs(shim_dir)
    out = os.path.join(shim_dir, "argv")
    shim = os.path.join(shim_dir, "fanout")
    with open(shim, "w", encoding="utf-8") as f:
        f.write(f"#!/bin/sh\nprintf '%s\\0' \"$@\" > '{out}'\n")
    os.chmod(shim, 0o755)
    e = dict(env)
    e["PATH"] = shim_dir + os.pathsep + e["PATH"]
    subprocess.run(argv, env=e, cwd=workdir, check=True)
    with open(out, "rb") as f:
        return [a.decode() for a in f.read().split(b"\0")[:-1]]


class ServePods:
    """serve.yaml's container run as its M pods (`/bin/sh -c` as written, the listen address replaced), each printing
    its port; they end by themselves once PUSH_SHARDS push folders of their RUN_ID hold a summary.json."""

    def __init__(self, job_doc, container, mount, results, overrides, m, fanout_dir, workdir, tag):
        name = job_doc["metadata"]["name"]
        argv = container_argv(container, mount, results)
        if not any(SERVE_LISTEN[0] in a for a in argv):
            fail(f"serve.yaml: the command does not listen on {SERVE_LISTEN[0]}: {argv}")
        argv = [a.replace(*SERVE_LISTEN) for a in argv]
        env = pod_env(container, mount, results, overrides)
        self.pods, self.urls, self.logs = [], [], []
        for k in range(m):
            log_path = os.path.join(workdir, f"{tag}-{k}.log")
            log = open(log_path, "w", encoding="utf-8")
            self.logs.append(log_path)
            self.pods.append((subprocess.Popen(argv, env=pod_process_env(env, name, k, fanout_dir), cwd=workdir,
                                               stdout=log, stderr=subprocess.STDOUT), log))
        for k, (process, _) in enumerate(self.pods):
            deadline = time.monotonic() + 120
            while True:
                with open(self.logs[k], encoding="utf-8", errors="replace") as f:
                    m_ = re.search(r"listening on 127\.0\.0\.1:([0-9]+)", f.read())
                if m_:
                    self.urls.append(f"http://127.0.0.1:{m_.group(1)}")
                    break
                if process.poll() is not None or time.monotonic() > deadline:
                    self.kill()
                    fail(f"serve pod {k} did not start: {open(self.logs[k], encoding='utf-8').read()[-2000:]}")
                time.sleep(0.05)

    def kill(self):
        for process, _ in self.pods:
            if process.poll() is None:
                process.kill()

    def wait(self, timeout=120):
        """Each pod's exit: by itself (the push folders are there), or SIGTERM to its shell past `timeout`."""
        deadline = time.monotonic() + timeout
        statuses = []
        for k, (process, log) in enumerate(self.pods):
            try:
                status = process.wait(max(1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                process.send_signal(signal.SIGTERM)
                process.wait(60)
                log.close()
                fail(f"serve pod {k} did not end by itself once the push folders were written")
            log.close()
            statuses.append(status)
        for k, status in enumerate(statuses):
            if status != 0:
                fail(f"serve pod {k} exited {status}: {open(self.logs[k], encoding='utf-8').read()[-2000:]}")


def summary(folder):
    with open(os.path.join(folder, "summary.json"), encoding="utf-8") as f:
        return json.load(f)


def counts(s):
    """The counts a merged push and an unsharded one must agree on exactly (latencies differ run to run)."""
    r = s["requests"]
    c = {k: s[k] for k in ("events", "tokenPushes", "broadcasts")}
    for k in ("sent", "submitted", "failed", "unansweredAtEnd"):
        c["requests." + k] = r[k]
    c["requests.byStatus"] = dict(sorted(r["byStatus"].items()))
    c["requests.byReason"] = dict(sorted(r["byReason"].items()))
    c["latency.count"] = s["latency"]["count"]
    return c


def option_value(args, name):
    if name not in args or args.index(name) + 1 >= len(args):
        fail(f"the command has no {name} VALUE: {args}")
    return args[args.index(name) + 1]


def without_options(args, names):
    out, i = [], 0
    while i < len(args):
        if args[i] in names:
            i += 2
            continue
        out.append(args[i])
        i += 1
    return out


def start_lines(folder, label):
    """A push folder's start: its barrier's start, its own actual t0, and what refused it."""
    s = summary(folder)
    start, barrier = s.get("startAt") or {}, s.get("barrier") or {}
    started = start.get("startedUnixNanos")
    fixed = barrier.get("startUnixNanos")
    text = f"  {label}: ready {barrier.get('ownReadyUnixNanos', 0) / 1e9:.3f}"
    if fixed:
        text += f", barrier start {fixed / 1e9:.3f}"
    if started:
        text += f", started {started / 1e9:.6f} (skew {start.get('skewNanos', 0) / 1e6:.3f} ms)"
    if start.get("refused"):
        text += f", REFUSED: {start['refused']}"
    return text


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--fanout", default=os.path.join(ROOT, ".build", "release", "fanout"), help="the fanout binary")
    p.add_argument("--shards", type=int, help="N push pods (default: push-shards.yaml's completions)")
    p.add_argument("--serve-shards", type=int, help="M serve pods (default: serve.yaml's completions)")
    p.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", help="replace an env entry")
    p.add_argument("--late", metavar="K=SECONDS", help="launch push pod K this long after the others")
    p.add_argument("--workdir", help="where /results goes (default: a new temporary folder, kept)")
    a = p.parse_args()

    fanout = os.path.abspath(a.fanout)
    if not os.access(fanout, os.X_OK):
        fail(f"no fanout binary at {fanout} (swift build -c release, or --fanout)")
    push_job, push = job(os.path.join(MANIFESTS, "push-shards.yaml"), "fanout-push-shards")
    merge_job, merge = job(os.path.join(MANIFESTS, "push-merge.yaml"), "fanout-push-merge")
    serve_job, serve = job(os.path.join(MANIFESTS, "serve.yaml"), "fanout-serve")
    for doc, count in ((push_job, "SHARDS"), (serve_job, "SERVE_SHARDS")):
        spec = doc["spec"]
        env = {e["name"]: e.get("value") for e in (push if doc is push_job else serve).get("env", [])}
        if spec.get("completionMode") != "Indexed":
            fail(f"{doc['metadata']['name']}: the Job is not Indexed")
        if not (spec["parallelism"] == spec["completions"] == int(env[count])):
            fail(f"{doc['metadata']['name']}: completions {spec['completions']}, parallelism {spec['parallelism']} "
                 f"and {count} {env[count]} differ")
    push_env = {e["name"]: e.get("value") for e in push.get("env", [])}
    serve_env = {e["name"]: e.get("value") for e in serve.get("env", [])}
    n = a.shards or push_job["spec"]["completions"]
    m = a.serve_shards or serve_job["spec"]["completions"]
    overrides = {}
    for item in a.set:
        name, sep, value = item.partition("=")
        if not sep or (name not in push_env and name not in serve_env):
            fail(f"--set {item}: not NAME=VALUE of an env entry of push-shards.yaml or serve.yaml "
                 f"({', '.join(sorted(set(push_env) | set(serve_env)))})")
        overrides[name] = value
    overrides["SHARDS"] = str(n)
    overrides["PUSH_SHARDS"] = str(n)
    overrides["SERVE_SHARDS"] = str(m)
    late_k, late_seconds = None, 0.0
    if a.late:
        k_text, sep, seconds_text = a.late.partition("=")
        if not sep or not k_text.isdigit() or int(k_text) >= n:
            fail(f"--late {a.late}: expected K=SECONDS with K from 0 to {n - 1}")
        late_k, late_seconds = int(k_text), float(seconds_text)

    workdir = os.path.abspath(a.workdir) if a.workdir else tempfile.mkdtemp(prefix="fanout-k8s-local-")
    os.makedirs(workdir, exist_ok=True)
    results = os.path.join(workdir, "results")
    os.makedirs(results)
    mount = mount_path(push)
    for other, name in ((merge, "push-merge.yaml"), (serve, "serve.yaml")):
        if mount_path(other) != mount:
            fail(f"{name} mounts the volume at {mount_path(other)}, push-shards.yaml at {mount}")
    fanout_dir = os.path.dirname(fanout)

    serve_pods = ServePods(serve_job, serve, mount, results, overrides, m, fanout_dir, workdir, "serve-pod")
    targets = push_env["TARGETS"]
    overrides["TARGETS"] = ",".join(serve_pods.urls)
    print(f"k8s-local: {m} pods of serve.yaml's Job, {n} of push-shards.yaml's, then push-merge.yaml's, in {workdir}")
    print(f"  REPLACED mountPath {mount} -> {results}")
    print(f"  REPLACED serve --listen {SERVE_LISTEN[0]} -> {SERVE_LISTEN[1]} (M pods on one machine)")
    print(f"  REPLACED TARGETS {targets} -> {overrides['TARGETS']} (the local serve pods)")
    for name, value in overrides.items():
        if name != "TARGETS":
            was = push_env.get(name, serve_env.get(name))
            print(f"  REPLACED {name} {was} -> {value}")
    print(f"  PATH: {fanout_dir} first")
    if late_k is not None:
        print(f"  push pod {late_k} launched {late_seconds:g} s after the others")

    env = pod_env(push, mount, results, overrides)
    argv = container_argv(push, mount, results)
    processes = []
    order = sorted(range(n), key=lambda k: k == late_k)
    launched = time.monotonic()
    for k in order:
        if k == late_k:
            time.sleep(max(0.0, launched + late_seconds - time.monotonic()))
        log = open(os.path.join(workdir, f"push-shard-{k}.log"), "w", encoding="utf-8")
        processes.append((k, subprocess.Popen(argv, env=pod_process_env(env, push_job["metadata"]["name"], k,
                                                                        fanout_dir),
                                              cwd=workdir, stdout=log, stderr=subprocess.STDOUT), log))
    refused = []
    for k, process, log in sorted(processes):
        status = process.wait()
        log.close()
        if status in SHARD_EXIT_REFUSED and late_k is not None:
            refused.append(k)
            print(f"  pod {k}: exit {status} ({SHARD_EXIT_REFUSED[status]})")
            continue
        if status not in SHARD_EXIT_OK:
            serve_pods.kill()
            fail(f"pod {k} exited {status}: {open(log.name, encoding='utf-8').read()[-2000:]}")
        print(f"  pod {k}: exit {status} ({SHARD_EXIT_OK[status]})")
    serve_pods.wait()
    print(f"  serve pods: exit 0, each ended by itself once the {n} push folders were written")

    # Each pod's folder, from the arguments the shell gave fanout there (read through the stand-in).
    for k in range(n):
        pod_args = expanded_arguments(argv, pod_process_env(env, push_job["metadata"]["name"], k, fanout_dir),
                                      workdir, f"push-{k}")
        folder = option_value(pod_args, "--out")
        s = summary(folder)
        if s.get("shard") != f"{k}/{n}":
            fail(f"pod {k}'s folder says shard {s.get('shard')}, not {k}/{n}")
        print(start_lines(folder, f"pod {k}"))
    merge_env = pod_process_env(pod_env(merge, mount, results, {}), merge_job["metadata"]["name"], 0, fanout_dir)
    merge_env.pop("JOB_COMPLETION_INDEX")  # the merge Job is not Indexed
    merge_argv = container_argv(merge, mount, results)
    merged = option_value(expanded_arguments(merge_argv, merge_env, workdir, "merge"), "--out")
    mr = subprocess.run(merge_argv, env=merge_env, cwd=workdir, capture_output=True, text=True)
    start = summary(merged).get("startAt") or {} if os.path.exists(os.path.join(merged, "summary.json")) else {}
    if start.get("spreadNanos") is not None:
        print(f"  shard starts spread {start['spreadNanos'] / 1e6:.3f} ms (latest − earliest), within "
              f"--max-start-skew: {start.get('withinSkew')}")
    if refused:
        if mr.returncode != 7 or not all(f"shard {k}/{n}" in mr.stderr for k in refused):
            fail(f"pods {refused} refused, but the merge exited {mr.returncode}: {mr.stderr}")
        print(f"  merge: exit 7, naming the late pod: {mr.stderr.strip()}")
        print(f"k8s-local: the late pod refused to start; the merged folder says so ({merged})")
        return
    if mr.returncode != 0:
        fail(f"the merge Job's command exited {mr.returncode}: {mr.stderr}")
    print(f"  merge: exit 0 -> {merged}")
    if late_k is not None:
        print(f"  the barrier held: pod {late_k}, launched {late_seconds:g} s late, started with the others")

    # The reference: one unsharded push, the same command without --shard, the barrier and --out, against M fresh
    # serve pods of their own (waiting for 1 push folder).
    ref_results = os.path.join(workdir, "results-reference")
    os.makedirs(ref_results)
    ref_overrides = dict(overrides, PUSH_SHARDS="1")
    ref_serve = ServePods(serve_job, serve, mount, ref_results, ref_overrides, m, fanout_dir, workdir,
                          "serve-reference")
    ref_env = pod_process_env(pod_env(push, mount, ref_results, dict(ref_overrides, TARGETS=",".join(ref_serve.urls))),
                              push_job["metadata"]["name"], 0, fanout_dir)
    ref_args = expanded_arguments(container_argv(push, mount, ref_results), ref_env, workdir, "reference")
    reference = option_value(ref_args, "--out")
    ref_argv = [fanout] + without_options(
        ref_args, {"--shard", "--barrier", "--barrier-margin", "--barrier-timeout", "--start-at", "--out"}) + [
        "--out", reference]
    print(f"  reference: {' '.join(ref_argv)}")
    r = subprocess.run(ref_argv, capture_output=True, text=True)
    if r.returncode not in SHARD_EXIT_OK:
        ref_serve.kill()
        fail(f"the unsharded push exited {r.returncode}: {r.stderr[-2000:]}")
    ref_serve.wait()
    print(f"  reference: exit {r.returncode} ({SHARD_EXIT_OK[r.returncode]})")

    got, want = counts(summary(merged)), counts(summary(reference))
    width = max(len(k) for k in want)
    for key in want:
        mark = "" if got.get(key) == want[key] else "   <-- differs"
        print(f"  {key:<{width}}  merged {json.dumps(got.get(key))}  unsharded {json.dumps(want[key])}{mark}")
    if summary(merged).get("shards") != n:
        fail(f"the merged folder says {summary(merged).get('shards')} shards, not {n}")
    if got != want:
        fail("the merged counts differ from the unsharded run's")
    if want["requests.sent"] == 0:
        fail("nothing was sent")
    print(f"k8s-local: {n} shards merged equal one unsharded run ({want['requests.sent']} requests, {m} serve pods)")


if __name__ == "__main__":
    main()
