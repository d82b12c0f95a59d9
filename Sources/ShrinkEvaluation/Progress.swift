import Foundation

/// Progress of a long run in steps: on a terminal one line rewritten in place with the time left
/// estimated from the steps so far; otherwise a plain line per step.
public final class ProgressReporter: @unchecked Sendable {
    let total: Int
    let isTerminal: Bool
    let write: (String) -> Void
    let start = Date()
    private var done = 0

    /// `write` receives text to put on the progress stream as is (no newline added).
    public init(total: Int, isTerminal: Bool, write: @escaping (String) -> Void) {
        self.total = max(total, 1)
        self.isTerminal = isTerminal
        self.write = write
    }

    /// Standard error, rewritten in place when it is a terminal.
    public static func standardError(total: Int) -> ProgressReporter {
        ProgressReporter(total: total, isTerminal: isatty(2) == 1) { text in FileHandle.standardError.write(Data(text.utf8)) }
    }

    /// Starts step `label` (the steps before it are done).
    public func begin(_ label: String) {
        let elapsed = Date().timeIntervalSince(start)
        var line = "[\(done + 1)/\(total)] \(label)"
        if done > 0 {
            let left = elapsed / Double(done) * Double(total - done)
            line += String(format: " (%.0f s elapsed, about %.0f s left)", elapsed, left)
        }
        write(isTerminal ? "\r\u{1B}[K" + line : line + "\n")
    }

    /// Ends the current step.
    public func end() { done += 1 }

    /// Ends the run: clears the terminal line.
    public func finish() {
        if isTerminal { write("\r\u{1B}[K") }
    }
}
