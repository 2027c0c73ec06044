#!/usr/bin/env python3
"""A small Live Activity backend, the kind `fanout serve` is built to test (docs/INGEST.md §5).

It does what a real one does, in about 300 lines:
  POST /register  an app registers an activity's tokens (update token, push-to-start token, channel, source), or,
                  before a match starts, a device's push-to-start token and the source it follows (no activity
                  yet); kept in SQLite (the standard library's sqlite3).
  POST /app-events  the app's side ended an activity (dismissed, Live Activities turned off, app uninstalled):
                  the activity is deleted, so nothing is pushed to it again.
  POST /trigger   an event happened (a goal): one push per registered activity following the event's source,
                  or, for a `start` event (kickoff), one push-to-start per device's push-to-start token for the
                  source (priority 10), after which each device's app registers the activity it started;
                  through aioapns (HTTP/2, TLS, ES256 provider token); or, when the event carries a channel, one
                  broadcast to that channel (aioapns has no broadcast call, so httpx with HTTP/2 sends it).
The trigger is answered 202 once the event is in a bounded queue (--queue; full: 503, so the sender can tell) that
--workers tasks take events from; at most --concurrency pushes in flight. `aps.timestamp` is the event's
`timestamp`, unchanged: that is how fanout matches a push to its event. As APNs asks of a provider: a push or
broadcast refused 429, 500 or 503 (or lost with its connection) is sent again with the same `apns-id` after 100 ms,
200 ms, … (at most 5 s, --retries times); a token answered 410 Unregistered is deleted (pruned), so nothing is
sent to it again.

--drop-every N is a deliberate bug, there to show `fanout compare` failing a CI gate: each token fan-out skips its
N-th, 2N-th, … subscriber (the same ones every time, by registration order). Broadcasts are left alone: APNs fans
a broadcast out, the backend has no subscriber list to skip from. --drop-push-every N, --send-every N and
--wrong-content-every N plant other bugs (a lost push, a coalescing backend, a garbled content-state), each for a
count of fanout's judge to catch (skipped, freshness, wrongContent). --never-prune keeps tokens APNs answered 410;
--ignore-app-events keeps the activities the app said had ended (fanout counts pushes to them sentAfterAppEvent).

    python3 backend.py --listen 127.0.0.1:8080 --apns localhost:2197 --ca cert.pem \
        --auth-key KEYID=key.p8 --team TEAMID
"""
import argparse
import asyncio
import json
import sqlite3
import ssl
import time

import httpx
import jwt
from aiohttp import web
from aioapns import APNs, NotificationRequest, PushType
from aioapns.connection import APNsProductionClientProtocol


class Backend:
    def __init__(self, args):
        self.args = args
        self.apns_host, port = args.apns.rsplit(":", 1)
        self.apns_port = int(port)
        self.key_id, key_file = args.auth_key.split("=", 1)
        self.key = open(key_file).read()
        # Autocommit: each registration is visible at once to another instance sharing the file (--db), which may
        # get the source's events (fanout serve --register A,B --trigger A,B); WAL so that readers never wait.
        self.db = sqlite3.connect(args.db, isolation_level=None, timeout=30)
        if args.db != ":memory:":
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA synchronous=OFF")
        self.db.execute("CREATE TABLE IF NOT EXISTS activity (activity TEXT PRIMARY KEY, device TEXT, app TEXT, "
                        "source TEXT, token TEXT, start_token TEXT, channel TEXT)")
        self.db.execute("CREATE INDEX IF NOT EXISTS by_source ON activity (source, app)")
        # Kickoff by push-to-start: the devices waiting for a source's start, by their push-to-start token.
        self.db.execute("CREATE TABLE IF NOT EXISTS starter (device TEXT, app TEXT, source TEXT, start_token TEXT, "
                        "PRIMARY KEY (device, source))")
        self.clients = {}  # one aioapns client (connection pool) per app: the topic is the pool's
        self.slots = asyncio.Semaphore(args.concurrency)
        self.http = httpx.AsyncClient(http2=True, verify=ssl.create_default_context(cafile=args.ca), timeout=30)
        self.counts = {"registered": 0, "triggers": 0, "pushes": 0, "broadcasts": 0, "failed": 0, "dropped": 0,
                       "coalesced": 0, "garbled": 0, "retries": 0, "pruned": 0, "queueFull": 0,
                       "appEvents": 0, "starters": 0, "starts": 0}
        # Events waiting for a worker (bounded: a backend that takes more than it can send says so with a 503).
        self.queue = asyncio.Queue(maxsize=args.queue)
        self.workers = [asyncio.get_running_loop().create_task(self.work()) for _ in range(args.workers)]
        self.dropped = []  # (source, timestamp, token) of each push --drop-push-every dropped
        self.failures = []  # (token or channel, timestamp) of each push or broadcast APNs did not accept
        self.fanned = 0  # token pushes a fan-out meant to send, in order (--drop-push-every counts them)
        self.updates = {}  # source -> its updates triggered so far (--send-every counts them)
        self.garbled = []  # (source, timestamp) of each event whose content-state --wrong-content-every changed
        self.jwt, self.jwt_at = None, 0

    def apns(self, app):
        """aioapns's client for `app`, pointed at --apns instead of Apple's host."""
        if app not in self.clients:
            host, port = self.apns_host, self.apns_port

            class Protocol(APNsProductionClientProtocol):
                APNS_SERVER = host
                APNS_PORT = port

            client = APNs(key=self.key, key_id=self.key_id, team_id=self.args.team,
                          topic=f"{app}.push-type.liveactivity", max_connections=self.args.connections,
                          ssl_context=ssl.create_default_context(cafile=self.args.ca))
            client.pool.protocol_class = Protocol
            self.clients[app] = client
        return self.clients[app]

    def bearer(self):
        """The provider token for broadcasts, refreshed every 30 minutes as APNs asks."""
        if self.jwt is None or time.time() - self.jwt_at > 1800:
            self.jwt_at = int(time.time())
            self.jwt = jwt.encode({"iss": self.args.team, "iat": self.jwt_at}, self.key, algorithm="ES256",
                                  headers={"kid": self.key_id})
        return self.jwt

    async def register(self, request):
        r = await request.json()
        if r.get("activity") is None:  # a device waiting for a source's start: its push-to-start token
            self.db.execute("INSERT OR REPLACE INTO starter VALUES (?, ?, ?, ?)",
                            (r["device"], r["app"], r["source"], r["push-to-start-token"]))
            self.counts["starters"] += 1
            return web.Response(status=204)
        self.db.execute("INSERT OR REPLACE INTO activity VALUES (?, ?, ?, ?, ?, ?, ?)",
                        (r["activity"], r["device"], r["app"], r["source"], r["token"], r.get("push-to-start-token"),
                         r.get("channel")))
        self.counts["registered"] += 1
        return web.Response(status=204)

    async def app_event(self, request):
        """An activity ended on the app's side (docs/INGEST.md §5, *App events*): forgotten, so no push goes to it."""
        r = await request.json()
        self.counts["appEvents"] += 1
        if not self.args.ignore_app_events:
            self.db.execute("DELETE FROM activity WHERE activity = ?", (r["activity"],))
        return web.Response(status=204)

    async def trigger(self, request):
        event = await request.json()
        self.counts["triggers"] += 1
        if self.args.send_every and event["event"] == "update":  # a coalescing backend: every N-th update only
            n = self.updates[event["source"]] = self.updates.get(event["source"], 0) + 1
            if n % self.args.send_every != 0:
                self.counts["coalesced"] += 1
                return web.Response(status=202)
        if self.args.wrong_content_every and self.counts["triggers"] % self.args.wrong_content_every == 0:
            self.garble(event)
        try:
            self.queue.put_nowait(event)
        except asyncio.QueueFull:
            self.counts["queueFull"] += 1
            return web.Response(status=503, text="queue full")
        return web.Response(status=202)

    async def work(self):
        """One worker: takes events from the queue and fans each out (a failure is counted, the worker goes on)."""
        while True:
            event = await self.queue.get()
            try:
                await self.fan_out(event)
            except Exception as error:  # noqa: BLE001 - one bad event must not stop the worker
                self.counts["failed"] += 1
                print(f"backend: fan-out of {event.get('source')} failed: {error!r}", flush=True)
            finally:
                self.queue.task_done()

    async def attempts(self, send, target, payload):
        """Sends with `send()` (an awaitable giving the HTTP status as text, or None when the connection failed)
        until it is accepted, refused for good, or --retries retries of 429/500/503/no answer are spent; the
        outcome is counted. A token answered 410 is pruned (--never-prune: kept)."""
        for attempt in range(self.args.retries + 1):
            async with self.slots:
                try:
                    status = await send()
                except Exception:  # noqa: BLE001 - a connection that failed: retried like a 503
                    status = None
            if status == "200":
                return True
            if status == "410" and not self.args.never_prune:
                self.db.execute("DELETE FROM activity WHERE token = ?", (target,))
                self.counts["pruned"] += 1
                break
            if status in (None, "429", "500", "503") and attempt < self.args.retries:
                self.counts["retries"] += 1
                await asyncio.sleep(min(5.0, 0.1 * 2 ** attempt))
                continue
            break
        self.failed(target, payload)
        return False

    def garble(self, event):
        """The bug --wrong-content-every plants: the content-state's first field changed (a number + 1, a boolean
        flipped, a string reversed and extended)."""
        state = event.get("content-state") or {}
        if not state:
            return
        key = next(iter(state))
        value = state[key]
        if isinstance(value, bool):
            state[key] = not value
        elif isinstance(value, (int, float)):
            state[key] = value + 1
        elif isinstance(value, str):
            state[key] = value[::-1] + "x"
        else:
            return
        self.counts["garbled"] += 1
        self.garbled.append((event["source"], event["timestamp"]))

    async def fan_out(self, event):
        aps = {"event": event["event"], "timestamp": event["timestamp"], "content-state": event["content-state"]}
        if event["event"] == "start":  # kickoff: a push-to-start to every device waiting for the source
            for key in ("attributes-type", "attributes", "alert"):
                aps[key] = event[key]
            rows = self.db.execute("SELECT start_token FROM starter WHERE source = ? AND app = ? ORDER BY rowid",
                                   (event["source"], event["app"])).fetchall()
            await asyncio.gather(*(self.start(event["app"], token, {"aps": aps}) for (token,) in rows))
            return
        for key in ("stale-date", "relevance-score", "dismissal-date"):
            if event.get(key) is not None:
                aps[key] = event[key]
        if event.get("channel"):
            await self.broadcast(event["app"], event["channel"], {"aps": aps})
            return
        rows = self.db.execute("SELECT token FROM activity WHERE source = ? AND app = ? ORDER BY rowid",
                               (event["source"], event["app"])).fetchall()
        if self.args.drop_every:  # the deliberate bug (--drop-every): every N-th subscriber is never sent the push
            rows = [row for i, row in enumerate(rows, 1) if i % self.args.drop_every != 0]
        if self.args.drop_push_every:  # the other one (--drop-push-every): every N-th token push of the run, whoever
            kept = []
            for row in rows:
                self.fanned += 1
                if self.fanned % self.args.drop_push_every == 0:
                    self.counts["dropped"] += 1
                    self.dropped.append((event["source"], event["timestamp"], row[0]))
                else:
                    kept.append(row)
            rows = kept
        await asyncio.gather(*(self.push(event["app"], token, {"aps": aps}) for (token,) in rows))

    def failed(self, target, payload):
        self.counts["failed"] += 1
        self.failures.append((target, payload["aps"]["timestamp"]))

    async def push(self, app, token, payload):
        # One request object for every attempt: a retry carries the same apns-id.
        request = NotificationRequest(device_token=token, message=payload, push_type=PushType.LIVEACTIVITY,
                                      priority=self.args.priority)

        async def send():
            return (await self.apns(app).send_notification(request)).status

        if await self.attempts(send, token, payload):
            self.counts["pushes"] += 1

    async def start(self, app, token, payload):
        """A push-to-start (priority 10, as Apple asks of a start); a token answered 410 is pruned as any."""
        request = NotificationRequest(device_token=token, message=payload, push_type=PushType.LIVEACTIVITY,
                                      priority=10)

        async def send():
            return (await self.apns(app).send_notification(request)).status

        if await self.attempts(send, token, payload):
            self.counts["starts"] += 1

    async def broadcast(self, app, channel, payload):
        url = f"https://{self.args.apns}/4/broadcasts/apps/{app}"
        body = json.dumps(payload)

        async def send():
            headers = {"authorization": f"bearer {self.bearer()}", "apns-channel-id": channel,
                       "apns-push-type": "LiveActivity", "apns-priority": str(self.args.priority),
                       "apns-expiration": "0"}
            return str((await self.http.post(url, headers=headers, content=body)).status_code)

        if await self.attempts(send, channel, payload):
            self.counts["broadcasts"] += 1

    async def stats(self, request):
        if request.query.get("dropped"):  # /stats?dropped=1: the (source, timestamp, token) of each dropped push
            return web.json_response({"dropped": self.dropped, "failures": self.failures, "garbled": self.garbled})
        return web.json_response(self.counts)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--listen", default="127.0.0.1:8080", help="HOST:PORT for /register and /trigger")
    p.add_argument("--apns", required=True, help="the APNs endpoint, HOST:PORT (fanout serve's --listen)")
    p.add_argument("--ca", required=True, help="the CA (or self-signed certificate) the endpoint's TLS chains to")
    p.add_argument("--auth-key", required=True, help="KEYID=FILE: the .p8 (PEM) signing key")
    p.add_argument("--team", required=True, help="the team id (the provider token's iss)")
    p.add_argument("--db", default=":memory:",
                   help="SQLite file for registrations (several instances may share one file)")
    p.add_argument("--concurrency", type=int, default=256, help="pushes in flight at most")
    p.add_argument("--workers", type=int, default=32, help="tasks fanning events out (each one event at a time)")
    p.add_argument("--queue", type=int, default=10000,
                   help="events waiting for a worker at most; past it a trigger is answered 503")
    p.add_argument("--retries", type=int, default=3,
                   help="retries of a push or broadcast refused 429/500/503 or lost with its connection (same "
                        "apns-id; after 100 ms, 200 ms, … at most 5 s); 0: none")
    p.add_argument("--ignore-app-events", action="store_true",
                   help="a deliberate fault: keep pushing to activities the app said were dismissed, turned off or "
                        "uninstalled (fanout counts those pushes sentAfterAppEvent)")
    p.add_argument("--never-prune", action="store_true",
                   help="a deliberate fault: keep pushing to tokens APNs answered 410 Unregistered (fanout counts "
                        "those pushes sentToUnregistered)")
    # aioapns 4.0 keeps 2 streams per connection: it misses the raise of SETTINGS_MAX_CONCURRENT_STREAMS from 1 to
    # 1000 that APNs (and fanout serve) sends once the first provider token is accepted. More connections, more
    # streams (reports/benchmarks/faults-latency-2026-11-26.md in the fanout repository).
    p.add_argument("--connections", type=int, default=16, help="HTTP/2 connections per app (2 streams each)")
    p.add_argument("--priority", type=int, default=5, choices=[5, 10],
                   help="apns-priority of every push: 5 by default, as Apple asks for routine updates (priority 10 "
                        "counts against a per-activity budget; the devices throttle past it)")
    p.add_argument("--drop-every", type=int, default=0, metavar="N",
                   help="a deliberate fault, for demonstrating `fanout compare`: skip every N-th subscriber of each "
                        "token fan-out (broadcasts are not touched); 0, the default, drops nothing")
    p.add_argument("--drop-push-every", type=int, default=0, metavar="N",
                   help="another: drop every N-th token push of the run (a different subscriber each time, so most "
                        "are covered by the source's next event: fanout counts them skipped); /stats counts them")
    p.add_argument("--send-every", type=int, default=0, metavar="N",
                   help="a coalescing backend: push only every N-th update of each source (every end still goes "
                        "out); the others are answered 202 and counted coalesced in /stats; fanout counts the "
                        "followers' pairs skipped and their freshness shows how far behind the Lock Screens were")
    p.add_argument("--wrong-content-every", type=int, default=0, metavar="N",
                   help="a garbling backend: change the first content-state field of every N-th event triggered "
                        "(counted garbled in /stats); fanout counts those deliveries wrongContent")
    args = p.parse_args()
    if min(args.drop_every, args.drop_push_every, args.send_every, args.wrong_content_every, args.retries) < 0:
        p.error("--drop-every, --drop-push-every, --send-every, --wrong-content-every, --retries: expected 0 (off) "
                "or a positive N")
    if args.workers < 1 or args.queue < 1:
        p.error("--workers and --queue: expected a positive N")

    async def start():
        backend = Backend(args)
        app = web.Application()
        app.add_routes([web.post("/register", backend.register), web.post("/app-events", backend.app_event),
                        web.post("/trigger", backend.trigger),
                        web.get("/stats", backend.stats)])
        return app

    host, port = args.listen.rsplit(":", 1)
    web.run_app(start(), host=host, port=int(port), shutdown_timeout=1,
                print=lambda *_: print(f"backend: listening on {args.listen}", flush=True))


if __name__ == "__main__":
    main()
