import Foundation
import Testing
import ShrinkCore
import ShrinkIO
import ShrinkTestSupport

@Suite struct GGUFBadInputTests {
    static func error(_ builder: GGUFBuilder) -> ShrinkIOError? {
        let folder = TemporaryDirectory()
        do {
            _ = try GGUFFile(path: builder.write(folder))
            return nil
        } catch {
            return error
        }
    }

    static func message(_ builder: GGUFBuilder) -> String { error(builder)?.description ?? "no error" }

    @Test func aValidHandcraftedFileReads() throws {
        let folder = TemporaryDirectory()
        let store = try GGUFStore(path: GGUFBuilder.valid().write(folder))
        #expect(store.names == ["w", "q"])
        #expect(store.tensor(named: "w")?.shape == [2, 4])
        #expect(store.storage(of: "q")?.summary == "Q8_0" && store.tensor(named: "q")?.storage == "int8 symmetric per-block 32")
        #expect(store.metadata["general.name"] == "tiny")
    }

    @Test func wrongMagicAndVersionsAreNamed() {
        var magic = GGUFBuilder.valid()
        magic.bytes[0] = UInt8(ascii: "X")
        #expect(Self.message(magic).contains("not 'GGUF'"))
        #expect(Self.message(GGUFBuilder.header(version: 1, tensors: 0, metadata: 0)).contains("version 1 is not supported"))
        #expect(Self.message(GGUFBuilder.header(version: UInt32(3).byteSwapped, tensors: 0, metadata: 0)).contains("big-endian"))
    }

    @Test func everyTruncationIsATypedErrorNamingTheFile() {
        let valid = GGUFBuilder.valid()
        for length in [0, 3, 7, 15, 23, 30, 40, 60, 80, valid.bytes.count - 1] {
            var cut = valid
            cut.bytes = Array(valid.bytes.prefix(length))
            let error = Self.error(cut)
            #expect(error != nil, "a file cut at \(length) bytes was accepted")
            #expect(error?.description.contains("model.gguf") == true, "\(length): \(error?.description ?? "")")
        }
    }

    @Test func hostileCountsAreRejectedBeforeAllocating() {
        #expect(Self.message(GGUFBuilder.header(tensors: .max, metadata: 0)).contains("tensor count"))
        #expect(Self.message(GGUFBuilder.header(tensors: 0, metadata: 1 << 60)).contains("metadata count"))
        var array = GGUFBuilder.header(tensors: 0, metadata: 1)
        array.string("tokens")
        array.u32(9)
        array.u32(8)
        array.u64(1 << 62)
        #expect(Self.message(array).contains("element count of 'tokens'"))
        var string = GGUFBuilder.header(tensors: 0, metadata: 1)
        string.string("name")
        string.u32(8)
        string.u64(.max)
        #expect(Self.message(string).contains("truncated"))
    }

    @Test func unknownValueAndTensorTypesAreNamed() {
        var value = GGUFBuilder.header(tensors: 0, metadata: 1)
        value.string("weird")
        value.u32(13)
        #expect(Self.message(value).contains("'weird': unknown value type 13"))
        var tensor = GGUFBuilder.header(tensors: 1, metadata: 0)
        tensor.tensorInfo("blk.0.w", dimensions: [32], type: 16, offset: 0)
        tensor.data(64)
        #expect(Self.message(tensor).contains("tensor 'blk.0.w': ggml type 16 is not supported"))
        var bool = GGUFBuilder.header(tensors: 0, metadata: 1)
        bool.string("flag")
        bool.u32(7)
        bool.bytes.append(2)
        #expect(Self.message(bool).contains("'flag': bool byte is 2"))
    }

    @Test func shapesOffsetsAndAlignmentAreChecked() {
        func file(_ dimensions: [UInt64], type: UInt32 = 0, offset: UInt64 = 0, data: Int = 64) -> GGUFBuilder {
            var builder = GGUFBuilder.header(tensors: 1, metadata: 0)
            builder.tensorInfo("t", dimensions: dimensions, type: type, offset: offset)
            builder.data(data)
            return builder
        }
        #expect(Self.message(file([1 << 32, 1 << 32, 1 << 32])).contains("element count overflows"))
        #expect(Self.message(file([UInt64.max])).contains("dimension 0 is"))
        #expect(Self.message(file([1, 1, 1, 1, 1])).contains("5 dimensions"))
        #expect(Self.message(file([])).contains("0 dimensions"))
        #expect(Self.message(file([48], type: 2)).contains("not a multiple of Q4_0's block of 32"))
        #expect(Self.message(file([4], offset: 8)).contains("offset 8 is not a multiple of the alignment 32"))
        #expect(Self.message(file([64])).contains("outside the data section"))
        var overlap = GGUFBuilder.header(tensors: 2, metadata: 0)
        overlap.tensorInfo("a", dimensions: [16], type: 0, offset: 0)
        overlap.tensorInfo("b", dimensions: [16], type: 0, offset: 32)
        overlap.data(128)
        #expect(Self.message(overlap).contains("overlaps tensor 'a'"))
        var duplicate = GGUFBuilder.header(tensors: 2, metadata: 0)
        duplicate.tensorInfo("a", dimensions: [4], type: 0, offset: 0)
        duplicate.tensorInfo("a", dimensions: [4], type: 0, offset: 32)
        duplicate.data(64)
        #expect(Self.message(duplicate).contains("'a' appears more than once"))
        var alignment = GGUFBuilder.header(tensors: 0, metadata: 1)
        alignment.string("general.alignment")
        alignment.u32(4)
        alignment.u32(48)
        #expect(Self.message(alignment).contains("general.alignment"))
    }

    @Test func deeplyNestedArraysAreRejected() {
        var builder = GGUFBuilder.header(tensors: 0, metadata: 1)
        builder.string("deep")
        builder.u32(9)
        for _ in 0..<8 {
            builder.u32(9)
            builder.u64(1)
        }
        #expect(Self.message(builder).contains("nested deeper"))
    }
}
