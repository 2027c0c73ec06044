import FanoutMetrics

/// Lines shared by summary.md and report.html.
extension ServeReport {
    /// Each bound of INGEST §6 that a client can hit, with how often it was (summary.md and report.html).
    static func boundsHit(_ c: ConnectionStats) -> String {
        "Bounds hit: \(c[.refused]) connections refused (over --max-connections), \(c[.acceptErrors]) accept errors, "
            + "\(c[.streamsRefused]) streams refused (over --max-open-streams), \(c[.requestsRefused]) requests refused "
            + "(over --max-unsent-bytes), \(c[.requestTimeouts]) requests timed out, "
            + "\(c[.outputPauses]) output pauses (clients not reading), \(c[.trailerFields]) trailer fields ignored."
    }

    /// With `--manage-listen`: requests sent to the listener that does not serve their API.
    static func misplaced(_ c: ConnectionStats) -> String {
        "\(c[.misplacedRequests]) requests sent to the listener that does not serve their API (answered 404 BadPath)."
    }

    /// The wire identity: every answer the service produced was submitted to nghttp2 or dropped with its stream.
    static func wireIdentity(_ s: ServeStats, _ c: ConnectionStats, broken: String) -> String {
        "Answers: \(s.requests) produced = \(c[.responsesSubmitted]) submitted to nghttp2 + \(c[.answersDropped]) "
            + "dropped (stream already gone): " + (c.answersAccountedFor(requests: s.requests) ? "holds." : broken + ".")
    }
}
