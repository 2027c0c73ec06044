import FanoutCore

/// Which requests a listener serves. APNs serves channel management (`/1/apps/…`) on hosts of its own; with
/// `--manage-listen` fanout does too: the push listener answers a management path, and the management listener
/// a push or broadcast path, with 404 `BadPath` (docs/INGEST.md §2, *fanout's choice*), counted as that answer.
public enum ServeListener {
    public enum Role: Sendable {
        /// One listener for everything (no `--manage-listen`).
        case all
        /// Pushes and broadcasts (`/3/device/…`, `/4/broadcasts/…`).
        case push
        /// Channel management (`/1/apps/…`).
        case manage
    }

    /// Whether a request for `path` belongs on the other listener. O(1): the path's first three bytes.
    @inline(__always)
    package static func misplaced(_ path: [UInt8], on role: Role) -> Bool {
        switch role {
        case .all: return false
        case .push: return isManagement(path)
        case .manage: return !isManagement(path)
        }
    }

    /// `/1/…`: the channel-management API.
    @inline(__always)
    static func isManagement(_ path: [UInt8]) -> Bool {
        path.count >= 3 && path[0] == UInt8(ascii: "/") && path[1] == UInt8(ascii: "1") && path[2] == UInt8(ascii: "/")
    }
}
