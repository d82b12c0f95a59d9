import Foundation

/// Where a command writes: standard output for results, standard error for progress and errors.
/// Tests capture both by passing closures.
public struct Console: Sendable {
    let writeOutput: @Sendable (String) -> Void
    let writeError: @Sendable (String) -> Void

    /// A console writing to arbitrary sinks (each call receives one line, without the newline).
    public init(output: @escaping @Sendable (String) -> Void, error: @escaping @Sendable (String) -> Void) {
        writeOutput = output
        writeError = error
    }

    /// The process's standard output and standard error.
    public static let standard = Console(
        output: { line in FileHandle.standardOutput.write(Data((line + "\n").utf8)) },
        error: { line in FileHandle.standardError.write(Data((line + "\n").utf8)) })

    func print(_ line: String) { writeOutput(line) }
    func printError(_ line: String) { writeError(line) }
}
