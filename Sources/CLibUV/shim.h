// CLibUV: the system-library module for libuv (pkg-config `libuv`, apt `libuv1-dev`).
// Only `UVLoop` imports it. Helpers are `static inline` and named `CLibUV_*`; they exist
// where Swift cannot express a C idiom directly (a handle "is a" `uv_handle_t` by C's
// common-initial-sequence rule, which Swift's typed pointers do not model).
#ifndef CLIBUV_SHIM_H
#define CLIBUV_SHIM_H

#include <uv.h>

// Every libuv handle type begins with UV_HANDLE_FIELDS, so a pointer to it may be used as a
// `uv_handle_t *`, the way libuv's own documentation casts it.
static inline uv_handle_t *CLibUV_timer_as_handle(uv_timer_t *timer) {
    return (uv_handle_t *)timer;
}

static inline uv_handle_t *CLibUV_async_as_handle(uv_async_t *async) {
    return (uv_handle_t *)async;
}

static inline uv_handle_t *CLibUV_tcp_as_handle(uv_tcp_t *tcp) {
    return (uv_handle_t *)tcp;
}

static inline uv_stream_t *CLibUV_tcp_as_stream(uv_tcp_t *tcp) {
    return (uv_stream_t *)tcp;
}

static inline uv_tcp_t *CLibUV_stream_as_tcp(uv_stream_t *stream) {
    return (uv_tcp_t *)stream;
}

static inline uv_handle_t *CLibUV_signal_as_handle(uv_signal_t *signal) {
    return (uv_handle_t *)signal;
}

static inline uv_handle_t *CLibUV_poll_as_handle(uv_poll_t *poll) {
    return (uv_handle_t *)poll;
}

static inline uv_req_t *CLibUV_connect_as_req(uv_connect_t *connect) {
    return (uv_req_t *)connect;
}

#endif // CLIBUV_SHIM_H
