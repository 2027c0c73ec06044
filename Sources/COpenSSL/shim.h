// COpenSSL: the system-library module for OpenSSL 3 (pkg-config `openssl`, apt `libssl-dev`). Only
// `FanoutWire` imports it. Helpers are `static inline` and named `COpenSSL_*`; they stand in for OpenSSL's
// function-like macros, which Swift does not import, and for the ALPN selection callback.
#ifndef COPENSSL_SHIM_H
#define COPENSSL_SHIM_H

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/ec.h>
#include <openssl/ecdsa.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

static inline int COpenSSL_CTX_set_min_proto_version_tls12(SSL_CTX *ctx) {
    return (int)SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
}

static inline long COpenSSL_CTX_set_options(SSL_CTX *ctx, long options) {
    return (long)SSL_CTX_set_options(ctx, (uint64_t)options);
}

static inline long COpenSSL_no_renegotiation_option(void) {
    return (long)SSL_OP_NO_RENEGOTIATION;
}

// ALPN: the server selects "h2" when the client offers it; a client that offers no ALPN at all never gets
// here (and is served HTTP/2 anyway); a client offering only other protocols is refused with the
// no_application_protocol alert (APNs speaks nothing but HTTP/2).
static inline int COpenSSL_select_h2(
    SSL *ssl, const unsigned char **out, unsigned char *outlen, const unsigned char *in, unsigned int inlen,
    void *arg) {
    (void)ssl;
    (void)arg;
    unsigned int i = 0;
    while (i < inlen) {
        unsigned int length = in[i];
        if (i + 1 + length > inlen) break;
        if (length == 2 && in[i + 1] == 'h' && in[i + 2] == '2') {
            *out = in + i + 1;
            *outlen = 2;
            return SSL_TLSEXT_ERR_OK;
        }
        i += 1 + length;
    }
    return SSL_TLSEXT_ERR_ALERT_FATAL;
}

static inline void COpenSSL_CTX_select_h2(SSL_CTX *ctx) {
    SSL_CTX_set_alpn_select_cb(ctx, COpenSSL_select_h2, NULL);
}

// SNI (SSL_set_tlsext_host_name is a macro over SSL_ctrl).
static inline int COpenSSL_set_server_name(SSL *ssl, const char *name) {
    return (int)SSL_set_tlsext_host_name(ssl, name);
}

// The BIO under each TLS session (both directions, instead of two memory BIOs): ciphertext is read straight from
// the bytes a socket read filled (`borrowed`, valid during one receive) or, when some were left over or handed in
// without a receive, from `kept`; ciphertext written goes into `out` until the session hands it to the socket.
// Buffers grow by realloc (nothing zeroed) and are freed by the session (COpenSSL_pipe_release).
#include <stdlib.h>
#include <string.h>

typedef struct {
    const unsigned char *borrowed;
    size_t borrowedCount;
    unsigned char *kept;
    size_t keptStart, keptEnd, keptCapacity;
    unsigned char *out;
    size_t outCount, outCapacity;
} COpenSSL_Pipe;

static inline int COpenSSL_pipe_reserve(unsigned char **buffer, size_t *capacity, size_t needed) {
    if (needed <= *capacity) return 1;
    size_t grown = *capacity < 16384 ? 16384 : *capacity;
    while (grown < needed) grown *= 2;
    unsigned char *larger = (unsigned char *)realloc(*buffer, grown);
    if (larger == NULL) return 0;
    *buffer = larger;
    *capacity = grown;
    return 1;
}

/// Keeps a copy of `count` bytes for later reads (after what is kept already); 0 when out of memory.
static inline int COpenSSL_pipe_keep(COpenSSL_Pipe *pipe, const void *bytes, size_t count) {
    if (count == 0) return 1;
    if (pipe->keptStart == pipe->keptEnd) pipe->keptStart = pipe->keptEnd = 0;
    if (pipe->keptStart > 0 && pipe->keptEnd + count > pipe->keptCapacity) {
        memmove(pipe->kept, pipe->kept + pipe->keptStart, pipe->keptEnd - pipe->keptStart);
        pipe->keptEnd -= pipe->keptStart;
        pipe->keptStart = 0;
    }
    if (!COpenSSL_pipe_reserve(&pipe->kept, &pipe->keptCapacity, pipe->keptEnd + count)) return 0;
    memcpy(pipe->kept + pipe->keptEnd, bytes, count);
    pipe->keptEnd += count;
    return 1;
}

/// The borrowed bytes OpenSSL did not read are kept (copied) before the socket's buffer is reused.
static inline int COpenSSL_pipe_end_borrow(COpenSSL_Pipe *pipe) {
    int ok = COpenSSL_pipe_keep(pipe, pipe->borrowed, pipe->borrowedCount);
    pipe->borrowed = NULL;
    pipe->borrowedCount = 0;
    return ok;
}

static inline void COpenSSL_pipe_release(COpenSSL_Pipe *pipe) {
    free(pipe->kept);
    free(pipe->out);
    memset(pipe, 0, sizeof *pipe);
}

static inline int COpenSSL_pipe_read(BIO *bio, char *into, int size) {
    COpenSSL_Pipe *pipe = (COpenSSL_Pipe *)BIO_get_data(bio);
    BIO_clear_retry_flags(bio);
    if (size <= 0) return 0;
    size_t n = 0;
    if (pipe->keptEnd > pipe->keptStart) {
        n = pipe->keptEnd - pipe->keptStart;
        if (n > (size_t)size) n = (size_t)size;
        memcpy(into, pipe->kept + pipe->keptStart, n);
        pipe->keptStart += n;
    } else if (pipe->borrowedCount > 0) {
        n = pipe->borrowedCount;
        if (n > (size_t)size) n = (size_t)size;
        memcpy(into, pipe->borrowed, n);
        pipe->borrowed += n;
        pipe->borrowedCount -= n;
    } else {
        BIO_set_retry_read(bio);
        return -1;
    }
    return (int)n;
}

static inline int COpenSSL_pipe_write(BIO *bio, const char *bytes, int count) {
    COpenSSL_Pipe *pipe = (COpenSSL_Pipe *)BIO_get_data(bio);
    BIO_clear_retry_flags(bio);
    if (count <= 0) return 0;
    if (!COpenSSL_pipe_reserve(&pipe->out, &pipe->outCapacity, pipe->outCount + (size_t)count)) return -1;
    memcpy(pipe->out + pipe->outCount, bytes, (size_t)count);
    pipe->outCount += (size_t)count;
    return count;
}

static inline long COpenSSL_pipe_ctrl(BIO *bio, int command, long number, void *pointer) {
    (void)number;
    (void)pointer;
    COpenSSL_Pipe *pipe = (COpenSSL_Pipe *)BIO_get_data(bio);
    switch (command) {
    case BIO_CTRL_FLUSH: return 1;
    case BIO_CTRL_PENDING: return (long)(pipe->keptEnd - pipe->keptStart + pipe->borrowedCount);
    case BIO_CTRL_WPENDING: return (long)pipe->outCount;
    default: return 0;
    }
}

static inline int COpenSSL_pipe_create(BIO *bio) {
    BIO_set_init(bio, 1);
    return 1;
}

/// The pipe BIO's method (BIO_meth_free'd by its owner), or NULL; `index` from BIO_get_new_index (taken once: there
/// are only 128).
static inline BIO_METHOD *COpenSSL_pipe_method(int index) {
    BIO_METHOD *method = BIO_meth_new(index | BIO_TYPE_SOURCE_SINK, "fanout pipe");
    if (method == NULL) return NULL;
    if (BIO_meth_set_write(method, COpenSSL_pipe_write) != 1 || BIO_meth_set_read(method, COpenSSL_pipe_read) != 1
        || BIO_meth_set_ctrl(method, COpenSSL_pipe_ctrl) != 1
        || BIO_meth_set_create(method, COpenSSL_pipe_create) != 1) {
        BIO_meth_free(method);
        return NULL;
    }
    return method;
}

#endif // COPENSSL_SHIM_H
