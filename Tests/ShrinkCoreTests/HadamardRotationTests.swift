import Foundation
import Testing
import ShrinkCore

/// The randomized Hadamard rotation against its definition: `R = (1/√d)(I ⊗ H_d)·diag(s)` built
/// densely from the Kronecker factors, for the widths of MiniLM, SmolLM2 and awkward ones.
@Suite struct HadamardRotationTests {
    @Test func paleyTwelveIsAHadamardMatrix() {
        let h = HadamardRotation.paley12
        #expect(h.allSatisfy { $0 == 1 || $0 == -1 })
        for i in 0..<12 {
            for j in 0..<12 {
                let dot = (0..<12).reduce(0) { $0 + Int(h[i * 12 + $1]) * Int(h[j * 12 + $1]) }
                #expect(dot == (i == j ? 12 : 0), "rows \(i) and \(j)")
            }
        }
    }

    @Test(arguments: [(384, 384, 128), (576, 576, 64), (1536, 1536, 512), (11008, 256, 256), (4096, 4096, 4096),
                      (48, 48, 16), (2048, 2048, 2048), (7, 1, 1), (360, 24, 8)])
    func blocksAreTheLargestOfTheirForm(size: Int, largest: Int, powerOfTwo: Int) {
        #expect(HadamardRotation.Block.largest.order(for: size) == largest, "\(size)")
        #expect(HadamardRotation.Block.powerOfTwo.order(for: size) == powerOfTwo, "\(size)")
    }

    @Test(arguments: [(384, 1, 32), (576, 2, 4), (24, 1, 2), (128, 0, 128), (1, 0, 1)])
    func blocksFactorIntoTwelvesAndAPowerOfTwo(order: Int, twelves: Int, powerOfTwo: Int) throws {
        let factors = try #require(HadamardRotation.factors(of: order))
        #expect(factors.twelves == twelves && factors.powerOfTwo == powerOfTwo)
    }

    @Test(arguments: [36, 3, 20, 0, 72 * 5])
    func otherBlocksAreRefused(order: Int) {
        #expect(HadamardRotation.factors(of: order) == nil)
        #expect(HadamardRotation(signs: [Float](repeating: 1, count: max(order, 1) * 2), blockSize: order) == nil)
    }

    /// The dense matrix of `rotation`, row-major, from the Kronecker definition.
    static func denseMatrix(_ rotation: HadamardRotation) -> [Double] {
        var factor: [Double] = [1]
        var order = 1
        func kronecker(_ b: [Double], _ m: Int) {
            var result = [Double](repeating: 0, count: order * m * order * m)
            for i in 0..<order { for j in 0..<order { for k in 0..<m { for l in 0..<m {
                result[(i * m + k) * (order * m) + j * m + l] = factor[i * order + j] * b[k * m + l]
            } } } }
            factor = result
            order *= m
        }
        for _ in 0..<rotation.twelves { kronecker(HadamardRotation.paley12.map(Double.init), 12) }
        var sylvester: [Double] = [1], size = 1
        while size < rotation.powerOfTwo {
            var next = [Double](repeating: 0, count: 4 * size * size)
            for i in 0..<size { for j in 0..<size {
                let v = sylvester[i * size + j]
                next[i * 2 * size + j] = v; next[i * 2 * size + j + size] = v
                next[(i + size) * 2 * size + j] = v; next[(i + size) * 2 * size + j + size] = -v
            } }
            sylvester = next
            size *= 2
        }
        kronecker(sylvester, size)
        let n = rotation.size, d = rotation.blockSize
        var dense = [Double](repeating: 0, count: n * n)
        for i in 0..<n {
            for j in 0..<n where i / d == j / d {
                dense[i * n + j] = factor[(i % d) * d + j % d] / Double(d).squareRoot() * Double(rotation.signs[j])
            }
        }
        return dense
    }

    @Test(arguments: [48, 96, 384, 576, 40, 144], HadamardRotation.Block.allCases)
    func rotateMatchesTheDenseDefinitionAndUnrotateInvertsIt(size: Int, block: HadamardRotation.Block) {
        let rotation = HadamardRotation(size: size, seed: 3, block: block)
        let dense = Self.denseMatrix(rotation)
        for i in 0..<size {
            for j in 0..<size {
                let dot = (0..<size).reduce(0.0) { $0 + dense[i * size + $1] * dense[j * size + $1] }
                #expect(abs(dot - (i == j ? 1 : 0)) < 1e-9, "R·Rᵀ at \(i), \(j) of \(size)")
            }
        }
        var generator = SplitMix64(seed: 9)
        let x = (0..<size).map { _ in Double.random(in: -3...3, using: &generator) }
        var rotated = x
        rotated.withUnsafeMutableBufferPointer { rotation.rotate($0.baseAddress!) }
        for i in 0..<size {
            let expected = (0..<size).reduce(0.0) { $0 + dense[i * size + $1] * x[$1] }
            #expect(abs(rotated[i] - expected) < 1e-9, "(R·x)[\(i)] of \(size)")
        }
        var back = rotated
        back.withUnsafeMutableBufferPointer { rotation.unrotate($0.baseAddress!) }
        for i in 0..<size { #expect(abs(back[i] - x[i]) < 1e-9, "Rᵀ·R·x at \(i) of \(size)") }
        var scratch = [Double](repeating: .nan, count: rotation.blockSize)
        var backWithScratch = rotated
        backWithScratch.withUnsafeMutableBufferPointer { x in scratch.withUnsafeMutableBufferPointer { rotation.unrotate(x.baseAddress!, scratch: $0.baseAddress!) } }
        #expect(backWithScratch == back, "unrotate with the caller's scratch, \(size)")
    }

    @Test func signsRoundTripThroughTheirPackedBits() {
        let rotation = HadamardRotation(size: 1536, seed: 42)
        let packed = rotation.packedSigns
        #expect(packed.count == 192)
        #expect(packed.withUnsafeBytes { HadamardRotation(size: 1536, blockSize: 512, packedSigns: $0) } == rotation)
        #expect(packed.withUnsafeBytes { HadamardRotation(size: 1536, blockSize: 1536, packedSigns: $0) } != rotation)
        #expect(packed.withUnsafeBytes { HadamardRotation(size: 1537, blockSize: 1, packedSigns: $0) } == nil, "too few bytes")
        #expect(rotation.signs.filter { $0 < 0 }.count > 600 && rotation.signs.filter { $0 < 0 }.count < 936)
        #expect(HadamardRotation(size: 1536, seed: 43) != rotation)
    }

    @Test func rotatedCorrelationIsRHRt() {
        let size = 48
        let rotation = HadamardRotation(size: size, seed: 1, block: .largest)
        var generator = SplitMix64(seed: 2)
        let rows = (0..<(20 * size)).map { _ in Float.random(in: -1...1, using: &generator) }
        var correlation = InputCorrelation(size: size)
        correlation.add(rows: rows, count: 20)
        var rotatedRows = rows
        rotatedRows.withUnsafeMutableBufferPointer { buffer in for row in 0..<20 { rotation.rotate(buffer.baseAddress! + row * size) } }
        var expected = InputCorrelation(size: size)
        expected.add(rows: rotatedRows, count: 20)
        let actual = correlation.rotated(by: rotation)
        for index in 0..<(size * size) { #expect(abs(actual.matrix[index] - expected.matrix[index]) < 1e-4, "element \(index)") }
    }

    @Test func scaledCorrelationIsDHD() {
        let size = 24, count = 30
        var generator = SplitMix64(seed: 5)
        let rows = (0..<(count * size)).map { _ in Float.random(in: -1...1, using: &generator) }
        let scales = (0..<size).map { _ in Float.random(in: -4...4, using: &generator) }
        var correlation = InputCorrelation(size: size)
        correlation.add(rows: rows, count: count)
        var expected = InputCorrelation(size: size)
        expected.add(rows: rows.indices.map { rows[$0] * scales[$0 % size] }, count: count)
        let actual = correlation.scaled(by: scales.map(Double.init))
        for index in 0..<(size * size) { #expect(abs(actual.matrix[index] - expected.matrix[index]) < 1e-4, "element \(index)") }
    }
}

/// Malformed rotated tensors, as a corrupt file would hand them over: each is refused with the
/// tensor's name and what is wrong, before anything decodes or runs them.
@Suite struct RotatedEncodingBadInputTests {
    static let base = WeightEncoding.dense(.f32)
    static func parts(signs: [UInt8], columns: Int = 48) throws -> [String: DenseTensor] {
        ["values": try DenseTensor(converting: [Float](repeating: 0.5, count: 2 * columns), shape: [2, columns]),
         "rotation_signs": try DenseTensor(dtype: .u8, shape: [signs.count], bytes: signs)]
    }

    @Test func wellFormedRotationIsAccepted() throws {
        let tensor = try EncodedTensor(name: "w", shape: [2, 48], sourceDType: .f32, encoding: .rotated(blockSize: 16, base: Self.base),
                                       parts: try Self.parts(signs: [UInt8](repeating: 0, count: 6)))
        #expect(tensor.inputRotation?.rotation.blockSize == 16)
    }

    @Test(arguments: [
        (36, [UInt8](repeating: 0, count: 6), "rotation block 36 is not 12^t · 2^k dividing the input dimension 48"),
        (32, [UInt8](repeating: 0, count: 6), "rotation block 32 is not 12^t · 2^k dividing the input dimension 48"),
        (0, [UInt8](repeating: 0, count: 6), "rotation block 0 is not 12^t · 2^k dividing the input dimension 48"),
        (16, [UInt8](repeating: 0, count: 5), "part 'rotation_signs' has 5 elements, expected 6"),
    ])
    func malformedRotationsAreRefused(block: Int, signs: [UInt8], reason: String) throws {
        #expect(throws: ShrinkCoreError.invalidEncodedTensor(name: "w", reason: reason)) {
            try EncodedTensor(name: "w", shape: [2, 48], sourceDType: .f32, encoding: .rotated(blockSize: block, base: Self.base),
                              parts: try Self.parts(signs: signs))
        }
    }

    @Test func paddingBitsAndNestingAreRefused() throws {
        // 20 inputs take 3 bytes of signs; bits past the 20th must be clear.
        #expect(throws: ShrinkCoreError.invalidEncodedTensor(name: "w", reason: "rotation_signs has bits set past the last input")) {
            try EncodedTensor(name: "w", shape: [2, 20], sourceDType: .f32, encoding: .rotated(blockSize: 4, base: Self.base),
                              parts: try Self.parts(signs: [0, 0, 0x10], columns: 20))
        }
        #expect(throws: ShrinkCoreError.invalidEncodedTensor(name: "w", reason: "rotations do not nest")) {
            try EncodedTensor(name: "w", shape: [2, 48], sourceDType: .f32, encoding: .rotated(blockSize: 16, base: .rotated(blockSize: 16, base: Self.base)),
                              parts: try Self.parts(signs: [UInt8](repeating: 0, count: 6)))
        }
    }

    @Test(arguments: [
        (#"{"kind": "rotated", "transform": "haar", "block_size": 16, "base": {"kind": "dense", "dtype": "F32"}}"#, "encoding.transform: unknown 'haar'"),
        (#"{"kind": "rotated", "transform": "randomized_hadamard", "base": {"kind": "dense", "dtype": "F32"}}"#, "block_size"),
        (#"{"kind": "rotated", "transform": "randomized_hadamard", "block_size": 16}"#, "base"),
    ])
    func malformedRotationJSONIsRefused(json: String, mentions: String) throws {
        let value = try Array(json.utf8).withUnsafeBytes { try JSONValue.parse($0) }
        do {
            _ = try WeightEncoding(json: value)
            Issue.record("accepted \(json)")
        } catch {
            #expect(error.message.contains(mentions), "\(error.message)")
        }
    }
}
