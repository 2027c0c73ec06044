import FanoutCore

extension APNsService {
    /// An injected 503, 429 or 500: APNs's answer (`{"reason": …}`, the request's `apns-id` or `apns-request-id`,
    /// or a generated one when it sent none), counted as an answer with that reason; the request is not judged
    /// and reaches no device.
    package func injectedAnswer(_ reason: APNsReason, _ r: RequestInput) -> APNsAnswer {
        let broadcast = !RequestCheck.isTokenPushPath(r.path)
        let id = echoedId(r, broadcast: broadcast) ?? ids.make(broadcast ? "apns-request-id" : "apns-id")
        let (response, _) = failure(reason, id: id)
        stats.answered(response.status, reason)
        return response
    }
}
