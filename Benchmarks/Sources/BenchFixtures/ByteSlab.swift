/// Byte strings laid back to back in memory that stays put for the life of the slab, so that the
/// measured code passes `UnsafeRawBufferPointer`s (tokens, headers, payloads) without a closure or
/// a copy per update.
public final class ByteSlab {
    private let base: UnsafeMutableRawPointer
    private let starts: [Int]

    public init(_ parts: [[UInt8]]) {
        var starts = [0]
        for part in parts { starts.append(starts[starts.count - 1] + part.count) }
        let base = UnsafeMutableRawPointer.allocate(byteCount: max(1, starts[starts.count - 1]), alignment: 16)
        for (i, part) in parts.enumerated() where !part.isEmpty {
            part.withUnsafeBytes { (base + starts[i]).copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
        }
        self.base = base
        self.starts = starts
    }

    public convenience init(strings: [String]) {
        self.init(strings.map { Array($0.utf8) })
    }

    deinit {
        base.deallocate()
    }

    public var count: Int { starts.count - 1 }

    /// Part `i`; valid while the slab lives.
    @inline(__always)
    public subscript(_ i: Int) -> UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(start: base + starts[i], count: starts[i + 1] - starts[i])
    }
}

/// A reusable buffer with a stable address (a payload kept alive while the validator's tape points into it).
public final class StableBuffer {
    private let base: UnsafeMutableRawPointer
    public let capacity: Int
    public private(set) var count = 0

    public init(capacity: Int) {
        self.capacity = capacity
        base = .allocate(byteCount: capacity, alignment: 16)
    }

    deinit {
        base.deallocate()
    }

    public func assign(_ bytes: UnsafeRawBufferPointer) {
        precondition(bytes.count <= capacity, "StableBuffer overflow")
        if let source = bytes.baseAddress { base.copyMemory(from: source, byteCount: bytes.count) }
        count = bytes.count
    }

    public var bytes: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: base, count: count) }
}
