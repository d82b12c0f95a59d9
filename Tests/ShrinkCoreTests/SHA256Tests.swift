import Foundation
import Testing
@testable import ShrinkCore

/// SHA-256 against FIPS 180-4's examples, and the SHA-extension blocks against the Swift rounds
/// over every length up to three blocks and split updates.
@Suite struct SHA256Tests {
    static func digest(_ bytes: [UInt8], extensions: Bool = true, split: Int? = nil) -> String {
        var hasher = SHA256(extensions: extensions)
        bytes.withUnsafeBytes { buffer in
            let cut = min(split ?? buffer.count, buffer.count)
            hasher.update(UnsafeRawBufferPointer(rebasing: buffer[0..<cut]))
            hasher.update(UnsafeRawBufferPointer(rebasing: buffer[cut...]))
        }
        return hasher.finalize().map { String(format: "%02x", $0) }.joined()
    }

    @Test(arguments: [true, false])
    func standardExamples(extensions: Bool) {
        #expect(Self.digest([], extensions: extensions) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        #expect(Self.digest(Array("abc".utf8), extensions: extensions) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(Self.digest(Array("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq".utf8), extensions: extensions)
                == "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
        #expect(Self.digest([UInt8](repeating: 0x61, count: 1_000_000), extensions: extensions, split: 4097)
                == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
    }

    @Test func extensionsMatchTheSwiftRounds() {
        var generator = SplitMix64(seed: 7)
        let bytes = (0..<200).map { _ in UInt8(truncatingIfNeeded: generator.next()) }
        for length in 0...bytes.count {
            let message = Array(bytes[0..<length])
            let reference = Self.digest(message, extensions: false)
            #expect(Self.digest(message) == reference, "length \(length)")
            #expect(Self.digest(message, split: length / 3) == reference, "length \(length), split")
        }
    }
}
