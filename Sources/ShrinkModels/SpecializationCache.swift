import Foundation
import ShrinkCore
import ShrinkIO
import ShrinkKernels

/// What a model's load prepares for this CPU, kept on disk: every linear layer's repacked panels
/// (`Int8PanelWeights` for int8 activations, `DenseLinear`'s fp32 panels for dense F32 weights),
/// so that a later load maps them instead of repacking.
///
/// An entry is a file named by its key: a 64-bit hash of the model file's bytes and its size, the
/// integer kernel variant, the activation precision, Shrink's version and `layoutVersion`. It holds a magic, a
/// header (JSON: the key and, per tensor, its kind, layout and where each buffer lies), a checksum
/// of header and data, and the buffers, each 64-byte aligned. Loading maps the file, checks magic, checksum and key, and
/// gives up on any mismatch: a stale or corrupt entry is rebuilt, never trusted. Entries are
/// written atomically (`AtomicFile`).
public final class SpecializationCache: @unchecked Sendable {
    /// Changes whenever the panels' layouts or this format change, so that older entries go stale.
    public static let layoutVersion = 4
    static let magic = Array("SHRKSPC1".utf8)

    public let directory: String
    /// Whether a load without an entry writes one (else only existing entries are used and stale
    /// ones rebuilt).
    public let createsEntries: Bool

    /// `$SHRINK_SPECIALIZATION_CACHE`, else `~/.cache/shrink/specialized`.
    public static var defaultDirectory: String {
        ProcessInfo.processInfo.environment["SHRINK_SPECIALIZATION_CACHE"] ?? NSHomeDirectory() + "/.cache/shrink/specialized"
    }

    public init(directory: String = SpecializationCache.defaultDirectory, createsEntries: Bool = true) {
        self.directory = directory
        self.createsEntries = createsEntries
    }

    /// Whether a model's entry can be used.
    public enum Status: Equatable, Sendable {
        case ready
        case missing
        case stale(reason: String)
    }

    /// The key of the model file at `modelPath` for `variant` and `activations`: hash and size of
    /// its bytes, the variant, the precision, Shrink's version and the layout version.
    ///
    /// The hash reads the whole file, as long as reading the model: it is remembered in the cache
    /// folder by the file's identity (device, inode, size, modification and change times to the
    /// nanosecond), as git's index remembers a file's state, and read again only when any of them
    /// moves. A file changed within two seconds of being hashed is not remembered (a coarse clock
    /// could then miss a later change). `remembers`: whether a computed hash is written down.
    public func key(modelPath: String, variant: IntegerKernelVariant, activations: ActivationPrecision,
                    remembers: Bool = true) throws(ShrinkIOError) -> String {
        let (hash, size) = try contentHash(modelPath, remembers: remembers)
        return String(format: "%016llx-%llu-%@-%@-shrink%@-v%d", hash, UInt64(size), variant.rawValue, activations.rawValue,
                      ShrinkVersion.current, Self.layoutVersion)
    }

    /// The content hash and size of the file at `path`, from its remembered identity or read.
    func contentHash(_ path: String, remembers: Bool) throws(ShrinkIOError) -> (UInt64, Int) {
        let before = try FileIdentity(path: path)
        let memo = directory + "/identities/" + String(format: "%016llx", Array(path.utf8).withUnsafeBytes { ContentHash.of($0) })
        if let text = try? String(contentsOfFile: memo, encoding: .utf8), let hash = before.hash(remembered: text) {
            return (hash, before.size)
        }
        let (hash, size) = try MappedFile.hash(path: path)
        if remembers, (try? FileIdentity(path: path)) == before, before.isSettled {
            try? FileManager.default.createDirectoryIfNeeded((memo as NSString).deletingLastPathComponent)
            if let file = try? AtomicFile(path: memo) {
                let written = Array(before.remembering(hash).utf8).withUnsafeBytes { bytes in Result { () throws(ShrinkIOError) in try file.write(bytes) } }
                if (try? written.get()) != nil { try? file.commit() }
            }
        }
        return (hash, size)
    }

    func entryPath(key: String) -> String { directory + "/" + key + ".panels" }

    /// Whether the model at `modelPath` has a usable entry for `variant` and `activations`, without
    /// loading the model.
    public func status(modelPath: String, variant: IntegerKernelVariant = .best, activations: ActivationPrecision = .int8) -> Status {
        do {
            let key = try self.key(modelPath: modelPath, variant: variant, activations: activations, remembers: false)
            guard FileManager.default.fileExists(atPath: entryPath(key: key)) else { return .missing }
            _ = try SpecializedPanels(path: entryPath(key: key), key: key)
            return .ready
        } catch {
            return .stale(reason: "\(error)")
        }
    }
}

/// A repacked weight a cache entry holds: int8 panels (of `W'` for a weight stored rotated, whose
/// rotation stays in the model file) or fp32 panels.
enum SpecializedWeight {
    case int8(Int8PanelWeights, rotated: Bool)
    case float32(DenseLinear)
}

/// The panels of one cache entry, mapped: `panels(for:)` and `floatPanels(for:)` give each
/// tensor's, valid as long as this value (its arena owns the mapping).
final class SpecializedPanels: @unchecked Sendable {
    let arena: WeightArena
    private let entries: [String: (layout: Int8PanelWeights.Layout, buffers: [String: UnsafeMutableRawBufferPointer])]
    private let floatEntries: [String: (rows: Int, columns: Int, panels: UnsafeMutableRawBufferPointer)]
    /// The tensors whose int8 panels hold a rotated weight `W'`.
    let rotated: Set<String>

    /// Maps and checks the entry at `path`.
    /// - Throws: `ShrinkIOError.invalidHeader` for a short file, another magic, a checksum or key mismatch, or a bad header.
    init(path: String, key: String) throws(ShrinkIOError) {
        func fail(_ reason: String) -> ShrinkIOError { .invalidHeader(path: path, reason: reason) }
        let (base, size) = try MappedFile.map(path: path)
        arena = WeightArena(adopting: base, bytes: size)
        let bytes = UnsafeRawBufferPointer(start: base, count: size)
        guard size >= 24, Array(bytes[0..<8]) == SpecializationCache.magic else { throw fail("not a specialization cache entry") }
        let headerBytes = Int(bytes.loadUnaligned(fromByteOffset: 8, as: UInt64.self))
        guard headerBytes <= size - 24 else { throw fail("the header runs past the end") }
        guard bytes.loadUnaligned(fromByteOffset: 16, as: UInt64.self) == ContentHash.of(UnsafeRawBufferPointer(rebasing: bytes[24...])) else {
            throw fail("checksum mismatch (a corrupt or partly written entry)")
        }
        let header: JSONValue
        do { header = try JSONValue.parse(UnsafeRawBufferPointer(rebasing: bytes[24..<(24 + headerBytes)])) } catch { throw fail("header: \(error)") }
        guard header.member("key")?.stringValue == key else { throw fail("made for another model, kernel variant or layout version") }
        var entries: [String: (Int8PanelWeights.Layout, [String: UnsafeMutableRawBufferPointer])] = [:]
        var floatEntries: [String: (Int, Int, UnsafeMutableRawBufferPointer)] = [:]
        var rotated: Set<String> = []
        for (name, tensor) in header.member("tensors")?.objectValue ?? [] {
            func integer(_ key: String) throws(ShrinkIOError) -> Int {
                guard let value = tensor.member(key)?.integerValue else { throw fail("tensors.\(name).\(key) is missing") }
                return value
            }
            var buffers: [String: UnsafeMutableRawBufferPointer] = [:]
            for (buffer, place) in tensor.member("buffers")?.objectValue ?? [] {
                guard let range = place.arrayValue?.compactMap(\.integerValue), range.count == 2, range[0] >= 24 + headerBytes, range[1] >= 0,
                      range[0] <= size - range[1], range[0] % WeightArena.alignment == 0 else {
                    throw fail("tensors.\(name).buffers.\(buffer) lies outside the data")
                }
                buffers[buffer] = UnsafeMutableRawBufferPointer(start: base + range[0], count: range[1])
            }
            if tensor.member("kind")?.stringValue == SpecializedPanels.floatKind {
                guard let panels = buffers["panels"] else { throw fail("tensors.\(name).buffers.panels is missing") }
                floatEntries[name] = (try integer("rows"), try integer("columns"), panels)
                continue
            }
            let half = tensor.member("half")?.arrayValue?.compactMap(\.integerValue)
            let layout = Int8PanelWeights.Layout(
                rows: try integer("rows"), columns: try integer("columns"), kernelLayout: Int32(truncatingIfNeeded: try integer("layout")),
                blocksPerWeightBlock: try integer("blocks_per_weight_block"), isExact: tensor.member("exact") == .bool(true),
                hasCenteredBytes: tensor.member("centered") == .bool(true),
                halfBlocks: half.flatMap { $0.count == 2 ? (Int32(truncatingIfNeeded: $0[0]), $0[1]) : nil })
            entries[name] = (layout, buffers)
            if tensor.member("rotated") == .bool(true) { rotated.insert(name) }
        }
        self.entries = entries
        self.floatEntries = floatEntries
        self.rotated = rotated
    }

    /// The `kind` of an entry's fp32 panels (int8 panels have none).
    static let floatKind = "f32_panels"

    /// The repacked int8 weight of tensor `name`, nil when the entry lacks it or it does not fit.
    func panels(for name: String) -> Int8PanelWeights? {
        entries[name].flatMap { Int8PanelWeights(restoring: $0.layout, buffers: $0.buffers, arena: arena) }
    }

    /// The fp32 linear layer of tensor `name` (`rows × columns`) over the entry's panels, nil when
    /// the entry lacks it or its panels do not fit that shape.
    func floatLinear(for name: String, rows: Int, columns: Int, bias: [Float]?, threads: Int, variant: KernelVariant) -> DenseLinear? {
        guard let entry = floatEntries[name], entry.rows == rows, entry.columns == columns else { return nil }
        return DenseLinear(restoring: entry.panels, owner: arena, bias: bias, outFeatures: rows, inFeatures: columns, threads: threads, variant: variant)
    }

    /// Writes an entry for `key` holding `weights` (tensor name → repacked weight) at `path`, atomically.
    static func write(_ weights: [(name: String, weight: SpecializedWeight)], key: String, to path: String) throws(ShrinkIOError) {
        var tensors: [(name: String, fields: [(key: String, value: JSONValue)], places: [(buffer: String, offset: Int, count: Int)])] = []
        var pieces: [UnsafeRawBufferPointer] = []
        var offset = 0
        func place(_ bytes: UnsafeRawBufferPointer, as buffer: String, in places: inout [(buffer: String, offset: Int, count: Int)]) {
            places.append((buffer, offset, bytes.count))
            pieces.append(bytes)
            offset += (bytes.count + WeightArena.alignment - 1) / WeightArena.alignment * WeightArena.alignment
        }
        for (name, weight) in weights {
            var places: [(buffer: String, offset: Int, count: Int)] = []
            switch weight {
            case .float32(let linear):
                place(linear.storedPanels, as: "panels", in: &places)
                tensors.append((name, [("kind", .string(floatKind)), ("rows", .number(String(linear.outFeatures))),
                                       ("columns", .number(String(linear.inFeatures)))], places))
            case .int8(let panels, let isRotated):
                let (layout, buffers) = panels.stored
                for buffer in Int8PanelWeights.bufferNames {
                    if let bytes = buffers[buffer] { place(bytes, as: buffer, in: &places) }
                }
                var fields: [(key: String, value: JSONValue)] = [
                    ("rows", .number(String(layout.rows))), ("columns", .number(String(layout.columns))),
                    ("layout", .number(String(layout.kernelLayout))), ("blocks_per_weight_block", .number(String(layout.blocksPerWeightBlock))),
                    ("exact", .bool(layout.isExact)), ("centered", .bool(layout.hasCenteredBytes)),
                ]
                if let half = layout.halfBlocks { fields.append(("half", .array([.number(String(half.zero)), .number(String(half.blocksPerSuper))]))) }
                if isRotated { fields.append(("rotated", .bool(true))) }
                tensors.append((name, fields, places))
            }
        }
        // Buffer offsets are from the file's start: the data begins 64-byte aligned after the
        // header, whose length depends on the offsets' digits, so the header is made until its
        // data start no longer moves.
        func header(dataStart: Int) -> [UInt8] {
            let entries = tensors.map { tensor in
                (key: tensor.name, value: JSONValue.object(tensor.fields + [("buffers", .object(tensor.places.map {
                    (key: $0.buffer, value: JSONValue.array([.number(String($0.offset + dataStart)), .number(String($0.count))]))
                }))]))
            }
            return Array(JSONValue.object([("key", .string(key)), ("tensors", .object(entries))]).serialized().utf8)
        }
        var dataStart = 0, text: [UInt8] = []
        while true {
            text = header(dataStart: dataStart)
            let start = (24 + text.count + WeightArena.alignment - 1) / WeightArena.alignment * WeightArena.alignment
            if start == dataStart { break }
            dataStart = start
        }
        var contents = [UInt8](repeating: 0, count: 24) + text + [UInt8](repeating: 0, count: dataStart - 24 - text.count)
        for piece in pieces {
            contents.append(contentsOf: piece)
            contents.append(contentsOf: repeatElement(0, count: (piece.count + WeightArena.alignment - 1) / WeightArena.alignment * WeightArena.alignment - piece.count))
        }
        let checksum = contents.withUnsafeBytes { ContentHash.of(UnsafeRawBufferPointer(rebasing: $0[24...])) }
        contents.replaceSubrange(0..<8, with: SpecializationCache.magic)
        withUnsafeBytes(of: UInt64(text.count).littleEndian) { contents.replaceSubrange(8..<16, with: $0) }
        withUnsafeBytes(of: checksum.littleEndian) { contents.replaceSubrange(16..<24, with: $0) }
        try FileManager.default.createDirectoryIfNeeded((path as NSString).deletingLastPathComponent)
        let file = try AtomicFile(path: path)
        let written = contents.withUnsafeBytes { bytes in Result { () throws(ShrinkIOError) in try file.write(bytes) } }
        try written.get()
        try file.commit()
    }
}

/// A 64-bit hash of bytes for keys and checksums (not cryptographic): eight lanes of 64-bit
/// words, each `rotl(h ⊕ w, 29) · k` with odd `k`s, folded with the length and the tail bytes.
/// Eight independent multiply chains run at several bytes per cycle, beyond what the page cache
/// delivers; any changed byte changes it with overwhelming probability.
enum ContentHash {
    static func of(_ bytes: UnsafeRawBufferPointer) -> UInt64 {
        let (k0, k1, k2, k3): (UInt64, UInt64, UInt64, UInt64) = (0x9E37_79B9_7F4A_7C15, 0xC2B2_AE3D_27D4_EB4F, 0x1656_67B1_9E37_79F9, 0x85EB_CA77_C2B2_AE63)
        @inline(__always) func mix(_ h: UInt64, _ w: UInt64, _ k: UInt64) -> UInt64 {
            let x = h ^ w
            return ((x << 29) | (x >> 35)) &* k
        }
        var (h0, h1, h2, h3, h4, h5, h6, h7): (UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64) = (1, 2, 3, 4, 5, 6, 7, 8)
        let blocks = bytes.count / 64
        if let base = bytes.baseAddress {
            for block in 0..<blocks {
                let at = base + block * 64
                h0 = mix(h0, at.loadUnaligned(as: UInt64.self), k0)
                h1 = mix(h1, at.loadUnaligned(fromByteOffset: 8, as: UInt64.self), k1)
                h2 = mix(h2, at.loadUnaligned(fromByteOffset: 16, as: UInt64.self), k2)
                h3 = mix(h3, at.loadUnaligned(fromByteOffset: 24, as: UInt64.self), k3)
                h4 = mix(h4, at.loadUnaligned(fromByteOffset: 32, as: UInt64.self), k0)
                h5 = mix(h5, at.loadUnaligned(fromByteOffset: 40, as: UInt64.self), k1)
                h6 = mix(h6, at.loadUnaligned(fromByteOffset: 48, as: UInt64.self), k2)
                h7 = mix(h7, at.loadUnaligned(fromByteOffset: 56, as: UInt64.self), k3)
            }
        }
        var result = UInt64(bytes.count)
        for (lane, k) in [(h0, k0), (h1, k1), (h2, k2), (h3, k3), (h4, k0), (h5, k1), (h6, k2), (h7, k3)] { result = mix(result, lane, k) }
        for index in (blocks * 64)..<bytes.count { result = mix(result, UInt64(bytes[index]), k0) }
        return mix(result, result >> 31, k2)
    }
}

/// What `stat` says of a file: while none of it moves, its bytes have not changed.
struct FileIdentity: Equatable {
    let device: UInt64
    let inode: UInt64
    let size: Int
    let modified: timespec
    let changed: timespec

    init(path: String) throws(ShrinkIOError) {
        var info = stat()
        guard stat(path, &info) == 0 else { throw .cannotOpen(path: path, reason: "errno \(errno)") }
        device = UInt64(info.st_dev)
        inode = UInt64(info.st_ino)
        size = Int(info.st_size)
        modified = info.st_mtim
        changed = info.st_ctim
    }

    static func == (a: FileIdentity, b: FileIdentity) -> Bool {
        a.description == b.description
    }

    var description: String {
        "\(device) \(inode) \(size) \(modified.tv_sec).\(modified.tv_nsec) \(changed.tv_sec).\(changed.tv_nsec)"
    }

    /// Whether the file last changed at least two seconds ago.
    var isSettled: Bool {
        let now = Int(Date().timeIntervalSince1970)
        return Int(modified.tv_sec) < now - 2 && Int(changed.tv_sec) < now - 2
    }

    /// The line that remembers `hash` for this identity.
    func remembering(_ hash: UInt64) -> String { description + " " + String(format: "%016llx", hash) + "\n" }

    /// The hash `text` remembers for this identity, nil for another identity or a malformed line.
    func hash(remembered text: String) -> UInt64? {
        let prefix = description + " "
        guard text.hasPrefix(prefix), text.hasSuffix("\n") else { return nil }
        let digits = text.dropFirst(prefix.count).dropLast()
        guard digits.count == 16 else { return nil }
        return UInt64(digits, radix: 16)
    }
}

/// Files mapped whole, read-only contents in private writable pages, their page tables filled at
/// once (`MADV_POPULATE_READ`, Linux 5.14; older kernels fault pages in as they are read), which
/// is several times faster than faulting 4 KB at a time.
enum MappedFile {
    /// Maps the file at `path`; the caller unmaps it (or hands it to a `WeightArena`).
    static func map(path: String) throws(ShrinkIOError) -> (UnsafeMutableRawPointer, Int) {
        let descriptor = open(path, O_RDONLY)
        guard descriptor >= 0 else { throw .cannotOpen(path: path, reason: "errno \(errno)") }
        defer { close(descriptor) }
        var info = stat()
        guard fstat(descriptor, &info) == 0, info.st_size > 0 else { throw .cannotOpen(path: path, reason: "empty or unreadable") }
        let size = Int(info.st_size)
        guard let base = mmap(nil, size, PROT_READ | PROT_WRITE, MAP_PRIVATE, descriptor, 0), base != MAP_FAILED else {
            throw .cannotOpen(path: path, reason: "cannot map (errno \(errno))")
        }
        _ = madvise(base, size, 22)  // MADV_POPULATE_READ
        return (base, size)
    }

    /// The content hash and size of the file at `path`.
    static func hash(path: String) throws(ShrinkIOError) -> (UInt64, Int) {
        let (base, size) = try map(path: path)
        defer { munmap(base, size) }
        return (ContentHash.of(UnsafeRawBufferPointer(start: base, count: size)), size)
    }
}

extension FileManager {
    /// Creates `folder` and its parents unless it exists.
    /// - Throws: `ShrinkIOError.writeFailed` naming the folder.
    func createDirectoryIfNeeded(_ folder: String) throws(ShrinkIOError) {
        do { try createDirectory(atPath: folder, withIntermediateDirectories: true) } catch {
            throw .writeFailed(path: folder, reason: "cannot create the folder: \(error.localizedDescription)")
        }
    }
}
