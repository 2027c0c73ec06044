// CNGHTTP2: the system-library module for nghttp2 (pkg-config `libnghttp2`, apt `libnghttp2-dev`, Debian
// 12 ships 1.52: no newer API is used). Only `FanoutWire` imports it. Helpers are `static inline` and named
// `CNGHTTP2_*`, for what Swift cannot express directly.
#ifndef CNGHTTP2_SHIM_H
#define CNGHTTP2_SHIM_H

#include <nghttp2/nghttp2.h>

// A data provider whose source is an opaque pointer (C's union member `ptr`).
static inline nghttp2_data_provider CNGHTTP2_data_provider(
    void *source, nghttp2_data_source_read_callback read_callback) {
    nghttp2_data_provider provider;
    provider.source.ptr = source;
    provider.read_callback = read_callback;
    return provider;
}

#endif // CNGHTTP2_SHIM_H
