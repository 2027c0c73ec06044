import Foundation

/// Resident memory of this process, from /proc/self/status on Linux (0 where unavailable).
public enum ResourceUsage {
    public static func residentBytes() -> Int { status("VmRSS:") }
    /// The process's peak resident memory. VmHWM alone can read below a VmRSS sample taken earlier: the
    /// kernel updates the high-water mark lazily (on unmap and exit); getrusage's `ru_maxrss` takes the
    /// larger of the mark and the current RSS, and the current VmRSS is included too.
    public static func peakResidentBytes() -> Int {
        var usage = rusage()
        #if os(Linux)
            let who = RUSAGE_SELF.rawValue
        #else
            let who = RUSAGE_SELF
        #endif
        let maxrss = getrusage(who, &usage) == 0 ? Int(usage.ru_maxrss) * 1024 : 0
        return max(maxrss, status("VmHWM:"), status("VmRSS:"))
    }

    /// Open file descriptors of this process (entries of /proc/self/fd; 0 where unavailable).
    public static func openFileDescriptors() -> Int {
        // The listing itself opens one descriptor for the directory: not counted.
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd") else { return 0 }
        return max(names.count - 1, 0)
    }

    static func status(_ key: String) -> Int {
        guard let text = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return 0 }
        for line in text.split(separator: "\n") where line.hasPrefix(key) {
            let digits = line.dropFirst(key.count).filter(\.isNumber)
            return (Int(digits) ?? 0) * 1024
        }
        return 0
    }
}

/// One reading of the process's resources during a run (`fanout run soak` checks them flat).
public struct ResourceSample: Sendable, Equatable {
    /// Seconds since the run started.
    public var elapsedSeconds: Double
    public var residentBytes: Int
    public var openFileDescriptors: Int

    public init(elapsedSeconds: Double, residentBytes: Int, openFileDescriptors: Int) {
        self.elapsedSeconds = elapsedSeconds
        self.residentBytes = residentBytes
        self.openFileDescriptors = openFileDescriptors
    }

    public static func now(elapsedSeconds: Double) -> ResourceSample {
        ResourceSample(
            elapsedSeconds: elapsedSeconds, residentBytes: ResourceUsage.residentBytes(),
            openFileDescriptors: ResourceUsage.openFileDescriptors())
    }

    /// Every 10 s of wall time.
    public static let intervalSeconds = 10.0
}

/// Are the samples flat? Memory within ±`tolerance` of its level after warm-up (the first
/// `warmUpShare` of the run), file descriptors constant after warm-up.
public struct ResourceTrend: Sendable, Equatable {
    public var rssFirstAfterWarmUp: Int
    public var rssLast: Int
    public var rssMax: Int
    public var rssMin: Int
    public var rssFlat: Bool
    public var fdsFirst: Int
    public var fdsLast: Int
    public var fdsMax: Int
    public var fdsFlat: Bool

    public init?(_ samples: [ResourceSample], warmUpShare: Double = 0.2, tolerance: Double = 0.05) {
        guard let last = samples.last else { return nil }
        let warm = samples.filter { $0.elapsedSeconds >= last.elapsedSeconds * warmUpShare }
        guard let first = warm.first else { return nil }
        rssFirstAfterWarmUp = first.residentBytes
        rssLast = last.residentBytes
        rssMax = warm.map(\.residentBytes).max() ?? 0
        rssMin = warm.map(\.residentBytes).min() ?? 0
        let level = Double(first.residentBytes)
        rssFlat = warm.allSatisfy { abs(Double($0.residentBytes) - level) <= level * tolerance }
        fdsFirst = first.openFileDescriptors
        fdsLast = last.openFileDescriptors
        fdsMax = warm.map(\.openFileDescriptors).max() ?? 0
        fdsFlat = warm.allSatisfy { $0.openFileDescriptors == first.openFileDescriptors }
    }
}
