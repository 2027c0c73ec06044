import FanoutCore

/// What the service answers a request with, before any transport: the status, the id headers (`apns-id` or
/// `apns-request-id`, held inline), other headers and the body (APNs's error JSON, or a channel API's answer).
/// The wire's response value itself (FanoutCore's `H2Response`), so FanoutServe sends it as it is.
public typealias APNsAnswer = H2Response
