#ifndef CZLIB_SHIM_H
#define CZLIB_SHIM_H
#include <zlib.h>

/// zlib's deflateInit/inflateInit are macros; these wrap them for Swift.
static inline int CZlib_deflateInit(z_streamp stream, int level) {
    return deflateInit(stream, level);
}

static inline int CZlib_inflateInit(z_streamp stream) {
    return inflateInit(stream);
}
#endif
