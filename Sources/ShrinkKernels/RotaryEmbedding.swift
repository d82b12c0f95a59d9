import Foundation

/// Rotary position embedding (RoPE, Su et al. 2021) as ggml computes it: dimension pair `i` of a
/// head at position `p` is rotated by `θ_i = p · s · b^(−2i/d)` (`b` the base, `s` the frequency
/// scale, `d` the rotated dimensions), `(x, y) → (x cos θ − y sin θ, x sin θ + y cos θ)`.
///
/// The angles follow ggml's recurrence, `θ_0 = p · s`, `θ_{i+1} = θ_i · b^(−2/d)` in `Float`, so
/// that results match llama.cpp's up to the last bit of its cache (at position 4,096 the
/// recurrence is ≈ 1e-2 rad from the exact angle of the highest pairs, as in llama.cpp).
public struct RotaryEmbedding: Sendable {
    /// Which dimensions form a rotated pair.
    public enum Pairing: Sendable {
        /// `(2i, 2i + 1)`: ggml's normal mode (Llama in GGUF, whose q/k rows are permuted for it).
        case adjacent
        /// `(i, i + d/2)`: the NeoX mode (Hugging Face Llama, Qwen3).
        case halves
    }

    public let dimensions: Int
    public let base: Float
    public let frequencyScale: Float
    public let pairing: Pairing

    /// - Precondition: `dimensions` is even and positive.
    public init(dimensions: Int, base: Float, frequencyScale: Float = 1, pairing: Pairing) {
        precondition(dimensions > 0 && dimensions % 2 == 0)
        self.dimensions = dimensions
        self.base = base
        self.frequencyScale = frequencyScale
        self.pairing = pairing
    }

    /// Floats of `angles(position:into:)`'s output: a cosine and a sine per pair.
    public var tableSize: Int { dimensions }

    /// Writes `cos θ_i` to `table[2i]` and `sin θ_i` to `table[2i + 1]` for position `position`.
    public func angles(position: Int, into table: UnsafeMutablePointer<Float>) {
        let step = powf(base, -2 / Float(dimensions))
        var theta = Float(position) * frequencyScale
        for pair in 0..<(dimensions / 2) {
            table[2 * pair] = cosf(theta)
            table[2 * pair + 1] = sinf(theta)
            theta *= step
        }
    }

    /// Rotates the first `dimensions` floats of each of `heads` heads (`headSize` floats apart)
    /// at `x` by the angles of `table` (from `angles(position:into:)`).
    public func rotate(_ x: UnsafeMutablePointer<Float>, heads: Int, headSize: Int, table: UnsafePointer<Float>) {
        let half = dimensions / 2
        for head in 0..<heads {
            let line = x + head * headSize
            for pair in 0..<half {
                let (first, second) = pairing == .adjacent ? (2 * pair, 2 * pair + 1) : (pair, pair + half)
                let cosine = table[2 * pair], sine = table[2 * pair + 1]
                let a = line[first], b = line[second]
                line[first] = a * cosine - b * sine
                line[second] = a * sine + b * cosine
            }
        }
    }
}
