import Foundation
import Testing
import ShrinkIO
import ShrinkTestSupport

/// Every malformed file gives a typed error naming the file and the tensor or byte offset.
@Suite struct SafetensorsBadInputTests {
    let folder = TemporaryDirectory()

    /// Writes a file from a header text and data bytes; `declaredLength` overrides the length prefix.
    func file(header: String, data: [UInt8] = [], declaredLength: UInt64? = nil) -> String {
        file(bytes: withUnsafeBytes(of: (declaredLength ?? UInt64(header.utf8.count)).littleEndian) { Array($0) } + Array(header.utf8) + data)
    }

    func file(bytes: [UInt8]) -> String {
        let path = folder.file("bad-\(UUID().uuidString).safetensors")
        #expect(FileManager.default.createFile(atPath: path, contents: Data(bytes)))
        return path
    }

    func expectError(_ path: String, _ expected: (String) -> ShrinkIOError) {
        do {
            _ = try SafetensorsFile(path: path)
            Issue.record("accepted a bad file")
        } catch {
            #expect(error == expected(path))
            #expect(error.description.hasPrefix(path))
            #expect(!error.description.contains("\n"))
        }
    }

    @Test func missingFile() {
        let path = folder.file("nothing-here.safetensors")
        expectError(path) { .cannotOpen(path: $0, reason: "No such file or directory") }
    }

    @Test func folderInsteadOfFile() {
        expectError(folder.path) { .cannotOpen(path: $0, reason: "not a regular file") }
    }

    @Test func truncatedLengthPrefix() {
        expectError(file(bytes: [1, 0, 0])) { .truncated(path: $0, what: "the 8-byte header length", needed: 8, fileSize: 3) }
        expectError(file(bytes: [])) { .truncated(path: $0, what: "the 8-byte header length", needed: 8, fileSize: 0) }
    }

    @Test func headerLongerThanFile() {
        expectError(file(header: "{}", declaredLength: 64)) { .truncated(path: $0, what: "the header", needed: 72, fileSize: 10) }
    }

    @Test func headerOver100MB() {
        expectError(file(header: "{}", declaredLength: 100_000_001)) { .headerTooLarge(path: $0, length: 100_000_001, limit: 100_000_000) }
        expectError(file(header: "{}", declaredLength: UInt64.max)) { .headerTooLarge(path: $0, length: UInt64.max, limit: 100_000_000) }
    }

    @Test func headerNotJSON() {
        expectError(file(header: #"{"a": }"#)) { .headerNotJSON(path: $0, byteOffset: 14, reason: "unexpected character '}'") }
        expectError(file(header: "[1]")) { .headerNotJSON(path: $0, byteOffset: 8, reason: "the header must start with '{'") }
    }

    @Test func headerNotUTF8() {
        let bytes: [UInt8] = Array(#"{"a\#u{00}"#.utf8.prefix(3)) + [0xFF, 0x22, 0x3A, 0x7B, 0x7D, 0x7D]
        expectError(file(bytes: withUnsafeBytes(of: UInt64(bytes.count).littleEndian) { Array($0) } + bytes)) {
            .headerNotUTF8(path: $0, byteOffset: 11)
        }
    }

    @Test func unknownDType() {
        expectError(file(header: #"{"w":{"dtype":"F12","shape":[1],"data_offsets":[0,4]}}"#, data: [0, 0, 0, 0])) {
            .unknownDType(path: $0, tensor: "w", dtype: "F12")
        }
    }

    @Test func negativeShape() {
        expectError(file(header: #"{"w":{"dtype":"F32","shape":[-1],"data_offsets":[0,0]}}"#)) {
            .invalidShape(path: $0, tensor: "w", reason: "dimension 0 is -1, expected a non-negative integer")
        }
    }

    @Test func overflowingShape() {
        expectError(file(header: #"{"w":{"dtype":"F32","shape":[4611686018427387904,4],"data_offsets":[0,0]}}"#)) {
            .invalidShape(path: $0, tensor: "w", reason: "[4611686018427387904, 4] of F32 overflows")
        }
        expectError(file(header: #"{"w":{"dtype":"F32","shape":[99999999999999999999],"data_offsets":[0,0]}}"#)) {
            .invalidShape(path: $0, tensor: "w", reason: "dimension 0 is 99999999999999999999, expected a non-negative integer")
        }
    }

    @Test func tooManyDimensions() {
        let shape = "[" + Array(repeating: "1", count: 65).joined(separator: ",") + "]"
        expectError(file(header: #"{"w":{"dtype":"U8","shape":\#(shape),"data_offsets":[0,1]}}"#, data: [1])) {
            .invalidShape(path: $0, tensor: "w", reason: "more than 64 dimensions")
        }
    }

    /// Values the schema does not allow are rejected when first seen, not parsed (a deeply nested
    /// value would otherwise cost memory and stack).
    @Test func unexpectedValuesAreRejectedBeforeBeingRead() {
        let deep = String(repeating: "[", count: 100_000)
        expectError(file(header: #"{"w":{"dtype":\#(deep)}}"#)) { .invalidEntry(path: $0, tensor: "w", reason: "dtype must be a string, found array") }
        expectError(file(header: #"{"w":{"shape":[\#(deep)]}}"#)) { .invalidShape(path: $0, tensor: "w", reason: "dimension 0 is not a number (found array)") }
        expectError(file(header: #"{"__metadata__":\#(deep)}"#)) { .invalidMetadata(path: $0, key: "__metadata__", reason: "expected an object, found array") }
    }

    @Test func offsetsOutOfBounds() {
        expectError(file(header: #"{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}"#, data: [0, 0, 0, 0])) {
            .offsetsOutOfBounds(path: $0, tensor: "w", begin: 0, end: 8, dataSize: 4)
        }
        expectError(file(header: #"{"w":{"dtype":"F32","shape":[0],"data_offsets":[4,0]}}"#, data: [0, 0, 0, 0])) {
            .offsetsOutOfBounds(path: $0, tensor: "w", begin: 4, end: 0, dataSize: 4)
        }
    }

    @Test func offsetsNotMatchingShape() {
        expectError(file(header: #"{"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}"#, data: [UInt8](repeating: 0, count: 8))) {
            .sizeMismatch(path: $0, tensor: "w", expected: 12, actual: 8)
        }
    }

    @Test func overlappingTensors() {
        let header = #"{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}"#
        expectError(file(header: header, data: [UInt8](repeating: 0, count: 12))) {
            .overlappingTensors(path: $0, tensor: "b", other: "a", byteOffset: 4)
        }
    }

    @Test func bytesCoveredByNoTensor() {
        expectError(file(header: #"{"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}}"#, data: [1, 2, 3])) {
            .uncoveredBytes(path: $0, begin: 2, end: 3)
        }
    }

    @Test func duplicateTensorNames() {
        let entry = #"{"dtype":"U8","shape":[1],"data_offsets":[0,1]}"#
        expectError(file(header: #"{"w":\#(entry),"w":\#(entry)}"#, data: [1])) { .duplicateTensor(path: $0, tensor: "w") }
    }

    @Test func malformedEntries() {
        expectError(file(header: #"{"w":{"dtype":"U8","shape":[1]}}"#)) { .invalidEntry(path: $0, tensor: "w", reason: "missing key 'data_offsets'") }
        expectError(file(header: #"{"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"x":1}}"#, data: [1])) {
            .invalidEntry(path: $0, tensor: "w", reason: "unknown key 'x' (expected dtype, shape, data_offsets)")
        }
        expectError(file(header: #"{"w":[]}"#)) { .invalidEntry(path: $0, tensor: "w", reason: "expected an object, found array") }
        expectError(file(header: #"{"w":{"dtype":"U8","shape":[1],"data_offsets":[-1,0]}}"#)) {
            .invalidEntry(path: $0, tensor: "w", reason: "data_offsets must be non-negative integers, found -1")
        }
        expectError(file(header: #"{"w":{"dtype":"U8","shape":[1.5],"data_offsets":[0,1]}}"#, data: [1])) {
            .invalidShape(path: $0, tensor: "w", reason: "dimension 0 is 1.5, expected a non-negative integer")
        }
    }

    @Test func metadataMustBeStrings() {
        expectError(file(header: #"{"__metadata__":{"n":1}}"#)) { .invalidMetadata(path: $0, key: "n", reason: "expected a string, found number") }
    }

    @Test func missingTensorByName() throws {
        let path = file(header: #"{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}"#, data: [9])
        let opened = try SafetensorsFile(path: path)
        #expect(throws: ShrinkIOError.tensorNotFound(path: path, tensor: "b")) { try opened.tensor(named: "b") }
        #expect(Array(try opened.tensor(named: "a").bytes) == [9])
    }
}
