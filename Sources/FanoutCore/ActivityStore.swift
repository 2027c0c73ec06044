/// Every activity and device of a population, in flat storage indexed by integer ids.
///
/// Activities are stored column by column (struct of arrays): a million devices with several
/// activities each are a few dozen arrays, not millions of objects. Content records live in one
/// byte slab; an update whose record fits the activity's slot overwrites it in place, so applying
/// an update allocates nothing in steady state.
///
/// Time rules (DOMAIN §4) are evaluated lazily and exactly: an activity keeps the instants at which
/// it becomes stale, ends and is dismissed, and `state(_:now:)` compares the clock with them. A
/// transition therefore takes effect at its exact instant, with no timer per activity.
public struct ActivityStore: Sendable {
    public static let none: Int32 = -1
    public static let never = Int64.max

    // MARK: Identity
    public var activityIds = ByteInterner()
    public var deviceIds = ByteInterner()
    public var appIds = ByteInterner()

    // MARK: Activities (column per property, index = activity id)
    public private(set) var device: [Int32] = []
    public private(set) var app: [Int32] = []
    public private(set) var schema: [Int32] = []
    public private(set) var startMillis: [Int64] = []
    /// Explicit end (an `end` push) or the system end at start + 8 h, whichever comes first.
    public private(set) var endMillis: [Int64] = []
    /// When it is dismissed: by a person, or its dismissal policy after the end.
    public private(set) var dismissMillis: [Int64] = []
    /// The first clock millisecond at which it is stale (`never` when it has no stale date).
    public private(set) var staleMillis: [Int64] = []
    /// Stale dates that are not whole seconds (a trace's `request` may give 1700000900.5), as given;
    /// every other stale date is `staleMillis / 1000`.
    private var fractionalStaleSeconds: [Int32: Double] = [:]
    public private(set) var relevance: [Double] = []
    public private(set) var timestamp: [Int64] = []
    public private(set) var hasTimestamp: [Bool] = []
    /// The update token currently routing to it (an id of `Router.updateTokens`).
    public var token: [Int32] = []
    /// The broadcast channel it is subscribed to, or `none`.
    public var channel: [Int32] = []
    /// Next activity of the same device (its membership list, in no particular order), or `none`.
    private var nextInOrder: [Int32] = []
    /// Outcome counts per activity, 16 bits each; a count that reaches the top moves to `outcomeSpill`.
    private var outcomeCounts: [UInt16] = []
    private var outcomeSpill: [Int: Int] = [:]

    // Content records, in one slab.
    private var contentSlab: [UInt8] = []
    /// Slot start in units of 8 bytes (slots are 8-byte aligned), so 32 bits address 32 GiB.
    private var contentSlot: [UInt32] = []
    private var contentLength: [Int32] = []
    private var contentCapacity: [Int32] = []

    // Priority-10 budget: per activity a block in one slab, allocated on its first counted push:
    // [head, filled, the times of the last `budgetPerHour` counted pushes as a ring].
    private var budgetSlab: [Int64] = []
    private var budgetBlock: [Int32] = []

    // MARK: Devices (index = device id)
    /// First activity of the device's membership list, or `none`.
    private var orderHead: [Int32] = []

    public init() {}

    public var activityCount: Int { device.count }

    /// Reserves room for `activities` more activities on `devices` more devices, with `contentBytes`
    /// of content records and `idBytes` of activity ids in all: a population built at once then
    /// occupies exactly what it needs (no doubling slack in the columns).
    public mutating func reserveCapacity(activities: Int, devices: Int, contentBytes: Int, idBytes: Int) {
        let n = device.count + activities
        device.reserveCapacity(n)
        app.reserveCapacity(n)
        schema.reserveCapacity(n)
        startMillis.reserveCapacity(n)
        endMillis.reserveCapacity(n)
        dismissMillis.reserveCapacity(n)
        staleMillis.reserveCapacity(n)
        relevance.reserveCapacity(n)
        timestamp.reserveCapacity(n)
        hasTimestamp.reserveCapacity(n)
        token.reserveCapacity(n)
        channel.reserveCapacity(n)
        nextInOrder.reserveCapacity(n)
        outcomeCounts.reserveCapacity(n * Outcome.allCases.count)
        contentSlot.reserveCapacity(n)
        contentLength.reserveCapacity(n)
        contentCapacity.reserveCapacity(n)
        budgetBlock.reserveCapacity(n)
        contentSlab.reserveCapacity(contentSlab.count + contentBytes)
        orderHead.reserveCapacity(orderHead.count + devices)
        activityIds.reserveCapacity(keys: activities, bytes: idBytes)
    }
    public var deviceCount: Int { orderHead.count }

    // MARK: Creation

    /// Interns a device id, creating the device when new.
    @discardableResult
    public mutating func internDevice(_ id: UnsafeRawBufferPointer) -> Int32 {
        let (d, inserted) = deviceIds.intern(id)
        if inserted { orderHead.append(ActivityStore.none) }
        return d
    }

    @discardableResult
    public mutating func internApp(_ bundle: UnsafeRawBufferPointer) -> Int32 {
        appIds.intern(bundle).id
    }

    /// Creates an activity started at `nowMillis`. The caller checks limits and id uniqueness.
    public mutating func create(
        id: UnsafeRawBufferPointer, device d: Int32, app a: Int32, schema s: Int32, nowMillis: Int64,
        content: UnsafeRawBufferPointer, staleDate: Double?, relevance r: Double, timestamp ts: Int64?
    ) -> Int32 {
        let (activity, inserted) = activityIds.intern(id)
        precondition(inserted, "activity id already exists")
        device.append(d)
        app.append(a)
        schema.append(s)
        startMillis.append(nowMillis)
        endMillis.append(nowMillis &+ Lifetime.systemEndMillis)
        dismissMillis.append(nowMillis &+ Lifetime.systemEndMillis &+ Lifetime.dismissAfterEndMillis)
        staleMillis.append(ActivityStore.never)
        relevance.append(r)
        timestamp.append(ts ?? 0)
        hasTimestamp.append(ts != nil)
        token.append(ActivityStore.none)
        channel.append(ActivityStore.none)
        nextInOrder.append(ActivityStore.none)
        for _ in Outcome.allCases { outcomeCounts.append(0) }
        contentSlot.append(0)
        contentLength.append(0)
        contentCapacity.append(0)
        budgetBlock.append(-1)
        setStaleDate(activity, seconds: staleDate)
        storeContent(activity, content)
        link(activity)
        return activity
    }

    // MARK: Time (DOMAIN §4)

    @inline(__always)
    public func state(_ a: Int32, nowMillis: Int64) -> ActivityState {
        let i = Int(a)
        if nowMillis >= dismissMillis[i] { return .dismissed }
        if nowMillis >= endMillis[i] { return .ended }
        if nowMillis >= staleMillis[i] { return .stale }
        return .active
    }

    /// Ends the activity at `nowMillis`. Dismissal: no dismissal date → end + 4 h; a date at or
    /// before the end → at once; otherwise the earlier of the date and end + 4 h.
    @inline(__always)
    mutating func end(_ a: Int32, nowMillis: Int64, dismissalDateSeconds: Int64?) {
        let i = Int(a)
        let latest = nowMillis &+ Lifetime.dismissAfterEndMillis
        var dismissal = latest
        if let date = dismissalDateSeconds {
            let dateMillis = Instant.millis(seconds: date)
            dismissal = dateMillis <= nowMillis ? nowMillis : min(dateMillis, latest)
        }
        endMillis[i] = nowMillis
        dismissMillis[i] = min(dismissMillis[i], dismissal)
    }

    /// A person swipes the activity away: dismissed at once, in any state.
    public mutating func dismiss(_ a: Int32, nowMillis: Int64) {
        let i = Int(a)
        dismissMillis[i] = min(dismissMillis[i], nowMillis)
    }

    // MARK: Stale date

    /// The stale date in UNIX seconds as given, or nil.
    public func staleDateSeconds(_ a: Int32) -> Double? {
        let millis = staleMillis[Int(a)]
        if millis == ActivityStore.never { return nil }
        return fractionalStaleSeconds[a] ?? Double(millis / 1000)
    }

    private mutating func setStaleDate(_ a: Int32, seconds: Double?) {
        let i = Int(a)
        if !fractionalStaleSeconds.isEmpty { fractionalStaleSeconds[a] = nil }
        guard let seconds else {
            staleMillis[i] = ActivityStore.never
            return
        }
        let millis = Instant.ceilMillis(seconds: seconds)
        staleMillis[i] = millis
        if Double(millis / 1000) != seconds || millis % 1000 != 0 { fractionalStaleSeconds[a] = seconds }
    }

    // MARK: Content

    /// The activity's content record.
    @inline(__always)
    public func withContent<R>(_ a: Int32, _ body: (UnsafeRawBufferPointer) -> R) -> R {
        let i = Int(a)
        let start = Int(contentSlot[i]) &* 8
        let length = Int(contentLength[i])
        return contentSlab.withUnsafeBytes { body(UnsafeRawBufferPointer(rebasing: $0[start..<start + length])) }
    }

    /// Replaces the content record; in place when it fits the activity's slot.
    @inline(__always)
    mutating func storeContent(_ a: Int32, _ record: UnsafeRawBufferPointer) {
        let i = Int(a)
        if record.count > Int(contentCapacity[i]) {
            // A new slot at the end of the slab (the old slot is abandoned): exact (to 8 bytes) the
            // first time, with a quarter more room when content has outgrown its slot.
            let first = contentCapacity[i] == 0
            let capacity = ((first ? record.count : record.count + record.count / 4) + 7) & ~7
            precondition(contentSlab.count / 8 < Int(UInt32.max), "content slab full")
            contentSlot[i] = UInt32(contentSlab.count / 8)
            contentCapacity[i] = Int32(capacity)
            contentSlab.append(contentsOf: repeatElement(0, count: capacity))
        }
        let offset = Int(contentSlot[i]) &* 8
        if record.count > 0 {
            contentSlab.withUnsafeMutableBytes {
                ($0.baseAddress! + offset).copyMemory(from: record.baseAddress!, byteCount: record.count)
            }
        }
        contentLength[i] = Int32(record.count)
    }

    /// Applies the fields an update or end carries (content, stale date, relevance), keeping the
    /// device's relevance order current.
    @inline(__always)
    mutating func replaceContent(_ a: Int32, record: UnsafeRawBufferPointer, staleDate: Int64?, relevance r: Double) {
        let i = Int(a)
        storeContent(a, record)
        if let date = staleDate {
            staleMillis[i] = Instant.millis(seconds: date)
            if !fractionalStaleSeconds.isEmpty { fractionalStaleSeconds[a] = nil }
            if staleMillis[i] == Int64.max || staleMillis[i] == Int64.min { fractionalStaleSeconds[a] = Double(date) }
        } else {
            if !fractionalStaleSeconds.isEmpty { fractionalStaleSeconds[a] = nil }
            staleMillis[i] = ActivityStore.never
        }
        // Written only when it changes (a write is a uniqueness check and a store per recipient).
        if relevance[i] != r || (r == 0 && relevance[i].sign != r.sign) { relevance[i] = r }
    }

    @inline(__always)
    mutating func setTimestamp(_ a: Int32, _ ts: Int64) {
        timestamp[Int(a)] = ts
        hasTimestamp[Int(a)] = true
    }

    // MARK: Apply (DOMAIN §3.4), in two steps around decoding

    /// The checks before decoding, in order: ended or dismissed → `ignoredEnded`; a timestamp not
    /// newer → `ignoredStaleTimestamp`; a priority-10 push over the budget → `throttled` (and a push
    /// within it is counted). Returns nil when the push goes on to decoding, and the activity's schema.
    @inline(__always)
    mutating func admit(
        _ a: Int32, timestamp ts: Int64, priority: Int64, budgetPerHour: Int?, nowMillis: Int64
    ) -> (Outcome?, schema: Int32) {
        let i = Int(a)
        if !state(a, nowMillis: nowMillis).isLive { return (.ignoredEnded, -1) }
        if hasTimestamp[i] && ts <= timestamp[i] { return (.ignoredStaleTimestamp, -1) }
        if priority == 10, let budget = budgetPerHour, budgetExhausted(a, budget: budget, nowMillis: nowMillis) {
            return (.throttled, -1)
        }
        return (nil, schema[i])
    }

    /// Applies a decoded update or end: the timestamp; the content, stale date and relevance when the
    /// push carries content (`record` not nil); the end.
    @inline(__always)
    mutating func applyDecoded(
        _ a: Int32, timestamp ts: Int64, record: UnsafeRawBufferPointer?, staleDate: Int64?, relevance: Double,
        ends: Bool, dismissalDate: Int64?, nowMillis: Int64
    ) {
        setTimestamp(a, ts)
        if let record { replaceContent(a, record: record, staleDate: staleDate, relevance: relevance) }
        if ends { end(a, nowMillis: nowMillis, dismissalDateSeconds: dismissalDate) }
    }

    // MARK: Outcomes

    @inline(__always)
    mutating func count(_ outcome: Outcome, for a: Int32) {
        let k = Int(a) * Outcome.allCases.count + outcome.rawValue
        if outcomeCounts[k] == UInt16.max {
            outcomeSpill[k, default: 0] += Int(UInt16.max)
            outcomeCounts[k] = 0
        }
        outcomeCounts[k] &+= 1
    }

    public func outcomeCount(_ outcome: Outcome, for a: Int32) -> Int {
        let k = Int(a) * Outcome.allCases.count + outcome.rawValue
        return Int(outcomeCounts[k]) + (outcomeSpill.isEmpty ? 0 : outcomeSpill[k, default: 0])
    }

    // MARK: Budget (TRACE rule 11)

    /// True when the activity already has `budget` counted pushes in (now − 1 h, now]; otherwise
    /// counts this one and returns false.
    @inline(__always)
    mutating func budgetExhausted(_ a: Int32, budget: Int, nowMillis: Int64) -> Bool {
        let i = Int(a)
        if budget <= 0 { return true }
        let stride = budget + 2
        if budgetBlock[i] < 0 {
            precondition(budgetSlab.count / stride < Int(Int32.max), "budget slab full")
            budgetBlock[i] = Int32(budgetSlab.count / stride)
            budgetSlab.append(contentsOf: repeatElement(0, count: stride))
        }
        let base = Int(budgetBlock[i]) * stride
        let head = Int(budgetSlab[base])
        let filled = Int(budgetSlab[base + 1])
        let ring = base + 2
        if filled == budget {
            // The oldest of the last `budget` counted pushes is still inside the window: exhausted.
            if budgetSlab[ring + head] > nowMillis - Lifetime.budgetWindowMillis { return true }
            budgetSlab[ring + head] = nowMillis
            budgetSlab[base] = Int64((head + 1) % budget)
        } else {
            budgetSlab[ring + (head + filled) % budget] = nowMillis
            budgetSlab[base + 1] = Int64(filled + 1)
        }
        return false
    }

    // MARK: Relevance order (DOMAIN §5)
    //
    // The order is a function of the activities' current relevance, start and id, so it is computed
    // where it is read — the Lock Screen and the Dynamic Island, ten activities at most — rather than
    // kept sorted through every apply: each read sees exactly the order DOMAIN §5 keeps current, and an
    // apply that changes the relevance costs nothing more (moving the activity in a kept-sorted list was
    // a third of a broadcast recipient's apply).

    /// True when `a` sorts before `b`: higher relevance, then earlier start, then activity id.
    @inline(__always)
    func precedes(_ a: Int32, _ b: Int32) -> Bool {
        let i = Int(a)
        let j = Int(b)
        if relevance[i] != relevance[j] { return relevance[i] > relevance[j] }
        if startMillis[i] != startMillis[j] { return startMillis[i] < startMillis[j] }
        return activityIds.withBytes(a) { x in activityIds.withBytes(b) { y in compareBytes(x, y) < 0 } }
    }

    /// Adds a new activity to its device's list (at the front: the list is not kept sorted).
    private mutating func link(_ a: Int32) {
        let d = Int(device[Int(a)])
        nextInOrder[Int(a)] = orderHead[d]
        orderHead[d] = a
    }

    private mutating func removeFromOrder(_ a: Int32) {
        let d = Int(device[Int(a)])
        var previous = ActivityStore.none
        var current = orderHead[d]
        while current != ActivityStore.none && current != a {
            previous = current
            current = nextInOrder[Int(current)]
        }
        guard current == a else { return }
        if previous == ActivityStore.none {
            orderHead[d] = nextInOrder[Int(a)]
        } else {
            nextInOrder[Int(previous)] = nextInOrder[Int(a)]
        }
        nextInOrder[Int(a)] = ActivityStore.none
    }

    /// Drops dismissed activities from the device's order list (they are never shown again).
    mutating func pruneDismissed(device d: Int32, nowMillis: Int64) {
        var current = orderHead[Int(d)]
        while current != ActivityStore.none {
            let next = nextInOrder[Int(current)]
            if nowMillis >= dismissMillis[Int(current)] { removeFromOrder(current) }
            current = next
        }
    }

    /// Live (active or stale) activities on the device, in all and of `app` (DOMAIN §1 limits).
    func liveCounts(device d: Int32, app a: Int32, nowMillis: Int64) -> (device: Int, app: Int) {
        var total = 0
        var ofApp = 0
        var current = orderHead[Int(d)]
        while current != ActivityStore.none {
            if state(current, nowMillis: nowMillis).isLive {
                total += 1
                if app[Int(current)] == a { ofApp += 1 }
            }
            current = nextInOrder[Int(current)]
        }
        return (total, ofApp)
    }

    /// The Lock Screen: every activity not dismissed, by relevance (DOMAIN §5).
    public func lockScreen(device d: Int32, nowMillis: Int64) -> [Int32] {
        var result: [Int32] = []
        var current = orderHead[Int(d)]
        while current != ActivityStore.none {
            if state(current, nowMillis: nowMillis) != .dismissed { result.append(current) }
            current = nextInOrder[Int(current)]
        }
        sortByPrecedence(&result)
        return result
    }

    /// The Dynamic Island: the first two live activities of the Lock Screen order (DOMAIN §5).
    public func island(device d: Int32, nowMillis: Int64) -> [Int32] {
        var result: [Int32] = []
        var current = orderHead[Int(d)]
        while current != ActivityStore.none {
            if state(current, nowMillis: nowMillis).isLive { result.append(current) }
            current = nextInOrder[Int(current)]
        }
        sortByPrecedence(&result)
        if result.count > 2 { result.removeLast(result.count - 2) }
        return result
    }

    /// Sorts a device's activities by `precedes` (a total order: the id decides last). An insertion sort for the
    /// usual few, without a closure: `sort { precedes($0, $1) }` copied the whole store (a retain and release of
    /// every column) for each call, the most of the time of a million devices' state dump.
    private func sortByPrecedence(_ list: inout [Int32]) {
        guard list.count > 1 else { return }
        if list.count > 32 {
            let store = self
            list.sort { store.precedes($0, $1) }
            return
        }
        for i in 1..<list.count {
            let x = list[i]
            var j = i
            while j > 0 && precedes(x, list[j - 1]) {
                list[j] = list[j - 1]
                j -= 1
            }
            list[j] = x
        }
    }
}
