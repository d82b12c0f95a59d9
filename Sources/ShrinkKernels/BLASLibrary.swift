#if canImport(Glibc)
import Glibc
#endif

/// Which BLAS implementation the process is running, for benchmark reports. Debian selects the
/// library behind `libblas.so.3` through its alternatives system, so the answer is read at run time.
public enum BLASLibrary {
    /// The resolved path of the loaded BLAS shared object, from `/proc/self/maps`.
    public static var loadedPath: String? {
        guard let maps = readTextFile("/proc/self/maps") else { return nil }
        return maps.split(separator: "\n")
            .compactMap { line in line.split(separator: " ", omittingEmptySubsequences: true).last.map(String.init) }
            .first { $0.contains("libblas") || $0.contains("libopenblas") || $0.contains("libblis") }
    }

    /// OpenBLAS's own build description and the core type it selected (for example
    /// `"OpenBLAS 0.3.21 DYNAMIC_ARCH … (core: SkylakeX)"`), or `nil` when the BLAS is not OpenBLAS.
    public static var openBLASConfiguration: String? {
        typealias StringFunction = @convention(c) () -> UnsafePointer<CChar>?
        guard let handle = dlopen(nil, RTLD_NOW),
              let configSymbol = dlsym(handle, "openblas_get_config") else { return nil }
        let config = unsafeBitCast(configSymbol, to: StringFunction.self)().map { String(cString: $0) } ?? "OpenBLAS"
        guard let coreSymbol = dlsym(handle, "openblas_get_corename") else { return config }
        let core = unsafeBitCast(coreSymbol, to: StringFunction.self)().map { String(cString: $0) } ?? "unknown"
        return "\(config) (core: \(core))"
    }

    /// A one-line description: the library path, OpenBLAS details and `OPENBLAS_CORETYPE` when set.
    public static var summary: String {
        var parts = [loadedPath ?? "BLAS library not found in /proc/self/maps"]
        parts.append(openBLASConfiguration ?? "reference (netlib) or other non-OpenBLAS BLAS")
        if let coreType = getenv("OPENBLAS_CORETYPE") {
            parts.append("OPENBLAS_CORETYPE=\(String(cString: coreType))")
        }
        return parts.joined(separator: "; ")
    }
}

/// Reads a whole file with the C library (works for `/proc` files, whose reported size is 0).
private func readTextFile(_ path: String) -> String? {
    guard let file = fopen(path, "r") else { return nil }
    defer { fclose(file) }
    var data: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 65536)
    while true {
        let count = fread(&chunk, 1, chunk.count, file)
        if count == 0 { break }
        data.append(contentsOf: chunk[0..<count])
    }
    return String(decoding: data, as: UTF8.self)
}
