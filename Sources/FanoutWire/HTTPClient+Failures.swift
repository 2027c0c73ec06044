internal import CCurl
import Glibc

extension HTTPClient {
    /// A failed request's words, one key per kind of failure (summary.json counts errors by it): libcurl's
    /// message for `code`, and the reason in parentheses where libcurl's generic message does not say it — the
    /// system's for a connection that could not be made (`CURLINFO_OS_ERRNO`: "Couldn't connect to server
    /// (Connection refused)"), the system's words in libcurl's error buffer for one reset or broken ("Failure
    /// when receiving data from the peer (Connection reset by peer)"), libcurl's
    /// error buffer for a TLS failure ("SSL peer certificate or SSH remote key was not OK (SSL certificate
    /// problem: self-signed certificate)", "SSL connect error (…: wrong version number)"). Not the error buffer
    /// otherwise: it names elapsed milliseconds and byte counts, which would make a key per request.
    static func failureText(_ code: CURLcode, osErrno: Int32, detail: String) -> String {
        let message = String(cString: curl_easy_strerror(code))
        switch code {
        case CURLE_COULDNT_CONNECT:
            guard osErrno != 0 else { return message }
            return message + " (" + String(cString: strerror(osErrno)) + ")"
        case CURLE_SEND_ERROR, CURLE_RECV_ERROR:
            // "Recv failure: Connection reset by peer": the system's words.
            var reason = Substring(detail)
            for prefix in ["Send failure: ", "Recv failure: "] where reason.hasPrefix(prefix) {
                reason = reason.dropFirst(prefix.count)
            }
            guard !reason.isEmpty, reason != message else { return message }
            return message + " (" + reason + ")"
        case CURLE_SSL_CONNECT_ERROR, CURLE_SSL_CERTPROBLEM, CURLE_SSL_CIPHER, CURLE_PEER_FAILED_VERIFICATION,
            CURLE_SSL_CACERT_BADFILE, CURLE_SSL_ISSUER_ERROR, CURLE_SSL_PINNEDPUBKEYNOTMATCH,
            CURLE_SSL_INVALIDCERTSTATUS, CURLE_SSL_CLIENTCERT:
            guard !detail.isEmpty, detail != message else { return message }
            return message + " (" + detail + ")"
        default:
            return message
        }
    }
}
