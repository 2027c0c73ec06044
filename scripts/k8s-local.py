#!/usr/bin/env python3
"""Run deploy/kubernetes/push-shards.yaml's own command on this machine, N times, as the Indexed Job's N pods would
run it, then push-merge.yaml's command, and compare the merged folder's counts with one unsharded `fanout push` of
the same scenario and seed against a fresh `fanout serve`: exact equality, or exit 1.

What a pod gets, and what is replaced here (each replacement is printed when the script starts):
  - the container's command and args, exactly as the manifest writes them (`/bin/sh -c '...'`), run by /bin/sh;
  - an environment of only: the container's `env` entries as written (a `value`, or START from the ConfigMap
    fanout-push-start, which is made at apply time: here now + --lead seconds), JOB_COMPLETION_INDEX=K (what
    Kubernetes sets in an Indexed Job's pod), HOSTNAME=<job>-K (the pod's hostname) and PATH with the directory of
    --fanout first (the image's fanout is on its PATH); nothing of this shell's environment but the sanitizer
    options (ASAN_OPTIONS, LSAN_OPTIONS, TSAN_OPTIONS) when set;
  - REPLACED: the volume's mountPath (/results) by a local folder, wherever it occurs in the args and env values;
  - REPLACED: TARGETS, the M serve pods' URLs (http://fanout-serve-K.fanout-serve:2197,...), by one local unsharded
    `fanout serve` on 127.0.0.1 (M = 1);
  - REPLACED when given: SHARDS by --shards N (the manifest's completions otherwise), and any env entry by
    --set NAME=VALUE (e.g. a short DURATION and SCENARIO=smoke on one machine).
The reference run is the same command as the shell expands it for index 0 (read through a stand-in `fanout` that
records its arguments), without --shard, --start-at and --out, against its own fresh serve.

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
START_CONFIGMAP = ("fanout-push-start", "START")
SHARD_EXIT_OK = {0: "fine", 3: "generator saturated (folder written, counts still compared)"}


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


def pod_env(container, mount, local, overrides, start):
    """The container's env entries as written, with the replacements this script makes (see the module's doc)."""
    env = {}
    for entry in container.get("env", []):
        name = entry["name"]
        if "value" in entry:
            env[name] = replace_mount(str(entry["value"]), mount, local)
        elif entry.get("valueFrom", {}).get("configMapKeyRef"):
            ref = entry["valueFrom"]["configMapKeyRef"]
            if (ref["name"], ref["key"]) != START_CONFIGMAP:
                fail(f"env {name}: from ConfigMap {ref['name']}/{ref['key']}, which this script does not make")
            env[name] = str(start)
        else:
            fail(f"env {name}: neither a value nor the START ConfigMap: {entry}")
    for name, value in overrides.items():
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


class Serve:
    """A local `fanout serve SCENARIO --seed SEED --h2c` on a free port of 127.0.0.1, stopped with SIGTERM."""

    def __init__(self, fanout, scenario, seed, folder):
        self.err_path = folder + ".err"
        self.err = open(self.err_path, "w", encoding="utf-8")
        argv = [fanout, "serve", scenario, "--h2c", "--listen", "127.0.0.1:0", "--out", folder]
        if seed is not None:
            argv += ["--seed", seed]
        self.argv = argv
        self.process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=self.err)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            with open(self.err_path, encoding="utf-8", errors="replace") as f:
                m = re.search(r"listening on 127\.0\.0\.1:([0-9]+)", f.read())
            if m:
                self.url = f"http://127.0.0.1:{m.group(1)}"
                return
            if self.process.poll() is not None:
                break
            time.sleep(0.05)
        self.process.kill()
        fail(f"fanout serve did not start: {open(self.err_path, encoding='utf-8').read()}")

    def stop(self):
        self.process.send_signal(signal.SIGTERM)
        try:
            status = self.process.wait(60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            status = self.process.wait()
        self.err.close()
        if status != 0:
            fail(f"fanout serve exited {status}: {open(self.err_path, encoding='utf-8').read()[-2000:]}")


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


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--fanout", default=os.path.join(ROOT, ".build", "release", "fanout"), help="the fanout binary")
    p.add_argument("--shards", type=int, help="N (default: the manifest's completions)")
    p.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", help="replace an env entry")
    p.add_argument("--lead", type=float, default=8, help="START = now + this many seconds (default 8)")
    p.add_argument("--workdir", help="where /results goes (default: a new temporary folder, kept)")
    a = p.parse_args()

    fanout = os.path.abspath(a.fanout)
    if not os.access(fanout, os.X_OK):
        fail(f"no fanout binary at {fanout} (swift build -c release, or --fanout)")
    push_job, push = job(os.path.join(MANIFESTS, "push-shards.yaml"), "fanout-push-shards")
    merge_job, merge = job(os.path.join(MANIFESTS, "push-merge.yaml"), "fanout-push-merge")
    spec = push_job["spec"]
    if spec.get("completionMode") != "Indexed":
        fail("push-shards.yaml: the Job is not Indexed")
    manifest_env = {e["name"]: e.get("value") for e in push.get("env", [])}
    n_manifest = spec["completions"]
    if not (spec["parallelism"] == n_manifest == int(manifest_env["SHARDS"])):
        fail(f"push-shards.yaml: completions {n_manifest}, parallelism {spec['parallelism']} and SHARDS "
             f"{manifest_env['SHARDS']} differ")
    n = a.shards or n_manifest
    overrides = {}
    for item in a.set:
        name, sep, value = item.partition("=")
        if not sep or name not in manifest_env:
            fail(f"--set {item}: not NAME=VALUE of an env entry of push-shards.yaml ({', '.join(manifest_env)})")
        overrides[name] = value
    overrides["SHARDS"] = str(n)

    workdir = os.path.abspath(a.workdir) if a.workdir else tempfile.mkdtemp(prefix="fanout-k8s-local-")
    os.makedirs(workdir, exist_ok=True)
    results = os.path.join(workdir, "results")
    os.makedirs(results)
    mount = mount_path(push)
    if mount_path(merge) != mount:
        fail(f"push-merge.yaml mounts the volume at {mount_path(merge)}, push-shards.yaml at {mount}")
    fanout_dir = os.path.dirname(fanout)
    start = int(time.time() + a.lead)

    given = {**manifest_env, **overrides}
    sharded_serve = Serve(fanout, given["SCENARIO"], given.get("SEED"), os.path.join(workdir, "serve-sharded"))
    targets = manifest_env["TARGETS"]
    overrides["TARGETS"] = sharded_serve.url
    print(f"k8s-local: {n} pods of push-shards.yaml's Job, then push-merge.yaml's, in {workdir}")
    print(f"  REPLACED mountPath {mount} -> {results}")
    print(f"  REPLACED TARGETS {targets} -> {sharded_serve.url} (one local unsharded serve)")
    print(f"  REPLACED START (ConfigMap {START_CONFIGMAP[0]}) -> {start} (now + {a.lead:g} s)")
    for name, value in overrides.items():
        if name != "TARGETS":
            print(f"  REPLACED {name} {manifest_env[name]} -> {value}")
    print(f"  PATH: {fanout_dir} first; serve: {' '.join(sharded_serve.argv)}")

    env = pod_env(push, mount, results, overrides, start)
    argv = container_argv(push, mount, results)
    processes = []
    for k in range(n):
        log = open(os.path.join(workdir, f"push-shard-{k}.log"), "w", encoding="utf-8")
        processes.append((k, subprocess.Popen(argv, env=pod_process_env(env, push_job["metadata"]["name"], k,
                                                                        fanout_dir),
                                              cwd=workdir, stdout=log, stderr=subprocess.STDOUT), log))
    for k, process, log in processes:
        status = process.wait()
        log.close()
        if status not in SHARD_EXIT_OK:
            sharded_serve.stop()
            fail(f"pod {k} exited {status}: {open(log.name, encoding='utf-8').read()[-2000:]}")
        print(f"  pod {k}: exit {status} ({SHARD_EXIT_OK[status]})")
    sharded_serve.stop()

    # Each pod's folder, from the arguments the shell gave fanout there (read through the stand-in).
    for k in range(n):
        pod_args = expanded_arguments(argv, pod_process_env(env, push_job["metadata"]["name"], k, fanout_dir),
                                      workdir, f"push-{k}")
        s = summary(option_value(pod_args, "--out"))
        if s.get("shard") != f"{k}/{n}":
            fail(f"pod {k}'s folder says shard {s.get('shard')}, not {k}/{n}")
    merge_env = pod_process_env(pod_env(merge, mount, results, {}, start), merge_job["metadata"]["name"], 0,
                                fanout_dir)
    merge_env.pop("JOB_COMPLETION_INDEX")  # the merge Job is not Indexed
    merge_argv = container_argv(merge, mount, results)
    merged = option_value(expanded_arguments(merge_argv, merge_env, workdir, "merge"), "--out")
    m = subprocess.run(merge_argv, env=merge_env, cwd=workdir, capture_output=True, text=True)
    if m.returncode != 0:
        fail(f"the merge Job's command exited {m.returncode}: {m.stderr}")
    print(f"  merge: exit 0 -> {merged}")

    # The reference: one unsharded push, the same command without --shard, --start-at and --out, its own serve.
    reference_serve = Serve(fanout, env["SCENARIO"], env.get("SEED"), os.path.join(workdir, "serve-reference"))
    ref_env = pod_process_env(env, push_job["metadata"]["name"], 0, fanout_dir)
    ref_env["TARGETS"] = reference_serve.url
    ref_args = expanded_arguments(argv, ref_env, workdir, "reference")
    reference = os.path.join(workdir, "reference")
    ref_argv = [fanout] + without_options(ref_args, {"--shard", "--start-at", "--out"}) + ["--out", reference]
    print(f"  reference: {' '.join(ref_argv)}")
    r = subprocess.run(ref_argv, capture_output=True, text=True)
    reference_serve.stop()
    if r.returncode not in SHARD_EXIT_OK:
        fail(f"the unsharded push exited {r.returncode}: {r.stderr[-2000:]}")
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
    print(f"k8s-local: {n} shards merged equal one unsharded run ({want['requests.sent']} requests)")


if __name__ == "__main__":
    main()
