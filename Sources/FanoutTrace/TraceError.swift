/// Why a trace cannot be replayed: the line (1-based) and what is wrong with it.
public struct TraceError: Error, Equatable, CustomStringConvertible, Sendable {
    public var line: Int
    public var message: String

    public init(line: Int, _ message: String) {
        self.line = line
        self.message = message
    }

    public var description: String { "line \(line): \(message)" }
}

/// Failure to read or write a file, with its path.
public struct FileError: Error, CustomStringConvertible, Sendable {
    public var path: String
    public var message: String

    public init(path: String, _ message: String) {
        self.path = path
        self.message = message
    }

    public var description: String { "\(path): \(message)" }
}
