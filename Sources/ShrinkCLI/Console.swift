import Foundation
import ShrinkEvaluation

/// Where a command writes: standard output for results, standard error for progress and errors.
/// Tests capture both by passing closures.
public struct Console: Sendable {
    let writeOutput: @Sendable (String) -> Void
    let writeError: @Sendable (String) -> Void

    /// A console writing to arbitrary sinks (each call receives one line, without the newline).
    public init(output: @escaping @Sendable (String) -> Void, error: @escaping @Sendable (String) -> Void) {
        writeOutput = output
        writeError = error
        isStandard = false
    }

    /// Whether this console writes to the process's standard streams.
    var isStandard: Bool

    /// The process's standard output and standard error.
    public static let standard: Console = {
        var console = Console(output: { line in FileHandle.standardOutput.write(Data((line + "\n").utf8)) },
                              error: { line in FileHandle.standardError.write(Data((line + "\n").utf8)) })
        console.isStandard = true
        return console
    }()

    /// Progress of `total` steps: on standard error rewritten in place when it is a terminal,
    /// else one line per step on this console's error sink.
    func progress(total: Int) -> ProgressReporter {
        if isStandard { return ProgressReporter.standardError(total: total) }
        return ProgressReporter(total: total, isTerminal: false) { text in writeError(text.hasSuffix("\n") ? String(text.dropLast()) : text) }
    }

    func print(_ line: String) { writeOutput(line) }
    /// Text without a newline, shown at once (generated tokens as they arrive): written as is to
    /// standard output, or handed to a custom sink as one piece.
    func stream(_ text: String) {
        guard !text.isEmpty else { return }
        if isStandard { FileHandle.standardOutput.write(Data(text.utf8)) } else { writeOutput(text) }
    }
    func printError(_ line: String) { writeError(line) }
}
