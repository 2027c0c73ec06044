import Foundation

/// The small files of a run folder written whole (the large ones are a `StreamedFile` each).
public enum FolderFiles {
    /// Writes the files into `folder` (created if needed). Each file goes to a temporary name in the
    /// folder and is renamed into place, so a killed run leaves whole files or none; `last` (the file
    /// that marks a complete folder: summary.json, plan.json) is renamed last.
    public static func write(folder: String, files: [String: String], last: String = "summary.json") throws {
        let url = URL(fileURLWithPath: folder)
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        let names = files.keys.sorted { ($0 == last ? 1 : 0, $0) < ($1 == last ? 1 : 0, $1) }
        for name in names {
            try Data(files[name]!.utf8).write(to: url.appendingPathComponent(name), options: .atomic)
        }
    }
}
