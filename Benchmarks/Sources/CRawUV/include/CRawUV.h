// CRawUV: the Loop suite's workloads written against libuv directly, the reference for UVLoop's
// overhead. Same work as the Swift side: one-shot timers started at timeout 0 and run to completion
// (timer churn), and async wakeups sent and received on one loop thread.
#ifndef CRAWUV_H
#define CRAWUV_H

#include <stdint.h>

typedef struct crawuv_timers crawuv_timers;

// A loop with `count` initialised (stopped) timers; NULL when libuv fails.
crawuv_timers *crawuv_timers_create(int count);
// Starts every timer with timeout 0 and runs the loop until all have fired; returns the callbacks run.
uint64_t crawuv_timers_churn(crawuv_timers *timers);
// Closes every timer, runs the close callbacks, closes the loop (which must return 0); returns 0 on success.
int crawuv_timers_destroy(crawuv_timers *timers);

typedef struct crawuv_wakeups crawuv_wakeups;

// A loop with one async handle; NULL when libuv fails.
crawuv_wakeups *crawuv_wakeups_create(void);
// `count` times: uv_async_send, then one UV_RUN_ONCE iteration that runs the callback; returns callbacks run.
uint64_t crawuv_wakeups_run(crawuv_wakeups *wakeups, int count);
// Closes the handle and the loop; returns 0 on success.
int crawuv_wakeups_destroy(crawuv_wakeups *wakeups);

#endif // CRAWUV_H
