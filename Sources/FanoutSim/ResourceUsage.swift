import Foundation

/// Resident memory of this process, from /proc/self/status on Linux (0 where unavailable).
public enum ResourceUsage {
    public static func residentBytes() -> Int { status("VmRSS:") }
    public static func peakResidentBytes() -> Int { status("VmHWM:") }

    static func status(_ key: String) -> Int {
        guard let text = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return 0 }
        for line in text.split(separator: "\n") where line.hasPrefix(key) {
            let digits = line.dropFirst(key.count).filter(\.isNumber)
            return (Int(digits) ?? 0) * 1024
        }
        return 0
    }
}
