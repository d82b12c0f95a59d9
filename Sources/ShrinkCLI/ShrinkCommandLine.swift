import ShrinkCore

/// The `shrink` command line: dispatches to a command and maps outcomes to exit codes.
///
/// Exit codes: 0 success; 1 the command ran but a check it performs failed; 2 a usage error
/// (unknown command or option, missing argument) or input that cannot be used (missing, corrupt or
/// invalid file), reported on standard error as one line.
public enum ShrinkCommandLine {
    /// Every command, in the order `shrink --help` lists them.
    static let commands: [ShrinkCommand] = [
        InspectCommand.command, SpecializeCommand.command, CompressCommand.command, DecompressCommand.command, ExportCommand.command, EmbedCommand.command, PerplexityCommand.command, GenerateCommand.command, TokenizeCommand.command, CompareCommand.command,
        MergeCommand.command, GateCommand.command, CalibrateCommand.command, SensitivityCommand.command, SearchCommand.command,
    ]

    static let overview = """
        Shrink makes neural-network models smaller and faster: it compresses weights by recipe \
        (quantization, palettization, pruning), runs them directly, and measures what it cost.
        """

    /// Runs `arguments` (without the program name) and returns the exit code.
    public static func run(_ arguments: [String], console: Console = .standard) -> Int32 {
        guard let first = arguments.first else {
            console.printError(UsageError(command: "", message: "missing command; expected one of \(commandNames)").description)
            return 2
        }
        if first == "--version" {
            console.print("shrink \(ShrinkVersion.current)")
            return 0
        }
        if first == "--help" || first == "-h" || first == "help" {
            if arguments.count > 1, let command = commands.first(where: { $0.spec.name == arguments[1] }) {
                console.print(command.spec.help)
            } else {
                console.print(help)
            }
            return 0
        }
        guard let command = commands.first(where: { $0.spec.name == first }) else {
            console.printError(UsageError(command: "", message: "unknown command '\(first)'; expected one of \(commandNames)").description)
            return 2
        }
        do {
            let parsed = try command.spec.parse(Array(arguments.dropFirst()))
            if parsed.flag("--help") {
                console.print(command.spec.help)
                return 0
            }
            return try command.run(parsed, console)
        } catch let error as UsageError {
            console.printError(error.description)
            return 2
        } catch {
            console.printError("shrink \(first): error: \(error)")
            return 2
        }
    }

    static var commandNames: String { commands.map(\.spec.name).joined(separator: ", ") }

    static var help: String {
        var lines = ["Usage: shrink <command> [options]", "", overview, "", "Commands:"]
        lines += commands.map { TextTable.helpLine($0.spec.name, $0.spec.summary) }
        lines += ["", "Run 'shrink <command> --help' for a command's arguments and options; 'shrink --version' prints the version."]
        return lines.joined(separator: "\n")
    }
}

/// A subcommand of `shrink`: what it accepts and what it does.
struct ShrinkCommand: Sendable {
    /// The command's name, arguments and options.
    let spec: CommandSpec
    /// Runs the command; returns the exit code. Thrown errors exit with code 2.
    let run: @Sendable (ParsedArguments, Console) throws -> Int32
}
