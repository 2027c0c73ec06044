import FanoutCore

/// The content-state every benchmark sends: a football match, about 250 bytes of JSON.
///
/// The Peer suite encodes and decodes this struct with Foundation's `Codable` coders; the Core
/// suite writes the same values as content records of `Match.schema`. The 16 variants differ in
/// scores, clock, event text and probabilities, so payload sizes vary by a few bytes as they would.
public struct MatchContent: Codable, Equatable, Sendable {
    public var homeTeam: String
    public var awayTeam: String
    public var homeScore: Int
    public var awayScore: Int
    public var period: String?
    public var clock: String
    public var lastEvent: String
    public var possession: Double
    public var winProbability: Double
    public var venue: String
    public var final: Bool

    public init(
        homeTeam: String, awayTeam: String, homeScore: Int, awayScore: Int, period: String?, clock: String,
        lastEvent: String, possession: Double, winProbability: Double, venue: String, final: Bool
    ) {
        self.homeTeam = homeTeam
        self.awayTeam = awayTeam
        self.homeScore = homeScore
        self.awayScore = awayScore
        self.period = period
        self.clock = clock
        self.lastEvent = lastEvent
        self.possession = possession
        self.winProbability = winProbability
        self.venue = venue
        self.final = final
    }

    /// Appends the content record of this value under `Match.schema` (field order of the schema).
    public func appendRecord(to out: inout [UInt8]) {
        func string(_ s: String) {
            var copy = s
            copy.withUTF8 { ContentRecord.appendString(UnsafeRawBufferPointer($0), to: &out) }
        }
        string(homeTeam)
        string(awayTeam)
        ContentRecord.appendInt(Int64(homeScore), to: &out)
        ContentRecord.appendInt(Int64(awayScore), to: &out)
        if let period { string(period) } else { ContentRecord.appendAbsent(to: &out) }
        string(clock)
        string(lastEvent)
        ContentRecord.appendDouble(possession, to: &out)
        ContentRecord.appendDouble(winProbability, to: &out)
        string(venue)
        ContentRecord.appendBool(final, to: &out)
    }
}

/// Constants and deterministic inputs shared by the suites (no randomness: every run sends the same bytes).
public enum Match {
    public static let epochSeconds: Int64 = 1_700_000_000
    /// The clock of every apply: one minute after the population started (activities stay active).
    public static let nowMillis: Int64 = epochSeconds * 1000 + 60_000
    /// `stale-date` of every update: an hour after the epoch.
    public static let staleDateSeconds: Int64 = epochSeconds + 3600
    public static let relevanceScore: Double = 50
    public static let bundle = "com.example.scores"
    public static let topic = "com.example.scores.push-type.liveactivity"
    public static let pushType = "liveactivity"
    public static let attributesType = "MatchAttributes"
    /// A broadcast channel id as a backend would name it.
    public static let channel = "match-2024-laliga-rso-ath"

    public static let schema = ContentSchema(name: attributesType, fields: [
        .init(name: "homeTeam", type: .string),
        .init(name: "awayTeam", type: .string),
        .init(name: "homeScore", type: .int),
        .init(name: "awayScore", type: .int),
        .init(name: "period", type: .string, optional: true),
        .init(name: "clock", type: .string),
        .init(name: "lastEvent", type: .string),
        .init(name: "possession", type: .double),
        .init(name: "winProbability", type: .double),
        .init(name: "venue", type: .string),
        .init(name: "final", type: .bool),
    ])

    public static let variantCount = 16

    private static let events = [
        "Kick-off at Reale Arena", "Yellow card for Zubimendi after a late challenge",
        "Goal! Oyarzabal scores from the penalty spot", "Substitution: Kubo replaced by Barrenetxea",
        "Corner kick for Athletic Club, cleared by Le Normand", "Goal! Nico Williams curls it into the top corner",
        "VAR check: possible handball in the box", "Half-time: teams head to the dressing rooms",
    ]

    /// Content variant `v` (0..<variantCount).
    public static func content(_ v: Int) -> MatchContent {
        let k = v % variantCount
        return MatchContent(
            homeTeam: "Real Sociedad", awayTeam: "Athletic Club", homeScore: (k + 1) / 3, awayScore: k / 5,
            period: k % 4 == 3 ? nil : (k < 8 ? "1st half" : "2nd half"),
            clock: "\(10 + (k * 7) % 80):\(k * 13 % 60 < 10 ? "0" : "")\(k * 13 % 60)",
            lastEvent: events[k % events.count],
            possession: Double(40 + (k * 3) % 21) / 100, winProbability: Double(300 + k * 37) / 1000,
            venue: "Reale Arena", final: false)
    }

    /// The largest content record among the variants: activities start with it so that every
    /// later update fits the activity's content slot (no slab growth in the measured region).
    public static func largestRecord() -> [UInt8] {
        var best: [UInt8] = []
        for v in 0..<variantCount {
            var record: [UInt8] = []
            content(v).appendRecord(to: &record)
            if record.count > best.count { best = record }
        }
        return best
    }

    /// A 64-hex-digit (32-byte) update token, distinct for every `i`.
    public static func token(_ i: Int) -> String {
        var x = UInt64(truncatingIfNeeded: i) &* 0x9E37_79B9_7F4A_7C15 &+ 0x1234_5678
        var text = ""
        for _ in 0..<4 {
            x ^= x >> 31
            x = x &* 0xBF58_476D_1CE4_E5B9
            x ^= x >> 29
            let hex = String(x, radix: 16)
            text += String(repeating: "0", count: 16 - hex.count) + hex
        }
        return text
    }

    public static func activityId(_ i: Int) -> String { "act-\(pad(i, 7))" }
    public static func deviceId(_ i: Int) -> String { "device-\(pad(i, 7))" }

    static func pad(_ i: Int, _ width: Int) -> String {
        let s = String(i)
        return String(repeating: "0", count: max(0, width - s.count)) + s
    }
}
