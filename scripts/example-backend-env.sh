# Sourced by the scripts that run fanout against the example backend (examples/backend-aioapns): a self-signed
# TLS certificate and an ES256 provider key in a temporary folder, two free ports, the backend started with
# EXAMPLE_BACKEND_ARGS, and its cleanup on exit. Sets WORK, SERVE_PORT, BACKEND_PORT, BACKEND_URL and
# SERVE_FLAGS (what fanout serve needs to be the backend's APNs: listen, TLS, JWT). EXAMPLE_BACKEND_INSTANCES=N
# (default 1) starts N instances sharing one SQLite file (docs/BACKEND.md, *Several instances*); REGISTER_URLS and
# TRIGGER_URLS are then every instance's /register and /trigger, comma-separated (BACKEND_URL the first's).
WORK=$(mktemp -d)
backend_pids=()
# Each instance gets SIGTERM, and SIGKILL if it has not ended a second later (aioapns may still be retrying).
example_backend_cleanup() {
    for pid in ${backend_pids[@]+"${backend_pids[@]}"}; do
        kill "$pid" 2>/dev/null || true
        for _ in $(seq 1 10); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$pid" 2>/dev/null || true
    done
    rm -rf "$WORK"
}
trap example_backend_cleanup EXIT

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$WORK/key.pem" -out "$WORK/cert.pem" \
    -days 1 -subj /CN=localhost -addext subjectAltName=DNS:localhost 2>/dev/null
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$WORK/auth.p8" 2>/dev/null
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
SERVE_PORT=$(free_port)
instances=${EXAMPLE_BACKEND_INSTANCES:-1}
# A file-backed database, as a real backend's (each registration a commit; several instances share it).
db=(--db "$WORK/registrations.sqlite")
REGISTER_URLS=""
TRIGGER_URLS=""
APP_EVENTS_URLS=""
for k in $(seq 1 "$instances"); do
    port=$(free_port)
    [ "$k" -eq 1 ] && BACKEND_PORT=$port
    log="$WORK/backend.log"
    [ "$k" -gt 1 ] && log="$WORK/backend-$k.log"
    # shellcheck disable=SC2086
    python3 examples/backend-aioapns/backend.py --listen "127.0.0.1:$port" --apns "localhost:$SERVE_PORT" \
        --ca "$WORK/cert.pem" --auth-key ABC123DEFG="$WORK/auth.p8" --team TEAM123456 ${db[@]+"${db[@]}"} \
        ${EXAMPLE_BACKEND_ARGS:-} < /dev/null > "$log" 2>&1 &
    backend_pids+=($!)
    for _ in $(seq 1 100); do grep -q "listening" "$log" 2>/dev/null && break; sleep 0.1; done
    grep -q "listening" "$log" || { cat "$log"; echo "the backend did not start"; exit 1; }
    REGISTER_URLS+="${REGISTER_URLS:+,}http://127.0.0.1:$port/register"
    TRIGGER_URLS+="${TRIGGER_URLS:+,}http://127.0.0.1:$port/trigger"
    APP_EVENTS_URLS+="${APP_EVENTS_URLS:+,}http://127.0.0.1:$port/app-events"
done
BACKEND_URL="http://127.0.0.1:$BACKEND_PORT"

SERVE_FLAGS=(--listen "127.0.0.1:$SERVE_PORT" --tls-cert "$WORK/cert.pem" --tls-key "$WORK/key.pem"
    --auth jwt --auth-key ABC123DEFG="$WORK/auth.p8" --team TEAM123456)
