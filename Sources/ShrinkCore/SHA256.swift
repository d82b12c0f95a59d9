import CShrinkCoreSupport

/// SHA-256 (FIPS 180-4), used to record which source model a compressed file came from. Blocks
/// run on the x86 SHA extensions where the CPU has them (`shrink_sha256_blocks`), else on the
/// Swift rounds below, which are the reference the extensions are tested against.
public struct SHA256 {
    private var state: [UInt32] = [
        0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
    ]
    private var pending: [UInt8] = []
    private var length: UInt64 = 0

    /// The round constants, from the table the extension kernel reads.
    private static let constants: [UInt32] = withUnsafeBytes(of: shrink_sha256_round_constants) { Array($0.bindMemory(to: UInt32.self)) }

    /// Whether this CPU runs blocks on the SHA extensions.
    public static let extensionsAvailable = shrink_sha256_available() != 0
    /// Whether this hasher uses them.
    let usesExtensions: Bool

    public init() {
        usesExtensions = Self.extensionsAvailable
    }

    /// A hasher on the Swift rounds only (`usesExtensions` false) or the extensions where available.
    init(extensions: Bool) {
        usesExtensions = extensions && Self.extensionsAvailable
    }

    /// The hex digest of `bytes`.
    public static func hexDigest(_ bytes: UnsafeRawBufferPointer) -> String {
        var hasher = SHA256()
        hasher.update(bytes)
        return hasher.hexDigest()
    }

    /// `finalize()` as lowercase hex.
    mutating func hexDigest() -> String {
        finalize().map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
    }

    /// The hex digest of the file at `path`, read through a memory map in 64 MiB chunks whose
    /// pages are released as soon as they are hashed, so hashing a file of any size keeps at most
    /// one chunk resident.
    public static func hexDigest(ofFile path: String) throws(ShrinkCoreError) -> String {
        let file = try MemoryMappedFile(path: path)
        let chunk = 64 << 20
        var hasher = SHA256()
        for start in stride(from: 0, to: file.bytes.count, by: chunk) {
            let range = start..<min(start + chunk, file.bytes.count)
            hasher.update(UnsafeRawBufferPointer(rebasing: file.bytes[range]))
            file.releasePages(range)
        }
        return hasher.hexDigest()
    }

    /// Adds `bytes` to the message.
    public mutating func update(_ bytes: UnsafeRawBufferPointer) {
        length &+= UInt64(bytes.count)
        var offset = 0
        if !pending.isEmpty {
            let take = min(64 - pending.count, bytes.count)
            pending += bytes[0..<take]
            offset = take
            if pending.count == 64 {
                pending.withUnsafeBytes { compress($0) }
                pending.removeAll(keepingCapacity: true)
            }
        }
        let whole = (bytes.count - offset) / 64 * 64
        if whole > 0 {
            compress(UnsafeRawBufferPointer(rebasing: bytes[offset..<(offset + whole)]))
            offset += whole
        }
        pending += bytes[offset...]
    }

    /// The 32-byte digest of everything added.
    public mutating func finalize() -> [UInt8] {
        let bitLength = length &* 8
        var tail = pending + [0x80]
        while tail.count % 64 != 56 { tail.append(0) }
        for shift in stride(from: 56, through: 0, by: -8) { tail.append(UInt8(truncatingIfNeeded: bitLength >> UInt64(shift))) }
        tail.withUnsafeBytes { compress($0) }
        return state.flatMap { word in (0..<4).map { UInt8(truncatingIfNeeded: word >> UInt32(24 - 8 * $0)) } }
    }

    /// Runs the compression function over `blocks` (a whole number of 64-byte blocks).
    private mutating func compress(_ blocks: UnsafeRawBufferPointer) {
        guard usesExtensions else {
            for start in stride(from: 0, to: blocks.count, by: 64) { compressBlock(UnsafeRawBufferPointer(rebasing: blocks[start..<(start + 64)])) }
            return
        }
        state.withUnsafeMutableBufferPointer { state in
            shrink_sha256_blocks(state.baseAddress!, blocks.baseAddress!.assumingMemoryBound(to: UInt8.self), blocks.count / 64)
        }
    }

    private mutating func compressBlock(_ block: UnsafeRawBufferPointer) {
        var w = [UInt32](repeating: 0, count: 64)
        for i in 0..<16 { w[i] = UInt32(bigEndian: block.loadUnaligned(fromByteOffset: 4 * i, as: UInt32.self)) }
        for i in 16..<64 {
            let s0 = w[i - 15].rotatedRight(7) ^ w[i - 15].rotatedRight(18) ^ (w[i - 15] >> 3)
            let s1 = w[i - 2].rotatedRight(17) ^ w[i - 2].rotatedRight(19) ^ (w[i - 2] >> 10)
            w[i] = w[i - 16] &+ s0 &+ w[i - 7] &+ s1
        }
        var (a, b, c, d, e, f, g, h) = (state[0], state[1], state[2], state[3], state[4], state[5], state[6], state[7])
        for i in 0..<64 {
            let s1 = e.rotatedRight(6) ^ e.rotatedRight(11) ^ e.rotatedRight(25)
            let choice = (e & f) ^ (~e & g)
            let t1 = h &+ s1 &+ choice &+ Self.constants[i] &+ w[i]
            let s0 = a.rotatedRight(2) ^ a.rotatedRight(13) ^ a.rotatedRight(22)
            let majority = (a & b) ^ (a & c) ^ (b & c)
            let t2 = s0 &+ majority
            (h, g, f, e, d, c, b, a) = (g, f, e, d &+ t1, c, b, a, t1 &+ t2)
        }
        state[0] &+= a; state[1] &+= b; state[2] &+= c; state[3] &+= d
        state[4] &+= e; state[5] &+= f; state[6] &+= g; state[7] &+= h
    }
}

extension UInt32 {
    @inline(__always)
    fileprivate func rotatedRight(_ count: UInt32) -> UInt32 { (self >> count) | (self << (32 - count)) }
}
