import Foundation
import Testing
import ShrinkTestSupport

/// `shrink specialize` on MiniLM (fp32 panels) and `shrink generate --schema` with bad schema
/// files: every failure is one line naming the file, with nothing on standard output.
@Suite struct RuntimeCommandTests {
    @Test func specializeWritesChecksAndRebuildsEntries() throws {
        let folder = TemporaryDirectory()
        let missing = run(["specialize", "minilm", "--check", "--cache", folder.path])
        #expect(missing.code == 1 && missing.output.hasPrefix("missing: "), "\(missing)")
        let written = run(["specialize", "minilm", "--cache", folder.path])
        #expect(written.code == 0 && written.output.hasPrefix("written in \(folder.path)"), "\(written)")
        #expect(run(["specialize", "minilm", "--check", "--cache", folder.path]).output.hasPrefix("ready: "))
        #expect(run(["specialize", "minilm", "--cache", folder.path]).output.hasPrefix("ready: mapped from \(folder.path)"))
        let entry = folder.file(try #require(folder.contents.first { $0.hasSuffix(".panels") }))
        var bytes = try Data(contentsOf: URL(fileURLWithPath: entry))
        bytes[bytes.count - 64] ^= 0x40
        try bytes.write(to: URL(fileURLWithPath: entry))
        let stale = run(["specialize", "minilm", "--check", "--cache", folder.path])
        #expect(stale.code == 1 && stale.output.hasPrefix("stale: ") && stale.output.contains("checksum mismatch"), "\(stale)")
        #expect(run(["specialize", "minilm", "--cache", folder.path]).output.hasPrefix("rebuilt a stale entry"))
        #expect(run(["specialize", "minilm", "--check", "--cache", folder.path]).code == 0)
    }

    @Test func specializeRefusesWhatIsNotAModel() throws {
        let folder = TemporaryDirectory()
        let text = folder.file("notes.safetensors")
        try Data("not a model".utf8).write(to: URL(fileURLWithPath: text))
        for model in [folder.file("absent.gguf"), text] {
            let result = run(["specialize", model, "--cache", folder.path])
            #expect(result.code == 2 && result.output.isEmpty, "\(model): \(result)")
            #expect(result.errors.contains(model), "\(model): \(result.errors)")
        }
        #expect(folder.contents == ["notes.safetensors"])
    }

    @Test func badSchemaFilesNameTheFile() throws {
        let folder = TemporaryDirectory()
        let cases: [(name: String, contents: String?, says: String)] = [
            ("absent.json", nil, "absent.json"),
            ("broken.json", #"{"type": "object", "properties": {"#, "invalid JSON"),
            ("unknown-type.json", #"{"type": "object", "properties": {"word": {"type": "frobnicate"}}, "required": ["word"]}"#, "frobnicate"),
            ("empty-enum.json", #"{"type": "object", "properties": {"level": {"enum": []}}}"#, "level"),
        ]
        for (name, contents, says) in cases {
            if let contents { try Data(contents.utf8).write(to: URL(fileURLWithPath: folder.file(name))) }
            let result = run(["generate", "--model", "smollm2", "--schema", folder.file(name), "--prompt", "Hello", "--max-tokens", "8", "--threads", "2"])
            #expect(result.code == 2 && result.output.isEmpty, "\(name): \(result)")
            #expect(result.errors.contains(folder.file(name)) && result.errors.contains(says), "\(name): \(result.errors)")
        }
    }
}
