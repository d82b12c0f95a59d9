import CShrinkKernels
import ShrinkCore

/// An encoded weight `[rows, columns]` repacked once at load for integer dot products: one code
/// `q` per weight with value `a · q − o`, `a` and `o` per output channel and per weight block, in
/// panels of 16 output channels (layouts in `shrink_kernels.h`). Codes are u8, or u16 in two planes
/// (`q = 256 · high + low`) where 8 bits do not hold the stored values exactly.
///
/// How each encoding maps onto codes:
/// - affine weights (per tensor, per output channel, or per block of a multiple of 32 inputs),
///   dense or pruned: the stored codes, exactly (a pruned weight takes its block's zero code);
///   two-level integer scales without offsets: the multipliers folded into byte codes when they fit;
///   4-bit blocks with integer block scales also keep their multipliers, so that they run in
///   the integer-scaled form (as per-channel bytes, the same results at every row count);
/// - scalar palettes grouped along the output channels, dense or pruned: each group's LUT on a grid
///   `a · (q − z)` that holds 0 exactly: an `int8` LUT on its own grid (`a` its scale, `z` = 128
///   plus its zero point), exactly; else the 8-bit grid with a power-of-two step over
///   `[min(lut, 0), max(lut, 0)]` (see `Grid`) when it holds every entry exactly; else the 16-bit
///   one: error at most half its step
///   `a < 2 · range / 65534`, below 2⁻¹⁶ of the range per entry, and every f16 entry of at least
///   1,024 `a` (about 1/32 of the range) exact. Output-channel scales fold into `a` and `o`;
/// - vector palettes grouped along the output channels: the LUT values on their group's grid as
///   for scalar palettes (an `int8` LUT exactly in 8 bits). Pairs of at most 64 entries on an 8-bit
///   grid, one LUT per panel, keep their 4- or 6-bit indices (pair panels: a LUT of 32 or 128 bytes
///   per panel), pairs of up to 256 entries their byte indices (4 bits per weight), and 4-vectors of at most 256 entries their byte indices (quad panels: 2 bits per
///   weight, a LUT of 1,024 bytes per panel);
///   otherwise each weight is coded as its lane of its vector's entry, one byte per weight (two
///   with two planes);
/// - pruned scalar palettes of at most 16 entries, one LUT per panel, with at most 2 of every 4
///   inputs kept (2:4): their kept indices and masks (2:4 panels, 3 bits per weight), looked up in
///   the LUT on its 8-bit grid, or on the 16-bit one in two tables (high and low bytes);
/// - other palettes (groups along the inputs): each decoded row on the same kind of grid (8 bits
///   when every row is exact on it, else 16).
/// Codes of at most 2 bits are packed four to a byte (crumb panels), of 3 bits in a crumb and a bit
/// (tribit panels), of 4 bits two to a byte (nibble panels); palette indices then go through a
/// 16-byte LUT per panel, and a second one for the low plane, when all 16 channels share one.
/// Wider codes take a byte each (two with two planes). `nil` for what the integer path does not
/// cover: F32/F16/BF16 values (dense or pruned) and affine blocks that are not a multiple of 32 inputs.
public final class Int8PanelWeights: @unchecked Sendable {
    public let rows: Int
    public let columns: Int
    /// `columns` rounded up to a multiple of 32.
    public let paddedColumns: Int
    public let panels: Int
    /// Bits per packed code: 2 (crumb panels), 3 (tribit panels), 4 (nibble panels) or 8 (byte
    /// panels); per weight for pair panels, 2 (4-bit indices) or 3 (6-bit), and for 2:4 panels, 3.
    public let packedBits: Int
    /// The kernels' `code_bits` (see `shrink_gemm_u8s8_panels`).
    let kernelLayout: Int32
    /// Whether the codes are pair panels: an index per pair of adjacent inputs.
    public var pairedEntries: Bool {
        kernelLayout == SHRINK_PAIR_PANELS || kernelLayout == SHRINK_PAIR64_PANELS || kernelLayout == SHRINK_PAIR256_PANELS
    }
    /// Activation blocks (32 inputs) per weight block.
    public let blocksPerWeightBlock: Int
    /// Weight blocks per row.
    public let weightBlocks: Int
    /// Whether the codes reproduce the stored weights exactly, else within `maximumWeightError`.
    public let isExact: Bool
    let codes: UnsafeMutableBufferPointer<UInt8>
    let luts: UnsafeMutableBufferPointer<UInt8>?
    /// The low plane of 16-bit codes: 16 low LUT bytes per panel for nibble panels with LUTs, a
    /// 32-byte table per panel (like `luts`) for 2:4 panels, else byte panels laid out like
    /// `codes`; `nil` for 8-bit codes.
    let lowPlane: UnsafeMutableBufferPointer<UInt8>?
    /// Per panel and weight block, 16 scales and 16 offsets (one float each when integer-scaled:
    /// those kernels do not read them).
    let scales: UnsafeMutableBufferPointer<Float>
    let offsets: UnsafeMutableBufferPointer<Float>
    /// For 4-bit affine codes whose offsets are `scale · z` with integer `z`: the `z`s, laid out
    /// like the scales (the kernels' centered form, see `shrink_kernels.h`); else `nil`.
    let zeroPoints: UnsafeMutableBufferPointer<UInt8>?
    /// For centered codes with integer block scales `m · S` (`AffineEncoding` with `U8` scales)
    /// whose `(q − z) · m` all fit the kernels' integer-scaled form: the `m`s, laid out like the zero
    /// points; else `nil`.
    let multipliers: UnsafeMutableBufferPointer<UInt8>?
    /// Whether byte codes are centered: each group's codes stored as `q − z + 128` for its integer
    /// `z = o / a` (`o = a · z` exactly), so that the kernels drop the offset term (`offsets` is
    /// then not read; see `shrink_gemm_u8s8_panels`).
    let hasCenteredBytes: Bool
    /// The `S`s of `multipliers`, 16 per panel.
    let channelScales: UnsafeMutableBufferPointer<Float>?
    /// The half-block form (see `HalfBlocks`), or nil.
    let halfBlocks: HalfBlocks?
    /// Where every buffer above lives.
    let arena: WeightArena

    /// Multipliers per 16 inputs of byte codes (ggml's `Q6_K`, `Q2_K`, see
    /// `shrink_gemm_u8s8_half_blocks`): per panel and 16 inputs, 16 int8 multipliers (and 16 u8
    /// offset multipliers); per panel and super-block, 16 float scales (and 16 offset scales).
    struct HalfBlocks {
        let multipliers: UnsafeMutableBufferPointer<Int8>
        let superScales: UnsafeMutableBufferPointer<Float>
        let offsets: (multipliers: UnsafeMutableBufferPointer<UInt8>, superScales: UnsafeMutableBufferPointer<Float>)?
        let zero: Int32
        /// Activation blocks (32 inputs) per super-block.
        let blocksPerSuper: Int
    }

    /// Bytes held by the packed weight (codes, LUTs, scales, offsets, zero points and multipliers).
    public var byteCount: Int {
        codes.count + (luts?.count ?? 0) + (lowPlane?.count ?? 0) + 4 * (scales.count + offsets.count + (channelScales?.count ?? 0)) + (zeroPoints?.count ?? 0)
            + (multipliers?.count ?? 0) + (halfBlocks.map { $0.multipliers.count + 4 * $0.superScales.count } ?? 0)
            + (halfBlocks?.offsets.map { $0.multipliers.count + 4 * $0.superScales.count } ?? 0)
    }

    /// Whether nibble codes run in the integer-scaled form (see `shrink_kernels.h`).
    public var isIntegerScaled: Bool { multipliers != nil }

    /// Bits per code the kernels multiply: 8, or 16 in two planes.
    public var codeBits: Int { lowPlane == nil ? 8 : 16 }

    /// The form the kernels read (`4-bit LUT indices → 16-bit codes (two planes)`).
    public var codeDescription: String {
        let codes = lowPlane == nil ? "8-bit codes" : "16-bit codes (two planes)"
        if halfBlocks != nil { return (packedBits == 4 ? "4-bit" : "6-bit") + " codes, 8-bit multipliers per 16 inputs" }
        if isIntegerScaled { return "4-bit codes, integer block scales" }
        if pairedEntries { return "\(2 * packedBits)-bit pair indices → " + codes }
        if kernelLayout == SHRINK_SPARSE24_PANELS { return "2:4 kept 4-bit LUT indices → " + codes }
        if kernelLayout == SHRINK_QUAD_PANELS { return "8-bit quad indices → " + codes }
        if packedBits < 8 { return luts == nil ? "\(packedBits)-bit codes" : "\(packedBits)-bit LUT indices → " + codes }
        return codes + (hasCenteredBytes ? ", centered" : "")
    }

    /// The codes of one layer before packing: row-major `rows × columns` codes (or LUT indices),
    /// per-row and per-weight-block scales and offsets, and optional per-row 16-byte LUTs; for
    /// 16-bit codes, their low bytes (`lowCodes`, or `rowLowLUTs` beside `rowLUTs`).
    struct CodeMatrix {
        var codes: [UInt8]
        var rowScales: [Float]
        var rowOffsets: [Float]
        var weightBlock: Int
        /// The most bits a code (or LUT index) takes: at most 2, 3 or 4 allows crumb, tribit or nibble panels.
        var codeBits: Int
        var rowLUTs: [[UInt8]]?
        var exact: Bool
        var lowCodes: [UInt8]? = nil
        var rowLowLUTs: [[UInt8]]? = nil
        /// The panel layout of indices that are not one per weight (`SHRINK_PAIR_PANELS`,
        /// `SHRINK_PAIR64_PANELS`: one index per pair of adjacent inputs, `rowLUTs` each entry's two
        /// codes; `SHRINK_SPARSE24_PANELS`: each weight's index, 255 where pruned, `rowLUTs` 16
        /// codes then the pruned weights' code; `SHRINK_QUAD_PANELS`: one index per 4 adjacent
        /// inputs, `rowLUTs` each entry's four codes), their LUTs `shrink_lut_bytes` long;
        /// nil otherwise.
        var indexLayout: Int32? = nil
        /// Integer block scales: the multiplier of each row's weight blocks and each row's scale
        /// (`rowScales` = multiplier × row scale).
        var integerScales: (multipliers: [UInt8], rowScales: [Float])? = nil
    }

    /// Repacks `weight` into buffers carved from `arena` (a model's layers share one, so that its
    /// weights sit in huge pages; default: an arena of this weight's own), or `nil` when its
    /// encoding is not covered (see the type's documentation).
    public convenience init?(weight: EncodedTensor, arena: WeightArena = WeightArena(chunkBytes: 0)) {
        guard weight.shape.count == 2 else { return nil }
        if let matrix = Self.codeMatrix(weight) {
            self.init(matrix, rows: weight.shape[0], columns: weight.shape[1], arena: arena)
        } else if let (matrix, halfBlocks) = Self.halfBlockForm(weight, arena: arena) {
            self.init(matrix, rows: weight.shape[0], columns: weight.shape[1], halfBlocks: halfBlocks, arena: arena)
        } else {
            return nil
        }
    }

    init(_ matrix: CodeMatrix, rows: Int, columns: Int, halfBlocks: HalfBlocks? = nil, arena: WeightArena) {
        self.arena = arena
        self.halfBlocks = halfBlocks
        self.rows = rows
        self.columns = columns
        paddedColumns = max(32, (columns + 31) / 32 * 32)
        panels = (rows + 15) / 16
        isExact = matrix.exact
        let blocks = paddedColumns / 32
        blocksPerWeightBlock = matrix.weightBlock >= columns ? blocks : matrix.weightBlock / 32
        weightBlocks = (blocks + blocksPerWeightBlock - 1) / blocksPerWeightBlock
        let panels = panels
        // Nibble indices keep their LUTs when the 16 channels of every panel share them.
        let sharedLUTs = matrix.rowLUTs.flatMap { luts in
            (matrix.codeBits <= 4 || matrix.indexLayout != nil) && (0..<panels).allSatisfy { panel in
                (panel * 16..<min(rows, panel * 16 + 16)).allSatisfy {
                    luts[$0] == luts[panel * 16] && matrix.rowLowLUTs?[$0] == matrix.rowLowLUTs?[panel * 16]
                }
            } ? luts : nil
        }
        var codeMatrix = matrix.codes
        var lowMatrix = matrix.lowCodes
        if let rowLUTs = matrix.rowLUTs, sharedLUTs == nil {
            if let rowLowLUTs = matrix.rowLowLUTs {
                lowMatrix = (0..<(rows * columns)).map { rowLowLUTs[$0 / columns][Int(codeMatrix[$0])] }
            }
            for row in 0..<rows {
                for column in 0..<columns { codeMatrix[row * columns + column] = rowLUTs[row][Int(codeMatrix[row * columns + column])] }
            }
        }
        let layout = matrix.indexLayout
            ?? (matrix.codeBits > 4 || (matrix.rowLUTs != nil && sharedLUTs == nil) ? 8 : halfBlocks != nil ? 4 : Int32(max(2, matrix.codeBits)))
        kernelLayout = layout
        // Bytes per panel over 32 inputs (16 channels) are bits per weight times 64.
        let packedBits = shrink_panel_bytes(32, layout) / 64
        self.packedBits = packedBits
        let centered = packedBits < 8 || !matrix.exact || halfBlocks != nil || lowMatrix != nil ? nil
            : Self.centeredByteCodes(codeMatrix, matrix, rows: rows, columns: columns, weightBlock: blocksPerWeightBlock * 32)
        if let centered { codeMatrix = centered }
        hasCenteredBytes = centered != nil
        let panelBytes = shrink_panel_bytes(paddedColumns, layout)
        // Cache-line aligned (the arena's alignment), so that every 64-byte load of the kernels reads one line.
        let packed = arena.allocate(UInt8.self, count: panels * panelBytes)
        codeMatrix.withUnsafeBufferPointer { source in
            Self.pack(source.baseAddress!, rows: rows, columns: columns, bits: Int(layout),
                      panelBytes: panelBytes, into: packed.baseAddress!)
        }
        codes = packed
        if let sharedLUTs {
            let lutBytes = shrink_lut_bytes(layout)
            let tables = arena.allocate(UInt8.self, count: panels * lutBytes)
            for panel in 0..<panels { for entry in 0..<lutBytes { tables[panel * lutBytes + entry] = sharedLUTs[panel * 16][entry] } }
            luts = tables
            lowPlane = matrix.rowLowLUTs.map { lowLUTs in
                let lowBytes = shrink_low_plane_bytes(0, layout)
                let tables = arena.allocate(UInt8.self, count: panels * lowBytes)
                for panel in 0..<panels { for entry in 0..<lowBytes { tables[panel * lowBytes + entry] = lowLUTs[panel * 16][entry] } }
                return tables
            }
        } else {
            luts = nil
            lowPlane = lowMatrix.map { low in
                let packed = arena.allocate(UInt8.self, count: panels * panelBytes)
                low.withUnsafeBufferPointer { Self.pack($0.baseAddress!, rows: rows, columns: columns, bits: 8, panelBytes: panelBytes, into: packed.baseAddress!) }
                return packed
            }
        }
        var scales = [Float](repeating: 0, count: panels * weightBlocks * 16)
        var offsets = scales
        for row in 0..<rows {
            for block in 0..<weightBlocks {
                let target = (row / 16) * weightBlocks * 16 + block * 16 + row % 16
                scales[target] = matrix.rowScales[row * weightBlocks + block]
                offsets[target] = matrix.rowOffsets[row * weightBlocks + block]
            }
        }
        let zeroPoints = packedBits < 8 && sharedLUTs == nil && matrix.exact && lowPlane == nil ? Self.integerZeroPoints(scales: scales, offsets: offsets) : nil
        self.zeroPoints = zeroPoints.map { arena.copy($0) }
        let weightBlocks = weightBlocks
        let integerScaled = packedBits != 4 ? nil : zeroPoints.flatMap { zeroPoints in
            matrix.integerScales.flatMap { Self.panelMultipliers($0, zeroPoints: zeroPoints, rows: rows, weightBlocks: weightBlocks) }
        }
        multipliers = integerScaled.map { arena.copy($0.multipliers) }
        channelScales = integerScaled.map { arena.copy($0.channelScales) }
        if integerScaled != nil || halfBlocks != nil {
            // The integer-scaled and half-block forms read neither block scales nor offsets.
            (scales, offsets) = ([0], [0])
        } else if centered != nil {
            // Centered byte codes have no offset term.
            offsets = [0]
        }
        (self.scales, self.offsets) = (arena.copy(scales), arena.copy(offsets))
    }

    /// What `init(restoring:buffers:arena:)` needs besides the buffers: the shape and the layout choices.
    package struct Layout: Equatable, Sendable {
        package let rows, columns: Int
        package let kernelLayout: Int32
        package let blocksPerWeightBlock: Int
        package let isExact, hasCenteredBytes: Bool
        /// The half-block form's zero and activation blocks per super-block, when it has one.
        package let halfBlocks: (zero: Int32, blocksPerSuper: Int)?

        package init(rows: Int, columns: Int, kernelLayout: Int32, blocksPerWeightBlock: Int, isExact: Bool, hasCenteredBytes: Bool,
                     halfBlocks: (zero: Int32, blocksPerSuper: Int)?) {
            (self.rows, self.columns, self.kernelLayout, self.blocksPerWeightBlock) = (rows, columns, kernelLayout, blocksPerWeightBlock)
            (self.isExact, self.hasCenteredBytes, self.halfBlocks) = (isExact, hasCenteredBytes, halfBlocks)
        }

        package static func == (a: Layout, b: Layout) -> Bool {
            a.rows == b.rows && a.columns == b.columns && a.kernelLayout == b.kernelLayout && a.blocksPerWeightBlock == b.blocksPerWeightBlock
                && a.isExact == b.isExact && a.hasCenteredBytes == b.hasCenteredBytes && a.halfBlocks?.zero == b.halfBlocks?.zero
                && a.halfBlocks?.blocksPerSuper == b.halfBlocks?.blocksPerSuper
        }
    }

    /// The names of the buffers a repacked weight may hold (`buffers`).
    package static let bufferNames = ["codes", "luts", "low_plane", "scales", "offsets", "zero_points", "multipliers", "channel_scales",
                                      "half_multipliers", "half_super_scales", "half_offset_multipliers", "half_offset_super_scales"]

    /// The layout and every buffer by name (those it has), as `init(restoring:buffers:arena:)` takes them back.
    package var stored: (layout: Layout, buffers: [String: UnsafeRawBufferPointer]) {
        var buffers: [String: UnsafeRawBufferPointer] = ["codes": UnsafeRawBufferPointer(codes), "scales": UnsafeRawBufferPointer(scales),
                                                         "offsets": UnsafeRawBufferPointer(offsets)]
        buffers["luts"] = luts.map { UnsafeRawBufferPointer($0) }
        buffers["low_plane"] = lowPlane.map { UnsafeRawBufferPointer($0) }
        buffers["zero_points"] = zeroPoints.map { UnsafeRawBufferPointer($0) }
        buffers["multipliers"] = multipliers.map { UnsafeRawBufferPointer($0) }
        buffers["channel_scales"] = channelScales.map { UnsafeRawBufferPointer($0) }
        if let halfBlocks {
            buffers["half_multipliers"] = UnsafeRawBufferPointer(halfBlocks.multipliers)
            buffers["half_super_scales"] = UnsafeRawBufferPointer(halfBlocks.superScales)
            buffers["half_offset_multipliers"] = halfBlocks.offsets.map { UnsafeRawBufferPointer($0.multipliers) }
            buffers["half_offset_super_scales"] = halfBlocks.offsets.map { UnsafeRawBufferPointer($0.superScales) }
        }
        let layout = Layout(rows: rows, columns: columns, kernelLayout: kernelLayout, blocksPerWeightBlock: blocksPerWeightBlock, isExact: isExact,
                            hasCenteredBytes: hasCenteredBytes, halfBlocks: halfBlocks.map { ($0.zero, $0.blocksPerSuper) })
        return (layout, buffers)
    }

    /// A repacked weight over `buffers` as `stored` gave them (memory `arena` keeps alive, such as
    /// a mapped cache file), without repacking; `nil` when the codes' size is not what the layout
    /// needs or a buffer the layout reads is missing.
    package init?(restoring layout: Layout, buffers: [String: UnsafeMutableRawBufferPointer], arena: WeightArena) {
        func buffer<T>(_ name: String, _ type: T.Type) -> UnsafeMutableBufferPointer<T>? {
            buffers[name].map { UnsafeMutableBufferPointer(start: $0.baseAddress?.assumingMemoryBound(to: T.self), count: $0.count / MemoryLayout<T>.stride) }
        }
        guard layout.rows >= 1, layout.columns >= 1, layout.blocksPerWeightBlock >= 1, let codes = buffer("codes", UInt8.self),
              let scales = buffer("scales", Float.self), let offsets = buffer("offsets", Float.self) else { return nil }
        rows = layout.rows
        columns = layout.columns
        paddedColumns = max(32, (columns + 31) / 32 * 32)
        panels = (rows + 15) / 16
        kernelLayout = layout.kernelLayout
        packedBits = shrink_panel_bytes(32, layout.kernelLayout) / 64
        blocksPerWeightBlock = layout.blocksPerWeightBlock
        weightBlocks = (paddedColumns / 32 + blocksPerWeightBlock - 1) / blocksPerWeightBlock
        isExact = layout.isExact
        hasCenteredBytes = layout.hasCenteredBytes
        (self.codes, self.scales, self.offsets) = (codes, scales, offsets)
        luts = buffer("luts", UInt8.self)
        lowPlane = buffer("low_plane", UInt8.self)
        zeroPoints = buffer("zero_points", UInt8.self)
        multipliers = buffer("multipliers", UInt8.self)
        channelScales = buffer("channel_scales", Float.self)
        if let half = layout.halfBlocks {
            guard let multipliers = buffer("half_multipliers", Int8.self), let superScales = buffer("half_super_scales", Float.self) else { return nil }
            let offsets = buffer("half_offset_multipliers", UInt8.self).flatMap { m in buffer("half_offset_super_scales", Float.self).map { (m, $0) } }
            halfBlocks = HalfBlocks(multipliers: multipliers, superScales: superScales, offsets: offsets, zero: half.zero, blocksPerSuper: half.blocksPerSuper)
        } else {
            halfBlocks = nil
        }
        self.arena = arena
        guard codes.count == panels * shrink_panel_bytes(paddedColumns, kernelLayout) else { return nil }
    }

    /// Integer block scales laid out for the kernels, when every `(q − z) · m + 128` of 4-bit codes
    /// fits a byte (`z · m ≤ 128`, `(15 − z) · m ≤ 127`); else `nil`.
    static func panelMultipliers(_ integerScales: (multipliers: [UInt8], rowScales: [Float]), zeroPoints: [UInt8],
                                 rows: Int, weightBlocks: Int) -> (multipliers: [UInt8], channelScales: [Float])? {
        let panels = (rows + 15) / 16
        var multipliers = [UInt8](repeating: 0, count: panels * weightBlocks * 16)
        var channelScales = [Float](repeating: 0, count: panels * 16)
        for row in 0..<rows {
            channelScales[row] = integerScales.rowScales[row]
            for block in 0..<weightBlocks {
                let target = (row / 16) * weightBlocks * 16 + block * 16 + row % 16
                let m = Int(integerScales.multipliers[row * weightBlocks + block]), z = Int(zeroPoints[target])
                guard z * m <= 128, (15 - z) * m <= 127 else { return nil }
                multipliers[target] = UInt8(m)
            }
        }
        return (multipliers, channelScales)
    }

    /// Exact byte codes re-biased to the centered form: per row and weight block of `weightBlock`
    /// inputs with scale `a` and offset `o`, `c − z + 128` for `z = o / a` when `z` is an integer
    /// with `a · z = o` exactly and every re-biased code of the group fits a byte (a group with
    /// `a = o = 0` is all zero weights and takes code 128); `nil` when some group does not allow
    /// it. O(rows · columns).
    static func centeredByteCodes(_ codes: [UInt8], _ matrix: CodeMatrix, rows: Int, columns: Int, weightBlock: Int) -> [UInt8]? {
        let weightBlocks = (columns + weightBlock - 1) / weightBlock
        var centered = codes
        for row in 0..<rows {
            for block in 0..<weightBlocks {
                let scale = matrix.rowScales[row * weightBlocks + block], offset = matrix.rowOffsets[row * weightBlocks + block]
                let range = (row * columns + block * weightBlock)..<(row * columns + min(columns, (block + 1) * weightBlock))
                if scale == 0 && offset == 0 {
                    for index in range { centered[index] = 128 }
                    continue
                }
                let z = (offset / scale).rounded()
                guard z.isFinite, scale * z == offset, abs(z) < 512 else { return nil }
                let shift = 128 - Int(z)
                for index in range {
                    let code = Int(codes[index]) + shift
                    guard code >= 0, code <= 255 else { return nil }
                    centered[index] = UInt8(code)
                }
            }
        }
        return centered
    }

    /// `offsets[i] / scales[i]` for every group when each is an integer in 0…15 and `scales[i] · z`
    /// reproduces the offset exactly (a zero scale takes `z` = 0); else `nil`.
    static func integerZeroPoints(scales: [Float], offsets: [Float]) -> [UInt8]? {
        var values = [UInt8](repeating: 0, count: scales.count)
        for index in 0..<scales.count where scales[index] != 0 || offsets[index] != 0 {
            let z = (offsets[index] / scales[index]).rounded()
            guard z.isFinite, z >= 0, z <= 15, scales[index] * z == offsets[index] else { return nil }
            values[index] = UInt8(z)
        }
        return values
    }

    /// How far a packed weight of output channel `row` may be from the stored weight: 0 when the
    /// codes are exact, else half of the row's grid step.
    public func maximumWeightError(row: Int) -> Float {
        isExact ? 0 : scales[(row / 16) * weightBlocks * 16 + row % 16] / 2
    }

    /// Codes of `bits` bits (2, 3, 4 or 8), row-major, or pair indices (`SHRINK_PAIR_PANELS`,
    /// `SHRINK_PAIR64_PANELS`: `columns / 2` per row) or quad indices (`SHRINK_QUAD_PANELS`:
    /// `columns / 4` per row), into panels of `panelBytes` (zeroed) in the layouts of `shrink_kernels.h`.
    static func pack(_ source: UnsafePointer<UInt8>, rows: Int, columns: Int, bits: Int, panelBytes: Int,
                     into target: UnsafeMutablePointer<UInt8>) {
        for row in 0..<rows {
            let panel = target + (row / 16) * panelBytes, lane = (row % 16) * 4
            let sourceRow = source + row * columns
            switch bits {
            case Int(SHRINK_PAIR256_PANELS):
                let pairRow = source + row * (columns / 2), channel = row % 16
                for pair in 0..<(columns / 2) {
                    let column = 2 * pair
                    panel[(column >> 3) * 64 + 16 * (channel / 4) + 8 * ((column >> 2) & 1) + 2 * (channel % 4) + ((column >> 1) & 1)] = pairRow[pair]
                }
            case Int(SHRINK_QUAD_PANELS):
                let quadRow = source + row * (columns / 4), channel = row % 16
                for quad in 0..<(columns / 4) {
                    panel[(quad >> 2) * 64 + 16 * (channel / 4) + 4 * (quad & 3) + channel % 4] = quadRow[quad]
                }
            case Int(SHRINK_PAIR_PANELS):
                let pairRow = source + row * (columns / 2), lane = (row % 16) * 2
                for pair in 0..<(columns / 2) {
                    let column = 2 * pair
                    panel[(column >> 3) * 32 + lane + ((column >> 1) & 1)] |= pairRow[pair] << UInt8(4 * ((column >> 2) & 1))
                }
            case Int(SHRINK_SPARSE24_PANELS):
                let channel = row % 16
                for quad in 0..<((columns + 3) / 4) {
                    let octet = panel + (quad >> 1) * 48, shift = UInt8(4 * (quad & 1))
                    var slot = 0
                    for i in 0..<min(4, columns - quad * 4) where sourceRow[quad * 4 + i] != 0xFF {
                        octet[channel] |= 1 << (UInt8(i) + shift)
                        octet[16 + 8 * (channel / 4) + 2 * (channel % 4) + slot] |= sourceRow[quad * 4 + i] << shift
                        slot += 1
                    }
                }
            case Int(SHRINK_PAIR64_PANELS):
                let pairRow = source + row * (columns / 2), lane = (row % 16) * 2
                for pair in 0..<(columns / 2) {
                    let column = 2 * pair, block = panel + (column >> 5) * 192, within = lane + ((column >> 1) & 1)
                    block[((column >> 3) & 3) * 32 + within] |= (pairRow[pair] & 0x0F) << UInt8(4 * ((column >> 2) & 1))
                    let crumb = 2 * ((column >> 3) & 1) + ((column >> 2) & 1)
                    block[128 + ((column >> 4) & 1) * 32 + within] |= (pairRow[pair] >> 4) << UInt8(2 * crumb)
                }
            case 2, 3:
                let blockBytes = bits == 2 ? 128 : 192
                for column in 0..<columns {
                    let block = panel + (column >> 5) * blockBytes, within = lane + (column & 3)
                    block[((column >> 4) & 1) * 64 + within] |= (sourceRow[column] & 3) << UInt8(2 * ((column >> 2) & 3))
                    if bits == 3 { block[128 + within] |= (sourceRow[column] >> 2) << UInt8((column >> 2) & 7) }
                }
            case 4:
                for column in 0..<columns {
                    let octet = column >> 3, within = column & 7
                    let byte = octet * 64 + lane + (within & 3)
                    panel[byte] |= within < 4 ? sourceRow[column] : sourceRow[column] << 4
                }
            default:
                for column in 0..<columns { panel[(column >> 2) * 64 + lane + (column & 3)] = sourceRow[column] }
            }
        }
    }

    /// The code the kernels see for channel `16 · panel + lane` at `input` (`256 · high + low` with
    /// a low plane).
    @inline(__always)
    func code(panel: Int, lane: Int, input: Int, codes: UnsafePointer<UInt8>, luts: UnsafePointer<UInt8>?,
              low: UnsafePointer<UInt8>? = nil) -> Int32 {
        if kernelLayout == SHRINK_SPARSE24_PANELS {
            let octet = panel * paddedColumns * 6 + (input >> 3) * 48, quad = (input >> 2) & 1, i = input & 3
            let mask = Int(codes[octet + lane] >> UInt8(4 * quad)) & 0x0F
            var entry = 16
            if (mask >> i) & 1 == 1 {
                let slot = (mask & ((1 << i) - 1)).nonzeroBitCount
                let byte = codes[octet + 16 + 8 * (lane / 4) + 2 * (lane % 4) + slot]
                entry = Int(quad == 0 ? byte & 0x0F : byte >> 4)
            }
            guard let low else { return Int32(luts![panel * 32 + entry]) }
            return Int32(luts![panel * 32 + entry]) << 8 + Int32(low[panel * 32 + entry])
        }
        if kernelLayout == SHRINK_PAIR256_PANELS {
            let entry = codes[panel * paddedColumns * 8 + (input >> 3) * 64 + 16 * (lane / 4) + 8 * ((input >> 2) & 1) + 2 * (lane % 4)
                              + ((input >> 1) & 1)]
            return Int32(luts![panel * shrink_lut_bytes(kernelLayout) + Int(entry) * 2 + (input & 1)])
        }
        if kernelLayout == SHRINK_QUAD_PANELS {
            let entry = codes[panel * paddedColumns * 4 + (input >> 4) * 64 + 16 * (lane / 4) + 4 * ((input >> 2) & 3) + lane % 4]
            return Int32(luts![panel * shrink_lut_bytes(kernelLayout) + Int(entry) * 4 + (input & 3)])
        }
        if pairedEntries {
            // Pair panels: the 4 low bits of the entry (and for 64 entries the 2 high ones).
            let block = panel * paddedColumns * 2 * packedBits + (input >> 5) * 64 * packedBits, within = lane * 2 + ((input >> 1) & 1)
            let byte = codes[block + ((input >> 3) & 3) * 32 + within]
            var entry = Int((input & 7) < 4 ? byte & 0x0F : byte >> 4)
            if packedBits == 3 {
                let crumb = 2 * ((input >> 3) & 1) + ((input >> 2) & 1)
                entry |= Int((codes[block + 128 + ((input >> 4) & 1) * 32 + within] >> UInt8(2 * crumb)) & 0x03) << 4
            }
            return Int32(luts![panel * shrink_lut_bytes(kernelLayout) + entry * 2 + (input & 1)])
        }
        if packedBits < 8 {
            let index: Int
            if packedBits < 4 {
                let block = panel * paddedColumns * 2 * packedBits + (input >> 5) * 16 * 4 * packedBits, within = lane * 4 + (input & 3)
                let crumbs = codes[block + ((input >> 4) & 1) * 64 + within]
                let high = packedBits == 3 ? (codes[block + 128 + within] >> UInt8((input >> 2) & 7)) & 1 : 0
                index = Int((crumbs >> UInt8(2 * ((input >> 2) & 3))) & 0x03 | high << 2)
            } else {
                let byte = codes[panel * paddedColumns * 8 + (input >> 3) * 64 + lane * 4 + (input & 3)]
                index = Int((input & 7) < 4 ? byte & 0x0F : byte >> 4)
            }
            guard let luts else { return Int32(index) }
            guard let low else { return Int32(luts[panel * 16 + index]) }
            return Int32(luts[panel * 16 + index]) << 8 + Int32(low[panel * 16 + index])
        }
        let offset = panel * paddedColumns * 16 + (input >> 2) * 64 + lane * 4 + (input & 3)
        guard let low else { return Int32(codes[offset]) }
        return Int32(codes[offset]) << 8 + Int32(low[offset])
    }

    // MARK: - From encodings to codes

    static func codeMatrix(_ weight: EncodedTensor) -> CodeMatrix? {
        let rows = weight.shape[0], columns = weight.shape[1]
        switch weight.encoding {
        case .affine(let affine) where affine.superBlockSize != nil && affine.offsetDType == nil:
            return foldedMultipliers(weight, affine)
        case .affine(let affine):
            guard let block = affineBlock(affine, columns: columns) else { return nil }
            let (blocksPerRow, scales, offsets) = PackedLinear.affineTables(weight, affine, block: block)
            var matrix = CodeMatrix(codes: unpack(weight.parts["codes"]!.bytes, count: rows * columns, bits: affine.bits),
                                    rowScales: scales, rowOffsets: offsets, weightBlock: block, codeBits: affine.bits, rowLUTs: nil, exact: true)
            if affine.scaleDType == .u8, let rowScales = weight.parts["channel_scales"]?.floats() {
                let stored = weight.parts["scales"]!.bytes
                let multipliers = (0..<(rows * blocksPerRow)).map { index in
                    stored[EncodingLayout.group(of: (index / blocksPerRow) * columns + (index % blocksPerRow) * block, affine.granularity,
                                                shape: weight.shape)]
                }
                matrix.integerScales = (multipliers, rowScales)
            }
            return matrix
        case .palette(let palette) where palette.blockScales != nil:
            return blockScaledPalette(weight, palette)
        case .palette(let palette) where palette.vectorSize == 1 && palette.channelAxis == 0:
            var (matrix, _, _, _) = paletteGrid(weight, palette)
            matrix.codes = unpack(weight.parts["indices"]!.bytes, count: rows * columns, bits: palette.bits)
            return matrix
        case .palette(let palette) where palette.channelAxis == 0:
            // Vector entries: each weight's code is its lane of the entry, on the LUT's grid.
            var (matrix, _, rowCodes, wide) = paletteGrid(weight, palette)
            let width = palette.vectorSize
            let indices = unpack(weight.parts["indices"]!.bytes, count: rows * columns / width, bits: palette.bits)
            if width == 2 || width == 4, !wide, (0..<rows).allSatisfy({ rowCodes[$0] == rowCodes[$0 / 16 * 16] }) {
                // Pair panels (16, 64 or 256 entries) and quad panels: the indices as stored, each
                // row's entries as its LUT.
                let layout = width == 4 ? SHRINK_QUAD_PANELS
                    : palette.bits <= 4 ? SHRINK_PAIR_PANELS : palette.bits <= 6 ? SHRINK_PAIR64_PANELS : SHRINK_PAIR256_PANELS
                let lutBytes = shrink_lut_bytes(layout)
                matrix.codes = indices
                matrix.rowLUTs = rowCodes.map { codes in (0..<lutBytes).map { $0 < codes.count ? UInt8(codes[$0]) : 0 } }
                (matrix.codeBits, matrix.indexLayout) = (width == 2 && palette.bits <= 4 ? 4 : width == 2 && palette.bits <= 6 ? 6 : 8, layout)
                return matrix
            }
            let codes = (0..<(rows * columns)).map { rowCodes[$0 / columns][Int(indices[$0 / width]) * width + $0 % width] }
            (matrix.codes, matrix.lowCodes) = planes(codes, wide: wide)
            (matrix.codeBits, matrix.rowLUTs, matrix.rowLowLUTs) = (8, nil, nil)
            return matrix
        case .sparse(_, let base):
            if let matrix = sparse24Codes(weight, base: base) ?? sparseCodes(weight, base: base) { return matrix }
            if case .palette = base { return requantizedRows(weight) }
            return nil
        case .palette:
            return requantizedRows(weight)
        case .dense, .rotated:
            // A rotated weight runs its stored base behind the input rotation (`RotatedLinear`).
            return nil
        }
    }

    /// Two-level integer scales without offsets (ggml's `Q3_K`, `Q6_K`: `w = S · m · q`, `m` per
    /// block, `S` per super-block) with each block's multiplier folded into the codes:
    /// `c = m · q + 127`, `a = S`, `o = 127 · S` per super-block (a multiple of 32 inputs), exactly,
    /// when every `m · q` lies in −127…128 (always for `Q3_K`, whose `|m| ≤ 32` and `q ∈ −4…3`);
    /// `nil` otherwise (they run through `PackedLinear`, exactly).
    static func foldedMultipliers(_ weight: EncodedTensor, _ affine: AffineEncoding) -> CodeMatrix? {
        let rows = weight.shape[0], columns = weight.shape[1]
        guard let superBlock = affine.superBlockSize, superBlock % 32 == 0, columns % superBlock == 0, affine.symmetric,
              case .perBlock(let block) = affine.granularity, let second = weight.parts["super_scales"]?.floats() else { return nil }
        let multipliers = weight.parts["scales"]!.floats()
        let stored = unpack(weight.parts["codes"]!.bytes, count: rows * columns, bits: affine.bits)
        var codes = [UInt8](repeating: 0, count: rows * columns)
        for index in 0..<(rows * columns) {
            let (row, column) = index.quotientAndRemainder(dividingBy: columns)
            let q = Int(stored[index]) - affine.codeOffset - affine.implicitZeroPoint
            let folded = Int(multipliers[row * (columns / block) + column / block]) * q + 127
            guard (0...255).contains(folded) else { return nil }
            codes[index] = UInt8(folded)
        }
        return CodeMatrix(codes: codes, rowScales: second, rowOffsets: second.map { 127 * $0 }, weightBlock: superBlock, codeBits: 8,
                          rowLUTs: nil, exact: true)
    }

    /// Two-level integer multipliers per 16 inputs, codes of at most 6 bits, symmetric (ggml's
    /// `Q6_K`: `w = S · m · (c − z)`) or with two-level integer offsets (`Q2_K`:
    /// `w = S · m · c − S_o · k`), that do not fold into bytes: the codes as stored (nibble panels
    /// for codes of at most 4 bits, else bytes), with the multipliers and super-block scales for
    /// `shrink_gemm_u8s8_half_blocks`; exact.
    static func halfBlockForm(_ weight: EncodedTensor, arena: WeightArena) -> (CodeMatrix, HalfBlocks)? {
        let rows = weight.shape[0], columns = weight.shape[1]
        guard case .affine(let affine) = weight.encoding, affine.symmetric ? affine.offsetDType == nil : affine.offsetDType == .u8, affine.bits <= 6,
              case .perBlock(16) = affine.granularity, let superBlock = affine.superBlockSize, superBlock % 32 == 0, columns % superBlock == 0,
              let stored = weight.parts["scales"], stored.dtype == .i8 || stored.dtype == .u8,
              let second = weight.parts["super_scales"]?.floats() else { return nil }
        let multipliers = stored.floats().compactMap { Int8(exactly: $0) }
        guard multipliers.count == stored.elementCount else { return nil }
        let halves = columns / 16, supers = columns / superBlock
        var offsets: (multipliers: UnsafeMutableBufferPointer<UInt8>, superScales: UnsafeMutableBufferPointer<Float>)?
        if affine.offsetDType == .u8, let stored = weight.parts["offsets"]?.bytes, let offsetScales = weight.parts["super_offsets"]?.floats() {
            offsets = (panelLayout(arena, rows: rows, count: halves) { stored[$0 * halves + $1] },
                       panelLayout(arena, rows: rows, count: supers) { offsetScales[$0 * supers + $1] })
        }
        let packedMultipliers = panelLayout(arena, rows: rows, count: halves) { multipliers[$0 * halves + $1] }
        let superScales = panelLayout(arena, rows: rows, count: supers) { second[$0 * supers + $1] }
        let matrix = CodeMatrix(codes: unpack(weight.parts["codes"]!.bytes, count: rows * columns, bits: affine.bits),
                                rowScales: [Float](repeating: 0, count: rows), rowOffsets: [Float](repeating: 0, count: rows),
                                weightBlock: columns, codeBits: affine.bits, rowLUTs: nil, exact: true)
        return (matrix, HalfBlocks(multipliers: packedMultipliers, superScales: superScales, offsets: offsets,
                                   zero: Int32(affine.codeOffset + affine.implicitZeroPoint), blocksPerSuper: superBlock / 32))
    }

    /// `count` values per row, `value(row, index)`, laid out per panel of 16 channels:
    /// `(panel · count + index) · 16 + lane`, zero past the last row.
    static func panelLayout<T: Numeric>(_ arena: WeightArena, rows: Int, count: Int, _ value: (Int, Int) -> T) -> UnsafeMutableBufferPointer<T> {
        let buffer = arena.allocate(T.self, count: (rows + 15) / 16 * count * 16)
        for row in 0..<rows {
            let (panel, lane) = row.quotientAndRemainder(dividingBy: 16)
            for index in 0..<count { buffer[(panel * count + index) * 16 + lane] = value(row, index) }
        }
        return buffer
    }

    /// A palette with block scales whose LUT is one `I8` table (ggml's `IQ4_NL`, `IQ4_XS`), exactly:
    /// codes `lut + 128` through the shared 16-entry LUT, `a = lutScale · blockScale`, `o = 128 · a`
    /// per block of a multiple of 32 inputs. `nil` for other block-scaled palettes (they run
    /// through `PackedLinear`, exactly).
    static func blockScaledPalette(_ weight: EncodedTensor, _ palette: PaletteEncoding) -> CodeMatrix? {
        let rows = weight.shape[0], columns = weight.shape[1]
        guard let scaling = palette.blockScales, palette.vectorSize == 1, palette.bits <= 4, palette.lutDType == .i8,
              palette.granularity == .perTensor, !palette.perChannelScale, scaling.blockSize % 32 == 0 || scaling.blockSize >= columns,
              weight.parts["lut_zero_points"] == nil, let lutScale = weight.parts["lut_scales"]?.floats().first,
              let blockScales = weight.paletteBlockScales() else { return nil }
        let lut = weight.parts["lut"]!.bytes.map { UInt8(Int(Int8(bitPattern: $0)) + 128) }
        let table = lut + [UInt8](repeating: 0, count: 16 - lut.count)
        let block = min(scaling.blockSize, columns)
        let scales = blockScales.map { lutScale * $0 }
        return CodeMatrix(codes: unpack(weight.parts["indices"]!.bytes, count: rows * columns, bits: palette.bits),
                          rowScales: scales, rowOffsets: scales.map { 128 * $0 }, weightBlock: block, codeBits: palette.bits,
                          rowLUTs: [[UInt8]](repeating: table, count: rows), exact: true)
    }

    /// The weight block of an affine encoding in inputs (`columns` for a whole row), if the integer
    /// kernels take it.
    static func affineBlock(_ affine: AffineEncoding, columns: Int) -> Int? {
        switch affine.granularity {
        case .perTensor, .perChannel(axis: 0): columns
        case .perBlock(let size) where size >= columns: columns
        case .perBlock(let size) where size % 32 == 0: size
        default: nil
        }
    }

    /// All `count` codes of `bits` bits, one byte each.
    static func unpack(_ bytes: UnsafeRawBufferPointer, count: Int, bits: Int) -> [UInt8] {
        switch bits {
        case 8: return Array(bytes.prefix(count))
        case 4:
            return [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
                for index in 0..<count { buffer[index] = (bytes[index >> 1] >> UInt8((index & 1) * 4)) & 0x0F }
                initialized = count
            }
        default:
            return (0..<count).map { PackedBits.value(at: $0, bits: bits, in: bytes) }
        }
    }

    /// A grid `v ≈ a · (q − z)` with codes 0…`levels` and an integer zero code `z`, so that 0 is exact.
    struct Grid {
        let scale: Float
        let zero: Int
        let levels: Int

        /// The grid over `[min(v, 0), max(v, 0)]` whose step is the smallest power of two that spans
        /// it in at most `levels − 1` steps (so that rounding the zero code keeps every code within
        /// `0…levels`): a step `a < 2 · range / (levels − 1)`, and every value that is a multiple of
        /// `a` (an f16 value of at least 1,024 `a`, any multiple of a coarser power of two) is exact.
        init(minimum: Float, maximum: Float, levels: Int) {
            let low = min(minimum, 0), high = max(maximum, 0)
            self.levels = levels
            if high > low {
                var step = Float(sign: .plus, exponent: ((high - low) / Float(levels - 1)).exponent, significand: 1)
                if (high - low) / step > Float(levels - 1) { step *= 2 }
                scale = step
            } else {
                scale = 0
            }
            zero = scale > 0 ? Int(max(0, min(Float(levels), (-low / scale).rounded(.toNearestOrEven)))) : 0
        }

        init(scale: Float, zero: Int, levels: Int) {
            (self.scale, self.zero, self.levels) = (scale, zero, levels)
        }

        func code(_ value: Float) -> Int {
            guard scale > 0 else { return 0 }
            return max(0, min(levels, Int((value / scale).rounded(.toNearestOrEven)) + zero))
        }

        /// Whether `value` is on the grid: `a · (code(value) − z) == value`.
        func holds(_ value: Float) -> Bool { scale * Float(code(value) - zero) == value }

        /// The grids a set of value groups (LUTs, or rows) run on: every group's `narrow` grid (8
        /// bits) when each holds its group exactly, else the 16-bit grid over each group's range;
        /// and whether every value is then exact.
        static func choose(_ groups: [[Float]], narrow: [Grid]) -> (grids: [Grid], wide: Bool, exact: Bool) {
            if zip(groups, narrow).allSatisfy({ group, grid in group.allSatisfy(grid.holds) }) { return (narrow, false, true) }
            let wide = groups.map { Grid(minimum: $0.min() ?? 0, maximum: $0.max() ?? 0, levels: 65535) }
            return (wide, true, zip(groups, wide).allSatisfy { group, grid in group.allSatisfy(grid.holds) })
        }
    }

    /// Codes of at most 16 bits as their high bytes and, for `wide` codes, their low bytes.
    static func planes(_ codes: [Int], wide: Bool) -> (high: [UInt8], low: [UInt8]?) {
        wide ? (codes.map { UInt8($0 >> 8) }, codes.map { UInt8($0 & 0xFF) }) : (codes.map { UInt8($0) }, nil)
    }

    /// Per-group LUTs of a palette (scalar or vector entries) on their grids (see the type's documentation); each row's
    /// LUT codes, scale and offset (output-channel scales folded in), and each row's zero code.
    /// Codes are left empty for the caller.
    static func paletteGrid(_ weight: EncodedTensor, _ palette: PaletteEncoding) -> (CodeMatrix, zeroCodes: [Int], rowCodes: [[Int]], wide: Bool) {
        let rows = weight.shape[0]
        let tableSize = palette.vectorSize > 1 ? palette.entries * palette.vectorSize : palette.entries <= 16 ? 16 : 256
        let (luts, rowGroup) = PackedLinear.lookupTables(weight, palette, tableSize: tableSize)
        let lutScales = palette.lutDType == .i8 ? weight.parts["lut_scales"]?.floats() : nil
        let lutZeroPoints = weight.parts["lut_zero_points"]?.floats()
        let narrow = luts.indices.map { group in
            lutScales.map { Grid(scale: $0[group], zero: 128 + Int(lutZeroPoints?[group] ?? 0), levels: 255) }
                ?? Grid(minimum: luts[group].min()!, maximum: luts[group].max()!, levels: 255)
        }
        let (grids, wide, exact) = Grid.choose(luts, narrow: narrow)
        let quantized = zip(luts, grids).map { lut, grid in lut.map(grid.code) }
        let channelScales = weight.parts["channel_scales"]?.floats()
        var scales = [Float](repeating: 0, count: rows), offsets = scales
        for row in 0..<rows {
            let grid = grids[rowGroup[row]], channel = channelScales?[row] ?? 1
            scales[row] = grid.scale * channel
            offsets[row] = grid.scale * Float(grid.zero) * channel
        }
        let rowCodes = rowGroup.map { quantized[$0] }
        let tables = rowCodes.map { planes($0, wide: wide) }
        var matrix = CodeMatrix(codes: [], rowScales: scales, rowOffsets: offsets, weightBlock: weight.shape[1], codeBits: palette.bits,
                                rowLUTs: tables.map(\.high), exact: exact)
        if wide { matrix.rowLowLUTs = tables.map { $0.low! } }
        return (matrix, rowGroup.map { grids[$0].zero }, rowCodes, wide)
    }

    /// Pruned scalar palettes of at most 16 entries, one LUT per panel, with at most 2 of every 4
    /// inputs kept (each group of 4 from input 0): the indices (255 where pruned) and per row the
    /// LUT's 16 codes and the grid's zero code (2:4 panels; on a 16-bit grid their high bytes, and
    /// their low bytes in `rowLowLUTs`); else `nil`.
    static func sparse24Codes(_ weight: EncodedTensor, base: WeightEncoding) -> CodeMatrix? {
        guard case .palette(let palette) = base, palette.vectorSize == 1, palette.channelAxis == 0, palette.blockScales == nil,
              palette.bits <= 4 else { return nil }
        let rows = weight.shape[0], columns = weight.shape[1]
        var (matrix, rowZeros, rowCodes, wide) = paletteGrid(weight, palette)
        guard (0..<rows).allSatisfy({ rowCodes[$0] == rowCodes[$0 / 16 * 16] }) else { return nil }
        let indices = unpackSparse(weight, rows: rows, columns: columns, bits: palette.bits)
        for row in 0..<rows {
            for start in stride(from: row * columns, to: (row + 1) * columns, by: 4) {
                guard indices[start..<min(start + 4, (row + 1) * columns)].filter({ $0 >= 0 }).count <= 2 else { return nil }
            }
        }
        matrix.codes = indices.map { $0 < 0 ? 0xFF : UInt8($0) }
        // Per row, 32 bytes: the 16 codes, the zero code, padding; on a 16-bit grid their high bytes,
        // and their low bytes as the low plane's table.
        let tables = (0..<rows).map { planes(rowCodes[$0] + [rowZeros[$0]], wide: wide) }
        let padded = { (plane: [UInt8]) in plane + [UInt8](repeating: 0, count: 32 - plane.count) }
        matrix.rowLUTs = tables.map { padded($0.high) }
        matrix.rowLowLUTs = wide ? tables.map { padded($0.low!) } : nil
        (matrix.codeBits, matrix.indexLayout) = (4, SHRINK_SPARSE24_PANELS)
        return matrix
    }

    /// Pruned affine codes or pruned scalar-palette indices, with each block's zero code (or the
    /// LUT grid's) at pruned positions.
    static func sparseCodes(_ weight: EncodedTensor, base: WeightEncoding) -> CodeMatrix? {
        let rows = weight.shape[0], columns = weight.shape[1]
        var matrix: CodeMatrix
        let bits: Int
        let zeroCode: (Int, Int) -> Int
        let keptCode: (Int, Int16) -> Int
        var wide = false
        switch base {
        case .affine(let affine) where affine.superBlockSize != nil && affine.offsetDType == nil:
            return foldedMultipliers(weight, affine)
        case .affine(let affine):
            guard let block = affineBlock(affine, columns: columns) else { return nil }
            let (blocksPerRow, scales, offsets) = PackedLinear.affineTables(weight, affine, block: block)
            matrix = CodeMatrix(codes: [], rowScales: scales, rowOffsets: offsets, weightBlock: block, codeBits: 8, rowLUTs: nil, exact: true)
            bits = affine.bits
            zeroCode = { row, column in
                let index = row * blocksPerRow + column / block
                return scales[index] > 0 ? Int(UInt8(clamping: Int((offsets[index] / scales[index]).rounded()))) : 0
            }
            keptCode = { _, code in Int(code) }
        case .palette(let palette) where palette.vectorSize == 1 && palette.channelAxis == 0:
            let (grid, rowZeros, rowCodes, wideCodes) = paletteGrid(weight, palette)
            matrix = grid
            matrix.rowLUTs = nil
            matrix.rowLowLUTs = nil
            matrix.codeBits = 8
            wide = wideCodes
            bits = palette.bits
            zeroCode = { row, _ in rowZeros[row] }
            keptCode = { row, code in rowCodes[row][Int(code)] }
        default:
            return nil
        }
        let indices = unpackSparse(weight, rows: rows, columns: columns, bits: bits)
        var codes = [Int](repeating: 0, count: rows * columns)
        for row in 0..<rows {
            for column in 0..<columns {
                let index = row * columns + column
                codes[index] = indices[index] < 0 ? zeroCode(row, column) : keptCode(row, indices[index])
            }
        }
        (matrix.codes, matrix.lowCodes) = planes(codes, wide: wide)
        return matrix
    }

    /// The kept codes of a pruned weight at their positions, −1 where pruned.
    static func unpackSparse(_ weight: EncodedTensor, rows: Int, columns: Int, bits: Int) -> [Int16] {
        let mask = weight.parts["mask"]!.bytes
        let codes = (weight.parts["codes"] ?? weight.parts["indices"])!.bytes
        var result = [Int16](repeating: -1, count: rows * columns)
        var kept = 0
        for index in 0..<(rows * columns) where (mask[index >> 3] >> UInt8(index & 7)) & 1 == 1 {
            result[index] = Int16(PackedBits.value(at: kept, bits: bits, in: codes))
            kept += 1
        }
        return result
    }

    /// Any other encoding: each decoded row on its own grid (8 bits when every row is exact on
    /// it, else 16). Decodes every row twice (once to choose, once to code) into one row buffer.
    static func requantizedRows(_ weight: EncodedTensor) -> CodeMatrix {
        let rows = weight.shape[0], columns = weight.shape[1]
        let reader = EncodedTensorReader(weight)
        var row = [Float](repeating: 0, count: columns)
        func decode(_ r: Int) {
            row.withUnsafeMutableBufferPointer { reader.decode(flatRange: (r * columns)..<((r + 1) * columns), into: $0.baseAddress!) }
        }
        var narrow: [Grid] = [], wideGrids: [Grid] = []
        var narrowExact = true
        for r in 0..<rows {
            decode(r)
            let (low, high) = (row.min() ?? 0, row.max() ?? 0)
            narrow.append(Grid(minimum: low, maximum: high, levels: 255))
            wideGrids.append(Grid(minimum: low, maximum: high, levels: 65535))
            narrowExact = narrowExact && row.allSatisfy(narrow[r].holds)
        }
        let grids = narrowExact ? narrow : wideGrids
        var codes = [Int](repeating: 0, count: rows * columns)
        var exact = true
        for r in 0..<rows {
            decode(r)
            for column in 0..<columns { codes[r * columns + column] = grids[r].code(row[column]) }
            exact = exact && row.allSatisfy(grids[r].holds)
        }
        let (high, low) = planes(codes, wide: !narrowExact)
        return CodeMatrix(codes: high, rowScales: grids.map(\.scale), rowOffsets: grids.map { $0.scale * Float($0.zero) },
                          weightBlock: columns, codeBits: 8, rowLUTs: nil, exact: exact, lowCodes: low)
    }
}
