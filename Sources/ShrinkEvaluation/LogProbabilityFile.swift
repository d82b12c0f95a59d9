import Foundation
import ShrinkIO

/// A base model's next-token log-probabilities over the rows a perplexity run scores, kept so that
/// another model's run measures its KL-divergence from the base (llama.cpp's `--kl-divergence-base`
/// idea, Shrink's own file).
///
/// Layout (little-endian): the 8 bytes `SHRKLP01`; UInt32 vocabulary, context, chunks, rows per
/// chunk; UInt32 token count and the evaluated windows' token ids (Int32 each, to check that both
/// runs read the same text); then per scored row a Float `low` and `vocabulary` UInt16 codes,
/// `log p ≈ low + code · (−low / 65535)`, `low = max(min log p, −30)` (log-probabilities below −30
/// clamp to it: e^−30 ≈ 1e−13). A row is `8 + 2 · vocabulary` bytes; the quantization error of a
/// log-probability is at most `−low / 131070` ≤ 2.3e−4.
public enum LogProbabilityFile {
    static let magic = Array("SHRKLP01".utf8)
    static let floor: Float = -30

    public struct Header: Equatable, Sendable {
        public var vocabulary: Int
        public var context: Int
        public var chunks: Int
        public var rowsPerChunk: Int
        public var tokens: [Int32]

        public init(vocabulary: Int, context: Int, chunks: Int, rowsPerChunk: Int, tokens: [Int32]) {
            (self.vocabulary, self.context, self.chunks, self.rowsPerChunk, self.tokens) = (vocabulary, context, chunks, rowsPerChunk, tokens)
        }
    }

    public enum Failure: Error, Equatable, CustomStringConvertible {
        case unreadable(path: String, reason: String)
        case mismatch(path: String, reason: String)

        public var description: String {
            switch self {
            case .unreadable(let path, let reason): "\(path): \(reason)"
            case .mismatch(let path, let reason): "\(path) was made from another run: \(reason)"
            }
        }
    }

    /// Writes the header, then one row per `append`, to a temporary file that `finish` moves to
    /// `path` (a failed run leaves nothing at `path`).
    public final class Writer {
        let path: String
        let temporary: String
        let handle: FileHandle
        let vocabulary: Int
        var buffer: [UInt8] = []

        public init(path: String, header: Header) throws {
            self.path = path
            temporary = path + ".partial-\(ProcessInfo.processInfo.processIdentifier)"
            guard FileManager.default.createFile(atPath: temporary, contents: nil), let handle = FileHandle(forWritingAtPath: temporary) else {
                throw Failure.unreadable(path: path, reason: "cannot create the file")
            }
            self.handle = handle
            vocabulary = header.vocabulary
            var bytes = LogProbabilityFile.magic
            for value in [header.vocabulary, header.context, header.chunks, header.rowsPerChunk, header.tokens.count] {
                withUnsafeBytes(of: UInt32(value).littleEndian) { bytes += $0 }
            }
            for token in header.tokens { withUnsafeBytes(of: token.littleEndian) { bytes += $0 } }
            try handle.write(contentsOf: bytes)
        }

        /// Appends one row of logits (as log-probabilities).
        public func append(_ logits: UnsafeBufferPointer<Float>) throws {
            let logProbabilities = LogProbabilityFile.logSoftmax(logits)
            let low = max(logProbabilities.min() ?? 0, LogProbabilityFile.floor)
            let step = -low / 65535
            buffer.removeAll(keepingCapacity: true)
            withUnsafeBytes(of: low.bitPattern.littleEndian) { buffer += $0 }
            for value in logProbabilities {
                let code = step > 0 ? UInt16(min(65535, max(0, ((max(value, low) - low) / step).rounded()))) : 0
                withUnsafeBytes(of: code.littleEndian) { buffer += $0 }
            }
            try handle.write(contentsOf: buffer)
        }

        /// Closes the file and moves it into place.
        public func finish() throws {
            try handle.close()
            _ = try? FileManager.default.removeItem(atPath: path)
            try FileManager.default.moveItem(atPath: temporary, toPath: path)
        }

        /// Closes and removes the temporary file.
        public func abandon() {
            try? handle.close()
            try? FileManager.default.removeItem(atPath: temporary)
        }
    }

    /// Reads a file written by `Writer` (memory-mapped): its header and rows.
    public final class Reader {
        public let header: Header
        let bytes: Data
        let rowsStart: Int
        public let rows: Int

        public init(path: String) throws {
            guard let data = try? Data(contentsOf: URL(fileURLWithPath: path), options: .alwaysMapped) else {
                throw Failure.unreadable(path: path, reason: "cannot read the file")
            }
            guard data.count >= 28, Array(data.prefix(8)) == LogProbabilityFile.magic else {
                throw Failure.unreadable(path: path, reason: "not a Shrink log-probability file (made by shrink perplexity --kl-base)")
            }
            func u32(_ offset: Int) -> Int { Int(UInt32(littleEndian: data.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: offset, as: UInt32.self) })) }
            let vocabulary = u32(8), count = u32(24)
            let start = 28 + 4 * count
            guard vocabulary > 0, data.count >= start, (data.count - start) % (4 + 2 * vocabulary) == 0 else {
                throw Failure.unreadable(path: path, reason: "truncated or corrupt (\(data.count) bytes)")
            }
            let tokens = (0..<count).map { Int32(bitPattern: UInt32(u32(28 + 4 * $0))) }
            header = Header(vocabulary: vocabulary, context: u32(12), chunks: u32(16), rowsPerChunk: u32(20), tokens: tokens)
            rows = (data.count - start) / (4 + 2 * vocabulary)
            guard rows == header.chunks * header.rowsPerChunk else {
                throw Failure.unreadable(path: path, reason: "holds \(rows) rows, its header says \(header.chunks * header.rowsPerChunk)")
            }
            bytes = data
            rowsStart = start
        }

        /// Row `row`'s log-probabilities into `target` (`vocabulary` floats).
        public func logProbabilities(row: Int, into target: UnsafeMutablePointer<Float>) {
            let vocabulary = header.vocabulary
            bytes.withUnsafeBytes { raw in
                let offset = rowsStart + row * (4 + 2 * vocabulary)
                let low = Float(bitPattern: UInt32(littleEndian: raw.loadUnaligned(fromByteOffset: offset, as: UInt32.self)))
                let step = -low / 65535
                for index in 0..<vocabulary {
                    let code = UInt16(littleEndian: raw.loadUnaligned(fromByteOffset: offset + 4 + 2 * index, as: UInt16.self))
                    target[index] = low + Float(code) * step
                }
            }
        }
    }

    /// `log softmax(logits)` (see `Perplexity.logSumExp`).
    static func logSoftmax(_ logits: UnsafeBufferPointer<Float>) -> [Float] {
        let shift = Perplexity.logSumExp(logits)
        return logits.map { Float(Double($0) - shift) }
    }
}

/// KL-divergence of a model's next-token distributions from a base's, row by row:
/// `KL(P‖Q) = Σ_v p_v (log p_v − log q_v)` with `P` the base (from its `LogProbabilityFile`)
/// and `Q` this model, plus how often both put the same token first.
public struct KLDivergenceAccumulator {
    public private(set) var values: [Double] = []
    public private(set) var sameTop = 0

    public init() {}

    /// Adds one row: the base's log-probabilities and this model's logits.
    public mutating func add(base: UnsafeBufferPointer<Float>, logits: UnsafeBufferPointer<Float>) {
        let model = LogProbabilityFile.logSoftmax(logits)
        var kl = 0.0
        var baseTop = 0, modelTop = 0
        for index in 0..<base.count {
            let logP = Double(base[index])
            kl += exp(logP) * (logP - Double(model[index]))
            if base[index] > base[baseTop] { baseTop = index }
            if model[index] > model[modelTop] { modelTop = index }
        }
        values.append(max(kl, 0))
        if baseTop == modelTop { sameTop += 1 }
    }

    public var mean: Double { values.isEmpty ? 0 : values.reduce(0, +) / Double(values.count) }
    /// The value below which `fraction` of the rows lie (nearest rank).
    public func percentile(_ fraction: Double) -> Double {
        guard !values.isEmpty else { return 0 }
        let sorted = values.sorted()
        let rank = max(1, Int((fraction * Double(sorted.count)).rounded(.up)))
        return sorted[min(sorted.count, rank) - 1]
    }
    public var sameTopRate: Double { values.isEmpty ? 0 : Double(sameTop) / Double(values.count) }
}
