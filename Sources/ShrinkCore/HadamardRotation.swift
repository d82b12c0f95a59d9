/// A randomized Hadamard rotation of vectors of `size` elements, the orthogonal transform behind
/// incoherence processing (QuIP#, QuaRot): `R = (1/√d) · (I_{size/d} ⊗ H_d) · diag(s)`, with
/// `s_i ∈ {+1, −1}` stored per element and `H_d` a Hadamard matrix of order `d` (`H·Hᵀ = d·I`),
/// the block size, which divides `size`.
///
/// Construction of `H_d` for `d = 12^t · 2^k`: `H_d = H_12 ⊗ … ⊗ H_12 ⊗ H_{2^k}` (`t` factors
/// `H_12`), where `H_{2^k}` is Sylvester's matrix (`H_1 = [1]`, `H_{2m} = [[H_m, H_m], [H_m, −H_m]]`)
/// and `H_12` is Paley's construction I for q = 11: `H_12 = I + S`, `S = [[0, 1ᵀ], [−1, Q]]`,
/// `Q_ij = χ(j − i)` with `χ` the quadratic character mod 11 (`χ(0) = 0`). Within a block,
/// element `((i_1 · 12 + i_2) · … · 12 + i_t) · 2^k + j` has coordinate `i_1 … i_t` on the `H_12`
/// factors and `j` on Sylvester's. Two blocks are offered (`Block`): the largest power of two
/// dividing the width (MiniLM's 384 = 3 × 128, SmolLM2's 576 = 9 × 64), or the largest
/// `12^t · 2^k` (384 = 12·32 and 576 = 12·12·4 as one block each). Applying `R` costs
/// `size · (k + 12t)` additions and `size` multiplications.
public struct HadamardRotation: Sendable, Equatable {
    /// Which Hadamard blocks rotate a width.
    public enum Block: String, Sendable, Equatable, CaseIterable {
        /// The largest power of two dividing the width: Sylvester's matrix alone, the fastest.
        case powerOfTwo = "power_of_two"
        /// The largest `12^t · 2^k` dividing the width: the widest mixing.
        case largest

        /// The block size this choice gives vectors of `size` elements.
        public func order(for size: Int) -> Int {
            var best = 1, twelvePower = 1
            while size % twelvePower == 0 && (self == .largest || twelvePower == 1) {
                var powerOfTwo = 1
                while (size / twelvePower) % (powerOfTwo * 2) == 0 { powerOfTwo *= 2 }
                best = max(best, twelvePower * powerOfTwo)
                twelvePower *= 12
            }
            return best
        }
    }

    public let size: Int
    /// `d`, the order of each Hadamard block.
    public let blockSize: Int
    /// `t`, the number of `H_12` factors of a block.
    public let twelves: Int
    /// `2^k`, the order of the Sylvester factor (contiguous in memory).
    public let powerOfTwo: Int
    /// `s`, one `+1` or `−1` per element.
    public let signs: [Float]

    /// `(t, 2^k)` with `order = 12^t · 2^k`, or nil when `order` has another odd factor.
    public static func factors(of order: Int) -> (twelves: Int, powerOfTwo: Int)? {
        guard order > 0 else { return nil }
        var rest = order, twelves = 0
        while rest % 3 == 0 {
            guard rest % 12 == 0 else { return nil }
            rest /= 12
            twelves += 1
        }
        return rest & (rest - 1) == 0 ? (twelves, rest) : nil
    }

    /// The rotation with `signs` (each `+1` or `−1`) in blocks of `blockSize`, or nil when the block
    /// does not divide the signs' count or is not `12^t · 2^k`.
    public init?(signs: [Float], blockSize: Int) {
        guard !signs.isEmpty, signs.allSatisfy({ $0 == 1 || $0 == -1 }), blockSize > 0, signs.count % blockSize == 0,
              let (twelves, powerOfTwo) = Self.factors(of: blockSize) else { return nil }
        size = signs.count
        self.signs = signs
        self.blockSize = blockSize
        self.twelves = twelves
        self.powerOfTwo = powerOfTwo
    }

    /// The rotation with signs drawn from `SplitMix64(seed)` (bit 0 of each draw set: `−1`), in
    /// the blocks `block` gives `size`.
    public init(size: Int, seed: UInt64, block: Block = .powerOfTwo) {
        precondition(size > 0)
        var generator = SplitMix64(seed: seed)
        self.init(signs: (0..<size).map { _ in generator.next() & 1 == 1 ? -1 : 1 }, blockSize: block.order(for: size))!
    }

    /// The rotation whose signs are packed one bit per element (`PackedBits`, bit set: `−1`), or
    /// nil as for `init(signs:blockSize:)`.
    public init?(size: Int, blockSize: Int, packedSigns: UnsafeRawBufferPointer) {
        guard packedSigns.count >= PackedBits.byteCount(count: size, bits: 1) else { return nil }
        self.init(signs: (0..<size).map { PackedBits.value(at: $0, bits: 1, in: packedSigns) == 1 ? -1 : 1 }, blockSize: blockSize)
    }

    /// The signs packed one bit per element, bit set for `−1`.
    public var packedSigns: [UInt8] { PackedBits.pack(signs.map { $0 < 0 ? 1 : 0 }, bits: 1) }

    /// `H_12` row-major, entries `±1` (Paley I, q = 11).
    public static let paley12: [Int8] = {
        let residues: Set<Int> = [1, 3, 4, 5, 9]
        func chi(_ value: Int) -> Int8 { let v = ((value % 11) + 11) % 11; return v == 0 ? 0 : (residues.contains(v) ? 1 : -1) }
        var h = [Int8](repeating: 0, count: 144)
        for i in 0..<12 {
            for j in 0..<12 {
                let s: Int8 = i == 0 ? (j == 0 ? 0 : 1) : (j == 0 ? -1 : chi(j - i))
                h[i * 12 + j] = s + (i == j ? 1 : 0)
            }
        }
        return h
    }()

    /// `x ← R·x` for `x[0..<size]`.
    @inlinable
    public func rotate<T: BinaryFloatingPoint>(_ x: UnsafeMutablePointer<T>) {
        for index in 0..<size { x[index] *= T(signs[index]) }
        applyBlocks(x, transposed: false)
    }

    /// `x ← Rᵀ·x` (`R⁻¹`) for `x[0..<size]`.
    @inlinable
    public func unrotate<T: BinaryFloatingPoint>(_ x: UnsafeMutablePointer<T>) {
        applyBlocks(x, transposed: true)
        for index in 0..<size { x[index] *= T(signs[index]) }
    }

    /// `x ← Rᵀ·x` for `x[0..<size]` without allocating: `scratch` holds `blockSize` elements,
    /// used when a block has `H_12` factors.
    @inlinable
    public func unrotate<T: BinaryFloatingPoint>(_ x: UnsafeMutablePointer<T>, scratch: UnsafeMutablePointer<T>) {
        applyBlocks(x, transposed: true, scratch: scratch)
        for index in 0..<size { x[index] *= T(signs[index]) }
    }

    /// `(1/√d) · H_d` (or its transpose) applied to every block of `x`.
    @inlinable
    func applyBlocks<T: BinaryFloatingPoint>(_ x: UnsafeMutablePointer<T>, transposed: Bool) {
        let scratch = UnsafeMutablePointer<T>.allocate(capacity: twelves > 0 ? blockSize : 0)
        defer { scratch.deallocate() }
        applyBlocks(x, transposed: transposed, scratch: scratch)
    }

    /// `applyBlocks(_:transposed:)` with `scratch` of `blockSize` elements (read only when `t > 0`).
    @inlinable
    func applyBlocks<T: BinaryFloatingPoint>(_ x: UnsafeMutablePointer<T>, transposed: Bool, scratch: UnsafeMutablePointer<T>) {
        let scale = 1 / T(Double(blockSize).squareRoot())
        for start in stride(from: 0, to: size, by: blockSize) {
            let block = x + start
            Self.sylvester(block, count: blockSize, order: powerOfTwo)
            var inner = powerOfTwo
            for _ in 0..<twelves {
                Self.paley(block, count: blockSize, inner: inner, transposed: transposed, scratch: scratch)
                inner *= 12
            }
            for index in 0..<blockSize { block[index] *= scale }
        }
    }

    /// Sylvester's `H_order` (unnormalized) on every contiguous run of `order` elements of `x[0..<count]`.
    @inlinable
    static func sylvester<T: BinaryFloatingPoint>(_ x: UnsafeMutablePointer<T>, count: Int, order: Int) {
        var half = 1
        while half < order {
            for start in stride(from: 0, to: count, by: 2 * half) {
                for index in start..<(start + half) {
                    let a = x[index], b = x[index + half]
                    x[index] = a + b
                    x[index + half] = a - b
                }
            }
            half *= 2
        }
    }

    /// `H_12` (or `H_12ᵀ`, unnormalized) along the axis of stride `inner` of `x[0..<count]`,
    /// viewed as `[count / (12·inner), 12, inner]`.
    @inlinable
    static func paley<T: BinaryFloatingPoint>(_ x: UnsafeMutablePointer<T>, count: Int, inner: Int, transposed: Bool,
                                              scratch: UnsafeMutablePointer<T>) {
        let span = 12 * inner
        for start in stride(from: 0, to: count, by: span) {
            let group = x + start
            for row in 0..<12 {
                let target = scratch + row * inner
                for index in 0..<inner { target[index] = 0 }
                for column in 0..<12 {
                    let source = group + column * inner
                    if (transposed ? paley12[column * 12 + row] : paley12[row * 12 + column]) > 0 {
                        for index in 0..<inner { target[index] += source[index] }
                    } else {
                        for index in 0..<inner { target[index] -= source[index] }
                    }
                }
            }
            group.update(from: scratch, count: span)
        }
    }
}
