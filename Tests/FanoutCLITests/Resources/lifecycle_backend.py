"""A small backend for fanout serve's token lifecycle (docs/INGEST.md §5): registrations, triggers, pushes back.

    python3 lifecycle_backend.py MODE PORTFILE LOG APNSPORTFILE [--ignore-app-events | --refuse-app-events]

MODE: healthy (keeps one token per activity: a registration of an activity replaces its token; a token answered
410 Unregistered is dropped), no-start (healthy, but never sends a kickoff's push-to-start), ignore-started (healthy,
but never pushes to an activity registered after serving started: a backend that never learns the activities a
push-to-start started), refuse-new (healthy, but answers 500 to a second registration of an activity: the new
token of a rotation is never learnt), keep-old (healthy, but a second registration of an activity is answered 200 and
its token ignored: a backend that never pushes to newly registered tokens) or hoarder (keeps every token ever registered for a source and never drops one, as a
backend that does not prune dead tokens). App events (POST /app-events: an activity dismissed, Live Activities turned
off, the app uninstalled): the activity is dropped and its token is dead, so nothing is pushed to it any more; with
--ignore-app-events they are answered 200 and ignored (a backend that keeps pushing to ended activities; a token
answered 410 is still dropped). Serves /register, /app-events and /trigger over HTTP/1.1 on 127.0.0.1:0 (the port
written to PORTFILE); each trigger is answered 200 at once and pushed by one worker thread, over HTTP/2 with prior
knowledge (httpx), to fanout serve on 127.0.0.1 at the port the test writes to APNSPORTFILE: one token push per
token of the source (apns-priority 5), or one broadcast for a channel. Kickoff (faults.kickoff): a registration
without an activity carries a device's push-to-start token and the source it follows; a trigger's "start" event is
pushed to every push-to-start token of its source (attributes, attributes-type and alert as the trigger carries
them), and each started activity's registration (its activity and token) then adds it to the source's followers. LOG
gets one JSON line per push: token, status, reason; and one per app event: appEvent (its kind), activity. Runs until
killed.
"""
import json
import os
import queue
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx

mode, port_file, log_path, apns_port_file = sys.argv[1:5]
ignore_app_events = "--ignore-app-events" in sys.argv[5:]
refuse_app_events = "--refuse-app-events" in sys.argv[5:]  # /app-events answered 500 (and ignored)
lock = threading.Lock()
token_of = {}  # healthy: activity -> token
followers = {}  # healthy: source -> set of activities
hoard = {}  # hoarder: source -> list of tokens
dead = set()
gone = set()  # activities an app event ended
starters = {}  # kickoff: source -> push-to-start tokens
serving = threading.Event()  # set by the first trigger: registrations after it come from started activities
work = queue.Queue()
log = open(log_path, "a", buffering=1)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"{}")
        status = 200
        if self.path.startswith("/app-events"):
            with lock:
                log.write(json.dumps({"appEvent": body["kind"], "activity": body["activity"]}) + "\n")
                if refuse_app_events:
                    status = 500
                elif not ignore_app_events:
                    gone.add(body["activity"])
                    dead.add(body["token"])
        elif self.path.startswith("/register"):
            with lock:
                if body.get("activity") is None:
                    starters.setdefault(body["source"], []).append(body["push-to-start-token"])
                elif mode == "ignore-started" and serving.is_set():
                    pass  # answered 200, the started activity never pushed to
                elif mode == "refuse-new" and body["activity"] in token_of:
                    status = 500
                elif mode == "keep-old" and body["activity"] in token_of:
                    pass  # answered 200, the new token never used
                elif mode != "hoarder":
                    token_of[body["activity"]] = body["token"]
                    followers.setdefault(body["source"], set()).add(body["activity"])
                else:
                    tokens = hoard.setdefault(body["source"], [])
                    if body["token"] not in tokens:
                        tokens.append(body["token"])
        else:
            serving.set()
            work.put(body)
        self.send_response(status)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")


def apns_port():
    while True:
        try:
            with open(apns_port_file) as f:
                text = f.read().strip()
            if text:
                return int(text)
        except OSError:
            pass
        time.sleep(0.02)


def pusher():
    client = httpx.Client(http1=False, http2=True, timeout=10)
    base = "http://127.0.0.1:%d" % apns_port()
    while True:
        event = work.get()
        aps = {"event": event["event"], "timestamp": event["timestamp"], "content-state": event["content-state"]}
        if event["event"] == "start":
            if mode == "no-start":
                continue
            for key in ("attributes-type", "attributes", "alert"):
                aps[key] = event[key]
            payload = json.dumps({"aps": aps}).encode()
            with lock:
                tokens = list(starters.get(event["source"], ()))
            for token in tokens:
                r = client.post(base + "/3/device/" + token, content=payload,
                                headers={"apns-push-type": "liveactivity", "apns-priority": "10",
                                         "apns-topic": event["app"] + ".push-type.liveactivity"})
                log.write(json.dumps({"start": token, "status": r.status_code}) + "\n")
            continue
        for key in ("stale-date", "relevance-score", "dismissal-date"):
            if event.get(key) is not None:
                aps[key] = event[key]
        payload = json.dumps({"aps": aps}).encode()
        topic = event["app"] + ".push-type.liveactivity"
        if event.get("channel"):
            client.post(base + "/4/broadcasts/apps/" + event["app"], content=payload,
                        headers={"apns-channel-id": event["channel"], "apns-push-type": "LiveActivity",
                                 "apns-priority": "5", "apns-expiration": "0"})
            continue
        with lock:
            if mode != "hoarder":
                tokens = [token_of[a] for a in sorted(followers.get(event["source"], ())) if a not in gone]
                tokens = [t for t in tokens if t not in dead]
            else:
                tokens = list(hoard.get(event["source"], ()))
        for token in tokens:
            r = client.post(base + "/3/device/" + token, content=payload,
                            headers={"apns-push-type": "liveactivity", "apns-topic": topic, "apns-priority": "5"})
            reason = ""
            if r.status_code != 200:
                reason = r.json().get("reason", "")
            log.write(json.dumps({"token": token, "status": r.status_code, "reason": reason}) + "\n")
            if r.status_code == 410 and mode != "hoarder":
                with lock:
                    dead.add(token)


threading.Thread(target=pusher, daemon=True).start()
server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
tmp = port_file + ".tmp"
with open(tmp, "w") as f:
    f.write(str(server.server_address[1]))
os.rename(tmp, port_file)
server.serve_forever()
