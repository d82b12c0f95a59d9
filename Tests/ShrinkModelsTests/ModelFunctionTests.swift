import Foundation
import Testing
import ShrinkModels
import ShrinkTestSupport

/// Model functions with descriptors (`ModelRuntime.call`): each runtime's signatures, results equal
/// to its own API's, and a typed error naming the input for every call that does not fit.
@Suite struct ModelFunctionTests {
    static func runtime(_ weights: String, threads: Int = 2) throws -> any ModelRuntime {
        let folder = URL(fileURLWithPath: weights).deletingLastPathComponent().path
        let config = folder + "/config.json"
        let (files, architecture) = try ModelArchitectures.open(weightsPath: weights, configPath: FileManager.default.fileExists(atPath: config) ? config : nil,
                                                                folder: folder)
        return try architecture.makeRuntime(files: files, options: RuntimeOptions(threads: threads))
    }

    static var miniLM: String { TestModels.miniLM + "/model.safetensors" }

    @Test func signaturesSayNamesTypesAndDynamicDimensions() throws {
        let encoder = try Self.runtime(Self.miniLM)
        #expect(encoder.functions.map(\.signature) == ["embed(input_ids: int32[?]) -> (embedding: float32[384])"])
        let decoder = try Self.runtime(ModelArchitectureTests.smolLM2)
        #expect(decoder.functions.map(\.signature) == [
            "prefill(tokens: int32[?], state) -> (logits: float32[49152])",
            "decode(token: int32[1], state) -> (logits: float32[49152])",
            "logits(tokens: int32[?]) -> (logits: float32[?, 49152])",
        ])
        #expect(decoder.functions[2].outputs[0].shape == [nil, 49152])
    }

    /// `embed` gives what `SentenceEmbeddingRuntime.embed` gives, bit for bit.
    @Test func embedIsTheEncodersEmbedding() throws {
        let encoder = try #require(try Self.runtime(Self.miniLM) as? any SentenceEmbeddingRuntime)
        let ids = encoder.tokenize("A man is playing a guitar on the street.")
        let result = try encoder.call("embed", ["input_ids": .int32(ids, shape: [ids.count])], state: nil)
        #expect(result == ["embedding": .float32(try encoder.embed([ids])[0], shape: [384])])
    }

    /// `prefill` then `decode` give the logits of `logits` over the same tokens at their last
    /// positions (the same kernels; batch against one row: rounding only), and advance the state.
    @Test func prefillAndDecodeFollowTheStatelessLogits() throws {
        let decoder = try #require(try Self.runtime(ModelArchitectureTests.smolLM2) as? LlamaDecoder)
        let tokens = try #require(decoder.tokenizer).encode("The capital of France is")
        let vocabulary = decoder.config.vocabularySize
        let all = try decoder.call("logits", ["tokens": .int32(tokens, shape: [tokens.count])], state: nil)
        let every = try #require(all["logits"]?.float32Values)
        #expect(all["logits"]?.shape == [tokens.count, vocabulary])
        let state = try #require(decoder.makeFunctionState(capacity: 64))
        let prefilled = try #require(try decoder.call("prefill", ["tokens": .int32(Array(tokens.dropLast()), shape: [tokens.count - 1])],
                                                      state: state)["logits"]?.float32Values)
        let decoded = try #require(try decoder.call("decode", ["token": .int32([tokens.last!], shape: [1])], state: state)["logits"]?.float32Values)
        #expect((state as? DecoderState)?.position == tokens.count)
        for (row, values) in [(tokens.count - 2, prefilled), (tokens.count - 1, decoded)] {
            let expected = every[(row * vocabulary)..<((row + 1) * vocabulary)]
            let difference = zip(expected, values).map { abs($0 - $1) }.max() ?? 0
            #expect(difference < 0.05, "row \(row): \(difference)")
            #expect(expected.indices.max { expected[$0] < expected[$1] }! - row * vocabulary == values.indices.max { values[$0] < values[$1] }!)
        }
    }

    /// Wrong names, types, shapes, states and values: each a typed error naming the function and input.
    @Test func callsThatDoNotFitAreTypedErrors() throws {
        let encoder = try Self.runtime(Self.miniLM)
        let decoder = try Self.runtime(ModelArchitectureTests.smolLM2)
        let other = try Self.runtime(ModelArchitectureTests.smolLM2)
        let state = decoder.makeFunctionState(capacity: 4)
        func error(_ runtime: any ModelRuntime, _ name: String, _ inputs: [String: FunctionValue],
                   state: (any FunctionState)? = nil) -> FunctionCallError? {
            do {
                _ = try runtime.call(name, inputs, state: state)
                return nil
            } catch {
                return error
            }
        }
        #expect(encoder.makeFunctionState(capacity: 8) == nil)
        #expect(error(encoder, "prefill", [:]) == .unknownFunction(name: "prefill", available: ["embed"]))
        #expect(error(encoder, "embed", [:]) == .missingInput(function: "embed", input: "input_ids"))
        #expect(error(encoder, "embed", ["input_ids": .int32([101, 102], shape: [2]), "mask": .int32([1, 1], shape: [2])])
                == .unexpectedInput(function: "embed", input: "mask"))
        #expect(error(encoder, "embed", ["input_ids": .float32([101, 102], shape: [2])])
                == .wrongScalarType(function: "embed", input: "input_ids", expected: .int32, actual: .float32))
        #expect(error(encoder, "embed", ["input_ids": .int32([101, 102], shape: [1, 2])])
                == .wrongShape(function: "embed", input: "input_ids", expected: "input_ids: int32[?]", actual: [1, 2], count: 2))
        #expect(error(encoder, "embed", ["input_ids": .int32([101, 102], shape: [3])])
                == .wrongShape(function: "embed", input: "input_ids", expected: "input_ids: int32[?]", actual: [3], count: 2))
        #expect(error(encoder, "embed", ["input_ids": .int32([], shape: [0])])
                == .wrongShape(function: "embed", input: "input_ids", expected: "input_ids: int32[?]", actual: [0], count: 0))
        #expect(error(encoder, "embed", ["input_ids": .int32([101, 30522, 102], shape: [3])])
                == .invalidValue(function: "embed", input: "input_ids", reason: "token id 30522 is outside the vocabulary of 30522"))
        let long = [Int32](repeating: 1000, count: 600)
        #expect(error(encoder, "embed", ["input_ids": .int32(long, shape: [600])])
                == .invalidValue(function: "embed", input: "input_ids", reason: "600 tokens exceed the 512 positions of the model"))
        #expect(error(encoder, "embed", ["input_ids": .int32([101, 102], shape: [2])], state: state)
                == .wrongState(function: "embed", reason: "takes no state"))

        #expect(error(decoder, "decode", ["token": .int32([1, 2], shape: [2])], state: state)
                == .wrongShape(function: "decode", input: "token", expected: "token: int32[1]", actual: [2], count: 2))
        #expect(error(decoder, "prefill", ["tokens": .int32([1, 2], shape: [2])])
                == .wrongState(function: "prefill", reason: "needs a state (makeFunctionState)"))
        #expect(error(other, "prefill", ["tokens": .int32([1, 2], shape: [2])], state: state)
                == .wrongState(function: "prefill", reason: "the state was made by another model"))
        #expect(error(decoder, "logits", ["tokens": .int32([1, 2], shape: [2])], state: state)
                == .wrongState(function: "logits", reason: "takes no state"))
        #expect(error(decoder, "prefill", ["tokens": .int32([1, 49152], shape: [2])], state: state)
                == .invalidValue(function: "prefill", input: "tokens", reason: "token id 49152 is outside the vocabulary of 49152"))
        #expect(error(decoder, "prefill", ["tokens": .int32([1, 2, 3, 4, 5], shape: [5])], state: state)
                == .invalidValue(function: "prefill", input: "tokens", reason: "5 positions exceed the state's capacity of 4"))
        #expect((state as? DecoderState)?.position == 0, "nothing ran")
    }
}
