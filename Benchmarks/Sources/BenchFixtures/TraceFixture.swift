/// A deterministic in-memory trace (docs/TRACE.md) for the replay benchmark: a header, activities
/// requested on 80 devices (some on a broadcast channel), then token and channel pushes with the
/// match content-state, token rotations, dismissals and an occasional push to an unknown token.
public enum TraceFixture {
    /// Exactly `lines` lines (header included), each without its newline.
    public static func lines(count lines: Int = 1000) -> [[UInt8]] {
        var out: [String] = []
        out.reserveCapacity(lines)
        out.append(
            #"{"trace":1,"epoch":\#(Match.epochSeconds),"schemas":{"\#(Match.attributesType)":{"homeTeam":"string","#
                + #""awayTeam":"string","homeScore":"int","awayScore":"int","period":"string?","clock":"string","#
                + #""lastEvent":"string","possession":"double","winProbability":"double","venue":"string","#
                + #""final":"bool"}},"limits":{"perApp":5,"perDevice":10},"budgetPerHour":null}"#)
        let devices = 80
        let activities = 3 * devices
        var tokens = (0..<activities).map { Match.token($0) }
        var at = 0
        var timestamp = Match.epochSeconds
        var state: UInt64 = 0x5EED
        func next(_ bound: Int) -> Int {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Int((state >> 33) % UInt64(bound))
        }
        for a in 0..<activities where out.count < lines {
            at += 5
            let channel = a % 4 == 0 ? #""match-\#(a % 3)""# : "null"
            out.append(
                #"{"at":\#(at),"op":"request","device":"\#(Match.deviceId(a % devices))","app":"\#(Match.bundle)","#
                    + #""activity":"\#(Match.activityId(a))","type":"\#(Match.attributesType)","attributes":{},"#
                    + #""state":\#(json(Match.content(a))),"staleDate":null,"relevance":\#(a % 3 * 25),"#
                    + #""token":"\#(tokens[a])","channel":\#(channel)}"#)
        }
        var k = 0
        while out.count < lines {
            at += 1 + next(40)
            k += 1
            let roll = next(100)
            if roll < 3 {
                let a = next(activities)
                tokens[a] = Match.token(activities + k)
                out.append(#"{"at":\#(at),"op":"rotate","activity":"\#(Match.activityId(a))","token":"\#(tokens[a])"}"#)
                continue
            }
            if roll < 5 {
                out.append(#"{"at":\#(at),"op":"dismiss","activity":"\#(Match.activityId(next(activities)))"}"#)
                continue
            }
            timestamp += 1
            let payload =
                #"{"aps":{"timestamp":\#(timestamp),"event":"update","content-state":"#
                + json(Match.content(k)) + #","stale-date":\#(Match.staleDateSeconds),"relevance-score":50}}"#
            let target: String
            if roll < 25 {
                target = #""channel":"match-\#(next(3))""#
            } else if roll < 27 {
                target = #""token":"\#(Match.token(1_000_000 + k))""#  // never issued: Unregistered
            } else {
                target = #""token":"\#(tokens[next(activities)])""#
            }
            out.append(
                #"{"at":\#(at),"op":"push",\#(target),"pushType":"liveactivity","topic":"\#(Match.topic)","#
                    + #""priority":10,"expiration":0,"collapseId":null,"apnsId":null,"payload":\#(quoted(payload))}"#)
        }
        return out.map { Array($0.utf8) }
    }

    /// The content as compact JSON, keys in schema order (what a backend would send).
    public static func json(_ c: MatchContent) -> String {
        var s = #"{"homeTeam":\#(quoted(c.homeTeam)),"awayTeam":\#(quoted(c.awayTeam)),"#
        s += #""homeScore":\#(c.homeScore),"awayScore":\#(c.awayScore),"#
        s += #""period":\#(c.period.map(quoted) ?? "null"),"clock":\#(quoted(c.clock)),"#
        s += #""lastEvent":\#(quoted(c.lastEvent)),"possession":\#(c.possession),"#
        s += #""winProbability":\#(c.winProbability),"venue":\#(quoted(c.venue)),"final":\#(c.final)}"#
        return s
    }

    /// A JSON string literal (quotes and backslashes escaped; the fixture has no control characters).
    static func quoted(_ s: String) -> String {
        var out = "\""
        for ch in s.unicodeScalars {
            switch ch {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            default: out.unicodeScalars.append(ch)
            }
        }
        return out + "\""
    }
}
