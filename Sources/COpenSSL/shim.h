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

static inline size_t COpenSSL_BIO_pending(BIO *bio) {
    return (size_t)BIO_pending(bio);
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

#endif // COPENSSL_SHIM_H
