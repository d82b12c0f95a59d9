/// One option of a command: a flag (`--json`) or an option taking a value (`--output <file>`).
struct OptionSpec: Sendable {
    let name: String
    /// The placeholder shown in help for the value; `nil` for a flag.
    let valueName: String?
    let help: String
    /// Whether the option takes every following argument up to the next option (`--recipes a b c`);
    /// it may also be repeated.
    var isList = false
}

/// A positional argument of a command.
struct ArgumentSpec: Sendable {
    let name: String
    let help: String
    /// Whether the argument may be left out.
    let isOptional: Bool
}

/// What a command accepts, used both to parse its arguments and to print its help.
struct CommandSpec: Sendable {
    let name: String
    let summary: String
    let arguments: [ArgumentSpec]
    let options: [OptionSpec]

    static let helpOption = OptionSpec(name: "--help", valueName: nil, help: "Show this help and exit.")

    var allOptions: [OptionSpec] { options + [Self.helpOption] }

    /// The usage line and a description of every argument and option.
    var help: String {
        let argumentsText = arguments.map { $0.isOptional ? "[<\($0.name)>]" : "<\($0.name)>" }.joined(separator: " ")
        var lines = ["Usage: shrink \(name) [options] \(argumentsText)".trimmingTrailingSpaces, "", summary]
        if !arguments.isEmpty {
            lines += ["", "Arguments:"]
            lines += arguments.map { TextTable.helpLine("<\($0.name)>", $0.help) }
        }
        lines += ["", "Options:"]
        for option in allOptions {
            let label = option.valueName.map { "\(option.name) <\($0)>" + (option.isList ? "..." : "") } ?? option.name
            lines.append(TextTable.helpLine(label, option.help))
        }
        return lines.joined(separator: "\n")
    }
}

/// A command line split by a `CommandSpec`: positional arguments, option values and flags.
struct ParsedArguments: Sendable {
    var positionals: [String] = []
    var values: [String: String] = [:]
    var flags: Set<String> = []
    var lists: [String: [String]] = [:]

    /// The values of a list option, in order (empty when absent).
    func list(_ name: String) -> [String] { lists[name] ?? [] }

    func flag(_ name: String) -> Bool { flags.contains(name) }
    func value(_ name: String) -> String? { values[name] }

    /// The value of option `name` as a positive integer, or `fallback` when absent.
    func positiveInteger(_ name: String, default fallback: Int, command: String) throws(UsageError) -> Int {
        guard let text = values[name] else { return fallback }
        guard let value = Int(text), value >= 1 else {
            throw UsageError(command: command, message: "\(name) expects a positive integer, got '\(text)'")
        }
        return value
    }
}

/// A command line that does not fit what the command accepts. Exit code 2.
struct UsageError: Error, CustomStringConvertible {
    let command: String
    let message: String

    var description: String {
        command.isEmpty ? "shrink: \(message) (see 'shrink --help')" : "shrink \(command): \(message) (see 'shrink \(command) --help')"
    }
}

extension CommandSpec {
    /// Splits `arguments` (everything after the command name). Options may be written
    /// `--name value` or `--name=value`; `--` ends options.
    func parse(_ arguments: [String]) throws(UsageError) -> ParsedArguments {
        var parsed = ParsedArguments()
        var index = 0
        var optionsEnded = false
        let expected = allOptions.map(\.name).joined(separator: ", ")
        while index < arguments.count {
            let argument = arguments[index]
            index += 1
            if optionsEnded || !argument.hasPrefix("-") || argument == "-" {
                parsed.positionals.append(argument)
                continue
            }
            if argument == "--" { optionsEnded = true; continue }
            let parts = argument.split(separator: "=", maxSplits: 1).map(String.init)
            guard let option = allOptions.first(where: { $0.name == parts[0] }) else {
                throw UsageError(command: name, message: "unknown option '\(parts[0])'; expected one of \(expected)")
            }
            if option.isList {
                var values = parts.count == 2 ? [parts[1]] : []
                while index < arguments.count && !arguments[index].hasPrefix("--") {
                    values.append(arguments[index])
                    index += 1
                }
                guard !values.isEmpty else {
                    throw UsageError(command: name, message: "option '\(option.name)' needs at least one <\(option.valueName!)>")
                }
                parsed.lists[option.name, default: []] += values
            } else if option.valueName == nil {
                guard parts.count == 1 else { throw UsageError(command: name, message: "option '\(option.name)' takes no value") }
                parsed.flags.insert(option.name)
            } else if parts.count == 2 {
                parsed.values[option.name] = parts[1]
            } else {
                guard index < arguments.count else {
                    throw UsageError(command: name, message: "option '\(option.name)' needs a value <\(option.valueName!)>")
                }
                parsed.values[option.name] = arguments[index]
                index += 1
            }
        }
        if parsed.flag("--help") { return parsed }
        let required = self.arguments.filter { !$0.isOptional }.count
        if parsed.positionals.count < required {
            let missing = self.arguments[parsed.positionals.count]
            throw UsageError(command: name, message: "missing argument <\(missing.name)>")
        }
        if parsed.positionals.count > self.arguments.count {
            throw UsageError(command: name, message: "unexpected argument '\(parsed.positionals[self.arguments.count])'")
        }
        return parsed
    }
}

extension String {
    var trimmingTrailingSpaces: String {
        var copy = self
        while copy.last == " " { copy.removeLast() }
        return copy
    }
}
