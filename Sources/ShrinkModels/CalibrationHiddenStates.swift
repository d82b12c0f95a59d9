import ShrinkIO

/// The hidden states of every calibration text between two layers of a layer-by-layer run:
/// `counts[i] × width` floats for text `i`, in memory or, given a path, in a spill file in that
/// path's folder (`SpillFile`: never named, gone with the process), where they cost the page
/// cache instead of the process (128 texts of 512 tokens of a 4,096-wide model: 1.07 GB).
final class CalibrationHiddenStates {
    let width: Int
    private let counts: [Int]
    private let spill: SpillFile?
    /// Byte offset of each text's states in the spill file.
    private var offsets: [Int] = []
    private var held: [[Float]] = []

    /// Room for `counts[i] × width` floats per text; in a spill file next to `spillNextTo` when
    /// given, where a text reads back only once stored.
    /// - Throws: `ShrinkIOError.writeFailed` when the spill file cannot be created.
    init(counts: [Int], width: Int, spillNextTo: String?) throws(ShrinkIOError) {
        self.width = width
        self.counts = counts
        guard let spillNextTo else {
            spill = nil
            held = counts.map { [Float](repeating: 0, count: $0 * width) }
            return
        }
        let spill = try SpillFile(nextTo: spillNextTo)
        offsets = counts.map { spill.reserve($0 * width * 4, alignment: 64) }
        self.spill = spill
    }

    /// Copies text `index`'s states into `buffer` (at least `counts[index] × width` floats).
    func load(_ index: Int, into buffer: UnsafeMutablePointer<Float>) throws(ShrinkIOError) {
        let count = counts[index] * width
        guard let spill else {
            held[index].withUnsafeBufferPointer { buffer.update(from: $0.baseAddress!, count: count) }
            return
        }
        try spill.read(at: offsets[index], into: UnsafeMutableRawBufferPointer(start: buffer, count: count * 4))
    }

    /// Replaces text `index`'s states with `buffer`'s first `counts[index] × width` floats.
    func store(_ index: Int, from buffer: UnsafePointer<Float>) throws(ShrinkIOError) {
        let count = counts[index] * width
        guard let spill else {
            held[index].withUnsafeMutableBufferPointer { $0.baseAddress!.update(from: buffer, count: count) }
            return
        }
        try spill.write(UnsafeRawBufferPointer(start: buffer, count: count * 4), at: offsets[index])
    }
}
