import ShrinkIO

/// The hidden states of every calibration text between two layers of a layer-by-layer run:
/// `counts[i] × width` floats for text `i`, in memory or, given a path, in a spill file in that
/// path's folder (`SpillFile`: never named, gone with the process), where they cost the page
/// cache instead of the process (128 texts of 512 tokens of a 4,096-wide model: 1.07 GB).
///
/// States are stored by generation (`g`: the states entering layer `g`). In memory and in a spill
/// file one set serves every generation (a layer overwrites a text's states with its output); a
/// checkpoint file holds two, even and odd, so that a layer reads one and writes the other and the
/// file always holds one complete generation whatever stops the run.
final class CalibrationHiddenStates {
    let width: Int
    private let counts: [Int]
    private let spill: SpillFile?
    /// Byte offset of each text's states in the spill file, per stored generation.
    private let offsets: [[Int]]
    private var held: [[Float]] = []

    /// Room for `counts[i] × width` floats per text; in a spill file next to `spillNextTo` when
    /// given, where a text reads back only once stored.
    /// - Throws: `ShrinkIOError.writeFailed` when the spill file cannot be created.
    init(counts: [Int], width: Int, spillNextTo: String?) throws(ShrinkIOError) {
        self.width = width
        self.counts = counts
        guard let spillNextTo else {
            spill = nil
            offsets = []
            held = counts.map { [Float](repeating: 0, count: $0 * width) }
            return
        }
        let (offsets, bytes) = Self.layout(counts: counts, width: width, generations: 1)
        let spill = try SpillFile(nextTo: spillNextTo)
        _ = spill.reserve(bytes)
        (self.spill, self.offsets) = (spill, offsets)
    }

    /// Two generations in the named file `checkpointFile`, which outlives the process: its bytes
    /// are kept when `resuming` (a checkpoint recorded them), else it starts empty.
    /// - Throws: `ShrinkIOError.writeFailed` when the file cannot be opened, or is too short to resume from.
    init(counts: [Int], width: Int, checkpointFile: String, resuming: Bool) throws(ShrinkIOError) {
        self.width = width
        self.counts = counts
        let (offsets, bytes) = Self.layout(counts: counts, width: width, generations: 2)
        let spill = try SpillFile(checkpointAt: checkpointFile, keeping: resuming ? bytes : 0)
        if !resuming { _ = spill.reserve(bytes) }
        (self.spill, self.offsets) = (spill, offsets)
    }

    /// Each text's byte offset per generation (64-byte aligned, generation after generation) and the bytes in all.
    private static func layout(counts: [Int], width: Int, generations: Int) -> (offsets: [[Int]], bytes: Int) {
        var end = 0
        let offsets = (0..<generations).map { _ in
            counts.map { count in
                let start = (end + 63) / 64 * 64
                end = start + count * width * 4
                return start
            }
        }
        return (offsets, end)
    }

    /// Copies text `index`'s states of `generation` into `buffer` (at least `counts[index] × width` floats).
    func load(_ index: Int, generation: Int, into buffer: UnsafeMutablePointer<Float>) throws(ShrinkIOError) {
        let count = counts[index] * width
        guard let spill else {
            held[index].withUnsafeBufferPointer { buffer.update(from: $0.baseAddress!, count: count) }
            return
        }
        try spill.read(at: offsets[generation % offsets.count][index], into: UnsafeMutableRawBufferPointer(start: buffer, count: count * 4))
    }

    /// Stores `buffer`'s first `counts[index] × width` floats as text `index`'s states of `generation`.
    func store(_ index: Int, generation: Int, from buffer: UnsafePointer<Float>) throws(ShrinkIOError) {
        let count = counts[index] * width
        guard let spill else {
            held[index].withUnsafeMutableBufferPointer { $0.baseAddress!.update(from: buffer, count: count) }
            return
        }
        try spill.write(UnsafeRawBufferPointer(start: buffer, count: count * 4), at: offsets[generation % offsets.count][index])
    }

    /// Waits until the stored states are on the storage device (a no-op in memory).
    /// - Throws: `ShrinkIOError.writeFailed` when the file system reports an error.
    func synchronize() throws(ShrinkIOError) {
        try spill?.synchronize()
    }
}
