internal import CLibUV

/// A libuv call that failed: its negative status code and the libuv function that returned it.
///
/// libuv reports errors as negative `int` statuses (`UV_EINVAL`, `UV_EBUSY`, ...). `UVLoop` turns
/// them into this type in exactly one place, ``check(_:_:)``; every throwing API in the module
/// throws `UVError` (typed throws). Misusing the API (starting a closed timer, closing a loop
/// from inside its own callback, ...) is not a `UVError` but a precondition failure.
public struct UVError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The libuv status, always negative (on Unix, `-errno`, e.g. `-22` for `EINVAL`).
    public let code: Int32
    /// The libuv function that returned ``code``, e.g. `"uv_loop_close"`.
    public let operation: String

    /// Creates an error from a negative libuv status.
    ///
    /// - Precondition: `code < 0`.
    public init(code: Int32, operation: String) {
        precondition(code < 0, "UVError needs a negative libuv status, got \(code)")
        self.code = code
        self.operation = operation
    }

    /// The libuv error name, e.g. `"EINVAL"` (`uv_err_name_r`).
    public var name: String {
        // The `_r` variant writes into our buffer; `uv_err_name` would malloc (and leak) a string
        // for codes it does not know.
        Self.withBuffer { buffer, count in String(cString: uv_err_name_r(code, buffer, count)) }
    }

    /// The libuv error message, e.g. `"invalid argument"` (`uv_strerror_r`).
    public var message: String {
        Self.withBuffer { buffer, count in String(cString: uv_strerror_r(code, buffer, count)) }
    }

    /// `"uv_loop_close: EBUSY (resource busy or locked)"`.
    public var description: String {
        "\(operation): \(name) (\(message))"
    }

    /// The status libuv uses for an invalid argument (`UV_EINVAL`).
    public static var invalidArgumentCode: Int32 { UV_EINVAL.rawValue }

    /// The status libuv uses for a busy resource, e.g. a loop with open handles (`UV_EBUSY`).
    public static var busyCode: Int32 { UV_EBUSY.rawValue }

    private static func withBuffer(_ body: (UnsafeMutablePointer<CChar>, Int) -> String) -> String {
        withUnsafeTemporaryAllocation(of: CChar.self, capacity: 128) { buffer in
            buffer.initialize(repeating: 0)
            return body(buffer.baseAddress!, buffer.count)
        }
    }
}

/// The one checking function: a negative libuv status becomes a thrown ``UVError``; a
/// non-negative status is returned (some libuv calls return a count).
@discardableResult
func check(_ status: Int32, _ operation: StaticString) throws(UVError) -> Int32 {
    guard status >= 0 else {
        throw UVError(code: status, operation: operation.description)
    }
    return status
}

/// For libuv calls that can only fail when the caller breaks a precondition this module already
/// enforces (for example `uv_timer_init`, which always returns 0): a failure is a bug, so it
/// stops the program with the ``UVError`` from ``check(_:_:)`` as the message.
func checkInvariant(_ status: Int32, _ operation: StaticString) {
    do {
        try check(status, operation)
    } catch {
        preconditionFailure("libuv call failed unexpectedly: \(error)")
    }
}
