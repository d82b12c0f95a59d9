import Foundation

/// `pareto.svg`: accuracy against size on disk (log scale), one labelled point per configuration,
/// the Pareto front drawn as a line through its (filled) points.
struct ParetoPlot {
    let report: ComparisonReport
    let width = 760.0, height = 480.0
    let left = 70.0, right = 150.0, top = 40.0, bottom = 60.0

    func svg() -> String {
        let items = report.configurations
        let sizes = items.map { Double($0.bytes) / 1e6 }, accuracies = items.map { $0.metrics[report.accuracyMetric] ?? .nan }
        let finite = accuracies.filter(\.isFinite)
        let (xLow, xHigh) = logRange(sizes.filter { $0 > 0 })
        var (yLow, yHigh) = (finite.min() ?? 0, finite.max() ?? 1)
        let pad = max((yHigh - yLow) * 0.08, 0.05)
        (yLow, yHigh) = (yLow - pad, yHigh + pad)
        let plotWidth = width - left - right, plotHeight = height - top - bottom
        func x(_ size: Double) -> Double { left + (log10(max(size, 1e-9)) - log10(xLow)) / (log10(xHigh) - log10(xLow)) * plotWidth }
        func y(_ accuracy: Double) -> Double { top + (yHigh - accuracy) / (yHigh - yLow) * plotHeight }
        var svg = [##"<svg xmlns="http://www.w3.org/2000/svg" width="\##(Int(width))" height="\##(Int(height))" viewBox="0 0 \##(Int(width)) \##(Int(height))" font-family="sans-serif" font-size="12">"##,
                   ##"<rect width="100%" height="100%" fill="white"/>"##,
                   ##"<text x="\##(Int(width / 2))" y="22" text-anchor="middle" font-size="15">\##(escape(report.accuracyMetric)) (\##(escape(report.task))) against size</text>"##]
        // Axes, grid and ticks.
        svg.append(##"<rect x="\##(left)" y="\##(top)" width="\##(plotWidth)" height="\##(plotHeight)" fill="none" stroke="#444"/>"##)
        for tick in logTicks(xLow, xHigh) {
            let px = x(tick)
            svg.append(##"<line x1="\##(f(px))" y1="\##(top)" x2="\##(f(px))" y2="\##(top + plotHeight)" stroke="#ddd"/>"##)
            svg.append(##"<text x="\##(f(px))" y="\##(f(top + plotHeight + 18))" text-anchor="middle">\##(tickLabel(tick))</text>"##)
        }
        for tick in linearTicks(yLow, yHigh) {
            let py = y(tick)
            svg.append(##"<line x1="\##(left)" y1="\##(f(py))" x2="\##(left + plotWidth)" y2="\##(f(py))" stroke="#ddd"/>"##)
            svg.append(##"<text x="\##(f(left - 8))" y="\##(f(py + 4))" text-anchor="end">\##(tickLabel(tick))</text>"##)
        }
        svg.append(##"<text x="\##(f(left + plotWidth / 2))" y="\##(f(height - 18))" text-anchor="middle">size on disk (MB, log scale)</text>"##)
        svg.append(##"<text transform="translate(18 \##(f(top + plotHeight / 2))) rotate(-90)" text-anchor="middle">\##(escape(report.accuracyMetric))</text>"##)
        // The front.
        let front = report.paretoFront().filter { accuracies[$0].isFinite }.sorted { sizes[$0] < sizes[$1] }
        if front.count > 1 {
            let points = front.map { "\(f(x(sizes[$0]))),\(f(y(accuracies[$0])))" }.joined(separator: " ")
            svg.append(##"<polyline points="\##(points)" fill="none" stroke="#d62728" stroke-width="2"/>"##)
        }
        // Points, then labels: each at the first spot around its point that overlaps no label and
        // no point; failing that, further down with a leader line.
        let shown = items.indices.filter { accuracies[$0].isFinite }
        let centers = shown.map { (x: x(sizes[$0]), y: y(accuracies[$0])) }
        // Dominated points first, so that front points stay visible where they overlap.
        for (index, center) in zip(shown, centers).sorted(by: { !front.contains($0.0) && front.contains($1.0) }) {
            let onFront = front.contains(index)
            svg.append(##"<circle cx="\##(f(center.x))" cy="\##(f(center.y))" r="5" fill="\##(onFront ? "#d62728" : "white")" stroke="\##(onFront ? "#d62728" : "#1f77b4")" stroke-width="2"/>"##)
        }
        var placed: [(x: Double, y: Double, width: Double)] = []
        func free(_ lx: Double, _ ly: Double, _ labelWidth: Double) -> Bool {
            lx >= 2 && lx + labelWidth <= width - 2 && ly - 11 >= top && ly + 2 <= top + plotHeight
                && !placed.contains { abs($0.y - ly) < 13 && lx < $0.x + $0.width && $0.x < lx + labelWidth }
                && !centers.contains { $0.x + 6 > lx && $0.x - 6 < lx + labelWidth && $0.y + 6 > ly - 11 && $0.y - 6 < ly + 2 }
        }
        for (index, center) in zip(shown, centers).sorted(by: { $0.1.y < $1.1.y }) {
            let label = items[index].name, labelWidth = Double(label.count) * 6.8
            let nearby = [(9.0, 4.0), (9, -7), (9, 15), (-9 - labelWidth, 4), (-9 - labelWidth, -7), (-9 - labelWidth, 15), (-labelWidth / 2, -10), (-labelWidth / 2, 20)]
            var spot = nearby.map { (center.x + $0.0, center.y + $0.1) }.first { free($0.0, $0.1, labelWidth) }
            if spot == nil {
                var ly = center.y + 28
                while ly < top + plotHeight && !free(center.x + 12, ly, labelWidth) { ly += 13 }
                spot = (min(center.x + 12, width - labelWidth - 2), ly)
                svg.append(##"<line x1="\##(f(center.x))" y1="\##(f(center.y + 5))" x2="\##(f(spot!.0))" y2="\##(f(ly - 9))" stroke="#999" stroke-width="0.8"/>"##)
            }
            placed.append((spot!.0, spot!.1, labelWidth))
            svg.append(##"<text x="\##(f(spot!.0))" y="\##(f(spot!.1))">\##(escape(label))</text>"##)
        }
        svg.append(##"<text x="\##(f(left + plotWidth + 10))" y="\##(f(top + plotHeight - 22))" fill="#d62728">● Pareto front</text>"##)
        svg.append(##"<text x="\##(f(left + plotWidth + 10))" y="\##(f(top + plotHeight - 6))" fill="#1f77b4">○ dominated</text>"##)
        svg.append("</svg>")
        return svg.joined(separator: "\n") + "\n"
    }

    func f(_ value: Double) -> String { String(format: "%.1f", value) }

    func escape(_ text: String) -> String {
        text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;").replacingOccurrences(of: ">", with: "&gt;")
            .replacingOccurrences(of: "\"", with: "&quot;")
    }

    /// Decades around the values, widened by a quarter decade on each side.
    func logRange(_ values: [Double]) -> (Double, Double) {
        guard let low = values.min(), let high = values.max() else { return (1, 10) }
        return (pow(10, log10(low) - 0.12), pow(10, log10(high) + 0.12))
    }

    /// 1-2-5 ticks inside the range.
    func logTicks(_ low: Double, _ high: Double) -> [Double] {
        var ticks: [Double] = []
        var decade = pow(10, floor(log10(low)))
        while decade <= high {
            for step in [1.0, 2, 5] where decade * step >= low && decade * step <= high { ticks.append(decade * step) }
            decade *= 10
        }
        return ticks
    }

    /// About six ticks at a 1-2-5 step.
    func linearTicks(_ low: Double, _ high: Double) -> [Double] {
        let raw = (high - low) / 6, magnitude = pow(10, floor(log10(raw)))
        let step = [1.0, 2, 5, 10].map { $0 * magnitude }.first { $0 >= raw }!
        return stride(from: (low / step).rounded(.up) * step, through: high, by: step).map { $0 }
    }

    func tickLabel(_ value: Double) -> String {
        value == value.rounded() && abs(value) < 1e6 ? String(Int(value)) : String(format: value.magnitude < 1 ? "%.2f" : "%.1f", value)
    }
}
