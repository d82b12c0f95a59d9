import Foundation

/// How a process picks its default kernel variant: the fastest the CPU runs, unless an environment
/// variable names another one (so a benchmark can measure a slower CPU's path on this one).
enum KernelChoice {
    /// The variant `value` names if it is one of `available`, else the last (fastest) of them; a
    /// value that names none comes back with the warning to print.
    static func resolve<Variant: RawRepresentable & Equatable>(_ value: String?, variable: String,
                                                              available: [Variant]) -> (variant: Variant, warning: String?)
    where Variant.RawValue == String {
        let fastest = available.last!
        guard let value else { return (fastest, nil) }
        if let named = Variant(rawValue: value), available.contains(named) { return (named, nil) }
        let names = available.map(\.rawValue).joined(separator: ", ")
        return (fastest, "shrink: \(variable)=\(value) is not a kernel variant this CPU runs (\(names)); using \(fastest.rawValue)")
    }

    /// `resolve` on the process environment, the warning (if any) on standard error.
    static func fromEnvironment<Variant: RawRepresentable & Equatable>(_ variable: String, available: [Variant]) -> Variant
    where Variant.RawValue == String {
        let choice = resolve(ProcessInfo.processInfo.environment[variable], variable: variable, available: available)
        if let warning = choice.warning { FileHandle.standardError.write(Data((warning + "\n").utf8)) }
        return choice.variant
    }
}
