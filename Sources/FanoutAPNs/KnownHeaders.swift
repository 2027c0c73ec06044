import FanoutCore

#if canImport(Glibc)
import Glibc
#endif

/// The headers APNs reads, found in one pass over a request's header list: where each one's first occurrence is
/// (a small fixed index, no allocation), and whether any header name appears twice. Every look-up after that is an
/// index, not a scan of the list (a request's checks looked up eight names, each a scan).
///
/// It answers exactly as ``HeaderList/value(_:)`` and ``HeaderList/hasDuplicates`` do: names compared byte for
/// byte (HTTP/2 sends them lowercase; nghttp2 refuses a request with an upper-case name), the first of a
/// repeated header is its value.
public struct KnownHeaders: Sendable {
    public enum Name: Int, CaseIterable, Sendable {
        case apnsId, apnsRequestId, apnsPushType, apnsTopic, apnsPriority, apnsCollapseId, apnsExpiration
        case apnsChannelId, authorization

        var text: StaticString {
            switch self {
            case .apnsId: "apns-id"
            case .apnsRequestId: "apns-request-id"
            case .apnsPushType: "apns-push-type"
            case .apnsTopic: "apns-topic"
            case .apnsPriority: "apns-priority"
            case .apnsCollapseId: "apns-collapse-id"
            case .apnsExpiration: "apns-expiration"
            case .apnsChannelId: "apns-channel-id"
            case .authorization: "authorization"
            }
        }
    }

    /// Per name: 1 + the field's position in the list, 0: absent (a list of more than 254 fields is looked up by
    /// scanning past that).
    private var slots: (UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8) = (0, 0, 0, 0, 0, 0, 0, 0, 0)
    /// Some header name appears twice.
    public private(set) var hasDuplicates = false
    /// The list had more fields than the index holds: look-ups past them scan.
    private var overflow = false

    public init() {}

    public init(_ headers: HeaderList) {
        headers.withFields { base, spans in
            guard let base else { return }
            for (i, s) in spans.enumerated() {
                let name = base + Int(s.name)
                let length = Int(s.value - s.name)
                if let known = Self.known(name, length) {
                    if self[known] != 0 {
                        hasDuplicates = true
                    } else if i < 254 {
                        self[known] = UInt8(i + 1)
                    } else {
                        overflow = true  // looked up by scanning; duplicates judged by the list (below)
                    }
                    continue
                }
                // Not a name APNs reads: compared with the fields before it of the same length (a known name
                // cannot equal it).
                if hasDuplicates { continue }
                // The first bytes compared inline before a call to memcmp: names of one length mostly differ there.
                for j in 0..<i where Int(spans[j].value - spans[j].name) == length {
                    let other = base + Int(spans[j].name)
                    if (length == 0 || other[0] == name[0]) && memcmp(other, name, length) == 0 {
                        hasDuplicates = true
                        break
                    }
                }
            }
        }
        if overflow { hasDuplicates = headers.hasDuplicates }
    }

    private subscript(_ name: Name) -> UInt8 {
        get { withUnsafeBytes(of: slots) { $0[name.rawValue] } }
        set { withUnsafeMutableBytes(of: &slots) { $0[name.rawValue] = newValue } }
    }

    /// The first value of `name` in `headers` (the list this index was made from).
    @inline(__always)
    public func value(_ name: Name, in headers: HeaderList) -> ArraySlice<UInt8>? {
        let slot = self[name]
        if slot != 0 { return headers.value(Int(slot) - 1) }
        return overflow ? headers.value(name.text) : nil
    }

    /// Which known name the bytes are, if any (by length first: at most one or two comparisons).
    @inline(__always)
    static func known(_ name: UnsafePointer<UInt8>, _ length: Int) -> Name? {
        // Every known name is 7 to 16 bytes (`length` is the text's), compared inline.
        func equal(_ text: StaticString) -> Bool { ShortBytes.equal(UnsafeRawPointer(name), text) }
        switch length {
        case 7: return equal("apns-id") ? .apnsId : nil
        case 10: return equal("apns-topic") ? .apnsTopic : nil
        case 13:
            if equal("apns-priority") { return .apnsPriority }
            return equal("authorization") ? .authorization : nil
        case 14: return equal("apns-push-type") ? .apnsPushType : nil
        case 15:
            if name[5] == UInt8(ascii: "r") { return equal("apns-request-id") ? .apnsRequestId : nil }
            if name[5] == UInt8(ascii: "e") { return equal("apns-expiration") ? .apnsExpiration : nil }
            return equal("apns-channel-id") ? .apnsChannelId : nil
        case 16: return equal("apns-collapse-id") ? .apnsCollapseId : nil
        default: return nil
        }
    }
}
