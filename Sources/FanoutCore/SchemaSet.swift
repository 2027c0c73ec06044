public enum JSONStyle: Sendable {
    /// No spaces: payloads.
    case compact
    /// `", "` and `": "` separators, Python float repr: the state dump.
    case python
}

/// The content-state schemas of a population, by `attributes-type` name.
public struct SchemaSet: Sendable {
    public private(set) var schemas: [ContentSchema] = []
    /// `schemas[id].layout` read out as plain pointers (kept alive by `schemas`): the one pass reads it with no
    /// reference counted per push.
    private var views: [LayoutView] = []
    private var names = ByteInterner()

    public init() {}

    @discardableResult
    public mutating func add(_ schema: ContentSchema) -> Int32 {
        let (id, inserted) = names.intern(schema.name)
        if inserted {
            schemas.append(schema)
            views.append(LayoutView(schema.layout))
        } else {
            schemas[Int(id)] = schema
            views[Int(id)] = LayoutView(schema.layout)
        }
        return id
    }

    public func id(named name: UnsafeRawBufferPointer) -> Int32? { names.lookup(name) }
    public func id(named name: String) -> Int32? { names.lookup(name) }

    @inline(__always)
    public subscript(_ id: Int32) -> ContentSchema {
        _read { yield schemas[Int(id)] }
    }

    /// `self[id].decodeRecord(…)` through an inout access, so that a caller holding the set in a class
    /// property reads the schema in place instead of copying it.
    @inline(__always)
    mutating func decodeRecordInPlace(
        _ id: Int32, tape: JSONDocument, object index: Int, into out: inout ByteBuffer
    ) -> Bool {
        // The layout alone (one reference): a schema read out of the array is a copy (five arrays and a string
        // retained and released, about 300 instructions per decode).
        let layout = schemas[Int(id)].layout
        return ContentSchema.decodeRecord(tape: tape, object: index, layout: layout, into: &out)
    }
}

/// What the one pass (`PayloadOnePass`) reads of a `ContentLayout`, copied out as plain values: valid while the
/// layout lives (a `SchemaSet` keeps it with the schema), passed and read with no reference counted. Sendable as the
/// layout is: the memory it points to is never written after the layout's init.
struct LayoutView: @unchecked Sendable {
    let count: Int
    let kinds: UnsafePointer<UInt8>
    let compactKeys: UnsafePointer<UInt8>
    let compactKeyOffsets: UnsafePointer<Int>

    init(_ layout: ContentLayout) {
        count = layout.count
        kinds = layout.kinds
        compactKeys = layout.compactKeys
        compactKeyOffsets = layout.compactKeyOffsets
    }
}

extension SchemaSet {
    /// The layout of schema `id` as plain pointers (see `LayoutView`), read in place.
    @inline(__always)
    mutating func layoutView(_ id: Int32) -> LayoutView { views[Int(id)] }
}

/// A schema's field names, kinds and compact keys in flat memory, built once and never written again (so shared
/// freely across threads: `@unchecked Sendable`). `kinds[k]` is field `k`'s `FieldType` raw value, `| 0x80`
/// when optional; names and compact keys are back to back, field `k`'s at `offsets[k]..<offsets[k + 1]`. A
/// compact key is `,"name":` as a payload writes it (escaped), with the comma that precedes it but for the first.
final class ContentLayout: @unchecked Sendable {
    let count: Int
    let names: UnsafePointer<UInt8>
    let nameOffsets: UnsafePointer<Int>
    let kinds: UnsafePointer<UInt8>
    let compactKeys: UnsafePointer<UInt8>
    let compactKeyOffsets: UnsafePointer<Int>
    let compactKeyBytes: Int

    init(names: [UInt8], nameOffsets: [Int], kinds: [UInt8], compactKeys: [UInt8], compactKeyOffsets: [Int]) {
        count = kinds.count
        self.names = ContentLayout.copy(names)
        self.nameOffsets = ContentLayout.copy(nameOffsets)
        self.kinds = ContentLayout.copy(kinds)
        self.compactKeys = ContentLayout.copy(compactKeys)
        self.compactKeyOffsets = ContentLayout.copy(compactKeyOffsets)
        compactKeyBytes = compactKeys.count
    }

    private static func copy<T>(_ array: [T]) -> UnsafePointer<T> {
        let p = UnsafeMutablePointer<T>.allocate(capacity: max(array.count, 1))
        p.initialize(from: array, count: array.count)
        return UnsafePointer(p)
    }

    deinit {
        UnsafeMutablePointer(mutating: names).deallocate()
        UnsafeMutablePointer(mutating: nameOffsets).deallocate()
        UnsafeMutablePointer(mutating: kinds).deallocate()
        UnsafeMutablePointer(mutating: compactKeys).deallocate()
        UnsafeMutablePointer(mutating: compactKeyOffsets).deallocate()
    }
}
