/// Plain-text rendering helpers for terminal output.
enum TextTable {
    /// Renders rows as columns separated by two spaces; columns whose index is in `rightAligned`
    /// are right-aligned (numbers), the rest left-aligned.
    static func render(header: [String], rows: [[String]], rightAligned: Set<Int> = [], indent: String = "  ") -> String {
        let all = [header] + rows
        let widths = header.indices.map { column in all.map { $0[column].count }.max() ?? 0 }
        return all.map { row in
            let cells = row.enumerated().map { column, cell in
                let padding = String(repeating: " ", count: widths[column] - cell.count)
                return rightAligned.contains(column) ? padding + cell : cell + padding
            }
            return indent + cells.joined(separator: "  ").trimmingTrailingSpaces
        }.joined(separator: "\n")
    }

    /// `22713728` → `"22,713,728"`.
    static func grouped(_ value: Int) -> String {
        let digits = String(value.magnitude)
        var result = ""
        for (index, character) in digits.enumerated() {
            if index > 0 && (digits.count - index) % 3 == 0 { result.append(",") }
            result.append(character)
        }
        return (value < 0 ? "-" : "") + result
    }

    /// A byte count with a binary unit: `90854912` → `"86.6 MiB"`.
    static func byteSize(_ bytes: Int) -> String {
        let units = ["B", "KiB", "MiB", "GiB", "TiB"]
        var value = Double(bytes)
        var unit = 0
        while value >= 1024 && unit < units.count - 1 { value /= 1024; unit += 1 }
        return unit == 0 ? "\(bytes) B" : fixed(value, digits: 1) + " " + units[unit]
    }

    /// `0.98765` → `"98.8 %"`.
    static func percent(_ fraction: Double) -> String { fixed(fraction * 100, digits: 1) + " %" }

    /// A number with exactly `digits` decimals.
    static func fixed(_ value: Double, digits: Int) -> String {
        var scale = 1.0
        for _ in 0..<digits { scale *= 10 }
        let rounded = (value * scale).rounded() / scale
        var text = String(rounded)
        if text.contains("e") { return text }
        if !text.contains(".") { text += "." }
        let decimals = text.split(separator: ".", omittingEmptySubsequences: false)[1].count
        text += String(repeating: "0", count: max(0, digits - decimals))
        return digits == 0 ? String(text.dropLast()) : text
    }

    /// One line of a help listing: the name padded to a column, then the description.
    static func helpLine(_ name: String, _ help: String) -> String {
        let padded = name.count < 24 ? name + String(repeating: " ", count: 24 - name.count) : name + "  "
        return "  " + padded + help
    }
}
