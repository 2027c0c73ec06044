#include "CRawUV.h"

#include <stdlib.h>
#include <uv.h>

struct crawuv_timers {
    uv_loop_t loop;
    int count;
    uint64_t fired;
    uv_timer_t *handles;
};

static void timer_fired(uv_timer_t *handle) {
    crawuv_timers *timers = handle->data;
    timers->fired += 1;
}

crawuv_timers *crawuv_timers_create(int count) {
    crawuv_timers *timers = calloc(1, sizeof *timers);
    if (timers == NULL) return NULL;
    timers->handles = calloc((size_t)count, sizeof *timers->handles);
    if (timers->handles == NULL || uv_loop_init(&timers->loop) != 0) {
        free(timers->handles);
        free(timers);
        return NULL;
    }
    timers->count = count;
    for (int i = 0; i < count; i++) {
        uv_timer_init(&timers->loop, &timers->handles[i]);
        timers->handles[i].data = timers;
    }
    return timers;
}

uint64_t crawuv_timers_churn(crawuv_timers *timers) {
    uint64_t before = timers->fired;
    for (int i = 0; i < timers->count; i++) uv_timer_start(&timers->handles[i], timer_fired, 0, 0);
    uv_run(&timers->loop, UV_RUN_DEFAULT);
    return timers->fired - before;
}

int crawuv_timers_destroy(crawuv_timers *timers) {
    for (int i = 0; i < timers->count; i++) uv_close((uv_handle_t *)&timers->handles[i], NULL);
    uv_run(&timers->loop, UV_RUN_DEFAULT);
    int status = uv_loop_close(&timers->loop);
    free(timers->handles);
    free(timers);
    return status;
}

struct crawuv_wakeups {
    uv_loop_t loop;
    uv_async_t async;
    uint64_t fired;
};

static void async_fired(uv_async_t *handle) {
    crawuv_wakeups *wakeups = handle->data;
    wakeups->fired += 1;
}

crawuv_wakeups *crawuv_wakeups_create(void) {
    crawuv_wakeups *wakeups = calloc(1, sizeof *wakeups);
    if (wakeups == NULL) return NULL;
    if (uv_loop_init(&wakeups->loop) != 0) {
        free(wakeups);
        return NULL;
    }
    if (uv_async_init(&wakeups->loop, &wakeups->async, async_fired) != 0) {
        uv_loop_close(&wakeups->loop);
        free(wakeups);
        return NULL;
    }
    wakeups->async.data = wakeups;
    return wakeups;
}

uint64_t crawuv_wakeups_run(crawuv_wakeups *wakeups, int count) {
    uint64_t before = wakeups->fired;
    for (int i = 0; i < count; i++) {
        uv_async_send(&wakeups->async);
        uv_run(&wakeups->loop, UV_RUN_ONCE);
    }
    return wakeups->fired - before;
}

int crawuv_wakeups_destroy(crawuv_wakeups *wakeups) {
    uv_close((uv_handle_t *)&wakeups->async, NULL);
    uv_run(&wakeups->loop, UV_RUN_DEFAULT);
    int status = uv_loop_close(&wakeups->loop);
    free(wakeups);
    return status;
}
