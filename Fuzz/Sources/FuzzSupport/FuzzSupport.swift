import Foundation

@_silgen_name("LLVMFuzzerRunDriver")
func runFuzzerDriver(_ argc: UnsafeMutablePointer<CInt>, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>,
                     _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt) -> CInt

nonisolated(unsafe) private var target: (UnsafeRawBufferPointer) -> Void = { _ in }

/// Runs libFuzzer (its command-line options, corpus folders) with `body` as the fuzz target: each
/// input's bytes, which `body` must handle without trapping. Never returns.
/// `body` runs once on an empty input first, so that one-time lazy allocations (globals, caches)
/// are not reported as the first input's leaks.
public func fuzz(_ body: @escaping (UnsafeRawBufferPointer) -> Void) -> Never {
    target = body
    body(UnsafeRawBufferPointer(start: nil, count: 0))
    var argc = CommandLine.argc
    var argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = CommandLine.unsafeArgv
    exit(runFuzzerDriver(&argc, &argv) { data, size in
        target(UnsafeRawBufferPointer(start: data, count: size))
        return 0
    })
}

/// A file of this process under /dev/shm (else the temporary folder) that holds `bytes`, for
/// parsers that read paths; rewritten for every input.
public func scratchFile(_ bytes: UnsafeRawBufferPointer, suffix: String) -> String {
    let folder = FileManager.default.fileExists(atPath: "/dev/shm") ? "/dev/shm" : NSTemporaryDirectory()
    let path = "\(folder)/shrink-fuzz-\(getpid())\(suffix)"
    FileManager.default.createFile(atPath: path, contents: Data(bytes))
    return path
}

/// The models folder (`SHRINK_MODELS_DIR`, else ~/.cache/shrink/models).
public var modelsFolder: String {
    ProcessInfo.processInfo.environment["SHRINK_MODELS_DIR"] ?? NSHomeDirectory() + "/.cache/shrink/models"
}
