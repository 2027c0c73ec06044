// CLibUV: the system-library module for libuv (pkg-config `libuv`, apt `libuv1-dev`).
// Only `UVLoop` imports it. Helpers are `static inline` and named `CLibUV_*`; they exist
// where Swift cannot express a C idiom directly (a handle "is a" `uv_handle_t` by C's
// common-initial-sequence rule, which Swift's typed pointers do not model).
#ifndef CLIBUV_SHIM_H
#define CLIBUV_SHIM_H

#include <uv.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/timerfd.h>
#endif

// A TCP handle begins with the stream's fields and a connect request with the request's (C's common initial
// sequence, the way libuv's own documentation casts them); `UVHandle` makes the `uv_handle_t` cast itself.
static inline uv_stream_t *CLibUV_tcp_as_stream(uv_tcp_t *tcp) {
    return (uv_stream_t *)tcp;
}

static inline uv_req_t *CLibUV_connect_as_req(uv_connect_t *connect) {
    return (uv_req_t *)connect;
}

// A timerfd on CLOCK_MONOTONIC (uv_hrtime's clock) for `DeadlineTimer`: a deadline to the nanosecond, watched
// by a poll handle. Linux only: elsewhere `CLibUV_timerfd_create` returns -1 and `DeadlineTimer` falls back to a
// libuv timer. Each returns 0 (or the descriptor, or the expiry count) on success and -1 on failure (errno set).
static inline int CLibUV_timerfd_create(void) {
#ifdef __linux__
    return timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
#else
    return -1;
#endif
}

// Arms `fd` for the absolute CLOCK_MONOTONIC instant `nanos` (> 0; a passed instant expires at once), or disarms
// it when `nanos` is 0.
static inline int CLibUV_timerfd_set(int fd, uint64_t nanos) {
#ifdef __linux__
    struct itimerspec spec = {0};
    spec.it_value.tv_sec = (time_t)(nanos / 1000000000u);
    spec.it_value.tv_nsec = (long)(nanos % 1000000000u);
    return timerfd_settime(fd, nanos ? TFD_TIMER_ABSTIME : 0, &spec, NULL);
#else
    (void)fd; (void)nanos;
    return -1;
#endif
}

// The expiries since the last read (which makes `fd` unreadable again); 0 when there were none (EAGAIN).
static inline int64_t CLibUV_timerfd_read(int fd) {
    uint64_t count = 0;
    return read(fd, &count, sizeof count) == (ssize_t)sizeof count ? (int64_t)count : 0;
}

static inline int CLibUV_close(int fd) {
    return close(fd);
}

// Counts the time `loop` spends waiting in its poll for events (uv_metrics_idle_time); uv_loop_configure is
// variadic, which Swift cannot call.
static inline int CLibUV_loop_count_idle_time(uv_loop_t *loop) {
    return uv_loop_configure(loop, UV_METRICS_IDLE_TIME);
}

#endif // CLIBUV_SHIM_H
